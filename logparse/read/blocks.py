"""Blocks of whole lines with their candidate lines found: the part of a scan that touches every byte.

`iter_blocks` turns an input's chunks into Blocks: whole lines (a line longer than MAX_LINE_BYTES is
cut to that length and the rest skipped), the offsets of the candidate lines (a prefilter keyword in
the line), the prefilter keyword ids of each, and their line numbers. Nothing here looks at a line in
Python: Hyperscan (or the `re` fallback) finds the candidates, and newlines are counted by `bytes.count`
or, past NUMPY_AFTER_BYTES of input, numpy (optional).

`blocks_in_process` computes the same blocks in a forked reader process, a few blocks ahead of the
scanner, so that on two cores the byte-level work (reading, gunzip, Hyperscan, counting) and the
parsing of step lines (StepLine) overlap the scanner's per-line Python work. The blocks are the same,
in the same order; the scanner uses a StepLine only when it is its record's message's. (A thread
does not do it: each Hyperscan match calls back into Python, and handing the GIL back and forth for
tens of thousands of matches made a threaded scan slower than a single-threaded one.)
"""

from __future__ import annotations

import mmap
import os
import signal
import sys
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from logparse.read.prefilter import Prefilter
from logparse.read.progress_lines import ProgressColumns, ProgressLineParser
from logparse.read.sources import CHUNK_BYTES, MAX_LINE_BYTES, InputStats, TruncatedGzip, decode_line
from logparse.read.steps import STEP_KEYWORD, STEP_RE, StepParser

if TYPE_CHECKING:  # (multiprocessing is imported when a reader process starts: 10 ms a run otherwise)
    from multiprocessing.connection import Connection

# numpy counts newlines ~2.5x faster than bytes.count (0.15 s a GB saved) but takes ~0.1 s to import
NUMPY_AFTER_BYTES = 256 << 20
NUMPY_MIN_BLOCK = 64 << 10


@dataclass(slots=True)
class Block:
    """Whole lines of one input (its bytes end in a newline) and the candidate lines among them.

    A block from a reader process stays in shared memory (`ring` at `at`, `size` bytes) while the
    scanner works on it: only the candidate lines are copied out (`raw`), unless a region needs the
    whole block (`load`)."""

    data: bytes | None  # None until load() for a block in shared memory
    base: int  # lines of the input before this block
    lines: int  # lines in this block
    starts: list[int]  # offsets of the candidate lines
    numbers: list[int]  # their line numbers (1-based, in the input)
    keywords: list[frozenset[int]]  # their prefilter keyword ids
    cut: bool = False  # the block is the head of a line longer than MAX_LINE_BYTES
    # candidate index -> its step line parsed (StepLine), when parsed by a reader process
    steps: dict[int, StepLine] | None = None
    ends: list[int] | None = None  # where each candidate line ends (its newline), for a shared block
    size: int = 0
    ring: mmap.mmap | None = None
    at: int = 0
    # the candidates that are progress lines a scanner may apply without a record
    # (logparse.read.progress_lines)
    progress: ProgressColumns | None = None

    def __post_init__(self) -> None:
        if self.data is not None:
            self.size = len(self.data)

    def load(self) -> bytes:
        """The block's bytes (copied out of shared memory on first use)."""
        if self.data is None:
            self.data = self.ring[self.at : self.at + self.size]
        return self.data

    def raw(self, i: int) -> tuple[bytes, int]:
        """(bytes, end offset) of candidate line `i`, without its newline."""
        start = self.starts[i]
        if self.data is None:
            end = self.ends[i]
            return self.ring[self.at + start : self.at + end], end
        end = self.data.find(b"\n", start)
        if end < 0:
            end = self.size
        return self.data[start:end], end

    def end(self, i: int) -> int:
        """Where candidate line `i` ends (its newline, or the end of the block)."""
        if self.ends is not None:
            return self.ends[i]
        end = self.data.find(b"\n", self.starts[i])
        return end if end >= 0 else self.size

    def tail(self, n: int) -> bytes:
        """The last `n` bytes."""
        if self.data is None:
            return self.ring[self.at + max(0, self.size - n) : self.at + self.size]
        return self.data[-n:]


@dataclass(slots=True)
class StepLine:
    """A step line's metrics (StepParser.parse), parsed from the decoded line text. They are the
    message's when the message ends with the same `tail_length` characters after its `step:N - `."""

    step: int
    keys: tuple[str, ...]
    values: array
    names: tuple[str, ...]
    tail_length: int  # characters after `step:N - ` in the line text

    def fits(self, text: str, message: str) -> bool:
        """Are these the metrics a parse of `message` (of the line `text`) would give?"""
        m = STEP_RE.search(message)
        return (
            m is not None
            and len(message) - m.end() == self.tail_length
            and text.endswith(message)
            and int(m.group(1)) == self.step
        )


def parse_step_text(data: bytes, start: int, parser: StepParser) -> StepLine | None:
    """The step line at offset `start` of `data`, decoded as the scanner decodes it, parsed."""
    end = data.find(b"\n", start)
    text = decode_line(data[start : end if end >= 0 else len(data)][:MAX_LINE_BYTES])
    m = STEP_RE.search(text)
    parsed = parser.parse(text) if m else None
    if parsed is None:
        return None
    step, keys, values, names = parsed
    return StepLine(step, keys, array("d", values), names, len(text) - m.end())


class _NewlineCounter:
    """Line numbers of offsets in a block; numpy once the input is long enough to pay for importing it."""

    def __init__(self) -> None:
        self.seen = 0
        self._np = None

    def numbers(self, data: bytes, starts: list[int], base: int) -> tuple[list[int], int]:
        """(line number of each start, newlines in `data`)."""
        self.seen += len(data)
        if self._np is None and self.seen >= NUMPY_AFTER_BYTES:
            # one thread: idle OpenBLAS threads spin for a while and take the core the scan needs
            for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                os.environ.setdefault(var, "1")
            try:
                import numpy
            except ImportError:  # pragma: no cover - numpy comes with pandas
                numpy = False
            self._np = numpy
        np = self._np
        out = []
        if np and len(data) >= NUMPY_MIN_BLOCK:
            is_newline = np.frombuffer(data, np.uint8) == 10
            nonzero = np.count_nonzero
            pos = 0
            n = base
            for start in starts:
                n += nonzero(is_newline[pos:start])
                pos = start
                out.append(int(n) + 1)
            return out, int(n) - base + int(nonzero(is_newline[pos:]))
        count = data.count
        pos = 0
        n = base
        for start in starts:
            n += count(b"\n", pos, start)
            pos = start
            out.append(n + 1)
        return out, n - base + count(b"\n", pos)


def iter_blocks(
    chunks: Iterable[bytes],
    prefilter: Prefilter,
    step_parser: StepParser | None = None,
    progress: ProgressLineParser | None = None,
) -> Iterator[Block]:
    """Blocks of whole lines from `chunks` (the last line may lack its newline: one is added).
    `step_parser`: parse the candidate step lines too (Block.steps), for a scanner in another process.
    `progress`: find the progress lines a scanner may apply without a record (Block.progress; those
    step lines get no Block.steps entry)."""
    counter = _NewlineCounter()
    base = 0
    carry = b""
    skipping = False  # the rest of an over-long line whose head was already yielded
    step_id = (
        prefilter.keywords.index(STEP_KEYWORD)
        if step_parser is not None and STEP_KEYWORD in prefilter.keywords
        else None
    )

    def block(data: bytes, cut: bool = False) -> Block:
        found = prefilter.lines(data)
        starts = [s for s, _ in found]
        numbers, lines = counter.numbers(data, starts, base)
        keywords = [k for _, k in found]
        columns = progress.parse(data, found) if progress is not None else None
        steps = None
        if step_id is not None:
            applied = set(columns.index) if columns is not None else ()
            steps = {
                i: parsed
                for i, (start, ids) in enumerate(found)
                if step_id in ids
                and i not in applied
                and (parsed := parse_step_text(data, start, step_parser)) is not None
            }
        return Block(data, base, lines, starts, numbers, keywords, cut, steps, progress=columns)

    for chunk in chunks:
        if skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                continue
            chunk = chunk[nl + 1 :]
            base += 1
            skipping = False
        cut = chunk.rfind(b"\n") + 1
        if cut == 0:
            data = carry + chunk
            if len(data) > MAX_LINE_BYTES:  # one line (base + 1 counts it once its end is found)
                yield block(data[:MAX_LINE_BYTES] + b"\n", cut=True)
                skipping = True
                carry = b""
            else:
                carry = data
            continue
        # one copy at most: the carried partial line joined to the chunk's whole lines
        if cut != len(chunk):
            data = carry + memoryview(chunk)[:cut]
        elif carry:
            data = carry + chunk
        else:
            data = chunk
        carry = chunk[cut:]
        b = block(data)
        yield b
        base += b.lines
    if carry and not skipping:
        yield block(carry + b"\n")


# -- reading in a second process ------------------------------------------------------------------
SLOTS = 4  # blocks in flight between the reader process and the scanner
SLOT_BYTES = CHUNK_BYTES + MAX_LINE_BYTES + 1  # the largest block: a carried partial line + one chunk


PIPE_BYTES = 1 << 20  # the pipe of the blocks' candidates: room for several (the default 64 KiB holds one)


def _widen_pipe(conn: Connection) -> None:
    """Let the pipe hold PIPE_BYTES (Linux), so that the reader is not held up sending one block's
    candidates until the scanner takes them; where that cannot be done, it stays as it is."""
    try:
        import fcntl

        fcntl.fcntl(conn.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (ImportError, OSError):
        pass


def reader_process_possible() -> bool:
    """A reader process needs a second CPU to run on, fork (the Hyperscan database and the catalog
    are inherited, not rebuilt), and a parent that is no daemonic process (a fleet worker: the fleet
    already keeps every CPU busy)."""
    if not hasattr(os, "fork") or sys.platform != "linux":
        return False
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - Linux has it
        cpus = os.cpu_count() or 1
    import multiprocessing

    return cpus >= 2 and not multiprocessing.current_process().daemon


def _reader_main(
    chunks: Callable[[InputStats], Iterable[bytes]],
    stats: InputStats,
    prefilter: Prefilter,
    step_parser: StepParser,
    ring: mmap.mmap,
    out: Connection,
    free: Connection,
    parent_ends: tuple[Connection, ...] = (),
    progress: ProgressLineParser | None = None,
) -> None:
    """In the reader process: blocks into ring slots, their candidates to `out`; a slot is reused
    once the scanner hands its number back on `free`. `stats` is this process's copy: what it
    learns (bytes read, notes) goes back with the blocks and at the end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the scanner handles Ctrl-C and stops this process
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for conn in parent_ends:  # so that if the scanner dies (kill -9), recv and send here fail and it ends
        conn.close()
    known = len(stats.notes)
    end: tuple = ("end",)
    keys: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    sets: dict[frozenset[int], int] = {}  # keyword sets sent so far, numbered
    try:
        blocks = iter_blocks(chunks(stats), prefilter, step_parser, progress)
        slots: deque[int] = deque()  # slots the scanner has handed back, not yet filled
        while True:
            while free.poll():
                slots.append(free.recv())
            if progress is not None:
                # two or more blocks' room free: the scanner waits for this process, so the step lines'
                # metrics are left to it; else it is behind, and they are parsed here
                progress.rows_here = len(slots) < 2
            block = next(blocks, None)
            if block is None:
                break
            slot = slots.popleft() if slots else free.recv()
            at = slot * SLOT_BYTES
            ring[at : at + len(block.data)] = block.data
            steps = []  # the keys of a step line go along only when they differ from the last one's
            for i, sl in block.steps.items():
                steps.append(
                    (
                        i,
                        sl.step,
                        None if sl.keys == keys else sl.keys,
                        sl.values,
                        None if sl.names is names else sl.names,
                        sl.tail_length,
                    )
                )
                keys, names = sl.keys, sl.names
            find = block.data.find
            ends = array("q", [find(b"\n", start) for start in block.starts])  # every block ends in a newline
            # (the message stays small, so that several fit in the pipe and this process runs ahead:
            # numbers as arrays, each line's keyword set as its number in `sets`, new sets sent once)
            known_sets = len(sets)
            ids = array("l", [sets.setdefault(k, len(sets)) for k in block.keywords])
            out.send(
                (
                    "block",
                    slot,
                    len(block.data),
                    block.base,
                    block.lines,
                    array("q", block.starts),
                    array("q", block.numbers),
                    ids,
                    list(sets)[known_sets:] if len(sets) > known_sets else (),
                    block.cut,
                    stats.bytes,
                    steps,
                    ends,
                    block.progress,
                )
            )
    except TruncatedGzip as exc:
        end = ("truncated", str(exc))
    except OSError as exc:
        end = ("oserror", exc.strerror or str(exc))
    except EOFError:  # the scanner is gone
        return
    except Exception as exc:
        end = ("oserror", f"{type(exc).__name__}: {exc}")
    try:
        out.send(("stats", stats.bytes, stats.notes[known:]))
        out.send(end)
    except OSError:  # the scanner is gone
        return


def blocks_in_process(
    chunks: Callable[[InputStats], Iterable[bytes]],
    stats: InputStats,
    prefilter: Prefilter,
    step_parser: StepParser | None = None,
    progress: ProgressLineParser | None = None,
) -> Iterator[Block]:
    """iter_blocks(chunks(stats), prefilter), computed by a forked reader process while the caller
    works on the previous blocks. Reading, decompressing, Hyperscan and line counting all happen
    there; a block's bytes come back through shared memory (SLOTS slots: a block is valid until the
    caller asks for the next one), its candidates through a pipe; `stats` learns the bytes read and
    the reader's notes. Errors are raised here as in
    iter_blocks (TruncatedGzip, OSError). Closing the generator (or an interrupt) stops the process."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    ring = mmap.mmap(-1, SLOTS * SLOT_BYTES)  # anonymous and shared with the forked child
    out_r, out_w = ctx.Pipe(duplex=False)
    _widen_pipe(out_r)
    free_r, free_w = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_reader_main,
        args=(
            chunks,
            stats,
            prefilter,
            step_parser or StepParser(),
            ring,
            out_w,
            free_r,
            (out_r, free_w),
            progress,
        ),
        name="verl-logscan-reader",
        daemon=True,
    )
    proc.start()
    out_w.close()
    free_r.close()
    keys: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    sets: list[frozenset[int]] = []  # the reader's numbered keyword sets
    held = None  # the slot of the block the caller works on: handed back when it asks for the next
    try:
        try:
            for slot in range(SLOTS):
                free_w.send(slot)
        except BrokenPipeError:  # a short input: the reader has sent its blocks and ended already
            pass
        while True:
            if held is not None:
                try:
                    free_w.send(held)
                except BrokenPipeError:  # the reader has sent its last block and ended
                    pass
                held = None
            try:
                msg = out_r.recv()
            except EOFError:
                raise OSError("the reader process ended unexpectedly") from None
            kind = msg[0]
            if kind == "block":
                (
                    _,
                    slot,
                    size,
                    base,
                    lines,
                    starts,
                    numbers,
                    ids,
                    new_sets,
                    cut,
                    stats.bytes,
                    sent,
                    ends,
                    columns,
                ) = msg
                sets.extend(new_sets)
                keywords = [sets[i] for i in ids]
                steps = {}
                for i, step, new_keys, values, new_names, tail in sent:
                    keys = keys if new_keys is None else new_keys
                    names = names if new_names is None else new_names
                    steps[i] = StepLine(step, keys, values, names, tail)
                held = slot
                yield Block(
                    None,
                    base,
                    lines,
                    starts.tolist(),
                    numbers.tolist(),
                    keywords,
                    cut,
                    steps,
                    ends,
                    size,
                    ring,
                    slot * SLOT_BYTES,
                    columns,
                )
            elif kind == "stats":
                stats.bytes = msg[1]
                stats.notes.extend(msg[2])
            elif kind == "end":
                proc.join(timeout=5)  # it has nothing left to do
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
