"""What a progress line says, without any state: stage markers (patterns/stages.yaml), verl's step
line (`step:N - ...`, found anywhere in the message because it can be glued to a tqdm bar) and the
`Training Progress` tqdm bar. `ProgressSyntax.parse(message)` returns a ProgressLine of plain facts;
the stage tracker (logparse.observe.progress) decides what they change, and the fast path of
progress lines (logparse.read.progress_lines) hands the same facts on without a record.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable
from typing import NamedTuple

from logparse.read.prefilter import compile_keywords
from logparse.read.steps import STEP_KEYWORD, STEP_RE, STEP_TIME_KEY
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
    """What one message says to the stage tracker (StageTracker.parse). (A named tuple: one is made
    per progress line, and a frozen dataclass took three times as long to make.)"""

    hit: MarkerHit | None  # the stage marker it matches (not searched in a line that starts with a step)
    step: int | None  # verl's `step:N - ...`
    seconds: float | None  # its `timing_s/step`, when finite and positive
    bar: tuple[int, int, float | None] | None  # tqdm's `Training Progress`: (n, total, seconds per step)


NOTHING = ProgressLine(None, None, None, None)


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
    """Stage markers, step lines and progress bars in a bare message (StageTracker.parse's half that
    depends on the message alone)."""

    def __init__(self, markers: StageMarkers | None = None):
        self.matcher = MarkerMatcher(markers or builtin_stage_markers(), (STEP_KEYWORD, TQDM_KEYWORD))
        self.keywords: tuple[str, ...] = self.matcher.keywords  # a line without any of these says nothing

    def parse(self, message: str, keywords: Iterable[str] | None = None) -> ProgressLine:
        """What `message` says: a stage marker, a step line, a progress bar (each or none). `keywords`:
        those of `self.keywords` a scanner's prefilter found in the raw line (None: not known)."""
        m = STEP_RE.search(message) if STEP_KEYWORD in message else None
        # (a step line holds no marker, only metrics: skip the marker search on its ~2 KB)
        hit = self.matcher.match(message, keywords) if m is None or m.start() > 0 else None
        step = seconds = bar = None
        if m:
            step = log_int(m.group(1))
            seconds = step_seconds(message)
        if TQDM_KEYWORD in message:
            b = TQDM_RE.search(message)
            if b:
                bar = (log_int(b.group(2)), log_int(b.group(3)), bar_seconds(b.group(4)))
        if hit is None and step is None and bar is None:
            return NOTHING
        return ProgressLine(hit, step, seconds, bar)

    def plain_marker(self, index: int) -> bool:
        """Can a line that matches marker `index` (of self.matcher.markers, with no named group) be
        applied in a run: it starts no attempt, completes nothing and has no repeat stage?"""
        marker = self.matcher.markers[index]
        return not (marker.attempt_start or marker.completion or marker.repeat_stage is not None)
