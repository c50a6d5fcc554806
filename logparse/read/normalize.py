"""Strip the prefixes that launchers put before a log message, and keep what they say.

The prefixes are wordings of patterns/formats.yaml (`prefixes`, each with its example lines; the real
wordings are in ../shared/reference/verl-log-formats.md): Ray `(WorkerDict pid=1, ip=10.0.0.2)`
(nested for vLLM workers), `(raylet)`, torch.distributed `[rank3]:`, torchrun --tee `[default0]:`,
c10 glog `[E314 14:33:45.172185860 ProcessGroupNCCL.cpp:607]`, torch's logging formatter
`W0731 10:50:07.575000 3247964 api.py:897]`, vLLM `INFO 03-14 14:33:45 [file.py:123]`, Python
logging `INFO:2025-08-22 23:08:37,898:`, Ray's own `2025-04-30 20:59:12,200\tINFO worker.py:1832 --`,
SGLang `[2025-11-20 01:13:05 TP0]`, NCCL `host:pid:tid [0]`; and Ray's `[repeated 7x across cluster]`.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field
from typing import NamedTuple

import regex

from logparse.read.interleave import NAME_ENDINGS, NOISE, unweave
from logparse.read.sources import BAR_REDRAW_PATTERN, Line
from patterns.formats import formats
from patterns.numbers import log_int
from patterns.schema import LazyRe

MAX_PREFIXES = 8  # prefixes stripped from one line at most (nesting is 2-4 in real logs)
CACHE_SIZE = 4096  # entries of each Normalizer cache (cleared when full)
# what the first characters must be for a prefix regex to be worth trying (see normalize)
_GLOG_LEVELS = frozenset("IWEF")
_TEE_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_LEVELS = ("DEBUG", "INFO", "WARN", "ERROR", "CRITICAL")

# Each regex is a wording of patterns/formats.yaml (`prefixes`, `message_fields`), compiled here once.
_F = formats()
RAY_ACTOR = regex.compile(_F.regex("ray-actor"))
# (LazyRe: compiled on the first line that may carry the prefix; many logs carry none of these)
RAY_DAEMON = LazyRe(_F.regex("ray-daemon"), engine="regex")
# (the prefixes tried on most lines, whose wordings hold no class on which the engines differ (\s, \w,
# \b: `re` follows str.isspace and str.isalnum, `regex` the Unicode properties) nor what only `regex`
# has, are compiled by `re`, which matches them in half the time: tests/logparse/read/test_normalize.py)
RANK = LazyRe(_F.regex("rank"))
TEE = re.compile(_F.regex("tee"))
GLOG = LazyRe(_F.regex("glog"), engine="regex")
TORCH_LOG = LazyRe(_F.regex("torch-log"), engine="regex")
VLLM = LazyRe(_F.regex("vllm"), engine="regex")
PY_LOGGING = LazyRe(_F.regex("python-logging"))
# ISO-ish timestamp at line start, optionally bracketed (SGLang, NCCL WARN, Hydra), optionally followed by
# bracketed fields, a level and Ray's ` file.py:N -- ` or a ` - name - LEVEL - ` logging layout.
STAMPED = regex.compile(_F.regex("stamped"))
NCCL_HOST = regex.compile(_F.regex("nccl-host"))
MESSAGE_RANK = re.compile(_F.regex("message-rank"))
REPEATED = regex.compile(_F.regex("repeated"))
REPEATED_KEYWORD = _F.item("repeated").field("keywords")[0]


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
        # caches (a log repeats a few Ray prefixes and a few dates on millions of lines)
        self._days: dict[tuple[int, int, int], float | None] = {}  # (y, m, d) -> epoch of its midnight
        self._dates: dict[str, tuple[int, int, int]] = {}
        self._ray: dict[str, tuple | None] = {}  # `(...)` prefix -> what RAY_ACTOR / RAY_DAEMON read in it
        self._readers = self._reader_table()  # a line's first character -> the reader of its prefix

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

    def _ray_prefix(self, text: str, pos: int) -> tuple[int, int | None, str | None, str | None] | None:
        """What a Ray `(...)` prefix at `pos` says: (end, pid, actor, ip), the actor being the daemon's
        name for `(raylet)` and the like (pid None then), or None. Neither regex can match past the
        first `)`, so the text up to it is the cache key."""
        close = text.find(")", pos)
        if close < 0:
            return None
        key = text[pos : close + 1]
        found = self._ray.get(key, False)
        if found is False:
            found = None
            m = RAY_ACTOR.match(key)
            if m and m.end() == len(key):
                found = (log_int(m.group("pid")), m.group("actor"), m.group("ip"))
            else:
                m = RAY_DAEMON.match(key)
                if m and m.end() == len(key):
                    found = (None, m.group("daemon"), m.group("ip"))
            if len(self._ray) >= CACHE_SIZE:
                self._ray.clear()
            self._ray[key] = found
        if found is None:
            return None
        return (close + 2 if text.startswith(" ", close + 1) else close + 1, *found)

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
        rank = f.rank
        if rank is None and message.startswith("[") and (m := MESSAGE_RANK.match(message)):
            rank = log_int(m.group("rank"))
        origin = origin_of(rank, f.local_rank, f.pid, f.node, f.actor, f.time, f.level, f.repeat, default)
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
        if f.rank is None and message.startswith("[") and (m := MESSAGE_RANK.match(message)):
            f.rank = log_int(m.group("rank"))
        return f, pos, end, self.year if self.dated_reads != dated else 0

    def _read(self, text: str) -> tuple[_Fields, str, int]:
        """The prefixes of a line's text: their fields, the text without Ray's repeat note, and where
        the prefixes end in it."""
        f = _Fields()
        if REPEATED_KEYWORD in text:
            m = REPEATED.search(text)
            if m:
                f.repeat = 1 + log_int(m.group("n"))
                text = text[: m.start()].rstrip()
        pos = 0
        readers = self._readers
        for _ in range(MAX_PREFIXES):
            if pos >= len(text):
                break
            read = readers.get(text[pos], self._prefix)
            end = read(text, pos, f) if read is not None else None
            if end is None or end == pos:
                break
            pos = end
        return f, text, pos

    # -- the prefixes, by their first character: each reads one at `pos` into `f` and says where it
    # ends (None: no prefix there). Each regex is tried only where the first characters let it match.
    def _reader_table(self) -> dict[str, object]:
        """The reader of each ASCII first character, as `_prefix` chooses it (None: no prefix starts
        so); any other character goes to `_prefix` itself. (A table: `_prefix`'s tests cost a call a
        prefix, on every line.)"""
        table: dict[str, object] = {}
        for code in range(128):
            c = chr(code)
            if c == "(":
                table[c] = self._read_ray
            elif c == "[":
                table[c] = self._read_bracketed
            elif c.isdigit():
                table[c] = self._read_stamped
            elif c in "VIWEC" or c in "DF":
                table[c] = self._read_levelled
            elif c.isalpha():
                table[c] = self._read_nccl_host
            else:
                table[c] = None
        return table

    def _prefix(self, text: str, pos: int, f: _Fields) -> int | None:
        c = text[pos]
        if c == "(":
            return self._read_ray(text, pos, f)
        if c == "[":
            return self._read_bracketed(text, pos, f)
        if c.isdigit():
            return self._read_stamped(text, pos, f)
        if c in "VIWEC" or c in "DF":
            return self._read_levelled(text, pos, f)
        if c.isalpha():
            return self._read_nccl_host(text, pos, f)
        return None

    def _read_ray(self, text: str, pos: int, f: _Fields) -> int | None:
        ray = self._ray_prefix(text, pos)
        if ray is None:
            return None
        end, ray_pid, ray_actor, ray_ip = ray
        if ray_pid is None:  # a daemon: (raylet), (autoscaler), ...
            f.actor = ray_actor
        else:
            f.pid = ray_pid
            f.actor = ray_actor or f.actor
        if ray_ip:
            f.node = ray_ip
        return end

    def _read_bracketed(self, text: str, pos: int, f: _Fields) -> int | None:
        """`[rank3]:`, glog's `[E0314 ...]`, torchrun's tee `[default0]:`, a bracketed timestamp."""
        nxt = text[pos + 1 : pos + 2]
        m = RANK.match(text, pos) if nxt == "r" else None
        if m:
            f.rank = log_int(m.group("rank"))
            return m.end()
        m = GLOG.match(text, pos) if nxt in _GLOG_LEVELS else None
        if m:
            f.level = m.group("lvl")
            f.time = self._undated(int(m.group("mon")), int(m.group("day")), m.group("hms"))
            return m.end()
        m = TEE.match(text, pos) if nxt in _TEE_FIRST else None
        if m and m.group("role") != "rank":
            f.local_rank = log_int(m.group("lr"))
            return m.end()
        m = STAMPED.match(text, pos) if nxt.isdigit() else None
        if m:
            f.time = self._full(m.group("date"), m.group("hms"))
            f.level = m.group("lvl") or f.level
            return m.end()
        return None

    def _read_stamped(self, text: str, pos: int, f: _Fields) -> int | None:
        """A line that starts with a date (Ray's own lines, Python logging's default), else NCCL's host."""
        m = STAMPED.match(text, pos) if text[pos + 4 : pos + 5] == "-" else None
        if m:
            f.time = self._full(m.group("date"), m.group("hms"))
            f.level = m.group("lvl") or f.level
            return m.end()
        return self._read_nccl_host(text, pos, f)

    def _read_levelled(self, text: str, pos: int, f: _Fields) -> int | None:
        """torch's logging `W0731 10:50:07.575000 pid file.py:897]`, vLLM's `INFO 03-14 ...`, Python
        logging's `INFO:2025-...:`, else NCCL's host."""
        c = text[pos]
        m = TORCH_LOG.match(text, pos) if c in "VIWEC" and text[pos + 1 : pos + 2] in ("0", "1") else None
        if m:
            f.level = m.group("lvl")
            f.time = self._undated(int(m.group("mon")), int(m.group("day")), m.group("hms"))
            f.pid = f.pid or log_int(m.group("pid"))
            return m.end()
        dated = False  # Python logging's full date (vLLM's has month and day)
        if text.startswith(_LEVELS, pos):  # vLLM puts a space after the level, Python logging a colon
            after = text[pos + 4 : pos + 9]
            if " " in after:
                m = VLLM.match(text, pos)
            if m is None and ":" in after:
                m = PY_LOGGING.match(text, pos)
                dated = True
        if m:
            f.level = m.group("lvl")
            if dated:
                f.time = self._full(m.group("date"), m.group("hms"))
            else:
                f.time = self._undated(int(m.group("mon")), int(m.group("day")), m.group("hms"))
            return m.end()
        return self._read_nccl_host(text, pos, f)

    @staticmethod
    def _read_nccl_host(text: str, pos: int, f: _Fields) -> int | None:
        """NCCL's `host:pid:tid [dev]`."""
        m = NCCL_HOST.match(text, pos)
        if m is None:
            return None
        f.pid = f.pid or log_int(m.group("pid"))
        f.node = f.node or m.group("host")
        return m.end()
