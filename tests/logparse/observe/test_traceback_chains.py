"""An unbroken chain of "During handling of the above exception" keeps its first and latest tracebacks
(MAX_CHAIN_LINKS) and counts the ones between: memory stays flat however long the chain (20,000 links
held 168 MB, 80,000 held 554 MB), and the report shows the first earlier exception, how many were left
out, and the latest ones, as it shows the frames a deep traceback cut."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from logparse.decide.verdict import traceback_view
from logparse.observe.tracebacks import CHAIN_SHOWN, MAX_CHAIN_LINKS, Traceback, TracebackAssembler
from logparse.read.normalize import Normalizer
from logparse.read.sources import Line
from tests.conftest import run_cli

CHAIN_MARKER = "During handling of the above exception, another exception occurred:"


def chain_lines(links: int, last: str | None = None) -> list[str]:
    lines = ["[rank0]: INFO start"]
    for i in range(links):
        if i:
            lines += ["[rank0]: ", f"[rank0]: {CHAIN_MARKER}", "[rank0]: "]
        lines += [
            "[rank0]: Traceback (most recent call last):",
            f'[rank0]:   File "/app/train.py", line {i + 10}, in step',
            "[rank0]:     handle(batch)",
            f"[rank0]: {last}" if last and i == links - 1 else f"[rank0]: KeyError: 'retry {i}'",
        ]
    return lines


def assemble(links: int) -> tuple[TracebackAssembler, int]:
    """The chain fed to an assembler; with the Traceback objects still alive once it is done."""
    normalizer = Normalizer()
    assembler = TracebackAssembler()
    for n, text in enumerate(chain_lines(links), 1):
        assembler.feed(normalizer.normalize(Line("x.log", n, text)))
    assembler.close_all()
    gc.collect()
    return assembler, sum(isinstance(o, Traceback) for o in gc.get_objects())


def chain_length(tb: Traceback) -> int:
    n = 1
    while tb.chained_from is not None:
        tb, n = tb.chained_from, n + 1
    return n


def test_a_long_chain_keeps_its_first_and_latest_links_and_counts_the_rest() -> None:
    assembler, _ = assemble(2_000)
    last = assembler.kept()[-1]
    assert chain_length(last) == MAX_CHAIN_LINKS
    earlier, cut = last.earlier()
    assert len(earlier) + cut == 2_000 - 1
    assert earlier[0].message == "'retry 0'" and earlier[-1].message == "'retry 1998'"
    shown, left_out = last.chain_shown()
    assert [e.message for e in shown] == ["'retry 0'", *(f"'retry {i}'" for i in range(1995, 1999))]
    assert len(shown) == CHAIN_SHOWN and left_out == 2_000 - 1 - CHAIN_SHOWN


@pytest.mark.slow
def test_memory_of_a_chain_is_flat() -> None:
    """The tracebacks alive after a chain of 20,000 links are as many as after one of 5,000 (the kept
    ones: the first and the most recent closed, each chain's first and latest links)."""
    small = assemble(5_000)[1]
    large = assemble(20_000)[1]
    assert large == small


def test_a_short_chain_is_shown_whole() -> None:
    assembler, _ = assemble(CHAIN_SHOWN + 1)
    view = traceback_view(assembler.kept()[-1])
    assert view.chain == tuple(f"KeyError: 'retry {i}'" for i in range(CHAIN_SHOWN))
    assert view.chain_cut == 0 and view.chain_cut_after == 0


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["json", "md", "html"])
def test_the_report_notes_the_cut_of_a_chain(tmp_path: Path, fmt: str) -> None:
    log = tmp_path / "job.log"
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    log.write_text("\n".join(chain_lines(3_000, last=oom)) + "\n")
    result = run_cli(["scan", str(log), "--format", fmt])
    assert result.exit_code == 1, result.output
    out = result.stdout
    left_out = 3_000 - 1 - CHAIN_SHOWN
    if fmt == "json":
        tb = json.loads(out)["root_cause"]["traceback"]
        assert tb["chain"] == ["KeyError: 'retry 0'", *(f"KeyError: 'retry {i}'" for i in range(2995, 2999))]
        assert tb["chain_cut"] == left_out
    else:
        assert f"{left_out} earlier exception(s) of the chain left out" in out
        first, cut, latest = out.index("retry 0"), out.index(f"{left_out} earlier"), out.index("retry 2995")
        assert first < cut < latest
