"""The job's progression as the decision reads it: a frozen copy of what the stage tracker
(logparse.observe.progress.StageTracker) kept, taken when an attempt or the inputs end
(`StageTracker.freeze()`), with the questions logparse.decide asks of it: did the job go on after a line,
had the loop begun, which stage was it in, how far did it get (`progress`, `snapshot`: the report's
Progress, built once).

A Progression is a value: nothing feeds it, so a decision made from it cannot change while the scan goes
on (a restart's attempt is decided while the next one is read). Its columns are copies of the tracker's
bounded ones (StageTrackerConfig: at most 100,000 marks a kind), so a copy costs at most a few MB of
memory for the moment it lives.
"""

from __future__ import annotations

import datetime
import functools
import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from logparse.model import Progress, StageSpan

MAX_SEGMENTS_PER_STAGE = 500  # stretches of one stage in the progression (closer ones are merged)
STEP_STAGE = "training"  # a step line or a progress-bar update means the training loop runs


def median(values: list[float]) -> float:
    """statistics.median of a non-empty list, as it computes it (that module, with fractions and decimal,
    took 2.5 ms of every start-up for this one call)."""
    data = sorted(values)
    n = len(data)
    return data[n // 2] if n % 2 == 1 else (data[n // 2 - 1] + data[n // 2]) / 2


def iso_time(t: float | None) -> str | None:
    """Seconds since the epoch (as the normaliser reads a line's time) as `YYYY-MM-DDTHH:MM:SS`."""
    if t is None:
        return None
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


@dataclass(frozen=True)
class AttemptStart:
    """The record that started an attempt (a job start or restart)."""

    seq: int
    source: str
    line: int
    time: float | None


@dataclass(frozen=True)
class StepMark:
    """The highest step line of an attempt so far: its record and its step (the latest of equals)."""

    seq: int
    step: int


@dataclass(frozen=True)
class MarkColumns:
    """Step-line or progress-bar marks as columns (a copy of the tracker's): seqs, int columns, float
    columns (NaN: none)."""

    seqs: array
    ints: tuple[Sequence[int], ...]
    floats: tuple[array, ...]

    def window(self, begin: int, end: int) -> range:
        """Indices of the marks with begin <= seq <= end."""
        return range(bisect_left(self.seqs, begin), bisect_right(self.seqs, end))

    def last_float(self, column: int, indices: range, count: int = 1) -> list[float]:
        """The last `count` values that are not None of a float column among `indices`, in order."""
        values = self.floats[column]
        out: list[float] = []
        for i in reversed(indices):
            v = values[i]
            if not math.isnan(v):  # (NaN: None)
                out.append(v)
                if len(out) == count:
                    break
        out.reverse()
        return out


@dataclass(frozen=True)
class SpanSeen:
    """Where one stage was first and last seen: (source, line, seq) of each, and their times."""

    stage: str
    first: tuple[str, int, int]
    last: tuple[str, int, int]
    first_time: float | None
    last_time: float | None

    def freeze(self) -> StageSpan:
        return StageSpan(
            self.stage,
            self.first[0],
            self.first[1],
            self.last[0],
            self.last[1],
            iso_time(self.first_time),
            iso_time(self.last_time),
        )


@dataclass(frozen=True)
class Progression:
    """What the stage tracker kept, frozen (see the module docstring)."""

    steps: MarkColumns  # seq; step; timing_s/step
    bars: MarkColumns  # seq; n, total; seconds per step
    activity: array  # seqs of the work lines (a request answered)
    spans: tuple[SpanSeen, ...]  # one per stage, in the order first seen
    transition_seqs: tuple[int, ...]
    transition_stages: tuple[str, ...]
    transition_at: tuple[tuple[str, int, float | None], ...]  # (source, line, time) of each
    last_at: tuple[int, str, int, float | None] | None  # where the progression was last seen
    attempt_starts: tuple[AttemptStart, ...]
    completions: tuple[int, ...]
    totals: tuple[tuple[int, int], ...]
    resumes: tuple[tuple[int, int], ...]
    last_seq: int
    last_step_line: StepMark | None  # the highest step line of the attempt (what `went on` is measured by)
    step_time_window: int
    notes: tuple[str, ...]

    # -- did the job go on? ------------------------------------------------------------------------------
    def went_on_after(self, seq: int, ignore: frozenset[str] = frozenset(), completion: bool = True) -> bool:
        """Did the job show progress after record `seq`: a step line, a progress bar that counts more,
        work (an activity line), a completion marker (unless `completion` is False), or a stage (not in
        `ignore`) it had not reached before?"""
        if (self.steps.seqs and self.steps.seqs[-1] > seq) or self._bar_moved(seq):
            return True
        if self.activity and self.activity[-1] > seq:
            return True
        if completion and self.completions and self.completions[-1] > seq:
            return True
        return any(span.first[2] > seq and span.stage not in ignore for span in self.spans)

    def went_on_between(self, seq: int, until: int, ignore: frozenset[str] = frozenset()) -> bool:
        """went_on_after, counting only what came between record `seq` and record `until` (both left
        out): did the job show progress before `until` came?"""
        for seqs in (self.steps.seqs, self.activity):
            i = bisect_right(seqs, seq)
            if i < len(seqs) and seqs[i] < until:
                return True
        if self._bar_moved(seq, until):
            return True
        if any(seq < c < until for c in self.completions):
            return True
        return any(seq < span.first[2] < until and span.stage not in ignore for span in self.spans)

    def _bar_moved(self, seq: int, until: int | None = None) -> bool:
        """Did the progress bar count more than the bar before it, after record `seq` and before `until`
        (None: the end)? (A redraw of the same count, flushed late, is no progress.)"""
        rises = self._bar_rises
        i = bisect_right(rises, seq)
        return i < len(rises) and (until is None or rises[i] < until)

    @functools.cached_property
    def _bar_rises(self) -> array:
        """The seqs of the kept bars that count more than the kept bar before them (the first counts)."""
        seqs, counts = self.bars.seqs, self.bars.ints[0]
        before = [-1, *counts[:-1]] if len(counts) else []
        return array("q", (s for s, n, b in zip(seqs, counts, before, strict=True) if n > b))

    @property
    def has_loop(self) -> bool:
        """Did the job show a training loop (a step line, a progress bar, a training-loop marker)?"""
        return bool(self.steps.seqs or self.bars.seqs or any(s.stage == STEP_STAGE for s in self.spans))

    def work_after(self, seq: int) -> int:
        """How many activity lines (work without a step: a request answered) came after record `seq`."""
        return len(self.activity) - bisect_right(self.activity, seq)

    def completed_after(self, seq: int) -> bool:
        """Was a completion marker seen after record `seq`?"""
        return bool(self.completions) and self.completions[-1] > seq

    def completed_before(self, seq: int) -> bool:
        """Was a completion marker seen before record `seq` (in the same attempt)?"""
        begin = self._attempt_begin(seq)
        return any(begin <= c < seq for c in self.completions)

    def is_step_line(self, seq: int) -> bool:
        """Is record `seq` a step line the loop printed (one of the step lines kept)?"""
        seqs = self.steps.seqs
        i = bisect_left(seqs, seq)
        return i < len(seqs) and seqs[i] == seq

    # -- where was it? -------------------------------------------------------------------------------
    def training_started_before(self, seq: int) -> bool:
        """Had the training loop begun (a step line, a progress bar, a training-loop marker) by `seq`?"""
        for marks in (self.steps, self.bars):
            if marks.seqs and marks.seqs[0] < seq:
                return True
        return any(s.stage == STEP_STAGE and s.first[2] < seq for s in self.spans)

    def loop_began_before(self, seq: int) -> bool:
        """Had the training loop begun before record `seq` in the attempt that holds it (a step, a
        progress bar or a training-loop marker after that attempt's start)? What a stage source asks:
        an earlier attempt's steps say nothing of where a restart failed."""
        begin = self._attempt_begin(seq)
        for marks in (self.steps, self.bars):
            j = bisect_left(marks.seqs, begin)
            if j < len(marks.seqs) and marks.seqs[j] < seq:
                return True
        k = bisect_left(self.transition_seqs, begin)
        for at, stage in zip(self.transition_seqs[k:], self.transition_stages[k:], strict=True):
            if at >= seq:
                return False
            if stage == STEP_STAGE:
                return True
        return False

    def stage_at(self, seq: int) -> str | None:
        """The last stage seen at or before record `seq` (None: none yet, or older than what is kept)."""
        i = bisect_right(self.transition_seqs, seq) - 1
        return self.transition_stages[i] if i >= 0 else None

    def _attempt_begin(self, seq: int) -> int:
        starts = [a.seq for a in self.attempt_starts if a.seq <= seq]
        return starts[-1] if starts else -1

    def segments(self, max_per_stage: int = MAX_SEGMENTS_PER_STAGE) -> tuple[StageSpan, ...]:
        """The job's progression: each stretch of the log in one stage, from the record that entered
        the stage to the record that entered the next (the last stretch ends at the last record seen),
        in order. A stage is where the job is until another begins, so a late line (Ray's dedup flush,
        a worker's buffered print) is a short stretch of its own and never stretches a stage over the
        run. Stretches of one stage closer together than 1/max_per_stage of the log are merged (a
        stage that recurs every step is drawn as one bar where its steps are too close to tell apart),
        which bounds each stage to about max_per_stage stretches."""
        if not self.transition_seqs or self.last_at is None:
            return ()
        ends = [(seq, *at) for seq, at in zip(self.transition_seqs[1:], self.transition_at[1:], strict=True)]
        ends.append(self.last_at)
        raw = [
            (stage, (seq, *at), end)
            for stage, seq, at, end in zip(
                self.transition_stages, self.transition_seqs, self.transition_at, ends, strict=True
            )
        ]
        gap = (self.last_at[0] - self.transition_seqs[0]) / max(1, max_per_stage)
        open_by_stage: dict[str, int] = {}  # stage -> index in `merged` of its latest stretch
        merged: list[list] = []
        for stage, start, end in raw:
            i = open_by_stage.get(stage)
            if i is not None and start[0] - merged[i][2][0] <= gap:
                merged[i][2] = end
                continue
            open_by_stage[stage] = len(merged)
            merged.append([stage, start, end])
        return tuple(
            StageSpan(stage, a[1], a[2], b[1], b[2], iso_time(a[3]), iso_time(b[3])) for stage, a, b in merged
        )

    # -- how far did it get? -----------------------------------------------------------------------------
    def progress(self, end_seq: int | None = None, failed: bool = False) -> Progress:
        """Progress of the attempt that holds `end_seq` (default: the end of the scan), as of end_seq.
        `failed`: a failure is known (then no stopped-without-error note is made)."""
        return self._progress(end_seq, failed)

    def snapshot(
        self, failed: bool, failure_seq: int | None, reached: str | None, say_stopped: bool = True
    ) -> Progress:
        """The job's progress as a report shows it: the last attempt's, as of the end of the scan
        (`reached`: the stage it reached, as the analysis decided it), with the step the failure at
        `failure_seq` came after, and the stretches of the progression (`segments`). `say_stopped`:
        say so when the job shows neither a failure nor its completion."""
        failure_step = self._progress(failure_seq, True).last_step if failure_seq is not None else None
        return self._progress(
            None,
            failed,
            reached=(reached,),
            failure_step=failure_step,
            say_stopped=say_stopped,
            segments=True,
        )

    def _progress(
        self,
        end_seq: int | None,
        failed: bool,
        reached: tuple[str | None] | None = None,
        failure_step: int | None = None,
        say_stopped: bool = True,
        segments: bool = False,
    ) -> Progress:
        """The Progress of `progress` and `snapshot`, built once. `reached`: the decided stage reached
        (one-tuple; None: the stage at `end_seq`)."""
        end = self.last_seq if end_seq is None else end_seq
        starts = [a.seq for a in self.attempt_starts if a.seq <= end]
        begin = starts[-1] if starts else -1
        steps = self.steps.window(begin, end)
        bars = self.bars.window(begin, end)
        last_step, total_steps = self._how_far(begin, end, steps, bars)
        times = self.steps.last_float(0, steps, self.step_time_window)
        seconds = median(times) if times else None
        if seconds is None:
            rates = self.bars.last_float(0, bars)
            seconds = rates[-1] if rates else None
        spans = sorted((s for s in self.spans if s.first[2] <= end), key=lambda span: span.first[2])
        completed = any(begin <= c <= end for c in self.completions)
        stage_reached = self.stage_at(end) if reached is None else reached[0]
        note = None
        if say_stopped and not completed and not failed:
            served = (
                0 if self.has_loop else bisect_right(self.activity, end) - bisect_left(self.activity, begin)
            )
            # (the note's stage is the progression's own at its end, which is the decided one when no
            # failure decided another: a failed job has no note)
            note = stopped_note(last_step, total_steps, self.stage_at(end), served)
        return Progress(
            stage_reached=stage_reached,
            last_step=last_step,
            total_steps=total_steps,
            completed=completed,
            seconds_per_step=seconds,
            timeline=tuple(s.freeze() for s in spans),
            failure_step=failure_step,
            note=note,
            segments=self.segments() if segments else (),
            attempts=len(starts),
        )

    def _how_far(self, begin: int, end: int, steps: range, bars: range) -> tuple[int | None, int | None]:
        """The last step of the attempt (its highest step line or resume, else its bar's count) and its
        total steps (None: unknown, or one the run went past)."""
        resumes = [r for r in self.resumes if begin <= r[0] <= end]
        last_step = None
        if steps or resumes:
            highest = [r[1] for r in resumes]
            if steps:
                highest.append(max(self.steps.ints[0][steps.start : steps.stop]))
            last_step = max(highest)
        elif bars:
            last_step = self.bars.ints[0][bars[-1]]
        totals = [t for t in self.totals if begin <= t[0] <= end] or [t for t in self.totals if t[0] <= end]
        total_steps = totals[-1][1] if totals else (self.bars.ints[1][bars[-1]] if bars else None)
        if total_steps is not None and last_step is not None and last_step > total_steps:
            # a total the run went past (`step 948 of 435`: a resumed run's longer schedule, a bar of
            # another loop) is no total of this run: unknown
            total_steps = None
        return last_step, total_steps


def stopped_note(last_step: int | None, total_steps: int | None, stage: str | None, served: int = 0) -> str:
    """The sentence for a log that ends with neither an error nor a completion marker. `served`: the
    requests a job with no training loop answered (a server: it has no training step to stop at)."""
    if served and last_step is None:
        return (
            f"a job with no training loop that answered {served} request(s), stopped with no error: it was "
            f"still running, or was stopped from outside (time limit, OOM killer, cancel)"
        )
    if last_step is not None:
        total = f" of {total_steps}" if total_steps else ""
        at = f"stopped at step {last_step}{total}"
    else:
        at = "stopped before the first training step"
    where = f" in {stage}" if stage else ""
    return (
        f"{at}{where} with no error and no completion marker: the job was still running, or was "
        f"stopped from outside (time limit, OOM killer, cancel)"
    )
