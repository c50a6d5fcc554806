"""The root cause among the candidates (logparse.decide.candidates), how sure it is, and why it beat
the others.

1. Candidates: causes and unrecognised exceptions (their category named by the fallback rules); one
   the run's story sets aside (survived, recurring, teardown, after a stop from outside) is dropped.
2. A candidate explained by another, and not clearly earlier than it, is an echo.
3. Among the rest: the most specific priority band first, then the earliest, then priority.
4. With no cause at all: wrappers whose category is known (from the catalog, or from the class and
   traceback they carry), then bare failure lines, then the other wrappers, then symptoms.
"""

from __future__ import annotations

import functools
from bisect import bisect_right

from logparse.decide.candidates import (
    BARE_PRIORITY,
    KIND_RANK,
    Aside,
    Choice,
    EchoIndex,
    candidates_of,
    category_explains,
    caught_by_job,
    caught_intro,
    chrono_cmp,
    classify_choice,
    is_teardown,
)
from logparse.decide.ending import Interruption
from logparse.observe.bare_lines import BareLine
from logparse.observe.hits import FindingCollector, FindingGroup
from logparse.observe.progression import Progression
from logparse.observe.tracebacks import Traceback
from patterns import Catalog, Role
from patterns.inference import InferenceRules, inference_rules


def choose(
    collector: FindingCollector,
    groups: list[FindingGroup],
    tracebacks: list[Traceback],
    progress: Progression,
    bare_lines: list[BareLine] | tuple = (),
    catalog: Catalog | None = None,
    stop: Interruption | None = None,
) -> tuple[Choice | None, list[Choice]]:
    """The verdict and every candidate considered, best first.

    1. Candidates: causes and unrecognised exceptions (their category named by the fallback rules);
       one the run's story sets aside (survived, recurring, teardown after completion, after the job
       was stopped from outside: logparse.decide.candidates) is dropped.
    2. A candidate explained by another (the catalog's `explains`; for an unrecognised exception,
       inference.yaml and what the catalog's entries of its fallback category explain), and not
       clearly earlier than it, is an echo.
    3. Among the rest: the most specific priority band first, then the earliest, then priority.
    4. With no cause at all: wrappers whose category is known (from the catalog, or from the class
       and traceback they carry), then bare failure lines, then the other wrappers, then symptoms.
    """
    rules = inference_rules()
    tol = rules.chronology_tolerance_s
    cands = candidates_of(collector, groups, tracebacks, progress, stop)
    bare_lines = _without_caught_intros(bare_lines, tracebacks, groups, rules)
    # a bare line with a failure phrase (a Ray OOM kill, a segfault, a NaN loss) competes with the
    # unrecognised exceptions: what it names often explains them (a driver's ActorDiedError)
    phrased = [
        Choice("bare", BARE_PRIORITY, b.seq, b.record.origin.time, bare=b)
        for b in bare_lines
        if b.kind == "phrase"
    ]
    for c in phrased:
        classify_choice(c, catalog)
    reported = _reported_earlier(phrased, groups, rules.chronology_tolerance_s)
    cands += [c for c in phrased if id(c) not in reported]
    bare_lines = [b for b in bare_lines if b.kind != "phrase"]
    for c in cands:
        if c.aside is None:
            classify_choice(c, catalog)
            if is_teardown(c, progress, rules.teardown_categories):
                c.aside = Aside("teardown", "printed after the run completed: its teardown")
    live = _caught_set_aside([c for c in cands if c.aside is None], groups, rules)
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
        rest = [c for c in live if id(c) not in rooted] + [c for c in cands if c.aside is not None]
        return roots[0], roots + rest

    def in_first_observed(c: Choice) -> bool:
        """A line inside torchrun's "Root Cause (first observed failure)" block: evidence, ranked first
        among wrappers (not a verdict: any cause beats it)."""
        tb = c.hit.traceback
        f = tb.torchrun_failure_at(c.hit.seq) if tb is not None else None
        return f is not None and f.section == "root"

    survivors = [c for c in cands if c.aside is not None]

    def ended(g: FindingGroup) -> bool:
        """A wrapper or symptom printed after the job was stopped from outside or after it completed:
        how it ended, or its teardown."""
        return (stop is not None and g.first.seq >= stop.seq) or progress.completed_before(g.first.seq)

    wrappers = [
        Choice("wrapper", g.entry.priority, g.first.seq, g.first.time, hit=g.first, group=g)
        for g in groups
        if g.entry.role == Role.WRAPPER and not ended(g)
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
        if g.entry.role == Role.SYMPTOM and not ended(g)
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


def _caught_set_aside(live: list[Choice], groups: list[FindingGroup], rules: InferenceRules) -> list[Choice]:
    """Exceptions the job caught and logged (candidates.caught_by_job) did not end their process: with a
    failure that did, they are set aside; alone, they are the failure only when the job died after them
    (a wrapper: a launcher's or Ray's report of a death), else the run survived them."""
    caught = [c for c in live if caught_by_job(c, rules)]
    if not caught:
        return live
    rest = [c for c in live if all(c is not k for k in caught)]
    if not rest and _died_after(max(c.seq for c in caught), groups):
        return live
    for c in caught:
        c.aside = Aside("caught", "the job caught and logged it, and went on: it did not end its process")
    return rest


def _died_after(seq: int, groups: list[FindingGroup]) -> bool:
    """Did a launcher or Ray report a death (a wrapper) after record `seq`?"""
    return any(g.entry.role == Role.WRAPPER and g.first.seq > seq for g in groups)


def _without_caught_intros(
    bare_lines: list[BareLine] | tuple,
    tracebacks: list[Traceback],
    groups: list[FindingGroup],
    rules: InferenceRules,
) -> list[BareLine]:
    """The bare lines without those that only tell of an exception the job caught and logged (the
    `logger.exception` message before its traceback, a traceback cut before its end), unless the job
    died after them. Only the traceback that follows a line in its stream can be the one it introduced
    (a log dense in tracebacks is not read back for each)."""
    if not bare_lines:
        return []
    starts: dict[tuple, list[tuple[int, Traceback]]] = {}
    for tb in tracebacks:
        starts.setdefault(tb.stream, []).append((tb.start.seq, tb))
    for items in starts.values():
        items.sort(key=lambda item: item[0])
    out = []
    for b in bare_lines:
        tb = b.traceback
        if tb is None:
            after = starts.get(b.record.stream, [])
            i = bisect_right(after, b.seq, key=lambda item: item[0])
            tb = after[i][1] if i < len(after) else None
            caught = tb is not None and caught_intro(tb, rules) == (
                b.record.line.source,
                b.record.line.number,
            )
        else:
            caught = caught_intro(tb, rules) is not None
        if not caught or _died_after(b.seq, groups):
            out.append(b)
    return out


def _reported_earlier(phrased: list[Choice], groups: list[FindingGroup], tol: float) -> set[int]:
    """The phrase lines (ids) whose failure a wrapper of the same category reported clearly before them:
    what follows a Ray worker's death report in its daemons' logs (a node or owner marked dead, workers
    killed at teardown) reads as the same failure, told later and with less structure."""
    firsts: dict[str, Choice] = {}
    for g in groups:
        if g.entry.role != Role.WRAPPER:
            continue
        w = Choice("wrapper", g.entry.priority, g.first.seq, g.first.time, hit=g.first, group=g)
        if w.category != "unknown" and (w.category not in firsts or w.seq < firsts[w.category].seq):
            firsts[w.category] = w
    out = set()
    for c in phrased:
        w = firsts.get(c.category)
        if w is not None and chrono_cmp(w, c, tol) < 0:
            out.add(id(c))
    return out


BASIS_CONFIDENCE = {
    "phrase": 0.0,
    "type": 0.0,
    "frame": -0.05,
    "marker": -0.05,
    "weak-phrase": -0.1,
    "weak-type": -0.1,
    "nearest": -0.15,
}


def confidence_for(choice: Choice, choices: list[Choice], dead_worker_known: bool = False) -> float:
    """How sure the verdict is. `dead_worker_known`: the choice reports a Ray worker death whose worker
    the job's reports identify (pid and node): that a worker died is then certain, only its cause is not
    (a wrapper's usual 0.35 becomes 0.5)."""
    rules = inference_rules()
    explained = sum(1 for c in choices if c.explained_by is choice)
    rivals = sum(
        1
        for c in choices
        if c is not choice
        and c.explained_by is None
        and c.aside is None
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
        if dead_worker_known and choice.category != "unknown":
            base = 0.5
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
    if other.aside is not None:
        return other.aside.why
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


def explanation(choice: Choice, choices: list[Choice], echoes: int) -> list[str]:
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
