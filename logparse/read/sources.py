"""Read log inputs as a stream of lines: files, folders, .gz files and stdin.

Nothing here holds a whole log: bytes are read in large chunks and split into lines; a line longer
than MAX_LINE_BYTES keeps its first MAX_LINE_BYTES and is marked truncated (the rest is skipped, the
line count stays right).

The first bytes of each input (up to SNIFF_BYTES, or its first line) decide how it is read: a UTF-8
byte-order mark is dropped; UTF-16 (with a byte-order mark, or without one when every other byte is
NUL) is re-encoded as UTF-8; a file of NUL and control bytes (a core dump renamed .log) is skipped with
a note; a file whose lines end in a lone CR is read line by line. NUL bytes in text are dropped (a log
truncated while its writer kept writing starts with a run of them). Each decision leaves a note.

Past the first bytes, binary data is found per region, not per file: a log can end in (or hold) a
stretch of binary data (a crashed writer's preallocated tail, a core dump appended, a disk block of
garbage) after its text, and the text before it must still be read (15 KB of log then random bytes
was skipped whole, and its CUDA OOM missed). Lines of a chunk with NUL bytes are looked at one by one
(BinarySpans): a run of lines that are mostly control bytes and invalid UTF-8, MIN_BINARY_SPAN bytes
or more, is a binary span. Its lines are read as empty lines (so every later line keeps its number),
a note says from which byte and how many bytes were skipped, and text resumes at the first clean line
of RESUME_LINE_BYTES or more after it. A shorter run stays text (decoded with U+FFFD, as before).
Data that goes on and on without text (MAX_BINARY_RUN_BYTES of NUL bytes, or of control bytes with no
line end, or of a binary span, in a row: /dev/zero, a file of zeros, a gzip bomb of them) stops the
input with a note, and a hole of a sparse file (a log copy-truncated while its writer kept its offset) is
skipped with lseek(SEEK_DATA) instead of being read.
"""

from __future__ import annotations

import codecs
import errno
import io
import os
import re
import stat
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import BinaryIO

import regex

CHUNK_BYTES = 1 << 20
MAX_LINE_BYTES = 1 << 20
# a run of this many bytes of NUL or control data with no text (decompressed, for a .gz) ends an input
MAX_BINARY_RUN_BYTES = 256 << 20
SNIFF_BYTES = 64 << 10  # what decides the encoding / binary question (less for a pipe's first line)
BINARY_RATIO = 0.10  # share of control bytes and invalid UTF-8 among the non-NUL bytes of a binary file
MIN_BINARY_SPAN = 512  # bytes of binary lines in a row that make a binary span (less: text with garbage)
RESUME_LINE_BYTES = 24  # a clean line this long ends a binary span (random bytes make one about never)
# C0 control bytes that a text log does not hold (tab, newline, VT, FF, CR, ESC, backspace do occur)
_CONTROL_BYTES = bytes(c for c in range(32) if c not in b"\t\n\x0b\x0c\r\x1b\x08")
_CONTROL_RE = re.compile(b"[" + re.escape(_CONTROL_BYTES) + b"]")
# inside a binary span: a line that may end it (RESUME_LINE_BYTES or more without a control byte; NUL
# bytes may be in it, as they are dropped)
_RESUME_RE = re.compile(
    rb"(?<![^\n])[^\n"
    + re.escape(_CONTROL_BYTES.replace(b"\x00", b""))
    + rb"]{%d,}(?=\n)" % RESUME_LINE_BYTES
)
LOG_SUFFIXES = {".log", ".out", ".err", ".txt", ".stdout", ".stderr", ".gz", ".zst"}
LOG_NAMES = {"stdout", "stderr", "error.json"}
# what a folder's file is read as by its name, beyond LOG_SUFFIXES: a rotated log (`train.log.1`,
# `worker.out.3.gz`, `train.log.2025-01-31`) is its base name's kind
_ROTATED = re.compile(r"^(?P<base>.+?)\.(?P<n>\d{1,6}|\d{4}-\d{2}-\d{2}(?:[-_T]\d{2}(?::?\d{2}){0,2})?)$")
MAX_NAMED_SKIPS = 5  # file names a note on a folder's skipped files lists
# the compressions read by name: gzip (zlib) and zstd (the `zstandard` package)
COMPRESSED = {".gz": "gzip", ".zst": "zstd"}
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZSTD_SLICE = 1024  # compressed bytes handed to the zstd decompressor at a time
# the first bytes of binary formats a log folder can hold (a core dump renamed .log, a compressed log
# without its suffix, a checkpoint or an image): skipped whole with a note that names the format
BINARY_MAGIC = (
    (b"\x7fELF", "an ELF file (a core dump or a program)"),
    (b"\x1f\x8b", "gzip-compressed data without a .gz name (rename it to .gz, or gunzip it)"),
    (ZSTD_MAGIC, "zstd-compressed data without a .zst name (rename it to .zst, or zstd -d it)"),
    (b"BZh", "bzip2-compressed data (bunzip2 it first)"),
    (b"\xfd7zXZ\x00", "xz-compressed data (xz -d it first)"),
    (b"\x04\x22\x4d\x18", "lz4-compressed data (lz4 -d it first)"),
    (b"PK\x03\x04", "a zip archive (unzip it first)"),
    (b"\x89PNG", "a PNG image"),
    (b"\x93NUMPY", "a NumPy array"),
)
# a run of this many binary spans in one input is noted one by one; the rest are summed up in one note
MAX_SPAN_NOTES = 3
ANSI_RE = regex.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[()][0-9A-B]")


class InputError(Exception):
    """An input cannot be read at all (missing, not a file, permission denied, not gzip)."""


class Line:
    """One log line: where it came from and its text (decoded, ANSI codes removed, no newline)."""

    __slots__ = ("number", "source", "text", "truncated")

    def __init__(self, source: str, number: int, text: str, truncated: bool = False):
        self.source = source
        self.number = number
        self.text = text
        self.truncated = truncated

    def __repr__(self) -> str:
        return f"Line({self.source}:{self.number} {self.text[:60]!r})"


STDIN_NAME = "<stdin>"  # how a report names standard input (`<stdin>:88`, as Python's tracebacks do)


@dataclass
class InputStats:
    """What was read of one input: its lines and bytes, notes, how its blocks were shared."""

    path: str
    lines: int = 0
    bytes: int = 0
    notes: list[str] = field(default_factory=list)
    # how the work on its blocks was shared (logparse.read.blocks.blocks_in_process): each reader
    # process's CPU seconds, and the blocks the scanner made itself and the CPU seconds that took
    reader_cpu: list[float] = field(default_factory=list)
    scanner_blocks: int = 0
    scanner_block_cpu: float = 0.0


_COMMON_ANSI = ("\x1b[36m", "\x1b[0m")  # Ray's cyan prefix: on most lines of a Ray job


def strip_ansi(text: str) -> str:
    if "\x1b" not in text:
        return text
    # Ray's own colour codes, when every escape byte starts one of them, go without the regex (same
    # result: each is a whole sequence the regex removes, and no escape is left to form a new one)
    cyan, reset = _COMMON_ANSI
    if text.count("\x1b") == text.count(cyan) + text.count(reset):
        return text.replace(cyan, "").replace(reset, "")
    return ANSI_RE.sub("", text)


def decode_line(raw: bytes) -> str:
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return strip_ansi(raw.decode("utf-8", errors="replace"))


def clean_text(text: str) -> str:
    """Text that did not come through decode_line (e.g. parsed out of JSON): lone surrogates become
    U+FFFD, NUL bytes and ANSI codes go, so every report format can write it."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return strip_ansi(text)


def _raw_chunks(stream: BinaryIO, stats: InputStats, skip_holes: bool = False) -> Iterator[bytes]:
    # read1: a pipe or FIFO gives what it has now instead of blocking until CHUNK_BYTES arrived, so a
    # line written before an interrupt is scanned before it
    read = getattr(stream, "read1", None) or stream.read
    fd = _sparse_fd(stream) if skip_holes else None
    skipped = 0
    try:
        while True:
            chunk = read(CHUNK_BYTES)
            if not chunk:
                return
            stats.bytes += len(chunk)
            if fd is not None and chunk[0] == 0 and chunk[-1] == 0 and chunk.count(0) == len(chunk):
                hole = _skip_hole(stream, fd)
                if hole is None:
                    fd = None  # the file system cannot tell: read on
                else:
                    stats.bytes += hole
                    skipped += hole
            yield chunk
    finally:
        if skipped:
            stats.notes.append(
                f"{stats.path}: skipped {skipped} byte(s) of holes (a sparse file: NUL bytes "
                f"never written, e.g. a log copy-truncated while its writer kept writing)"
            )


def _sparse_fd(stream: BinaryIO) -> int | None:
    """The descriptor of a regular file read through a seekable buffered reader, else None."""
    if not isinstance(stream, io.BufferedReader) or not hasattr(os, "SEEK_DATA"):
        return None
    try:
        fd = stream.fileno()
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) and stream.seekable() else None
    except (OSError, ValueError):
        return None


def _skip_hole(stream: BinaryIO, fd: int) -> int | None:
    """Move `stream` past the hole it is in (to the next data, or to the end); bytes skipped, or None
    when the file system does not support SEEK_DATA."""
    pos = stream.tell()
    try:
        data = os.lseek(fd, pos, os.SEEK_DATA)
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # ENXIO: no data after pos, the rest is a hole
            stream.seek(pos)
            return None
        data = os.fstat(fd).st_size
    stream.seek(data)  # also re-syncs the buffer with the descriptor moved by lseek
    return max(0, data - pos)


def sniff(head: bytes) -> str:
    """How to read an input that starts with `head`: "utf-8", "utf-8-sig", "utf-16" (with a byte-order
    mark), "utf-16-le" / "utf-16-be" (without one), "binary" or "cr" (lines end in a lone CR)."""
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    sample = head[:SNIFF_BYTES]
    if b"\x00" in sample:
        pairs = len(sample) // 2
        if pairs >= 8:
            even_nul = sample[0 : 2 * pairs : 2].count(0) / pairs
            odd_nul = sample[1 : 2 * pairs : 2].count(0) / pairs
            if odd_nul > 0.7 and even_nul < 0.1:
                return "utf-16-le"
            if even_nul > 0.7 and odd_nul < 0.1:
                return "utf-16-be"
    text = sample.replace(b"\x00", b"") if b"\x00" in sample else sample
    # only NUL bytes so far: a hole before the text, not a verdict; a first line of text: a log
    # (binary data after it is a region of its own, see BinarySpans)
    if text and not _starts_with_text(text):
        first = _first_line(text)[:MAX_LINE_BYTES]
        if len(first) >= MIN_BINARY_SPAN and line_kind(first) is LineKind.BINARY:
            return "binary"  # (its first region: what follows is judged region by region)
        if (
            text is not sample
        ):  # NUL bytes (without them, invalid UTF-8 is text: latin-1, decoded with U+FFFD)
            controls = len(text) - len(text.translate(None, _CONTROL_BYTES))
            invalid = text.decode("utf-8", "replace").count("\ufffd") - text.count("\ufffd".encode())
            if controls + invalid > BINARY_RATIO * len(text):
                return "binary"
    if b"\n" not in head and b"\r" in head:
        return "cr"
    return "utf-8"


def _starts_with_text(text: bytes) -> bool:
    """Is the first line with content of `text` (NUL bytes dropped) a line of text (LineKind.TEXT)?"""
    return line_kind(_first_line(text)) is LineKind.TEXT


def _first_line(text: bytes) -> bytes:
    return text.lstrip(b"\r\n").split(b"\n", 1)[0].rstrip(b"\r")


class LineKind(Enum):
    TEXT = "text"  # RESUME_LINE_BYTES or more of valid UTF-8 without a control byte: text goes on here
    BINARY = "binary"  # control bytes (one at least) and invalid UTF-8 past BINARY_RATIO of its bytes
    OTHER = "other"  # shorter, or a stray control byte or bad byte: goes with the lines around it


def line_kind(text: bytes) -> LineKind:
    """What a line (NUL bytes dropped, no newline) looks like, for BinarySpans. (A run of random bytes
    makes a TEXT line about once in 10^11 lines.)"""
    controls = len(text) - len(text.translate(None, _CONTROL_BYTES))
    if controls:
        invalid = text.decode("utf-8", "replace").count("\ufffd") - text.count("\ufffd".encode())
        return LineKind.BINARY if controls + invalid > BINARY_RATIO * len(text) else LineKind.OTHER
    if len(text) < RESUME_LINE_BYTES:
        return LineKind.OTHER
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return LineKind.OTHER
    return LineKind.TEXT


def _text_head(line: bytes) -> bytes:
    """The clean text a binary line starts with (up to its first control byte or invalid UTF-8), when
    it is RESUME_LINE_BYTES or more: the last line of a log that binary data follows without a newline."""
    m = _CONTROL_RE.search(line)
    head = line[: m.start()] if m else line
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        head = head[: exc.start]
    return head if len(head) >= RESUME_LINE_BYTES else b""


class BinarySpans:
    """Finds the binary spans of one input's text (see the module doc). `feed(chunk)` takes the input's
    bytes (NUL bytes in) and returns what is to be read of them (NUL bytes out, each line of a binary
    span an empty line); `finish()` the rest. Line by line until a span opens; inside one, a regex
    finds the next line that may end it (a line at a time cost 50 ms a MB of random bytes). Holds at
    most one unfinished line (MAX_LINE_BYTES + 1 bytes of it) and a run of binary lines not yet judged
    (under MIN_BINARY_SPAN bytes)."""

    def __init__(self, name: str, notes: list[str], offset: int = 0):
        self.name = name
        self.notes = notes
        self.offset = offset  # where the next byte fed is, in the input's text
        self.binary = False  # inside a binary span
        self.span_start = self.span_bytes = 0
        self.held: list[bytes] = []  # a run of binary lines (and the others among them) not judged yet
        self.held_start = self.held_bytes = self.held_nuls = 0
        self.line = b""  # the unfinished line (NUL bytes dropped)
        self.line_bytes = self.line_nuls = 0  # its bytes as fed, its NUL bytes
        self.nuls = 0  # NUL bytes inside binary spans (the caller's note counts those of the text)
        self.stopped = False  # a span went on for MAX_BINARY_RUN_BYTES: nothing more is read
        self.spans = 0  # spans noted (past MAX_SPAN_NOTES, only counted: `more`)
        self.more = self.more_bytes = 0  # spans and bytes past MAX_SPAN_NOTES
        self.more_end = 0  # where the last of them ended

    @property
    def active(self) -> bool:
        """Must the next chunk be looked at (not passed on as it is)?"""
        return self.binary or bool(self.held) or self.line_bytes > 0

    def feed(self, chunk: bytes) -> bytes:
        out: list[bytes] = []
        start = 0
        while start < len(chunk) and not self.stopped:
            if self.binary and not self.line_bytes:
                start = self._skip(chunk, start, out)
                continue
            nl = chunk.find(b"\n", start)
            end = len(chunk) if nl < 0 else nl
            piece = chunk[start:end]
            if b"\x00" in piece:
                zeros = piece.count(0)
                self.line_nuls += zeros
                piece = b"" if zeros == len(piece) else piece.replace(b"\x00", b"")
            if len(self.line) <= MAX_LINE_BYTES:
                self.line += piece
            self.line_bytes += end - start
            if nl < 0:
                break
            self._line(out, self.line[: MAX_LINE_BYTES + 1], self.line_bytes + 1)
            start = nl + 1
        return b"".join(out)

    def finish(self) -> bytes:
        out: list[bytes] = []
        if self.line_bytes and not self.stopped:
            self._line(out, self.line[: MAX_LINE_BYTES + 1], self.line_bytes, ended=False)
        if self.held:
            self._release(out)
        if self.binary:
            self._note("to the end of the input")
        return b"".join(out)

    def _skip(self, chunk: bytes, start: int, out: list[bytes]) -> int:
        """Inside a span, from a line start: the span goes on to the next TEXT line (returned: where it
        starts, the span closed) or to the last line end of the chunk (returned: where the unfinished
        line after it starts)."""
        pos = start
        while True:
            m = _RESUME_RE.search(chunk, pos)
            if m is None:
                end = chunk.rfind(b"\n", start) + 1
                if end == 0:  # no line end: the line goes on in the next chunk
                    end = start
                self._absorb(chunk, start, end, out)
                return end if end > start else self._unfinished(chunk, start)
            if line_kind(m.group().replace(b"\x00", b"")) is LineKind.TEXT:
                self._absorb(chunk, start, m.start(), out)
                if not self.stopped:
                    self._note("read on from the text after it")
                    self.binary = False
                return m.start()
            pos = m.end()

    def _unfinished(self, chunk: bytes, start: int) -> int:
        """A chunk with no line end inside a span: its bytes begin the next line (which the line-by-line
        way judges once it ends)."""
        piece = chunk[start:]
        zeros = piece.count(0)
        self.line_nuls += zeros
        self.line = b"" if zeros == len(piece) else piece.replace(b"\x00", b"")[: MAX_LINE_BYTES + 1]
        self.line_bytes = len(piece)
        return len(chunk)

    def _absorb(self, chunk: bytes, start: int, end: int, out: list[bytes]) -> None:
        """chunk[start:end], whole lines, into the span: an empty line for each."""
        if end <= start:
            return
        out.append(b"\n" * chunk.count(b"\n", start, end))
        self.span_bytes += end - start
        self.nuls += chunk.count(0, start, end)
        self.offset += end - start
        if self.span_bytes >= MAX_BINARY_RUN_BYTES:
            self._note("stopped reading there")
            self.binary, self.stopped = False, True

    def _line(self, out: list[bytes], text: bytes, size: int, ended: bool = True) -> None:
        """One line: `text` without NUL bytes, `size` bytes as fed (its newline included when `ended`)."""
        nl = b"\n" if ended else b""
        kind = line_kind(text)
        nuls, self.line, self.line_bytes, self.line_nuls = self.line_nuls, b"", 0, 0
        if self.binary and kind is LineKind.TEXT:
            self._note("read on from the text after it")
            self.binary = False
        if self.binary:
            self.span_bytes += size
            self.nuls += nuls
            out.append(b"\n")  # (also for a last line without one: it is a line of the file)
        elif kind is LineKind.BINARY or (self.held and kind is LineKind.OTHER):
            if not self.held:
                self.held_start = self.offset
            self.held.append(text + nl)
            self.held_bytes += size
            self.held_nuls += nuls
            if self.held_bytes >= MIN_BINARY_SPAN:
                self._open_span(out)
        else:
            if self.held:
                self._release(out)
            out.append(text + nl)
        self.offset += size

    def _open_span(self, out: list[bytes]) -> None:
        """The held run is a binary span: its lines become empty lines (the first keeps a text head)."""
        first = self.held[0]
        head = _text_head(first.rstrip(b"\n"))
        out.append(head + b"\n" * first.endswith(b"\n"))
        out.extend(b"\n" * line.endswith(b"\n") for line in self.held[1:])
        self.binary = True
        self.span_start = self.held_start + len(head)
        self.span_bytes = self.held_bytes - len(head)
        self.nuls += self.held_nuls
        self.held, self.held_bytes, self.held_nuls = [], 0, 0

    def _release(self, out: list[bytes]) -> None:
        """The held run was too short for a span: its lines are text after all."""
        out.extend(self.held)
        self.held, self.held_bytes, self.held_nuls = [], 0, 0

    def _note(self, what: str) -> None:
        self.spans += 1
        if self.spans > MAX_SPAN_NOTES:  # (30,000 spans made 30,000 notes: a 5 MB report)
            self.more += 1
            self.more_bytes += self.span_bytes
            self.more_end = self.span_start + self.span_bytes
            return
        self.notes.append(
            f"{self.name}: {self.span_bytes:,} bytes of binary data skipped from byte {self.span_start:,} "
            f"({what}; its lines count as empty lines, so line numbers stay those of the file)"
        )

    def summary(self) -> None:
        """The note of the spans past MAX_SPAN_NOTES (once, at the end of the input)."""
        if self.more:
            self.notes.append(
                f"{self.name}: {self.more:,} more spans of binary data ({self.more_bytes:,} bytes in all, "
                f"up to byte {self.more_end:,}) skipped the same way"
            )
            self.more = 0


def _text_chunks(chunks: Iterator[bytes], stats: InputStats) -> Iterator[bytes]:
    """UTF-8 bytes of an input, read as `sniff` decides on its first bytes; NUL bytes dropped."""
    it = iter(chunks)
    head = b""
    for chunk in it:
        head += chunk
        if b"\n" in head or len(head) >= SNIFF_BYTES:
            break  # a pipe's first line is enough: waiting for more could wait forever
    if not head:
        return
    kind = sniff(head)
    name = stats.path
    binary_head = kind == "binary"
    if binary_head:
        what = binary_format(head)
        if what is not None:
            stats.notes.append(f"{name}: binary data, not a log ({what}); skipped")
            return
        # binary data before text (a crashed writer's garbage, a disk block): found per region, as
        # after text (BinarySpans), so the log after it is read (it was skipped whole: EMPTY)
        kind = "utf-8"
    if kind.startswith("utf-16"):
        stats.notes.append(
            f"{name}: read as {kind.upper()}"
            + (" (byte-order mark)" if kind == "utf-16" else " (no byte-order mark)")
        )
        decoder = codecs.getincrementaldecoder(kind)(errors="replace")
        pieces = (decoder.decode(c).encode("utf-8") for c in _chain(head, it))
        source = _chain_final(pieces, lambda: decoder.decode(b"", final=True).encode("utf-8"))
    else:
        if kind == "utf-8-sig":
            head = head[len(codecs.BOM_UTF8) :]
        elif kind == "cr":
            stats.notes.append(f"{name}: lines end in a lone carriage return (CR); read each as a line")
        source = _chain(head, it)
    offset = len(codecs.BOM_UTF8) if kind == "utf-8-sig" else 0
    yield from _text_of(source, kind == "cr", stats, offset, binary_head)


def binary_format(head: bytes) -> str | None:
    """What binary format an input that starts with `head` is, by its first bytes (BINARY_MAGIC)."""
    return next((what for magic, what in BINARY_MAGIC if head.startswith(magic)), None)


def _text_of(
    source: Iterator[bytes], cr: bool, stats: InputStats, offset: int, binary_head: bool = False
) -> Iterator[bytes]:
    """The text of decoded chunks: NUL bytes dropped, binary spans skipped (BinarySpans), a run of
    MAX_BINARY_RUN_BYTES without text stopped; `cr`: lines end in a lone CR. `offset`: where the first
    chunk starts in the input; `binary_head`: it starts with binary data (every chunk is looked at
    line by line until a chunk ends outside a span)."""
    name = stats.path
    nuls = 0
    run = 0  # bytes of NUL / control data with no text in a row
    spans = BinarySpans(name, stats.notes, offset)
    try:
        for raw in source:
            size = len(raw)
            chunk = raw
            if b"\x00" in raw:
                zeros = raw.count(0)
                # (bytes.replace is slow on a chunk of NUL bytes only: 10 ms a MB)
                chunk = b"" if zeros == size else raw.replace(b"\x00", b"")
                nuls += zeros
            run = run + size if not chunk or (b"\n" not in chunk and _mostly_control(chunk)) else 0
            if run >= MAX_BINARY_RUN_BYTES:
                nuls = 0  # said by this note
                stats.notes.append(
                    f"{name}: {run >> 20} MB of NUL or control bytes in a row with no text (a device "
                    f"such as /dev/zero, a file of zeros, or a gzip bomb); stopped reading there"
                )
                return
            if spans.active or chunk is not raw or binary_head:  # (NUL bytes: binary data may start here)
                chunk = spans.feed(raw.replace(b"\r", b"\n") if cr else raw)
                binary_head = False
            else:
                spans.offset += size
                chunk = chunk.replace(b"\r", b"\n") if cr else chunk
            if chunk:
                yield chunk
            if spans.stopped:
                return
        yield spans.finish()
    finally:
        spans.summary()
        nuls -= spans.nuls  # (those of a binary span are said by its note)
        if nuls > 0:
            stats.notes.append(
                f"{name}: {nuls} NUL byte(s) dropped (a log truncated while written starts with them)"
            )


def _mostly_control(chunk: bytes) -> bool:
    """Are more than BINARY_RATIO of the bytes control bytes? (Asked only of data with no line end.)"""
    return len(chunk) - len(chunk.translate(None, _CONTROL_BYTES)) > BINARY_RATIO * len(chunk)


def _chain(head: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if head:
        yield head
    yield from rest


def _chain_final(pieces: Iterator[bytes], final) -> Iterator[bytes]:
    yield from pieces
    yield final()


def plain_chunks(stream: BinaryIO, stats: InputStats) -> Iterator[bytes]:
    """The input's bytes in chunks of at most about CHUNK_BYTES, as UTF-8 (see the module doc)."""
    return _text_chunks(_raw_chunks(stream, stats, skip_holes=True), stats)


GZIP_MAGIC = b"\x1f\x8b"


class TruncatedGzip(Exception):
    """Compressed data (gzip or zstd) that ends early or is damaged: what was read before stays read."""


def gunzip_chunks(stream: BinaryIO, stats: InputStats) -> Iterator[bytes]:
    """Decompress gzip incrementally (multi-member too), so a truncated file yields what it holds."""
    return _text_chunks(_gunzip(stream, stats), stats)


def _gunzip(stream: BinaryIO, stats: InputStats) -> Iterator[bytes]:
    """gzip's own member handling: members one after the other, NUL padding after a member skipped,
    trailing bytes that are not gzip ignored with a note; only a member that began and did not end
    is truncated data."""
    d = zlib.decompressobj(wbits=31)
    fed = False  # some bytes of the current member went to `d`
    members = 0  # members read to their end
    for raw in _raw_chunks(stream, stats):
        while raw:
            if not fed and members:
                raw = raw.lstrip(b"\x00")  # zero padding after a member (tape blocks), as gzip skips it
                if not raw:
                    break
                if not GZIP_MAGIC.startswith(raw[:2]):
                    # not another member: trailing garbage, which gzip also ignores (with a warning)
                    stats.notes.append(
                        f"{stats.path}: bytes after the end of the gzip data are not gzip; ignored"
                    )
                    return
            fed = True
            yield from _inflate(d, raw)
            if d.eof:
                raw = d.unused_data
                d = zlib.decompressobj(wbits=31)
                fed = False
                members += 1
            else:
                raw = b""
    if fed:  # a member began and did not end
        tail = d.flush()
        if tail:
            yield tail
        raise TruncatedGzip("compressed data ends early")


def _inflate(d, raw: bytes) -> Iterator[bytes]:
    """What `raw` decompresses to in `d` (a zlib decompressobj), CHUNK_BYTES at a time; damaged data is
    TruncatedGzip."""
    try:
        out = d.decompress(raw, CHUNK_BYTES)
        if out:
            yield out
        while d.unconsumed_tail:
            out = d.decompress(d.unconsumed_tail, CHUNK_BYTES)
            if out:
                yield out
    except zlib.error as exc:
        raise TruncatedGzip(f"damaged gzip data ({exc})") from None


# A progress bar's redraw (tqdm's `desc: 50%|###  | 3/6 [..]`, or `16 examples [00:01, 9.2 examples/s]`
# without a total): what a carriage return is for. (logparse.read.normalize reads a line's message by it;
# LongLine drops such redraws from a line too long to keep whole.)
BAR_REDRAW_PATTERN = r"\d{1,3}%\||\d\s?[^\s\[\]]{0,30}\s\[(?:\d+:)?\d\d:\d\d[,<\]]"
_BAR_REDRAW_BYTES = re.compile(BAR_REDRAW_PATTERN.encode())


class LongLine:
    """A line longer than MAX_LINE_BYTES, fed piece by piece, reduced to at most MAX_LINE_BYTES.

    A carriage return rewrites the terminal, not the log: a tqdm bar written to a file puts thousands
    of redraws on one physical line, and what follows the last one (often the error that ended the job)
    is as much a part of the line as its head. So the line is read as its `\r` segments: blank ones and
    progress-bar redraws (BAR_REDRAW_PATTERN) go, but for the last redraw (what the terminal showed,
    and where the progress tracker reads the bar); every other segment is kept, in order, up to
    MAX_LINE_BYTES; and the segment after the last `\r` is always kept (its first MAX_LINE_BYTES), the
    earlier ones giving way to it. A line without `\r` keeps its head, as before. Holds at most
    about 2 x MAX_LINE_BYTES, however long the line."""

    __slots__ = ("bar", "bar_at", "dropped", "kept", "segment")

    def __init__(self) -> None:
        self.kept = bytearray()  # the segments kept so far, each followed by `\r`
        self.segment = bytearray()  # the open segment's head (MAX_LINE_BYTES at most)
        self.bar = b""  # the last redraw closed after the segments kept
        self.bar_at = 0  # where it goes among them
        self.dropped = 0  # bytes left out

    def feed(self, piece: bytes) -> None:
        parts = piece.split(b"\r") if b"\r" in piece else (piece,)
        self._extend(parts[0])
        for part in parts[1:]:
            self._close()
            self._extend(part)

    def _extend(self, part: bytes) -> None:
        room = MAX_LINE_BYTES - len(self.segment)
        if len(part) > room:
            self.dropped += len(part) - max(room, 0)
            part = part[: max(room, 0)]
        self.segment += part

    def _close(self) -> None:
        """The open segment ended at a `\r`."""
        seg = bytes(self.segment)
        self.segment = bytearray()
        if not seg.strip():
            return
        if _BAR_REDRAW_BYTES.search(seg):
            self.dropped += len(self.bar)
            self.bar, self.bar_at = seg, len(self.kept)
            return
        if len(self.kept) + len(seg) + 1 > MAX_LINE_BYTES:
            self.dropped += len(seg) + 1
            return
        self.kept += seg + b"\r"

    def line(self) -> bytes:
        """The line as kept (no newline), MAX_LINE_BYTES at most."""
        kept = self.kept
        if self.bar:
            kept = kept[: self.bar_at] + self.bar + b"\r" + kept[self.bar_at :]
        room = MAX_LINE_BYTES - len(self.segment)
        if len(kept) > room:
            # the earlier segments give way to the last one (from their end: the first stay)
            kept = kept[: max(room, 0)]
            cut = kept.rfind(b"\r") + 1
            kept = kept[:cut]
        return bytes(kept + self.segment)


def zstd_chunks(stream: BinaryIO, stats: InputStats) -> Iterator[bytes]:
    """Decompress zstd incrementally (frames one after the other), as gunzip_chunks does gzip."""
    return _text_chunks(_unzstd(stream, stats), stats)


def _unzstd(stream: BinaryIO, stats: InputStats) -> Iterator[bytes]:
    """zstd frames one after the other (as `zstd -d` reads them); a frame that began and did not end,
    or damaged data, is truncated data (TruncatedGzip) after what it held."""
    try:  # (a dependency: zstd is how log shippers and journald archives often compress)
        import zstandard
    except ImportError:  # pragma: no cover - installed with verl-logscan
        raise InputError(
            f"{stats.path}: zstd-compressed; reading it needs the zstandard package (pip install zstandard)"
        ) from None
    new = zstandard.ZstdDecompressor().decompressobj
    d = new()
    fed = False  # some bytes of the current frame went to `d`
    pending: list[bytes] = []  # output not yet handed on (handed on in chunks of about CHUNK_BYTES)
    size = 0
    try:
        for raw in _raw_chunks(stream, stats):
            # fed ZSTD_SLICE bytes at a time: a call returns all it makes, and a byte of zstd can make
            # about 40 KB (a bomb of zeros), so a slice bounds what one call holds (40 MB)
            for at in range(0, len(raw), ZSTD_SLICE):
                piece = raw[at : at + ZSTD_SLICE]
                while piece:
                    fed = True
                    out = d.decompress(piece)
                    if out:
                        pending.append(out)
                        size += len(out)
                    if not d.eof:
                        break
                    piece, d, fed = d.unused_data, new(), False
                if size >= CHUNK_BYTES:
                    yield b"".join(pending)
                    pending, size = [], 0
    except zstandard.ZstdError as exc:
        damaged: str | None = f"damaged zstd data ({exc})"
    else:
        damaged = "compressed data ends early" if fed else None
    if pending:  # (also what a damaged frame held before the damage)
        yield b"".join(pending)
    if damaged is not None:
        raise TruncatedGzip(damaged)


def decompressed_chunks(stream: BinaryIO, stats: InputStats, compression: str | None) -> Iterator[bytes]:
    """The text chunks of an input compressed as `compression` names (COMPRESSED; None: not)."""
    if compression == "gzip":
        return gunzip_chunks(stream, stats)
    if compression == "zstd":
        return zstd_chunks(stream, stats)
    return plain_chunks(stream, stats)


def compression_of(path: str) -> str | None:
    """The compression an input's name says (`.gz`: gzip, `.zst`: zstd), None for stdin and the rest."""
    return None if path == "-" else COMPRESSED.get(Path(path).suffix.lower())


def iter_raw_lines(chunks: Iterator[bytes]) -> Iterator[tuple[bytes, bool]]:
    """Yield (line bytes without the newline, truncated?) from byte chunks; a line longer than
    MAX_LINE_BYTES is reduced (LongLine) and marked truncated."""
    rest = b""
    long: LongLine | None = None  # inside an over-long line
    try:
        for chunk in chunks:
            start = 0
            while True:
                nl = chunk.find(b"\n", start)
                if nl < 0:
                    break
                if long is not None:
                    long.feed(chunk[start:nl])
                    yield long.line(), True
                    long = None
                else:
                    piece = rest + chunk[start:nl] if rest else chunk[start:nl]
                    rest = b""
                    if len(piece) > MAX_LINE_BYTES:
                        long = LongLine()
                        long.feed(piece)
                        yield long.line(), True
                        long = None
                    else:
                        yield piece, False
                start = nl + 1
            if long is not None:
                long.feed(chunk[start:])
            else:
                rest += chunk[start:]
                if len(rest) > MAX_LINE_BYTES:
                    long = LongLine()
                    long.feed(rest)
                    rest = b""
    finally:
        if long is not None:
            yield long.line(), True
        elif rest:
            yield rest, False


def iter_lines(
    stream: BinaryIO, source: str, stats: InputStats, compression: str | None = None
) -> Iterator[Line]:
    truncated_count = 0
    chunks = decompressed_chunks(stream, stats, compression)
    for number, (raw, truncated) in enumerate(iter_raw_lines(chunks), 1):
        stats.lines = number
        if truncated:
            truncated_count += 1
        yield Line(source, number, decode_line(raw), truncated)
    if truncated_count:
        stats.notes.append(cut_lines_note(truncated_count))


def cut_lines_note(count: int) -> str:
    """The note of an input whose `count` lines were longer than MAX_LINE_BYTES (LongLine)."""
    return (
        f"{count} line(s) longer than {MAX_LINE_BYTES} bytes were cut to that length (of a line of "
        f"carriage returns, the text after the last one and every segment that is no progress bar kept)"
    )


def is_log_like(path: Path) -> bool:
    """Is a folder's file read as a log by its name: *.log, *.out, *.err, *.txt, *.stdout, *.stderr, a
    .gz or .zst, `stdout`, `stderr`, `error.json`, or one of these rotated (`train.log.1`)?"""
    name = path.name
    if name in LOG_NAMES or path.suffix.lower() in LOG_SUFFIXES:
        return True
    m = _ROTATED.match(name)
    return m is not None and (
        m.group("base") in LOG_NAMES or Path(m.group("base")).suffix.lower() in LOG_SUFFIXES
    )


def _read_order(name: str) -> tuple:
    """Where a file name sorts among its folder's: by name, a rotated log's older parts before the
    current one (`train.log.2`, `train.log.1`, `train.log`; dated ones by date)."""
    stem = name[: -len(Path(name).suffix)] if Path(name).suffix.lower() in COMPRESSED else name
    m = _ROTATED.match(stem)
    if m is None or not is_log_like(Path(m.group("base"))):
        return (name, 2, 0, "", name)
    n = m.group("n")
    return (m.group("base"), 0, -int(n), "", name) if n.isdigit() else (m.group("base"), 1, 0, n, name)


@dataclass
class Expanded:
    """The inputs that paths name (a folder: its log files, in reading order) and what was left out."""

    files: list[str]
    notes: list[str] = field(default_factory=list)


def expand_inputs(paths: list[str]) -> list[str]:
    """Files as given; folders become every log-like file inside, recursively, in reading order; '-'
    is stdin. (expand: the same, with notes on what a folder holds and is not read.)"""
    return expand(paths).files


def expand(paths: list[str]) -> Expanded:
    """expand_inputs, with a note for each kind of folder entry left out: files not named as logs,
    symbolic links that lead out of the folder, FIFOs, devices and sockets. Raises InputError."""
    out = Expanded([])
    for p in paths:
        if p == "-":
            out.files.append(p)
            continue
        try:
            out.files.extend(_expand(p, out.notes))
        except OSError as exc:  # a name too long for the file system, a loop of links, ...
            raise InputError(f"{p}: cannot read: {exc.strerror or exc}") from None
    return out


def _expand(p: str, notes: list[str]) -> list[str]:
    path = Path(p)
    if path.is_dir():
        if not os.access(path, os.R_OK | os.X_OK):
            raise InputError(f"{p}: permission denied (cannot list the folder)")
        found, skipped = _folder_files(p)
        said = [_skipped_note(p, why, names) for why, names in skipped.items() if names]
        if not found:
            more = f"; {'; '.join(n.split(': ', 1)[1] for n in said)}" if said else ""
            raise InputError(
                f"{p}: folder has no log files (*.log, *.out, *.err, *.txt, *.stdout, *.stderr, *.gz, "
                f"*.zst, rotated *.log.1){more}"
            )
        notes.extend(said)
        return found
    if path.exists() or path.is_symlink():
        return [p]
    raise InputError(f"{p}: no such file or folder")


SKIP_NOT_A_LOG = "file(s) not named as a log skipped (give one's path to read it)"
SKIP_LINK_OUT = "symbolic link(s) leading out of the folder skipped"
SKIP_NOT_REGULAR = "entr(y/ies) that are no regular file skipped (a FIFO, device or socket)"


def _folder_files(folder: str) -> tuple[list[str], dict[str, list[str]]]:
    """The log files under `folder` in reading order, and the entries left out, by why. A symbolic
    link is followed only to a file inside the folder (one to /etc/hostname is not read), and never
    into a folder (no loops); a FIFO or device is never opened (a read of one could wait forever)."""
    root = os.path.realpath(folder)
    skipped: dict[str, list[str]] = {SKIP_NOT_A_LOG: [], SKIP_LINK_OUT: [], SKIP_NOT_REGULAR: []}
    found: list[tuple[tuple, str, str, bool]] = []
    seen: dict[str, tuple[tuple, str]] = {}  # real path -> (key, path) of the entry read
    todo = [(folder, ())]
    while todo:
        current, parts = todo.pop()
        with os.scandir(current) as entries:
            listed = sorted(entries, key=lambda e: e.name)
        for entry in listed:
            rel = "/".join((*parts, entry.name))
            if entry.is_dir(follow_symlinks=False):
                todo.append((entry.path, (*parts, entry.name)))
                continue
            real = os.path.realpath(entry.path)
            link = entry.is_symlink()
            if link and not (real == root or real.startswith(root + os.sep)):
                skipped[SKIP_LINK_OUT].append(rel)
                continue
            try:
                mode = os.stat(entry.path).st_mode
            except OSError:
                mode = 0  # (a dangling link)
            if stat.S_ISDIR(mode):
                continue  # (a link to a folder inside: its files are listed where they are)
            if not stat.S_ISREG(mode):
                skipped[SKIP_NOT_REGULAR].append(rel)
            elif not is_log_like(Path(entry.name)):
                skipped[SKIP_NOT_A_LOG].append(rel)
            else:
                key = (*((part, 2, 0, "", part) for part in parts), _read_order(entry.name))
                found.append((key, entry.path, real, link))
    # a file that links inside the folder also name is read once, as itself (not as its link)
    found.sort(key=lambda f: (f[3], f[0]))
    for key, path, real, _ in found:
        if real not in seen:
            seen[real] = (key, path)
    return [path for _, path in sorted(seen.values())], skipped


def _skipped_note(folder: str, why: str, names: list[str]) -> str:
    shown = ", ".join(sorted(names)[:MAX_NAMED_SKIPS])
    more = f" and {len(names) - MAX_NAMED_SKIPS} more" if len(names) > MAX_NAMED_SKIPS else ""
    return f"{folder}: {len(names)} {why}: {shown}{more}"


def open_input(path: str) -> BinaryIO:
    if path == "-":
        stdin = getattr(sys.stdin, "buffer", sys.stdin)
        if stdin is None:
            raise InputError("standard input is closed; give a file or pipe a log in")
        return stdin
    p = Path(path)
    if os.path.isdir(p):
        raise InputError(f"{path}: is a folder")
    try:
        fh = open(p, "rb")  # noqa: SIM115 - closed by the caller
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot open: {exc.strerror or exc}") from None
    compression = compression_of(path)
    if compression is not None:
        magic = GZIP_MAGIC if compression == "gzip" else ZSTD_MAGIC
        head = fh.read(len(magic))
        fh.seek(0) if fh.seekable() else None
        if head != magic:
            fh.close()
            raise InputError(f"{path}: has a {p.suffix} name but is not {compression} data")
    return fh


def read_input(path: str, stats: InputStats) -> Iterator[Line]:
    """All lines of one input. A damaged .gz yields what could be read and a note."""
    fh = open_input(path)
    display = STDIN_NAME if path == "-" else path
    try:
        try:
            yield from iter_lines(fh, display, stats, compression_of(path))
        except TruncatedGzip as exc:
            stats.notes.append(f"{display}: {exc}; scanned the {stats.lines} line(s) before that")
        except OSError as exc:
            raise InputError(f"{display}: read error: {exc.strerror or exc}") from None
    finally:
        if path != "-":
            fh.close()
