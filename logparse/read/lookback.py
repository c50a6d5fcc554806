"""Lines read back from the raw log: the context before an error line, and a stream's lines before a
record, without keeping every line a scan passes. A block's bytes (and the tail of the block before)
are at hand while it is scanned; the lines before a record are cut from them when asked for, and
decoded and normalised only when a report shows them (LazyContext)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from logparse.read.normalize import Normalizer, Origin, Record
from logparse.read.sources import MAX_LINE_BYTES, Line, decode_line
from logparse.read.unwrap import JOINED

CONTEXT_LINES = 5  # context lines before an error line, from its own stream
LOOKBACK_LINES = 64  # raw lines read back to find them
LOOKBACK_BYTES = 64 * 1024  # bytes of the previous block kept for that


class LazyContext(Sequence):
    """The context lines before a record, decoded and normalised on first use (most tracebacks'
    context is never shown: only the root cause's is)."""

    def __init__(self, rec: Record, before: bytes, default: Origin | None, normalizer: Normalizer):
        self._rec = rec
        self._before = before  # whole lines (each ending in a newline) just before the record
        self._default = default
        self._normalizer = normalizer
        self._records: list[Record] | None = None

    def _resolve(self) -> list[Record]:
        if self._records is None:
            out: list[Record] = []
            for other in stream_lines_before(self._rec, self._before, self._default, self._normalizer):
                if other.message.strip():
                    out.append(other)
                    if len(out) >= CONTEXT_LINES:
                        break
            out.reverse()
            self._records = out
            self._before = b""
        return self._records

    def __getitem__(self, index):
        return self._resolve()[index]

    def __len__(self) -> int:
        return len(self._resolve())


def stream_lines_before(
    rec: Record, before: bytes, default: Origin | None, normalizer: Normalizer
) -> Iterator[Record]:
    """The lines of `rec`'s stream in `before` (whole lines just before it, each ending in a newline),
    decoded and normalised, nearest first (blank ones too)."""
    raws = before.split(b"\n")
    raws.pop()  # after the last newline
    for i, raw in enumerate(reversed(raws), 1):
        if raw == JOINED:  # a row joined onto the line before it (logparse.read.unwrap)
            continue
        line = Line(rec.line.source, rec.line.number - i, decode_line(raw[:MAX_LINE_BYTES]))
        other = normalizer.normalize(line, 0, default)
        if other.stream == rec.stream:
            yield other


def starts_record(rec: Record) -> bool:
    """Does `rec` begin a log record of its own (a level or a time in its prefix)?"""
    return rec.origin.level is not None or rec.origin.time is not None


def lookback(block: bytes, start: int, tail: bytes, limit: int) -> bytes:
    """The whole lines (each with its newline) just before offset `start` of `block` (a line start):
    at most `limit` of them (JOINED lines, left by rows joined onto a line before them, not counted)
    and about LOOKBACK_BYTES, continuing into `tail` (the end of the previous
    block, ending in a newline) when the block has fewer. One slice per part: a hit costs a few `rfind`
    calls, not a list of lines."""
    pos = start
    floor = start - LOOKBACK_BYTES
    while pos > 0 and limit > 0:
        prev = block.rfind(b"\n", 0, pos - 1) + 1
        if prev < floor:
            return block[pos:start]
        if pos - prev != 2 or block[prev] != 0:  # (a JOINED line is no line of the log's: not counted)
            limit -= 1
        pos = prev
    head = block[pos:start]
    if pos > 0 or limit <= 0 or not tail:
        return head
    tpos = len(tail)
    floor = len(tail) - (LOOKBACK_BYTES - len(head))
    while tpos > 0 and limit > 0:
        prev = tail.rfind(b"\n", 0, tpos - 1) + 1
        if prev < floor or (prev == 0 and len(tail) >= LOOKBACK_BYTES):
            break  # a line longer than what is left of the budget, or cut by the tail's own bound
        if tpos - prev != 2 or tail[prev] != 0:
            limit -= 1
        tpos = prev
    return tail[tpos:] + head
