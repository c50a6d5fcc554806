"""Where a job got to: stages reached, last step, total steps, completion, restarts.

`StageTracker.feed(rec)` is called for every record, in order (records carry increasing `seq`, as
the Scanner sets them). One `re` alternation of the stage markers' keywords plus `step:` and
`Training Progress` (factored as a trie, `keyword_pattern`) rejects almost every line with a single
C-level search; only the lines it accepts are examined (`keywords` lists those literals, for a
scanner that prefilters raw chunks before decoding lines): the stage markers of
patterns/stages.yaml (through `MarkerMatcher`), verl's step line (`step:N - key:value - ...`, found
anywhere in the message because it can be glued to a tqdm bar) and the `Training Progress` tqdm bar.

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

`parse(message)` and `apply(...)` are `feed` in two halves: what a line says (`ProgressLine`), and
what that changes. A scanner that parses progress lines apart from its records
(logparse.read.progress_lines) applies them with the same `apply`.
"""

from __future__ import annotations

import datetime
import itertools
import math
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from logparse.model import Progress, StageSpan
from logparse.read.normalize import Record
from logparse.read.progress_syntax import NOTHING, MarkerHit, ProgressLine, ProgressSyntax
from patterns.numbers import log_int
from patterns.stages import StageMarkers

STEP_TIMES_KEPT = 64  # the latest step lines' times kept (StageTracker.step_times)
MAX_SEGMENTS_PER_STAGE = 500  # stretches of one stage in the progression (closer ones are merged)
STEP_STAGE = "training"  # a step line or a progress-bar update means the training loop runs
LAUNCH_STAGE = "launch"
CHECKPOINT_STAGE = "checkpoint"
_NOT_NONE = (-1).__lt__  # a column value that is not -1 (none): at least 0


def median(values: list[float]) -> float:
    """statistics.median of a non-empty list, as it computes it (that module, with fractions and decimal,
    took 2.5 ms of every start-up for this one call)."""
    data = sorted(values)
    n = len(data)
    return data[n // 2] if n % 2 == 1 else (data[n // 2 - 1] + data[n // 2]) / 2


@dataclass(frozen=True)
class StageTrackerConfig:
    """Knobs of a StageTracker (frozen; the tracker's state lives apart, in the tracker)."""

    max_transitions: int = 10_000
    max_marks: int = 100_000
    max_events: int = 1_000
    step_time_window: int = 5  # seconds_per_step: median of the last N `timing_s/step` values


@dataclass(frozen=True)
class AttemptStart:
    """The record that started an attempt (a job start or restart)."""

    seq: int
    source: str
    line: int
    time: float | None


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


def _trim(items: list, cap: int) -> bool:
    """Drop the oldest half of `items` once it holds more than `cap`; True if it did."""
    if len(items) > cap:
        del items[: len(items) // 2]
        return True
    return False


class StageTracker:
    """Bounded state machine over records: stage events, steps, progress bar, attempts, completion."""

    def __init__(self, markers: StageMarkers | None = None, config: StageTrackerConfig | None = None):
        self.config = config or StageTrackerConfig()
        self.syntax = ProgressSyntax(markers)
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
        # (seq, step) of the highest step line of the attempt so far (the latest of equals; None: none
        # yet); what a finding's "training went on after it" is measured against. Only this tracker
        # writes it (a plain attribute: every catalog hit reads it). `progress().last_step` is what a
        # report shows (a resumed run's step counts there too).
        self.last_step: tuple[int, int] | None = None
        self._bars = _Marks(2, 1)  # seq; n, total; seconds per step
        # seqs of the lines that show the job still at work without a step (a request answered, an
        # engine generating: patterns/stages.yaml's `activity` markers), in order
        self._activity = array("q")
        self._rises: tuple[int, int, array] | None = None  # (bars kept, last bar's seq, _bar_rises())
        self._activity_markers = frozenset(i for i, m in enumerate(self.matcher.markers) if m.activity)
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
        """`keywords`: those of `self.keywords` that a scanner's prefilter found in the raw line (None:
        not known, the message is searched for all of them). Is the record a progress line (a stage
        marker, a step line, a bar)?"""
        message = rec.message
        if keywords is None and not self.matcher.prefilter.search(message):
            return False
        line = rec.line
        origin = rec.origin
        said = self.parse(message, keywords)
        self.apply(rec.seq, line.source, line.number, origin.time, origin.repeat, said)
        return said is not NOTHING

    def parse(self, message: str, keywords: Iterable[str] | None = None) -> ProgressLine:
        """What `message` says (logparse.read.progress_syntax): depends on the message alone."""
        return self.syntax.parse(message, keywords)

    def apply(
        self, seq: int, source: str, number: int, time: float | None, repeat: int, line: ProgressLine
    ) -> None:
        """What the line `seq` (`source`:`number`, its time and Ray repeat count) that says `line`
        changes: the second half of `feed`."""
        self.last_seq = seq
        hit = line.hit
        if (
            hit is not None
            and line.bar is not None
            and self._checkpoint_step is not None
            and line.bar[0] < self._checkpoint_step
            and hit.marker.stage == STEP_STAGE
        ):
            # verl writes step S's checkpoint inside step S, before the bar counts S done: a bar that
            # counts fewer, printed after the save began, is the bar as it stood before (tqdm's line is
            # flushed late, and the driver's output and the workers' reach the log by different paths),
            # not the loop going on. The job is still in the checkpoint.
            hit = None
        if hit is not None:
            self._on_marker(seq, source, number, time, repeat, hit)
        if line.step is not None:
            self._mark_step(seq, line.step, line.seconds, time)
            if not self._completed and repeat == 1:
                self._record_stage(source, number, seq, time, STEP_STAGE)
        if line.bar is not None:
            if self._transition_stages and repeat == 1:  # a progress bar: still in the loop
                self._last_at = (seq, source, number, time)
            n, total, seconds = line.bar
            self._bars.append(seq, (n, total), (seconds,))
            if self._bars.trim(self.config.max_marks):
                self._dropped.add("progress-bar")
            self._progress_since_start = True

    def _mark_step(self, seq: int, step: int, seconds: float | None, time: float | None) -> None:
        """A step the loop reached: verl's step line, or a marker that reads one (`step` group: a
        Megatron `iteration N/M` line, DeepSpeed's `step=N, skipped=...`)."""
        if time is not None:
            self.step_times.append((step, time))
        self._steps.append(seq, (step,), (seconds,))
        if self.last_step is None or step >= self.last_step[1]:
            self.last_step = (seq, step)
        if self._steps.trim(self.config.max_marks):
            self._dropped.add("step")
        self._progress_since_start = True

    @property
    def checkpoint_pending(self) -> bool:
        """Is the job in a checkpoint of a known step? Then a progress bar may be a late redraw from
        before it (see `apply`), which `apply_run` does not tell: progress lines go one by one."""
        return self._checkpoint_step is not None

    def plain_marker(self, index: int) -> bool:
        """ProgressSyntax.plain_marker: may a line of marker `index` go in an `apply_run`?"""
        return self.syntax.plain_marker(index)

    def apply_run(
        self,
        seq: int,
        source: str,
        numbers: Sequence[int],
        steps: Sequence[int],
        seconds: Sequence[float],
        markers: Sequence[int],
        bar_n: Sequence[int],
        bar_total: Sequence[int],
        bar_rate: Sequence[float],
    ) -> None:
        """`apply` of len(numbers) lines in a row: line j is record seq + j, line numbers[j] of `source`,
        with no time and no Ray repeat count; it says step steps[j] (-1: none) with seconds[j], the
        marker markers[j] of self.matcher.markers (-1: none; a plain_marker, with no named group) and
        the bar (bar_n[j], bar_total[j], bar_rate[j]) (bar_n -1: none); NaN stands for None. The
        state after it is that after `apply` of each line in turn: the marks are appended a column at
        a time, and of the stage records of a stretch of lines in one stage only the first and the
        last are made (those between change only what the last one sets again)."""
        m = len(numbers)
        if not m:
            return
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
                (array("d", itertools.compress(seconds, is_step)),),
                cap,
            ):
                self._dropped.add("step")
            self._progress_since_start = True
            top = max(steps[j] for j in step_at)
            if self.last_step is None or top >= self.last_step[1]:
                last = next(j for j in reversed(step_at) if steps[j] == top)
                self.last_step = (seq + last, top)
        if bar_at:
            if self._bars.extend(
                array("q", [seq + j for j in bar_at]),
                (
                    array("q", itertools.compress(bar_n, is_bar)),
                    array("q", itertools.compress(bar_total, is_bar)),
                ),
                (array("d", itertools.compress(bar_rate, is_bar)),),
                cap,
            ):
                self._dropped.add("progress-bar")
            self._progress_since_start = True
        self.last_seq = seq + m - 1

    def _record_stretches(
        self, seq: int, source: str, numbers: Sequence[int], steps: Sequence[int], markers: Sequence[int]
    ) -> int:
        """apply_run's stage records for lines of more than one stage: the first and the last line of
        each stretch in one stage; the last line that recorded one."""
        known = self.matcher.markers
        current = None
        first = last = -1
        for j, (marker, step) in enumerate(zip(markers, steps, strict=True)):
            # (a marker's record comes before a step line's, as in apply)
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
        self, seq: int, source: str, number: int, time: float | None, repeat: int, hit: MarkerHit
    ) -> None:
        marker = hit.marker
        if marker.activity:
            self._add_activity((seq,))
            return
        if marker.attempt_start and repeat == 1:
            self._start_attempt(seq, source, number, time)
        groups = hit.groups
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
        self.last_step = None
        self.step_times.clear()

    def stepped_at(self, seq: int) -> bool:
        """Was record `seq` a step line?"""
        seqs = self._steps.seqs
        return bool(seqs) and seqs[-1] == seq

    def went_on_after(self, seq: int, ignore: frozenset[str] = frozenset(), completion: bool = True) -> bool:
        """Did the job show progress after record `seq`: a step line, a progress bar, work (an activity
        line), a completion marker (unless `completion` is False), or a stage (not in `ignore`) it had
        not reached before?"""
        if (self._steps.seqs and self._steps.seqs[-1] > seq) or self._bar_moved(seq):
            return True
        if self._activity and self._activity[-1] > seq:
            return True
        if completion and self._completions and self._completions[-1] > seq:
            return True
        return any(span.first[2] > seq and stage not in ignore for stage, span in self._spans.items())

    def went_on_between(self, seq: int, until: int, ignore: frozenset[str] = frozenset()) -> bool:
        """went_on_after, counting only what came between record `seq` and record `until` (both left
        out): did the job show progress before `until` came?"""
        for seqs in (self._steps.seqs, self._activity):
            i = bisect_right(seqs, seq)
            if i < len(seqs) and seqs[i] < until:
                return True
        if self._bar_moved(seq, until):
            return True
        if any(seq < c < until for c in self._completions):
            return True
        return any(seq < span.first[2] < until and stage not in ignore for stage, span in self._spans.items())

    def _bar_moved(self, seq: int, until: int | None = None) -> bool:
        """Did the progress bar count more than the bar before it, after record `seq` and before `until`
        (None: the end)? (A redraw of the same count, flushed late, is no progress.)"""
        rises = self._bar_rises()
        i = bisect_right(rises, seq)
        return i < len(rises) and (until is None or rises[i] < until)

    def _bar_rises(self) -> array:
        """The seqs of the kept bars that count more than the kept bar before them (the first counts):
        made when the decision first asks, not line by line, and again only once more bars came."""
        seqs = self._bars.seqs
        key = (len(seqs), seqs[-1] if seqs else -1)
        if self._rises is None or self._rises[:2] != key:
            counts = self._bars.ints[0]
            before = [-1, *counts[:-1]] if len(counts) else []
            rises = array("q", (s for s, n, b in zip(seqs, counts, before, strict=True) if n > b))
            self._rises = (*key, rises)
        return self._rises[2]

    @property
    def has_loop(self) -> bool:
        """Did the job show a training loop (a step line, a progress bar, a training-loop marker)?"""
        return bool(self._steps.seqs or self._bars.seqs or STEP_STAGE in self._spans)

    def work_after(self, seq: int) -> int:
        """How many activity lines (work without a step: a request answered) came after record `seq`."""
        return len(self._activity) - bisect_right(self._activity, seq)

    def completed_after(self, seq: int) -> bool:
        """Was a completion marker seen after record `seq`?"""
        return bool(self._completions) and self._completions[-1] > seq

    def is_step_line(self, seq: int) -> bool:
        """Is record `seq` a step line the loop printed (one of the step lines kept)?"""
        seqs = self._steps.seqs
        i = bisect_left(seqs, seq)
        return i < len(seqs) and seqs[i] == seq

    def completed_before(self, seq: int) -> bool:
        """Was a completion marker seen before record `seq` (in the same attempt)?"""
        starts = [a.seq for a in self._attempt_starts if a.seq <= seq]
        begin = starts[-1] if starts else -1
        return any(begin <= c < seq for c in self._completions)

    def training_started_before(self, seq: int) -> bool:
        """Had the training loop begun (a step line, a progress bar, a training-loop marker) by `seq`?"""
        for marks in (self._steps, self._bars):
            if marks.seqs and marks.seqs[0] < seq:
                return True
        span = self._spans.get(STEP_STAGE)
        return span is not None and span.first[2] < seq

    def loop_began_before(self, seq: int) -> bool:
        """Had the training loop begun before record `seq` in the attempt that holds it (a step, a
        progress bar or a training-loop marker after that attempt's start)? What a stage source asks:
        an earlier attempt's steps say nothing of where a restart failed."""
        starts = [a.seq for a in self._attempt_starts if a.seq <= seq]
        begin = starts[-1] if starts else -1
        for marks in (self._steps, self._bars):
            j = bisect_left(marks.seqs, begin)
            if j < len(marks.seqs) and marks.seqs[j] < seq:
                return True
        k = bisect_left(self._transition_seqs, begin)
        for at, stage in zip(self._transition_seqs[k:], self._transition_stages[k:], strict=True):
            if at >= seq:
                return False
            if stage == STEP_STAGE:
                return True
        return False

    def stage_at(self, seq: int) -> str | None:
        """The last stage seen at or before record `seq` (None: none yet, or older than what is kept)."""
        i = bisect_right(self._transition_seqs, seq) - 1
        return self._transition_stages[i] if i >= 0 else None

    def segments(self, max_per_stage: int = MAX_SEGMENTS_PER_STAGE) -> tuple[StageSpan, ...]:
        """The job's progression: each stretch of the log in one stage, from the record that entered
        the stage to the record that entered the next (the last stretch ends at the last record seen),
        in order. A stage is where the job is until another begins, so a late line (Ray's dedup flush,
        a worker's buffered print) is a short stretch of its own and never stretches a stage over the
        run. Stretches of one stage closer together than 1/max_per_stage of the log are merged (a
        stage that recurs every step is drawn as one bar where its steps are too close to tell apart),
        which bounds each stage to about max_per_stage stretches."""
        if not self._transition_seqs or self._last_at is None:
            return ()
        ends = [
            (seq, *at) for seq, at in zip(self._transition_seqs[1:], self._transition_at[1:], strict=True)
        ]
        ends.append(self._last_at)
        raw = [
            (stage, (seq, *at), end)
            for stage, seq, at, end in zip(
                self._transition_stages, self._transition_seqs, self._transition_at, ends, strict=True
            )
        ]
        gap = (self._last_at[0] - self._transition_seqs[0]) / max(1, max_per_stage)
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

    def progress(self, end_seq: int | None = None, failed: bool = False) -> Progress:
        """Progress of the attempt that holds `end_seq` (default: the end of the scan), as of end_seq.
        `failed`: a failure is known (then no stopped-without-error note is made)."""
        end = self.last_seq if end_seq is None else end_seq
        starts = [a.seq for a in self._attempt_starts if a.seq <= end]
        begin = starts[-1] if starts else -1

        def window(items: list) -> list:
            return [x for x in items if begin <= (x[0] if isinstance(x, tuple) else x) <= end]

        steps = self._steps.window(begin, end)
        bars = self._bars.window(begin, end)
        resumes = window(self._resumes)
        last_step = None
        if steps or resumes:
            highest = [r[1] for r in resumes]
            if steps:
                highest.append(max(self._steps.ints[0][steps.start : steps.stop]))
            last_step = max(highest)
        elif bars:
            last_step = self._bars.ints[0][bars[-1]]
        totals = window(self._totals) or [t for t in self._totals if t[0] <= end]
        total_steps = totals[-1][1] if totals else (self._bars.ints[1][bars[-1]] if bars else None)
        if total_steps is not None and last_step is not None and last_step > total_steps:
            # a total the run went past (`step 948 of 435`: a resumed run's longer schedule, a bar of
            # another loop) is no total of this run: unknown
            total_steps = None
        times = self._steps.last_float(0, steps, self.config.step_time_window)
        seconds = median(times) if times else None
        if seconds is None:
            rates = self._bars.last_float(0, bars)
            seconds = rates[-1] if rates else None
        spans = sorted((s for s in self._spans.values() if s.first[2] <= end), key=lambda span: span.first[2])
        timeline = tuple(s.freeze() for s in spans)
        progress = Progress(
            stage_reached=self.stage_at(end),
            last_step=last_step,
            total_steps=total_steps,
            completed=bool(window(self._completions)),
            seconds_per_step=seconds,
            timeline=timeline,
            attempts=len(starts),
        )
        if not progress.completed and not failed:
            served = (
                0 if self.has_loop else bisect_right(self._activity, end) - bisect_left(self._activity, begin)
            )
            progress = replace(progress, note=stopped_note(progress, served))
        return progress

    def snapshot(
        self, failed: bool, failure_seq: int | None, reached: str | None, say_stopped: bool = True
    ) -> Progress:
        """The job's progress as a report shows it: the last attempt's, as of the end of the scan
        (`reached`: the stage it reached, as the analysis decided it), with the step the failure at
        `failure_seq` came after, and the stretches of the progression (`segments`). `say_stopped`:
        say so when the job shows neither a failure nor its completion."""
        p = self.progress(None, failed=failed)
        failure_step = self.progress(failure_seq, failed=True).last_step if failure_seq is not None else None
        return replace(
            p,
            stage_reached=reached,
            failure_step=failure_step,
            note=p.note if say_stopped else None,
            segments=self.segments(),
        )


def stopped_note(progress: Progress, served: int = 0) -> str:
    """The sentence for a log that ends with neither an error nor a completion marker. `served`: the
    requests a job with no training loop answered (a server: it has no training step to stop at)."""
    if progress.completed:
        return ""
    if served and progress.last_step is None:
        return (
            f"a job with no training loop that answered {served} request(s), stopped with no error: it was "
            f"still running, or was stopped from outside (time limit, OOM killer, cancel)"
        )
    if progress.last_step is not None:
        total = f" of {progress.total_steps}" if progress.total_steps else ""
        at = f"stopped at step {progress.last_step}{total}"
    else:
        at = "stopped before the first training step"
    where = f" in {progress.stage_reached}" if progress.stage_reached else ""
    return (
        f"{at}{where} with no error and no completion marker: the job was still running, or was "
        f"stopped from outside (time limit, OOM killer, cancel)"
    )


def iso_time(t: float | None) -> str | None:
    """Seconds since the epoch (as the normaliser reads a line's time) as `YYYY-MM-DDTHH:MM:SS`."""
    if t is None:
        return None
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
