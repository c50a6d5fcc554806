"""Bare failure lines: a line outside any traceback that no catalog entry matched but that reads as a
failure (an exception printed without its traceback, an error record, a failure phrase, a marker
such as Hydra's epilogue), and is not a benign look-alike (patterns/fallback.yaml `bare_lines`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import regex

from logparse.observe.evidence import MAX_MESSAGE_LINES, FailureEvidence, context_messages, origin_frames
from logparse.read.normalize import Record
from logparse.read.prefilter import trie_regex
from patterns.fallback import FallbackRules, MessageMarker, fallback_rules, search_timeout


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
        # one search for the failure phrases' keywords and one for the benign look-alikes, instead of a
        # search per rule: every error line of a log dense in them comes here
        words = {k for p in self._failure_phrases for k in p.keywords}
        self._phrase_words = re.compile(trie_regex(words)) if words else None
        self._benign = _union(self.rules.bare.benign)

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
        if self._benign is not None and _any((self._benign,), text):
            return None
        m = _match(bare.exception, text)
        if (
            self._phrase_words is not None
            and self._phrase_words.search(text)
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
