"""Read log inputs as a stream of lines: files, folders, .gz files and stdin.

Nothing here holds a whole log: bytes are read in large chunks and split into lines; a line longer
than MAX_LINE_BYTES keeps its first MAX_LINE_BYTES and is marked truncated (the rest is skipped, the
line count stays right).
"""

from __future__ import annotations

import os
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import regex

CHUNK_BYTES = 1 << 20
MAX_LINE_BYTES = 1 << 20
LOG_SUFFIXES = {".log", ".out", ".err", ".txt", ".gz"}
LOG_NAMES = {"stdout", "stderr", "error.json"}
ANSI_RE = regex.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[()][0-9A-B]")


class InputError(Exception):
    """An input cannot be read at all (missing, not a file, permission denied, not gzip)."""


class Line:
    """One log line: where it came from and its text (decoded, ANSI codes removed, no newline)."""

    __slots__ = ("source", "number", "text", "truncated")

    def __init__(self, source: str, number: int, text: str, truncated: bool = False):
        self.source = source
        self.number = number
        self.text = text
        self.truncated = truncated

    def __repr__(self) -> str:
        return f"Line({self.source}:{self.number} {self.text[:60]!r})"


@dataclass
class InputStats:
    path: str
    lines: int = 0
    bytes: int = 0
    notes: list[str] = field(default_factory=list)


def strip_ansi(text: str) -> str:
    if "\x1b" not in text:
        return text
    return ANSI_RE.sub("", text)


def decode_line(raw: bytes) -> str:
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return strip_ansi(raw.decode("utf-8", errors="replace"))


def plain_chunks(stream: BinaryIO, stats: InputStats) -> Iterator[bytes]:
    while True:
        chunk = stream.read(CHUNK_BYTES)
        if not chunk:
            return
        stats.bytes += len(chunk)
        yield chunk


class TruncatedGzip(Exception):
    pass


def gunzip_chunks(stream: BinaryIO, stats: InputStats) -> Iterator[bytes]:
    """Decompress gzip incrementally (multi-member too), so a truncated file yields what it holds."""
    d = zlib.decompressobj(wbits=31)
    for raw in plain_chunks(stream, stats):
        while raw:
            try:
                out = d.decompress(raw, CHUNK_BYTES)
            except zlib.error as exc:
                raise TruncatedGzip(f"damaged gzip data ({exc})") from None
            if out:
                yield out
            while d.unconsumed_tail:
                out = d.decompress(d.unconsumed_tail, CHUNK_BYTES)
                if out:
                    yield out
            if d.eof:
                raw = d.unused_data
                d = zlib.decompressobj(wbits=31)
            else:
                raw = b""
    if not d.eof and (d.unconsumed_tail or stats.bytes):
        tail = d.flush()
        if tail:
            yield tail
        raise TruncatedGzip("compressed data ends early")


def iter_raw_lines(chunks: Iterator[bytes]) -> Iterator[tuple[bytes, bool]]:
    """Yield (line bytes without the newline, truncated?) from byte chunks."""
    rest = b""
    skipping = False  # inside an over-long line whose head was already yielded
    pending: bytes | None = None
    try:
        for chunk in chunks:
            start = 0
            while True:
                nl = chunk.find(b"\n", start)
                if nl < 0:
                    break
                if skipping:
                    skipping = False
                else:
                    piece = rest + chunk[start:nl] if rest else chunk[start:nl]
                    rest = b""
                    if len(piece) > MAX_LINE_BYTES:
                        yield piece[:MAX_LINE_BYTES], True
                    else:
                        yield piece, False
                start = nl + 1
            if not skipping:
                rest += chunk[start:]
                if len(rest) > MAX_LINE_BYTES:
                    yield rest[:MAX_LINE_BYTES], True
                    rest = b""
                    skipping = True
    finally:
        pending = rest if rest and not skipping else None
        if pending is not None:
            yield pending, False


def iter_lines(stream: BinaryIO, source: str, stats: InputStats, gz: bool = False) -> Iterator[Line]:
    number = 0
    truncated_count = 0
    chunks = gunzip_chunks(stream, stats) if gz else plain_chunks(stream, stats)
    for raw, truncated in iter_raw_lines(chunks):
        number += 1
        stats.lines = number
        if truncated:
            truncated_count += 1
        yield Line(source, number, decode_line(raw), truncated)
    if truncated_count:
        stats.notes.append(f"{truncated_count} line(s) longer than {MAX_LINE_BYTES} bytes were cut to that length")


def is_log_like(path: Path) -> bool:
    return path.suffix.lower() in LOG_SUFFIXES or path.name in LOG_NAMES


def expand_inputs(paths: list[str]) -> list[str]:
    """Files as given; folders become every log-like file inside, recursively, sorted; '-' is stdin."""
    out: list[str] = []
    for p in paths:
        if p == "-":
            out.append(p)
            continue
        path = Path(p)
        if path.is_dir():
            found = sorted(
                (f for f in path.rglob("*") if f.is_file() and is_log_like(f)),
                key=lambda f: f.relative_to(path).parts,
            )
            if not found:
                raise InputError(f"{p}: folder has no log files (*.log, *.out, *.err, *.txt, *.gz)")
            out.extend(str(f) for f in found)
        elif path.exists() or path.is_symlink():
            out.append(p)
        else:
            raise InputError(f"{p}: no such file or folder")
    return out


def open_input(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{path}: is a folder")
    try:
        fh = open(p, "rb")  # noqa: SIM115 - closed by the caller
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot open: {exc.strerror or exc}") from None
    if p.suffix.lower() == ".gz":
        head = fh.read(2)
        fh.seek(0) if fh.seekable() else None
        if head != b"\x1f\x8b":
            fh.close()
            raise InputError(f"{path}: has a .gz name but is not gzip data")
    return fh


def read_input(path: str, stats: InputStats) -> Iterator[Line]:
    """All lines of one input. A damaged .gz yields what could be read and a note."""
    fh = open_input(path)
    display = "-" if path == "-" else path
    gz = path != "-" and Path(path).suffix.lower() == ".gz"
    try:
        try:
            yield from iter_lines(fh, display, stats, gz=gz)
        except TruncatedGzip as exc:
            stats.notes.append(f"{display}: {exc}; scanned the {stats.lines} line(s) before that")
        except OSError as exc:
            raise InputError(f"{display}: read error: {exc.strerror or exc}") from None
    finally:
        if path != "-":
            fh.close()


def input_size(path: str) -> int | None:
    if path == "-":
        return None
    try:
        return os.stat(path).st_size
    except OSError:
        return None
