"""Progress lines (verl's step lines, tqdm's `Training Progress` bars, lines only a stage marker marks,
as a Hugging Face Trainer's loss dict) read fast from their bytes: the fast path of `read/`.

A run that logs every step prints a step line (about 3 KB of metrics) and a bar per step, often from
many processes: a quarter of its lines. Through the per-record pipeline (decode, normalise, the four
trackers, the matcher) each cost 30-60 us, though all it changes is the stage tracker's marks and
spans, one metrics row, the last step, and the environment's note of its Ray actor and node. So
where the blocks are made (the reader process, or the scanner itself) `ProgressLineParser` parses the
candidate lines that can only be that into `ProgressColumns` (arrays: no object per line crosses
the process boundary), and the scanner's reader (logparse.read.records) hands them to the analysis as
ProgressRun facts (logparse.read.progress_syntax), the same facts ProgressSyntax.read makes of their
records, instead of making a record of each. Nothing outside `read/` knows these columns.

A line qualifies when what the pipeline would do with it is fully told by its columns:
* its prefilter keywords are the stage tracker's only (`step:`, the bar, stage markers): no catalog
  entry, fallback, environment or traceback keyword;
* its prefixes read no clock (the normaliser's year state is neither used nor changed), and carry no
  level, rank or Ray repeat count; its message is the text after them (no `\\r` segments before a
  step line), with no common environment keyword (`ip=`, `version`, ...);
* a stage marker it matches starts no attempt and has no named groups; a line with `step:` is a step
  line (its message starts with it).
The analysis adds what only it knows (logparse.pipeline.Analysis.take_progress): no traceback,
message or config dump of the line's stream is open (the reader tells the line's stream while one is
open), the step-line format is known to the environment tracker, and the line's actor is not new to
it. Anything else takes the usual way, so reports are the same (tests/logparse/read/
test_progress_lines.py compares them on every sample, fixture and generated log; test_progress_road.py
the facts, line by line).

Bounds: distinct (actor, node) pairs at most MAX_PROCESSES, metric shapes at most MAX_SHAPES, cached
prefixes at most MAX_PREFIXES, remembered keyword sets at most MAX_KINDS, per input; a line past a
bound takes the usual way (a keyword set past its bound is worked out again).
"""

from __future__ import annotations

import math
import re
import struct
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

from logparse.read.normalize import Normalizer, Origin, Record, carriage_message
from logparse.read.progress_syntax import (
    COUNTER_SET,
    RATE_RE,
    TQDM_KEYWORD,
    MarkerHit,
    ProgressLine,
    ProgressSyntax,
    bar_seconds,
    step_seconds,
)
from logparse.read.sources import MAX_LINE_BYTES, Line, decode_line, strip_ansi
from logparse.read.steps import STEP_HEAD, STEP_KEYWORD, StepParser
from patterns.numbers import INT64_MAX, log_int
from patterns.stages import TIMEOUT_FROM_CHARS

# a step line whose metrics and timing (SECONDS) the scanner parses (its message is the line's bytes from
# message_at)
DEFERRED = -2
MAX_PROCESSES = 65_536
MAX_SHAPES = 1024
MAX_PREFIXES = 4096
MAX_MISSES = 16  # a stage marker's lines in a row that take the usual way before no more are tried
MAX_KINDS = 65_536  # prefilter keyword sets whose kind of line is remembered (Routes.progress_words' bound)
PREFIX_FIRST = frozenset(b"(\x1b")  # what a line with a Ray prefix starts with (RAY_BAR, else BARE_BAR)
STEP_BYTES = STEP_KEYWORD.encode()
TQDM_BYTES = TQDM_KEYWORD.encode()
# a step line's metrics are read from its bytes when its prefixes end before `step:` within this many
# bytes (a Ray prefix is ~50); the rest of a long line is then decoded without the prefix regexes
PREFIX_BYTES = 512
# The Ray prefix of nearly every line of a Ray job, `\x1b[36m(WorkerDict pid=123, ip=10.0.0.1)\x1b[0m `,
# read straight from the bytes: what the normaliser makes of it is known (logparse.read.normalize: one
# RAY_ACTOR prefix, the actor and ip from it, nothing else) when what follows it stops the prefix loop
# (`step:`, or the `\r` of a progress bar). Anything else is normalised.
_RAY_PREFIX = rb"(?:\x1b\[36m)?\(([A-Za-z_][\w.]*) pid=%s(?:, ip=([0-9A-Za-z.:_-]+))?\)(?:\x1b\[0m)? ?"
RAY_PREFIX = re.compile(_RAY_PREFIX % rb"[0-9]+")
# the same with the pid's digits as group 2, the ip as group 3 (ray_prefix_apart)
RAY_PID_PREFIX = re.compile(_RAY_PREFIX % rb"([0-9]+)")
# A whole tqdm `Training Progress` line behind that prefix, of the characters tqdm prints (its bar's
# blocks, digits, the times and the rate): the normaliser's message is group 3 (the prefix and `\r`
# gone, decode_line's final CR too), TQDM_RE finds in it groups 4-6, and no environment keyword can
# be in it. Any other bar is normalised and parsed the usual way.
BAR_HEAD = "Training Progress:"  # what RAY_BAR's message (group 3) starts with
BAR_TEXT = (
    rb"(Training Progress:[ \t]*[0-9]+%\|(?:\xe2\x96[\x88-\x8f]|[ #])*"
    rb"\|[ \t]*([0-9]+)/([0-9]+)[ \t]*\[([0-9:<>,.? ]*(?:s/it|it/s)?)\])\r?"
)
RAY_BAR = re.compile(RAY_PREFIX.pattern + rb"\r?" + BAR_TEXT)
# The same bar with no prefix at all, as the driver's own tqdm writes it (the trainer in the driver
# process, a copied log): `Training Progress: ...`, or `\rTraining Progress: ...` (one redraw: the
# normaliser's message is the segment after the `\r`). Its origin is the empty one: the normaliser
# reads no prefix in a line that starts with `\r` or `Training Progress:` (the first character's
# reader finds none: tested against the general way in tests/logparse/read/test_progress_lines.py).
BARE_BAR = re.compile(rb"\r?" + BAR_TEXT)
# The rate of a BAR_TEXT bracket (bar_seconds) is past its last comma, when the rate's regex is the one
# patterns/progress.yaml ships: a match of it is digits, `.`, white space and `s/it` or `it/s`, so it
# holds no comma and ends with the only unit in a bracket (whose other characters are [0-9:<>,.? ]),
# at its end; and it has no anchor or lookbehind, so the bracket's tail holds the same match. Searching
# the tail alone skips the ~25 start positions of the times before it (3 us a bar). Another regex is
# searched for in the whole bracket.
RATE_PAST_COMMA = (RATE_RE.pattern, RATE_RE.flags) == (
    r"(?P<rate>\d+(?:\.\d+)?)\s*(?P<unit>s/it|it/s)",
    re.UNICODE,
)


# the int fields of a progress line in ProgressColumns.ints, in this order
INDEX, STEP, MARKER, BAR_N, BAR_TOTAL, PROCESS, SHAPE, MESSAGE_AT, OFFSET = range(9)
INT_FIELDS = 9
SECONDS, BAR_RATE = range(2)  # its float fields in ProgressColumns.floats
FLOAT_FIELDS = 2


@dataclass
class ProgressColumns:
    """The progress lines of one block that a scanner may apply without a record, as flat arrays
    (88 bytes a line, plus 8 a metric value; packed at the end of the block: _Rows). Line k's int
    fields are ints[k * INT_FIELDS + F] for F in INDEX (its candidate index in the block), STEP (-1:
    none), MARKER (the stage marker it matches, in StageTracker.matcher.markers; -1: none), BAR_N
    (-1: no bar), BAR_TOTAL, PROCESS (its (actor, node), in ProgressTables), SHAPE (its metrics row's keys, in
    ProgressTables; -1: no row; DEFERRED), MESSAGE_AT (where its message starts in the line's bytes,
    -1: not a plain slice), OFFSET (where its values start in `values`); its float fields
    floats[k * FLOAT_FIELDS + F] for SECONDS (timing_s/step) and BAR_RATE (seconds per step), NaN
    for none."""

    ints: array = field(default_factory=lambda: array("q"))
    floats: array = field(default_factory=lambda: array("d"))
    values: array = field(default_factory=lambda: array("d"))  # the step lines' metric values in turn
    new_processes: list[tuple[str | None, str | None]] = field(default_factory=list)  # ids go on in order
    new_shapes: list[tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ints) // INT_FIELDS

    @property
    def index(self) -> array:
        """The candidate index of each line, in order."""
        return self.ints[INDEX::INT_FIELDS]


class _Rows:
    """ProgressColumns' fields while a block is parsed, as lists: extending an array converts each
    item with PyArg_Parse (~1 us a line for a bar's 11 numbers); the lists become arrays at once at
    the end of the block (_int64s, _doubles)."""

    __slots__ = ("floats", "ints", "values")

    def __init__(self) -> None:
        self.ints: list[int] = []
        self.floats: list[float] = []
        self.values: list[float] = []


def _int64s(items: list[int]) -> array:
    """array("q", items), packed at once (the same machine integers; struct refuses what the array
    would: a number out of range or no integer)."""
    return array("q", struct.pack(f"{len(items)}q", *items))


def _doubles(items: list[float]) -> array:
    """array("d", items), packed at once (native doubles, copied bit for bit: NaN stays as it is)."""
    return array("d", struct.pack(f"{len(items)}d", *items))


class ProgressTables:
    """A scanner's copy of what the parser of one input numbered: (actor, node) pairs and metric
    shapes ((kept keys, all names): the same tuple objects every time, as MetricsTracker expects)."""

    def __init__(self) -> None:
        self.processes: list[tuple[str | None, str | None]] = []
        self.shapes: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
        # process id -> 1: the analysis took a line of it (logparse.read.records offers a run up to a
        # line of a process it did not: how far a run goes without records is its to say, but a line of
        # a process it has not been told of is where it stops)
        self.taken = bytearray()

    def learn(self, columns: ProgressColumns) -> None:
        self.processes.extend(columns.new_processes)
        self.shapes.extend(columns.new_shapes)
        self.taken.extend(bytes(len(columns.new_processes)))


class ProgressLineParser:
    """Finds the progress lines among a block's candidates and parses them into ProgressColumns.
    Runs where the blocks are made: in a reader process it is that process's copy (its normaliser,
    caches and tables are its own).

    `words(ids)`: for a line with prefilter keyword ids `ids` that may be a progress line, its stage
    tracker keywords and whether it has an environment keyword (then only a step line qualifies);
    None when its keywords rule it out (the scanner knows which keywords feed what)."""

    def __init__(
        self,
        words: Callable[[frozenset[int]], tuple[tuple[str, ...], bool] | None],
        syntax: ProgressSyntax,
        step_parser: StepParser,
        ignores: Callable[[str], bool],
    ) -> None:
        self.words = words
        self.syntax = syntax
        self.step_parser = step_parser
        self.ignores = ignores
        # parse the step lines' metrics here; a reader process that runs behind the scanner leaves
        # them to it (DEFERRED), so that neither waits for the other
        self.rows_here = True
        self.normalizer = Normalizer()
        self._marker_index = {id(m): i for i, m in enumerate(syntax.matcher.markers)}
        self._candidates = syntax.matcher.candidates
        self._bar_markers: dict[tuple[str, ...], list | None] = {}  # words -> _bar_candidates
        self._bar_plans: dict[tuple[str, ...], tuple | None] = {}  # words -> _bar_plan
        # the last metrics shape numbered: (kept keys, names, its id), the tuples StepParser hands on
        self._last_shape: tuple = ((), (), -1)
        self._bar_free_names: tuple[str, ...] | None = None  # the last shape's names without the tqdm keyword
        self._kinds: dict[frozenset[int], tuple[tuple[str, ...], bool, bool] | None] = {}  # ids -> _kind
        self._misses: dict[frozenset[int], int] = {}  # a marker's line ids -> lines in a row left (_missed)
        self._processes: dict[tuple[str | None, str | None], int] = {}
        self._shapes: dict[tuple[tuple[str, ...], tuple[str, ...]], int] = {}
        self._prefixes: dict[bytes, Origin | None] = {}  # a step line's raw prefix -> its origin (None: no)
        self._ray_origins: dict[tuple[bytes, bytes | None], Origin] = {}  # RAY_PREFIX's (actor, ip) -> origin
        self._ray_processes: dict[tuple[bytes, bytes | None], int] = {}  # ... -> its process id
        self._new_processes: list[tuple[str | None, str | None]] = []  # numbered since the last block
        self._new_shapes: list[tuple[tuple[str, ...], tuple[str, ...]]] = []

    def parse(
        self, data: bytes, found: list[tuple[int, frozenset[int]]], ends: list[int] | None = None
    ) -> ProgressColumns | None:
        """The progress lines among the candidates `found` ((line start, keyword ids)) of `data`;
        `ends`: where each of those lines ends (Prefilter.lines_and_ends), when known."""
        cols = _Rows()
        kinds = self._kinds
        for i, (start, ids) in enumerate(found):
            kind = kinds.get(ids, False)
            if kind is False:
                kind = self._kind(ids)
            if kind is None:
                continue
            if ends is None:
                end = data.find(b"\n", start)
                if end < 0:
                    end = len(data)
            else:
                end = ends[i]
            if end - start > MAX_LINE_BYTES:
                continue  # a cut line: the scanner counts it
            self._add(cols, i, data, start, end, kind, ids)
        if not (cols.ints or self._new_processes or self._new_shapes):
            return None
        columns = ProgressColumns(_int64s(cols.ints), _doubles(cols.floats), _doubles(cols.values))
        if self._new_processes or self._new_shapes:
            # the entries numbered in this block go with it (a line that numbered one may still have
            # been left to the usual way: the numbering goes on regardless)
            columns.new_processes, columns.new_shapes = self._new_processes, self._new_shapes
            self._new_processes, self._new_shapes = [], []
        return columns

    def _add_plain_step(self, cols: _Rows, i: int, start: int, plain: tuple) -> None:
        """A step line whose message is the ASCII tail from `step:N - ` (what the general way finds
        for it: the environment tracker ignores it and the stage tracker reads it as a step line with
        no marker and no bar)."""
        origin, at, step, tail, head, parsed = plain
        if step > INT64_MAX:
            return
        seconds = row = None
        shape = DEFERRED
        if self.rows_here:
            message = tail.decode("ascii")
            if parsed is not None:
                row = parsed
                seconds = step_seconds(message, parsed[4])
            else:
                seconds = step_seconds(message)
                # (STEP_RE finds in the message what STEP_HEAD found in its bytes: _plain_step)
                row = self.step_parser.parse_tail(step, message[head:], message)
            keys, names = row[1], row[3]
            if keys is self._last_shape[0] and names is self._last_shape[1]:
                shape = self._last_shape[2]  # (the parser hands the same tuples on while the keys stay)
            else:
                shape = self._shape_id(keys, names)
                if shape is None:
                    return
                self._last_shape = (keys, names, shape)
        if type(origin) is tuple:
            process = self._ray_process(*origin)
        else:
            process = self._process_id(origin.actor, origin.node)
        if process is None:
            return
        cols.ints.extend((i, step, -1, -1, -1, process, shape, at - start, len(cols.values)))
        cols.floats.extend((math.nan if seconds is None else seconds, math.nan))
        if row is not None:
            cols.values.extend(row[2])

    def _add_bar(
        self,
        cols: _Rows,
        i: int,
        bar: tuple[bytes, ...],
        words: tuple[str, ...],
        ray: tuple[bytes, bytes | None] | None = None,
    ) -> None:
        """A plain bar behind a Ray prefix (`ray`: its actor and ip) or with no prefix: what
        StageTracker.parse would find in its message, from the groups of BAR_TEXT (the message, n,
        total, the bracket)."""
        text, n, total, bracket = bar
        plan = self._bar_plans.get(words, False)
        if plan is False:
            plan = self._bar_plan(words)
        message = text.decode("utf-8")
        if plan is None or len(message) > TIMEOUT_FROM_CHARS:
            marker = self._marker(message, words, self._bar_candidates(words))
        else:
            marker = _short_marker(message, plan)
        if marker is None or len(n) > 19 or len(total) > 19:
            return  # (the usual way reads it: a count of 20 digits or more is past int64 here)
        n, total = int(n), int(total)
        if n > INT64_MAX or total > INT64_MAX:
            return
        process = self._process_id(None, None) if ray is None else self._ray_processes.get(ray)
        if process is None:
            process = None if ray is None else self._ray_process(*ray)
            if process is None:
                return
        if RATE_PAST_COMMA:
            bracket = bracket[bracket.rfind(b",") + 1 :]
        seconds = bar_seconds(bracket.decode("ascii"))
        cols.ints.extend((i, -1, marker, n, total, process, -1, -1, len(cols.values)))
        cols.floats.extend((math.nan, math.nan if seconds is None else seconds))

    def _add(
        self, cols: _Rows, i: int, data: bytes, start: int, end: int, kind: tuple, ids: frozenset[int]
    ) -> None:
        """Candidate `i`, the line data[start:end] of that kind (_kind), in the columns if it qualifies."""
        words, env_keyword, step_keyword = kind
        if step_keyword:
            plain = self._plain_step(data, start, end)
            if plain is not None:
                self._add_plain_step(cols, i, start, plain)
                return
        elif TQDM_KEYWORD not in words:  # a line a stage marker alone marks (no bar can match)
            if not self._add_line(cols, i, data, start, end, kind):
                self._missed(ids)
            elif self._misses:
                self._misses.pop(ids, None)
            return
        elif not env_keyword:
            if data[start] in PREFIX_FIRST:
                bar = RAY_BAR.fullmatch(data, start, end)
                if bar is not None:
                    self._add_bar(cols, i, bar.group(3, 4, 5, 6), words, bar.group(1, 2))
                    return
            else:
                bar = BARE_BAR.fullmatch(data, start, end)
                if bar is not None:
                    self._add_bar(cols, i, bar.groups(), words)
                    return
        self._add_line(cols, i, data, start, end, kind)

    def _missed(self, ids: frozenset[int]) -> None:
        """A line a stage marker alone marks (keyword ids `ids`) took the usual way after all: after
        MAX_MISSES such lines in a row, lines with those keywords are no longer tried (each try
        normalised the line, then its record did again: checkpoint saves behind a logging prefix with
        a clock). Either way is the same to a report: this only saves the try."""
        misses = self._misses.get(ids, 0) + 1
        if misses >= MAX_MISSES:
            self._kinds[ids] = None
            self._misses.pop(ids, None)  # (done with: no line of those keywords comes here again)
        elif len(self._misses) < MAX_KINDS:
            self._misses[ids] = misses

    def _add_line(self, cols: _Rows, i: int, data: bytes, start: int, end: int, kind: tuple) -> bool:
        """Any other candidate: its message as the normaliser makes it, parsed as the stage tracker
        parses it, when that is all a record of it would do. Whether it was added."""
        words, env_keyword, step_keyword = kind
        got = self._message(data, start, end, step_keyword)
        if got is None:
            return False
        origin, message, message_at = got
        if not self.ignores(message) or (env_keyword and not message.startswith(STEP_KEYWORD)):
            return False
        line = self.syntax.parse(message, words)
        if not _plain_line(line, message):
            return False
        step = line.step if line.step is not None else -1
        bar = line.bar or (-1, -1, None)
        if step > INT64_MAX or max(bar[0], bar[1]) > INT64_MAX:
            return False
        row = None
        shape = -1
        if line.step is not None:
            if self.rows_here or message_at < 0:
                row = self.step_parser.parse(message)
                shape = self._shape_id(row[1], row[3])
                if shape is None:
                    return False
            else:
                shape = DEFERRED
        process = self._process_id(origin.actor, origin.node)
        if process is None:
            return False
        marker = -1 if line.hit is None else self._marker_index[id(line.hit.marker)]
        cols.ints.extend((i, step, marker, bar[0], bar[1], process, shape, message_at, len(cols.values)))
        seconds = math.nan if line.seconds is None or shape == DEFERRED else line.seconds
        cols.floats.extend((seconds, math.nan if bar[2] is None else bar[2]))
        if row is not None:
            cols.values.extend(row[2])
        return True

    def _kind(self, ids: frozenset[int]) -> tuple[tuple[str, ...], bool, bool] | None:
        """(stage tracker keywords, an environment keyword, `step:`) of a line with the prefilter
        keyword ids `ids` that may be a progress line (`words`; an environment keyword: only a step
        line may have one), else None; remembered per set."""
        got = self.words(ids)
        kind = None
        # (a counter line's state, whether its shape has counted yet, is the record road's: never claimed)
        if got is not None and (not got[1] or STEP_KEYWORD in got[0]) and COUNTER_SET.isdisjoint(got[0]):
            kind = (*got, STEP_KEYWORD in got[0])
        if len(self._kinds) < MAX_KINDS:
            self._kinds[ids] = kind
        return kind

    def _bar_candidates(self, words: tuple[str, ...]) -> list | None:
        """MarkerMatcher.candidates of a RAY_BAR message with the keywords `words`, when they are all
        in what starts every such message (BAR_HEAD); else None (they are looked for in the message)."""
        markers = self._bar_markers.get(words, False)
        if markers is False:
            markers = self._candidates(BAR_HEAD, words) if all(w in BAR_HEAD for w in words) else None
            if len(self._bar_markers) < MAX_SHAPES:
                self._bar_markers[words] = markers
        return markers

    def _bar_plan(self, words: tuple[str, ...]) -> tuple | None:
        """_short_marker's plan for a bar with the keywords `words`, when its candidates are known
        (_bar_candidates): per candidate marker in turn, its patterns, with for each whether it has
        named groups, and its index (None: it starts an attempt); remembered per `words`."""
        candidates = self._bar_candidates(words)
        plan = None
        if candidates is not None:
            plan = tuple(
                (
                    tuple((pattern, bool(pattern.groupindex)) for pattern in marker.patterns),
                    None if marker.attempt_start else self._marker_index[id(marker)],
                )
                for marker in candidates
            )
        if len(self._bar_plans) < MAX_SHAPES:
            self._bar_plans[words] = plan
        return plan

    def _marker(self, message: str, words: tuple[str, ...], candidates: list | None = None) -> int | None:
        """The stage marker StageTracker.parse finds in `message` (MarkerMatcher.match; `candidates`:
        its candidates, when known): its index in the tracker's markers, -1 for none, None when the
        hit is not plain (_plain_hit)."""
        for marker in self._candidates(message, words) if candidates is None else candidates:
            groups = marker.search(message)
            if groups is not None:
                if marker.attempt_start or any(v is not None for v in groups.values()):
                    return None
                return self._marker_index[id(marker)]
        return -1

    def _ray_process(self, actor: bytes, ip: bytes | None) -> int | None:
        """The process id of the (actor, ip) of a RAY_PREFIX match."""
        key = (actor, ip)
        process = self._ray_processes.get(key)
        if process is None:
            origin = self._ray_origin(actor, ip)
            process = self._process_id(origin.actor, origin.node)
            if process is not None and len(self._ray_processes) < MAX_PREFIXES:
                self._ray_processes[key] = process
        return process

    def _process_id(self, actor: str | None, node: str | None) -> int | None:
        key = (actor, node)
        pid = self._processes.get(key)
        if pid is None:
            if len(self._processes) >= MAX_PROCESSES:
                return None
            pid = self._processes[key] = len(self._processes)
            self._new_processes.append(key)
        return pid

    def _shape_id(self, keys: tuple[str, ...], names: tuple[str, ...]) -> int | None:
        key = (keys, names)
        sid = self._shapes.get(key)
        if sid is None:
            if len(self._shapes) >= MAX_SHAPES:
                return None
            sid = self._shapes[key] = len(self._shapes)
            self._new_shapes.append(key)
        return sid

    def _message(self, data: bytes, start: int, end: int, step: bool) -> tuple[Origin, str, int] | None:
        """(origin, message, where the message starts in the line's bytes or -1) of the line, as the
        scanner's normaliser would make them, when its prefixes read no clock and carry no level, rank
        or repeat count; else None."""
        m = RAY_PREFIX.match(data, start, end)
        if m is not None:
            at = m.end()
            if step and data.startswith(STEP_BYTES, at):
                tail = self._plain_tail(data, at, end)
                if tail is not None:
                    return self._ray_origin(*m.group(1, 2)), tail.decode("ascii"), at - start
            elif (
                data.startswith(b"\r", at)
                and b"\x1b" not in data[at:end]
                and b"[repeated " not in data[at:end]
            ):
                # a bar: the message is what the normaliser makes of its `\r` segments (decode_line
                # drops a final CR)
                rest = data[at : end - 1] if data.endswith(b"\r", at, end) else data[at:end]
                message = carriage_message(rest.decode("utf-8", errors="replace"))
                if not message.startswith("["):  # (a `[Rank N]` there would be the line's rank)
                    return self._ray_origin(*m.group(1, 2)), message, -1
        elif step:
            at = data.find(STEP_BYTES, start, min(end, start + PREFIX_BYTES))
            if at >= 0:
                # a step line: the prefixes are normalised on their own and the metrics decoded without
                # the prefix regexes, if the rest is plain text
                tail = self._plain_tail(data, at, end)
                if tail is not None:
                    origin = self._cached_prefix_origin(data[start:at])
                    return None if origin is None else (origin, tail.decode("ascii"), at - start)
        text = decode_line(data[start:end])
        reads = self.normalizer.clock_reads
        rec = self.normalizer.normalize(Line("", 0, text))
        if self.normalizer.clock_reads != reads or not _plain(rec.origin):
            return None
        return rec.origin, rec.message, -1

    def _plain_step(
        self, data: bytes, start: int, end: int
    ) -> tuple[Origin | tuple[bytes, bytes | None], int, int, bytes, int, tuple | None] | None:
        """(origin, where `step:` starts, the step, the bytes from there to the end of the line, the
        length of its `step:N - `, StepParser.parse_bytes of them or None) of a step line whose
        message `_message` makes the bytes from `step:` (a Ray prefix, or prefixes normalised apart,
        before it; plain text after it) and that holds no bar; else None (then the way of any line
        tells). Behind a Ray prefix the origin is the prefix's (actor, ip), as RAY_PREFIX reads them
        (_ray_process numbers them). A line parse_bytes reads holds the tqdm keyword only in a key
        (its values hold no space): the shape's names tell (_bar_free)."""
        m = RAY_PREFIX.match(data, start, end)
        if m is not None:
            at = m.end()
            if not data.startswith(STEP_BYTES, at):
                return None
        else:
            at = data.find(STEP_BYTES, start, min(end, start + PREFIX_BYTES))
            if at < 0:
                return None
        tail = self._plain_tail(data, at, end)
        if tail is None:
            return None
        parsed = self.step_parser.parse_bytes(tail) if self.rows_here else None
        if parsed is not None and self._bar_free(parsed[3]):
            step, head_end = parsed[0], -1
        else:
            parsed = None
            head = STEP_HEAD.match(tail)
            if head is None or TQDM_BYTES in tail:
                return None
            step, head_end = log_int(head.group(1)), head.end()
        if m is not None:
            return m.group(1, 2), at, step, tail, head_end, parsed
        origin = self._cached_prefix_origin(data[start:at])
        return None if origin is None else (origin, at, step, tail, head_end, parsed)

    def _bar_free(self, names: tuple[str, ...]) -> bool:
        """Does no key of a metrics shape hold the tqdm keyword? (The same tuple while the shape stays.)"""
        if names is not self._bar_free_names:
            if any(TQDM_KEYWORD in name for name in names):
                return False
            self._bar_free_names = names
        return True

    def _cached_prefix_origin(self, prefix: bytes) -> Origin | None:
        origin = self._prefixes.get(prefix, False)
        if origin is False:
            origin = self._prefix_origin(prefix)
            if len(self._prefixes) >= MAX_PREFIXES:
                self._prefixes.clear()
            self._prefixes[prefix] = origin
        return origin

    @staticmethod
    def _plain_tail(data: bytes, at: int, end: int) -> bytes | None:
        """The bytes from `at` to the end of the line if decoding and ANSI stripping leave them as
        they are and the normaliser cuts nothing from them (no escape, CR, dedup suffix or non-ASCII
        byte), else None."""
        tail = data[at:end]
        if (
            tail.isascii()
            and b"\x1b" not in tail
            and b"\r" not in tail
            and (b"[" not in tail or b"[repeated " not in tail)  # (a byte is found faster than a word)
        ):
            return tail
        return None

    def _ray_origin(self, actor: bytes, ip: bytes | None) -> Origin:
        key = (actor, ip)
        origin = self._ray_origins.get(key)
        if origin is None:
            # (the pid is left out: only the actor and node matter here, and the scanner, when it needs
            # the line's stream, normalises the line)
            origin = Origin(actor=actor.decode("ascii"), node=None if ip is None else ip.decode("ascii"))
            if len(self._ray_origins) >= MAX_PREFIXES:
                self._ray_origins.clear()
            self._ray_origins[key] = origin
        return origin

    def _prefix_origin(self, prefix: bytes) -> Origin | None:
        """The origin of a line made of `prefix` and then a step line, if normalising `prefix`
        followed by `step:` leaves just `step:`: then the whole line normalises to the same origin
        and its message is the rest of the line (what the prefix regexes see past the prefix is
        `step:` either way). An OSC escape in the prefix could swallow the rest of the line: no."""
        reads = self.normalizer.clock_reads
        rec = step_prefix_record(self.normalizer, prefix)
        if rec is None or self.normalizer.clock_reads != reads or not _plain(rec.origin):
            return None
        return rec.origin


def step_prefix_record(
    normalizer: Normalizer, prefix: bytes, source: str = "", number: int = 0, default: Origin | None = None
) -> Record | None:
    """The record of `prefix` followed by `step:` (line `number` of `source`), if the prefixes are read
    whole (its message is just `step:`): then a step line with this prefix normalises to the same
    origin (what the prefix regexes see past the prefix is `step:` either way). None for a prefix
    with an OSC escape, which could swallow the rest of the line."""
    if b"\x1b]" in prefix:
        return None
    text = strip_ansi(prefix.decode("utf-8", errors="replace")) + STEP_KEYWORD
    rec = normalizer.normalize(Line(source, number, text), 0, default)
    return rec if rec.message == STEP_KEYWORD else None


def ray_bar_prefix(raw: bytes) -> int:
    """Where the Ray prefix of a line that is a whole RAY_BAR ends (before its `\\r`, if any): the
    normaliser reads that prefix and nothing more (the bar's message is group 3); -1 for another line."""
    m = RAY_BAR.fullmatch(raw)
    if m is None:
        return -1
    end = m.start(3)
    return end - 1 if raw.startswith(b"\r", end - 1) else end


def ray_prefix_apart(raw: bytes, end: int) -> tuple[int, str | None, bytes] | None:
    """(the pid, the ip, the prefix without either) of a prefix `raw[:end]` that is one whole
    RAY_PREFIX, as the normaliser reads them (int of the pid's digits, the ip's text; None: no ip);
    else None."""
    m = RAY_PID_PREFIX.fullmatch(raw, 0, end)
    if m is None:
        return None
    if m.start(3) < 0:
        return log_int(m.group(2)), None, raw[: m.start(2)] + raw[m.end(2) : end]
    rest = raw[m.end(2) : m.start(3)] + raw[m.end(3) : end]
    return log_int(m.group(2)), m.group(3).decode("ascii"), raw[: m.start(2)] + rest


def _short_marker(message: str, plan: tuple) -> int | None:
    """ProgressLineParser._marker of a message of at most TIMEOUT_FROM_CHARS characters, whose
    candidate markers are those of `plan` (_bar_plan): StageMarker.search searches such a message
    without a timeout, and a pattern with no named group has none to carry."""
    for patterns, index in plan:
        for pattern, named in patterns:
            m = pattern.search(message)
            if m is not None:
                if index is None or (named and any(v is not None for v in m.groupdict().values())):
                    return None
                return index
    return -1


def _plain_line(line: ProgressLine, message: str) -> bool:
    """May a progress line say this without a record: a plain marker hit (if any), a step line only
    where the message starts with one, and no `step:` that is no step line (the environment tracker
    reads that)?"""
    if line.hit is not None and not _plain_hit(line.hit):
        return False
    if line.step is not None:
        return message.startswith(STEP_KEYWORD)
    return STEP_KEYWORD not in message


def _plain_hit(hit: MarkerHit) -> bool:
    """A stage marker hit a progress line may carry: it starts no attempt and has no named groups."""
    return not hit.marker.attempt_start and all(v is None for v in hit.groups.values())


def _plain(origin: Origin) -> bool:
    """No clock, level, rank or Ray repeat count."""
    return origin.time is None and origin.level is None and origin.rank is None and origin.repeat == 1
