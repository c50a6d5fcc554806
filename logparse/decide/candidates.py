"""What can be the root cause, and which candidates are echoes of which.

Candidates: every cause finding of the catalog, every exception that ended a traceback and that no
entry recognises (`unknown`), and every bare failure line with a failure phrase. The run's story sets
some aside (`Aside`): a failure the job survived (training went on to a later step, or, in a job with no
training loop, it went on working: requests answered, batches run; or the run completed after it), one
that recurred while the job went on, one printed after the run completed (its teardown, unless it is a
failure of the run's own work), and one printed after the job was stopped from outside. A candidate
explained by another (the catalog's `explains`; for an unrecognised exception, patterns/inference.yaml
and what the catalog's entries of its fallback category explain) and not clearly earlier than it is an
echo (`EchoIndex`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import regex

from logparse.decide.ending import Interruption, is_interrupt_exception
from logparse.observe.bare_lines import BareLine
from logparse.observe.evidence import (
    MAX_MESSAGE_LINES,
    FailureEvidence,
    context_messages,
    evidence_of_traceback,
    origin_frames,
)
from logparse.observe.hits import FindingCollector, FindingGroup, Hit
from logparse.observe.progression import Progression
from logparse.observe.tracebacks import FRAME_RE, TB_START, Traceback
from logparse.read.normalize import Record
from patterns import Catalog, Role
from patterns.inference import InferenceRules

if TYPE_CHECKING:  # imported where a failure no entry names is classified: most scans need no fallback rule
    from logparse.decide.classify import Classification

# stages that do not show a job went on after an error line: its teardown, or a restart (a new attempt)
WENT_ON_IGNORED = frozenset({"shutdown", "launch"})
KIND_RANK = {
    "exception": 0,
    "phrase": 0,
    "cut-traceback": 1,
    "marker": 1,
    "error-prefix": 2,
    "error-record": 3,
}


UNKNOWN_PRIORITY = 10


BARE_PRIORITY = 5  # a failure line without a traceback: below every traceback and catalog cause


IGNORED_EXCEPTIONS = {"KeyboardInterrupt", "SystemExit", "GeneratorExit", "StopIteration"}
RECURRENCE_MESSAGE_CHARS = 80  # of an exception's message, digits masked, that say two are the same error
_DIGITS = regex.compile(r"\d+")


@dataclass(frozen=True)
class Aside:
    """Why a candidate is not the run's failure, as a report says it."""

    kind: str  # survived | recurring | caught | teardown | interrupted
    why: str  # "training went on to step 8 after it", ...


@dataclass
class Choice:
    """A candidate for the root cause: a catalog hit, an unrecognised exception or a bare line."""

    kind: str  # cause | unknown | wrapper | bare | symptom
    priority: int
    seq: int
    time: float | None = None
    hit: Hit | None = None
    traceback: Traceback | None = None
    group: FindingGroup | None = None
    bare: BareLine | None = None
    explained_by: Choice | None = None
    aside: Aside | None = None  # the run's story says it is not the run's failure (see the module doc)
    # what the fallback rules (patterns/fallback.yaml) say of a failure no entry names
    classification: Classification | None = None

    @property
    def category(self) -> str:
        if self.classification is not None:
            return self.classification.category
        return self.hit.category if self.hit is not None else "unknown"

    @property
    def entry_id(self) -> str:
        return self.hit.entry.id if self.hit is not None else "unknown"

    @property
    def record(self) -> Record:
        if self.hit is not None:
            return self.hit.record
        return self.bare.record if self.bare is not None else self.traceback.final.record

    def evidence(self) -> FailureEvidence | None:
        """What the fallback rules read: the exception (unwrapped), its frames and its chain."""
        if self.bare is not None:
            return self.bare.evidence()
        tb = self.traceback if self.traceback is not None else (self.hit.traceback if self.hit else None)
        if tb is not None and tb.final is not None:
            ev = evidence_of_traceback(tb)
            if self.hit is not None and "exc" in self.hit.groups and self.hit.groups["exc"]:
                # a wrapper that names the class it carries (RayTaskError(X), terminate ... 'X')
                inner = ev.exc_type or ""
                if "RayTaskError" in inner or inner == "":
                    ev = FailureEvidence(self.hit.groups["exc"], ev.message, ev.frames, ev.chain, ev.context)
            return ev
        if self.hit is not None:
            exc = self.hit.groups.get("exc")
            extra = " ".join(r.message.strip() for r in self.hit.after[:MAX_MESSAGE_LINES])
            return FailureEvidence(
                exc,
                f"{self.hit.record.message} {extra}".strip(),
                origin_frames(self.hit.record.origin.actor),
                (),
                context_messages(self.hit.context),
            )
        return None

    def explains(self, other: Choice, rules: InferenceRules, catalog_explains=None) -> bool:
        if other is self or not self.explains_kind(other, rules, catalog_explains):
            return False
        if other.kind in ("wrapper", "symptom"):
            return True
        # a cause cannot explain what clearly happened before it
        return explains_in_time(self.time, other.time, rules.chronology_tolerance_s)

    def explains_kind(self, other: Choice, rules: InferenceRules, catalog_explains=None) -> bool:
        """Would this explain `other`, whatever their times? Depends on nothing but the kind, the entry
        and the category of each (`choose` indexes candidates by those: see EchoIndex).
        `catalog_explains`: category -> what the catalog's cause entries of that category explain."""
        if other.kind in ("wrapper", "symptom"):
            return self.kind in ("cause", "unknown", "bare")
        if self.kind == "cause":
            listed = self.hit.entry.explains
            return other.category in listed or other.entry_id in listed
        if self.kind in ("unknown", "bare"):
            # an unrecognised exception explains the generic echoes, and, once the fallback rules name
            # its category, what the catalog's entries of that category explain
            listed = (
                catalog_explains(self.category) if catalog_explains and self.category != "unknown" else ()
            )
            return other.kind == "cause" and (
                other.category in rules.unknown_exception_explains
                or other.category in listed
                or other.entry_id in listed
            )
        return False

    @property
    def kind_key(self) -> tuple[str, str, str]:
        """What explains_kind depends on."""
        return (self.kind, self.entry_id, self.category)


def explains_in_time(cause: float | None, echo: float | None, tolerance: float) -> bool:
    """The time rule of Choice.explains: not when the echo clearly happened before the cause."""
    return cause is None or echo is None or cause <= echo + tolerance


class EchoIndex:
    """`explained_by` for every candidate without comparing each with every other (a log dense in
    errors has thousands of candidates): candidates are grouped by Choice.kind_key, groups are related
    by Choice.explains_kind once, and within a group the explainer allowed by the time rule that comes
    first in the candidate order is found by binary search over the group's times. The result is the
    pairwise loop's: the first candidate, in order, that explains `c` and that `c` does not explain."""

    def __init__(self, live: list[Choice], rules: InferenceRules, catalog_explains=None):
        self.live = live
        self.rules = rules
        self.tol = rules.chronology_tolerance_s
        members: dict[tuple, list[int]] = {}
        for i, c in enumerate(live):
            members.setdefault(c.kind_key, []).append(i)
        self.keys = list(members)
        reps = {k: live[v[0]] for k, v in members.items()}
        # per group: the untimed members' first two indices; the timed ones sorted by time, with the
        # two smallest indices of each prefix
        self.untimed: dict[tuple, list[int]] = {}
        self.times: dict[tuple, list[float]] = {}
        self.best: dict[tuple, list[tuple[int, int]]] = {}
        for k, idx in members.items():
            self.untimed[k] = [i for i in idx if live[i].time is None][:2]
            timed = sorted((live[i].time, i) for i in idx if live[i].time is not None)
            self.times[k] = [t for t, _ in timed]
            best, a, b = [], -1, -1
            for _, i in timed:
                if a < 0 or i < a:
                    a, b = i, a
                elif b < 0 or i < b:
                    b = i
                best.append((a, b))
            self.best[k] = best
        # for each group: the groups that may explain it, and whether it explains them back
        self.explainers: dict[tuple, list[tuple[tuple, bool]]] = {
            k: [
                (e, reps[k].explains_kind(reps[e], rules, catalog_explains))
                for e in self.keys
                if reps[e].explains_kind(reps[k], rules, catalog_explains)
            ]
            for k in self.keys
        }

    def explained_by(self, i: int) -> Choice | None:
        c = self.live[i]
        found = -1
        for k, mutual in self.explainers[c.kind_key]:
            j = self._first(k, i, c.time, mutual)
            if j >= 0 and (found < 0 or j < found):
                found = j
        return self.live[found] if found >= 0 else None

    def _first(self, k: tuple, i: int, t: float | None, mutual: bool) -> int:
        """The first member (by index) of group `k`, not `i`, that explains a candidate at time `t` in
        time and, when the groups explain each other, is not explained back by it in time."""
        times, best, tol = self.times[k], self.best[k], self.tol
        if mutual:
            # both ways by kind: only an explainer clearly earlier (both timed) is not explained back
            if t is None:
                return -1
            n = _count_while(times, lambda o: not explains_in_time(t, o, tol))
            pool: list[int] = list(best[n - 1]) if n else []
        elif t is None:
            pool = self.untimed[k] + (list(best[-1]) if best else [])
        else:
            n = _count_while(times, lambda o: explains_in_time(o, t, tol))
            pool = self.untimed[k] + (list(best[n - 1]) if n else [])
        return min((j for j in pool if j >= 0 and j != i), default=-1)


def _count_while(times: list[float], holds) -> int:
    """How many of the sorted `times` from the start satisfy `holds` (true on a prefix)."""
    lo, hi = 0, len(times)
    while lo < hi:
        mid = (lo + hi) // 2
        if holds(times[mid]):
            lo = mid + 1
        else:
            hi = mid
    return lo


def category_explains(catalog: Catalog):
    """category -> what the catalog's cause entries of that category explain (ids and categories)."""
    table: dict[str, set[str]] = {}
    for e in catalog.entries:
        if e.role == Role.CAUSE and e.explains:
            table.setdefault(e.category, set()).update(e.explains)
    return lambda category: table.get(category, ())


def chrono_cmp(a: Choice, b: Choice, tolerance: float) -> int:
    """Order by timestamp where both carry one and they differ by more than the tolerance,
    else by position in the (time-merged) input."""
    if a.time is not None and b.time is not None and abs(a.time - b.time) > tolerance:
        return -1 if a.time < b.time else 1
    return (a.seq > b.seq) - (a.seq < b.seq)


def candidates_of(
    collector: FindingCollector,
    groups: list[FindingGroup],
    tracebacks: list[Traceback],
    progress: Progression,
    stop: Interruption | None = None,
) -> list[Choice]:
    """Every cause finding and every exception no entry recognises; those the run's story sets aside
    (survived, recurring, after the job was stopped from outside) are marked."""
    out: list[Choice] = []
    for g in groups:
        if g.entry.role == Role.CAUSE:
            out.append(Choice("cause", g.entry.priority, g.first.seq, g.first.time, hit=g.first, group=g))
    for tb in tracebacks:
        exc = tb.final
        if exc is None or exc.short_type in IGNORED_EXCEPTIONS or is_interrupt_exception(tb):
            continue  # (a signal's exception is how the job ended: decide.ending)
        if exc.record.seq in collector.hit_seqs:
            continue
        out.append(Choice("unknown", UNKNOWN_PRIORITY, exc.record.seq, exc.record.origin.time, traceback=tb))
    for c in out:
        c.aside = survival(c, progress)
    mark_recurring(out, progress)
    if stop is not None:
        for c in out:
            if c.aside is None and c.seq >= stop.seq:
                c.aside = after_stop(stop)
    return out


def after_stop(stop: Interruption) -> Aside:
    return Aside(
        "interrupted", f"printed after the job was stopped from outside ({stop.signal}): how it ended"
    )


def survival(c: Choice, progress: Progression) -> Aside | None:
    """Did the job go on past the candidate's LAST occurrence (a loss that stays NaN did not pass)? In
    a job with a training loop, by a later step; in one without (a server), by work after it; in either,
    by completing."""
    latest = c.group.last if c.group is not None and c.group.last is not None else c.hit
    at = latest.step if latest is not None else None
    seq = latest.seq if latest is not None else c.seq
    last = progress.last_step_line
    if last is not None and last.seq > seq and (at is None or last.step > at):
        return Aside("survived", f"training went on to step {last.step} after it")
    if progress.completed_after(seq) and not progress.is_step_line(seq):
        return Aside("survived", "the run completed after it")
    if not progress.has_loop:
        work = progress.work_after(seq)
        if work:
            return Aside(
                "survived", f"the job went on working after it ({work} request(s) answered or batch(es) run)"
            )
    return None


def mark_recurring(out: list[Choice], progress: Progression) -> None:
    """A failure that keeps recurring while the job goes on (progress between its first and its last
    occurrence) is one the job lives with, never the failure that ended it: every occurrence is set
    aside. Not a failure on a step line itself (`loss: nan` on every step is the run's state)."""
    same: dict[tuple, list[Choice]] = {}
    for c in out:
        if c.traceback is not None:  # (the occurrences training went on past are members too)
            same.setdefault(recurrence_key(c.traceback), []).append(c)
        elif c.aside is None and c.kind == "cause":
            g = c.group
            if (
                g.last is not None
                and g.count > 1
                and not progress.is_step_line(g.last.seq)
                and progress.went_on_between(g.first.seq, g.last.seq, ignore=WENT_ON_IGNORED)
            ):
                c.aside = _recurring(g.count)
    for members in same.values():
        if len(members) > 1 and progress.went_on_between(members[0].seq, members[-1].seq, WENT_ON_IGNORED):
            for c in members:
                if c.aside is None:
                    c.aside = _recurring(len(members))


def _recurring(count: int) -> Aside:
    return Aside("recurring", f"it recurred {count} times while the job went on")


def recurrence_key(tb: Traceback) -> tuple:
    """What makes two tracebacks the same error: its type, its message with the numbers masked, and the
    innermost frame it was raised in."""
    exc = tb.final
    message = _DIGITS.sub("0", exc.message[:RECURRENCE_MESSAGE_CHARS]) if exc is not None else ""
    where = (tb.frames[-1].file, tb.frames[-1].function) if tb.frames else None
    return (exc.type if exc is not None else None, message, where)


def caught_intro(tb: Traceback, rules: InferenceRules) -> tuple[str, int] | None:
    """If the job caught and logged this traceback's exception (logging's `logger.exception(...)`, a
    server's request handler), so that it did not end its process there: where the log record that
    introduced it is (source, line; None: not caught, or nothing says so). That record is the job's
    own, at an error or warning level (Hydra's and the launchers' reports of a death carry none), and
    the traceback's outermost frame is not the program's entry (patterns/inference.yaml)."""
    if not tb.frames or tb.task or tb.torchrun_failures:
        return None
    if tb.frames[0].function in rules.entry_functions:
        return None  # (it reached the top of the program: nothing caught it)
    first = tb
    while first.chained_from is not None:
        first = first.chained_from
    context = list(first.context)
    if not context:
        return None
    intro = context[-1]  # (read back from its block: its line, not its seq, says which it is)
    message = intro.message.strip()
    if intro.origin.level in rules.logged_levels and message and not message.endswith(TB_START):
        return (intro.line.source, intro.line.number)
    return None


def caught_by_job(c: Choice, rules: InferenceRules) -> bool:
    """Did the job catch and log this exception no entry names (caught_intro)? (A catalog cause keeps
    its rank wherever it was logged: an engine logs its fatal error before it dies.)"""
    if c.kind != "unknown" and c.bare is None:
        return False
    tb = c.traceback if c.traceback is not None else c.bare.traceback
    return tb is not None and caught_intro(tb, rules) is not None


def is_teardown(c: Choice, progress: Progression, categories: frozenset[str]) -> bool:
    """Was the candidate printed after the run completed, as part of its teardown: of a category that
    teardown prints (patterns/inference.yaml), or an exception no rule names that none of the job's own
    frames raised? A failure of the run's own work there (the final checkpoint write, a results dump)
    is none."""
    if not progress.completed_before(c.seq):
        return False
    if c.category in categories:
        return True
    tb = c.traceback if c.traceback is not None else (c.hit.traceback if c.hit is not None else None)
    return c.category == "unknown" and (tb is None or tb.innermost_user_frame() is None)


def classify_choice(c: Choice, catalog: Catalog | None, nearest: bool = False) -> None:
    """Name the category of a failure no entry names (an unrecognised exception, a bare line, a
    wrapper whose own category is unknown) from its evidence: patterns/fallback.yaml."""
    if c.classification is not None or c.kind in ("cause", "symptom"):
        return
    if c.kind == "wrapper" and c.hit is not None and c.hit.category != "unknown":
        return
    from logparse.decide.classify import Classification, classify

    evidence = c.evidence()
    if evidence is not None:
        c.classification = classify(evidence, catalog if nearest else None)
    marker = c.bare.marker if c.bare is not None else None
    if marker is not None and (c.classification is None or c.classification.basis == "nearest"):
        # the program that printed it tells what kind of failure this text is (Hydra: its config)
        c.classification = Classification(
            marker.category,
            "marker",
            marker.id,
            "it was printed alone, with no type or traceback, just before the marker line",
        )


def live_bare_lines(
    kept: list[BareLine], tracebacks: list[Traceback], stages: Progression, stop: Interruption | None = None
) -> list[BareLine]:
    """Bare failure lines, and tracebacks cut before their exception line, after which the job did
    not go on (no later step line, progress bar, work, completion marker, or a stage it had not
    reached) and that did not come after the run completed or after it was stopped from outside."""
    cut = [
        BareLine(cut_line(tb), "cut-traceback", None, "", None, tb.context, traceback=tb)
        for tb in tracebacks
        if tb.final is None and tb.frames and tb.start.message.strip().endswith(TB_START)
    ]
    # (after a completion marker, error lines are the teardown's: the run itself succeeded; but a
    # completion marker after the last step does not make that step's own `loss: nan` a success)
    live = [
        b
        for b in kept + cut
        if not stages.went_on_after(
            b.seq, ignore=WENT_ON_IGNORED, completion=not (b.kind == "phrase" and stages.is_step_line(b.seq))
        )
        and not stages.completed_before(b.seq)
        and (stop is None or b.seq < stop.seq)
    ]
    return repeated_to_the_end(kept, live, stages) + live


def repeated_to_the_end(kept: list[BareLine], live: list[BareLine], stages: Progression) -> list[BareLine]:
    """Failure phrases on progress lines that repeat to the end of the run (`loss = nan` on every step
    from one step on): the first of such a run of lines, and the lines after it, are failures too,
    although each step line after them shows the job went on. A phrase line belongs to the run when
    the only progress between it and the next phrase line of its source is that next line itself."""
    failing = {id(b) for b in live}  # grows backwards along each run
    following: dict[str, BareLine] = {}
    out: list[BareLine] = []
    for b in sorted((b for b in kept if b.kind == "phrase"), key=lambda b: b.seq, reverse=True):
        source = b.record.line.source
        nxt = following.get(source)
        following[source] = b
        if id(b) in failing or nxt is None or id(nxt) not in failing:
            continue
        if not stages.went_on_between(b.seq, nxt.seq, ignore=WENT_ON_IGNORED):
            failing.add(id(b))
            out.append(b)
    return out[::-1]


def cut_line(tb: Traceback) -> Record:
    """The line that stands for a traceback cut before its exception: its last line (the source line
    the innermost frame ran), or its header when that is a `File "...", line N, in f` frame, which
    names where, never what failed."""
    last = tb.all_records()[-1]
    return tb.start if FRAME_RE.match(last.message) else last
