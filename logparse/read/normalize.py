"""Strip the prefixes that launchers put before a log message, and keep what they say.

The prefixes are the line formats of patterns/formats.yaml (`prefixes`: Ray `(WorkerDict pid=1,
ip=10.0.0.2)`, `(raylet)`, torch.distributed `[rank3]:`, torchrun --tee `[default0]:`, c10 glog,
torch's logging formatter, vLLM, Python logging, Ray's own stamp, SGLang, NCCL `host:pid:tid [0]`;
`message_fields`: Ray's `[repeated 7x across cluster]`, verl's `[Rank 0]`), each declared as data:
its regex, the origin fields its named groups give and their kinds, its sample lines (the real
wordings are in ../shared/reference/verl-log-formats.md). One generic reader applies any of them: at
each position of a line it tries, in file order, the formats whose regex can start with the next two
characters (found once per pair of characters by a partial match, patterns.formats.could_start), and
the first that matches gives its fields (`_FormatReader`). There is no code per format: a new
launcher prefix is a YAML edit (patterns.formats.line_formats: the built-in formats, then a team's
own).
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass, field
from typing import NamedTuple

import regex

from logparse.read.interleave import NAME_ENDINGS, NOISE, unweave
from logparse.read.sources import BAR_REDRAW_PATTERN, Line
from patterns.formats import LineFormat, could_start, line_formats
from patterns.numbers import log_int
from patterns.schema import LazyRe

MAX_PREFIXES = 8  # prefixes stripped from one line at most (nesting is 2-4 in real logs)
CACHE_SIZE = 4096  # entries of each cache of the reader (cleared when full)
# how a field's text is read (patterns.formats.ORIGIN_FIELDS' kinds)
INT, STR, COUNT, FULL_DATE, YEARLESS = range(5)
KIND_CODES = {"int": INT, "str": STR, "count": COUNT, "date-time": FULL_DATE, "month-day-time": YEARLESS}


# A progress bar's redraw: what a carriage return is for (logparse.read.sources.BAR_REDRAW_PATTERN)
BAR_REDRAW = regex.compile(BAR_REDRAW_PATTERN)


def carriage_message(message: str) -> str:
    """The message of a line with carriage returns. A `\r` rewrites the terminal, not the log: the text
    before it was written all the same (`torch.OutOfMemoryError: ...\r 50%|##  | 3/6` is an OOM whose
    line a bar redrew). So the message is the last non-blank segment that is not a progress bar's
    redraw; a line of redraws only is its last one (what the terminal showed, and what the stage
    tracker reads a bar from). Either way a piece of the line, as every message is."""
    segments = [s for s in message.split("\r") if s.strip()]
    if len(segments) < 2:
        return segments[0] if segments else ""
    for segment in reversed(segments):
        if not BAR_REDRAW.search(segment):
            return segment
    return segments[-1]


def _maybe_woven(message: str) -> bool:
    """May `message` be several processes' exception lines run together (logparse.read.interleave)? Each
    holds one process's whole `: ` write, after a type's ending (whose first characters come again
    later) or after another process's caret line."""
    i = message.find(": ")
    return i > 0 and (
        (message.endswith(NAME_ENDINGS, 0, i) and message.find(message[:4], 1) > 0) or message[0] in NOISE
    )


def origin_of(
    rank: int | None,
    local_rank: int | None,
    pid: int | None,
    node: str | None,
    actor: str | None,
    time: float | None,
    level: str | None,
    repeat: int,
    default: Origin | None,
) -> Origin:
    """The origin a line's prefixes give, with what `default` (its file's place in a log folder) says
    where they say nothing."""
    if default is not None:
        rank = default.rank if rank is None else rank
        local_rank = default.local_rank if local_rank is None else local_rank
        pid = default.pid if pid is None else pid
        node = node or default.node
        actor = actor or default.actor
    return Origin(rank, local_rank, pid, node, actor, time, level, repeat)


class Origin(NamedTuple):
    """Where a line came from, as far as its prefixes tell. (A named tuple: one is built for every
    line read, and a frozen dataclass took three times as long to build.)"""

    rank: int | None = None
    local_rank: int | None = None
    pid: int | None = None
    node: str | None = None
    actor: str | None = None
    time: float | None = None  # seconds since the epoch, naive (no time zone)
    level: str | None = None
    repeat: int = 1  # 1 + the copies Ray folded into `[repeated Nx across cluster]`

    def stream_key(self, source: str) -> tuple:
        """One process's output: traceback lines of one process share this key."""
        if self.pid is not None and self.actor is not None:
            return (source, "pid", self.node, self.pid)
        if self.local_rank is not None:
            return (source, "local", self.node, self.local_rank)
        if self.rank is not None:
            return (source, "rank", self.rank)
        if self.pid is not None:
            return (source, "pid", self.node, self.pid)
        return (source,)

    def where(self) -> str:
        parts = []
        if self.rank is not None:
            parts.append(f"rank {self.rank}")
        if self.local_rank is not None:
            parts.append(f"local rank {self.local_rank}")
        if self.actor:
            parts.append(self.actor)
        if self.pid is not None:
            parts.append(f"pid {self.pid}")
        if self.node:
            parts.append(f"node {self.node}")
        return ", ".join(parts)


@dataclass(slots=True)
class Record:
    """A line with its prefixes understood: `message` is what patterns run on."""

    line: Line
    origin: Origin
    message: str
    seq: int = 0  # position in the whole scan (all inputs), for ordering
    keywords: frozenset | None = None  # prefilter keyword ids found in the raw line (None: not prefiltered)
    step_line: object | None = (
        None  # its step line as a reader process parsed it (logparse.read.blocks.StepLine)
    )
    # its message masked for grouping (logparse.observe.hits.mask), when a reader process did it
    # (logparse.read.pre_records)
    masked: str | None = field(default=None, repr=False, compare=False)
    _stream: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def stream(self) -> tuple:
        """One process's output (Origin.stream_key); computed once (origin and line do not change)."""
        key = self._stream
        if key is None:
            key = self._stream = self.origin.stream_key(self.line.source)
        return key


class _Fields:
    """What a line's prefixes said so far (Normalizer.normalize's state while it reads them)."""

    __slots__ = ("actor", "level", "local_rank", "node", "pid", "rank", "repeat", "time")

    def __init__(self) -> None:
        self.rank = self.local_rank = self.pid = None
        self.node = self.actor = self.level = None
        self.time = None
        self.repeat = 1


class _FormatReader:
    """One line format compiled for the reading loop: its regex (compiled on first use, by the engine
    patterns.formats.engine_of chose), what each of its fields is read from and as, and the piece of
    text it is remembered by (`cache_until`)."""

    __slots__ = (
        "_probe",
        "_probed",
        "first",
        "follows",
        "format",
        "kept",
        "keywords",
        "memo",
        "names",
        "pattern",
        "plain",
        "reads",
        "slot_kinds",
        "until",
    )

    def __init__(self, fmt: LineFormat) -> None:
        self.format = fmt
        self.pattern = LazyRe(fmt.regex, engine=fmt.engine)
        # (slot of _Fields, kind code, groups, keep an earlier prefix's value)
        self.reads = tuple(
            (r.field, KIND_CODES[r.kind], r.groups if len(r.groups) > 1 else r.groups[0], r.keep_earlier)
            for r in fmt.fields
        )
        self.until = fmt.cache_until
        # the text up to one character past `until` -> (where the match ends in it, its values) or False
        self.memo: dict[str, tuple | bool] | None = {} if fmt.cache_until else None
        # no time and nothing kept from an earlier prefix: the memo keeps its (slot, value) pairs
        self.plain = all(kind < FULL_DATE and not keep for _s, kind, _n, keep in self.reads)
        # (a plain format's groups, read with one call: a tuple even of one, with the whole match after it)
        self.names = tuple(r.groups[0] for r in fmt.fields) + ((0,) if len(fmt.fields) == 1 else ())
        self.slot_kinds = tuple((r[0], r[1]) for r in self.reads)
        # its fields, when each keeps an earlier prefix's value (then, all known, it is not tried)
        self.kept = tuple(r[0] for r in self.reads) if all(r[3] for r in self.reads) else ()
        self.first = frozenset(fmt.starts)
        self.follows = dict(fmt.follows)
        self.keywords = fmt.keywords
        self._probe: regex.Pattern | None = None
        self._probed: dict[str, bool] = {}  # text the regex was tried on as a start -> can it be one

    def could_start(self, text: str) -> bool:
        """Can a match start with `text` (one or two characters)?"""
        if text < "\x80" and (len(text) == 1 or text[1] < "\x80"):  # (as patterns.formats worked out)
            return text in self.first if len(text) == 1 else text[1] in self.follows.get(text[0], "")
        found = self._probed.get(text)
        if found is None:
            if self._probe is None:
                self._probe = regex.compile(self.format.regex)
            found = could_start(self._probe, text)
            if len(self._probed) >= CACHE_SIZE:
                self._probed.clear()
            self._probed[text] = found
        return found

    def assignments(self, m) -> tuple[tuple[str, object], ...]:
        """(slot, value) of each field the match gives, of a format whose fields need no clock and keep
        nothing (`plain`)."""
        return tuple(
            [
                (slot, raw if kind == STR else log_int(raw) + (kind == COUNT))
                for (slot, kind), raw in zip(self.slot_kinds, m.group(*self.names), strict=False)
                if raw is not None
            ]
        )

    def values(self, m) -> tuple:
        """The values of the match's fields (None: its group took no part), for the memo; a time's parts
        as text, as the normaliser reads those with its clock."""
        out = []
        for _slot, kind, names, _keep in self.reads:
            if kind >= FULL_DATE:
                parts = m.group(*names)
                out.append(None if None in parts else parts)
                continue
            raw = m.group(names)
            out.append(raw if raw is None or kind == STR else log_int(raw) + (kind == COUNT))
        return tuple(out)


class _Formats:
    """The reading loop's view of a tuple of line formats: prefixes by the characters they can start
    with, the line-end and message-start fields. One per tuple (patterns.formats.line_formats), shared
    by every Normalizer: what it caches depends on the text only."""

    def __init__(self, formats: tuple[LineFormat, ...]) -> None:
        self.formats = formats
        readers = [_FormatReader(f) for f in formats]
        self.prefixes = tuple(r for r in readers if r.format.at == "prefix")
        self.line_end = tuple(r for r in readers if r.format.at == "line-end")
        self.message_start = tuple(r for r in readers if r.format.at == "message-start")
        self.message_first = frozenset(c for r in self.message_start for c in r.first)
        # (first keyword, the others, line-end field): a line holding one is searched for the field
        self.end_words = tuple((r.keywords[0], r.keywords[1:], r) for r in self.line_end)
        # a line's next character -> the prefixes that can start with it, where they are one or none;
        # where several can, its next two characters choose among them (`pairs`, filled as met)
        first = {chr(c): tuple(r for r in self.prefixes if chr(c) in r.first) for c in range(128)}
        self._first = first
        self.single = {c: readers for c, readers in first.items() if len(readers) < 2}
        self.pairs: dict[str, tuple[_FormatReader, ...]] = {}

    def candidates(self, key: str) -> tuple[_FormatReader, ...]:
        """The prefixes whose regex can start with `key` (a position's next one or two characters), in
        file order."""
        base = self._first.get(key[0])
        if base is None or len(key) > 1:
            base = tuple(r for r in (self.prefixes if base is None else base) if r.could_start(key))
        if len(self.pairs) >= CACHE_SIZE:
            self.pairs.clear()
        self.pairs[key] = base
        return base


_engine: _Formats | None = None


def _formats() -> _Formats:
    """The reading loop of the formats in use (patterns.formats.line_formats)."""
    global _engine
    formats = line_formats()
    if _engine is None or _engine.formats is not formats:
        _engine = _Formats(formats)
    return _engine


class Normalizer:
    """Stateful only for time: year-less timestamps take the year of the last full date seen."""

    def __init__(self, default_year: int = 2000):
        self.year = default_year
        # timestamps read so far: a line whose prefixes read none neither used nor changed `year`, so
        # another Normalizer gives it the same origin (logparse.read.progress_lines relies on that)
        self.clock_reads = 0
        # year-less timestamps read so far (each took `year`: read_apart refuses a line that reads one),
        # and full dates (each set `year`)
        self.year_reads = 0
        self.dated_reads = 0
        # exception lines read back from several processes' interleaved writes (logparse.read.interleave):
        # how many, and where the first one is
        self.unwoven = 0
        self.first_unwoven: Line | None = None
        # caches (a log repeats a few dates on millions of lines)
        self._days: dict[tuple[int, int, int], float | None] = {}  # (y, m, d) -> epoch of its midnight
        self._dates: dict[str, tuple[int, int, int]] = {}
        self._formats = _formats()

    def _stamp(self, year: int, mon: int, day: int, hms: str) -> float | None:
        self.clock_reads += 1
        key = (year, mon, day)
        base = self._days.get(key, False)
        if base is False:
            base = (
                float(calendar.timegm((year, mon, day, 0, 0, 0, 0, 0, 0)))
                if 1 <= mon <= 12 and 1 <= day <= 31
                else None
            )
            if len(self._days) >= CACHE_SIZE:
                self._days.clear()
            self._days[key] = base
        if base is None:
            return None
        h, m, s = int(hms[0:2]), int(hms[3:5]), int(hms[6:8])  # hms is always \d\d:\d\d:\d\d here
        if h < 24 and m < 60 and s < 62:
            return base + (h * 3600 + m * 60 + s)
        return None

    def _undated(self, mon: int, day: int, hms: str) -> float | None:
        """A timestamp without a year: it takes the year of the last full date seen."""
        self.year_reads += 1
        return self._stamp(self.year, mon, day, hms)

    def _full(self, date: str, hms: str) -> float | None:
        self.clock_reads += 1
        self.dated_reads += 1
        ymd = self._dates.get(date)
        if ymd is None:
            ymd = (int(date[0:4]), int(date[5:7]), int(date[8:10]))  # date is always \d{4}-\d\d-\d\d
            if len(self._dates) >= CACHE_SIZE:
                self._dates.clear()
            self._dates[date] = ymd
        self.year = ymd[0]
        return self._stamp(ymd[0], ymd[1], ymd[2], hms)

    def normalize(self, line: Line, seq: int = 0, default: Origin | None = None) -> Record:
        """Strip the prefixes of `line`; `default` (from the file's place in a log folder) fills what
        the line's own prefixes do not say."""
        f, text, pos = self._read(line.text)
        message = text[pos:] if pos else text
        if "\r" in message:
            message = carriage_message(message)
        if _maybe_woven(message):
            fixed = unweave(message)
            if fixed is not None:
                message = fixed
                self.unwoven += 1
                if self.first_unwoven is None:
                    self.first_unwoven = line
        first = message[:1]
        if first in self._formats.message_first or first > "\x7f":
            self._message_fields(message, f)
        origin = origin_of(f.rank, f.local_rank, f.pid, f.node, f.actor, f.time, f.level, f.repeat, default)
        return Record(line, origin, message, seq)

    def read_apart(self, text: str) -> tuple[_Fields, int, int, int] | None:
        """What `normalize` reads in a line of this text without the state of the normaliser that will
        read it (logparse.read.pre_records: where its block is made): (the prefixes' fields, with the
        rank its message names; where its message starts and ends in `text`; the year a full date in it
        sets, 0 if none). None when the line needs that state or changes it otherwise: a year-less
        timestamp (it takes the year of the last full date before it), a message that is not a plain
        piece of the text (carriage returns, writes of several processes run together)."""
        year_reads, dated = self.year_reads, self.dated_reads
        f, cut, pos = self._read(text)
        if self.year_reads != year_reads:
            return None
        end = len(cut)
        message = cut[pos:] if pos else cut
        if "\r" in message or (_maybe_woven(message) and unweave(message) is not None):
            return None
        first = message[:1]
        if first in self._formats.message_first or first > "\x7f":
            self._message_fields(message, f)
            if self.year_reads != year_reads:
                return None
        return f, pos, end, self.year if self.dated_reads != dated else 0

    def _message_fields(self, message: str, f: _Fields) -> None:
        """What the start of the bare message says of its origin (verl's `[Rank 0]`)."""
        first = message[:1]
        for reader in self._formats.message_start:
            if reader.kept and all(getattr(f, slot) is not None for slot in reader.kept):
                continue  # (it could only give what the prefixes gave)
            if first in reader.first or (first > "\x7f" and reader.could_start(first)):
                self._prefix(reader, message, 0, f)

    def _read(self, text: str) -> tuple[_Fields, str, int]:
        """The prefixes of a line's text: their fields, the text without what a line-end field took
        (Ray's repeat note), and where the prefixes end in it."""
        f = _Fields()
        formats = self._formats
        for word, others, reader in formats.end_words:
            if word in text or (others and any(w in text for w in others)):
                text = self._cut_end(reader, text, f)
        pos = 0
        n = len(text)
        single, pairs = formats.single, formats.pairs
        for _ in range(MAX_PREFIXES):
            if pos >= n:
                break
            readers = single.get(text[pos])
            if readers is None:
                key = text[pos : pos + 2]
                readers = pairs.get(key)
                if readers is None:
                    readers = formats.candidates(key)
            end = None
            for reader in readers:
                if reader.memo is not None:
                    end = self._cached(reader, text, pos, f)
                elif (m := reader.pattern.match(text, pos)) is not None:
                    end = self._take(reader, m, f)
                if end is not None:
                    break
            if end is None or end == pos:
                break
            pos = end
        return f, text, pos

    def _cut_end(self, reader: _FormatReader, text: str, f: _Fields) -> str:
        """The text without what a line-end field (Ray's repeat note) takes of it, its fields in `f`."""
        m = reader.pattern.search(text)
        if m is None:
            return text
        self._set(reader, reader.values(m), f)
        return text[: m.start()].rstrip()

    def _prefix(self, reader: _FormatReader, text: str, pos: int, f: _Fields) -> int | None:
        """Read `reader`'s prefix at `pos` into `f`; where it ends (None: not there)."""
        m = reader.pattern.match(text, pos)
        return None if m is None else self._take(reader, m, f)

    def _take(self, reader: _FormatReader, m, f: _Fields) -> int:
        """Give `f` the fields of `reader`'s match `m`; where the match ends."""
        for slot, kind, names, keep in reader.reads:
            if keep and getattr(f, slot) is not None:
                continue
            if kind >= FULL_DATE:
                parts = m.group(*names)
                if None in parts:
                    continue
                value = (
                    self._full(*parts)
                    if kind == FULL_DATE
                    else self._undated(int(parts[0]), int(parts[1]), parts[2])
                )
            else:
                value = m.group(names)
                if value is None:
                    continue
                if kind != STR:
                    value = log_int(value) + (kind == COUNT)
            setattr(f, slot, value)
        return m.end()

    def _cached(self, reader: _FormatReader, text: str, pos: int, f: _Fields) -> int | None:
        """_prefix of a format whose match ends at most one character past the first `until` after
        `pos`: the text up to there is read once, and remembered."""
        close = text.find(reader.until, pos)
        if close < 0:
            return None
        key = text[pos : close + 2]
        memo = reader.memo
        found = memo.get(key)
        if found is None:
            m = reader.pattern.match(key)
            if m is None:
                found = False
            else:  # (plain: the (slot, value) of each field it gives)
                found = (m.end(), reader.assignments(m) if reader.plain else reader.values(m))
            if len(memo) >= CACHE_SIZE:
                memo.clear()
            memo[key] = found
        if found is False:
            return None
        if reader.plain:
            for slot, value in found[1]:
                setattr(f, slot, value)
        else:
            self._set(reader, found[1], f)
        return pos + found[0]

    def _set(self, reader: _FormatReader, values: tuple, f: _Fields) -> None:
        """Give `f` a format's field values (_FormatReader.values): a time's read with this normaliser's
        clock; a field that keeps an earlier prefix's value is set only if none gave one."""
        for (slot, kind, _names, keep), value in zip(reader.reads, values, strict=True):
            if value is None or (keep and getattr(f, slot) is not None):
                continue
            if kind == FULL_DATE:
                value = self._full(value[0], value[1])
            elif kind == YEARLESS:
                value = self._undated(int(value[0]), int(value[1]), value[2])
            setattr(f, slot, value)
