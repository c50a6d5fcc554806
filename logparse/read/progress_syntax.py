"""What a progress line says, without any state: stage markers (patterns/stages.yaml), verl's step
line (`step:N - ...`, found anywhere in the message because it can be glued to a tqdm bar) and the
`Training Progress` tqdm bar.

`ProgressRun` is the one progress fact that leaves `read/`: what progress lines in a row of one input
say (steps, step times, stage markers, bars, the step lines' metric rows, each line's process). A
Record's line is read into a run of one here (`ProgressSyntax.read`); the fast path reads runs of
candidate lines from their bytes (logparse.read.progress_lines, logparse.read.records) into the same
type, and reports are the same either way (tested). The observers consume only this type: the stage
tracker (StageTracker.apply), the metrics (MetricsTracker.take), the environment (its processes).
Where a step line is read, for a record and for the fast path alike, is this module and
logparse.read.steps (StepParser): a new shape of step line is taught there once.
"""

from __future__ import annotations

import functools
import math
import re
from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from logparse.read.normalize import Record
from logparse.read.prefilter import compile_keywords
from logparse.read.steps import (
    COUNTER_KEYWORDS,
    STEP_KEYWORD,
    STEP_RE,
    STEP_TIME_KEY,
    CounterLines,
    StepParser,
)
from patterns.numbers import log_int
from patterns.progress import progress_wordings
from patterns.stages import StageMarker, StageMarkers, builtin_stage_markers

# The step time's and the bar's syntax are patterns/progress.yaml's, compiled here once.
_P = progress_wordings()
TQDM_KEYWORD = _P.literal("tqdm-keyword")
STEP_TIME_RE = re.compile(_P.regex("step-time"))
TQDM_RE = re.compile(_P.regex("tqdm-bar"))
RATE_RE = re.compile(_P.regex("tqdm-rate"))
SECONDS_PER_STEP = _P.literal("seconds-per-step")

COUNTER_SET = frozenset(COUNTER_KEYWORDS)
MAX_CANDIDATE_SETS = 4096  # MarkerMatcher.candidates() remembered, per set of keywords present


def keyword_pattern(keywords: Iterable[str]) -> re.Pattern[str]:
    """A compiled trie alternation of the literal `keywords` (logparse.read.prefilter.trie_regex)."""
    return compile_keywords(keywords)


class MarkerHit(NamedTuple):
    """A stage marker a message matches, and its named groups. (A named tuple: one is made per marker
    line, and a frozen dataclass took three times as long to make.)"""

    marker: StageMarker
    groups: dict[str, str | None]


class MarkerMatcher:
    """Stage markers against bare messages: keyword prefilter, then the markers' regexes.

    Markers are tried in file order; the first whose keyword is in the message and whose pattern
    matches decides the message's stage."""

    def __init__(self, markers: StageMarkers, extra_keywords: Iterable[str] = ()):
        self.markers = markers.markers
        self._by_keyword: dict[str, list[int]] = {}
        for index, marker in enumerate(self.markers):
            for kw in marker.keywords:
                self._by_keyword.setdefault(kw, []).append(index)
        self._keywords = sorted(self._by_keyword, key=len, reverse=True)
        self.keywords: tuple[str, ...] = tuple(sorted(set(self._keywords) | set(extra_keywords)))
        self._candidates: dict[tuple[str, ...], list[StageMarker]] = {}  # keywords present -> candidates()
        self._index = {id(marker): i for i, marker in enumerate(self.markers)}

    def index_of(self, marker: StageMarker) -> int:
        """The place of one of `markers` in it (what a ProgressRun names a marker by)."""
        return self._index[id(marker)]

    @functools.cached_property
    def prefilter(self) -> re.Pattern[str]:
        """The keywords as one trie alternation, compiled on first use (only a record fed without its
        prefilter keywords needs it)."""
        return keyword_pattern(self.keywords)

    def candidates(self, message: str, keywords: Iterable[str] | None = None) -> list[StageMarker]:
        """The markers with a keyword in `message`, in file order; `keywords`: the only keywords that
        can be in it (a scanner's prefilter found them in the raw line), so the others are not tried."""
        by_keyword = self._by_keyword
        # (a tuple in the order given: the same keywords come in the same order, line after line)
        given = self._keywords if keywords is None else keywords
        present = tuple([kw for kw in given if kw in message and kw in by_keyword])
        markers = self._candidates.get(present)
        if markers is None:  # (the same few keyword sets come again and again: a bar's, a marker's)
            found = sorted({i for kw in present for i in by_keyword[kw]})
            markers = [self.markers[i] for i in found]
            if len(self._candidates) < MAX_CANDIDATE_SETS:
                self._candidates[present] = markers
        return markers

    def match(self, message: str, keywords: Iterable[str] | None = None) -> MarkerHit | None:
        for marker in self.candidates(message, keywords):
            groups = marker.search(message)
            if groups is not None:
                return MarkerHit(marker, groups)
        return None

    @staticmethod
    def fires(marker: StageMarker, message: str) -> bool:
        """Would `marker` match this bare message in a scan (keyword present and a pattern hit)?"""
        return any(kw in message for kw in marker.keywords) and marker.search(message) is not None


class ProgressLine(NamedTuple):
    """What one bare message says (ProgressSyntax.parse): read/'s own step towards a ProgressRun, never
    handed on. (A named tuple: one is made per progress line, and a frozen dataclass took three times
    as long to make.)"""

    hit: MarkerHit | None  # the stage marker it matches (not searched in a line that starts with a step)
    step: int | None  # verl's `step:N - ...`
    seconds: float | None  # its `timing_s/step`, when finite and positive
    bar: tuple[int, int, float | None] | None  # tqdm's `Training Progress`: (n, total, seconds per step)


NOTHING = ProgressLine(None, None, None, None)


class StepRows(NamedTuple):
    """Metric rows of step lines that share their keys, in turn (StepParser: the kept keys, their
    values, every key's name): row i is step steps[i] with values[i * len(keys):(i + 1) * len(keys)]."""

    steps: Sequence[int]
    keys: tuple[str, ...]
    values: array
    names: tuple[str, ...]


class ProgressRun(NamedTuple):
    """What progress lines in a row of one input say: the one progress fact (see the module docstring).

    Line j is line numbers[j] of `source`; it says the step steps[j] (-1: none) taking seconds[j] (its
    `timing_s/step`; NaN: none), the stage marker markers[j] (its place in ProgressSyntax.matcher's
    markers; -1: none) and the bar bar_n[j] of bar_total[j] at bar_rate[j] seconds a step (bar_n -1:
    none; NaN: no rate); processes[j] is the (Ray actor, node) of its origin. `rows`: the metrics of
    its step lines, in order (one per step line). `time`, `repeat`, `groups`: the lines' timestamp,
    Ray repeat count and their marker's named groups. A run of several lines is read from bytes: its
    lines read no clock, carry no repeat count and match only markers without named groups (the
    defaults); a Record is a run of one with its own. (A named tuple: one is made per record that is
    a progress line.)"""

    source: str
    numbers: Sequence[int]
    steps: Sequence[int]
    seconds: Sequence[float]
    markers: Sequence[int]
    bar_n: Sequence[int]
    bar_total: Sequence[int]
    bar_rate: Sequence[float]
    processes: Sequence[tuple[str | None, str | None]]
    rows: tuple[StepRows, ...] = ()
    time: float | None = None
    repeat: int = 1
    groups: Mapping[str, str | None] | None = None

    @property
    def says(self) -> bool:
        """Does a line of the run say something (a step, a marker, a bar)? (A line with a keyword of
        the stage tracker's may say nothing: it is still told, as the last line seen.)"""
        return max(self.steps) >= 0 or max(self.markers) >= 0 or max(self.bar_n) >= 0

    def head(self, n: int) -> ProgressRun:
        """The run of its first `n` lines."""
        if n >= len(self.numbers):
            return self
        step_lines = sum(1 for step in self.steps[:n] if step >= 0)
        rows = []
        for part in self.rows:
            if step_lines <= 0:
                break
            if len(part.steps) > step_lines:
                width = len(part.keys)
                part = part._replace(steps=part.steps[:step_lines], values=part.values[: step_lines * width])
            rows.append(part)
            step_lines -= len(part.steps)
        return self._replace(
            numbers=self.numbers[:n],
            steps=self.steps[:n],
            seconds=self.seconds[:n],
            markers=self.markers[:n],
            bar_n=self.bar_n[:n],
            bar_total=self.bar_total[:n],
            bar_rate=self.bar_rate[:n],
            processes=self.processes[:n],
            rows=tuple(rows),
        )


def step_seconds(message: str, at: int | None = None) -> float | None:
    """A step line's `timing_s/step` (seconds), when finite and positive. `at`: where STEP_TIME_KEY
    is first in the message (-1: nowhere), when the caller knows (StepParser.parse_bytes)."""
    # find the literal first: a regex search over a ~2 KB step line for a key near its end is slow
    if at is None:
        at = message.find(STEP_TIME_KEY)
    m = STEP_TIME_RE.search(message, max(0, at - 10)) if at >= 0 else None
    if m:
        value = float(m.group(1))
        return value if math.isfinite(value) and value > 0 else None
    return None


def bar_seconds(bracket: str) -> float | None:
    """Seconds per step from tqdm's `[00:03<00:06,  1.52s/it]` or `[..., 4.43it/s]`."""
    m = RATE_RE.search(bracket)
    if not m:
        return None
    value = float(m.group(1))
    if m.group(2) == SECONDS_PER_STEP:
        return value
    return 1.0 / value if value > 0 else None


class ProgressSyntax:
    """Stage markers, step lines and progress bars in a bare message (what depends on the message
    alone), and a Record read into its ProgressRun. `all_keys`: a step line's rows keep the values of
    every key, not only those a report uses (StepParser)."""

    def __init__(self, markers: StageMarkers | None = None, all_keys: bool = False):
        self.matcher = MarkerMatcher(
            markers or builtin_stage_markers(), (STEP_KEYWORD, TQDM_KEYWORD, *COUNTER_KEYWORDS)
        )
        self.keywords: tuple[str, ...] = self.matcher.keywords  # a line without any of these says nothing
        self.step_parser = StepParser(all_keys)  # (the metrics of a record's step line)
        # an ordinary script's step lines, learnt by their shape (state: which shapes have counted)
        self.counters = CounterLines(all_keys)

    def parse(self, message: str, keywords: Iterable[str] | None = None) -> ProgressLine:
        """What `message` says: a stage marker, a step line, a progress bar (each or none). `keywords`:
        those of `self.keywords` a scanner's prefilter found in the raw line (None: not known)."""
        m, hit, bar = self._said(message, keywords)
        if hit is None and m is None and bar is None:
            return NOTHING
        step = seconds = None
        if m is not None:
            step = log_int(m.group(1))
            seconds = step_seconds(message)
        return ProgressLine(hit, step, seconds, bar)

    def says_progress(self, message: str) -> bool:
        """Does `message` say anything of the job's progress (a marker, a step line, a bar)?"""
        m, hit, bar = self._said(message, None)
        return not (hit is None and m is None and bar is None)

    def read(self, rec: Record, keywords: Iterable[str] | None = None) -> ProgressRun | None:
        """The record's line as a run of one (which may say nothing: ProgressRun.says, as a line the
        fast path reads may); None when none of `self.keywords` is in its message. `keywords`: those a
        scanner's prefilter found in the raw line (None: not known, the message is searched for them).
        A step line's row is the one a reader process parsed (`rec.step_line`, logparse.read.blocks)
        when it is this message's."""
        message = rec.message
        if keywords is None and not self.matcher.prefilter.search(message):
            return None
        m, hit, bar = self._said(message, keywords)
        line, origin = rec.line, rec.origin
        step, seconds, rows = -1, math.nan, ()
        if m is not None:
            step = log_int(m.group(1))
            got = step_seconds(message)
            seconds = math.nan if got is None else got
            pre = rec.step_line
            if pre is not None and pre.fits(line.text, message):
                rows = (StepRows((pre.step,), pre.keys, pre.values, pre.names),)
            else:
                _, keys, values, names = self.step_parser.parse_tail(step, message[m.end() :], message)
                rows = (StepRows((step,), keys, array("d", values), names),)
        elif self._counted(message, keywords):
            counted = self.counters.take(rec.stream, message)
            if counted is not None:
                step, keys, values, names, earlier = counted
                if earlier is not None:  # (the line before, held back until this one showed the shape)
                    rows = (StepRows((earlier[0], step), keys, array("d", earlier[1] + values), names),)
                else:
                    rows = (StepRows((step,), keys, array("d", values), names),)
        n, total, rate = bar if bar is not None else (-1, -1, None)
        return ProgressRun(
            line.source,
            (line.number,),
            (step,),
            (seconds,),
            (-1 if hit is None else self.matcher.index_of(hit.marker),),
            (n,),
            (total,),
            (math.nan if rate is None else rate,),
            ((origin.actor, origin.node),),
            rows,
            origin.time,
            origin.repeat,
            None if hit is None else hit.groups,
        )

    @staticmethod
    def _counted(message: str, keywords: Iterable[str] | None) -> bool:
        """May `message` be a counter line (a keyword of one among `keywords`, or in it: None)?"""
        if keywords is None:
            return any(kw in message for kw in COUNTER_KEYWORDS)
        return any(kw in COUNTER_SET for kw in keywords)

    def _said(
        self, message: str, keywords: Iterable[str] | None
    ) -> tuple[re.Match[str] | None, MarkerHit | None, tuple[int, int, float | None] | None]:
        """(the step line's match, the marker hit, the bar) in `message`."""
        m = STEP_RE.search(message) if STEP_KEYWORD in message else None
        # (a step line holds no marker, only metrics: skip the marker search on its ~2 KB)
        hit = self.matcher.match(message, keywords) if m is None or m.start() > 0 else None
        bar = None
        if TQDM_KEYWORD in message:
            b = TQDM_RE.search(message)
            if b:
                bar = (log_int(b.group(2)), log_int(b.group(3)), bar_seconds(b.group(4)))
        return m, hit, bar

    def plain_marker(self, index: int) -> bool:
        """Can a line that matches marker `index` (of self.matcher.markers, with no named group) be
        applied with others at once (StageTracker.apply): it starts no attempt, completes nothing and
        has no repeat stage?"""
        marker = self.matcher.markers[index]
        return not (marker.attempt_start or marker.completion or marker.repeat_stage is not None)
