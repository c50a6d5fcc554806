"""Where a job got to: stages reached, last step, total steps, completion, restarts.

The tracker is told ProgressRun facts (logparse.read.progress_syntax) one way, `apply(seq, run)`: a
record's line as a run of one (`feed(rec)` reads it with ProgressSyntax.read), or a run of progress
lines the reader read fast from their bytes (logparse.read.records), with seqs that increase as the
analysis (logparse.pipeline) numbers its records. What a line says is read in logparse.read: the stage
markers of patterns/stages.yaml (through `MarkerMatcher`, after one trie alternation of their keywords
plus `step:` and `Training Progress` rejects almost every line), verl's step line (`step:N -
key:value - ...`, found anywhere in the message because it can be glued to a tqdm bar) and the
`Training Progress` tqdm bar.

Rules that come from how the logs are written (reference §1.5, §1.8, §4.2):
* Ray's dedup summaries (`... [repeated 3x across cluster]`, `Origin.repeat > 1`) arrive seconds
  late and repeat a line printed earlier, so they move no stage when that marker was already seen in
  the attempt (in an excerpt that lacks the first copy, the summary is the only sign and counts).
* After a completion marker, lines of the same attempt (late checkpoint flushes, dedup lines, the
  final tqdm refresh) are no new stage.
* An attempt starts at an `attempt_start` marker seen after some progress (any stage other than
  `launch`, a step line or a bar); attempt-start markers in a row (`ray init kwargs:` then `Started
  a local Ray instance`) are one start. `progress()` reports on the attempt that holds `end_seq`.

Bounds (StageTrackerConfig): transitions (seq, stage) for `stage_at` at most `max_transitions`
(10,000); step-line and tqdm marks at most `max_marks` (100,000) each, as columns of 8-byte values
(`_Marks`: 2.4 MB of steps and 3.2 MB of bars at most); attempt starts, completions, total-step and
resume records at most `max_events` (1,000) each. A full list drops its oldest half (and says so in
`notes`); one span per stage in the timeline. Everything else is O(1).

A run is applied line by line, or, when nothing in it changes how the lines after a line count (no
clock, no repeat count, plain markers, no checkpoint pending), a column at a time: the state after it
is the same either way (tested).
"""

from __future__ import annotations

import itertools
import math
from array import array
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from logparse.model import Progress
from logparse.observe.progression import AttemptStart, MarkColumns, Progression, SpanSeen, StepMark
from logparse.read.normalize import Record
from logparse.read.progress_syntax import ProgressRun, ProgressSyntax
from patterns.numbers import log_int
from patterns.stages import StageMarker, StageMarkers

STEP_TIMES_KEPT = 64  # the latest step lines' times kept (StageTracker.step_times)
MAX_SEGMENTS_PER_STAGE = 500  # stretches of one stage in the progression (closer ones are merged)
STEP_STAGE = "training"  # a step line or a progress-bar update means the training loop runs
LAUNCH_STAGE = "launch"
CHECKPOINT_STAGE = "checkpoint"
_NOT_NONE = (-1).__lt__  # a column value that is not -1 (none): at least 0
# a run at least this long is applied a column at a time (shorter: line by line, which costs less then)
MIN_BULK_LINES = 4
_NO_GROUPS: Mapping[str, str | None] = MappingProxyType({})  # a marker hit's named groups, when it has none


@dataclass(frozen=True)
class StageTrackerConfig:
    """Knobs of a StageTracker (frozen; the tracker's state lives apart, in the tracker)."""

    max_transitions: int = 10_000
    max_marks: int = 100_000
    max_events: int = 1_000
    step_time_window: int = 5  # seconds_per_step: median of the last N `timing_s/step` values


class _Span:
    __slots__ = ("first", "first_time", "last", "last_time", "stage")

    def __init__(self, stage: str, source: str, number: int, seq: int, time: float | None):
        self.stage = stage
        self.first = (source, number, seq)
        self.last = self.first
        self.first_time = self.last_time = time

    def see(self, source: str, number: int, seq: int, time: float | None) -> None:
        self.last = (source, number, seq)
        if time is not None:
            if self.first_time is None:
                self.first_time = time
            self.last_time = time

    def freeze(self) -> SpanSeen:
        return SpanSeen(self.stage, self.first, self.last, self.first_time, self.last_time)


class _Marks:
    """Step-line or progress-bar marks in arrival order, as columns: the record's seq, int values,
    float values (None as NaN: no float column holds a NaN otherwise). 8 bytes a value where a list of
    tuples cost about 150 bytes a mark. An int column becomes a list if a value does not fit 64 bits
    (a fuzzed `step:99999999999999999999`)."""

    __slots__ = ("floats", "ints", "seqs")

    def __init__(self, ints: int, floats: int) -> None:
        self.seqs = array("q")
        self.ints: list = [array("q") for _ in range(ints)]
        self.floats = [array("d") for _ in range(floats)]

    def __len__(self) -> int:
        return len(self.seqs)

    def append(self, seq: int, ints: tuple[int, ...], floats: tuple[float | None, ...]) -> None:
        self.seqs.append(seq)
        for i, value in enumerate(ints):
            try:
                self.ints[i].append(value)
            except OverflowError:
                self.ints[i] = [*self.ints[i], value]
        for column, value in zip(self.floats, floats, strict=True):
            column.append(math.nan if value is None else value)

    def extend(
        self,
        seqs: Sequence[int],
        ints: tuple[Sequence[int], ...],
        floats: tuple[Sequence[float], ...],
        cap: int,
    ) -> bool:
        """`append` and `trim(cap)` of each mark in turn, a column at a time (no value is None: NaN
        stands for it; every int fits 64 bits); True if a trim dropped marks."""
        dropped = False
        done, n = 0, len(seqs)
        while done < n:
            take = min(n - done, cap + 1 - len(self.seqs))  # (a trim leaves at most `cap`)
            end = done + take
            self.seqs.extend(seqs[done:end])
            for column, values in zip(self.ints, ints, strict=True):
                column.extend(values[done:end])
            for column, values in zip(self.floats, floats, strict=True):
                column.extend(values[done:end])
            done = end
            dropped = self.trim(cap) or dropped
        return dropped

    def trim(self, cap: int) -> bool:
        """Drop the oldest half once more than `cap` are held; True if it did."""
        n = len(self.seqs)
        if n <= cap:
            return False
        half = n // 2
        for column in (self.seqs, *self.ints, *self.floats):
            del column[:half]
        return True

    def freeze(self) -> MarkColumns:
        """A copy of the columns, for a Progression."""
        return MarkColumns(
            array("q", self.seqs),
            tuple(array("q", c) if isinstance(c, array) else list(c) for c in self.ints),
            tuple(array("d", c) for c in self.floats),
        )


def _trim(items: list, cap: int) -> bool:
    """Drop the oldest half of `items` once it holds more than `cap`; True if it did."""
    if len(items) > cap:
        del items[: len(items) // 2]
        return True
    return False


class StageTracker:
    """Bounded state machine over records: stage events, steps, progress bar, attempts, completion."""

    def __init__(
        self,
        markers: StageMarkers | None = None,
        config: StageTrackerConfig | None = None,
        syntax: ProgressSyntax | None = None,
    ):
        """`syntax`: what the records are read with, whose markers the runs' marker numbers name (a
        ProgressSyntax of `markers` by default)."""
        self.config = config or StageTrackerConfig()
        self.syntax = syntax or ProgressSyntax(markers)
        self.matcher = self.syntax.matcher
        self.keywords: tuple[str, ...] = self.syntax.keywords  # a line without any of these changes nothing
        self._spans: dict[str, _Span] = {}
        self._transition_seqs: list[int] = []
        self._transition_stages: list[str] = []
        self._transition_at: list[tuple[str, int, float | None]] = []  # (source, line, time) of each
        self._last_at: tuple[int, str, int, float | None] | None = None  # (seq, source, line, time) last seen
        # the step whose checkpoint is being written (a marker's `checkpoint_step`: `.../global_step_60/...`),
        # while the job is in that checkpoint stage; see `apply`
        self._checkpoint_step: int | None = None
        self._steps = _Marks(1, 1)  # seq; step; timing_s/step
        # the highest step line of the attempt so far (its record and step; the latest of equals; None:
        # none yet): what a finding's "training went on after it" is measured against. Only this
        # tracker writes it (a plain attribute: every catalog hit reads it). A report's `last_step` is
        # another thing, an int: the progression's `progress().last_step` (a resumed run's step counts).
        self.last_step_line: StepMark | None = None
        self._bars = _Marks(2, 1)  # seq; n, total; seconds per step
        # seqs of the lines that show the job still at work without a step (a request answered, an
        # engine generating: patterns/stages.yaml's `activity` markers), in order
        self._activity = array("q")
        self._activity_markers = frozenset(i for i, m in enumerate(self.matcher.markers) if m.activity)
        self._plain_markers = [self.syntax.plain_marker(i) for i in range(len(self.matcher.markers))]
        # (step, time) of the latest step lines that carry a timestamp: the run's own step times, and
        # when its last step was (a stall's silence; logparse.decide.stall)
        self.step_times: deque[tuple[int, float]] = deque(maxlen=STEP_TIMES_KEPT)
        self._attempt_starts: list[AttemptStart] = []
        self.attempts_started = 0  # every attempt start seen (the list above is bounded), for a cheap check
        self._completions: list[int] = []
        self._totals: list[tuple[int, int]] = []
        self._resumes: list[tuple[int, int]] = []
        self._seen_in_attempt: set[str] = set()
        self._progress_since_start = True  # so that the first attempt-start marker opens an attempt
        self._completed = False
        self._dropped: set[str] = set()
        self.last_seq = 0

    # -- feeding ---------------------------------------------------------------------------------
    def feed(self, rec: Record, keywords: Iterable[str] | None = None) -> bool:
        """`apply` of what the record says (ProgressSyntax.read; `keywords`: those of `self.keywords`
        that a scanner's prefilter found in the raw line, None: not known). Is the record a progress
        line (a stage marker, a step line, a bar)?"""
        run = self.syntax.read(rec, keywords)
        if run is None:
            return False
        self.apply(rec.seq, run)
        return run.says

    def apply(self, seq: int, run: ProgressRun) -> None:
        """The one way progress facts change the tracker: line j of `run` is record seq + j. A run of at
        least MIN_BULK_LINES whose lines read no clock, no repeat count and only plain markers, with no
        checkpoint pending (`_bulk`), is applied a column at a time; any other line by line. The state
        after it is that after each line applied as a run of one (tested)."""
        n = len(run.numbers)
        if n >= MIN_BULK_LINES and self._bulk(run):
            self._apply_bulk(seq, run)
            return
        for j in range(n):
            self._apply_line(seq + j, run, j)

    def _bulk(self, run: ProgressRun) -> bool:
        """May `run` be applied a column at a time (_apply_bulk)? Not when a bar may be a late redraw from
        before a checkpoint (see _apply_line), nor with a marker that starts an attempt, completes the run
        or names a repeat stage (each changes how the lines after it count)."""
        if run.time is not None or run.repeat != 1 or run.groups or self._checkpoint_step is not None:
            return False
        plain = self._plain_markers
        return all(plain[m] for m in set(run.markers) if m >= 0)

    def _apply_line(self, seq: int, run: ProgressRun, j: int) -> None:
        """What line j of `run`, record `seq`, changes."""
        self.last_seq = seq
        source, number, time, repeat = run.source, run.numbers[j], run.time, run.repeat
        index = run.markers[j]
        n = run.bar_n[j]
        marker = self.matcher.markers[index] if index >= 0 else None
        if (
            marker is not None
            and n >= 0
            and self._checkpoint_step is not None
            and n < self._checkpoint_step
            and marker.stage == STEP_STAGE
        ):
            # verl writes step S's checkpoint inside step S, before the bar counts S done: a bar that
            # counts fewer, printed after the save began, is the bar as it stood before (tqdm's line is
            # flushed late, and the driver's output and the workers' reach the log by different paths),
            # not the loop going on. The job is still in the checkpoint.
            marker = None
        if marker is not None:
            self._on_marker(seq, source, number, time, repeat, marker, run.groups or _NO_GROUPS)
        step = run.steps[j]
        if step >= 0:
            self._mark_step(seq, step, run.seconds[j], time)
            if not self._completed and repeat == 1:
                self._record_stage(source, number, seq, time, STEP_STAGE)
        if n >= 0:
            if self._transition_stages and repeat == 1:  # a progress bar: still in the loop
                self._last_at = (seq, source, number, time)
            self._bars.append(seq, (n, run.bar_total[j]), (run.bar_rate[j],))
            if self._bars.trim(self.config.max_marks):
                self._dropped.add("progress-bar")
            self._progress_since_start = True

    def _mark_step(self, seq: int, step: int, seconds: float | None, time: float | None) -> None:
        """A step the loop reached: verl's step line, or a marker that reads one (`step` group: a
        Megatron `iteration N/M` line, DeepSpeed's `step=N, skipped=...`). `seconds`: None or NaN, none."""
        if time is not None:
            self.step_times.append((step, time))
        self._steps.append(seq, (step,), (seconds,))
        if self.last_step_line is None or step >= self.last_step_line.step:
            self.last_step_line = StepMark(seq, step)
        if self._steps.trim(self.config.max_marks):
            self._dropped.add("step")
        self._progress_since_start = True

    def _apply_bulk(self, seq: int, run: ProgressRun) -> None:
        """`apply` of a run a column at a time (`_bulk`: no time, no repeat count, plain markers, no
        checkpoint pending): the marks are appended a column at a time, and of the stage records of a
        stretch of lines in one stage only the first and the last are made (those between change only
        what the last one sets again)."""
        source, numbers, steps, markers, bar_n = run.source, run.numbers, run.steps, run.markers, run.bar_n
        m = len(numbers)
        lines = range(m)
        is_step = list(map(_NOT_NONE, steps))
        step_at = list(itertools.compress(lines, is_step))
        marker_at = list(itertools.compress(lines, map(_NOT_NONE, markers)))
        kinds_at = set(markers) if marker_at else ()  # (one C-level pass over the run)
        if marker_at and not self._activity_markers.isdisjoint(kinds_at):
            # (work lines move no stage: their seqs are kept apart, as _on_marker keeps them)
            self._add_activity([seq + j for j in marker_at if markers[j] in self._activity_markers])
            marker_at = [j for j in marker_at if markers[j] not in self._activity_markers]
        is_bar = list(map(_NOT_NONE, bar_n))
        bar_at = list(itertools.compress(lines, is_bar))
        last_event = -1  # the last line that recorded a stage
        if not self._completed and (step_at or marker_at):
            known = self.matcher.markers
            kinds = {known[i] for i in kinds_at if i >= 0 and i not in self._activity_markers}
            self._seen_in_attempt.update(marker.id for marker in kinds)
            stages = {marker.stage for marker in kinds}
            if step_at:
                stages.add(STEP_STAGE)
            if len(stages) == 1:  # one stretch: its first and last line
                stage = stages.pop()
                first = min(step_at[:1] + marker_at[:1])
                last_event = max(step_at[-1:] + marker_at[-1:])
                self._record_stage(source, numbers[first], seq + first, None, stage)
                if last_event != first:
                    self._record_stage(source, numbers[last_event], seq + last_event, None, stage)
            else:
                last_event = self._record_stretches(seq, source, numbers, steps, markers)
        if bar_at and bar_at[-1] > last_event and self._transition_stages:
            j = bar_at[-1]
            self._last_at = (seq + j, source, numbers[j], None)
        cap = self.config.max_marks
        if step_at:
            if self._steps.extend(
                array("q", [seq + j for j in step_at]),
                (array("q", itertools.compress(steps, is_step)),),
                (array("d", itertools.compress(run.seconds, is_step)),),
                cap,
            ):
                self._dropped.add("step")
            self._progress_since_start = True
            top = max(steps[j] for j in step_at)
            if self.last_step_line is None or top >= self.last_step_line.step:
                last = next(j for j in reversed(step_at) if steps[j] == top)
                self.last_step_line = StepMark(seq + last, top)
        if bar_at:
            if self._bars.extend(
                array("q", [seq + j for j in bar_at]),
                (
                    array("q", itertools.compress(bar_n, is_bar)),
                    array("q", itertools.compress(run.bar_total, is_bar)),
                ),
                (array("d", itertools.compress(run.bar_rate, is_bar)),),
                cap,
            ):
                self._dropped.add("progress-bar")
            self._progress_since_start = True
        self.last_seq = seq + m - 1

    def _record_stretches(
        self, seq: int, source: str, numbers: Sequence[int], steps: Sequence[int], markers: Sequence[int]
    ) -> int:
        """_apply_bulk's stage records for lines of more than one stage: the first and the last line of
        each stretch in one stage; the last line that recorded one."""
        known = self.matcher.markers
        current = None
        first = last = -1
        for j, (marker, step) in enumerate(zip(markers, steps, strict=True)):
            # (a marker's record comes before a step line's, as in _apply_line)
            for stage in (known[marker].stage if marker >= 0 else None, STEP_STAGE if step >= 0 else None):
                if stage is None:
                    continue
                if stage != current:
                    if current is not None and last != first:
                        self._record_stage(source, numbers[last], seq + last, None, current)
                    self._record_stage(source, numbers[j], seq + j, None, stage)
                    current, first = stage, j
                last = j
        if current is not None and last != first:
            self._record_stage(source, numbers[last], seq + last, None, current)
        return last

    def _on_marker(
        self,
        seq: int,
        source: str,
        number: int,
        time: float | None,
        repeat: int,
        marker: StageMarker,
        groups: Mapping[str, str | None],
    ) -> None:
        if marker.activity:
            self._add_activity((seq,))
            return
        if marker.attempt_start and repeat == 1:
            self._start_attempt(seq, source, number, time)
        if groups.get("total_steps"):
            self._add_event(self._totals, (seq, log_int(groups["total_steps"])), "total")
        if groups.get("resume_step"):
            self._add_event(self._resumes, (seq, log_int(groups["resume_step"])), "resume")
        late_copy = repeat > 1 and marker.id in self._seen_in_attempt
        if late_copy or (self._completed and not marker.attempt_start):
            return
        stage = marker.stage
        if marker.repeat_stage is not None and marker.id in self._seen_in_attempt:
            stage = marker.repeat_stage
        self._seen_in_attempt.add(marker.id)
        if groups.get("step"):
            self._mark_step(seq, log_int(groups["step"]), None, time)
        if stage == CHECKPOINT_STAGE and groups.get("checkpoint_step"):
            self._checkpoint_step = log_int(groups["checkpoint_step"])
        self._record_stage(source, number, seq, time, stage)
        if marker.completion:
            self._completed = True
            self._add_event(self._completions, seq, "completion")

    def _add_activity(self, seqs: Sequence[int]) -> None:
        self._activity.extend(seqs)
        if len(self._activity) > self.config.max_marks:
            del self._activity[: len(self._activity) // 2]
            self._dropped.add("activity")
        self._progress_since_start = True

    def _start_attempt(self, seq: int, source: str, number: int, time: float | None) -> None:
        if not self._progress_since_start:
            return  # the same start, told by a second launcher line
        self._add_event(self._attempt_starts, AttemptStart(seq, source, number, time), "attempt")
        self.attempts_started += 1
        self._progress_since_start = False
        self._seen_in_attempt.clear()
        self._completed = False

    def _add_event(self, items: list, item: object, what: str) -> None:
        items.append(item)
        if _trim(items, self.config.max_events):
            self._dropped.add(what)

    def _record_stage(self, source: str, number: int, seq: int, time: float | None, stage: str) -> None:
        # where the progression was last seen: only lines that move or confirm a stage count (a late
        # dedup copy of an earlier marker, ignored above, must not stretch the last stage to itself)
        self._last_at = (seq, source, number, time)
        if stage != CHECKPOINT_STAGE:
            self._checkpoint_step = None
        span = self._spans.get(stage)
        if span is None:
            self._spans[stage] = _Span(stage, source, number, seq, time)
        else:
            span.see(source, number, seq, time)
        if not self._transition_stages or self._transition_stages[-1] != stage:
            self._transition_seqs.append(seq)
            self._transition_stages.append(stage)
            self._transition_at.append((source, number, time))
            if len(self._transition_seqs) > self.config.max_transitions:
                half = len(self._transition_seqs) // 2
                del self._transition_seqs[:half]
                del self._transition_stages[:half]
                del self._transition_at[:half]
                self._dropped.add("transition")
        if stage != LAUNCH_STAGE:
            self._progress_since_start = True

    # -- questions -------------------------------------------------------------------------------
    @property
    def attempt_starts(self) -> list[int]:
        """Seqs of the records that started each attempt (see the module docstring)."""
        return [a.seq for a in self._attempt_starts]

    @property
    def attempt_count(self) -> int:
        """len(attempt_starts), without building the list (asked after every record)."""
        return len(self._attempt_starts)

    @property
    def attempts(self) -> list[AttemptStart]:
        """Where each attempt started, in order."""
        return list(self._attempt_starts)

    @property
    def notes(self) -> list[str]:
        if not self._dropped:
            return []
        kinds = ", ".join(sorted(self._dropped))
        c = self.config
        note = (
            f"progress tracking kept only the most recent {kinds} records (limits: {c.max_transitions} "
            f"stage transitions, {c.max_marks} step/bar marks, {c.max_events} events)"
        )
        return [note]

    def forget_last_step(self) -> None:
        """A new attempt of the job begins (the analysis decides when): its steps count afresh."""
        self.last_step_line = None
        self.step_times.clear()

    def stepped_at(self, seq: int) -> bool:
        """Was record `seq` a step line?"""
        seqs = self._steps.seqs
        return bool(seqs) and seqs[-1] == seq

    def freeze(self) -> Progression:
        """What the tracker kept, as a frozen Progression (logparse.observe.progression): the questions the
        decision asks are answered there, from a value the scan does not change."""
        return Progression(
            steps=self._steps.freeze(),
            bars=self._bars.freeze(),
            activity=array("q", self._activity),
            spans=tuple(span.freeze() for span in self._spans.values()),
            transition_seqs=tuple(self._transition_seqs),
            transition_stages=tuple(self._transition_stages),
            transition_at=tuple(self._transition_at),
            last_at=self._last_at,
            attempt_starts=tuple(self._attempt_starts),
            completions=tuple(self._completions),
            totals=tuple(self._totals),
            resumes=tuple(self._resumes),
            last_seq=self.last_seq,
            last_step_line=self.last_step_line,
            step_time_window=self.config.step_time_window,
            notes=tuple(self.notes),
        )

    def progress(self) -> Progress:
        """The job's progress so far (a live scan's status line): its Progression's."""
        return self.freeze().progress()

    @property
    def current_stage(self) -> str | None:
        """The last stage seen so far (a live scan's ALERT)."""
        return self._transition_stages[-1] if self._transition_stages else None
