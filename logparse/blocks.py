"""Blocks of whole lines with their candidate lines found: the part of a scan that touches every byte.

`iter_blocks` turns an input's chunks into Blocks: whole lines (a line longer than MAX_LINE_BYTES is
cut to that length and the rest skipped), the offsets of the candidate lines (a prefilter keyword in
the line), the prefilter keyword ids of each, and their line numbers. Nothing here looks at a line in
Python: Hyperscan (or the `re` fallback) finds the candidates, and newlines are counted by `bytes.count`
or, on long inputs, numpy (several times faster; optional).

`blocks_in_process` computes the same blocks in a forked reader process, a few blocks ahead of the
scanner, so that on two cores the byte-level work (reading, gunzip, Hyperscan, counting) overlaps
the scanner's per-line Python work. The results are the same blocks in the same order. (A thread
does not do it: each Hyperscan match calls back into Python, and handing the GIL back and forth for
tens of thousands of matches made a threaded scan slower than a single-threaded one.)
"""

from __future__ import annotations

import mmap
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection

from logparse.prefilter import Prefilter
from logparse.reader import CHUNK_BYTES, MAX_LINE_BYTES, InputStats, TruncatedGzip

NUMPY_AFTER_BYTES = 32 << 20  # below this much input, importing numpy (~0.1 s) costs more than it saves
NUMPY_MIN_BLOCK = 64 << 10


@dataclass(slots=True)
class Block:
    """Whole lines of one input (`data` ends in a newline) and the candidate lines among them."""

    data: bytes
    base: int  # lines of the input before this block
    lines: int  # lines in this block
    starts: list[int]  # offsets of the candidate lines
    numbers: list[int]  # their line numbers (1-based, in the input)
    keywords: list[frozenset[int]]  # their prefilter keyword ids
    cut: bool = False  # the block is the head of a line longer than MAX_LINE_BYTES


class _NewlineCounter:
    """Line numbers of offsets in a block; numpy once the input is long enough to pay for importing it."""

    def __init__(self) -> None:
        self.seen = 0
        self._np = None

    def numbers(self, data: bytes, starts: list[int], base: int) -> tuple[list[int], int]:
        """(line number of each start, newlines in `data`)."""
        self.seen += len(data)
        if self._np is None and self.seen >= NUMPY_AFTER_BYTES:
            try:
                import numpy
            except ImportError:  # pragma: no cover - numpy comes with pandas
                numpy = False
            self._np = numpy
        np = self._np
        if np and len(data) >= NUMPY_MIN_BLOCK:
            newlines = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
            if not starts:
                return [], len(newlines)
            return (np.searchsorted(newlines, starts) + (base + 1)).tolist(), len(newlines)
        out = []
        count = data.count
        pos = 0
        n = base
        for start in starts:
            n += count(b"\n", pos, start)
            pos = start
            out.append(n + 1)
        return out, n - base + count(b"\n", pos)


def iter_blocks(chunks: Iterable[bytes], prefilter: Prefilter) -> Iterator[Block]:
    """Blocks of whole lines from `chunks` (the last line may lack its newline: one is added)."""
    counter = _NewlineCounter()
    base = 0
    carry = b""
    skipping = False  # the rest of an over-long line whose head was already yielded

    def block(data: bytes, cut: bool = False) -> Block:
        found = prefilter.lines(data)
        starts = [s for s, _ in found]
        numbers, lines = counter.numbers(data, starts, base)
        return Block(data, base, lines, starts, numbers, [k for _, k in found], cut)

    for chunk in chunks:
        if skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                continue
            chunk = chunk[nl + 1:]
            base += 1
            skipping = False
        data = carry + chunk if carry else chunk
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            if len(data) > MAX_LINE_BYTES:  # one line (base + 1 counts it once its end is found)
                yield block(data[:MAX_LINE_BYTES] + b"\n", cut=True)
                skipping = True
                carry = b""
            else:
                carry = data
            continue
        data, carry = (data[:cut], data[cut:]) if cut < len(data) else (data, b"")
        b = block(data)
        yield b
        base += b.lines
    if carry and not skipping:
        yield block(carry + b"\n")


# -- reading in a second process ------------------------------------------------------------------
SLOTS = 4  # blocks in flight between the reader process and the scanner
SLOT_BYTES = CHUNK_BYTES + MAX_LINE_BYTES + 1  # the largest block: a carried partial line + one chunk


def reader_process_possible() -> bool:
    """A reader process needs fork (the Hyperscan database and the catalog are inherited, not
    rebuilt) and may not be started by a daemonic process (a fleet worker)."""
    if not hasattr(os, "fork") or sys.platform != "linux":
        return False
    return not multiprocessing.current_process().daemon


def _reader_main(chunks: Callable[[InputStats], Iterable[bytes]], stats: InputStats, prefilter: Prefilter,
                 ring: mmap.mmap, out: Connection, free: Connection) -> None:
    """In the reader process: blocks into ring slots, their candidates to `out`; a slot is reused
    once the scanner hands its number back on `free`. `stats` is this process's copy: what it
    learns (bytes read, notes) goes back with the blocks and at the end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the scanner handles Ctrl-C and stops this process
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    known = len(stats.notes)
    end: tuple = ("end",)
    try:
        for block in iter_blocks(chunks(stats), prefilter):
            slot = free.recv()
            at = slot * SLOT_BYTES
            ring[at:at + len(block.data)] = block.data
            out.send(("block", slot, len(block.data), block.base, block.lines, block.starts, block.numbers,
                      block.keywords, block.cut, stats.bytes))
    except TruncatedGzip as exc:
        end = ("truncated", str(exc))
    except OSError as exc:
        end = ("oserror", exc.strerror or str(exc))
    except Exception as exc:  # noqa: BLE001 - told to the scanner, which reports it as an input error
        end = ("oserror", f"{type(exc).__name__}: {exc}")
    out.send(("stats", stats.bytes, stats.notes[known:]))
    out.send(end)


def blocks_in_process(chunks: Callable[[InputStats], Iterable[bytes]], stats: InputStats,
                      prefilter: Prefilter) -> Iterator[Block]:
    """iter_blocks(chunks(stats), prefilter), computed by a forked reader process while the caller
    works on the previous blocks. Reading, decompressing, Hyperscan and line counting all happen
    there; a block's bytes come back through shared memory (SLOTS slots), its candidates through a
    pipe; `stats` learns the bytes read and the reader's notes. Errors are raised here as in
    iter_blocks (TruncatedGzip, OSError). Closing the generator (or an interrupt) stops the process."""
    ctx = multiprocessing.get_context("fork")
    ring = mmap.mmap(-1, SLOTS * SLOT_BYTES)  # anonymous and shared with the forked child
    out_r, out_w = ctx.Pipe(duplex=False)
    free_r, free_w = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_reader_main, args=(chunks, stats, prefilter, ring, out_w, free_r),
                       name="verl-logscan-reader", daemon=True)
    proc.start()
    out_w.close()
    free_r.close()
    try:
        for slot in range(SLOTS):
            free_w.send(slot)
        while True:
            try:
                msg = out_r.recv()
            except EOFError:
                raise OSError("the reader process ended unexpectedly") from None
            kind = msg[0]
            if kind == "block":
                _, slot, size, base, lines, starts, numbers, keywords, cut, stats.bytes = msg
                at = slot * SLOT_BYTES
                data = ring[at:at + size]
                try:
                    free_w.send(slot)
                except BrokenPipeError:  # the reader has sent its last block and ended
                    pass
                yield Block(data, base, lines, starts, numbers, keywords, cut)
            elif kind == "stats":
                stats.bytes = msg[1]
                stats.notes.extend(msg[2])
            elif kind == "end":
                return
            elif kind == "truncated":
                raise TruncatedGzip(msg[1])
            else:
                raise OSError(msg[1])
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        for conn in (out_r, free_w):
            conn.close()
        ring.close()
