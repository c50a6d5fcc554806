"""Bare failure lines: a line outside any traceback that no catalog entry matched but that reads as a
failure (an exception printed without its traceback, an error record, a failure phrase, a marker
such as Hydra's epilogue), and is not a benign look-alike (patterns/fallback.yaml `bare_lines`)."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import regex

from logparse.observe.evidence import MAX_MESSAGE_LINES, FailureEvidence, context_messages, origin_frames
from logparse.observe.tracebacks import FRAME_MARKER, FRAME_RE, TB_START
from logparse.read.lookback import CONTEXT_LINES, starts_record
from logparse.read.normalize import Record
from logparse.read.prefilter import trie_regex
from patterns.fallback import FallbackRules, MessageMarker, fallback_rules, search_timeout

MAX_BARE_LINES = 200  # bare failure lines kept (the first half and the most recent half)
BARE_LOOKBACK_LINES = 12  # raw lines read back for a bare line's context


@dataclass
class BareLine:
    """A line outside any traceback that reads as a failure."""

    record: Record
    kind: str  # exception | phrase | marker | error-record | error-prefix | cut-traceback
    exc_type: str | None
    message: str
    step: int | None = None  # the last training step seen when it arrived
    context: Sequence[Record] = ()
    after: list[Record] = field(default_factory=list)  # continuation lines of its message
    traceback: object | None = None  # cut-traceback: the traceback whose exception line is missing
    marker: MessageMarker | None = None  # a message marker's text: the marker that closed it

    @property
    def seq(self) -> int:
        return self.record.seq

    def evidence(self) -> FailureEvidence:
        extra = " ".join(r.message.strip() for r in self.after[:MAX_MESSAGE_LINES])
        message = f"{self.message} {extra}".strip() if extra else self.message
        frames = origin_frames(self.record.origin.actor)
        if self.traceback is not None:
            frames += tuple((f.file, f.function, f.code) for f in self.traceback.frames)
        return FailureEvidence(self.exc_type, message, frames, (), context_messages(self.context))


class BareLineDetector:
    """Decides whether a record is a bare failure line (patterns/fallback.yaml `bare_lines`)."""

    def __init__(self, rules: FallbackRules | None = None):
        self.rules = rules or fallback_rules()
        self.keywords = self.rules.keywords()
        self._failure_phrases = tuple(p for p in self.rules.phrases if p.failure)
        self._gates: tuple[re.Pattern | None, regex.Pattern | None] | None = None  # (_make_gates)

    def _make_gates(self) -> tuple[re.Pattern | None, regex.Pattern | None]:
        """One search for the failure phrases' keywords and one for the benign look-alikes, instead of
        a search per rule: every error line of a log dense in them comes here. Made at the first line
        asked about (most logs have none): building and compiling them took 5 ms of every start."""
        words = {k for p in self._failure_phrases for k in p.keywords}
        self._gates = (re.compile(trie_regex(words)) if words else None, _union(self.rules.bare.benign))
        return self._gates

    def detect(self, rec: Record) -> tuple[str, str | None, str] | None:
        """(kind, exception type, message) when `rec` reads as a failure, else None. In order: a
        benign look-alike is never one; a failure phrase makes any line one (a NaN loss in a metrics
        line too); a data line (metrics, progress bar) is otherwise none; then an exception line, a
        failure marker, an error-level record, an `Error:` prefix."""
        bare = self.rules.bare
        msg = rec.message.strip()
        if not msg:
            return None
        text = msg[:2000]
        phrase_words, benign = self._gates or self._make_gates()
        if benign is not None and _any((benign,), text):
            return None
        if FRAME_MARKER in text and FRAME_RE.match(rec.message):
            return None  # a traceback's `File "...", line N, in f` names where, never what failed
        m = _match(bare.exception, text)
        if (
            phrase_words is not None
            and phrase_words.search(text)
            and any(p.fires(text) for p in self._failure_phrases)
        ):
            if m is not None:
                return "phrase", m.group("inner") or m.group("type"), (m.group("message") or "").strip()
            return "phrase", None, msg
        if _any(bare.structured, text):
            return None
        if m is not None:
            return "exception", m.group("inner") or m.group("type"), (m.group("message") or "").strip()
        if _any(bare.markers, text):
            return "marker", None, msg
        if rec.origin.level in bare.levels:
            return "error-record", None, msg
        m = _match(bare.prefix, text)
        if m is not None:
            return "error-prefix", None, m.group("message")
        return None


def _union(patterns) -> regex.Pattern | None:
    """One regex that finds what any of `patterns` finds (a leading `(?i)` becomes a scoped flag)."""
    if not patterns:
        return None
    parts = []
    for p in patterns:
        text = p.pattern
        parts.append(f"(?i:{text[4:]})" if text.startswith("(?i)") else f"(?:{text})")
    return regex.compile("|".join(parts))


def _any(patterns, text: str) -> bool:
    timeout = search_timeout(text)
    for p in patterns:
        try:
            if p.search(text, timeout=timeout):
                return True
        except TimeoutError:
            continue
    return False


def _match(pattern, text: str):
    try:
        return pattern.match(text, timeout=search_timeout(text))
    except TimeoutError:
        return None


class BareLines:
    """The bare failure lines of one attempt: the first MAX_BARE_LINES // 2 and the most recent half."""

    def __init__(self, detector: BareLineDetector | None = None):
        self.detector = detector or BareLineDetector()
        self.keywords = self.detector.keywords
        self.error_levels = self.detector.rules.bare.levels  # an error record needs no keyword
        self._first: list[BareLine] = []
        self._recent: deque[BareLine] = deque(maxlen=MAX_BARE_LINES // 2)

    def feed(
        self,
        rec: Record,
        step: int | None,
        context_of: Callable[[Record, int], Sequence[Record]],
        lines_before: Callable[[Record, int], list[Record] | None],
    ) -> BareLine | None:
        """`rec`, outside any traceback and matched by no entry, as a bare failure line (kept), or None
        when it does not read as one. `step`: the last training step seen; `context_of(rec, n)`: the
        lines of its stream before it, at most n back; `lines_before(rec, n)`: its stream's lines
        before it, nearest first, blank ones too (None: not at hand)."""
        found = self.detector.detect(rec)
        if found is None:
            return None
        kind, exc_type, message = found
        line = None
        if kind == "marker":
            marker = self.detector.rules.bare.message_marker(rec.message.strip())
            if marker is not None:
                line = message_before(rec, marker, step, lines_before(rec, marker.lines))
        if line is None:
            # a few lines back (not LOOKBACK_LINES): every bare line of a log dense in errors takes its own
            line = BareLine(rec, kind, exc_type, message, step, context_of(rec, BARE_LOOKBACK_LINES))
        if len(self._first) < MAX_BARE_LINES // 2:
            self._first.append(line)
        else:
            self._recent.append(line)
        return line

    def kept(self) -> list[BareLine]:
        return self._first + list(self._recent)

    def __bool__(self) -> bool:
        return bool(self._first)

    def new_attempt(self) -> None:
        self._first = []
        self._recent.clear()


def message_before(
    rec: Record, marker: MessageMarker, step: int | None, nearest_first: list[Record] | None
) -> BareLine | None:
    """The failure a message marker closes (patterns/fallback.yaml `markers`): the text its stream
    printed just before it (`nearest_first`: those lines, blank ones too), as a bare line of its own
    (its first line the failure line, the rest its continuation), or None when that text is not there
    to read (no raw block at hand, nothing before it) or is a traceback's (which the traceback
    assembler reads)."""
    if nearest_first is None:
        return None
    before = nearest_first[::-1]  # oldest first
    end = len(before)
    while end and not before[end - 1].message.strip():
        end -= 1
    found = _paragraph(before, end, marker)
    if found is None:
        return None
    start = found
    head = before[start]
    head.seq = rec.seq  # (ordered as the marker: nothing else of its stream came between)
    after = [r for r in before[start + 1 :] if r.message.strip()]
    context = [r for r in before[max(0, start - CONTEXT_LINES) : start] if r.message.strip()]
    return BareLine(head, "marker", None, head.message.strip(), step, context, after, marker=marker)


def _paragraph(before: list[Record], end: int, marker: MessageMarker) -> int | None:
    """Where the message that ends at `end` of `before` starts: back to a blank line or a line that
    starts a log record, over the sections the marker names (Hydra's `Config search path:`); None
    when there is none, or it is a traceback's."""
    while True:
        start = end
        while start and before[start - 1].message.strip() and not starts_record(before[start - 1]):
            start -= 1
        if start == end:
            return None
        if any(
            r.message.lstrip().startswith(TB_START) or FRAME_RE.match(r.message) for r in before[start:end]
        ):
            return None  # a traceback's: its exception line is the failure
        first = before[start].message.strip()
        if not (start and any(s.search(first) for s in marker.sections)):
            return start
        # a section of the message: the message began before it
        end = start
        while end and not before[end - 1].message.strip():
            end -= 1
        if not end:
            return None
