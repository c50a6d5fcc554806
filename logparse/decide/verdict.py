"""From findings to a verdict: the root cause, its evidence, the symptoms, and why.

v0 rules (issue 2): the highest-priority `cause` finding wins, the earliest among equals; wrappers
and symptoms never win while a cause exists. A traceback whose final exception no catalog entry
recognises is an `unknown` cause candidate (below every catalog cause). With no cause at all, the
best wrapper decides its own category (TAXONOMY's wrapper table, via `category_from`), then the best
symptom; both with low confidence.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from logparse.decide.classify import KIND_RANK, Classification, classify, nearest_entries
from logparse.model import Basis, Candidate, Evidence, FindingView, Fix, RootCause, TracebackView
from logparse.observe.bare_lines import BareLine
from logparse.observe.evidence import (
    MAX_MESSAGE_LINES,
    FailureEvidence,
    context_messages,
    evidence_of_traceback,
    origin_frames,
)
from logparse.observe.hits import FindingCollector, FindingGroup, Hit, merge_similar
from logparse.observe.tracebacks import HEAD_FRAMES, Traceback, frame_kind
from logparse.read.normalize import Record
from patterns import Catalog, Entry, Role
from patterns.fallback import fallback_rules
from patterns.inference import InferenceRules, inference_rules
from patterns.stages import StageSource, stage_of_frames, stage_of_message, stage_of_task

MAX_EVIDENCE = 60
CONTEXT_LINES = 5
UNKNOWN_PRIORITY = 10
BARE_PRIORITY = 5  # a failure line without a traceback: below every traceback and catalog cause
MAX_STAGE_MESSAGE_LINES = 20  # continuation lines of an error searched for task names (Ray's OOM table)
IGNORED_EXCEPTIONS = {"KeyboardInterrupt", "SystemExit", "GeneratorExit", "StopIteration"}

UNKNOWN_FIX = Fix(
    summary="No catalog entry recognises this error; its line and traceback are shown as evidence.",
    why="verl-logscan names the exception that ended the first failing process when it knows no better.",
    fix=(
        "Read the error line and its traceback, when it has one: the innermost frame in your code or in verl "
        "is where to start.",
        (
            "If this failure is a known kind, add a catalog entry (see README, 'Adding an entry') "
            "so the next scan names it."
        ),
    ),
    references=("https://github.com/verl-project/verl/issues",),
)


@dataclass
class Choice:
    kind: str  # cause | unknown | wrapper | bare | symptom
    priority: int
    seq: int
    time: float | None = None
    hit: Hit | None = None
    traceback: Traceback | None = None
    group: FindingGroup | None = None
    bare: BareLine | None = None
    explained_by: Choice | None = None
    survived_to: int | None = None  # training went on to this step after it
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


def evidence_of(record: Record) -> Evidence:
    return Evidence(record.line.source, record.line.number, record.line.text)


def build_evidence(
    error: Record, tb: Traceback | None, context: list[Record], after: list[Record] | None = None
) -> tuple[Evidence, ...]:
    records: list[Record] = list(context[-CONTEXT_LINES:])
    if tb is not None:
        body = tb.all_records()
        room = MAX_EVIDENCE - len(records)
        if len(body) > room:
            head = body[:10]
            tail = body[-(room - len(head)) :]
            body = head + tail
        records.extend(body)
    if all(r is not error for r in records):
        records.append(error)
        records.extend(after or ())
        records = records[-MAX_EVIDENCE:]
    seen = set()
    out = []
    for r in records:
        key = (r.line.source, r.line.number)
        if key not in seen:
            seen.add(key)
            out.append(evidence_of(r))
    return tuple(out)


def traceback_view(tb: Traceback | None) -> TracebackView | None:
    if tb is None or tb.final is None:
        return None
    user = tb.innermost_user_frame()
    chain = []
    prev = tb.chained_from
    while prev is not None and len(chain) < 5:
        if prev.final is not None:
            chain.append(f"{prev.final.type}: {prev.final.message}".rstrip(": "))
        prev = prev.chained_from
    return TracebackView(
        exception_type=tb.final.type,
        exception_message=tb.final.message,
        frames=tuple((f.file, f.line, f.function) for f in tb.frames),
        innermost_user_frame=(user.file, user.line, user.function) if user else None,
        task=tb.task,
        chain=tuple(reversed(chain)),
        frames_cut=tb.frames_cut,
        frames_cut_after=HEAD_FRAMES if tb.frames_cut else 0,
        frame_kinds=tuple(frame_kind(f.file).value for f in tb.frames),
    )


def fix_of(entry: Entry) -> Fix:
    r = entry.remediation
    return Fix(r.summary, r.why, r.fix, r.references)


def finding_view(
    group: FindingGroup, category: str | None = None, explained_by: str | None = None
) -> FindingView:
    return FindingView(
        explained_by=explained_by,
        id=group.entry.id,
        category=category or group.first.category,
        title=group.entry.title,
        role=group.entry.role.value,
        count=group.count,
        ranks=tuple(sorted(group.ranks)),
        nodes=tuple(sorted(group.nodes)),
        first=evidence_of(group.first.record),
    )


def similar_entries(catalog: Catalog, evidence: FailureEvidence | None, limit: int = 3) -> tuple[str, ...]:
    """The catalog entries most like an unrecognised failure (its message against their examples)."""
    if evidence is None:
        return ()
    return tuple(n.entry_id for n in nearest_entries(evidence, catalog, limit=limit))


def category_explains(catalog: Catalog):
    """category -> what the catalog's cause entries of that category explain (ids and categories)."""
    table: dict[str, set[str]] = {}
    for e in catalog.entries:
        if e.role == Role.CAUSE and e.explains:
            table.setdefault(e.category, set()).update(e.explains)
    return lambda category: table.get(category, ())


def stage_for(
    entry: Entry | None,
    tb: Traceback | None,
    seq: int = 0,
    tracebacks: list[Traceback] | None = None,
    messages: tuple[str, ...] = (),
) -> tuple[str | None, StageSource | None]:
    """The stage of a failure and where it came from, in order of trust: the Ray task of the
    failure's own traceback, then its frames (patterns/stages.yaml frame_stages); the entry's stage
    hint; the Ray task or frames of the first traceback reported after the failure (the wrapper that
    carried it); a task named in its message (Ray's memory monitor names the task it killed). The
    scanner then tries the collective's sequence number, the last stage marker, and the category."""
    if tb is not None and not tb.torchrun_failures:
        # (a ChildFailedError's frames are the launcher's, not those of the rank that failed)
        stage = stage_of_task(tb.task)
        if stage:
            return stage, StageSource.RAY_TASK
        stage = stage_of_frames([(f.file, f.function, f.code) for f in tb.frames])
        if stage:
            return stage, StageSource.FRAMES
    if entry is not None and entry.stage:
        return entry.stage, StageSource.ENTRY
    for other in tracebacks or ():
        # the first traceback reported after the failure carried it: its task or frames tell where
        if other.start.seq >= seq and not other.torchrun_failures:
            stage = stage_of_task(other.task) or stage_of_frames(
                [(f.file, f.function, f.code) for f in other.frames]
            )
            if stage:
                return stage, StageSource.TRACEBACK
    stage = stage_of_message(messages)
    if stage:
        return stage, StageSource.MEMORY_MONITOR
    return None, None


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
    last_step: tuple[int, int] | None,
) -> list[Choice]:
    """Every cause finding and every exception no entry recognises; survivors are marked."""
    out: list[Choice] = []
    for g in groups:
        if g.entry.role == Role.CAUSE:
            out.append(Choice("cause", g.entry.priority, g.first.seq, g.first.time, hit=g.first, group=g))
    for tb in tracebacks:
        exc = tb.final
        if exc is None or exc.short_type in IGNORED_EXCEPTIONS:
            continue
        if exc.record.seq in collector.hit_seqs:
            continue
        out.append(Choice("unknown", UNKNOWN_PRIORITY, exc.record.seq, exc.record.origin.time, traceback=tb))
    if last_step is not None:
        step_seq, step = last_step
        for c in out:
            # training went on past the finding's LAST occurrence (a loss that stays NaN did not pass)
            latest = c.group.last if c.group is not None and c.group.last is not None else c.hit
            at = latest.step if latest is not None else None
            seq = latest.seq if latest is not None else c.seq
            if step_seq > seq and (at is None or step > at):
                c.survived_to = step
    return out


def classify_choice(c: Choice, catalog: Catalog | None, nearest: bool = False) -> None:
    """Name the category of a failure no entry names (an unrecognised exception, a bare line, a
    wrapper whose own category is unknown) from its evidence: patterns/fallback.yaml."""
    if c.classification is not None or c.kind in ("cause", "symptom"):
        return
    if c.kind == "wrapper" and c.hit is not None and c.hit.category != "unknown":
        return
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


def choose(
    collector: FindingCollector,
    groups: list[FindingGroup],
    tracebacks: list[Traceback],
    last_step: tuple[int, int] | None = None,
    bare_lines: list[BareLine] | tuple = (),
    catalog: Catalog | None = None,
) -> tuple[Choice | None, list[Choice]]:
    """The verdict and every candidate considered, best first.

    1. Candidates: causes and unrecognised exceptions (their category named by the fallback rules);
       one after which training went on is dropped.
    2. A candidate explained by another (the catalog's `explains`; for an unrecognised exception,
       inference.yaml and what the catalog's entries of its fallback category explain), and not
       clearly earlier than it, is an echo.
    3. Among the rest: the most specific priority band first, then the earliest, then priority.
    4. With no cause at all: wrappers whose category is known (from the catalog, or from the class
       and traceback they carry), then bare failure lines, then the other wrappers, then symptoms.
    """
    rules = inference_rules()
    tol = rules.chronology_tolerance_s
    cands = candidates_of(collector, groups, tracebacks, last_step)
    # a bare line with a failure phrase (a Ray OOM kill, a segfault, a NaN loss) competes with the
    # unrecognised exceptions: what it names often explains them (a driver's ActorDiedError)
    phrased = [
        Choice("bare", BARE_PRIORITY, b.seq, b.record.origin.time, bare=b)
        for b in bare_lines
        if b.kind == "phrase"
    ]
    cands += phrased
    bare_lines = [b for b in bare_lines if b.kind != "phrase"]
    live = [c for c in cands if c.survived_to is None]
    for c in live:
        classify_choice(c, catalog)
    echoes = EchoIndex(live, rules, category_explains(catalog) if catalog is not None else None)
    for i, c in enumerate(live):
        c.explained_by = echoes.explained_by(i)
    roots = [c for c in live if c.explained_by is None] or live

    def order(a: Choice, b: Choice) -> int:
        ba, bb = rules.band(a.priority), rules.band(b.priority)
        if ba != bb:
            return bb - ba
        c = chrono_cmp(a, b, tol)
        if c:
            return c
        return b.priority - a.priority

    roots.sort(key=functools.cmp_to_key(order))
    if roots:
        rooted = {id(c) for c in roots}  # (identity: `in` compares the dataclasses field by field)
        rest = [c for c in live if id(c) not in rooted] + [c for c in cands if c.survived_to is not None]
        return roots[0], roots + rest

    def in_first_observed(c: Choice) -> bool:
        """A line inside torchrun's "Root Cause (first observed failure)" block: evidence, ranked first
        among wrappers (not a verdict: any cause beats it)."""
        tb = c.hit.traceback
        f = tb.torchrun_failure_at(c.hit.seq) if tb is not None else None
        return f is not None and f.section == "root"

    survivors = [c for c in cands if c.survived_to is not None]
    wrappers = [
        Choice("wrapper", g.entry.priority, g.first.seq, g.first.time, hit=g.first, group=g)
        for g in groups
        if g.entry.role == Role.WRAPPER
    ]
    for w in wrappers:
        classify_choice(w, catalog)
    wrappers.sort(key=lambda c: (not in_first_observed(c), -c.priority, c.seq))
    bare = [Choice("bare", BARE_PRIORITY, b.seq, b.record.origin.time, bare=b) for b in bare_lines]
    for b in bare:
        classify_choice(b, catalog)
    bare.sort(key=lambda c: (KIND_RANK.get(c.bare.kind, 3), c.seq))
    symptoms = [
        Choice("symptom", g.entry.priority, g.first.seq, g.first.time, hit=g.first, group=g)
        for g in groups
        if g.entry.role == Role.SYMPTOM
    ]
    symptoms.sort(key=lambda c: (-c.priority, c.seq))
    pool = (
        [w for w in wrappers if w.category != "unknown"]
        + bare
        + [w for w in wrappers if w.category == "unknown"]
        + symptoms
    )
    if pool:
        return pool[0], pool + survivors
    return None, survivors


BASIS_CONFIDENCE = {
    "phrase": 0.0,
    "type": 0.0,
    "frame": -0.05,
    "marker": -0.05,
    "weak-phrase": -0.1,
    "weak-type": -0.1,
    "nearest": -0.15,
}


def confidence_for(choice: Choice, choices: list[Choice]) -> float:
    rules = inference_rules()
    explained = sum(1 for c in choices if c.explained_by is choice)
    rivals = sum(
        1
        for c in choices
        if c is not choice
        and c.explained_by is None
        and c.survived_to is None
        and c.kind in ("cause", "unknown")
        and rules.band(c.priority) == rules.band(choice.priority)
    )
    if choice.kind == "cause":
        base = 0.8 if choice.hit.entry.severity.value == "fatal" else 0.7
        base += 0.1 if explained else 0.0
        base += 0.05 if choice.hit.traceback is not None else 0.0
    elif choice.kind == "unknown":
        base = 0.45 + (0.1 if explained else 0.0)
    elif choice.kind == "bare":
        base = 0.35
    elif choice.kind == "wrapper":
        base = 0.35 if choice.category != "unknown" else 0.25
    else:
        base = 0.2
    if choice.classification is not None:
        # a category from the evidence, not from an entry: as sure as its basis
        base += BASIS_CONFIDENCE[choice.classification.basis]
    base -= 0.15 * min(rivals, 2)
    return round(max(0.1, min(base, 0.97)), 2)


def describe(choice: Choice) -> str:
    if choice.hit is not None:
        r = choice.hit.record
        return f"{choice.hit.entry.id} at {r.line.source}:{r.line.number}"
    if choice.bare is not None:
        r = choice.bare.record
        what = choice.bare.exc_type or "error line"
        return f"unrecognised {what} at {r.line.source}:{r.line.number}"
    exc = choice.traceback.final
    return f"unrecognised {exc.type} at {exc.record.line.source}:{exc.record.line.number}"


def why_lost(winner: Choice, other: Choice) -> str:
    rules = inference_rules()
    if other.survived_to is not None:
        return f"training went on to step {other.survived_to} after it"
    if other.explained_by is not None:
        return f"an echo: explained by {describe(other.explained_by)}"
    if other.kind in ("wrapper", "symptom") and winner.kind in ("cause", "unknown"):
        return f"a {other.kind}, never the root cause while a cause is visible"
    if winner.kind in ("wrapper", "bare") and other.kind in ("wrapper", "bare", "symptom"):
        if other.kind == "symptom":
            return "a symptom, ranked after wrappers and failure lines"
        if winner.category != "unknown" and other.category == "unknown":
            return "its category is not known"
        if other.kind == "bare" and winner.kind == "wrapper":
            return "a failure line without a traceback, ranked after a wrapper whose category is known"
        if other.kind == "wrapper" and winner.kind == "bare":
            return "a wrapper whose category is not known, ranked after failure lines"
    if rules.band(other.priority) < rules.band(winner.priority):
        return f"less specific (priority {other.priority} < {winner.priority})"
    if chrono_cmp(winner, other, rules.chronology_tolerance_s) < 0:
        if (
            winner.time is not None
            and other.time is not None
            and other.time - winner.time > rules.chronology_tolerance_s
        ):
            return f"happened later ({other.time - winner.time:.0f} s after)"
        return "seen later"
    return f"lower priority ({other.priority} < {winner.priority})"


def _where(rec: Record, tb: Traceback | None) -> dict:
    """rank/local_rank/pid/actor/node of the failing process: the line's prefixes, else the
    traceback's first line, else (for a RayTaskError seen in the driver) the worker in its header."""
    o = rec.origin
    start = tb.start.origin if tb is not None else o
    rank = o.rank if o.rank is not None else start.rank
    if rank is None and tb is not None:
        # the header lacks a `[rankN]` prefix but another line of the same traceback has one
        rank = next((r.origin.rank for r in tb.all_records() if r.origin.rank is not None), None)
    out = {
        "rank": rank,
        "local_rank": o.local_rank if o.local_rank is not None else start.local_rank,
        "pid": o.pid if o.pid is not None else start.pid,
        "actor": o.actor or start.actor,
        "node": o.node or start.node,
    }
    failure = tb.torchrun_failure_at(rec.seq) if tb is not None else None
    if failure is not None:
        # a line of torchrun's ChildFailedError summary: the block names the failed rank
        out.update(
            rank=failure.rank,
            local_rank=failure.local_rank,
            pid=failure.pid,
            node=failure.host or out["node"],
            actor=None,
        )
    if tb is not None and tb.task and tb.task_pid is not None:
        # the error was raised in the Ray worker named in the header, wherever it was printed
        out["pid"] = tb.task_pid
        out["actor"] = tb.task.split(".", 1)[0]
        out["node"] = tb.task_node or out["node"]
    return out


def _explanation(choice: Choice, choices: list[Choice], echoes: int) -> list[str]:
    rules = inference_rules()
    lines = []
    where = choice.record.origin.where()
    if choice.kind == "cause":
        lines.append(
            f"Chosen: {describe(choice)}{' on ' + where if where else ''}: a catalog cause "
            f"(priority {choice.priority}); of the causes that nothing else explains, it is in the most "
            f"specific priority band and the earliest."
        )
    elif choice.kind == "unknown":
        lines.append(
            f"Chosen: {describe(choice)}{' on ' + where if where else ''}: no catalog entry names it; it "
            f"is the exception that ended the first failing process."
        )
    elif choice.kind == "wrapper":
        lines.append(
            f"Chosen: {describe(choice)}: only wrappers were found; the wrapper's own category "
            f"({choice.category}) decides, with low confidence."
        )
    elif choice.kind == "bare":
        lines.append(
            f"Chosen: {describe(choice)}{' on ' + where if where else ''}: no catalog cause and no "
            f"traceback; this line reads as a failure ({choice.bare.kind}) and nothing after it shows the "
            f"job went on (no later step, progress bar, completion or new stage)."
        )
    else:
        lines.append(
            f"Chosen: {describe(choice)}: only symptoms were found; their category is reported with "
            f"low confidence."
        )
    if choice.classification is not None:
        lines.append(choice.classification.sentence())
    elif choice.kind in ("unknown", "bare") or (choice.kind == "wrapper" and choice.category == "unknown"):
        lines.append(
            "Category unknown: no catalog entry, fallback rule (patterns/fallback.yaml) or "
            "sufficiently similar known entry names this error; the evidence is shown as it is."
        )
    explained = [c for c in choices if c.explained_by is choice]
    if explained:
        cats = sorted({c.category for c in explained})
        lines.append(f"It explains {len(explained)} other candidate(s) as echoes ({', '.join(cats)}).")
    if echoes:
        lines.append(
            f"{echoes} wrapper/symptom finding(s) are echoes of it (wrappers and symptoms never win "
            f"while a cause is visible)."
        )
    for other in choices[1:8]:
        lines.append(f"Beat {describe(other)}: {why_lost(choice, other)}.")
    _ = rules
    return lines


def basis_of(choice: Choice) -> Basis:
    """What decided the category: a catalog entry, or a fallback rule (phrase, type, frame, nearest)."""
    c = choice.classification
    if c is not None:
        return Basis(c.basis, c.rule, c.detail)
    if choice.hit is not None:
        return Basis("entry", choice.hit.entry.id, f"catalog entry {choice.hit.entry.id}")
    return Basis("none", None, "no entry or fallback rule names it")


def fix_for_category(choice: Choice) -> Fix:
    """The remediation of a failure no entry names: its category's (patterns/fallback.yaml), else
    the generic one; a nearest entry is named for its own fix."""
    rules = fallback_rules()
    r = rules.fix_for(choice.category) if choice.category != "unknown" else None
    if r is None:
        return UNKNOWN_FIX
    c = choice.classification
    # a phrase that says more than its category (a DataLoader worker's exit) gives its own steps first
    steps = [
        *(rules.phrase_fix(c.rule) if c is not None and c.basis in ("phrase", "weak-phrase") else ()),
        *r.fix,
    ]
    if c is not None and c.basis == "nearest":
        steps.append(
            f"This error resembles catalog entry `{c.rule}`: "
            f"`verl-logscan explain {c.rule}` tells how that one is fixed."
        )
    return Fix(r.summary, r.why, tuple(steps), r.references)


def root_cause_of(
    choice: Choice,
    choices: list[Choice],
    groups: list[FindingGroup],
    catalog: Catalog,
    extra_explanation: tuple[str, ...] = (),
    tracebacks: list[Traceback] | None = None,
    laggard: int | None = None,
) -> RootCause:
    if choice.kind in ("unknown", "bare", "wrapper") and choice.classification is None:
        classify_choice(choice, catalog, nearest=True)  # the nearest entry only for the one chosen
    echoes = sum(
        1
        for g in groups
        if g.entry.role in (Role.SYMPTOM, Role.WRAPPER) and (choice.group is None or g is not choice.group)
    )
    candidates = tuple(
        Candidate(other.entry_id, other.category, why_lost(choice, other), evidence_of(other.record))
        for other in choices[1:8]
    )
    explanation = tuple(_explanation(choice, choices, echoes)) + extra_explanation
    confidence = confidence_for(choice, choices)
    basis = basis_of(choice)
    if choice.hit is not None:
        hit = choice.hit
        entry = hit.entry
        rec = hit.record
        tb = hit.traceback
        where = _where(rec, tb)
        if hit.category in inference_rules().observer_categories:
            # the rank that printed a collective timeout only waited for the one at fault
            where.update(rank=laggard, local_rank=None, pid=None, actor=None)
        stage, source = stage_for(entry, tb, rec.seq, tracebacks, _messages_of(rec, hit.after))
        decided = choice.classification is not None
        return RootCause(
            id=entry.id,
            category=choice.category,
            title=entry.title,
            summary=entry.render_message(hit.groups),
            message=rec.message,
            evidence=build_evidence(rec, tb, hit.context if tb is None else tb.context, hit.after),
            **where,
            stage=stage,
            stage_source=source.value if source else None,
            confidence=confidence,
            remediation=fix_for_category(choice) if decided else fix_of(entry),
            error_line=evidence_of(rec),
            traceback=traceback_view(tb),
            explanation=explanation,
            candidates=candidates,
            similar=similar_entries(catalog, choice.evidence()) if decided else (),
            basis=basis,
        )
    if choice.bare is not None:
        bare = choice.bare
        rec = bare.record
        what = bare.exc_type or (
            "traceback (its exception line is missing)" if bare.traceback else "error line"
        )
        stage, source = stage_for(None, bare.traceback, rec.seq, tracebacks, _messages_of(rec, bare.after))
        return RootCause(
            id="unknown",
            category=choice.category,
            title=f"Unrecognised {what}" if bare.exc_type or bare.traceback else "Unrecognised error line",
            summary=rec.message.strip(),
            message=rec.message,
            evidence=build_evidence(rec, bare.traceback, list(bare.context), bare.after),
            **_where(rec, None),
            stage=stage,
            stage_source=source.value if source else None,
            confidence=confidence,
            remediation=fix_for_category(choice),
            error_line=evidence_of(rec),
            traceback=traceback_view(bare.traceback),
            explanation=explanation,
            candidates=candidates,
            similar=similar_entries(catalog, bare.evidence()),
            basis=basis,
        )
    tb = choice.traceback
    exc = tb.final
    rec = exc.record
    text = f"{exc.type}: {exc.message}" if exc.message else exc.type
    stage, source = stage_for(None, tb, rec.seq, tracebacks, _messages_of(rec, ()))
    return RootCause(
        id="unknown",
        category=choice.category,
        title=f"Unrecognised error: {exc.short_type}",
        summary=text,
        message=rec.message,
        evidence=build_evidence(rec, tb, tb.context),
        **_where(rec, tb),
        stage=stage,
        stage_source=source.value if source else None,
        confidence=confidence,
        remediation=fix_for_category(choice),
        error_line=evidence_of(rec),
        traceback=traceback_view(tb),
        explanation=explanation,
        candidates=candidates,
        similar=similar_entries(catalog, choice.evidence()),
        basis=basis,
    )


def _messages_of(rec: Record, after) -> tuple[str, ...]:
    return (rec.message, *(r.message for r in list(after)[:MAX_STAGE_MESSAGE_LINES]))


@dataclass(frozen=True)
class Verdict:
    root: RootCause | None
    symptoms: tuple[FindingView, ...]
    findings: tuple[FindingView, ...]
    notes: tuple[str, ...] = ()
    root_seq: int | None = None  # position of the root-cause line in the scan


def infer(
    collector: FindingCollector,
    tracebacks: list[Traceback],
    catalog: Catalog,
    last_step: tuple[int, int] | None = None,
    extra_explanation: tuple[str, ...] = (),
    laggard: int | None = None,
    bare_lines: list[BareLine] | tuple = (),
) -> Verdict:
    groups = merge_similar(sorted(collector.groups.values(), key=lambda g: g.first.seq))
    findings = tuple(finding_view(g) for g in groups)
    choice, choices = choose(collector, groups, tracebacks, last_step, bare_lines, catalog)
    notes = tuple(
        f"{describe(c)} was not taken as the cause: training went on to step {c.survived_to} after it"
        for c in choices
        if c.survived_to is not None
    )
    if choice is None:
        return Verdict(None, (), findings, notes)
    root = root_cause_of(choice, choices, groups, catalog, extra_explanation, tracebacks, laggard)
    explained_by = {
        c.group.entry.id: describe(c.explained_by)
        for c in choices
        if c.group is not None and c.explained_by is not None
    }
    echo_of = describe(choice) if choice.kind in ("cause", "unknown", "bare") else None
    symptoms = []
    for g in merge_by_entry([g for g in groups if g is not choice.group and g.entry.role != Role.CONTEXT]):
        cause = echo_of if g.entry.role in (Role.SYMPTOM, Role.WRAPPER) else explained_by.get(g.entry.id)
        symptoms.append(finding_view(g, explained_by=cause))
    return Verdict(root, tuple(symptoms), findings, notes, choice.record.seq)


def merge_by_entry(groups: list[FindingGroup]) -> list[FindingGroup]:
    """One symptom row per entry: counts added, rank and node sets joined, the earliest first line."""
    out: dict[str, FindingGroup] = {}
    for g in groups:
        k = out.get(g.entry.id)
        if k is None:
            out[g.entry.id] = FindingGroup(
                g.entry, g.key, g.first, g.count, set(g.ranks), set(g.nodes), g.last
            )
            continue
        k.count += g.count
        k.ranks |= g.ranks
        k.nodes |= g.nodes
        if g.first.seq < k.first.seq:
            k.first = g.first
        if g.last is not None and (k.last is None or g.last.seq > k.last.seq):
            k.last = g.last
    return list(out.values())
