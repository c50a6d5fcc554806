"""Property-based tests (hypothesis) for the reader, the normaliser, the traceback assembler and a whole
scan. Modest example counts keep the suite fast; benchmarks/fuzz_run.py runs the long version."""

from __future__ import annotations

import io
import json
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logparse.observe.tracebacks import TracebackAssembler
from logparse.pipeline import Analysis
from logparse.read import sources as reader
from logparse.read.normalize import Normalizer
from logparse.read.sources import (
    InputStats,
    Line,
    binary_format,
    iter_lines,
    iter_raw_lines,
    sniff,
    strip_ansi,
)
from patterns import load_catalog
from reports import render

FUZZ = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
SLOW_FUZZ = settings(
    max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


def expected_lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def cut(data: bytes, sizes: list[int]) -> list[bytes]:
    """`data` in pieces of the given sizes (cycled), the way a pipe or a decompressor hands it over."""
    out, pos, i = [], 0, 0
    while pos < len(data):
        n = sizes[i % len(sizes)] if sizes else len(data)
        out.append(data[pos : pos + n])
        pos += n
        i += 1
    return out


class Trickle(io.RawIOBase):
    """A stream whose reads return pieces of fixed sizes, like a pipe."""

    def __init__(self, pieces: list[bytes]):
        self.pieces = list(pieces)

    def readable(self) -> bool:
        return True

    def read1(self, n: int = -1) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""

    read = read1


sizes = st.lists(st.integers(1, 97), min_size=1, max_size=8)
TEXT_BYTES = st.binary(max_size=3000).map(lambda b: b.replace(b"\x00", b"").replace(b"\r", b""))
TEXTISH = st.lists(
    st.sampled_from(
        [
            b"a",
            b"line",
            b" ",
            b"\t",
            b"\n",
            b"\n\n",
            b"\xc3\xa9",
            b"\xff",
            b"\x1b[31m",
            b"[rank1]: ",
            b"x" * 70,
        ]
    ),
    max_size=200,
).map(b"".join)


@FUZZ
@given(st.binary(max_size=4000), sizes, st.integers(1, 80))
def test_raw_lines_conserve_the_line_count(data: bytes, chunk_sizes: list[int], max_line: int) -> None:
    with mock.patch.object(reader, "MAX_LINE_BYTES", max_line):
        lines = list(iter_raw_lines(iter(cut(data, chunk_sizes))))
    assert len(lines) == expected_lines(data)
    assert all(len(raw) <= max_line for raw, _ in lines)
    if not any(t for _, t in lines):
        assert b"\n".join(raw for raw, _ in lines) == (data[:-1] if data.endswith(b"\n") else data)


@FUZZ
@given(st.one_of(TEXT_BYTES, TEXTISH), sizes, st.integers(1, 200))
def test_iter_lines_conserves_lines_of_text_at_any_chunk_boundary(
    data: bytes, chunk_sizes: list[int], max_line: int
) -> None:
    if data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        data = b"x" + data
    stats = InputStats("x")
    with mock.patch.object(reader, "MAX_LINE_BYTES", max_line):
        lines = list(iter_lines(Trickle(cut(data, chunk_sizes)), "x", stats))
    assert sniff(data) == "utf-8"
    assert len(lines) == expected_lines(data) == stats.lines
    assert [line.number for line in lines] == list(range(1, len(lines) + 1))
    assert stats.bytes == len(data)
    for line in lines:
        assert "\n" not in line.text and "\x00" not in line.text


@FUZZ
@given(st.binary(max_size=5000), sizes)
def test_iter_lines_never_raises_on_any_bytes(data: bytes, chunk_sizes: list[int]) -> None:
    stats = InputStats("x")
    lines = list(iter_lines(Trickle(cut(data, chunk_sizes)), "x", stats))
    assert stats.bytes == len(data)
    kind = sniff(data)
    if kind == "binary" and binary_format(data) is not None:  # (a known binary format: skipped whole)
        assert lines == []
    else:  # (binary data elsewhere is found region by region: its lines are read as empty lines)
        assert len(lines) <= max(expected_lines(data), expected_lines(data.replace(b"\r", b"\n"))) + 1
    for line in lines:
        line.text.encode("utf-8")  # no lone surrogate
        assert "\x00" not in line.text


PREFIXES = [
    "",
    "(WorkerDict pid=1234, ip=10.0.0.2) ",
    "(TaskRunner pid=8127) ",
    "(raylet) ",
    "(raylet, ip=10.0.0.1) ",
    "[rank3]: ",
    "[rank12]:",
    "[default0]: ",
    "[trainer7]: ",
    "[E1003 18:37:01.832146912 ProcessGroupNCCL.cpp:607] ",
    "[W314 14:33:45.172185860 socket.cpp:755] ",
    "W0731 10:50:07.575000 3247964 api.py:897] ",
    "E0731 10:50:07.575000 12 torch/x.py:1] ",
    "ERROR 05-22 14:41:15 [core.py:1102] ",
    "INFO 03-14 14:33:45 [file.py:123] ",
    "INFO:2025-08-22 23:08:37,898:",
    "2025-04-30 20:59:12,200\tINFO worker.py:1832 -- ",
    "[2025-11-20 01:13:05 TP0] ",
    "2025-11-20T01:13:05.123Z ERROR ",
    "node-1:1234:5678 [0] ",
    "\x1b[36m(WorkerDict pid=7, ip=10.0.0.3)\x1b[0m ",
    "(pid=99) ",
    "[rank-1]: ",
    "[rank",
    "(",
    "[",
]
MESSAGES = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "Traceback (most recent call last):",
    '  File "/app/train.py", line 88, in main',
    "    step(batch)",
    "ValueError: bad",
    "step:3 - loss:1.0",
    "NCCL WARN Timeout",
    "Training Progress: 1/4\rTraining Progress: 2/4",
    "",
    " ",
    "x",
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970",
]
SUFFIXES = [
    "",
    " [repeated 7x across cluster]",
    " [repeated 3x across cluster] (Ray deduplicates logs by default. x)",
    "\r",
    "\x1b[0m",
]


@FUZZ
@given(
    st.lists(st.sampled_from(PREFIXES), max_size=10),
    st.one_of(st.sampled_from(MESSAGES), st.text(max_size=80)),
    st.sampled_from(SUFFIXES),
)
@pytest.mark.slow
def test_normaliser_never_raises_and_the_message_comes_from_the_line(
    prefixes: list[str], message: str, suffix: str
) -> None:
    text = strip_ansi("".join(prefixes) + message + suffix)
    norm = Normalizer()
    rec = norm.normalize(Line("job.log", 1, text))
    assert rec.message in text
    assert rec.origin.repeat >= 1
    for value in (rec.origin.rank, rec.origin.local_rank, rec.origin.pid):
        assert value is None or isinstance(value, int)
    assert isinstance(rec.stream, tuple) and rec.stream[0] == "job.log"


TRACEBACKS = [
    [
        "Traceback (most recent call last):",
        '  File "/app/train.py", line 88, in main',
        "    step(batch)",
        '  File "/usr/lib/python3/site-packages/torch/nn/module.py", line 1532, in _call_impl',
        "    return forward(*args)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "",
    ],
    [
        "Traceback (most recent call last):",
        '  File "/a.py", line 1, in f',
        "    g()",
        "KeyError: 1",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/a.py", line 3, in h',
        "    f()",
        "RuntimeError: wrapped",
    ],
    [
        (
            "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_update_actor() "
            "(pid=11847, ip=10.0.0.1, actor_id=84374d18df1b0a814305530501000000)"
        ),
        "Traceback (most recent call last):",
        '  File "/verl/workers/fsdp_workers.py", line 10, in update_actor',
        "    self.actor.update()",
        "torch.OutOfMemoryError: CUDA out of memory.",
    ],
    [
        "Traceback (most recent call last):",
        '  File "/x/run.py", line 9, in <module>',
        "    main()",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "train.py FAILED",
        "Failures:",
        "  <NO_OTHER_FAILURES>",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2025-01-01_00:00:00",
        "  host      : node1",
        "  rank      : 1 (local_rank: 1)",
        "  exitcode  : -9 (pid: 123)",
        "  error_file: <N/A>",
        "  traceback : Signal 9 (SIGKILL) received by PID 123",
        "============================================================",
    ],
    ['  File "/cut/header.py", line 5, in f', "    x()", "ZeroDivisionError: division by zero"],
    ["Traceback (most recent call last):", '  File "/never/ends.py", line 1, in f', "    g()"],
    ["INFO step:1 - loss:1.0", "some unrelated line", "Exception: plain", "continued message"],
]
STREAM_PREFIXES = [
    "[rank0]: ",
    "[rank1]: ",
    "[rank2]: ",
    "(WorkerDict pid=11, ip=10.0.0.1) ",
    "(WorkerDict pid=12, ip=10.0.0.1) ",
    "[default3]: ",
    "",
]


@FUZZ
@given(
    st.lists(
        st.tuples(st.sampled_from(range(len(STREAM_PREFIXES))), st.sampled_from(range(len(TRACEBACKS)))),
        min_size=1,
        max_size=6,
        unique_by=lambda t: t[0],
    ),
    st.lists(st.integers(0, 5), max_size=300),
)
def test_traceback_assembler_keeps_each_traceback_in_one_stream(
    jobs: list[tuple[int, int]], schedule: list[int]
) -> None:
    queues = [[STREAM_PREFIXES[p] + line for line in TRACEBACKS[t]] for p, t in jobs]
    lines: list[str] = []
    for pick in schedule:  # a random interleaving that keeps each stream's own order
        q = queues[pick % len(queues)]
        if q:
            lines.append(q.pop(0))
    for q in queues:
        lines.extend(q)
    norm = Normalizer()
    asm = TracebackAssembler()
    for n, text in enumerate(lines, 1):
        rec = norm.normalize(Line("job.log", n, text))
        rec.seq = n
        asm.feed(rec)
    asm.close_all()
    for tb in asm.kept():
        assert tb.closed
        assert {r.stream for r in tb.all_records()} == {tb.stream}
        assert all(e.record.stream == tb.stream for e in tb.exceptions)


CATALOG = load_catalog()
SAMPLE_LINES = [line for tb in TRACEBACKS for line in tb] + [p + m for p in PREFIXES[:8] for m in MESSAGES]


@pytest.mark.slow  # 7 s: 25 generated logs, each a whole scan to JSON
@SLOW_FUZZ
@given(
    st.lists(st.one_of(st.sampled_from(SAMPLE_LINES), st.text(max_size=60)), max_size=120),
    st.sampled_from(["\n", "\r\n"]),
    st.binary(max_size=40),
)
def test_whole_scan_never_raises_and_gives_valid_json(lines: list[str], newline: str, junk: bytes) -> None:
    data = newline.join(lines).encode("utf-8", "surrogatepass") + junk
    scanner = Analysis(CATALOG)
    stats = InputStats("job.log")
    for line in iter_lines(io.BytesIO(data), "job.log", stats):
        scanner.feed_line(line)
    report = scanner.report()
    text = render(report, "json")
    assert json.loads(text)["status"] in ("failed", "healthy")
    render(report, "md")
    render(report, "text")
