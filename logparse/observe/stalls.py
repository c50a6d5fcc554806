"""Facts of a hang: stacks dumped while the job hung, signs that progress stopped, the signal that ended
it, and where each stream of the job last wrote. The wordings are patterns/stalls.yaml's; whether the
job stalled is logparse.decide.stall's question.

Stack dumps come from CPython's faulthandler (`Timeout (0:00:12)!`, `Thread 0x... (most recent call
first):`, `  File "...", line N in f`: `dump_traceback_later`, `faulthandler.register(SIGUSR1)`) and from
`py-spy dump` (`Process N: command`, `Thread N (idle): "MainThread"`, `    f (file.py:N)`). A dump's
lines are read as a region of their input (its frame lines carry no keyword): from its header until
a line that is no part of a dump. Bounded: at most MAX_STACKS stacks of MAX_FRAMES frames each, and
MAX_STREAMS streams' last lines.
"""

from __future__ import annotations

import datetime
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from logparse.model import Evidence
from logparse.observe.tracebacks import clip
from logparse.read.lookback import LOOKBACK_BYTES
from logparse.read.normalize import Normalizer, Origin, Record
from logparse.read.sources import MAX_LINE_BYTES, Line, decode_line
from logparse.read.unwrap import JOINED
from patterns.numbers import log_int
from patterns.stalls import StallRules, Wording, stall_rules

MAX_STACKS = 512
MAX_FRAMES = 48
MAX_STREAMS = 4096
# pids whose name (actor or rank) is remembered: a log of a long-lived cluster names a new worker pid
# every few lines (the benchmarks' generated logs 135 a MB), and the memory must not grow with the log
MAX_NAMES = 4 * MAX_STREAMS
MAX_SIGN_LINES = 64  # the last lines of each sign kept with their position (which came after training)
TAIL_LINES = 2000  # last lines of each input read back (from the reader's tail) for the streams' ends
DUMP_GAP_LINES = 3  # blank or interpreter lines inside a py-spy dump that keep it open
UNDATED_YEAR = 2000  # the year the normaliser gives a time read from a line without one (default_year)


@dataclass(frozen=True)
class Frame:
    function: str
    file: str
    line: int

    def text(self) -> str:
        return f"{self.function} ({self.file}:{self.line})"


@dataclass(frozen=True)
class Stack:
    """One thread's stack, innermost frame first, as a dump showed it."""

    who: str  # the process: `rank 3`, `local rank 2`, `WorkerDict pid=21916`, `pid 23791`
    tool: str  # faulthandler | py-spy
    frames: tuple[Frame, ...]
    first: Evidence  # the dump's first line (its header)
    seq: int
    process: str | None = None  # py-spy: the process's command
    thread_name: str | None = None
    waited: str | None = None  # faulthandler: how long the thread waited (`0:00:12`)
    launcher: bool = False  # the launcher's own process (torchrun's agent waits for its workers)
    pid: int | None = None  # py-spy: the process's pid
    crash: str | None = None  # a crash's stack (`Fatal Python error: Aborted`: `Aborted`), never a hang's
    # faulthandler: the first thread's id of its dump (`Thread 0x7f...`): several processes' dumps in one
    # stream without prefixes are told apart by it (each process has its own addresses)
    thread: str | None = None


@dataclass(frozen=True)
class SignSeen:
    id: str
    title: str
    wait: str | None
    count: int
    first: Evidence
    first_seq: int
    last: Evidence
    # the last MAX_SIGN_LINES lines of the sign (seq, the line): the decision counts those that came
    # after training began (unless the sign says otherwise) and after which the job did not go on
    lines: tuple[tuple[int, Evidence], ...] = ()


@dataclass(frozen=True)
class Interrupt:
    signal: str  # SIGINT, SIGTERM, ...
    first: Evidence
    seq: int


@dataclass(frozen=True)
class StreamLast:
    who: str
    last: Evidence
    time: float | None
    seq: int  # the scan's position of its last record (lines read back from the tail: after every record)


@dataclass(frozen=True)
class StallFacts:
    """What the stall observer saw, as the decision reads it."""

    stacks: tuple[Stack, ...]
    signs: tuple[SignSeen, ...]
    interrupt: Interrupt | None
    streams: tuple[StreamLast, ...]  # each stream's last line
    end_time: float | None  # the log's last timestamp
    step_times: tuple[tuple[int, float], ...] = ()  # (step, time) of the step lines that carry a time
    ranks_named: tuple[int, ...] = ()  # the ranks the log's own lines name with their pid (`rank 3 pid 1234`)


def rebase(t: float | None, year: int | None) -> float | None:
    """A time read from a line without a year (glog's `W1201 23:08:39`, which the normaliser puts in
    its default year) in `year`, the year of the log's dated lines; other times as they are."""
    if t is None or year is None:
        return t
    when = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    if when.year != UNDATED_YEAR:
        return t
    try:
        return when.replace(year=year).timestamp()
    except ValueError:  # (29 February)
        return t


def who_of(origin: Origin, names: dict[int, str] | None = None) -> str:
    """How a report names the process a line came from."""
    if origin.rank is not None:
        return f"rank {origin.rank}"
    if origin.actor and origin.pid is not None:
        return f"{origin.actor} pid={origin.pid}"
    if origin.local_rank is not None:
        return f"local rank {origin.local_rank}"
    if origin.pid is not None:
        return (names or {}).get(origin.pid) or f"pid {origin.pid}"
    return origin.actor or NO_PREFIX


NO_PREFIX = "unprefixed output"


@dataclass
class _Dump:
    """A dump being read in one stream: its current thread's frames."""

    tool: str
    first: Record
    process: str | None = None
    pid: int | None = None
    thread_name: str | None = None
    waited: str | None = None
    crash: str | None = None
    frames: list[Frame] = field(default_factory=list)
    gap: int = 0  # lines since the last one that belongs to it
    thread: str | None = None  # faulthandler: the first thread's id


class StallObserver:
    """Fed record by record (see the module docstring); `facts()` once the inputs end."""

    def __init__(
        self,
        rules: StallRules | None = None,
        keyword_ids: frozenset[int] | None = None,
        is_progress: Callable[[str], bool] | None = None,
    ):
        """`keyword_ids`: the prefilter's ids of the rules' keywords (None: not known, every line is
        looked at); `is_progress`: is a whole line a progress line (the stage tracker's reading)?"""
        self.rules = rules = rules or stall_rules()
        self.keywords = rules.keywords
        self.keyword_ids = keyword_ids
        self._timeout = rules.dump("timeout")
        self._crash = rules.dump("crash")
        self._threads = rules.dump("thread")
        self._frames = rules.dump("frame")
        self._process = rules.dump("process")
        self._rank_pid = rules.dump("rank-pid")
        self._ranks_named: set[int] = set()  # the ranks a `rank N pid M` line named
        self._launchers = ("torchrun", "torch.distributed.run", "torch/distributed/run.py")
        self.stacks: list[Stack] = []
        self.dropped = 0
        self._open: dict[tuple, _Dump] = {}  # stream -> the dump being read in it
        # source -> py-spy dumps open in it: their frame lines carry no keyword, so the input's lines are
        # read as a region meanwhile (faulthandler's frames carry `File "`, a keyword of their own)
        self.regions: dict[str, int] = {}
        self._waited: dict[tuple, str] = {}  # stream -> faulthandler's `Timeout (...)` before its dump
        # stream -> what its process died of (`Fatal Python error: Aborted`): the dumps after it are a
        # crash's (until a `Timeout (...)` header starts a hang's dump in the same stream)
        self._crashed: dict[tuple, str] = {}
        self._signs: dict[str, list] = {}  # id -> [count, first rec, last rec, deque of its last lines]
        self.interrupt: Interrupt | None = None
        self._last: dict[tuple, Record] = {}  # stream -> its last record (not a progress line)
        self.is_progress = is_progress
        # stream -> its last record of any kind: what a live scan's ALERT says (not a report: which
        # progress lines are records depends on the reading path)
        self._live_last: dict[tuple, Record] = {}
        self._names: dict[int, str] = {}  # pid -> how a line with that pid and an actor or rank names it
        self._ranks: dict[tuple, int] = {}  # (node, local rank) -> global rank, from lines that show both
        self._origins: list[Origin] = []  # the origin of each stack's first line
        self._at_interrupt: dict[tuple, Record] | None = None  # `_last` when the job was interrupted
        self._interrupt_time: float | None = None
        self.end_time: float | None = None  # the latest time of a line with a year
        self._undated_end: float | None = None  # the latest time of a line without one
        self._dated_from = datetime.datetime(UNDATED_YEAR + 1, 1, 1, tzinfo=datetime.timezone.utc).timestamp()

    # -- reading ---------------------------------------------------------------------------------------
    def open_in(self, source: str) -> bool:
        """Is a py-spy dump being read in `source` (its next line must be read, keyword or not)?"""
        return source in self.regions

    def dump_streams(self) -> Iterable[tuple]:
        """The streams whose stack dump is being read."""
        return self._open.keys()

    def feed(self, rec: Record, progress: bool = False) -> None:
        """`progress`: is the record's message a progress line (a step line, a bar, a stage marker: the
        stage tracker's reading of it)."""
        stream = rec.stream
        if not (self._open and stream in self._open and self._in_dump(rec, self._open[stream])):
            self._start(rec)
        last = self._last
        # a progress line (step line, bar, stage marker) is left out: the reader's fast path applies most
        # of them without a record, and where each stream stopped must not depend on the path (the
        # input's tail, read back at the end, holds the last ones of every stream either way)
        if stream in last or len(last) < MAX_STREAMS:
            self._live_last[stream] = rec
            if not (progress or self._progress_line(rec)):
                last[stream] = rec
        o = rec.origin
        if o.time is not None:
            self._see_time(o.time)
        if (
            o.pid is not None
            and (o.actor or o.rank is not None)
            and o.pid not in self._names
            and len(self._names) < MAX_NAMES
        ):
            self._names[o.pid] = who_of(o)
        if o.local_rank is not None and o.rank is not None:
            self._ranks[(o.node, o.local_rank)] = o.rank

    def _progress_line(self, rec: Record) -> bool:
        # an empty line, or a bar in another carriage-return segment of the line than the message
        text = rec.line.text
        if not rec.message.strip():
            return True
        return "\r" in text and self.is_progress is not None and self.is_progress(text)

    def _see_time(self, t: float) -> None:
        if t < self._dated_from:
            if self._undated_end is None or t > self._undated_end:
                self._undated_end = t
        elif self.end_time is None or t > self.end_time:
            self.end_time = t

    def _year(self) -> int | None:
        if self.end_time is None:
            return None
        return datetime.datetime.fromtimestamp(self.end_time, datetime.timezone.utc).year

    def _end(self) -> float | None:
        """The log's last time: its dated lines' and its undated lines' (in the dated lines' year)."""
        undated = rebase(self._undated_end, self._year())
        if self.end_time is None:
            return undated
        return max(self.end_time, undated) if undated is not None else self.end_time

    def _start(self, rec: Record) -> None:
        ids = rec.keywords
        if ids is not None and self.keyword_ids is not None and ids.isdisjoint(self.keyword_ids):
            return  # (no wording of patterns/stalls.yaml can be in it)
        msg = rec.message
        m = self._match(self._timeout, msg)
        if m is not None:
            self._waited[rec.stream] = m.group("after")
            self._crashed.pop(rec.stream, None)
            return
        m = self._match(self._crash, msg)
        if m is not None and len(self._crashed) < MAX_STREAMS:
            self._crashed[rec.stream] = m.group("what")
            return
        m = self._match(self._threads, msg)
        if m is not None:
            self._close(rec.stream)
            self._open[rec.stream] = _Dump(
                "faulthandler",
                rec,
                waited=self._waited.pop(rec.stream, None),
                crash=self._crashed.get(rec.stream),
                thread=m.groupdict().get("thread"),
            )
            return
        m = self._match(self._process, msg)
        if m is not None:
            pid = log_int(m.group("pid"))
            command = m.group("command").strip()
            self._close(rec.stream)
            self._open[rec.stream] = _Dump("py-spy", rec, process=command, pid=pid)
            source = rec.line.source
            self.regions[source] = self.regions.get(source, 0) + 1
            return
        m = self._match(self._rank_pid, msg)
        if m is not None and len(self._names) < MAX_NAMES:
            rank = log_int(m.group("rank"))
            self._names[log_int(m.group("pid"))] = f"rank {rank}"
            self._ranks_named.add(rank)
        self._other(rec, msg)

    def _in_dump(self, rec: Record, dump: _Dump) -> bool:
        """`rec` read while `dump` is open in its input: its part of the dump, or the dump's end."""
        msg = rec.message
        m = self._match(self._frames, msg)
        if m is not None:
            if len(dump.frames) < MAX_FRAMES:
                # (a frame's text bounded as a traceback's is)
                function, file = clip(m.group("function")), clip(m.group("file"))
                dump.frames.append(Frame(function, file, log_int(m.group("line"))))
            dump.gap = 0
            return True
        m = self._match(self._threads, msg)
        if m is not None:
            self._close_thread(dump)
            name = m.groupdict().get("name")
            dump.thread_name = name
            dump.gap = 0
            return True
        if dump.tool == "py-spy" and (not msg.strip() or msg.startswith("Python v")):
            dump.gap += 1
            if dump.gap <= DUMP_GAP_LINES:
                return True
        self._close(rec.stream)
        return False

    def _close_thread(self, dump: _Dump) -> None:
        if dump.frames:
            self._keep(dump)
        dump.frames = []
        dump.thread_name = None

    def _close(self, stream: tuple) -> None:
        dump = self._open.pop(stream, None)
        if dump is None:
            return
        if dump.tool == "py-spy":
            source = dump.first.line.source
            left = self.regions.get(source, 1) - 1
            if left > 0:
                self.regions[source] = left
            else:
                self.regions.pop(source, None)
        if dump.frames:
            self._keep(dump)

    def _keep(self, dump: _Dump) -> None:
        if dump.thread_name and any(dump.thread_name.startswith(t) for t in self.rules.idle_threads):
            return
        if len(self.stacks) >= MAX_STACKS:
            self.dropped += 1
            return
        frames = tuple(dump.frames)  # (both tools print the innermost frame first)
        launcher = self._is_launcher(dump.process, frames)
        rec = dump.first
        self.stacks.append(
            Stack(
                who="",  # (named once the inputs end: the names of ranks and pids are learnt as they go)
                tool=dump.tool,
                frames=frames,
                first=Evidence(rec.line.source, rec.line.number, rec.line.text),
                seq=rec.seq,
                process=dump.process,
                thread_name=dump.thread_name,
                waited=dump.waited,
                launcher=launcher,
                pid=dump.pid,
                crash=dump.crash,
                thread=dump.thread,
            )
        )
        self._origins.append(rec.origin)

    def _is_launcher(self, process: str | None, frames: tuple[Frame, ...]) -> bool:
        if process is not None and any(w in process for w in self._launchers):
            return True
        return bool(frames) and all("torch/distributed/elastic/" in f.file for f in frames[:3])

    def _name(self, stack: Stack, origin: Origin) -> str:
        if stack.pid is not None:
            return self._process_name(stack.pid, stack.process or "")
        if stack.thread is not None and who_of(origin) == NO_PREFIX:
            # processes sharing one stderr without prefixes: each dump is its own process's
            return f"thread {stack.thread}"
        if origin.rank is None and origin.local_rank is not None:
            rank = self._ranks.get((origin.node, origin.local_rank))
            if rank is not None:
                return f"rank {rank}"
        return who_of(origin, self._names)

    def _stream_name(self, origin: Origin) -> str:
        if origin.rank is None and origin.local_rank is not None:
            rank = self._ranks.get((origin.node, origin.local_rank))
            if rank is not None:
                return f"rank {rank}"
        return who_of(origin, self._names)

    def _process_name(self, pid: int, command: str) -> str:
        known = self._names.get(pid)
        if known is not None:
            return known
        if command.startswith("ray::"):
            return f"{command[5:].split('.', 1)[0]} pid={pid}"
        return f"pid {pid}"

    def _other(self, rec: Record, msg: str) -> None:
        """Signs that progress stopped, and the signal that ended the job."""
        for sign in self.rules.signs:
            if any(k in msg for k in sign.keywords):
                m = sign.regex.search(msg)
                if m:
                    self._see_sign(sign, m, rec)
                    return
        if self.interrupt is None:
            for w in self.rules.interrupts:
                if any(k in msg for k in w.keywords):
                    m = w.regex.search(msg)
                    if m:
                        named = m.groupdict().get("signal")
                        name = self.rules.signal_of(named, w.signal)
                        self.interrupt = Interrupt(name, _evidence(rec), rec.seq)
                        # where each stream was when the job was interrupted (what it printed after is
                        # how it ended)
                        self._at_interrupt = dict(self._last)
                        self._interrupt_time = rec.origin.time
                        return

    def _see_sign(self, sign: Wording, m, rec: Record) -> None:
        if sign.min_after is not None and float(m.group("after")) < sign.min_after:
            return  # (a wait that has only begun: a healthy start prints it too)
        # (a line Ray folded with `[repeated Nx across cluster]` counts once: N workers that printed one
        # wait at once are one wait)
        seen = self._signs.get(sign.id)
        if seen is None:
            seen = self._signs[sign.id] = [0, rec, rec, deque(maxlen=MAX_SIGN_LINES)]
        seen[0] += 1
        seen[2] = rec
        seen[3].append((rec.seq, _evidence(rec)))

    @staticmethod
    def _match(wordings: tuple[Wording, ...], msg: str):
        for w in wordings:
            m = w.regex.search(msg)
            if m:
                return m
        return None

    # -- the end ---------------------------------------------------------------------------------------
    def last_lines(self) -> list[tuple[str, Evidence, str]]:
        """Each stream's last record so far, the one that went quiet first first (live use: where each
        stream stopped while the job runs): (who, where, its bare message: the launcher's prefix, such
        as torchrun's `W1201 23:17:43.749000 1938 torch/distributed/run.py:874] `, left out, since
        `who` names the stream)."""
        records = list(self._live_last.values())  # (one copy: the watch thread asks while lines are read)
        return [
            (self._stream_name(r.origin), _evidence(r), r.message)
            for r in sorted(records, key=lambda r: r.seq)
        ]

    def facts(
        self,
        tails: dict[str, tuple[bytes, int]] | None = None,
        defaults: dict[str, Origin] | None = None,
        step_times: tuple[tuple[int, float], ...] = (),
    ) -> StallFacts:
        """What was seen; `tails`: the last bytes of each input and its line count (the reader's), read
        back for the lines of each stream after its last record (a line with no keyword is no record)."""
        for stream in list(self._open):
            self._close(stream)
        interrupted = self._at_interrupt
        ends = {stream: (rec.seq, rec) for stream, rec in (interrupted or self._last).items()}
        if interrupted is None:
            normalizer = Normalizer()
            for source, (tail, total) in (tails or {}).items():
                default = (defaults or {}).get(source)
                self._read_tail(source, tail, total, default, normalizer, ends)
        year = self._year()
        end_time = self._end()
        if interrupted is not None:  # the end is the interruption (what follows is how it ended)
            end_time = rebase(self._interrupt_time, year) or end_time
        streams = tuple(
            sorted(
                (
                    StreamLast(
                        self._stream_name(rec.origin), _evidence(rec), rebase(rec.origin.time, year), seq
                    )
                    for seq, rec in ends.values()
                ),
                key=lambda s: (s.time is None, s.time or 0.0, s.seq, s.last.line),
            )
        )
        signs = tuple(
            SignSeen(
                sid,
                rule.title,
                rule.wait,
                seen[0],
                _evidence(seen[1]),
                seen[1].seq,
                _evidence(seen[2]),
                tuple(seen[3]),
            )
            for sid, seen in self._signs.items()
            for rule in self.rules.signs
            if rule.id == sid
        )
        stacks = tuple(
            replace(s, who=self._name(s, o)) for s, o in zip(self.stacks, self._origins, strict=True)
        )
        ranks = tuple(sorted(self._ranks_named))
        return StallFacts(stacks, signs, self.interrupt, streams, end_time, step_times, ranks)

    def new_attempt(self) -> None:
        """A (re)start of the job: what hung before it is the earlier attempt's."""
        self._open.clear()
        self.regions.clear()
        self._waited.clear()
        self._crashed.clear()
        self.stacks.clear()
        self._origins.clear()
        self._signs.clear()
        self.interrupt = None
        self._at_interrupt = None

    def _read_tail(
        self,
        source: str,
        tail: bytes,
        total: int,
        default: Origin | None,
        normalizer: Normalizer,
        ends: dict,
    ) -> None:
        lines = tail.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()
        if len(tail) >= LOOKBACK_BYTES and lines:
            lines.pop(0)  # (cut by the tail's bound: part of a line)
        lines = lines[-TAIL_LINES:]
        # the tail's last line is the input's last line
        for i, raw in enumerate(lines):
            number = total - len(lines) + 1 + i
            if raw == JOINED:  # a row joined onto the line before it (logparse.read.unwrap)
                continue
            text = decode_line(raw[:MAX_LINE_BYTES])
            if not text.strip():
                continue
            rec = normalizer.normalize(Line(source, number, text), 0, default)
            if rec.origin.time is not None:
                self._see_time(rec.origin.time)
            known = ends.get(rec.stream)
            if known is None or known[1].line.number <= number:
                ends[rec.stream] = (known[0] if known else 0, rec)


def _evidence(rec: Record) -> Evidence:
    return Evidence(rec.line.source, rec.line.number, rec.line.text)
