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
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from logparse.read.pre_records import PreColumns, PreReader
from logparse.read.prefilter import Prefilter
from logparse.read.progress_lines import ProgressColumns, ProgressLineParser
from logparse.read.sources import (
    CHUNK_BYTES,
    MAX_LINE_BYTES,
    InputStats,
    LongLine,
    TruncatedGzip,
    decode_line,
)
from logparse.read.steps import STEP_KEYWORD, STEP_RE, StepParser
from patterns.numbers import log_int

if TYPE_CHECKING:  # (multiprocessing is imported when a reader process starts: 10 ms a run otherwise)
    from multiprocessing.connection import Connection

# numpy counts the newlines of a long stretch several times faster than bytes.count (NUMPY_PIECE bytes
# at a time: the comparison's booleans stay in the cache), but takes 0.05-0.1 s to import: it is used
# where it is imported already (the scanner's report imports it for the metrics; blocks_in_process
# imports it before forking readers for a large input) or once a process has read NUMPY_AFTER_BYTES
NUMPY_AFTER_BYTES = 256 << 20
NUMPY_GAP = 16 << 10  # a stretch between two candidate lines at least this long is counted by numpy
NUMPY_PIECE = 256 << 10


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
    # the process whose BlockMaker made it (0: the scanner's own; reader r: r + 1): its columns number
    # processes and shapes in that maker's tables
    worker: int = field(default=0, compare=False)
    # its candidate lines' prefixes read where it was made (logparse.read.pre_records), if they were: what
    # the scanner would read in them, so not a part of what the block is
    pre: PreColumns | None = field(default=None, compare=False)

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
            and log_int(m.group(1)) == self.step
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


def _cpu_seconds() -> float:
    """This process's CPU time so far (user + system)."""
    t = os.times()
    return t.user + t.system


class _NewlineCounter:
    """Line numbers of offsets in a block: bytes.count between two offsets, numpy over a long stretch
    once numpy is at hand (NUMPY_AFTER_BYTES)."""

    def __init__(self) -> None:
        self.seen = 0
        self._np = None

    def numbers(self, data: bytes, starts: list[int], base: int) -> tuple[list[int], int]:
        """(line number of each start, newlines in `data`)."""
        self.seen += len(data)
        np = self._np
        if np is None and ("numpy" in sys.modules or self.seen >= NUMPY_AFTER_BYTES):
            np = self._np = import_numpy()
        count = data.count
        out = []
        pos = 0
        n = base
        if not np or len(data) < NUMPY_GAP:
            for start in starts:
                n += count(b"\n", pos, start)
                pos = start
                out.append(n + 1)
            return out, n - base + count(b"\n", pos)
        view = np.frombuffer(data, np.uint8)
        for start in starts:
            n += count(b"\n", pos, start) if start - pos < NUMPY_GAP else _numpy_count(np, view, pos, start)
            pos = start
            out.append(n + 1)
        end = len(data)
        n += count(b"\n", pos) if end - pos < NUMPY_GAP else _numpy_count(np, view, pos, end)
        return out, n - base


def _numpy_count(np, view, start: int, end: int) -> int:
    """Newlines in view[start:end] (a uint8 view of a block), NUMPY_PIECE bytes at a time."""
    nonzero = np.count_nonzero
    n = 0
    for at in range(start, end, NUMPY_PIECE):
        n += int(nonzero(view[at : min(at + NUMPY_PIECE, end)] == 10))
    return n


def import_numpy():
    """numpy, imported with one thread for its math libraries (idle OpenBLAS threads spin for a while
    and take the core the scan needs); False where it is not installed."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy comes with pandas
        return False
    return numpy


def cut_blocks(chunks: Iterable[bytes]) -> Iterator[tuple[bytes, bool]]:
    """Whole-line blocks of `chunks`: (data ending in a newline, cut). A line longer than MAX_LINE_BYTES
    is a block of its own, reduced to that length (`cut`; sources.LongLine: its head, or, for a line
    of carriage returns, the segments that are no progress bar's redraw and the one after its last
    `\r`), read as it goes; the last line
    may lack its newline (one is added). Each block's lines are its newlines: the line numbers of the
    blocks after it go on from there (a cut line is one line). Sequential (what the bytes are depends
    on what came before), and cheap: the line-local work on a block is BlockMaker's."""
    carry = b""
    long: LongLine | None = None  # an over-long line being read (reduced as it goes)
    for chunk in chunks:
        if carry:
            nl = chunk.find(b"\n")
            if nl >= 0 and len(carry) + nl > MAX_LINE_BYTES:  # the carried line ends over-long here
                long = LongLine()
                long.feed(carry)
                carry = b""
        if long is not None:
            nl = chunk.find(b"\n")
            long.feed(chunk if nl < 0 else chunk[:nl])
            if nl < 0:
                continue
            yield long.line() + b"\n", True  # one line (counted once, as what it was reduced to)
            long = None
            chunk = chunk[nl + 1 :]
        cut = chunk.rfind(b"\n") + 1
        if cut == 0:
            data = carry + chunk
            if len(data) > MAX_LINE_BYTES:
                long = LongLine()
                long.feed(data)
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
        yield data, False
    if long is not None:
        yield long.line() + b"\n", True
    elif carry:
        yield carry + b"\n", False


class BlockMaker:
    """The line-local work on one block of whole lines: its candidate lines (the prefilter), their line
    numbers and keyword ids, its progress lines as columns (`progress`), and its other step lines
    parsed (`step_parser`, for a scanner in another process). A block depends on no other; what a
    maker remembers between blocks (the progress parser's numbering and caches) is its own, so each
    process that makes blocks has its own maker (the scanner reads its blocks' columns with that
    maker's tables: Block.worker)."""

    def __init__(
        self,
        prefilter: Prefilter,
        step_parser: StepParser | None = None,
        progress: ProgressLineParser | None = None,
        pre: PreReader | None = None,
    ) -> None:
        self.prefilter = prefilter
        self.step_parser = step_parser
        self.progress = progress
        self.pre = pre  # reads candidate lines' prefixes apart, when asked to (make's `read_apart`)
        self.counter = _NewlineCounter()
        self.step_id = (
            prefilter.keywords.index(STEP_KEYWORD)
            if step_parser is not None and STEP_KEYWORD in prefilter.keywords
            else None
        )

    def make(self, data: bytes, base: int, cut: bool = False, read_apart: bool = False) -> Block:
        """The Block of `data`, whose first line is line `base` + 1 of the input; `read_apart`: read its
        candidate lines' prefixes too (Block.pre; a maker with a PreReader)."""
        found, ends = self.prefilter.lines_and_ends(data)
        starts = [s for s, _ in found]
        numbers, lines = self.counter.numbers(data, starts, base)
        keywords = [k for _, k in found]
        progress = self.progress
        columns = progress.parse(data, found, ends) if progress is not None else None
        applied = set(columns.index) if columns is not None else ()  # (lines the scanner needs no record of)
        steps = None
        if self.step_id is not None:
            step_id, step_parser = self.step_id, self.step_parser
            steps = {
                i: parsed
                for i, (start, ids) in enumerate(found)
                if step_id in ids
                and i not in applied
                and (parsed := parse_step_text(data, start, step_parser)) is not None
            }
        pre = None
        if read_apart and self.pre is not None:
            pre = self.pre.read(data, starts, ends, applied, keywords)
        return Block(
            data, base, lines, starts, numbers, keywords, cut, steps, ends, progress=columns, pre=pre
        )


def iter_blocks(
    chunks: Iterable[bytes],
    prefilter: Prefilter,
    step_parser: StepParser | None = None,
    progress: ProgressLineParser | None = None,
    stats: InputStats | None = None,
) -> Iterator[Block]:
    """Blocks of whole lines from `chunks` (cut_blocks), each made by one BlockMaker in this process.
    `step_parser`: parse the candidate step lines too (Block.steps), for a scanner in another process.
    `progress`: find the progress lines a scanner may apply without a record (Block.progress; those
    step lines get no Block.steps entry). `stats`: learns the blocks made and the CPU time that took."""
    maker = BlockMaker(prefilter, step_parser, progress)
    base = 0
    for data, cut in cut_blocks(chunks):
        before = _cpu_seconds() if stats is not None else 0.0
        block = maker.make(data, base, cut)
        if stats is not None:
            stats.scanner_blocks += 1
            stats.scanner_block_cpu += _cpu_seconds() - before
        yield block
        base += block.lines


# -- reading in other processes ------------------------------------------------------------------
# the largest block: a carried partial line and one chunk (which, out of a binary span's reader, may
# itself hold an unfinished line and a run of lines it held back), with room to spare
SLOT_BYTES = CHUNK_BYTES + 2 * (MAX_LINE_BYTES + 1) + (64 << 10)
PIPE_BYTES = 1 << 20  # a reader's pipe of candidates: room for several blocks (the default 64 KiB holds one)
MAX_WORKERS = 64  # processes of one scan at most (--workers)
# a slot's state in the ring: free, cut and not yet taken, being made by a process
FREE, RAW, CLAIMED = 0, 1, 2
# a slot's fields in the ring's table: its state, its block's number, size, cut flag, and the input's
# bytes read when it was cut
STATE, NUMBER, SIZE, CUT, READ = range(5)
META = 5
# when a reader process reads a block's candidate lines apart too (logparse.read.pre_records: their
# prefixes, and a possible hit's message masked): "auto", when it had to wait for work before the block
# (the scanner is behind: its work is the scan's critical path); "always"; "never" (tests: the records
# are the same either way)
READ_APART = "auto"
WAITED_S = 0.001  # a reader that waited this long for a block to make had nothing to do
WAKE_S = 0.5  # a reader with nothing to do looks this often whether the scan is still there
IDLE_S = 0.005  # the scanner, waiting for a block with none to make itself, looks again this often
END_S = 5.0  # the readers' last words (their CPU time) are waited for this long at most


KEPT_BLOCKS = 4  # the first reader's own cut blocks kept past this many only while no process took them
TRIM_BLOCKS = 16  # the scanner hands its heap's free pages back every this many blocks (heap_trimmer)


def heap_trimmer() -> Callable[[int], object]:
    """glibc's `malloc_trim`: called with 0, it gives the free pages inside this process's heap back to
    the system. The scanner frees what the readers' blocks came with (their candidates, unpickled) in
    another order than it took it, and glibc keeps those pages: without a trim every TRIM_BLOCKS blocks
    the process tree's peak memory creeps up with the input. Without glibc (musl), a no-op."""
    try:
        import ctypes

        trim = ctypes.CDLL(None).malloc_trim
    except (ImportError, OSError, AttributeError):
        return _no_trim
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def _no_trim(pad: int) -> int:
    return 0


def slots_for(workers: int) -> int:
    """Blocks in flight for `workers` processes: one being made by each, as many cut ahead, the one
    the scan works on and one to spare (at least 4, what one reader process had)."""
    return max(4, 2 * workers + 2)


def _widen_pipe(conn: Connection) -> None:
    """Let the pipe hold PIPE_BYTES (Linux), so that a reader is not held up sending one block's
    candidates until the scanner takes them; where that cannot be done, it stays as it is."""
    try:
        import fcntl

        fcntl.fcntl(conn.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (ImportError, OSError):
        pass


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - Linux has it
        return os.cpu_count() or 1


def reader_process_possible() -> bool:
    """A reader process needs a second CPU to run on, fork (the Hyperscan database and the catalog
    are inherited, not rebuilt), and a parent that is no daemonic process (a fleet worker: the fleet
    already keeps every CPU busy)."""
    if not hasattr(os, "fork") or sys.platform != "linux":
        return False
    import multiprocessing

    return available_cpus() >= 2 and not multiprocessing.current_process().daemon


class _Ring:
    """The blocks in flight, in memory shared by the scanner and its readers: `slots` slots of
    SLOT_BYTES and a table of each slot's fields (STATE, ...). A lock guards the table; a semaphore
    counts the RAW blocks, plus, once the input has ended, a token for each reader to wake up to."""

    def __init__(self, ctx, slots: int) -> None:
        self.slots = slots
        self.mem = mmap.mmap(-1, slots * SLOT_BYTES)  # anonymous, shared with the forked readers
        self.meta = ctx.RawArray("q", slots * META)
        self.ended = ctx.RawValue("b", 0)  # the input has ended: no block will be cut any more
        self.lock = ctx.Lock()
        self.raw = ctx.Semaphore(0)

    def put(self, slot: int, number: int, data: bytes, cut: bool, read: int) -> None:
        """Block `number` (its bytes and fields) into `slot`, for any process to take."""
        if len(data) > SLOT_BYTES:  # (cannot be: a chunk is CHUNK_BYTES and a line MAX_LINE_BYTES at most)
            raise OSError(f"a block of {len(data)} bytes does not fit a slot of {SLOT_BYTES}")
        at = slot * SLOT_BYTES
        self.mem[at : at + len(data)] = data
        m = slot * META
        meta = self.meta
        with self.lock:
            meta[m + NUMBER], meta[m + SIZE], meta[m + CUT], meta[m + READ] = number, len(data), cut, read
            meta[m + STATE] = RAW
        self.raw.release()

    def raw_count(self) -> int:
        with self.lock:
            return self.meta[STATE::META].count(RAW)

    def raw_slots(self) -> set[int]:
        """The slots whose block is RAW (cut, taken by no process yet)."""
        with self.lock:
            states = self.meta[STATE::META]
        return {slot for slot, state in enumerate(states) if state == RAW}

    def claim(self, timeout: float = 0.0, keep_wake: bool = False) -> int | None:
        """The slot of the oldest RAW block, now CLAIMED by the caller; None when there is none within
        `timeout` seconds (0: at once). A token that finds no RAW block is a wake-up token (the input
        ended): handed back, unless `keep_wake` (a reader that ends with it)."""
        if not (self.raw.acquire(True, timeout) if timeout > 0 else self.raw.acquire(False)):
            return None
        meta = self.meta
        with self.lock:
            best = -1
            oldest = 1 << 62
            for slot in range(self.slots):
                m = slot * META
                if meta[m + STATE] == RAW and meta[m + NUMBER] < oldest:
                    best, oldest = slot, meta[m + NUMBER]
            if best >= 0:
                meta[best * META + STATE] = CLAIMED
                return best
        if not keep_wake:
            self.raw.release()
        return None

    def fields(self, slot: int) -> tuple[int, int, bool, int]:
        """(number, size, cut, bytes read) of the block in a slot the caller claimed."""
        m = slot * META
        meta = self.meta
        return meta[m + NUMBER], meta[m + SIZE], bool(meta[m + CUT]), meta[m + READ]

    def bytes_of(self, slot: int, size: int) -> bytes:
        at = slot * SLOT_BYTES
        return self.mem[at : at + size]

    def release(self, slot: int) -> None:
        with self.lock:
            self.meta[slot * META + STATE] = FREE


class _Sender:
    """Makes the blocks a reader claims and sends their candidates to the scanner: arrays of numbers,
    each line's keyword set as its number in `sets` (new sets sent once), a step line's keys only when
    they differ from the last one's (the message stays small, so that several fit in the pipe)."""

    def __init__(self, ring: _Ring, maker: BlockMaker, out: Connection) -> None:
        self.ring = ring
        self.maker = maker
        self.out = out
        self.sets: dict[frozenset[int], int] = {}
        self.keys: tuple[str, ...] = ()
        self.names: tuple[str, ...] = ()
        self.waited = False  # this reader waited for work before its next block (READ_APART "auto")
        # slot -> (block number, its bytes) of the blocks this reader cut (the first reader): making one
        # of them needs no copy out of the ring (a tenth of that reader's time on a realistic log)
        self.own_blocks: dict[int, tuple[int, bytes]] = {}

    def send(self, slot: int) -> None:
        number, size, cut, read = self.ring.fields(slot)
        own = self.own_blocks.pop(slot, None)
        data = own[1] if own is not None and own[0] == number else self.ring.bytes_of(slot, size)
        apart = READ_APART == "always" or (READ_APART == "auto" and self.waited)
        self.waited = False
        block = self.maker.make(data, 0, cut, read_apart=apart)
        steps = []
        for i, sl in block.steps.items():
            steps.append(
                (
                    i,
                    sl.step,
                    None if sl.keys == self.keys else sl.keys,
                    sl.values,
                    None if sl.names is self.names else sl.names,
                    sl.tail_length,
                )
            )
            self.keys, self.names = sl.keys, sl.names
        ends = array("q", block.ends)  # (the prefilter's: each candidate line's newline)
        sets = self.sets
        known = len(sets)
        ids = array("l", [sets.setdefault(k, len(sets)) for k in block.keywords])
        sent = time.monotonic()
        self.out.send(
            (
                "block",
                number,
                slot,
                size,
                cut,
                read,
                block.lines,
                array("q", block.starts),
                array("q", block.numbers),
                ids,
                list(sets)[known:] if len(sets) > known else (),
                steps,
                ends,
                block.progress,
                block.pre,
            )
        )
        # (a pipe too full to take the block: the scanner is behind, as when no block is left to make)
        self.waited = time.monotonic() - sent > WAITED_S


def _reader_start(parent_ends: tuple[Connection, ...]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the scanner handles Ctrl-C and stops this process
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for conn in parent_ends:  # so that if the scanner dies (kill -9), recv and send here fail and it ends
        conn.close()


def _lead_main(
    chunks: Callable[[InputStats], Iterable[bytes]],
    stats: InputStats,
    ring: _Ring,
    sender: _Sender,
    free: Connection,
    readers: int,
    parent_ends: tuple[Connection, ...],
) -> None:
    """The first reader: reads the input (and gunzips it), cuts it into blocks (cut_blocks) a few
    ahead into free slots, and makes blocks like any reader when none is left to cut; a slot is
    free again once the scanner hands its number back on `free`. `stats` is this process's copy:
    what it learns (bytes read, notes) goes back with the blocks and at the end."""
    _reader_start(parent_ends)
    free_slots = deque(range(ring.slots))
    blocks = cut_blocks(chunks(stats))
    ahead = readers + 2  # blocks cut and not taken: one for each process that makes blocks, and one
    known = len(stats.notes)
    number = 0
    end: tuple | None = None
    try:
        while True:
            while free.poll():
                free_slots.append(free.recv())
            while end is None and free_slots and ring.raw_count() < ahead:
                end = _cut_one(blocks, ring, free_slots, number, stats, sender.own_blocks)
                if end is None:
                    number += 1
                else:
                    sender.out.send(("stats", number, stats.bytes, stats.notes[known:], *end))
                    ring.ended.value = 1
                    for _ in range(readers - 1):  # the other readers wake up to end
                        ring.raw.release()
            slot = ring.claim()
            if slot is not None:
                sender.send(slot)
            elif end is not None:
                break
            else:  # nothing to make and no room to cut: the scanner is behind
                free_slots.append(free.recv())
                sender.waited = True
        sender.out.send(("cpu", _cpu_seconds()))
    except (EOFError, OSError):  # the scanner is gone
        return


def _cut_one(
    blocks: Iterator, ring: _Ring, free_slots: deque, number: int, stats: InputStats, kept: dict
) -> tuple | None:
    """Cut the next block into a free slot (and into `kept`: slot -> (number, bytes), for the cutting
    reader to make it without copying it back); None, or how the input ended: ("end",),
    ("truncated", message), ("oserror", message)."""
    try:
        got = next(blocks, None)
    except TruncatedGzip as exc:
        return ("truncated", str(exc))
    except OSError as exc:
        return ("oserror", exc.strerror or str(exc))
    except Exception as exc:
        return ("oserror", f"{type(exc).__name__}: {exc}")
    if got is None:
        return ("end",)
    data, cut = got
    slot = free_slots.popleft()
    ring.put(slot, number, data, cut, stats.bytes)
    kept[slot] = (number, data)
    if len(kept) > KEPT_BLOCKS:
        # a block another process took is made from the ring: its bytes here are of no more use (up to
        # a block a slot, 18 MB with 8 processes); one this reader takes later without them is copied
        raw = ring.raw_slots()
        for gone in [s for s in kept if s not in raw]:
            del kept[gone]
    return None


def _worker_main(ring: _Ring, sender: _Sender, parent: int, parent_ends: tuple[Connection, ...]) -> None:
    """Any other reader: makes the oldest block cut and not taken, until the input has ended."""
    _reader_start(parent_ends)
    try:
        while True:
            asked = time.monotonic()
            slot = ring.claim(WAKE_S, keep_wake=True)
            if slot is not None:
                sender.waited = sender.waited or time.monotonic() - asked > WAITED_S
                sender.send(slot)
            elif ring.ended.value or os.getppid() != parent:
                break
        sender.out.send(("cpu", _cpu_seconds()))
    except (EOFError, OSError):  # the scanner is gone
        return


class _Pending:
    """A block a reader (or the scanner) made, waiting for its turn; numbers counted from its first line."""

    __slots__ = (
        "columns",
        "cut",
        "ends",
        "keywords",
        "lines",
        "numbers",
        "pre",
        "read",
        "size",
        "slot",
        "starts",
        "steps",
        "worker",
    )

    def __init__(
        self, worker, slot, size, cut, read, lines, starts, numbers, keywords, steps, ends, columns, pre=None
    ):
        self.worker, self.slot, self.size, self.cut, self.read = worker, slot, size, cut, read
        self.lines, self.starts, self.numbers, self.keywords = lines, starts, numbers, keywords
        self.steps, self.ends, self.columns, self.pre = steps, ends, columns, pre


class _Merger:
    """The scanner's side: the readers' blocks put back in order (each reader's keyword sets and step
    keys decoded), and, while the block it needs next is still being made, a block cut and not taken
    made here (its Block.worker is 0; reader r's are r + 1)."""

    def __init__(self, ring: _Ring, conns: list[Connection], maker: BlockMaker, stats: InputStats) -> None:
        self.ring = ring
        self.conns = {conn: r for r, conn in enumerate(conns)}
        self.maker = maker
        self.stats = stats
        self.pending: dict[int, _Pending] = {}
        self.sets: list[list[frozenset[int]]] = [[] for _ in conns]
        self.keys: list[tuple[str, ...]] = [() for _ in conns]
        self.names: list[tuple[str, ...]] = [() for _ in conns]
        self.end: tuple | None = None  # ("stats", blocks, bytes, notes, kind, [message])
        self.cpu_told: set[int] = set()

    def next(self, number: int) -> _Pending | None:
        """Block `number`, once made; None after the last (or raises what ended the input)."""
        pending = self.pending
        while number not in pending:
            if self.end is not None and number >= self.end[1]:
                return self._ended()
            self._receive(0)
            if number in pending:
                break
            if len(pending) < self.ring.slots - 2 and self._make_one():
                continue
            self._receive(IDLE_S)
        return pending.pop(number)

    def _make_one(self) -> bool:
        """Make the oldest block cut and not taken here, rather than wait; False when there is none."""
        slot = self.ring.claim()
        if slot is None:
            return False
        before = _cpu_seconds()
        number, size, cut, read = self.ring.fields(slot)
        data = self.ring.bytes_of(slot, size)
        b = self.maker.make(data, 0, cut)
        self.pending[number] = _Pending(
            0, slot, size, cut, read, b.lines, b.starts, b.numbers, b.keywords, b.steps, b.ends, b.progress
        )
        self.stats.scanner_blocks += 1
        self.stats.scanner_block_cpu += _cpu_seconds() - before
        return True

    def _receive(self, timeout: float) -> None:
        from multiprocessing.connection import wait

        for conn in wait(list(self.conns), timeout):
            try:
                msg = conn.recv()
            except EOFError:
                if self.conns.pop(conn) not in self.cpu_told:
                    raise OSError("a reader process ended unexpectedly") from None
                continue
            self._take(self.conns[conn], msg)

    def _take(self, r: int, msg: tuple) -> None:
        kind = msg[0]
        if kind == "block":
            _, number, slot, size, cut, read, lines, starts, numbers, ids, new_sets, sent, ends, *made = msg
            columns, pre = made
            sets = self.sets[r]
            sets.extend(new_sets)
            steps = {}
            keys, names = self.keys[r], self.names[r]
            for i, step, new_keys, values, new_names, tail in sent:
                keys = keys if new_keys is None else new_keys
                names = names if new_names is None else new_names
                steps[i] = StepLine(step, keys, values, names, tail)
            self.keys[r], self.names[r] = keys, names
            self.pending[number] = _Pending(
                r + 1,
                slot,
                size,
                cut,
                read,
                lines,
                starts.tolist(),
                numbers.tolist(),
                [sets[i] for i in ids],
                steps,
                ends,
                columns,
                pre,
            )
        elif kind == "stats":
            self.end = msg
        elif kind == "cpu":
            self.cpu_told.add(r)
            self.stats.reader_cpu.append(msg[1])

    def _ended(self) -> None:
        """The input's end: its bytes and notes, the readers' CPU times (waited for a moment), and the
        error that ended it, if any."""
        _, _, read, notes, kind, *message = self.end
        self.stats.bytes = read
        self.stats.notes.extend(notes)
        deadline = time.monotonic() + END_S
        while self.conns and time.monotonic() < deadline:
            try:
                self._receive(max(0.0, deadline - time.monotonic()))
            except OSError:
                break
        if kind == "truncated":
            raise TruncatedGzip(message[0])
        if kind == "oserror":
            raise OSError(message[0])
        return None


def _start_readers(ctx, ring: _Ring, pipes: list, free: tuple, maker: BlockMaker, source: tuple) -> list:
    """Fork a reader for each of `pipes` (the first also cuts `source`: (chunks, stats)); each keeps its
    own pipe's sending end (and the first, the free slots' receiving end) and closes the rest."""
    free_r, free_w = free
    readers = len(pipes)
    parent = os.getpid()
    procs = []
    for r in range(readers):
        others = (
            *(recv for recv, _ in pipes),
            *(send for i, (_, send) in enumerate(pipes) if i != r),
            free_w,
        )
        sender = _Sender(ring, maker, pipes[r][1])
        if r == 0:
            target, args = _lead_main, (*source, ring, sender, free_r, readers, others)
        else:
            target, args = _worker_main, (ring, sender, parent, (*others, free_r))
        proc = ctx.Process(target=target, args=args, name=f"verl-logscan-reader-{r}", daemon=True)
        proc.start()
        procs.append(proc)
    return procs


def blocks_in_process(
    chunks: Callable[[InputStats], Iterable[bytes]],
    stats: InputStats,
    prefilter: Prefilter,
    step_parser: StepParser | None = None,
    progress: ProgressLineParser | None = None,
    workers: int = 2,
    pre: PreReader | None = None,
    expected_bytes: int = 0,
) -> Iterator[Block]:
    """iter_blocks(chunks(stats), prefilter), computed by `workers` processes: this one and
    `workers - 1` forked readers. The first reader reads the input (and gunzips it) and cuts it into
    blocks a few ahead; every reader makes the oldest block cut and not taken (prefilter, line
    counting, progress columns, step lines: BlockMaker), and so does this process while the block it
    needs next is still being made. A block's bytes stay in shared memory (a block is valid until the
    caller asks for the next one), its candidates come through a pipe, with line numbers counted from
    the block's first line: the blocks are put back in order and numbered here. `stats` learns the
    bytes read, the readers' notes and CPU times. Errors are raised here as in iter_blocks
    (TruncatedGzip, OSError), after the blocks before them. Closing the generator (or an interrupt)
    stops the readers. `expected_bytes`: the input's size, where known: from NUMPY_AFTER_BYTES on,
    numpy is imported before the readers are forked, so that every process counts newlines with it
    from the first block and none imports it again."""
    import multiprocessing

    if expected_bytes >= NUMPY_AFTER_BYTES:
        import_numpy()
    ctx = multiprocessing.get_context("fork")
    readers = max(1, min(workers, MAX_WORKERS) - 1)
    ring = _Ring(ctx, slots_for(readers + 1))
    step_parser = step_parser or StepParser()
    pipes = [ctx.Pipe(duplex=False) for _ in range(readers)]
    for conn, _ in pipes:
        _widen_pipe(conn)
    free_r, free_w = ctx.Pipe(duplex=False)
    maker = BlockMaker(prefilter, step_parser, progress, pre or PreReader())
    procs = _start_readers(ctx, ring, pipes, (free_r, free_w), maker, (chunks, stats))
    for _, send in pipes:
        send.close()
    free_r.close()
    merger = _Merger(ring, [recv for recv, _ in pipes], BlockMaker(prefilter, step_parser, progress), stats)
    held = None  # the slot of the block the caller works on: handed back when it asks for the next
    base = 0
    number = 0
    trim = heap_trimmer()
    try:
        while True:
            if held is not None:
                try:
                    free_w.send(held)
                except OSError:  # the first reader has cut its last block and ended
                    pass
                held = None
            got = merger.next(number)
            if got is None:
                return
            stats.bytes = got.read
            held = got.slot
            numbers = got.numbers
            if base:
                numbers = list(map(base.__add__, numbers))
            yield Block(
                None,
                base,
                got.lines,
                got.starts,
                numbers,
                got.keywords,
                got.cut,
                got.steps,
                got.ends,
                got.size,
                ring.mem,
                got.slot * SLOT_BYTES,
                got.columns,
                got.worker,
                got.pre,
            )
            base += got.lines
            number += 1
            if number % TRIM_BLOCKS == 0:
                trim(0)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
        for proc in procs:
            proc.join()
        for conn in (*merger.conns, free_w):
            conn.close()
        ring.mem.close()
