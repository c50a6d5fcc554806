"""Blocks of whole lines with their candidate lines found: the part of a scan that touches every byte.

`iter_blocks` turns an input's chunks into Blocks: whole lines (a line longer than MAX_LINE_BYTES is
cut to that length and the rest skipped), the offsets of the candidate lines (a prefilter keyword in
the line), the prefilter keyword ids of each, and their line numbers. Nothing here looks at a line in
Python: Hyperscan (or the `re` fallback) finds the candidates, and newlines are counted by `bytes.count`
or, on long inputs, numpy (several times faster; optional).

`prefetch` runs such a generator in a thread, a few blocks ahead of the consumer. Reading, Hyperscan
and numpy release the GIL, so on two cores the byte-level work overlaps the per-line Python work of
the scanner; results are the same as without the thread (it only reorders when work is done).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from logparse.prefilter import Prefilter
from logparse.reader import MAX_LINE_BYTES

NUMPY_AFTER_BYTES = 32 << 20  # below this much input, importing numpy (~0.1 s) costs more than it saves
NUMPY_MIN_BLOCK = 64 << 10
PREFETCH_BLOCKS = 4  # blocks read ahead by the thread: a few MB of memory


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


class _End:
    pass


class _Raised:
    def __init__(self, exc: BaseException):
        self.exc = exc


def prefetch(items: Iterable, depth: int = PREFETCH_BLOCKS) -> Iterator:
    """The items of `items`, produced by a daemon thread up to `depth` ahead; an exception in the
    thread is raised here, at the item where it happened. Stopping early (close, interrupt) tells the
    thread to stop at its next item (it may be blocked reading a pipe: it is a daemon)."""
    q: queue.Queue = queue.Queue(depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for item in items:
                if not put(item):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            put(_Raised(exc))
        else:
            put(_End)

    thread = threading.Thread(target=run, name="verl-logscan-reader", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is _End:
                return
            if isinstance(item, _Raised):
                raise item.exc
            yield item
    finally:
        stop.set()
