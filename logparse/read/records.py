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

The progress lines of an input read alone (step lines, progress bars, lines only a stage marker marks:
logparse.read.progress_lines) are read fast from their bytes into ProgressRun facts
(logparse.read.progress_syntax), the same facts a record of each would be read into, and handed to
the analysis (`ReaderHooks.take_progress`) instead of records, as many at a time as it takes.

The lines before a record are read back from the raw block on request (`context`, `raw_before`): a
stream that printed and went quiet costs nothing.
"""

from __future__ import annotations

import heapq
import math
import os
import stat
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
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
    BAR_N,
    BAR_RATE,
    BAR_TOTAL,
    DEFERRED,
    FLOAT_FIELDS,
    INT_FIELDS,
    MARKER,
    MESSAGE_AT,
    OFFSET,
    PROCESS,
    RAY_PID_PREFIX,
    SECONDS,
    SHAPE,
    STEP,
    ProgressLineParser,
    ProgressTables,
    ray_bar_prefix,
    ray_prefix_apart,
    step_prefix_record,
)
from logparse.read.progress_syntax import ProgressRun, ProgressSyntax, StepRows, step_seconds
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
# progress lines offered at once at most (a run the analysis takes whole is followed by one twice as
# long, up to this; one it takes in part by a run of one line: what it leaves is bounded by what it took)
MAX_RUN_LINES = 1024
RAY_ACTOR_MARKER = regex.compile(r"^:actor_name:(?P<actor>\S+)")
_NO_KEYWORDS: frozenset[int] = frozenset()


class ProgressIntake(Protocol):
    """Where the reader hands the progress lines it read fast from their bytes (the analysis':
    logparse.pipeline.Analysis.take_progress)."""

    def __call__(self, run: ProgressRun, region: bool, stream: Callable[[], tuple]) -> int:
        """Apply as many of `run`'s lines, from its first, as need no record; how many (0: the first
        needs its record). `region`: a region of the input is open (then the run is one line);
        `stream`: the first line's stream (Record.stream), worked out when asked for."""


@dataclass(frozen=True)
class ReaderHooks:
    """What the reader asks of the analysis that takes its records and facts (logparse.pipeline), as
    plain functions: the reader holds no analysis."""

    # must line `number` of `source` be read even without a keyword (a region of the input is open)?
    region_open: Callable[[str, int], bool]
    # would a line without a keyword of Ray actor process `pid` in `source` be dropped (nothing of its
    # stream is open), so that it need not be read while a region of the input is open?
    process_quiet: Callable[[str, int], bool]
    # for a line with prefilter keyword ids `ids`: its stage keywords and whether it has an environment
    # keyword, when it may be a progress line read fast (logparse.read.progress_lines); else None
    progress_words: Callable[[frozenset[int]], tuple[tuple[str, ...], bool] | None]
    # a candidate line's message masked for grouping, when its keywords (`ids`) make it a possible
    # catalog hit; else None (asked in reader processes: logparse.read.pre_records)
    premask: Callable[[frozenset[int], str], str | None]
    take_progress: ProgressIntake


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
        hooks: ReaderHooks,
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
        self.hooks = hooks
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
            progress = ProgressLineParser(self.hooks.progress_words, self.syntax, step_parser, self.ignores)
        # each process that makes blocks numbers their processes and shapes in its own tables
        tables = _TablesByWorker() if fast else None
        if alone and self._reader_process_for(path):
            pre = PreReader(self.hooks.premask)  # (candidate lines read apart: logparse.read.pre_records)
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
        region (traceback, message, config dump) of this input is open. Its progress lines read fast
        (Block.progress, with `tables`) are handed to the analysis instead, in their turn, as far as it
        takes them without records."""
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
            region = self.hooks.region_open(source, number)
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
        """Would the analysis drop the record of the line data[start:end] (no keyword marks it; a region of
        its input is open)? Yes for a line of one Ray actor process (a RAY_PREFIX and no other `pid=`
        after it, which the normaliser would read instead) that has nothing open; else it is read."""
        if end - start > MAX_LINE_BYTES:
            return False  # (read: it is counted as cut)
        m = RAY_PID_PREFIX.match(data, start, end)
        if m is None or data.find(b"pid=", m.end(), end) >= 0:
            return False
        return self.hooks.process_quiet(source, log_int(m.group(2)))

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
    """The progress lines of one block read fast from their bytes (Block.progress), handed to the
    analysis as ProgressRun facts in their turn: a run of the candidates in a row that are progress
    lines, or one line while a region of the input is open or the input has a default origin."""

    def __init__(
        self,
        reader: RecordReader,
        block: Block,
        source: str,
        default: Origin | None,
        tables: ProgressTables | None,
    ):
        self.reader = reader
        self.take = reader.hooks.take_progress
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
            # candidates, which may go in one run; ready[k]: the analysis took a line of its process
            self.runs = [i - k for k, i in enumerate(self.index)]
            self.processes = self.columns.ints[PROCESS::INT_FIELDS]
            self.ready = bytearray(map(tables.taken.__getitem__, self.processes))
        self.k = 0  # the next progress line (an index into `columns`)
        self.n = len(self.index)
        self.offer = MAX_RUN_LINES  # lines offered in the next run at most (MAX_RUN_LINES)
        self._deferred: dict[int, tuple[tuple, float | None]] = {}  # line k -> _deferred_row (this block)
        self._first = (0, 0, -1)  # (candidate, line number, message start) of the run offered (_stream)

    def apply(self, idx: int, number: int, region: bool) -> tuple[int, int, int] | None:
        """Hand on candidate `idx` (line `number`), and those after it in a run, if it is a progress
        line the analysis takes: (the last candidate taken, where the line after it starts, its
        number); None when the candidate needs its record."""
        index, k = self.index, self.k
        while k < len(index) and index[k] < idx:
            k += 1
        self.k = k
        if k >= len(index) or index[k] != idx:
            return None
        default = self.default
        if default is not None and default.rank is not None:
            return None  # (the record's origin has a rank the line's prefixes do not tell)
        end = k + 1
        if self.runs is not None and not region:
            end = self._run_end(k, min(bisect_right(self.runs, idx - k, k), k + self.offer))
        run = self._run(k, end, idx, number)
        at = self.columns.ints[k * INT_FIELDS + MESSAGE_AT] if run.steps[0] >= 0 else -1
        self._first = (idx, number, at)
        taken = self.take(run, region, self._stream)
        self.offer = min(2 * self.offer, MAX_RUN_LINES) if taken == end - k else 1
        if not taken:
            return None
        self.tables.taken[self.columns.ints[k * INT_FIELDS + PROCESS]] = 1
        self.k += taken
        if taken == 1:
            return idx, self.block.end(idx) + 1, number + 1
        idx += taken - 1
        return idx, self.block.end(idx) + 1, self.block.numbers[idx] + 1

    def _run_end(self, k: int, end: int) -> int:
        """Where a run from progress line k offered up to `end` stops: at a line of a process the
        analysis took no line of (it is told of it alone: EnvironmentTracker.note_process)."""
        ready, taken, processes = self.ready, self.tables.taken, self.processes
        stop = ready.find(0, k + 1, end)
        while stop >= 0:
            if not taken[processes[stop]]:
                return stop
            ready[stop] = 1  # (taken since the block came)
            stop = ready.find(0, stop + 1, end)
        return end

    def _stream(self) -> tuple:
        """The stream of the first line of the run offered."""
        idx, number, at = self._first
        return self.reader.stream_of(self.block, idx, self.source, number, self.default, at)

    def _run(self, k: int, end: int, idx: int, number: int) -> ProgressRun:
        """The fact of progress lines k to end - 1 (candidates idx, idx + 1, ...; the first is line
        `number`)."""
        if end - k == 1:
            return self._line(k, idx, number)
        columns, tables = self.columns, self.tables
        ints, floats = columns.ints, columns.floats
        lo, hi = k * INT_FIELDS, end * INT_FIELDS
        flo, fhi = k * FLOAT_FIELDS, end * FLOAT_FIELDS
        steps = ints[lo + STEP : hi : INT_FIELDS]
        seconds = floats[flo + SECONDS : fhi : FLOAT_FIELDS]
        rows = self._rows(
            k, idx, steps, seconds, ints[lo + SHAPE : hi : INT_FIELDS], ints[lo + OFFSET : hi : INT_FIELDS]
        )
        return ProgressRun(
            self.source,
            self.block.numbers[idx : idx + end - k],
            steps,
            seconds,
            ints[lo + MARKER : hi : INT_FIELDS],
            ints[lo + BAR_N : hi : INT_FIELDS],
            ints[lo + BAR_TOTAL : hi : INT_FIELDS],
            floats[flo + BAR_RATE : fhi : FLOAT_FIELDS],
            list(map(tables.processes.__getitem__, ints[lo + PROCESS : hi : INT_FIELDS])),
            rows,
        )

    def _line(self, k: int, idx: int, number: int) -> ProgressRun:
        """The fact of progress line k alone (candidate idx, line `number`): its process's actor and
        node are the default origin's where its prefixes tell none."""
        columns = self.columns
        ints, floats = columns.ints, columns.floats
        at, fat = k * INT_FIELDS, k * FLOAT_FIELDS
        step = ints[at + STEP]
        seconds = floats[fat + SECONDS]
        actor, node = self.tables.processes[ints[at + PROCESS]]
        if self.default is not None:
            actor = actor or self.default.actor
            node = node or self.default.node
        rows = ()
        shape = ints[at + SHAPE]
        if shape >= 0:
            keys, names = self.tables.shapes[shape]
            start = ints[at + OFFSET]
            rows = (StepRows((step,), keys, columns.values[start : start + len(keys)], names),)
        elif shape == DEFERRED:
            row, got = self._deferred_row(k, idx)
            seconds = math.nan if got is None else got
            rows = (StepRows((row[0],), row[1], array("d", row[2]), row[3]),)
        return ProgressRun(
            self.source,
            (number,),
            (step,),
            (seconds,),
            (ints[at + MARKER],),
            (ints[at + BAR_N],),
            (ints[at + BAR_TOTAL],),
            (floats[fat + BAR_RATE],),
            ((actor, node),),
            rows,
        )

    def _rows(
        self, k: int, idx: int, steps: array, seconds: array, shapes: array, offsets: array
    ) -> tuple[StepRows, ...]:
        """The metric rows of the step lines of a run from progress line k (candidate idx), rows of one
        shape at a time; a DEFERRED line's row is parsed here, and its time set in `seconds`."""
        columns, tables = self.columns, self.tables
        step_at = [j for j, step in enumerate(steps) if step >= 0]
        out = []
        i, count = 0, len(step_at)
        while i < count:
            j = step_at[i]
            shape = shapes[j]
            if shape == DEFERRED:  # left to this side by a reader process that ran behind
                row, got = self._deferred_row(k + j, idx + j)
                seconds[j] = math.nan if got is None else got
                out.append(StepRows((row[0],), row[1], array("d", row[2]), row[3]))
                i += 1
                continue
            g = i + 1
            while g < count and shapes[step_at[g]] == shape:
                g += 1
            keys, names = tables.shapes[shape]
            start = offsets[j]
            values = columns.values[start : start + (g - i) * len(keys)]
            out.append(StepRows([steps[x] for x in step_at[i:g]], keys, values, names))
            i = g
        return tuple(out)

    def _deferred_row(self, k: int, idx: int) -> tuple[tuple, float | None]:
        """(StepParser.parse, step_seconds) of DEFERRED progress line k, candidate `idx`: a step line
        whose message is its bytes from MESSAGE_AT (parsed once a block, however often it is offered)."""
        got = self._deferred.get(k)
        if got is None:
            raw, _ = self.block.raw(idx)
            message = raw[self.columns.ints[k * INT_FIELDS + MESSAGE_AT] :].decode("ascii")
            got = self._deferred[k] = (self.reader.syntax.step_parser.parse(message), step_seconds(message))
        return got


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
