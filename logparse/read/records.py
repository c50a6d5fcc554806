"""The records of a job's inputs, in the order the analysis takes them.

`RecordReader` opens each input (logparse.read.sources), reads it in blocks of whole lines with their
candidate lines found by the keyword prefilter (logparse.read.blocks, in a reader process for a large
file), and yields a Record for each line worth a look: a candidate line, and every line while a
region of its input is open (a traceback, a multi-line message, a config dump: the consumer says
which, through `ProgressSink.region_open`; it observes such a line only when the line's own stream
has one open). A line's origin is what its prefixes say
(logparse.read.normalize), else what its file's place in a known folder layout says
(logparse.read.layout). torchrun's error.json is read as its callstack (logparse.read.errorfile).

Several files are one job: up to `merge_files` of them are merged into one timeline by their
timestamps (a line without one takes the last timestamp seen in its file; lines before any timestamp
come first, in file order); more files than that are read one after the other. One that cannot be
read is skipped with a note; a single unreadable input is an InputError.

The progress lines of an input read alone (step lines, progress bars: logparse.read.progress_lines)
are handed to the sink as plain facts instead of records, when the sink says it can apply them.

The lines before a record are read back from the raw block on request (`context`, `raw_before`): a
stream that printed and went quiet costs nothing.
"""

from __future__ import annotations

import heapq
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from typing import BinaryIO, Protocol

import regex

from logparse.read.blocks import Block, blocks_in_process, iter_blocks, reader_process_possible
from logparse.read.errorfile import error_file_lines
from logparse.read.layout import file_origin
from logparse.read.lookback import LOOKBACK_BYTES, LOOKBACK_LINES, LazyContext, lookback
from logparse.read.normalize import Normalizer, Origin, Record
from logparse.read.pre_records import PreReader
from logparse.read.prefilter import Prefilter
from logparse.read.progress_lines import (
    RAY_PID_PREFIX,
    ProgressColumns,
    ProgressLineParser,
    ProgressTables,
    ray_bar_prefix,
    ray_prefix_apart,
    step_prefix_record,
)
from logparse.read.progress_syntax import ProgressSyntax
from logparse.read.sources import (
    MAX_LINE_BYTES,
    STDIN_NAME,
    InputError,
    InputStats,
    Line,
    TruncatedGzip,
    compression_of,
    cut_lines_note,
    decode_line,
    decompressed_chunks,
    open_input,
    read_input,
)
from logparse.read.steps import StepParser
from logparse.read.unwrap import JOINED, unwrap_chunks
from patterns.numbers import log_int

MAX_MERGE_FILES = 64
MAX_STEP_STREAMS = 4096  # step-line prefixes whose stream is remembered (RecordReader.stream_of)
RAY_ACTOR_MARKER = regex.compile(r"^:actor_name:(?P<actor>\S+)")
_NO_KEYWORDS: frozenset[int] = frozenset()


class ProgressSink(Protocol):
    """What the reader asks of the analysis that consumes its records (logparse.pipeline)."""

    def progress_words(self, ids: frozenset[int]) -> tuple[tuple[str, ...], bool] | None:
        """For a line with prefilter keyword ids `ids`: its stage keywords and whether it has an
        environment keyword, when it may be a progress line applied without a record; else None."""

    def progress_ready(self, columns: ProgressColumns, tables: ProgressTables) -> bytearray:
        """For each progress line of `columns`: 1 if it may go in a run (`progress_run`)."""

    def premask(self, ids: frozenset[int], message: str) -> str | None:
        """A candidate line's message masked for grouping, when its keywords (`ids`) make it a possible
        catalog hit; else None. (Asked in reader processes: logparse.read.pre_records.)"""

    def progress_run(
        self,
        columns: ProgressColumns,
        k: int,
        runs: list[int],
        ready: bytearray,
        tables: ProgressTables,
        block: Block,
        idx: int,
        source: str,
    ) -> int:
        """Apply progress lines k, k + 1, ... at once; how many (0: none, take them one by one)."""

    def progress_line(
        self,
        columns: ProgressColumns,
        k: int,
        tables: ProgressTables,
        block: Block,
        idx: int,
        source: str,
        number: int,
        default: Origin | None,
        region: bool,
    ) -> bool:
        """Apply progress line k without a record; False: it needs its record."""

    def region_open(self, source: str, number: int) -> bool:
        """Must line `number` of `source` be read even without a keyword?"""

    def process_quiet(self, source: str, pid: int) -> bool:
        """Would a line without a keyword of Ray actor process `pid` in `source` be dropped (nothing of
        its stream is open), so that it need not be read while a region of the input is open?"""


def _line_end(block: Block, start: int) -> int:
    """Where the line at `start` of `block` ends (its newline, or the block's end)."""
    end = block.load().find(b"\n", start)
    return block.size if end < 0 else end


MAX_NAMED_INPUTS = 5  # inputs a shared note names (the others counted)


class RecordReader:
    """Reads a job's inputs into records (see the module docstring)."""

    def __init__(
        self,
        prefilter: Prefilter,
        syntax: ProgressSyntax,
        ignores: Callable[[str], bool],
        sink: ProgressSink,
        merge_files: int = MAX_MERGE_FILES,
        reader_process_bytes: int | None = None,
        all_metrics: bool = False,
        progress_lines: bool = True,
        workers: int = 2,
        unwrap: str | int = "auto",
    ):
        self.prefilter = prefilter
        self.syntax = syntax  # the stage markers, step lines and bars of the fast path
        self.ignores = ignores  # a message no environment keyword makes worth a record
        self.sink = sink
        self.merge_files = merge_files
        self.reader_process_bytes = reader_process_bytes
        self.all_metrics = all_metrics
        self.progress_lines = progress_lines
        self.workers = workers  # processes that make a large file's blocks (blocks_in_process); 1: this one
        # rows a terminal or `fold` cut at a fixed width: `auto` joins them where detected, `off` never,
        # a width joins those of that width (logparse.read.unwrap)
        self.unwrap = unwrap
        # live use: wrap each opened input (follow, tee); hear of each block and record read
        self.open_stream: Callable[[str, BinaryIO], BinaryIO] | None = None
        self.on_progress: Callable[[], None] | None = None
        self.normalizer = Normalizer()
        self.lookback_normalizer = Normalizer()  # lines read back: apart, so the clock state stays
        self.inputs: list[InputStats] = []
        self.attribution: dict[str, Origin] = {}  # file -> what its place in a layout says
        self.skipped: list[str] = []  # inputs of a folder that could not be read
        # source -> (block being read, tail of the previous); read as a table by the analysis, which asks
        # for every record whether its source's block is at hand
        self._blocks: dict[str, tuple[Block, bytes]] = {}
        self.reading_blocks = self._blocks
        self._tails: dict[str, bytes] = {}
        self._offsets: dict[str, int] = {}  # source -> offset of the line being fed in its block
        # (source, default, a progress line's prefix, False) -> its stream; (source, default, a Ray
        # prefix without its pid and ip, True) -> its origin (_prefix_stream)
        self._step_streams: dict[tuple, tuple] = {}
        self._defaults: dict[str, Origin] = {}
        self._cut_lines: dict[str, int] = {}

    # -- the inputs of a job -----------------------------------------------------------------------
    def job(self, paths: list[str]) -> Iterator[Record]:
        """The records of several inputs read as one job (see the module docstring)."""
        if len(paths) == 1:
            return self.records(paths[0])  # (the input's own iterator: no layer a record)
        if len(paths) <= self.merge_files:
            return merge_by_time([self._readable(p, alone=False) for p in paths])
        return (rec for p in paths for rec in self._readable(p))

    def _readable(self, path: str, alone: bool = True) -> Iterator[Record]:
        try:
            yield from self.records(path, alone)
        except InputError as exc:
            self.skipped.append(f"skipped {exc}")

    def records(self, path: str, alone: bool = True) -> Iterator[Record]:
        """The records of one input worth a look: candidate lines (a keyword of the catalog, the stage
        markers, the trackers or the traceback structure) and, while a traceback, a multi-line message
        or a config dump of this input is open, every line. Layout attribution is the default origin."""
        stats = InputStats(STDIN_NAME if path == "-" else path)
        self.inputs.append(stats)
        fo = file_origin(path) if path != "-" else None
        default = None
        if fo is not None and fo.layout:
            default = Origin(local_rank=fo.local_rank, pid=fo.pid, actor=fo.actor)
            self.attribution[stats.path] = default
        if fo is not None and fo.error_file:
            for line in error_file_lines(stats, read_input(path, stats)):
                yield self.normalizer.normalize(line, 0, default)
            return
        yield from self._chunk_records(path, stats, default, alone)

    def _chunk_records(
        self, path: str, stats: InputStats, default: Origin | None, alone: bool = True
    ) -> Iterator[Record]:
        """Records of one input read in blocks (logparse.read.blocks). `alone`: no other input is read at
        the same time, so a large file may be read by a reader process (reader_process_bytes)."""
        source = stats.path
        fh = open_input(path)
        if self.open_stream is not None:
            fh = self.open_stream(path, fh)
        compression = compression_of(path)

        live = self._live(path, fh)

        def chunks(st: InputStats) -> Iterator[bytes]:
            text = decompressed_chunks(fh, st, compression)
            return unwrap_chunks(text, st, self.unwrap, live)

        # an input read alone has its progress lines applied as its blocks are read (in order, as the
        # records are fed); merged inputs' records are fed in another order than they are read
        fast = alone and self.progress_lines
        step_parser = StepParser(self.all_metrics)
        progress = None
        if fast:
            progress = ProgressLineParser(self.sink.progress_words, self.syntax, step_parser, self.ignores)
        # each process that makes blocks numbers their processes and shapes in its own tables
        tables = _TablesByWorker() if fast else None
        if alone and self._reader_process_for(path):
            pre = PreReader(self.sink.premask)  # (candidate lines read apart: logparse.read.pre_records)
            workers = self.workers
            size = os.path.getsize(path)  # (a regular file: _reader_process_for)
            blocks = blocks_in_process(
                chunks, stats, self.prefilter, step_parser, progress, workers, pre, size
            )
        else:
            blocks = iter_blocks(chunks(stats), self.prefilter, progress=progress, stats=stats)
        lines = 0  # lines of the blocks done
        truncated = 0
        try:
            try:
                for block in blocks:
                    lines = block.base
                    truncated += block.cut
                    table = tables[block.worker] if tables is not None else None
                    yield from self._block(block, source, default, stats, table)
                    lines = block.base + block.lines
                    if self.on_progress is not None:  # also for blocks without a line worth a look
                        self.on_progress()
            except TruncatedGzip as exc:
                stats.notes.append(f"{source}: {exc}; scanned the {lines} line(s) before that")
            except OSError as exc:
                raise InputError(f"{source}: read error: {exc.strerror or exc}") from None
        finally:
            stats.lines = lines  # also when interrupted: the lines read so far
            blocks.close()  # a reader process stops before the file closes
            if path != "-":
                fh.close()
        if truncated or self._cut_lines.get(source):
            n = truncated + self._cut_lines.get(source, 0)
            stats.notes.append(cut_lines_note(n))

    def _live(self, path: str, fh: BinaryIO) -> bool:
        """Is the input read as it comes (followed, passed through, a pipe)? Such a stream is not held
        back while the width of its rows is decided (logparse.read.unwrap); a file is (stdin too, when
        it is a file). A named FIFO or a terminal is a stream too: a `mkfifo` a job writes into, or a
        process substitution (`<(tail -f job.log)`), must not wait for WINDOW_BYTES that may never come,
        nor lose what it gave to an interrupt."""
        if self.open_stream is not None:
            return True
        try:
            return not stat.S_ISREG(os.fstat(fh.fileno()).st_mode)
        except (OSError, ValueError, AttributeError):  # (io.UnsupportedOperation is both)
            return path == "-"

    def _reader_process_for(self, path: str) -> bool:
        """A regular file of at least reader_process_bytes, read without follow or tee."""
        limit = self.reader_process_bytes
        if limit is None or self.workers < 2 or path == "-" or self.open_stream is not None:
            return False
        try:
            st = os.stat(path)
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and st.st_size >= limit and reader_process_possible()

    # -- one block -----------------------------------------------------------------------------------
    def _block(
        self,
        block: Block,
        source: str,
        default: Origin | None,
        stats: InputStats,
        tables: ProgressTables | None = None,
    ) -> Iterator[Record]:
        """Records of the lines of `block` worth a look: its candidate lines, and every line while a
        region (traceback, message, config dump) of this input is open. Its progress lines that need no
        record (Block.progress, with `tables`) are handed to the sink instead, in their turn."""
        starts, numbers, keywords = block.starts, block.numbers, block.keywords
        count = len(starts)
        idx = cur = 0
        number = block.base + 1  # line number of the line at `cur`
        self._blocks[source] = (block, self._tails.get(source, b""))
        fast = _FastLines(self, block, source, default, tables)
        while cur < block.size:
            while idx < count and starts[idx] < cur:
                idx += 1
            candidate = idx < count and starts[idx] == cur
            region = self.sink.region_open(source, number)
            if region:
                start = cur
                ids = keywords[idx] if candidate else _NO_KEYWORDS
            else:
                if idx == count:
                    break
                start, number, ids = starts[idx], numbers[idx], keywords[idx]
                candidate = True
            if candidate and fast.k < fast.n:
                done = fast.apply(idx, number, region)
                if done is not None:
                    idx, cur, number = done
                    continue
            end = -1  # (a candidate's end is the block's to tell)
            if not candidate:
                end = _line_end(block, start)
                data = block.load()
                # (a row joined onto the line before it leaves a JOINED line: logparse.read.unwrap)
                if (end == start + 1 and data[start:end] == JOINED) or self._quiet_line(
                    data, start, end, source
                ):
                    cur = end + 1
                    number += 1
                    continue
            rec, end, default = self._record(
                block, idx, candidate, start, end, number, source, default, stats
            )
            fast.default = default
            rec.keywords = ids
            rec.step_line = block.steps.get(idx) if block.steps and candidate else None
            yield rec
            if self.on_progress is not None:
                self.on_progress()
            cur = end + 1
            number += 1
        self._tails[source] = block.tail(LOOKBACK_BYTES)
        del self._blocks[source]  # a reader process reuses its memory once the next block is asked for

    def _quiet_line(self, data: bytes, start: int, end: int, source: str) -> bool:
        """Would the sink drop the record of the line data[start:end] (no keyword marks it; a region of
        its input is open)? Yes for a line of one Ray actor process (a RAY_PREFIX and no other `pid=`
        after it, which the normaliser would read instead) that has nothing open; else it is read."""
        if end - start > MAX_LINE_BYTES:
            return False  # (read: it is counted as cut)
        m = RAY_PID_PREFIX.match(data, start, end)
        if m is None or data.find(b"pid=", m.end(), end) >= 0:
            return False
        return self.sink.process_quiet(source, log_int(m.group(2)))

    def _record(
        self,
        block: Block,
        idx: int,
        candidate: bool,
        start: int,
        end: int,
        number: int,
        source: str,
        default: Origin | None,
        stats: InputStats,
    ) -> tuple[Record, int, Origin | None]:
        """The record of the line at `start` (candidate `idx` when `candidate`; else a line no keyword
        marks, read because a region is open, ending at `end`), where it ends, and the default origin
        of the lines after it (a Ray worker log names its actor once, at the top)."""
        if candidate:
            raw, end = block.raw(idx)
        else:
            raw = block.load()[start:end]
        cut = len(raw) > MAX_LINE_BYTES
        if cut:
            raw = raw[:MAX_LINE_BYTES]
            self._cut_lines[source] = self._cut_lines.get(source, 0) + 1
        line = Line(source, number, decode_line(raw), cut)
        self._offsets[source] = start
        if default is not None and line.text.startswith(":actor_name:"):
            m = RAY_ACTOR_MARKER.match(line.text)
            if m:  # Ray worker logs name their actor once, at the top
                default = Origin(local_rank=default.local_rank, pid=default.pid, actor=m.group("actor"))
                self.attribution[stats.path] = default
                self._defaults[source] = default
        pre = block.pre
        if candidate and pre is not None and pre.has(idx):  # its prefixes read where the block was made
            return pre.record(idx, line, default, self.normalizer), end, default
        return self.normalizer.normalize(line, 0, default), end, default

    # -- lines read back -------------------------------------------------------------------------------
    def raw_before(self, rec: Record, lines: int) -> bytes | None:
        """Up to `lines` whole raw lines just before `rec` in its input (about LOOKBACK_BYTES at most),
        or None when no raw block of its input is at hand."""
        source = rec.line.source
        got = self._blocks.get(source)
        if got is None or source not in self._offsets:
            return None
        block, tail = got
        return lookback(block.load(), self._offsets[source], tail, min(lines, rec.line.number - 1))

    def default_origin(self, source: str) -> Origin | None:
        """What the place of `source` in a folder layout says of its lines."""
        return self._defaults.get(source) or self.attribution.get(source)

    def context(self, rec: Record, lines: int = LOOKBACK_LINES) -> Sequence[Record] | None:
        """Up to CONTEXT_LINES lines of `rec`'s stream just before it, read back from the raw block (at
        most `lines` lines back), decoded only if a report shows them; None when no block is at hand."""
        before = self.raw_before(rec, lines)
        if before is None:
            return None
        return LazyContext(rec, before, self.default_origin(rec.line.source), self.lookback_normalizer)

    def stream_of(
        self, block: Block, idx: int, source: str, number: int, default: Origin | None, step_at: int = -1
    ) -> tuple:
        """The stream of candidate `idx` of `block` (normalised apart: it reads no clock, so any
        normaliser gives its origin). `step_at`: where the line's message starts, when it is a step
        line's (`step:...`, logparse.read.progress_lines); a whole Ray bar's message starts past its
        Ray prefix (ray_bar_prefix). Either's stream is that of its prefix followed by `step:`
        (step_prefix_record, as the reader reads them), remembered per prefix, and per Ray prefix
        without its pid and ip (_prefix_stream): a line from one of thousands of processes while a
        traceback of the input is open is neither decoded nor normalised for its prefix's sake."""
        raw, _ = block.raw(idx)
        end = step_at if step_at >= 0 else ray_bar_prefix(raw)
        if end >= 0:
            stream = self._prefix_stream(raw, end, source, number, default)
            if stream is not None:
                return stream
        return self.lookback_normalizer.normalize(Line(source, number, decode_line(raw)), 0, default).stream

    def _prefix_stream(
        self, raw: bytes, end: int, source: str, number: int, default: Origin | None
    ) -> tuple | None:
        """The stream of a line whose message (a step line, a Ray bar) starts at `end`, from its prefix;
        None when the prefix is not read whole. A whole Ray prefix's origin is remembered without its
        pid and ip (ray_prefix_apart): where the normaliser took that prefix's pid and ip as they are,
        it takes any other's so (one RAY_ACTOR prefix), and the stream is that origin's with them."""
        apart = ray_prefix_apart(raw, end)
        if apart is None:
            key = (source, default, raw[:end], False)
            stream = self._step_streams.get(key)
            if stream is None:
                rec = step_prefix_record(self.lookback_normalizer, raw[:end], source, number, default)
                if rec is None:
                    return None
                stream = self._remember(key, rec.stream)
            return stream
        pid, ip, prefix = apart
        key = (source, default, prefix, True)
        origin = self._step_streams.get(key)
        if origin is None:
            rec = step_prefix_record(self.lookback_normalizer, raw[:end], source, number, default)
            if rec is None:
                return None
            if rec.origin.pid != pid or (ip is not None and rec.origin.node != ip):
                return rec.stream  # (not read as they are: not remembered)
            origin = self._remember(key, rec.origin)
        return origin._replace(pid=pid, node=origin.node if ip is None else ip).stream_key(source)

    def _remember(self, key: tuple, stream: tuple) -> tuple:
        if len(self._step_streams) >= MAX_STEP_STREAMS:
            self._step_streams.clear()
        self._step_streams[key] = stream
        return stream

    def tails(self) -> dict[str, tuple[bytes, int]]:
        """The last bytes (at most LOOKBACK_BYTES, whole lines but the first) of each input read in
        blocks, with its line count: what a report says of how each stream ended."""
        lines = {s.path: s.lines for s in self.inputs}
        return {source: (tail, lines.get(source, 0)) for source, tail in self._tails.items()}

    def default_origins(self) -> dict[str, Origin]:
        """What each input's place in a folder layout says of its lines."""
        return {**self.attribution, **self._defaults}

    def input_notes(self) -> list[str]:
        """What reading the inputs left to say: inputs skipped, and the inputs' notes; one that several
        inputs share (`read as a torchrun error file`) said once, naming them (MAX_NAMED_INPUTS)."""
        shared: dict[str, list[str]] = {}  # what is said -> the inputs it is said of (None: a note alone)
        for s in self.inputs:
            for note in s.notes:
                head = f"{s.path}: "
                what = note[len(head) :] if note.startswith(head) else None
                shared.setdefault(what if what is not None else note, []).append(s.path if what else "")
        notes = []
        for what, paths in shared.items():
            named = [p for p in paths if p]
            if len(named) < 2:
                notes += [f"{p}: {what}" if p else what for p in paths]
                continue
            shown = ", ".join(named[:MAX_NAMED_INPUTS])
            more = f" and {len(named) - MAX_NAMED_INPUTS} more" if len(named) > MAX_NAMED_INPUTS else ""
            notes.append(f"{len(named)} inputs: {what}: {shown}{more}")
        return self.skipped + notes

    def unwoven_notes(self) -> list[str]:
        """A note on the exception lines read apart from several processes' writes, if any."""
        first = self.normalizer.first_unwoven
        if first is None:
            return []
        return [
            f"{self.normalizer.unwoven} exception line(s) written by several processes at once were "
            f"read apart (first at {first.source}:{first.number})"
        ]


class _TablesByWorker(dict):
    """The ProgressTables of each process that makes blocks (Block.worker), made on first use."""

    def __missing__(self, worker: int) -> ProgressTables:
        tables = self[worker] = ProgressTables()
        return tables


class _FastLines:
    """The progress lines of one block that the sink may apply without records (Block.progress)."""

    def __init__(
        self,
        reader: RecordReader,
        block: Block,
        source: str,
        default: Origin | None,
        tables: ProgressTables | None,
    ):
        self.sink = reader.sink
        self.block = block
        self.source = source
        self.default = default
        self.tables = tables
        self.columns = block.progress if tables is not None else None
        if self.columns is not None:
            tables.learn(self.columns)
        self.index = self.columns.index if self.columns is not None else ()
        self.runs = self.ready = None
        if self.columns is not None and default is None:
            # progress line k is candidate k + runs[k]: lines with the same value are consecutive
            # candidates; ready[k]: it may go in a run (progress_run)
            self.runs = [i - k for k, i in enumerate(self.index)]
            self.ready = self.sink.progress_ready(self.columns, tables)
        self.k = 0  # the next progress line (an index into `columns`)
        self.n = len(self.index)

    def apply(self, idx: int, number: int, region: bool) -> tuple[int, int, int] | None:
        """Apply candidate `idx` (line `number`), and those after it in a run, if it is a progress line
        the sink takes: (the last candidate applied, where the line after it starts, its number); None
        when the candidate needs its record."""
        index, k = self.index, self.k
        while k < len(index) and index[k] < idx:
            k += 1
        self.k = k
        if k >= len(index) or index[k] != idx:
            return None
        block, columns, tables = self.block, self.columns, self.tables
        applied = 0
        if self.runs is not None and not region:
            applied = self.sink.progress_run(
                columns, k, self.runs, self.ready, tables, block, idx, self.source
            )
        if applied:
            self.k += applied
            idx += applied - 1
            return idx, block.end(idx) + 1, block.numbers[idx] + 1
        if self.sink.progress_line(columns, k, tables, block, idx, self.source, number, self.default, region):
            return idx, block.end(idx) + 1, number + 1
        return None


def merge_by_time(streams: list[Iterator[Record]]) -> Iterator[Record]:
    """k-way merge of per-file record streams by timestamp, stable by file order."""

    def keyed(index: int, it: Iterator[Record]) -> Iterator[tuple[float, int, int, Record]]:
        last = float("-inf")
        for n, rec in enumerate(it):
            if rec.origin.time is not None:
                last = rec.origin.time
            yield last, index, n, rec

    for _, _, _, rec in heapq.merge(*(keyed(i, s) for i, s in enumerate(streams))):
        yield rec
