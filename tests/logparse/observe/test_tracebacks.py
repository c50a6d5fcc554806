from __future__ import annotations

import tracemalloc

import pytest

from logparse.observe.tracebacks import (
    MAX_FRAMES,
    MAX_IDLE_STREAMS,
    MAX_TRACEBACK_RECORDS,
    LineRole,
    TracebackAssembler,
)
from logparse.read.normalize import Normalizer
from logparse.read.sources import Line


def feed(lines: list[str]) -> TracebackAssembler:
    n = Normalizer()
    asm = TracebackAssembler()
    for i, text in enumerate(lines, 1):
        asm.feed(n.normalize(Line("x", i, text), i))
    asm.close_all()
    return asm


def test_interleaved_ranks_reassemble_per_rank() -> None:
    lines = []
    a = [
        "Traceback (most recent call last):",
        '  File "/workspace/job/train.py", line 10, in <module>',
        "    main()",
        '  File "/workspace/job/train.py", line 7, in main',
        "    step(x)",
        "ValueError: rank {r} bad batch",
    ]
    for i in range(len(a)):
        for r in (0, 1, 2):
            lines.append(f"[rank{r}]: " + a[i].format(r=r))
    asm = feed(lines)
    tbs = asm.kept()
    assert len(tbs) == 3
    for tb in tbs:
        r = tb.start.origin.rank
        assert tb.final.type == "ValueError"
        assert tb.final.message == f"rank {r} bad batch"
        assert [f.line for f in tb.frames] == [10, 7]
        assert all(rec.origin.rank == r for rec in tb.all_records())
        assert tb.innermost_user_frame().function == "main"


def test_ray_task_error_inner_exception_and_task() -> None:
    asm = feed(
        [
            "Traceback (most recent call last):",
            '  File "/opt/venv/lib/python3.10/site-packages/ray/_private/worker.py", line 2771, in get',
            "    raise value.as_instanceof_cause()",
            "ray.exceptions.RayTaskError(KeyError): ray::WorkerDict.actor_rollout_generate_sequences() "
            "(pid=77, ip=10.0.0.9, actor_id=abc, repr=<x>)",
            '  File "/opt/venv/lib/python3.10/site-packages/verl/workers/fsdp_workers.py", line 5, in generate_sequences',
            "    out = self.rollout.generate(prompts)",
            "KeyError: 'raw_prompt_ids'",
        ]
    )
    (tb,) = asm.kept()
    assert tb.task == "WorkerDict.actor_rollout_generate_sequences"
    assert (tb.task_pid, tb.task_node) == (77, "10.0.0.9")
    assert tb.final.type == "KeyError"
    assert [x.short_type for x in tb.exceptions] == ["RayTaskError(KeyError)", "KeyError"]
    # verl frames are the user's framework, not a library
    assert tb.innermost_user_frame().function == "generate_sequences"


def test_chained_exceptions_link_to_their_cause() -> None:
    asm = feed(
        [
            "Traceback (most recent call last):",
            '  File "/workspace/job/a.py", line 1, in load',
            "KeyError: 'prompt'",
            "",
            "The above exception was the direct cause of the following exception:",
            "",
            "Traceback (most recent call last):",
            '  File "/workspace/job/a.py", line 9, in main',
            "RuntimeError: could not build dataset",
        ]
    )
    tbs = asm.kept()
    assert [t.final.type for t in tbs] == ["KeyError", "RuntimeError"]
    assert tbs[1].chained_from is tbs[0]


def test_multiline_exception_message_is_kept() -> None:
    asm = feed(
        [
            "Traceback (most recent call last):",
            '  File "/opt/venv/bin/torchrun", line 8, in <module>',
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "============================================================",
            "train.py FAILED",
            "Root Cause (first observed failure):",
            "  exitcode  : -9 (pid: 1234)",
            "============================================================",
        ]
    )
    (tb,) = asm.kept()
    assert tb.final.short_type == "ChildFailedError"
    assert "  exitcode  : -9 (pid: 1234)".strip() in tb.final.extra


def test_frame_lines_are_not_matchable() -> None:
    n = Normalizer()
    asm = TracebackAssembler()
    roles = [
        asm.feed(n.normalize(Line("x", i, t), i))
        for i, t in enumerate(
            [
                "Traceback (most recent call last):",
                '  File "/workspace/job/a.py", line 1, in f',
                '    raise RuntimeError("CUDA out of memory")',
                "RuntimeError: boom",
            ],
            1,
        )
    ]
    assert roles == [LineRole.START, LineRole.FRAME, LineRole.FRAME, LineRole.EXCEPTION]


@pytest.mark.slow  # a million frame lines
def test_never_ending_traceback_stays_bounded() -> None:
    """A million frame lines: what is kept is capped (MAX_FRAMES frames, MAX_TRACEBACK_RECORDS lines),
    and memory does not grow between the 100,000th and the 1,000,000th line."""
    n = Normalizer()
    asm = TracebackAssembler()
    asm.feed(n.normalize(Line("x", 1, "Traceback (most recent call last):"), 1))

    def frame(i: int) -> None:
        asm.feed(n.normalize(Line("x", i + 2, f'  File "/workspace/job/deep.py", line {i}, in f{i}'), i + 2))

    for i in range(100_000):
        frame(i)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(100_000, 130_000):
        frame(i)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    for i in range(130_000, 1_000_000):
        frame(i)
    tb = asm.current(("x",))
    assert len(tb.frames) == MAX_FRAMES
    assert len(tb.all_records()) == MAX_TRACEBACK_RECORDS
    assert tb.dropped == 1_000_001 - MAX_TRACEBACK_RECORDS
    assert grown < 200_000  # bytes; the tail ring replaces, it does not append


@pytest.mark.slow
def test_state_is_kept_for_open_tracebacks_and_a_bounded_number_of_idle_streams() -> None:
    """A log from 60,000 processes (a dense run with a fresh pid on every line) and a caught traceback
    now and then: state stays with the open tracebacks and at most MAX_IDLE_STREAMS idle streams, and
    memory does not grow with the number of processes seen."""
    n = Normalizer()
    asm = TracebackAssembler()

    def lines(first: int, last: int) -> None:
        for i in range(first, last):
            pid = 100_000 + i
            asm.feed(n.normalize(Line("x", i, f"(WorkerDict pid={pid}) step:{i} - a:1"), i))
            if i % 2000 == 0:  # a caught error, from a process that then prints nothing more
                for text in (
                    "Traceback (most recent call last):",
                    '  File "/w/up.py", line 3, in put',
                    "ConnectionResetError: [Errno 104] Connection reset by peer",
                ):
                    asm.feed(n.normalize(Line("x", i, f"(WorkerDict pid={pid}) {text}"), i))
                asm.expire("x", i)

    lines(1, 20_000)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    lines(20_000, 60_000)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(asm._active) <= 1 and len(asm._idle) <= MAX_IDLE_STREAMS
    assert asm.total == 28  # (the 29th is still open)
    assert grown < 2_000_000  # bytes: the 20 tracebacks kept, not 40,000 streams' state


def test_idle_streams_remember_nothing_when_context_is_read_back() -> None:
    """With a context provider that reads the raw log back, lines outside tracebacks leave no state."""
    n = Normalizer()
    asm = TracebackAssembler(lambda rec: [], remember_context=lambda rec: False)
    for i in range(1, 5000):
        asm.feed(n.normalize(Line("x", i, f"(WorkerDict pid={i}) loading shard {i}"), i))
    assert not asm._active and not asm._idle


def test_a_chain_marker_links_across_many_interleaved_streams() -> None:
    """The traceback a chain marker links to is still known after hundreds of other processes printed
    (fewer than MAX_IDLE_STREAMS)."""
    n = Normalizer()
    asm = TracebackAssembler()
    seq = 0

    def feed(pid: int, text: str) -> None:
        nonlocal seq
        seq += 1
        asm.feed(n.normalize(Line("x", seq, f"(WorkerDict pid={pid}) {text}"), seq))

    for text in (
        "Traceback (most recent call last):",
        '  File "/w/a.py", line 1, in load',
        "KeyError: 'prompt'",
        "",
    ):
        feed(1, text)
    for pid in range(2, MAX_IDLE_STREAMS // 2):
        feed(pid, "Traceback (most recent call last):")
        feed(pid, "ValueError: other")
        feed(pid, "")
    for text in (
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/w/a.py", line 9, in main',
        "RuntimeError: could not build dataset",
    ):
        feed(1, text)
    asm.close_all()
    (last,) = [tb for tb in asm.kept() if tb.final.type == "RuntimeError"]
    assert last.chained_from is not None and last.chained_from.final.type == "KeyError"


def _wide_tracebacks(width: int, count: int = 12, frames: int = 30) -> list[str]:
    pad = "d" * width
    lines = []
    for i in range(count):
        lines.append(f"[rank{i % 4}]: Traceback (most recent call last):")
        for f in range(frames):
            lines.append(
                f'[rank{i % 4}]:   File "/app/{pad[: width // 2]}/m{f}.py", line {f + 1}, in fn_{pad[: width // 2]}'
            )
            lines.append(f"[rank{i % 4}]:     x = call_{pad}({i})")
        lines.append(f"[rank{i % 4}]: ValueError: bad batch {i}")
    return lines


def test_the_text_kept_per_frame_is_bounded() -> None:
    """A 346 MB log of 4,000-character frames peaked at 1.16 GB against 120 MB with 100-character
    frames: every frame line was kept whole, several times over (line, message, file, function, code)."""
    from logparse.observe.tracebacks import MAX_FRAME_CHARS

    def kept(width: int) -> int:
        tracemalloc.start()
        asm = feed(_wide_tracebacks(width))
        size = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        tbs = asm.kept()
        for tb in tbs:
            for frame in tb.frames:
                for text in (frame.file, frame.function, frame.code or ""):
                    assert len(text) <= MAX_FRAME_CHARS + 3 and text.isascii()
            for rec in tb.all_records()[1:-1]:  # (the frames' lines: the header and exception are whole)
                assert len(rec.line.text) <= MAX_FRAME_CHARS + 3 and len(rec.message) <= MAX_FRAME_CHARS + 3
        del asm
        return size

    assert kept(4_000) < 2.5 * kept(400)  # (was 10x: the text grew with the width)
    asm = feed(_wide_tracebacks(4_000, count=1))
    (tb,) = asm.kept()
    assert tb.frames[0].file.endswith("...") and tb.final.message == "bad batch 0"
