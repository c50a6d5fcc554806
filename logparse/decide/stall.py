"""Did the job stall? The only module that answers it, and says where each stream stopped, for how long,
what the ranks waited in, which one is the odd one out, and the likely cause (patterns/stalls.yaml).

A log that ends with neither a failure nor a completion marker is `stalled` only when its own evidence
says progress stopped: stacks dumped while it hung (faulthandler's watchdog, `py-spy dump`), a sign of
a hang repeated after training began with no progress after it (Ray's `cannot be scheduled right now`,
vLLM's broadcast-queue wait; verl's register-center wait during bring-up counts before training), or,
with timestamps, silence after the last step far beyond the run's own step time. A catalog entry that
names a counted sign's own line (Ray's pending request) is the wait the job hung in, not its failure.
False alarms matter more than misses: a log that simply stops stays healthy with the progress
tracker's note.

A job interrupted after it stalled (Ctrl-C, a cancel: torchrun's `Received 2 death signal`,
`SignalException`, `KeyboardInterrupt` on every rank, and the peer-lost errors they cause) is still
stalled when the evidence came before the interruption: the signal is how it ended, not why. A
failure before the interruption (or without one) is a failure, never a stall.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

from logparse.decide.candidates import WENT_ON_IGNORED
from logparse.decide.ending import interruption
from logparse.decide.stage import stage_reached
from logparse.model import (
    CitedValue,
    Environment,
    Evidence,
    RootCause,
    Stall,
    StallCause,
    StreamEnd,
    WaitGroup,
    compact_ranks,
)
from logparse.observe.progression import Progression
from logparse.observe.stalls import SignSeen, Stack, StallFacts, StreamLast
from logparse.observe.tracebacks import Traceback
from patterns.numbers import log_int
from patterns.stalls import StallRules, WaitRule, stall_rules

MAX_STREAMS_SHOWN = 32
MAX_FRAMES_SHOWN = 12
MAX_EVIDENCE = 12


@dataclass(frozen=True)
class _Process:
    """One process's stack as the decision reads it."""

    who: str
    stack: Stack | None  # a dump's stack (None: only the interrupt's traceback)
    frames: tuple[tuple[str, str, int], ...]  # (function, file, line), innermost first
    source: str  # faulthandler | py-spy | interrupt
    first: Evidence
    rule: WaitRule | None


def judge_stall(
    facts: StallFacts | None,
    progress: Progression,
    tracebacks: Sequence[Traceback],
    root: RootCause | None,
    root_seq: int | None,
    environment: Environment,
    rules: StallRules | None = None,
) -> Stall | None:
    """The stall of a job (see the module docstring), or None."""
    rules = rules or stall_rules()
    if facts is None or progress.progress(None, failed=root is not None).completed:
        return None
    stop = interruption(facts, tracebacks, rules)
    interrupt_seq, interrupted = (stop.seq, stop.first) if stop is not None else (None, None)
    before = interrupt_seq if interrupt_seq is not None else float("inf")
    signs = _counted_signs(facts, progress, before, rules)
    if root is not None and not (
        _how_it_ended(root, root_seq, interrupt_seq, rules) or _the_wait_itself(root, signs, rules)
    ):
        return None
    # (a crash's stacks, printed as a process died, say nothing of a hang)
    stacks = [
        s
        for s in facts.stacks
        if not s.launcher and s.crash is None and (s.seq < before or s.tool == "py-spy")
    ]
    silence, step_time = _silence(facts, progress)
    silent = (
        silence is not None
        and step_time is not None
        and silence >= max(rules.silence_steps * step_time, rules.min_silence_s)
    )
    reasons = _reasons(stacks, signs, silence, step_time, silent)
    if not reasons:
        return None
    processes = _processes(stacks, tracebacks, interrupt_seq, rules)
    waits = _groups(processes, rules)
    p = progress.progress(None, failed=False)
    return Stall(
        stage=stage_reached(progress, None),
        step=p.last_step,
        evidence=_evidence(stacks, signs)[:MAX_EVIDENCE],
        reasons=tuple(reasons),
        streams=_streams(facts),
        silent_first=_silent_first(facts, rules),
        silence_s=silence,
        step_time_s=step_time,
        duration=_duration(facts, silence, step_time, p.last_step),
        waits=waits,
        odd_one_out=_odd_sentence(waits),
        cause=_cause(waits, signs, environment, rules, _all_dumped(waits, facts, environment)),
        interrupted=interrupted,
    )


# -- how it ended ------------------------------------------------------------------------------------
def _how_it_ended(
    root: RootCause, root_seq: int | None, interrupt_seq: int | None, rules: StallRules
) -> bool:
    """Is the chosen failure only how the job ended (the interrupt, or an echo of it)?"""
    if interrupt_seq is None:
        return False
    exc = root.traceback.exception_type.rsplit(".", 1)[-1] if root.traceback else None
    if exc in rules.interrupt_exceptions:
        return True
    return root_seq is not None and root_seq >= interrupt_seq


def _counted_signs(
    facts: StallFacts, progress: Progression, before: float, rules: StallRules
) -> list[SignSeen]:
    """The signs that say the job hung: seen `repeats` times before the interruption (if any), after
    training began (unless the sign is a bring-up wait), and with no progress after the last of them
    (a wait that ended is no hang). Each as the lines that count show it."""
    out = []
    for s in facts.signs:
        rule = next((r for r in rules.signs if r.id == s.id), None)
        if rule is None:
            continue
        lines = [
            (seq, e)
            for seq, e in s.lines
            if seq < before and (rule.before_training or progress.training_started_before(seq))
        ]
        if len(lines) < rule.repeats or progress.went_on_after(lines[-1][0], ignore=WENT_ON_IGNORED):
            continue
        count = len(lines)
        if lines[0][0] == s.lines[0][0] and (
            rule.before_training or progress.training_started_before(s.first_seq)
        ):
            count = s.count - (len(s.lines) - len(lines))  # (the lines older than those kept count too)
        else:
            s = replace(s, first=lines[0][1], first_seq=lines[0][0])
        out.append(replace(s, count=count, last=lines[-1][1]))
    return out


def _the_wait_itself(root: RootCause, signs: list[SignSeen], rules: StallRules) -> bool:
    """Is the chosen failure a catalog entry that names a counted sign's own line (Ray's `cannot be
    scheduled right now`): a wait, which the hang explains, not a failure?"""
    ids = {s.id for s in signs}
    return any(root.id in rule.catalog for rule in rules.signs if rule.id in ids)


# -- how long ------------------------------------------------------------------------------------------
def _silence(facts: StallFacts, progress: Progression) -> tuple[float | None, float | None]:
    """Seconds from the last step line to the log's last timestamp, and the run's median step time
    (from the step lines' own times, else its `timing_s/step`)."""
    times = list(facts.step_times)
    step_time = median_step_time(times)
    if step_time is None:
        step_time = progress.progress(None, failed=False).seconds_per_step
    if not times or facts.end_time is None:
        return None, step_time
    return max(0.0, facts.end_time - times[-1][1]), step_time


def median(values: Sequence[float]) -> float:
    """The median of `values` (not empty). (The `statistics` module costs a scan's start-up the import of
    `fractions` and `decimal`, for one function.)"""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def median_step_time(times: Sequence[tuple[int, float]]) -> float | None:
    """The median seconds per step between consecutive (step, time) pairs (a resumed or repeated step
    is no gap), or None with fewer than two."""
    gaps = [
        (b[1] - a[1]) / (b[0] - a[0]) for a, b in itertools.pairwise(times) if b[0] > a[0] and b[1] >= a[1]
    ]
    return median(gaps) if gaps else None


def live_alert_after(
    step_time: float | None, explicit_s: float | None, rules: StallRules | None = None
) -> float | None:
    """How many seconds without a new step make a live scan (`scan --follow`) raise its stall ALERT:
    `--stall-after` when given, else `follow_steps` times the run's median step time, never less than
    `min_silence_s` (patterns/stalls.yaml); None while the step time is not known yet."""
    if explicit_s is not None:
        return explicit_s
    if step_time is None:
        return None
    rules = rules or stall_rules()
    return max(rules.follow_steps * step_time, rules.min_silence_s)


def span(seconds: float | None) -> str:
    """A duration as reports say it: `42 s`, `12 min`, `1.5 h`."""
    return _span(seconds)


def _duration(facts: StallFacts, silence: float | None, step_time: float | None, step: int | None) -> str:
    if silence is not None:
        took = f"; steps took {_span(step_time)} (median)" if step_time else ""
        return f"no step for {_span(silence)} after step {step}{took}"
    if facts.end_time is None:
        return (
            "the log carries no timestamps: how long it hung cannot be known from it (a dump's own "
            "wait, where it says one, is in the evidence)"
        )
    return "the step lines carry no timestamps: the silence since the last step cannot be measured"


def _span(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 120:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _reasons(
    stacks: list[Stack], signs: list, silence: float | None, step_time: float | None, silent: bool
) -> list[str]:
    reasons = []
    watchdog = [s for s in stacks if s.tool == "faulthandler" and s.waited]
    if watchdog:
        who = sorted({s.who for s in watchdog})
        reasons.append(
            f"faulthandler's watchdog dumped the stacks of {_names(who)} after {watchdog[0].waited} "
            "without progress"
        )
    other = [s for s in stacks if s.tool == "faulthandler" and not s.waited]
    if other:
        reasons.append(f"stacks dumped while it ran ({_names(sorted({s.who for s in other}))})")
    spy = [s for s in stacks if s.tool == "py-spy"]
    if spy:
        reasons.append(f"`py-spy dump` of {_names(sorted({s.who for s in spy}))} taken while it hung")
    for sign in signs:
        reasons.append(f"{sign.title} ({sign.count} times)")
    if silent:
        reasons.append(f"no step for {_span(silence)} while steps took {_span(step_time)}")
    return reasons


def _evidence(stacks: list[Stack], signs: list) -> tuple[Evidence, ...]:
    seen, out = set(), []
    for e in [*(s.first for s in stacks), *(s.first for s in signs)]:
        key = (e.source, e.line)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return tuple(out)


# -- where each stream stopped --------------------------------------------------------------------------
def _by_name(facts: StallFacts) -> list[StreamLast]:
    latest: dict[str, StreamLast] = {}
    for s in facts.streams:
        known = latest.get(s.who)
        if known is None or (s.time or 0.0, s.last.line) >= (known.time or 0.0, known.last.line):
            latest[s.who] = s
    return sorted(latest.values(), key=lambda s: (s.time is None, s.time or 0.0, s.seq, s.last.line))


def _streams(facts: StallFacts) -> tuple[StreamEnd, ...]:
    from logparse.observe.progression import iso_time

    out = []
    for s in _by_name(facts)[:MAX_STREAMS_SHOWN]:
        before = facts.end_time - s.time if s.time is not None and facts.end_time is not None else None
        out.append(StreamEnd(s.who, s.last, iso_time(s.time), before))
    return tuple(out)


def _silent_first(facts: StallFacts, rules: StallRules) -> tuple[str, ...]:
    """Streams that went quiet quiet_first_s before the latest one that kept writing (with times)."""
    timed = [s for s in _by_name(facts) if s.time is not None]
    if len(timed) < 2:
        return ()
    latest = timed[-1].time
    return tuple(s.who for s in timed if latest - s.time >= rules.quiet_first_s)[:MAX_STREAMS_SHOWN]


# -- what they waited in ------------------------------------------------------------------------------
def _processes(
    stacks: list[Stack], tracebacks: Sequence[Traceback], interrupt_seq: int | None, rules: StallRules
) -> list[_Process]:
    """One stack per process: a dump's (the thread that waits somewhere named, else the main thread,
    else the last one dumped); a process no dump shows, its interrupt traceback's innermost frames."""
    chosen: dict[str, _Process] = {}
    for s in stacks:
        frames = tuple((f.function, f.file, f.line) for f in s.frames)
        if frames and frames[0][0] in rules.idle_functions:
            continue
        rule = rules.wait_of([(f, p) for f, p, _ in frames], s.process)
        p = _Process(s.who, s, frames, s.tool, s.first, rule)
        known = chosen.get(s.who)
        if known is None or _better(p, known):
            chosen[s.who] = p
    if interrupt_seq is not None:
        for tb in tracebacks:
            _interrupted_process(tb, chosen, rules)
    return list(chosen.values())


def _better(p: _Process, known: _Process) -> bool:
    if (p.rule is None) != (known.rule is None):
        return p.rule is not None
    main = p.stack is not None and p.stack.thread_name == "MainThread"
    return main or (p.stack is not None and p.stack.seq > (known.stack.seq if known.stack else -1))


def _interrupted_process(tb: Traceback, chosen: dict[str, _Process], rules: StallRules) -> None:
    exc = tb.final
    if exc is None or exc.short_type not in rules.interrupt_exceptions or not tb.frames:
        return
    from logparse.observe.stalls import who_of

    who = who_of(tb.start.origin)
    if who in chosen or (who.startswith("pid ") and tb.frames[-1].file.endswith("torchrun")):
        return
    frames = tuple((f.function, f.file, f.line) for f in reversed(tb.frames))
    if any("torch/distributed/elastic/" in f for _, f, _ in frames[:3]):
        return  # the launcher's own signal handling
    rule = rules.wait_of([(f, p) for f, p, _ in frames])
    rec = exc.record
    chosen[who] = _Process(
        who, None, frames, "interrupt", Evidence(rec.line.source, rec.line.number, rec.line.text), rule
    )


def short_file(file: str) -> str:
    """A frame's file as a report names it: from the package on for an installed one (py-spy's way),
    else its name (a relative path, as py-spy prints it, as it is)."""
    if not file.startswith("/"):
        return file
    for marker in ("site-packages/", "dist-packages/"):
        if marker in file:
            return file.rsplit(marker, 1)[1]
    if "/lib/python3" in file:
        return file.split("/lib/python3", 1)[1].split("/", 1)[-1]
    return file.rsplit("/", 1)[-1]


def _label(frames: tuple[tuple[str, str, int], ...]) -> str:
    if not frames:
        return "(no frames)"
    function, file, line = frames[0]
    return f"{function} ({short_file(file)}:{line})"


def _groups(processes: list[_Process], rules: StallRules) -> tuple[WaitGroup, ...]:
    """Processes with the same stack together; the odd one out (a stack that waits for nobody while
    others wait for it) first, then the largest groups."""
    groups: dict[tuple, list[_Process]] = {}
    for p in processes:
        key = tuple((f, file) for f, file, _ in p.frames[:MAX_FRAMES_SHOWN])
        groups.setdefault(key, []).append(p)
    waiting = any(ps[0].rule is not None and ps[0].rule.others for ps in groups.values())
    odd_key = None
    if waiting:
        busy = [k for k, ps in groups.items() if ps[0].rule is None or not ps[0].rule.others]
        if busy:
            odd_key = min(busy, key=lambda k: (len(groups[k]), groups[k][0].first.line))
        else:
            odd_key = _mismatched(groups)
    out = []
    for key, ps in sorted(groups.items(), key=lambda kv: (kv[0] != odd_key, -len(kv[1]), kv[1][0].who)):
        p = ps[0]
        out.append(
            WaitGroup(
                streams=tuple(sorted((q.who for q in ps), key=_who_order)),
                waiting_in=_label(p.frames),
                kind=p.rule.kind if p.rule else None,
                frames=tuple(
                    f"{f} ({short_file(file)}:{line})" for f, file, line in p.frames[:MAX_FRAMES_SHOWN]
                ),
                source=p.source,
                first=p.first,
                odd=key == odd_key,
            )
        )
    return tuple(out)


def _mismatched(groups: dict[tuple, list[_Process]]) -> tuple | None:
    """Every process waits in a collective, but not all in the same one (one rank in broadcast, three in
    all_reduce): the one group smaller than every other is the odd one (it called another collective)."""
    if len(groups) < 2:
        return None
    sizes = sorted((len(ps), key) for key, ps in groups.items())
    (smallest, key), (next_size, _) = sizes[0], sizes[1]
    return key if smallest < next_size else None


def _all_dumped(waits: tuple[WaitGroup, ...], facts: StallFacts, environment: Environment) -> bool:
    """Is every rank's stack in the log: as many processes as the world size, or every rank the log
    names (its `rank N pid M` lines) among them?"""
    shown = {who for g in waits for who in g.streams}
    world = environment.get("world_size")
    if isinstance(world, int) and len(shown) >= world:
        return True
    named = {f"rank {r}" for r in facts.ranks_named}
    return bool(named) and named <= shown


def _who_order(who: str) -> tuple:
    head, _, tail = who.rpartition(" ")
    return (head, log_int(tail)) if tail.isdecimal() else (who, 0)


def _names(whos: Sequence[str]) -> str:
    """`rank 0`, `rank 1`, `rank 2` -> `ranks 0-2`; other names listed."""
    ranks = [log_int(w.split()[1]) for w in whos if w.startswith("rank ") and w.split()[1].isdecimal()]
    pids = [log_int(w.split()[1]) for w in whos if w.startswith("pid ") and w.split()[1].isdecimal()]
    rest = [w for w in whos if not (w.startswith("rank ") or w.startswith("pid "))]
    parts = []
    if ranks:
        parts.append(("rank " if len(ranks) == 1 else "ranks ") + compact_ranks(ranks))
    if pids:
        parts.append(("pid " if len(pids) == 1 else "pids ") + ", ".join(map(str, sorted(pids))))
    parts.extend(rest)
    return ", ".join(parts)


def _odd_sentence(waits: tuple[WaitGroup, ...]) -> str | None:
    odd = next((g for g in waits if g.odd), None)
    if odd is None:
        return None
    others = [g for g in waits if not g.odd]
    text = f"{_names(odd.streams)} in {odd.waiting_in}{_kind(odd)}"
    if others:
        text += "; " + "; ".join(f"{_names(g.streams)} in {g.waiting_in}{_kind(g)}" for g in others)
    return text


def _kind(g: WaitGroup) -> str:
    return f" ({g.kind})" if g.kind else ""


# -- why and what to do ------------------------------------------------------------------------------------
def _cause(
    waits: tuple[WaitGroup, ...],
    signs: list,
    environment: Environment,
    rules: StallRules,
    all_dumped: bool = False,
) -> StallCause | None:
    kinds = [g.kind for g in waits]
    odd = next((g for g in waits if g.odd), None)
    seen = {s.id for s in signs}
    signed = {s.wait for s in signs if s.wait}  # the waits the signs stand for (`any_wait`)
    for rule in rules.causes:
        if all(_holds(cond, value, kinds, odd, seen, signed) for cond, value in rule.when):
            cited = tuple(
                CitedValue(key[len("config.") :], str(value))
                for key, value in environment.items()
                if key.startswith("config.") and key.rsplit(".", 1)[-1] in rule.cite
            )[:4]
            fix = rule.fix if all_dumped else rule.fix_if_missing + rule.fix
            return StallCause(
                rule.id, rule.title, rule.summary, fix, cited, rule.category, stage_hint=rule.stage
            )
    return None


def _holds(
    cond: str, value: str, kinds: list, odd: WaitGroup | None, seen: set[str], signed: set[str]
) -> bool:
    if cond == "odd":
        return odd is not None and (value == "any" or odd.kind == value)
    if cond == "all":
        return bool(kinds) and all(k == value for k in kinds)
    if cond == "any_wait":
        return value in kinds or value in signed
    if cond == "sign":
        return value in seen
    return False
