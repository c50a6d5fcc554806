"""Rows that a terminal or `fold` cut at a fixed width, joined back into the lines they were.

A log pasted from a terminal, captured from a tmux pane (`tmux capture-pane -p`) or passed through
`fold -w 80` has its long lines cut into rows of exactly the pane's width: `Watchdog caught collective
operation timeout` ends one row and begins the next, and neither half matches. The rows are joined
here, in the input's bytes before the prefilter sees them (a keyword split across two rows is then
found), and without moving a line number: a joined line takes the place of its first row, and each
row joined onto it leaves a JOINED line (one NUL byte; NUL bytes of the input were dropped before, so
no line of the input reads so) that the reader skips. A record's line number is its first row's,
every later line keeps its number, and the text a report shows is the line joined.

How wide a row is (`widths`): as a terminal shows it (ANSI escapes removed, an East Asian wide
character 2 columns, a combining or format character 0, a tab to the next multiple of 8, a CR back to
column 0), and as GNU fold counts it (bytes: fold cuts a UTF-8 character in two and counts an
escape's bytes). A row *ends full* at width W when either count ends at W, or the terminal's at W - 1
and the next row starts with a wide character (it did not fit in the last column).

When an input is wrapped (WrapDetector), decided on its first WINDOW_BYTES. W is the widest row so
far, as a terminal counts it or as fold does (CJK text cut by fold is wider in bytes than in columns,
in a pane the other way round; each count is tried), and:

- W is at least MIN_WIDTH columns: no terminal is narrower, and the narrower W, the likelier a log's
  own lines share it;
- at least MIN_CONTINUED different rows (digits masked: a repeated line with another timestamp, pid
  or step is one row) end full at W and are *continued* by the row after them;
- of the rows that end full at W, at least CONTINUED_SHARE are continued.

A row is continued when it does not start a record of its own: not blank; no launcher prefix or
timestamp that the normaliser reads (`[rank1]:`, `(WorkerDict pid=…)`, glog, Python logging, ...), nor,
for a row that is itself cut, the unfinished start of one; no traceback structure (`Traceback (most
recent call last):`, `File "`, the chain markers, an exception line, a caret line, the indented source
line under a whole frame line); and not the same first word (digits masked) as the first or the last
row of the line it would join (a table of equal rows). In a wrapped log nearly every full row is
continued (a line ends exactly at W about once in W lines). On the 144 logs of the project and its
corpora that are not wrapped, no more than one such row was seen at the widest width; the widest line
is most often alone, and where several share it (a table of step lines, a repeated prompt, py-spy's
process lines) the rows after them start records of their own, or the rows are one text. An input the
rule does not take for wrapped is passed on byte for byte.

A tmux capture drops a row's trailing spaces, so a line cut just after a space leaves a row W - 1
wide. When no full row ends in a space (in `fold` output one in seven or so does) and a row W - 1 wide
was continued by one that starts with a word, such rows are joined with the space put back.

Where: a file is decided on its first WINDOW_BYTES before any of it is passed on (the whole input is
joined); a stream read as it comes (a pipe on stdin, --follow, --tee) is passed on row by row (its
ALERT lines and status must not wait for a window) while the same rule is applied to the rows seen so
far, and joining starts at the row where it holds (--unwrap N: from the first). Past the window, an
input not wrapped costs nothing more. A row wider than W later on (the rest is not wrapped) stops the
joining. State: the counts, the line being joined (at most MAX_LINE_BYTES), the unfinished row.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import regex

from logparse.read.normalize import Normalizer, Origin
from logparse.read.sources import ANSI_RE, MAX_LINE_BYTES, InputStats, Line, decode_line
from patterns.formats import formats
from patterns.schema import LazyRe

WINDOW_BYTES = 64 << 10  # the first bytes of an input that decide whether it is wrapped
MIN_WIDTH = 40  # narrower rows are not taken for a terminal's (half of an 80-column window split in two)
MIN_CONTINUED = 3  # different full rows (digits masked) continued by the next row, at least
CONTINUED_SHARE = 0.75  # of the full rows, at least this share continued
JOINED = b"\x00"  # the line a row joined onto the one before it leaves (the reader skips it)
UNWRAP_SETTINGS = ("auto", "off")  # or a width in columns

_NO_ORIGIN = Origin()
_F = formats()
# rows that start a record of their own, after their indentation (traceback structure)
_STARTS = tuple(
    s.encode()
    for s in (_F.literal("traceback-start"), *_F.literals("chain-markers"), _F.literal("frame-marker"))
)
# an exception line (`RuntimeError: ...`, `torch.OutOfMemoryError: ...`): a row that begins with one is
# taken for a record of its own, the cause of a failure (a wrong join would hide it)
_EXCEPTION = re.compile(rb"[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)(?:\([\w.]+\))?(?::|$)")
_FRAME_MARKER = _F.literal("frame-marker").encode()
_FRAME = LazyRe(_F.regex("frame-line"), engine="regex")
# the markers under a traceback's source line (`    ~~~~^^^^`), indented: the continuation of a wrapped
# caret line starts with its carets
_CARETS = re.compile(rb"[ \t]+[\^~]+[ \t]*$")
# (compiled when a row past ASCII is first measured)
_WIDE = LazyRe(r"[\p{East_Asian_Width=Wide}\p{East_Asian_Width=Fullwidth}]", engine="regex")
_ZERO = LazyRe(r"[\p{Mn}\p{Me}\p{Cf}\p{Cc}]", engine="regex")  # (tab, CR and backspace are counted apart)
# ANSI_RE on bytes, never across a line end (it measures a whole window's rows at once)
_ANSI_BYTES = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|\x1b[()][0-9A-B]")
_SHAPE = re.compile(rb"[ \t]*[^ \t]{1,16}")  # a row's indentation and first word (its first 16 bytes)
_DIGITS = bytes.maketrans(b"123456789", b"000000000")


@dataclass(frozen=True)
class Wrap:
    """How an input is wrapped: the width of its rows, and whether rows lost their trailing spaces."""

    width: int
    trimmed: bool = False


def parse_unwrap(value: str) -> str | int:
    """`auto`, `off`, or a width in columns (ValueError otherwise)."""
    value = value.strip().lower()
    if value in UNWRAP_SETTINGS:
        return value
    width = int(value)
    if not 1 <= width <= 100_000:
        raise ValueError(f"a width of {width} columns")
    return width


def widths(row: bytes) -> tuple[int, int, int]:
    """(the terminal's column at the end of `row`, fold's column there, the widest column the terminal
    reaches in it) for a row without its newline (nor a CR at its end)."""
    moves = b"\t" in row or b"\r" in row or b"\x08" in row
    if not moves and b"\x1b" not in row and row.isascii():
        n = len(row)
        return n, n, n
    fold_end = _fold_end(row) if moves else len(row)
    text = row.decode("utf-8", "replace")
    if "\x1b" in text:
        text = ANSI_RE.sub("", text)
    if "\t" in text or "\r" in text or "\b" in text:
        end, extent = _terminal_columns(text)
        return end, fold_end, extent
    n = len(text)
    if not text.isascii():
        n += len(_WIDE.findall(text)) - len(_ZERO.findall(text))
    return n, fold_end, n


def _fold_end(row: bytes) -> int:
    """GNU fold's column at the end of `row` (bytes; tabs, CR and backspace move it as a terminal)."""
    if b"\x08" not in row:  # (expandtabs starts its columns again after a CR, as fold does)
        return len(row.expandtabs(8).rsplit(b"\r", 1)[-1])
    col = 0
    for b in row:
        if b == 9:
            col = (col // 8 + 1) * 8
        elif b == 13:
            col = 0
        elif b == 8:
            col = max(0, col - 1)
        else:
            col += 1
    return col


def _terminal_columns(text: str) -> tuple[int, int]:
    """(the column at the end of `text`, the widest column reached) on a terminal."""
    if text.isascii() and "\b" not in text:
        segments = [len(segment) for segment in text.expandtabs(8).split("\r")]
        return segments[-1], max(segments)
    col = extent = 0
    for ch in text:
        if ch == "\t":
            col = (col // 8 + 1) * 8
        elif ch == "\r":
            col = 0
        elif ch == "\b":
            col = max(0, col - 1)
        elif unicodedata.category(ch) in ("Mn", "Me", "Cf", "Cc"):
            continue
        else:
            col += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
        extent = max(extent, col)
    return col, extent


def _starts_wide(row: bytes) -> bool:
    text = row[:4].decode("utf-8", "ignore")[:1]
    return bool(text) and unicodedata.east_asian_width(text) in ("W", "F")


def shape(row: bytes) -> bytes:
    """A row's indentation and first word, digits masked: two records of one kind start alike."""
    m = _SHAPE.match(row)
    return m.group().translate(_DIGITS) if m else b""


class _RecordStarts:
    """Does a row start a record of its own? Its prefixes as the normaliser reads them, traceback
    structure; and for a row that is itself cut (`cut`), a launcher prefix that the cut may have left
    unfinished (`W1130 11:51:53.105000 10955 torch/distributed/elastic/multiprocessing/api.py:102`
    then `8] Sending process ...`): the text of the row can begin one (a partial match) to its end."""

    def __init__(self) -> None:
        self.normalizer = Normalizer()  # its own: only the prefixes of a row are asked of it

    def __call__(self, row: bytes, cut: bool = False) -> bool:
        stripped = row.lstrip()
        if (
            not stripped.strip()
            or stripped.startswith(_STARTS)
            or _EXCEPTION.match(row)
            or _CARETS.match(row)
        ):
            return True
        text = decode_line(row)
        # (Ray's `[repeated 7x across cluster]` ends a line: it is no prefix)
        if self.normalizer.normalize(Line("", 0, text)).origin._replace(repeat=1) != _NO_ORIGIN:
            return True
        return cut and any(
            m is not None and m.partial for m in (p.match(text, partial=True) for p in _prefixes())
        )


@functools.cache
def _prefixes() -> tuple[regex.Pattern, ...]:
    """The launcher prefixes of patterns/formats.yaml, for a partial match (compiled when first asked)."""
    return tuple(regex.compile(w.value) for w in _F.section("prefixes"))


def _continues(row: bytes, cut: bool, shapes: tuple[bytes, bytes], starts: _RecordStarts) -> bool:
    """Does `row` (`cut`: itself ending full) go on with the line before it, whose first and last rows
    have `shapes`? Not when it starts as either does (one more record of their kind), nor when it
    starts a record of its own."""
    first = shape(row)
    return not (first and first in shapes) and not starts(row, cut)


def _joint(width: int, trimmed: bool, ends: tuple[int, int, int], following: bytes) -> bytes | None:
    """What goes between a row that ended at `ends` (widths) and the row `following` it if the two are
    one line cut at `width`: b"" (cut there), b" " (cut after a space the capture dropped), else None."""
    term, fold, _ = ends
    if term == width or fold == width:
        return b""
    if term == width - 1:
        if _starts_wide(following):
            return b""
        if trimmed and fold == term and following[:1] not in (b" ", b"\t"):
            return b" "  # (after the dropped space comes the next word, not another space)
    return None


class _Counts:
    """What the rows say of one width: the widest row so far by one count (or the width given)."""

    def __init__(self, measure: int, width: int = 0) -> None:
        self.measure = measure  # which of `widths` makes the width grow (-1: a width given)
        self.width = width
        self.reset()

    def reset(self) -> None:
        self.full = self.continued = self.spaced = self.short = 0
        self.distinct: set[int] = set()

    def count(self, last: bytes, full: bool, continued: bool) -> None:
        """`last` ended full at the width (else one column short); `continued`: the next row went on."""
        if full:
            self.full += 1
            self.spaced += last.endswith(b" ")
            if continued:
                self.continued += 1
                if len(self.distinct) < MIN_CONTINUED:  # (the same text but for its numbers: one row)
                    self.distinct.add(hash(last.translate(_DIGITS)))
        elif continued:
            self.short += 1

    def wrap(self, fixed: bool) -> Wrap | None:
        trimmed = not self.spaced and self.short > 0
        if fixed:
            return Wrap(self.width, trimmed)
        if (
            self.width < MIN_WIDTH
            or len(self.distinct) < MIN_CONTINUED
            or self.continued < CONTINUED_SHARE * self.full
        ):
            return None
        return Wrap(self.width, trimmed)


class WrapDetector:
    """Fed an input's rows one by one: is it wrapped, and at which width (see the module doc)? Keeps
    counts for the widest row so far as a terminal counts it and as fold does (CJK text cut by fold
    is wider in bytes than in columns; in a pane, the other way round), reset when a wider one comes,
    and the last row. `width`: the width is given (--unwrap N): only whether rows lose their trailing
    spaces is learnt."""

    def __init__(self, width: int | None = None) -> None:
        self.fixed = width is not None
        self.counts = [_Counts(-1, width)] if width is not None else [_Counts(2), _Counts(1)]
        self.starts = _RecordStarts()
        self.last: bytes | None = None
        self.last_ends = (0, 0, 0)
        self.first = b""  # the first row of the line the last row is part of (were they joined)
        self.found: Wrap | None = None

    def feed(self, row: bytes) -> Wrap | None:
        """The next row (without its newline); the input's Wrap once the rows so far show it."""
        if row.endswith(b"\r"):
            row = row[:-1]
        ends = widths(row)
        last = self.last
        joined = False
        if last is not None:
            term, fold, _ = self.last_ends
            asked: dict[bool, bool] = {}
            for counts in self.counts:
                width = counts.width
                full = term == width or fold == width
                if (full or term == width - 1) and (self.fixed or width >= MIN_WIDTH):
                    continued = self._continued(last, row, ends, width, asked)
                    counts.count(last, full, continued)
                    joined = joined or continued
                    self.found = None
        if not joined:
            self.first = row
        for counts in self.counts:
            if counts.measure >= 0 and ends[counts.measure] > counts.width:
                counts.width = ends[counts.measure]
                counts.reset()
        self.last, self.last_ends = row, ends
        if self.found is None:
            self.found = self.result()
        return self.found

    def _continued(self, last: bytes, row: bytes, ends: tuple, width: int, asked: dict) -> bool:
        """Does `row` go on with `last` (which ended full at `width`, or one column short)?"""
        if _joint(width, True, self.last_ends, row) is None:
            return False
        cut = ends[0] >= width - 1 or ends[1] == width  # (the row is itself cut)
        if cut not in asked:
            asked[cut] = _continues(row, cut, (shape(self.first), shape(last)), self.starts)
        return asked[cut]

    def result(self) -> Wrap | None:
        for counts in self.counts:
            wrap = counts.wrap(self.fixed)
            if wrap is not None:
                return wrap
        return None


class RowJoiner:
    """Joins the rows of a wrapped input (`feed` its bytes, then `finish`): each line cut at the width
    is one line again, followed by a JOINED line for each row joined onto it. Holds the row being
    joined (at most MAX_LINE_BYTES) and the unfinished row."""

    def __init__(self, wrap: Wrap) -> None:
        self.width = wrap.width
        self.trimmed = wrap.trimmed
        self.starts = _RecordStarts()
        self.parts: list[bytes] = []  # the rows of the line being joined (and what went between them)
        self.size = 0
        self.ends = (0, 0, 0)  # widths of its last row
        self.record = b""  # the shape of its first row
        self.last_shape = b""  # and of its last
        self.carry = b""  # the unfinished row
        self.long = False  # inside a row longer than MAX_LINE_BYTES, passed on as it is
        self.off = False  # a row wider than the width came: the rest is not wrapped
        self.lines = self.rows = 0  # lines joined, rows joined onto them

    def feed(self, data: bytes) -> bytes:
        if self.off:
            return data
        out: list[bytes] = []
        if self.long:
            nl = data.find(b"\n")
            if nl < 0:
                return data
            out.append(data[: nl + 1])
            data = data[nl + 1 :]
            self.long = False
        if self.carry:
            data = self.carry + data
        cut = data.rfind(b"\n") + 1
        self.carry = data[cut:]
        pos = 0
        while pos < cut:
            nl = data.index(b"\n", pos)
            self._row(data[pos:nl], out)
            pos = nl + 1
            if self.off:  # the rest as it is
                out.append(data[pos:])
                self.carry = b""
                return b"".join(out)
        if len(self.carry) > MAX_LINE_BYTES:  # a row longer than any line: passed on as it is
            self._flush(out)
            out.append(self.carry)
            self.carry = b""
            self.long = True
        return b"".join(out)

    def finish(self) -> bytes:
        out: list[bytes] = []
        if self.carry:
            self._row(self.carry, out, ended=False)
            self.carry = b""
        self._flush(out)
        return b"".join(out)

    def _row(self, row: bytes, out: list[bytes], ended: bool = True) -> None:
        body = row[:-1] if row.endswith(b"\r") else row
        ends = self._ends(body)
        end = b"\n" if ended else b""
        if self.off:
            self._flush(out)
            out.append(row + end)
            return
        if self.parts:
            joint = _joint(self.width, self.trimmed, self.ends, body)
            fits = joint is not None and self.size + len(row) < MAX_LINE_BYTES
            if fits and self._continues(body, ends is not None):
                last = self.parts[-1]
                if last.endswith(b"\r"):
                    self.parts[-1] = last[:-1]
                self.parts.append(joint + row)
                self.size += len(joint) + len(row)
                self.rows += 1
                self.ends = ends
                self.last_shape = shape(body)
                if ends is None or not ended:
                    self._flush(out, ended)
                return
            self._flush(out)
        if ends is not None and ended:
            self.parts = [row]
            self.size = len(row)
            self.ends = ends
            self.record = self.last_shape = shape(body)
        else:
            out.append(row + end)

    def _continues(self, body: bytes, cut: bool) -> bool:
        if body[:1] in (b" ", b"\t") and self._whole_frame():
            return False  # (the frame's source line, indented under it)
        return _continues(body, cut, (self.record, self.last_shape), self.starts)

    def _whole_frame(self) -> bool:
        """Is the line being joined a whole traceback frame line (`File "…", line N, in f`)?"""
        if _FRAME_MARKER not in self.parts[0]:
            return False
        text = decode_line(b"".join(self.parts))
        return _FRAME.match(self.starts.normalizer.normalize(Line("", 0, text)).message) is not None

    def _ends(self, body: bytes) -> tuple[int, int, int] | None:
        """The widths of a row that may be continued (it ends full, or one column short); None for
        another. A row wider than the width turns the joining off: the input is not wrapped there."""
        width = self.width
        if len(body) < width - 1 and b"\t" not in body:
            return None  # (a row has at least as many bytes as columns, tabs apart)
        ends = widths(body)
        if ends[2] > width:
            self.off = True
            return None
        term, fold, _ = ends
        return ends if term >= width - 1 or fold == width else None

    def _flush(self, out: list[bytes], ended: bool = True) -> None:
        """Pass the line being joined on (`ended`: its last row had a newline)."""
        parts = self.parts
        if not parts:
            return
        if len(parts) == 1:
            out.append(parts[0] + b"\n")
        else:
            # (a last row without a newline: its JOINED lines still keep the count of lines)
            out.append(b"".join(parts) + b"\n" + (JOINED + b"\n") * (len(parts) - 2) + JOINED)
            if ended:
                out.append(b"\n")
            self.lines += 1
        self.parts = []
        self.size = 0

    def note(self, stats: InputStats) -> None:
        if self.lines:
            stats.notes.append(
                f"{stats.path}: rows cut at {self.width} columns (a terminal or `fold`) joined back: "
                f"{self.lines} line(s) from {self.lines + self.rows} rows; a joined line is numbered by "
                f"its first row"
            )


def unwrap_chunks(
    chunks: Iterable[bytes], stats: InputStats, setting: str | int = "auto", live: bool = False
) -> Iterator[bytes]:
    """The input's text chunks with rows cut at a fixed width joined back (see the module doc).
    `setting`: `auto` (detect), `off`, or the width in columns; `live`: a stream read as it comes."""
    if setting == "off":
        return iter(chunks)
    width = setting if isinstance(setting, int) else None
    if live:
        return _as_it_comes(iter(chunks), stats, width)
    return _window_first(iter(chunks), stats, width)


def _window_first(it: Iterator[bytes], stats: InputStats, width: int | None) -> Iterator[bytes]:
    """Decide on the first WINDOW_BYTES, then pass the whole input on, joined if it is wrapped."""
    held: list[bytes] = []
    size = 0
    error: Exception | None = None
    try:
        for chunk in it:
            held.append(chunk)
            size += len(chunk)
            if size >= WINDOW_BYTES:
                break
    except Exception as exc:  # (a truncated .gz: what was read is still passed on, then the error)
        error = exc
    wrap = _decide(held, width, ended=size < WINDOW_BYTES)
    if wrap is None:
        yield from held
        if error is not None:
            raise error
        yield from it
        return
    yield from _joined(RowJoiner(wrap), held, iter(()) if error is not None else it, stats)
    if error is not None:
        raise error


def _decide(held: list[bytes], width: int | None, ended: bool) -> Wrap | None:
    """Is the input whose first chunks are `held` wrapped (`ended`: they are all of it)?"""
    data = held[0] if len(held) == 1 else b"".join(held)
    window = data[:WINDOW_BYTES]
    cut = window.rfind(b"\n") + 1
    rows = window[:cut].split(b"\n")[:-1]
    if ended and cut < len(window):
        rows.append(window[cut:])
    if width is None and not _may_be_wrapped(rows):
        return None
    detector = WrapDetector(width)
    wrap = None
    for row in rows:
        wrap = detector.feed(row)
    return wrap


def _may_be_wrapped(rows: list[bytes]) -> bool:
    """A quick no for most logs, measured on the window at once (bytes operations, not a loop over
    its rows in Python): fewer than MIN_CONTINUED rows end at the widest width, as a terminal or as fold
    counts it, where WrapDetector needs that many full rows and more. (A row with a CR, a backspace or a
    byte past ASCII is measured alone, by `widths`.)"""
    text = b"\n".join(rows).replace(b"\r\n", b"\n")
    fold_ends = list(map(len, text.expandtabs(8).split(b"\n")))
    plain = _ANSI_BYTES.sub(b"", text) if b"\x1b" in text else text
    term_ends = list(map(len, plain.expandtabs(8).split(b"\n")))
    extents = term_ends
    if not text.isascii() or b"\r" in text or b"\x08" in text:
        extents = term_ends[:]
        for i, row in enumerate(text.split(b"\n")):
            if not row.isascii() or b"\r" in row or b"\x08" in row:
                term_ends[i], fold_ends[i], extents[i] = widths(row)
    for widest in {max(extents, default=0), max(fold_ends, default=0)}:
        if widest < MIN_WIDTH:
            continue
        terms, folds = term_ends.count(widest), fold_ends.count(widest)
        if max(terms, folds) >= MIN_CONTINUED:
            return True
        if terms + folds >= MIN_CONTINUED:
            full = sum(t == widest or f == widest for t, f in zip(term_ends, fold_ends, strict=True))
            if full >= MIN_CONTINUED:
                return True
    return False


def _as_it_comes(it: Iterator[bytes], stats: InputStats, width: int | None) -> Iterator[bytes]:
    """A live stream: each row passed on as it comes while the detector is fed the first WINDOW_BYTES;
    once it says the input is wrapped, the rows from that one on are joined."""
    detector = WrapDetector(width)
    carry = b""
    seen = 0
    for chunk in it:
        data = carry + chunk if carry else chunk
        pos = 0
        while True:
            nl = data.find(b"\n", pos)
            if nl < 0:
                break
            wrap = detector.feed(data[pos:nl])
            if wrap is not None:
                if pos:
                    yield data[:pos]
                yield from _joined(RowJoiner(wrap), [data[pos:]], it, stats)
                return
            seen += nl + 1 - pos
            pos = nl + 1
            if seen >= WINDOW_BYTES:  # not wrapped: the rest as it comes
                yield data
                yield from it
                return
        if pos:
            yield data[:pos]
        carry = data[pos:]
        if len(carry) > MAX_LINE_BYTES:  # a row longer than any line: not a terminal's
            yield carry
            yield from it
            return
    if carry:
        yield carry


def _joined(joiner: RowJoiner, first: list[bytes], it: Iterator[bytes], stats: InputStats) -> Iterator[bytes]:
    """`first`, then the rest of the input, through `joiner`; its note at the end."""
    try:
        for chunks in (first, it):
            for chunk in chunks:
                out = joiner.feed(chunk)
                if out:
                    yield out
    except Exception:  # (a truncated .gz: the line being joined is passed on, then the error)
        out = joiner.finish()
        joiner.note(stats)
        if out:
            yield out
        raise
    out = joiner.finish()
    joiner.note(stats)
    if out:
        yield out
