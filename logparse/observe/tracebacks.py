"""Reassemble Python tracebacks per stream (rank / pid / actor), even when streams interleave.

Handles plain tracebacks, chained ones ("The above exception was the direct cause of ..."), Ray's
`RayTaskError(X): ray::Actor.method()` header followed by the worker's frames and inner exception,
and multi-line exception messages (ChildFailedError's summary, ActorDiedError's details).

Bounds: a traceback keeps at most MAX_TRACEBACK_RECORDS lines (its head and its tail) and
MAX_FRAMES frames (the HEAD_FRAMES outermost and the innermost rest: a deep recursion's innermost
frame is where it failed; `frames_cut` says how many went), of each frame line and each of a frame's
file, function and source line at most MAX_FRAME_CHARS characters (`...` where cut); a chain ("During
handling of the above exception") keeps at most MAX_CHAIN_LINKS tracebacks, its first and the latest
(`chain_cut` of the one after the first says how many went: an unbroken chain of 80,000 once held
them all, 554 MB); an exception message keeps at most MAX_MESSAGE_LINES continuation lines; at most
MAX_KEPT_TRACEBACKS closed tracebacks are kept (the first half and the most recent half). State is
kept only for the streams with an open traceback, and for at most MAX_IDLE_STREAMS idle streams that
hold something a later line needs (the traceback a chain marker links to, a pending chain, context
lines): a log from a million processes costs what its open tracebacks cost. Expiry visits the open
tracebacks of a source only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

import regex

from logparse.read.interleave import NAME_ENDINGS
from logparse.read.normalize import Record
from logparse.read.sources import Line
from patterns.formats import formats
from patterns.numbers import log_int
from patterns.schema import LazyRe

MAX_TRACEBACK_RECORDS = 200
MAX_FRAMES = 100
# characters of a frame's line (and of its file, function and source line) a traceback keeps: a frame
# line is held several times over, so frames thousands of characters wide held several times the memory
MAX_FRAME_CHARS = 500
HEAD_FRAMES = 10  # outermost frames kept when a traceback has more than MAX_FRAMES
MAX_CHAIN_LINKS = 10  # tracebacks a chain keeps linked: its first and the latest
CHAIN_SHOWN = 5  # earlier exceptions of a chain a report shows: all, or the first and the latest
MAX_MESSAGE_LINES = 120
MAX_KEPT_TRACEBACKS = 400
MAX_GAP_LINES = 200  # a traceback whose source printed this many lines since its last line is closed
CONTEXT_LINES = 5
# idle streams whose state is kept (the one idle longest dropped first): a chain marker comes right
# after its traceback, so only the streams whose traceback closed lately need theirs
MAX_IDLE_STREAMS = 128

# The wordings of a traceback's structure are patterns/formats.yaml's (`tracebacks`, `torchrun_summary`,
# `frame_kinds`), compiled here once.
_F = formats()
TB_START = _F.literal("traceback-start")
INLINE_TB_START = _F.literal("inline-traceback-start")  # SGLang: `Scheduler hit an exception: Traceback ...`
CHAIN_MARKERS = _F.literals("chain-markers")
FRAME_MARKER = _F.literal("frame-marker")
# Frames are indented by Python; pasted excerpts sometimes lose the indentation, so it is optional.
FRAME_RE = regex.compile(_F.regex("frame-line"))
EXC_RE = regex.compile(_F.regex("exception-line"))
EXC_NAME_RE = LazyRe(rf"(?:{'|'.join(NAME_ENDINGS)})\)?$", engine="regex")
RAY_TASK_MARKER = _F.literal("ray-task-marker")
RAY_TASK_ERROR = _F.literal("ray-task-error")
RAY_TASK_ERROR_LINE = _F.literal("ray-task-error-line")
RAY_TASK_RE = regex.compile(_F.regex("ray-task"))
# A Ray task header printed without a "Traceback" line:
# `Unhandled error (suppress with ...): ray::X.m() (pid=..` or the driver's
# `ray.exceptions.RayTaskError(E): ray::X.m() (pid=...` when Ray prints the error alone.
RAY_HEADER_RE = regex.compile(_F.regex("ray-header"))


class FrameKind(str, Enum):
    USER = "user"  # the job's own code, or verl
    LIBRARY = "library"  # an installed package or the standard library
    LAUNCHER = "launcher"  # a console script or interpreter entry point that started the program


# Whose code a frame's file is: the first rule that hits it decides, a file no rule names is the user's.
# (regex: searched in the path; literals: one of them is in it)
FRAME_RULES: tuple[tuple[FrameKind, regex.Pattern | None, tuple[str, ...]], ...] = tuple(
    (
        FrameKind(rule.field("kind")),
        regex.compile(rule.value) if rule.kind == "regex" else None,
        rule.value if rule.kind == "literals" else (),
    )
    for rule in _F.section("frame_kinds")
)


def clip(text: str) -> str:
    """`text`, or its first MAX_FRAME_CHARS characters and `...` (what a traceback keeps of a frame;
    ASCII: one character outside it would double the memory of the whole string)."""
    return text if len(text) <= MAX_FRAME_CHARS else text[:MAX_FRAME_CHARS] + "..."


def frame_kind(file: str) -> FrameKind:
    """Whose code a traceback frame's file is (renderers fold the frames that are not the user's)."""
    for kind, pattern, words in FRAME_RULES:
        if pattern.search(file) if pattern is not None else any(w in file for w in words):
            return kind
    return FrameKind.USER


class LineRole(str, Enum):
    NONE = "none"
    START = "start"
    FRAME = "frame"  # a frame header or the source line under it: never matched against the catalog
    EXCEPTION = "exception"
    MESSAGE = "message"  # continuation of a multi-line exception message


@dataclass
class Frame:
    file: str
    line: int
    function: str
    code: str | None = None

    @property
    def is_library(self) -> bool:
        """Not the user's code: an installed package, the standard library or a launcher."""
        return frame_kind(self.file) is not FrameKind.USER


@dataclass
class RaisedException:
    type: str
    message: str
    record: Record
    extra: list[str] = field(default_factory=list)

    @property
    def short_type(self) -> str:
        return self.type.rsplit(".", 1)[-1]


# (LazyRe: compiled when a log first shows a torchrun failure summary)
TORCHRUN_SUMMARY_EXCEPTION = _F.literal("summary-exception")
TORCHRUN_FAILURES = _F.literal("failures-section")
TORCHRUN_ROOT = _F.literal("root-section")
TORCHRUN_INDEX = LazyRe(_F.regex("failure-index"), engine="regex")
TORCHRUN_FIELD = LazyRe(_F.regex("failure-field"), engine="regex")
TORCHRUN_RANK = LazyRe(_F.regex("failure-rank"), engine="regex")
TORCHRUN_EXIT = LazyRe(_F.regex("failure-exitcode"), engine="regex")
TORCHRUN_SIGNAL = LazyRe(_F.regex("failure-signal"), engine="regex")
TORCHRUN_NO_FILE = _F.literal("no-error-file")
TORCHRUN_RULE = frozenset(_F.literals("rule-characters"))


@dataclass
class TorchrunFailure:
    """One `[i]:` block of torchrun's ChildFailedError summary."""

    section: str  # "failures" or "root" (Root Cause (first observed failure))
    index: int
    first_seq: int
    last_seq: int
    time: str | None = None
    host: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    exitcode: int | None = None
    pid: int | None = None
    signal: str | None = None
    error_file: str | None = None
    traceback: str | None = None

    def covers(self, seq: int) -> bool:
        return self.first_seq <= seq <= self.last_seq


def parse_child_failed(records: list[Record]) -> list[TorchrunFailure]:
    """Parse the summary that follows `ChildFailedError:` (torch/distributed/elastic/.../errors)."""
    out: list[TorchrunFailure] = []
    section = "failures"
    current: TorchrunFailure | None = None
    for rec in records:
        text = rec.message.strip()
        if text.startswith(TORCHRUN_ROOT):
            section = "root"
            current = None
            continue
        if text.startswith(TORCHRUN_FAILURES):
            section = "failures"
            current = None
            continue
        m = TORCHRUN_INDEX.match(text)
        if m:
            current = TorchrunFailure(section, log_int(m.group("index")), rec.seq, rec.seq)
            out.append(current)
            continue
        if current is None:
            continue
        f = TORCHRUN_FIELD.match(rec.message)
        if not f:
            if text and not set(text) <= TORCHRUN_RULE:
                current.last_seq = rec.seq  # a multi-line traceback inside the block
            continue
        current.last_seq = rec.seq
        _read_field(current, f.group("key"), f.group("value").strip())
    return out


def _read_field(failure: TorchrunFailure, key: str, value: str) -> None:
    """One `key : value` line of a failure in torchrun's summary, into `failure`."""
    if key == "time":
        failure.time = value
    elif key == "host":
        failure.host = value
    elif key == "rank" and (m := TORCHRUN_RANK.search(value)):
        failure.rank, failure.local_rank = log_int(m.group("rank")), log_int(m.group("local"))
    elif key == "exitcode" and (m := TORCHRUN_EXIT.search(value)):
        failure.exitcode, failure.pid = log_int(m.group("code")), log_int(m.group("pid"))
        failure.signal = m.group("signal") or failure.signal
    elif key == "error_file":
        failure.error_file = None if value == TORCHRUN_NO_FILE else value
    elif key == "traceback":
        failure.traceback = value
        if m := TORCHRUN_SIGNAL.search(value):
            failure.signal = m.group("name")


@dataclass
class Traceback:
    stream: tuple
    start: Record
    context: Sequence[Record]  # the lines before it in its stream (may be decoded lazily)
    records: list[Record] = field(default_factory=list)
    dropped: int = 0
    frames: list[Frame] = field(default_factory=list)
    exceptions: list[RaisedException] = field(default_factory=list)
    chained_from: Traceback | None = None
    task: str | None = None  # Ray task/actor method, e.g. WorkerDict.actor_rollout_update_actor
    task_pid: int | None = None  # the worker that raised, from the RayTaskError header
    task_node: str | None = None
    closed: bool = False
    torchrun_failures: list[TorchrunFailure] = field(default_factory=list)
    frames_cut: int = 0  # frames left out after the first HEAD_FRAMES (more than MAX_FRAMES were printed)
    chain_cut: int = 0  # tracebacks of the chain left out between this one and `chained_from`
    _tail: deque = field(default_factory=lambda: deque(maxlen=MAX_TRACEBACK_RECORDS // 2))

    def add_frame(self, frame: Frame) -> None:
        """Keep the outermost HEAD_FRAMES and the innermost frames, MAX_FRAMES in all."""
        if len(self.frames) >= MAX_FRAMES:
            del self.frames[HEAD_FRAMES]
            self.frames_cut += 1
        self.frames.append(frame)

    def add_frame_line(self, record: Record) -> None:
        """A frame's line or its source line: kept as `add` keeps a line, its first MAX_FRAME_CHARS."""
        if len(record.line.text) > MAX_FRAME_CHARS or len(record.message) > MAX_FRAME_CHARS:
            line = record.line
            record = replace(
                record,
                line=Line(line.source, line.number, clip(line.text), line.truncated),
                message=clip(record.message),
            )
        self.add(record)

    def add(self, record: Record) -> None:
        if len(self.records) < MAX_TRACEBACK_RECORDS // 2:
            self.records.append(record)
        else:
            if len(self._tail) == self._tail.maxlen:
                self.dropped += 1
            self._tail.append(record)

    def all_records(self) -> list[Record]:
        return self.records + list(self._tail)

    @property
    def final(self) -> RaisedException | None:
        """The exception that ended this traceback: for Ray's nested form, the inner one."""
        return self.exceptions[-1] if self.exceptions else None

    def earlier(self) -> tuple[list[RaisedException], int]:
        """The exceptions that ended the tracebacks earlier in this one's chain, oldest first, and how
        many tracebacks of the chain were left out (after the first; see MAX_CHAIN_LINKS)."""
        found: list[RaisedException] = []
        cut = 0
        tb: Traceback = self
        while tb.chained_from is not None:
            cut += tb.chain_cut
            tb = tb.chained_from
            if tb.final is not None:
                found.append(tb.final)
        return found[::-1], cut

    def chain_shown(self, shown: int = CHAIN_SHOWN) -> tuple[list[RaisedException], int]:
        """The earlier exceptions a report shows (oldest first): all when there are `shown` or fewer,
        else the first and the latest `shown - 1`; with how many are left out after the first."""
        found, cut = self.earlier()
        if len(found) + cut <= shown:
            return found, 0
        return [found[0], *found[len(found) - shown + 1 :]], cut + len(found) - shown

    def torchrun_failure_at(self, seq: int) -> TorchrunFailure | None:
        for f in self.torchrun_failures:
            if f.covers(seq):
                return f
        return None

    def torchrun_root_failure(self) -> TorchrunFailure | None:
        return next((f for f in self.torchrun_failures if f.section == "root"), None)

    def innermost_user_frame(self) -> Frame | None:
        for frame in reversed(self.frames):
            if not frame.is_library:
                return frame
        return None


@dataclass(slots=True)
class _StreamState:
    tb: Traceback | None = None
    phase: str = "idle"  # idle | frames | code | message
    pending_chain: Traceback | None = None
    last_closed: Traceback | None = None
    context: deque | None = None  # the last CONTEXT_LINES lines outside a traceback (when remembered)

    def worth_keeping(self) -> bool:
        """Does an idle stream's state hold something a later line of the stream needs?"""
        return self.pending_chain is not None or self.last_closed is not None or bool(self.context)


def bound_chain(tb: Traceback) -> None:
    """Keep at most MAX_CHAIN_LINKS tracebacks linked in the chain `tb` ends (each chain is kept so as
    it grows, so it has at most one too many): the one after the first is unlinked and counted."""
    links = [tb]
    while links[-1].chained_from is not None:
        links.append(links[-1].chained_from)
    if len(links) <= MAX_CHAIN_LINKS:
        return
    first, dropped, after = links[-1], links[-2], links[-3]
    after.chained_from = first
    after.chain_cut += dropped.chain_cut + 1


def parse_exception_line(message: str) -> tuple[str, str] | None:
    if not message or message[0].isspace():
        return None
    m = EXC_RE.match(message)
    if not m:
        return None
    etype = m.group("type")
    if "." not in etype and not EXC_NAME_RE.search(etype):
        return None
    if not etype[0].isalpha():
        return None
    return etype, m.group("msg") or ""


class TracebackAssembler:
    """A small state machine per stream; `feed` tells each record's role in a traceback."""

    def __init__(
        self,
        context_provider: Callable[[Record], Sequence[Record]] | None = None,
        remember_context: Callable[[Record], bool] | None = None,
    ) -> None:
        # context_provider(record) -> up to CONTEXT_LINES records before it in its stream; without one,
        # the last lines fed in each stream are the context. remember_context(record): must this line
        # be remembered as context of its stream (default: yes)? A scanner that reads context back
        # from the raw log says no for those lines, so idle streams cost nothing.
        self.context_provider = context_provider
        self.remember_context = remember_context
        self._open: dict[str, int] = {}  # source -> open tracebacks
        # stream -> state, for the streams with an open traceback (in the order they opened) ...
        self._active: dict[tuple, _StreamState] = {}
        # ... and for at most MAX_IDLE_STREAMS idle ones worth keeping (in the order they became so)
        self._idle: dict[tuple, _StreamState] = {}
        self.closed: list[Traceback] = []
        self._recent: deque[Traceback] = deque(maxlen=MAX_KEPT_TRACEBACKS // 2)
        self.total = 0

    def _take(self, stream: tuple) -> _StreamState:
        """The state of `stream` (a new one if none is kept); `_put` it back once fed. (It stays in
        its table meanwhile: a context provider may ask for the stream's context.)"""
        st = self._active.get(stream)
        if st is None:
            st = self._idle.get(stream)
            if st is None:
                st = _StreamState()
        return st

    def _put(self, stream: tuple, st: _StreamState) -> None:
        """After `st` was fed: an open traceback's state is in _active (since it opened); an idle one
        is kept if it holds something, in the order idle states began to (a line that changes
        nothing, such as a step line, moves nothing: a scanner may skip feeding those)."""
        idle = self._idle
        if st.tb is not None:
            if stream in idle:
                del idle[stream]
        elif stream not in idle and st.worth_keeping():
            idle[stream] = st
            if len(idle) > MAX_IDLE_STREAMS:
                del idle[next(iter(idle))]

    def current(self, stream: tuple) -> Traceback | None:
        st = self._active.get(stream)
        return st.tb if st else None

    def context_of(self, stream: tuple) -> list[Record]:
        st = self._active.get(stream) or self._idle.get(stream)
        return list(st.context) if st and st.context else []

    def context_for(self, rec: Record) -> list[Record]:
        if self.context_provider is not None:
            return self.context_provider(rec)
        return self.context_of(rec.stream)

    def _remember(self, st: _StreamState, rec: Record) -> None:
        if self.remember_context is None or self.remember_context(rec):
            if st.context is None:
                st.context = deque(maxlen=CONTEXT_LINES)
            st.context.append(rec)

    def _open_tb(self, st: _StreamState, tb: Traceback) -> None:
        if tb.chained_from is not None:
            bound_chain(tb)
        st.tb = tb
        self._active[tb.stream] = st
        src = tb.stream[0]
        self._open[src] = self._open.get(src, 0) + 1

    def open_streams(self) -> Iterable[tuple]:
        """The streams with a traceback open."""
        return self._active.keys()

    def open_in(self, source: str) -> bool:
        return self._open.get(source, 0) > 0

    def expire(self, source: str, line_number: int) -> None:
        """Close the tracebacks of `source` that printed nothing for MAX_GAP_LINES lines (a visit of
        the open tracebacks only)."""
        if not self._open.get(source):
            return
        for st in list(self._active.values()):
            tb = st.tb
            if tb.stream[0] == source:
                last = tb._tail[-1] if tb._tail else tb.records[-1] if tb.records else tb.start
                if line_number - last.line.number > MAX_GAP_LINES:
                    self._close(st)
                    self._put(tb.stream, st)

    def _close(self, st: _StreamState) -> None:
        tb = st.tb
        if tb is None:
            return
        tb.closed = True
        for exc in tb.exceptions:
            if exc.short_type == TORCHRUN_SUMMARY_EXCEPTION:
                records = tb.all_records()
                start = next((k for k, r in enumerate(records) if r is exc.record), 0)
                tb.torchrun_failures = parse_child_failed(records[start + 1 :])
                break
        self.total += 1
        if len(self.closed) < MAX_KEPT_TRACEBACKS // 2:
            self.closed.append(tb)
        else:
            self._recent.append(tb)
        st.last_closed = tb
        src = tb.stream[0]
        self._open[src] = self._open.get(src, 1) - 1
        del self._active[tb.stream]
        st.tb = None
        st.phase = "idle"

    def kept(self) -> list[Traceback]:
        return self.closed + list(self._recent)

    def feed(self, rec: Record) -> LineRole:
        stream = rec.stream
        st = self._take(stream)
        role = self._feed(st, rec)
        self._put(stream, st)
        return role

    def _feed(self, st: _StreamState, rec: Record) -> LineRole:
        msg = rec.message
        stripped = msg.strip()
        if stripped == TB_START or (stripped.endswith(TB_START) and INLINE_TB_START in stripped):
            return self._start(st, rec)
        if st.tb is None:
            role = self._outside(st, rec, stripped)
            if role is not None:
                return role
        tb = st.tb
        if stripped in CHAIN_MARKERS:
            st.pending_chain = tb
            tb.add(rec)
            self._close(st)
            return LineRole.FRAME
        fm = FRAME_RE.match(msg)
        if fm:
            func = clip((fm.group("func") or "").strip())
            tb.add_frame(Frame(clip(fm.group("file")), log_int(fm.group("line")), func))
            tb.add_frame_line(rec)
            st.phase = "code"
            return LineRole.FRAME
        if st.phase in ("frames", "code"):
            return self._in_frames(st, rec, stripped)
        return self._in_message(st, rec, stripped)

    def _start(self, st: _StreamState, rec: Record) -> LineRole:
        """`Traceback (most recent call last):` (also after a header such as SGLang's): a new one."""
        chained = st.pending_chain
        if st.tb is not None:
            chained = chained or None
            self._close(st)
        self._open_tb(st, Traceback(rec.stream, rec, self.context_for(rec), chained_from=chained))
        st.pending_chain = None
        st.tb.add(rec)
        st.phase = "frames"
        return LineRole.START

    def _outside(self, st: _StreamState, rec: Record, stripped: str) -> LineRole | None:
        """A line of a stream with no open traceback: a Ray task error header opens one, as does a frame
        (a traceback whose header was cut off); a chain marker waits for the next; None when the line
        is then the open traceback's (a frame) to read."""
        msg = rec.message
        if RAY_TASK_MARKER in msg and not msg[:1].isspace():
            m = RAY_HEADER_RE.search(msg)
            if m:
                tb = Traceback(rec.stream, rec, self.context_for(rec))
                self._open_tb(st, tb)
                tb.task, tb.task_pid, tb.task_node = m.group("task"), log_int(m.group("pid")), m.group("ip")
                tb.add(rec)
                st.phase = "frames"
                parsed = parse_exception_line(stripped)
                if parsed is not None:
                    tb.exceptions.append(RaisedException(parsed[0], parsed[1], rec))
                    return LineRole.EXCEPTION
                return LineRole.MESSAGE
        if FRAME_MARKER in msg and FRAME_RE.match(msg):
            # a traceback whose header was cut off (an excerpt, a rotated file): start it here
            self._open_tb(
                st, Traceback(rec.stream, rec, self.context_for(rec), chained_from=st.pending_chain)
            )
            st.pending_chain = None
            st.phase = "frames"
            return None
        if stripped in CHAIN_MARKERS:
            st.pending_chain = st.last_closed
            return LineRole.FRAME
        if stripped:
            self._remember(st, rec)
        return LineRole.NONE

    def _in_frames(self, st: _StreamState, rec: Record, stripped: str) -> LineRole:
        """A line among the frames: a frame's source line, a caret line, or the exception that ends them."""
        tb = st.tb
        if rec.message[:1].isspace() or not stripped:
            # the source line under a frame, caret markers, or faulthandler detail
            if st.phase == "code" and tb.frames and tb.frames[-1].code is None and stripped:
                tb.frames[-1].code = clip(stripped)
                st.phase = "frames"
            tb.add_frame_line(rec)
            return LineRole.FRAME
        parsed = parse_exception_line(stripped)
        if parsed is None:
            if st.phase == "code" and tb.frames and tb.frames[-1].code is None:
                # the source line under a frame, its indentation lost in a paste
                tb.frames[-1].code = clip(stripped)
                tb.add_frame_line(rec)
                st.phase = "frames"
                return LineRole.FRAME
            # an unrelated line of the same stream printed inside the traceback (interleaving)
            self._remember(st, rec)
            return LineRole.NONE
        etype, emsg = parsed
        tb.exceptions.append(RaisedException(etype, emsg, rec))
        if RAY_TASK_ERROR in etype:
            # nested task errors (TaskRunner.run -> WorkerDict.update_actor): the innermost names the worker
            m = RAY_TASK_RE.search(emsg)
            if m:
                tb.task = m.group("task")
                tb.task_pid = log_int(m.group("pid")) if m.group("pid") else None
                tb.task_node = m.group("ip")
        tb.add(rec)
        st.phase = "message"
        return LineRole.EXCEPTION

    def _in_message(self, st: _StreamState, rec: Record, stripped: str) -> LineRole:
        """A continuation line of a multi-line exception message, or what ends it."""
        tb = st.tb
        msg = rec.message
        exc = tb.exceptions[-1]
        if (
            RAY_TASK_MARKER in msg
            and RAY_HEADER_RE.search(msg)
            and not stripped.startswith(RAY_TASK_ERROR_LINE)
        ):
            # the next Ray task error starts right after this one (Ray prints one per failed task)
            self._close(st)
            return self._feed(st, rec)
        if not stripped:
            if exc.message or exc.extra:
                tb.add(rec)
                self._close(st)
                return LineRole.NONE
            return LineRole.MESSAGE
        if rec.origin.level is not None or rec.origin.time is not None or len(exc.extra) >= MAX_MESSAGE_LINES:
            self._close(st)
            self._remember(st, rec)
            return LineRole.NONE
        parsed = parse_exception_line(stripped)
        if parsed is not None and tb.task is not None and RAY_TASK_ERROR in exc.type:
            # Ray prints the inner exception right after the RayTaskError header when frames are hidden
            tb.exceptions.append(RaisedException(parsed[0], parsed[1], rec))
            tb.add(rec)
            return LineRole.EXCEPTION
        exc.extra.append(stripped)
        tb.add(rec)
        return LineRole.MESSAGE

    def close_all(self) -> None:
        """Close every open traceback, in the order they opened."""
        for stream, st in list(self._active.items()):
            self._close(st)
            self._put(stream, st)
