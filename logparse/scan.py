"""One pass over the inputs: read -> normalise -> tracebacks -> match -> findings -> verdict.

Several files are read as one job. Up to MAX_MERGE_FILES files are merged into one timeline by
their timestamps (a line without one takes the last timestamp seen in its file; lines before any
timestamp come first, in file order); more files than that are read one after the other.
"""

from __future__ import annotations

import dataclasses
import datetime
import gc
import heapq
import json
import math
import os
import stat
from array import array
from bisect import bisect_right
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import regex

from logparse import model
from logparse.decide.verdict import Verdict, infer
from logparse.model import AttemptVerdict, Evidence, InputInfo, Report
from logparse.observe.bare_lines import BareLine, BareLineDetector
from logparse.observe.collectives import CollectiveAnalyzer
from logparse.observe.environment import EnvironmentTracker
from logparse.observe.hits import FindingCollector, Hit
from logparse.observe.matcher import ENTRY_BUDGET_S, MATCH_TIMEOUT_S, Matcher
from logparse.observe.metrics import MetricsTracker, downsample
from logparse.observe.progress import StageTracker, stopped_note
from logparse.observe.tracebacks import FRAME_RE, TB_START, LineRole, TracebackAssembler
from logparse.read.blocks import Block, blocks_in_process, iter_blocks, reader_process_possible
from logparse.read.layout import file_origin
from logparse.read.normalize import Normalizer, Origin, Record
from logparse.read.prefilter import STRUCTURAL_KEYWORDS, Prefilter
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
    SECONDS,
    SHAPE,
    STEP,
    ProgressColumns,
    ProgressLineParser,
    ProgressTables,
)
from logparse.read.progress_syntax import TQDM_KEYWORD, MarkerHit, step_seconds
from logparse.read.sources import (
    MAX_LINE_BYTES,
    InputError,
    InputStats,
    Line,
    TruncatedGzip,
    clean_text,
    decode_line,
    expand_inputs,
    gunzip_chunks,
    open_input,
    plain_chunks,
    read_input,
)
from logparse.read.steps import STEP_KEYWORD, StepParser
from patterns import Catalog, Role, Severity
from patterns.fallback import MessageMarker
from patterns.inference import inference_rules
from patterns.progress import CHART_KEYS
from patterns.stages import MAX_FRAME_FIELD, StageSource, actor_stages, category_stages

MAX_MERGE_FILES = 64
MAX_ERROR_JSON_BYTES = 16 << 20
MAX_ERROR_JSON_DEPTH = 64  # torchrun writes 3 levels; deeper is not its error file
JSON_TOKEN_RE = regex.compile(r'"(?:[^"\\]|\\.)*+"|[\[\]{}]')
RAY_ACTOR_MARKER = regex.compile(r"^:actor_name:(?P<actor>\S+)")
STEP_RE = regex.compile(r"(?:^|[\s\]])step:(?P<step>\d+) - ")
# verl's reward managers print decoded samples during validation: `[prompt] ...`, `[response] ...`
# over many lines, then `[ground_truth] ...` / `[score] ...`. Model output is never evidence.
SAMPLE_TEXT_START = ("[prompt]", "[response]")
SAMPLE_TEXT_END = ("[ground_truth]", "[score]")
MAX_SAMPLE_TEXT_LINES = 5000
MAX_AFTER_LINES = 8
MAX_MESSAGE_GAP = 50  # a message still open after this many lines of its input is closed
CONTEXT_LINES = 5  # context lines before an error line, from its own stream
LOOKBACK_LINES = 64  # raw lines read back to find them
LOOKBACK_BYTES = 64 * 1024  # bytes of the previous block kept for that
MAX_DEFERRED = 10_000  # catalog hits waiting for their traceback to be complete (entries with `frames`)
MAX_BARE_LINES = 200  # bare failure lines kept (the first half and the most recent half)
BARE_LOOKBACK_LINES = 12  # raw lines read back for a bare line's context
DECIDE_DEFERRED_AT = 64  # waiting hits that make the scan decide those whose traceback is complete
MAX_CHARTS = 8
MAX_CHART_POINTS = 2000  # beyond this many step rows, each series keeps its extremes per bucket of steps
MAX_METRIC_KEYS = 512  # continuation lines kept after an error line that is not in a traceback
MATCH_CACHE_SIZE = 4096  # distinct (keywords, message) pairs whose matches are remembered
MATCH_CACHE_CHARS = 2000  # longer messages are matched every time (hashing them costs as much)
MAX_NOTED_PROCESSES = 65_536  # (actor, node) pairs of progress lines whose note is known to be made
# the roles of lines that no entry is tried on: a traceback's frames and source lines, and its header
# (`catalog check` refuses a match example that reads as one: it would never fire in a scan)
UNMATCHED_ROLES = (LineRole.FRAME, LineRole.START)
MIN_RUN_LINES = 4  # progress lines in a row applied at once (fewer: one by one, which costs less then)


READER_PROCESS_BYTES = 32 << 20  # below this, forking a reader costs more than it saves


def _reader_bytes_from_env() -> int | None:
    raw = os.environ.get("VERL_LOGSCAN_READER_MB")
    if raw is None or not raw.strip():
        return READER_PROCESS_BYTES
    if raw.strip().lower() in ("off", "no", "none", "0"):
        return None
    try:
        return max(1, int(float(raw) * (1 << 20)))
    except ValueError:
        return READER_PROCESS_BYTES


@dataclass(frozen=True)
class ScanConfig:
    """Knobs of one scan (frozen: the scanner's state lives apart, in Scanner)."""

    max_groups: int = 2000
    merge_files: int = MAX_MERGE_FILES
    # prefilter engine: hyperscan (default when installed) or re; VERL_LOGSCAN_ENGINE overrides
    engine: str | None = field(default_factory=lambda: os.environ.get("VERL_LOGSCAN_ENGINE") or None)
    # a file at least this large is read (gunzipped, prefiltered) by a reader process while the scan
    # works on the blocks before (logparse.read.blocks); None: never. VERL_LOGSCAN_READER_MB overrides.
    reader_process_bytes: int | None = field(default_factory=lambda: _reader_bytes_from_env())
    # keep the values of every metric key (for --metrics-csv), not only those a report charts or checks
    all_metrics: bool = False
    # apply the progress lines of an input read alone without making records of them
    # (logparse.read.progress_lines); False: every line worth a look is a record (the reference that the
    # tests compare reports with)
    progress_lines: bool = True


class Scanner:
    """Holds the per-scan state; feed inputs in order, then call `report()`."""

    def __init__(self, catalog: Catalog, config: ScanConfig | None = None):
        self.catalog = catalog
        # live use: wrap each opened input (follow, tee); hear of fatal causes; see progress
        self.open_stream = None  # callable(path, stream) -> stream
        self.on_fatal = None  # callable(hit)
        self.on_progress = None  # callable(scanner), called once per record read
        self.config = config or ScanConfig()
        self.matcher = Matcher(catalog)
        self.normalizer = Normalizer()
        self._lookback_normalizer = Normalizer()
        self.assembler = TracebackAssembler(self._context, self._remembers_context)
        self.collector = FindingCollector(self.config.max_groups)
        self.inputs: list[InputStats] = []
        self.seq = 0
        self.attribution: dict[str, Origin] = {}  # file -> what its place in a layout says
        self.last_step: tuple[int, int] | None = None  # (seq, step) of the highest step line so far
        self.collectives = CollectiveAnalyzer()
        self.stages = StageTracker()
        self.metrics = MetricsTracker(all_keys=self.config.all_metrics)
        self.env = EnvironmentTracker()
        self.attempts: list[AttemptVerdict] = []
        self._attempt_count = 0
        self._attempt_first: Evidence | None = None
        self.bare_detector = BareLineDetector()
        self.bare_lines: list[BareLine] = []  # the first MAX_BARE_LINES // 2 ...
        self._recent_bare: deque[BareLine] = deque(maxlen=MAX_BARE_LINES // 2)  # ... and the most recent
        keywords = (
            set(STRUCTURAL_KEYWORDS)
            | set(self.stages.keywords)
            | set(self.env.scan_keywords)
            | set(self.bare_detector.keywords)
        )
        for entry in catalog.entries:
            keywords.update(entry.keywords)
        self.prefilter = Prefilter(keywords, self.config.engine)
        # prefilter keyword id -> the catalog entries that have that keyword
        self._entries_of_keyword: list[tuple] = [
            tuple(self.matcher.entries_with_keyword(k)) for k in self.prefilter.keywords
        ]
        # prefilter keyword id -> the keyword, where the stage / environment tracker looks for it
        stage_words, env_words = set(self.stages.keywords), set(self.env.scan_keywords)
        self._stage_word = [k if k in stage_words else None for k in self.prefilter.keywords]
        self._env_word = [k if k in env_words else None for k in self.prefilter.keywords]
        bare_words = set(self.bare_detector.keywords)
        self._error_levels = self.bare_detector.rules.bare.levels  # an error record needs no keyword
        self._bare_word = [k in bare_words for k in self.prefilter.keywords]
        self._routes: dict[frozenset[int], tuple] = {}  # keyword ids of a line -> _route()
        self._progress_ids: dict[frozenset[int], tuple | None] = {}  # -> _progress_words()
        # keyword id -> a line with it is no progress line: a catalog entry's, a fallback rule's or the
        # traceback structure's keyword (but `step:` and the bar's) ...
        progress_ok = {STEP_KEYWORD, TQDM_KEYWORD}
        self._not_progress = [
            (k in STRUCTURAL_KEYWORDS and k not in progress_ok)
            or k in bare_words
            or bool(self._entries_of_keyword[i])
            or (k not in stage_words and k not in env_words)
            for i, k in enumerate(self.prefilter.keywords)
        ]
        # ... an environment keyword (but `step:`), which only a step line's message may have (the
        # environment tracker reads no keyword of a step line once it knows the format)
        self._env_only = [k in env_words and k != STEP_KEYWORD for k in self.prefilter.keywords]
        self._noted: set[tuple[str | None, str | None]] = set()  # EnvironmentTracker.note_process made
        # a progress line's marker hit (the markers it may match have no named groups)
        self._marker_hits = [MarkerHit(m, {}) for m in self.stages.matcher.markers]
        self._plain_markers = [self.stages.plain_marker(i) for i in range(len(self.stages.matcher.markers))]
        self._blocks: dict[
            str, tuple[Block, bytes]
        ] = {}  # source -> (block being read, tail of the previous)
        self._tails: dict[str, bytes] = {}
        self._offsets: dict[str, int] = {}  # source -> offset of the line being fed in its block
        self._defaults: dict[str, Origin] = {}
        self._cut_lines: dict[str, int] = {}
        self._active_sources: set[str] = set()  # inputs that showed progress or a finding
        self.skipped: list[str] = []  # inputs of a folder that could not be read
        self.sample_text: dict[tuple, int] = {}  # stream -> lines of decoded model text so far
        self.open_message: dict[tuple, Hit] = {}  # stream -> error line still collecting continuation lines
        self.deferred: list[tuple] = []  # (match, record, traceback, step) for entries with `frames`
        self._decide_at = DECIDE_DEFERRED_AT
        # (prefilter keyword ids, message) -> its matches: a log dense in errors repeats its messages
        self._match_cache: dict[tuple, list] = {}
        self._disabled_at: dict[str, str] = {}  # entry id -> the line where it went past its budget

    # -- reading ---------------------------------------------------------------------------------
    def records(self, path: str, alone: bool = True) -> Iterator[Record]:
        """The records of one input worth a look: candidate lines (a keyword of the catalog, the stage
        markers, the trackers or the traceback structure) and, while a traceback, a multi-line message
        or a config dump of this input is open, every line. Layout attribution is the default origin."""
        stats = InputStats("-" if path == "-" else path)
        self.inputs.append(stats)
        fo = file_origin(path) if path != "-" else None
        default = None
        if fo is not None and fo.layout:
            default = Origin(local_rank=fo.local_rank, pid=fo.pid, actor=fo.actor)
            self.attribution[stats.path] = default
        if fo is not None and fo.error_file:
            for line in self._error_file_lines(path, stats, read_input(path, stats)):
                yield self.normalizer.normalize(line, 0, default)
            return
        yield from self._chunk_records(path, stats, default, alone)

    def _chunk_records(
        self, path: str, stats: InputStats, default: Origin | None, alone: bool = True
    ) -> Iterator[Record]:
        """Records of one input read in blocks (logparse.read.blocks). `alone`: no other input is read at
        the same time, so a large file may be read by a reader process (config.reader_process)."""
        source = stats.path
        fh = open_input(path)
        if self.open_stream is not None:
            fh = self.open_stream(path, fh)
        gz = path != "-" and path.lower().endswith(".gz")

        def chunks(st: InputStats) -> Iterator[bytes]:
            return gunzip_chunks(fh, st) if gz else plain_chunks(fh, st)

        # an input read alone has its progress lines applied as its blocks are read (in order, as the
        # records are fed); merged inputs' records are fed in another order than they are read
        fast = alone and self.config.progress_lines
        step_parser = StepParser(self.config.all_metrics)
        progress = None
        if fast:
            progress = ProgressLineParser(
                self._progress_words, self.stages.syntax, step_parser, self.env.ignores
            )
        tables = ProgressTables() if fast else None
        if alone and self._reader_process_for(path):
            blocks = blocks_in_process(chunks, stats, self.prefilter, step_parser, progress)
        else:
            blocks = iter_blocks(chunks(stats), self.prefilter, progress=progress)
        lines = 0  # lines of the blocks done
        truncated = 0
        try:
            try:
                for block in blocks:
                    lines = block.base
                    truncated += block.cut
                    yield from self._block(block, source, default, stats, tables)
                    lines = block.base + block.lines
                    if self.on_progress is not None:  # also for blocks without a line worth a look
                        self.on_progress(self)
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
            stats.notes.append(f"{n} line(s) longer than {MAX_LINE_BYTES} bytes were cut to that length")

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
        record (Block.progress, with `tables`) are applied here instead, in their turn."""
        starts, numbers, keywords, steps = block.starts, block.numbers, block.keywords, block.steps
        count = len(starts)
        n = block.size
        idx = 0
        cur = 0
        number = block.base + 1  # line number of the line at `cur`
        self._blocks[source] = (block, self._tails.get(source, b""))
        columns = block.progress if tables is not None else None
        if columns is not None:
            tables.learn(columns)
        progress = columns.index if columns is not None else ()
        runs = ready = None
        if columns is not None and default is None:
            # progress line k is candidate k + runs[k]: lines with the same value are consecutive candidates;
            # ready[k]: it may go in a run (_progress_run)
            runs = [i - k for k, i in enumerate(progress)]
            ready = self._run_ready(columns, tables)
        k = 0  # the next progress line (an index into `columns`)
        while cur < n:
            while idx < count and starts[idx] < cur:
                idx += 1
            candidate = idx < count and starts[idx] == cur
            region = self._region_open(source, number)
            if region:
                start = cur
                ids = keywords[idx] if candidate else _NO_KEYWORDS
            else:
                if idx == count:
                    break
                start, number, ids = starts[idx], numbers[idx], keywords[idx]
                candidate = True
            if candidate and k < len(progress):
                while k < len(progress) and progress[k] < idx:
                    k += 1
                if k < len(progress) and progress[k] == idx:
                    applied = 0
                    if runs is not None and not region and not self.sample_text:
                        applied = self._progress_run(columns, k, runs, ready, tables, block, idx, source)
                    if applied:
                        k += applied
                        idx += applied - 1
                        cur = block.end(idx) + 1
                        number = numbers[idx] + 1
                        continue
                    if self._progress_line(columns, k, tables, block, idx, source, number, default, region):
                        cur = block.end(idx) + 1
                        number += 1
                        continue
            step_line = steps.get(idx) if steps and candidate else None
            if candidate:
                raw, end = block.raw(idx)
            else:  # a line no keyword marks, read because a region is open
                data = block.load()
                end = data.find(b"\n", start)
                if end < 0:
                    end = n
                raw = data[start:end]
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
            rec = self.normalizer.normalize(line, 0, default)
            rec.keywords = ids
            rec.step_line = step_line
            yield rec
            if self.on_progress is not None:
                self.on_progress(self)
            cur = end + 1
            number += 1
        self._tails[source] = block.tail(LOOKBACK_BYTES)
        del self._blocks[source]  # a reader process reuses its memory once the next block is asked for

    def _run_ready(self, columns: ProgressColumns, tables: ProgressTables) -> bytearray:
        """For each progress line of `columns`, 1 if it may go in a run as far as its process (noted)
        and its marker (plain) tell; 0 if not, or not yet (a line taken alone may note its process)."""
        ints = columns.ints
        processes = ints[PROCESS::INT_FIELDS]
        noted = tables.noted
        for process in set(processes):
            if not noted[process] and tables.processes[process] in self._noted:
                noted[process] = 1
        ready = bytearray(map(noted.__getitem__, processes))
        markers = ints[MARKER::INT_FIELDS]
        plain = self._plain_markers
        for marker in set(markers):
            if marker >= 0 and not plain[marker]:
                for k, other in enumerate(markers):
                    if other == marker:
                        ready[k] = 0
        return ready

    def _progress_run(
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
        """Apply progress lines k, k + 1, ... of `columns` (candidates idx, idx + 1, ... of `block`, with
        no other candidate between them) at once, as `_progress_line` would each in turn, while what
        decides that stays the same: no region of the input is open and no model text (the caller
        knows; no record comes between them to open one), no config dump, the input has no default
        origin, every line's process is noted and its marker plain (`ready`, from _run_ready) and its
        step line's format is known. How many it applied; 0: none (fewer than MIN_RUN_LINES), the
        caller takes them one by one."""
        if self.env.dump_open() or self.stages.checkpoint_pending:
            return 0
        end = bisect_right(runs, idx - k, k)
        if end - k < MIN_RUN_LINES:
            return 0
        ints = columns.ints
        stop = ready.find(0, k, end)
        while stop >= 0:
            marker = ints[stop * INT_FIELDS + MARKER]
            process = ints[stop * INT_FIELDS + PROCESS]
            if (marker >= 0 and not self._plain_markers[marker]) or (
                not tables.noted[process] and tables.processes[process] not in self._noted
            ):
                end = stop
                break
            tables.noted[process] = 1  # (noted by a line taken alone since the block came: ready now)
            ready[stop] = 1
            stop = ready.find(0, stop + 1, end)
        if not self.env.step_format_known():
            end = next((j for j in range(k, end) if ints[j * INT_FIELDS + STEP] >= 0), end)
        count = end - k
        if count < MIN_RUN_LINES:
            return 0
        lo, hi = k * INT_FIELDS, end * INT_FIELDS
        markers = ints[lo + MARKER : hi : INT_FIELDS]
        steps = ints[lo + STEP : hi : INT_FIELDS]
        floats = columns.floats
        flo, fhi = k * FLOAT_FIELDS, end * FLOAT_FIELDS
        seconds = floats[flo + SECONDS : fhi : FLOAT_FIELDS]
        step_at = [j for j in range(count) if steps[j] >= 0]
        shapes = ints[lo + SHAPE : hi : INT_FIELDS]
        deferred = {}  # line -> its row: the step lines left to this side by a reader process that ran behind
        for j in step_at:
            if shapes[j] == DEFERRED:
                at = ints[lo + j * INT_FIELDS + MESSAGE_AT]
                deferred[j], timing = self._deferred_row(block, idx + j, at)
                seconds[j] = math.nan if timing is None else timing
        seq = self.seq + 1
        self.seq += count
        numbers = block.numbers[idx : idx + count]
        self.stages.apply_run(
            seq,
            source,
            numbers,
            steps,
            seconds,
            markers,
            ints[lo + BAR_N : hi : INT_FIELDS],
            ints[lo + BAR_TOTAL : hi : INT_FIELDS],
            floats[flo + BAR_RATE : fhi : FLOAT_FIELDS],
        )
        if not step_at:
            return count
        offsets = ints[lo + OFFSET : hi : INT_FIELDS]
        i, rows = 0, len(step_at)
        while i < rows:
            j = step_at[i]
            shape = shapes[j]
            if shape == DEFERRED:
                row = deferred[j]
                self.metrics.add_row(row[0], row[1], array("d", row[2]), row[3])
                i += 1
                continue
            g = i + 1
            while g < rows and shapes[step_at[g]] == shape:
                g += 1
            keys, names = tables.shapes[shape]
            start = offsets[j]
            self.metrics.add_rows(
                [steps[x] for x in step_at[i:g]],
                keys,
                columns.values[start : start + (g - i) * len(keys)],
                names,
            )
            i = g
        top = max(steps[j] for j in step_at)
        if self.last_step is None or top >= self.last_step[1]:
            j = next(j for j in reversed(step_at) if steps[j] == top)
            self.last_step = (seq + j, top)
        self._active_sources.add(source)
        return count

    def _deferred_row(self, block: Block, idx: int, message_at: int) -> tuple[tuple, float | None]:
        """(StepParser.parse, step_seconds) of the DEFERRED step line that is candidate `idx` of `block`."""
        raw, _ = block.raw(idx)
        message = raw[message_at:].decode("ascii")
        return self.metrics.parser.parse(message), step_seconds(message)

    def _progress_line(
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
        """Apply progress line `k` of `columns` (candidate `idx` of `block`, line `number` of `source`)
        as feed_record would its record, when nothing the columns do not tell bears on it
        (logparse.read.progress_lines); False: it needs its record."""
        fields = columns.ints
        at = k * INT_FIELDS
        step = fields[at + STEP]
        if (step >= 0 and not self.env.step_format_known()) or self.env.dump_open():
            return False
        actor, node = tables.processes[fields[at + PROCESS]]
        if default is not None:
            if default.rank is not None:
                return False
            actor = actor or default.actor
            node = node or default.node
        if region or self.sample_text:
            # what only its stream tells: normalised apart, as lines read back are (it reads no clock, so
            # any normaliser gives its origin)
            raw, _ = block.raw(idx)
            stream = self._lookback_normalizer.normalize(
                Line(source, number, decode_line(raw)), 0, default
            ).stream
            if region and (self.assembler.current(stream) is not None or stream in self.open_message):
                return False
            if stream in self.sample_text:  # (as feed_record: model text goes on until a step line)
                lines = self.sample_text[stream] + 1
                if step < 0 and lines < MAX_SAMPLE_TEXT_LINES:
                    self.sample_text[stream] = lines
                    self.seq += 1
                    return True
                del self.sample_text[stream]
        process = (actor, node)
        if process not in self._noted:
            if not self.env.note_process(actor, node):
                return False  # a new Ray actor: its record tells the era rules
            if len(self._noted) < MAX_NOTED_PROCESSES:
                self._noted.add(process)
        self.seq += 1
        seq = self.seq
        line = tables.line(columns, k)
        marker = fields[at + MARKER]
        if marker >= 0:
            line = line._replace(hit=self._marker_hits[marker])
        shape = fields[at + SHAPE]
        if shape == DEFERRED:  # left to this side by a reader process that ran behind
            row, seconds = self._deferred_row(block, idx, fields[at + MESSAGE_AT])
            line = line._replace(seconds=seconds)
        self.stages.apply(seq, source, number, None, 1, line)
        if shape >= 0:
            keys, names = tables.shapes[shape]
            start = fields[at + OFFSET]
            self.metrics.add_row(step, keys, columns.values[start : start + len(keys)], names)
        elif shape == DEFERRED:
            self.metrics.add_row(row[0], row[1], array("d", row[2]), row[3])
        if step >= 0:
            if self.last_step is None or step >= self.last_step[1]:
                self.last_step = (seq, step)
            self._active_sources.add(source)
        return True

    def _reader_process_for(self, path: str) -> bool:
        """A regular file of at least config.reader_process_bytes, read without follow or tee."""
        limit = self.config.reader_process_bytes
        if limit is None or path == "-" or self.open_stream is not None:
            return False
        try:
            st = os.stat(path)
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and st.st_size >= limit and reader_process_possible()

    def _region_open(self, source: str, line_number: int) -> bool:
        """Must the next line of `source` be read even without a keyword?"""
        self.assembler.expire(source, line_number)
        if self.open_message:
            # (no copy of the dict per line: 64 ranks keep 64 messages open on every line of a cascade)
            expired = []
            found = False
            for stream, hit in self.open_message.items():
                if stream[0] == source:
                    if line_number - hit.record.line.number > MAX_MESSAGE_GAP:
                        expired.append(stream)
                    else:
                        found = True
                        break
            for stream in expired:
                del self.open_message[stream]
            if found:
                return True
        return self.assembler.open_in(source) or self.env.dump_open_in(source)

    def _context(self, rec: Record, lines: int = LOOKBACK_LINES) -> Sequence[Record]:
        """Up to CONTEXT_LINES lines of `rec`'s stream just before it, read back from the raw block
        (at most LOOKBACK_LINES lines and LOOKBACK_BYTES back), whether or not they were candidates.
        The raw bytes are taken now (the block moves on); they are decoded only if a report shows them."""
        source = rec.line.source
        got = self._blocks.get(source)
        if got is None or source not in self._offsets:
            # no raw block at hand: the last lines of its stream the assembler kept (without itself)
            context = self.assembler.context_of(rec.stream)
            return context[:-1] if context and context[-1] is rec else context
        block, tail = got
        before = _lookback(block.load(), self._offsets[source], tail, min(lines, rec.line.number - 1))
        default = self._defaults.get(source) or self.attribution.get(source)
        return LazyContext(rec, before, default, self._lookback_normalizer)

    def _hit_context(self, rec: Record) -> Sequence[Record]:
        """The context of an error line outside a traceback (without the line itself, which the
        assembler's own record of its stream ends with)."""
        context = self.assembler.context_for(rec)
        if isinstance(context, list) and context and context[-1] is rec:
            context = context[:-1]
        return context

    def _remembers_context(self, rec: Record) -> bool:
        """Must the traceback assembler remember `rec` as context of its stream? Not for a line of a
        block being read: `_context` reads those back from the raw block (so a stream that printed
        and went quiet costs nothing); yes for the others (an error.json's, lines fed one by one)."""
        return rec.line.source not in self._blocks

    def _error_file_lines(self, path: str, stats: InputStats, lines: Iterator[Line]) -> Iterator[Line]:
        """torchrun's `@record` error.json: its py_callstack (or message) becomes the lines scanned;
        line numbers then count lines of the callstack. Anything else is scanned as plain text."""
        buffered = []
        size = 0
        for line in lines:
            buffered.append(line)
            size += len(line.text)
            if size > MAX_ERROR_JSON_BYTES:
                yield from buffered
                yield from lines
                return
        try:
            text = "\n".join(line.text for line in buffered)
            if json_depth(text) > MAX_ERROR_JSON_DEPTH:
                # (json.loads recurses once a level: a hostile file of 1,000 levels raises RecursionError)
                stats.notes.append(
                    f"{stats.path}: JSON nested more than {MAX_ERROR_JSON_DEPTH} levels deep; "
                    f"read as plain text"
                )
                raise ValueError("too deep")
            data = json.loads(text)
            message = data["message"]
            if isinstance(message, dict):
                text = message.get("extraInfo", {}).get("py_callstack") or message.get("message", "")
            else:
                text = str(message)
            if not isinstance(text, str) or not text.strip():
                raise ValueError("empty")
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            yield from buffered
            return
        stats.notes.append(f"{stats.path}: read as a torchrun error file (its py_callstack)")
        for i, t in enumerate(text.splitlines(), 1):
            yield Line(stats.path, i, clean_text(t))

    def feed_input(self, path: str) -> None:
        for rec in self.records(path):
            self.feed_record(rec)

    def feed_inputs(self, paths: list[str]) -> None:
        """Several inputs are one job; one that cannot be read is skipped with a note (a single
        unreadable input is an error: InputError). The garbage collector pauses meanwhile
        (_collector_paused)."""
        with _collector_paused():
            self._feed_inputs(paths)

    def _feed_inputs(self, paths: list[str]) -> None:
        if len(paths) == 1:
            self.feed_input(paths[0])
        elif len(paths) <= self.config.merge_files:
            for rec in merge_by_time([self._readable(p, alone=False) for p in paths]):
                self.feed_record(rec)
        else:
            for p in paths:
                for rec in self._readable(p):
                    self.feed_record(rec)

    def _readable(self, path: str, alone: bool = True) -> Iterator[Record]:
        try:
            yield from self.records(path, alone)
        except InputError as exc:
            self.skipped.append(f"skipped {exc}")

    def feed_line(self, line: Line) -> None:
        self.feed_record(self.normalizer.normalize(line))

    # -- understanding ---------------------------------------------------------------------------
    def feed_record(self, rec: Record) -> None:
        self.seq += 1
        rec.seq = self.seq
        msg = rec.message
        stream = rec.stream
        t = rec.origin.time
        if msg.startswith("[") and msg.startswith(SAMPLE_TEXT_START + SAMPLE_TEXT_END):
            if msg.startswith(SAMPLE_TEXT_START):
                self.sample_text[stream] = 0
            else:
                self.sample_text.pop(stream, None)
            return
        if self.sample_text and stream in self.sample_text:
            n = self.sample_text[stream] + 1
            if n < MAX_SAMPLE_TEXT_LINES and not STEP_RE.search(msg):
                self.sample_text[stream] = n
                return
            del self.sample_text[stream]
        ids = rec.keywords
        if ids is None:  # not prefiltered: the trackers search the message for their keywords
            stage_words = env_words = entries = untraced = None
            bare = True
        else:
            routed = self._routes.get(ids)
            if routed is None:
                routed = self._route(ids)
            stage_words, env_words, entries, untraced, bare = routed
        if stage_words is None or stage_words:
            self.stages.feed(rec, stage_words)
        if (
            self.stages.attempts_started != self._attempt_count
        ):  # (a count: building the list cost every line)
            self._attempt_count = self.stages.attempts_started
            if rec.line.source in self._active_sources:
                # a (re)start printed where this input already showed progress or errors: a new attempt.
                # (A launcher's banner in its own file, merged among the ranks' files, is not one.)
                self._new_attempt(rec)
        role = self.assembler.feed(rec)
        if role != LineRole.FRAME:
            self.metrics.feed(rec)
            self.env.feed(rec, env_words)
        if self.open_message and stream in self.open_message:
            self._continue_message(rec, role)
        if role in UNMATCHED_ROLES:
            return
        if "step:" in msg:
            m = STEP_RE.search(msg)
            if m:
                step = int(m.group("step"))
                if self.last_step is None or step >= self.last_step[1]:
                    self.last_step = (rec.seq, step)
                self._active_sources.add(rec.line.source)
        if "WorkNCCL(" in msg or "last enqueued" in msg or rec.origin.rank is not None:
            self.collectives.feed(rec)
        traced = role in (LineRole.EXCEPTION, LineRole.MESSAGE)
        if not traced and entries:
            # no traceback can be the line's: entries that need one cannot fire, and are not tried
            # (a catch-all exception entry of a reward function's frames is on most error lines)
            entries = untraced
        key = (ids, traced, msg) if entries and len(msg) <= MATCH_CACHE_CHARS else None
        matches = self._match_cache.get(key) if key is not None else None
        if matches is None:
            timeouts = self.matcher.timeouts
            if entries is None:
                matches = self.matcher.match(msg)
            elif entries:
                matches = self.matcher.match_entries(entries, msg, ordered=True)
            else:
                matches = ()
            if len(self.matcher.disabled) != len(self._disabled_at):
                for entry_id in self.matcher.disabled:
                    self._disabled_at.setdefault(entry_id, f"{rec.line.source}:{rec.line.number}")
            if self.matcher.timeouts == timeouts and key is not None:
                # (a result that a timeout decided is not one to repeat)
                if len(self._match_cache) >= MATCH_CACHE_SIZE:
                    self._match_cache.clear()
                self._match_cache[key] = matches
        if not matches:
            if role == LineRole.NONE and (bare or rec.origin.level in self._error_levels):
                self._bare_line(rec)
            return
        tb = self.assembler.current(rec.stream) if role in (LineRole.EXCEPTION, LineRole.MESSAGE) else None
        if matches[0].entry.frames if len(matches) == 1 else any(m.entry.frames for m in matches):
            # entries that need a traceback context are decided when the traceback is complete
            for m in matches:
                if m.entry.frames and tb is not None:
                    if len(self.deferred) >= self._decide_at:
                        self._decide_deferred(closed_only=True)
                        # (twice what still waits: many tracebacks open at once cost no sweep per hit)
                        self._decide_at = max(DECIDE_DEFERRED_AT, 2 * len(self.deferred))
                    if len(self.deferred) < MAX_DEFERRED:
                        self.deferred.append((m, rec, tb, self.last_step[1] if self.last_step else None))
            matches = [m for m in matches if not m.entry.frames]
            if not matches:
                if role == LineRole.NONE and (bare or rec.origin.level in self._error_levels):
                    self._bare_line(rec)  # (outside a traceback those entries cannot fire)
                return
        hits = [
            Hit(m.entry, rec, m.groups, rec.seq, tb, (), t, self.last_step[1] if self.last_step else None)
            for m in matches
        ]
        self._active_sources.add(rec.line.source)
        context = None
        for hit in hits:
            if self.collector.add(hit) and tb is None:
                # only a finding's first hit can be shown with its context: read it back now, while its
                # block is at hand (for every hit, a log dense in errors read 64 lines back per line)
                if context is None:
                    context = self._hit_context(rec)
                hit.context = context
            if (
                self.on_fatal is not None
                and hit.entry.role == Role.CAUSE
                and hit.entry.severity == Severity.FATAL
            ):
                self.on_fatal(hit)
        if tb is None and stream not in self.open_message:
            self.open_message[stream] = hits[0]

    def _progress_words(self, ids: frozenset[int]) -> tuple[tuple[str, ...], bool] | None:
        """For a line with prefilter keyword ids `ids` that may be a progress line applied without a
        record (logparse.read.progress_lines): (its stage tracker keywords, whether it has an environment
        keyword, which only a step line may have). None when it has neither `step:` nor the bar's
        keyword, or a keyword that rules it out: a catalog entry's, patterns/fallback.yaml's, or the
        traceback structure's (but `step:` and the bar's).
        (Cached per set; asked where the blocks are made.)"""
        words = self._progress_ids.get(ids, False)
        if words is False:
            words = None
            stage_words = tuple(w for w in map(self._stage_word.__getitem__, ids) if w is not None)
            if (STEP_KEYWORD in stage_words or TQDM_KEYWORD in stage_words) and not any(
                map(self._not_progress.__getitem__, ids)
            ):
                words = (stage_words, any(map(self._env_only.__getitem__, ids)))
            if len(self._progress_ids) < 65536:
                self._progress_ids[ids] = words
        return words

    def _route(self, ids: frozenset[int]) -> tuple[list[str], list[str], tuple, tuple, bool]:
        """What the prefilter keywords `ids` of a line call for: the stage and environment trackers'
        keywords among them, the catalog entries that have one of them (all; those that need no
        traceback), and whether the line may be a bare failure line (a keyword of
        patterns/fallback.yaml) (cached per set)."""
        stage_words = [w for w in map(self._stage_word.__getitem__, ids) if w is not None]
        env_words = [w for w in map(self._env_word.__getitem__, ids) if w is not None]
        entries = self.matcher.in_order({e.id: e for k in ids for e in self._entries_of_keyword[k]}.values())
        bare = any(map(self._bare_word.__getitem__, ids))
        untraced = tuple(e for e in entries if not e.frames)
        routed = (
            stage_words,
            env_words,
            entries,
            untraced if len(untraced) < len(entries) else entries,
            bare,
        )
        if len(self._routes) < 65536:
            self._routes[ids] = routed
        return routed

    def _bare_line(self, rec: Record) -> None:
        """A line outside any traceback that no entry matched but that reads as a failure: kept (the
        first and the most recent MAX_BARE_LINES // 2) for the verdict, with its continuation lines."""
        found = self.bare_detector.detect(rec)
        if found is None:
            return
        kind, exc_type, message = found
        step = self.last_step[1] if self.last_step else None
        line = None
        if kind == "marker":
            marker = self.bare_detector.rules.bare.message_marker(rec.message.strip())
            if marker is not None:
                line = self._message_before(rec, marker, step)
        if line is None:
            # a few lines back (not LOOKBACK_LINES): every bare line of a log dense in errors takes its own
            context = self._context(rec, BARE_LOOKBACK_LINES)
            line = BareLine(rec, kind, exc_type, message, step, context)
        if len(self.bare_lines) < MAX_BARE_LINES // 2:
            self.bare_lines.append(line)
        else:
            self._recent_bare.append(line)
        self._active_sources.add(rec.line.source)
        if rec.stream not in self.open_message:
            self.open_message[rec.stream] = line

    def _message_before(self, rec: Record, marker: MessageMarker, step: int | None) -> BareLine | None:
        """The failure a message marker closes (patterns/fallback.yaml `markers`): the text its stream
        printed just before it, as a bare line of its own (its first line the failure line, the rest
        its continuation), or None when that text is not there to read (no raw block at hand, nothing
        before it) or is a traceback's (which the traceback assembler reads)."""
        source = rec.line.source
        got = self._blocks.get(source)
        if got is None or source not in self._offsets:
            return None
        block, tail = got
        raw = _lookback(block.load(), self._offsets[source], tail, min(marker.lines, rec.line.number - 1))
        default = self._defaults.get(source) or self.attribution.get(source)
        # the stream's lines before the marker, oldest first, blank ones too
        before = list(_stream_lines_before(rec, raw, default, self._lookback_normalizer))
        before.reverse()
        end = len(before)
        while end and not before[end - 1].message.strip():
            end -= 1
        while True:
            # the paragraph ending at `end`: back to a blank line, or a line that starts a log record
            start = end
            while start and before[start - 1].message.strip() and not _starts_record(before[start - 1]):
                start -= 1
            if start == end:
                return None
            if any(
                r.message.lstrip().startswith(TB_START) or FRAME_RE.match(r.message)
                for r in before[start:end]
            ):
                return None  # a traceback's: its exception line is the failure
            first = before[start].message.strip()
            if not (start and any(s.search(first) for s in marker.sections)):
                break
            # a section of the message (Hydra's `Config search path:`): the message began before it
            end = start
            while end and not before[end - 1].message.strip():
                end -= 1
            if not end:
                return None
        head = before[start]
        head.seq = rec.seq  # (ordered as the marker: nothing else of its stream came between)
        after = [r for r in before[start + 1 :] if r.message.strip()]
        context = [r for r in before[max(0, start - CONTEXT_LINES) : start] if r.message.strip()]
        return BareLine(head, "marker", None, head.message.strip(), step, context, after, marker=marker)

    def kept_bare_lines(self) -> list[BareLine]:
        return self.bare_lines + list(self._recent_bare)

    def _continue_message(self, rec: Record, role: LineRole) -> None:
        """Lines right after an error line outside a traceback belong to its message until a blank
        line, a new log record (a level or timestamp), a traceback, or MAX_AFTER_LINES."""
        hit = self.open_message[rec.stream]
        text = rec.message.strip()
        if (
            role != LineRole.NONE
            or not text
            or rec.origin.level is not None
            or rec.origin.time is not None
            or len(hit.after) >= MAX_AFTER_LINES
        ):
            del self.open_message[rec.stream]
            return
        hit.after.append(rec)

    def finish(self) -> None:
        """Close open tracebacks and decide the hits that waited for them."""
        self.assembler.close_all()
        self._decide_deferred()

    def _decide_deferred(self, closed_only: bool = False) -> None:
        """Decide the hits that waited for their traceback (`closed_only`: those whose traceback is
        complete; the others wait on). Deciding them as they complete, not all at the end, keeps a log
        of 20,000 tracebacks from holding 10,000 of them (and their context) until then."""
        waiting = []
        for item in self.deferred:
            m, rec, tb, step = item
            if closed_only and not tb.closed:
                waiting.append(item)
            elif m.entry.frames_match(frame_texts(tb), MATCH_TIMEOUT_S):
                self.collector.add(Hit(m.entry, rec, m.groups, rec.seq, tb, [], rec.origin.time, step))
        self.deferred = waiting

    def _new_attempt(self, rec: Record) -> None:
        """A (re)start marker after progress: the attempt so far is diagnosed on its own and set aside;
        the verdict is the last attempt's."""
        first = Evidence(rec.line.source, rec.line.number, rec.line.text)
        if (
            self.collector.groups
            or self.assembler.total
            or self.assembler.kept()
            or self.last_step
            or self.bare_lines
        ):
            self.finish()
            v = infer(
                self.collector,
                self.assembler.kept(),
                self.catalog,
                self.last_step,
                bare_lines=self._live_bare_lines(),
            )
            self.attempts.append(
                AttemptVerdict(
                    index=len(self.attempts) + 1,
                    first_line=self._attempt_first or first,
                    status="failed" if v.root else "healthy",
                    category=v.root.category if v.root else None,
                    summary=v.root.summary if v.root else None,
                )
            )
            self.collector = FindingCollector(self.config.max_groups)
            self.assembler = TracebackAssembler(self._context, self._remembers_context)
            self.bare_lines = []
            self._recent_bare.clear()
            self.collectives = CollectiveAnalyzer()
            self.open_message.clear()
            self.last_step = None
        self._attempt_first = first

    def report(self) -> Report:
        self.finish()
        nccl = self.collectives.report()
        laggard = None
        if nccl is not None:
            suspects = set(nccl.silent) | {r for r, _ in nccl.behind}
            laggard = suspects.pop() if len(suspects) == 1 else None
        verdict = infer(
            self.collector,
            self.assembler.kept(),
            self.catalog,
            self.last_step,
            nccl.sentences if nccl else (),
            laggard,
            bare_lines=self._live_bare_lines(),
        )
        root, symptoms, findings = verdict.root, verdict.symptoms, verdict.findings
        notes = self.skipped + [n for s in self.inputs for n in s.notes] + list(verdict.notes)
        if self.collector.overflow:
            notes.append(
                f"more than {self.config.max_groups} distinct messages: {self.collector.overflow} hit(s) "
                f"with further messages are counted in their entry's row, not listed one by one"
            )
        if self.matcher.timeouts:
            notes.append(f"{self.matcher.timeouts} pattern search(es) hit the match timeout and were skipped")
        first = self.normalizer.first_unwoven
        if first is not None:
            notes.append(
                f"{self.normalizer.unwoven} exception line(s) written by several processes at once were "
                f"read apart (first at {first.source}:{first.number})"
            )
        for entry_id, entry in self.matcher.disabled.items():
            notes.append(
                f"catalog entry '{entry_id}' ({entry.source}:{entry.line}) was disabled at "
                f"{self._disabled_at.get(entry_id, 'the end')}: its slow pattern searches took "
                f"{self.matcher.spent.get(entry_id, 0.0):.1f} s "
                f"({self.matcher.entry_timeouts.get(entry_id, 0)} timed out; budget {ENTRY_BUDGET_S:g} s a "
                f"scan), so later lines were not matched against it"
            )
        notes += self.stages.notes + self.metrics.notes
        if len(self.metrics.steps) > MAX_CHART_POINTS:
            notes.append(
                f"metric series keep at most {MAX_CHART_POINTS} of the {len(self.metrics.steps)} steps "
                f"(the lowest and highest value of each stretch of steps, so no spike is lost); "
                f"--metrics-csv writes them all"
            )
        failed = root is not None
        root_seq = None
        if root is not None and root.error_line is not None:
            root_seq = self._seq_of(verdict)
        if root is not None and root.stage is None and root_seq is not None:
            stage, source = self._stage_fallback(root, root_seq, nccl)
            if stage is not None:
                root = dataclasses.replace(root, stage=stage, stage_source=source.value)
        if (
            root is not None
            and root.rank is None
            and root.local_rank is None
            and root.pid is None
            and root.actor is None
            and root.category not in inference_rules().observer_categories
        ):
            # a process with no prefix of its own: the launcher's report names the rank that failed
            launcher = self._launcher_failed_rank()
            if launcher is not None:
                root = dataclasses.replace(root, rank=launcher[0], local_rank=launcher[1])
        if root is not None and root.rank is None and root.local_rank is not None:
            # torchrun's summary maps a local rank (a --log-dir folder) to its global rank
            for tb in self.assembler.kept():
                f = next(
                    (
                        f
                        for f in tb.torchrun_failures
                        if f.local_rank == root.local_rank and f.rank is not None
                    ),
                    None,
                )
                if f is not None:
                    root = dataclasses.replace(root, rank=f.rank)
                    break
        environment = self.env.fingerprint()
        if root is not None:
            root = _cite_job_values(root, environment)
        progress = self._progress(failed, root_seq)
        if root is not None and root.stage is not None and progress.stage_reached != root.stage:
            # the failure is the last thing the log shows: its stage was reached
            progress = dataclasses.replace(progress, stage_reached=root.stage)
        metrics = self._metrics(failed)
        status = model.STATUS_FAILED if failed else model.STATUS_HEALTHY
        if not failed and self.inputs and not any(s.lines for s in self.inputs):
            # an empty file or pipe is not a healthy job: there was nothing to judge (and no "stopped
            # before the first step" either)
            status = model.STATUS_EMPTY
            notes.insert(
                0,
                "no log lines read: "
                + (
                    "every input was empty or skipped"
                    if len(self.inputs) > 1
                    else "the input was empty or skipped"
                ),
            )
            progress = dataclasses.replace(progress, note=None)
        return Report(
            status=status,
            root_cause=root,
            symptoms=symptoms,
            findings=findings,
            inputs=tuple(InputInfo(s.path, s.lines, s.bytes) for s in self.inputs),
            notes=tuple(notes),
            progress=progress,
            metrics=metrics,
            environment=environment,
            attempts=tuple(self.attempts),
        )

    def _stage_fallback(
        self, root: model.RootCause, root_seq: int, nccl
    ) -> tuple[str | None, StageSource | None]:
        """The stage when the failure's own evidence does not tell it, in order of trust: a collective
        that timed out among the first of its group before any training step (distributed-init); the
        stage of the Ray actor that printed it (patterns/stages.yaml actor_stages); the last stage
        marker before the failure; a collective that timed out far into its group
        (training); before the training loop began, the init stage its category implies
        (patterns/stages.yaml category_stages)."""
        rules = inference_rules()
        started = self.stages.training_started_before(root_seq)
        observer = root.category in rules.observer_categories
        if nccl is not None and observer and not started and nccl.seq <= rules.early_collective_seq:
            return "distributed-init", StageSource.COLLECTIVE
        stage = actor_stages().get(root.actor) if root.actor else None
        if stage is not None and (started or root.category not in category_stages()):
            return stage, StageSource.ACTOR
        stage = self.stages.stage_at(root_seq)
        if stage is not None:
            return stage, StageSource.MARKER
        if nccl is not None and observer and nccl.seq > rules.early_collective_seq:
            return "training", StageSource.COLLECTIVE  # thousands of collectives in: inside the loop
        if not started and root.category in category_stages():
            return category_stages()[root.category], StageSource.CATEGORY
        return None, None

    def _launcher_failed_rank(self) -> tuple[int | None, int | None] | None:
        """(rank, local_rank) of the one process a launcher reports as failed: torchrun's
        ChildFailedError summary (its root-cause block, else its only failure), else the local
        ranks of the agent's `failed (exitcode: N) local_rank: N` lines (a `local_rank` group of a
        catalog entry). None when it names none or several."""
        for tb in self.assembler.kept():
            root = tb.torchrun_root_failure()
            failures = [root] if root is not None else tb.torchrun_failures
            if len(failures) == 1 and (failures[0].rank is not None or failures[0].local_rank is not None):
                return failures[0].rank, failures[0].local_rank
        local = {
            g.first.groups.get("local_rank")
            for g in self.collector.groups.values()
            if g.first.groups.get("local_rank") is not None
        }
        if len(local) == 1:
            value = local.pop()
            return (None, int(value)) if value.isdigit() else None
        return None

    def _live_bare_lines(self) -> list[BareLine]:
        """Bare failure lines, and tracebacks cut before their exception line, after which the job did
        not go on (no later step line, progress bar, completion marker, or a stage it had not reached)
        and that did not come after the run completed."""
        cut = [
            BareLine(tb.all_records()[-1], "cut-traceback", None, "", None, tb.context, traceback=tb)
            for tb in self.assembler.kept()
            if tb.final is None and tb.frames and tb.start.message.strip().endswith(TB_START)
        ]
        # (after a completion marker, error lines are the teardown's: the run itself succeeded)
        return [
            b
            for b in self.kept_bare_lines() + cut
            if not self.stages.went_on_after(b.seq, ignore=WENT_ON_IGNORED)
            and not self.stages.completed_before(b.seq)
        ]

    @staticmethod
    def _seq_of(verdict: Verdict) -> int | None:
        return verdict.root_seq

    def _progress(self, failed: bool, root_seq: int | None) -> model.Progress:
        p = self.stages.progress(None, failed=failed)
        failure_step = self.stages.progress(root_seq, failed=True).last_step if root_seq is not None else None
        return model.Progress(
            stage_reached=p.stage_reached,
            last_step=p.last_step,
            total_steps=p.total_steps,
            completed=p.completed,
            seconds_per_step=p.seconds_per_step,
            timeline=tuple(
                model.StageSpan(
                    sp.stage,
                    sp.first_source,
                    sp.first_line,
                    sp.last_source,
                    sp.last_line,
                    _iso(sp.first_time),
                    _iso(sp.last_time),
                )
                for sp in p.timeline
            ),
            failure_step=failure_step,
            note=None if failed or p.completed else (p.note or stopped_note(p)),
            segments=tuple(
                model.StageSpan(
                    sp.stage,
                    sp.first_source,
                    sp.first_line,
                    sp.last_source,
                    sp.last_line,
                    _iso(sp.first_time),
                    _iso(sp.last_time),
                )
                for sp in self.stages.segments()
            ),
        )

    def _metrics(self, failed: bool) -> model.Metrics | None:
        steps = self.metrics.steps
        if not steps:
            return None
        keys = self.metrics.keys
        valued = set(self.metrics.valued_keys)
        chart = [k for k in CHART_KEYS if k in valued][:MAX_CHARTS]
        series = []
        for key in chart:
            points = self.metrics.series(key)
            if len(points) != len(steps):  # (a series holds each of its steps once: equal, it has them all)
                values = dict(points)
                points = [(st, values.get(st)) for st in steps]
            # a chart of 40,000 points shows no more than one of 2,000: each bucket of steps keeps its
            # lowest and highest value (and its first NaN / Inf), so no spike is lost
            points = downsample(points, MAX_CHART_POINTS)
            series.append(model.MetricSeries(key, tuple(p[0] for p in points), tuple(p[1] for p in points)))
        anomalies = tuple(
            model.Anomaly(a.kind.value, a.step, a.key, a.value, a.detail, a.fatal)
            for a in self.metrics.anomalies(failed)
        )
        return model.Metrics(len(steps), tuple(keys[:MAX_METRIC_KEYS]), tuple(series), anomalies)


_NO_KEYWORDS: frozenset[int] = frozenset()
# stages that do not show a job went on after an error line: its teardown, or a restart (a new attempt)
WENT_ON_IGNORED = frozenset({"shutdown", "launch"})


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a scan feeds, and what exists before it (the
    catalog, compiled patterns, modules) frozen out of its view; as it was after. A scan's records,
    marks and findings form no reference cycles (a scan of any size leaves about a thousand
    unreachable objects, the scanner's own), so nothing waits for a collection meanwhile, and
    collections that walked the scan's growing state took 15-25% of the scanner's time on dense logs."""
    enabled = gc.isenabled()
    frozen = gc.get_freeze_count()  # (objects a caller froze stay frozen)
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        if not frozen:
            gc.unfreeze()


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
            for other in _stream_lines_before(self._rec, self._before, self._default, self._normalizer):
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


def _cite_job_values(root: model.RootCause, environment: dict) -> model.RootCause:
    """Prepend a fix step that quotes the job's own settings for this category (inference.yaml)."""
    leaves = inference_rules().config_leaves(root.category)
    cited = []
    for key, value in environment.items():
        if key.startswith("config.") and key.rsplit(".", 1)[-1] in leaves:
            cited.append(
                f"{_code(key.rsplit('.', 1)[-1] + '=' + str(value))} ({_code(key[len('config.') :])})"
            )
    if not cited:
        return root
    quoted = "This job sets " + ", ".join(cited[:8]) + "."
    return dataclasses.replace(root, remediation=dataclasses.replace(root.remediation, job_values=quoted))


def _code(text: str) -> str:
    """`text` as a Markdown code span that its own backticks cannot close (the value is the log's)."""
    text = " ".join(text.split())
    ticks = "`" * (max((len(run) for run in regex.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _stream_lines_before(
    rec: Record, before: bytes, default: Origin | None, normalizer: Normalizer
) -> Iterator[Record]:
    """The lines of `rec`'s stream in `before` (whole lines just before it, each ending in a newline),
    decoded and normalised, nearest first (blank ones too)."""
    raws = before.split(b"\n")
    raws.pop()  # after the last newline
    for i, raw in enumerate(reversed(raws), 1):
        line = Line(rec.line.source, rec.line.number - i, decode_line(raw[:MAX_LINE_BYTES]))
        other = normalizer.normalize(line, 0, default)
        if other.stream == rec.stream:
            yield other


def _starts_record(rec: Record) -> bool:
    """Does `rec` begin a log record of its own (a level or a time in its prefix)?"""
    return rec.origin.level is not None or rec.origin.time is not None


def _lookback(block: bytes, start: int, tail: bytes, limit: int) -> bytes:
    """The whole lines (each with its newline) just before offset `start` of `block` (a line start):
    at most `limit` of them and about LOOKBACK_BYTES, continuing into `tail` (the end of the previous
    block, ending in a newline) when the block has fewer. One slice per part: a hit costs a few `rfind`
    calls, not a list of lines."""
    pos = start
    floor = start - LOOKBACK_BYTES
    while pos > 0 and limit > 0:
        prev = block.rfind(b"\n", 0, pos - 1) + 1
        if prev < floor:
            return block[pos:start]
        pos = prev
        limit -= 1
    head = block[pos:start]
    if pos > 0 or limit <= 0 or not tail:
        return head
    tpos = len(tail)
    floor = len(tail) - (LOOKBACK_BYTES - len(head))
    while tpos > 0 and limit > 0:
        prev = tail.rfind(b"\n", 0, tpos - 1) + 1
        if prev < floor or (prev == 0 and len(tail) >= LOOKBACK_BYTES):
            break  # a line longer than what is left of the budget, or cut by the tail's own bound
        tpos = prev
        limit -= 1
    return tail[tpos:] + head


def json_depth(text: str) -> int:
    """How deep the arrays and objects of JSON `text` nest (brackets inside strings not counted),
    without parsing it."""
    depth = deepest = 0
    for m in JSON_TOKEN_RE.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def frame_texts(tb) -> list[str]:
    """What `frames` regexes of catalog entries see: each frame as `file:line in function: code`, the
    Ray task of the traceback, and what its header line said before `Traceback (most recent call
    last):` (`header: Scheduler hit an exception:`, SGLang's), if anything."""
    cap = MAX_FRAME_FIELD  # a fuzzed or cut line can make a "function" a megabyte long
    out = [
        f"{f.file[:cap]}:{f.line} in {(f.function or '')[:cap]}: {(f.code or '')[:cap]}" for f in tb.frames
    ]
    if tb.task:
        out.append(f"ray::{tb.task}")
    head = tb.start.message.strip()
    if head.endswith(TB_START) and len(head) > len(TB_START):
        out.append(f"header: {head[: -len(TB_START)].strip()[:cap]}")
    return out


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


def scan_paths(paths: list[str], catalog: Catalog, config: ScanConfig | None = None) -> Report:
    scanner = Scanner(catalog, config)
    scanner.feed_inputs(expand_inputs(paths or ["-"]))
    return scanner.report()
