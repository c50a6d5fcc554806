"""A carriage return rewrites the terminal, not the log: a fatal line that a `\\r` and a progress bar's
redraw follow is still the fatal line (`torch.OutOfMemoryError: ...\\r 50%|##   | 3/6` came out
HEALTHY, exit 0). The last segment of a line that is not a bar's redraw is its message; a line of
redraws only is its last redraw, so bars behind a Ray prefix and a `\\r` are read as before, with and
without the progress lines' fast path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logparse.process import EXIT_FAILURE_FOUND
from logparse.read.normalize import Normalizer, carriage_message
from logparse.read.sources import Line
from tests.conftest import run_cli
from tests.logparse.read.test_progress_lines import assert_same_reports

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
BAR = "Training Progress:  50%|█████     | 3/6 [00:04<00:04,  1.52s/it]"
RAY = "\x1b[36m(WorkerDict pid=4187, ip=10.0.0.2)\x1b[0m "


@pytest.mark.parametrize(
    "message,expected",
    [
        (f"{OOM}\r 50%|##   | 3/6", OOM),
        (f"\r{BAR}", BAR),
        (f"\r{BAR}\r{BAR.replace('3/6', '4/6')}", BAR.replace("3/6", "4/6")),
        (f"{BAR}\r{OOM}", OOM),
        (
            "Generating train split: 0 examples [00:00, ? examples/s]\rGenerating train split: 16 examples "
            "[00:00, 4029.11 examples/s]",
            "Generating train split: 16 examples [00:00, 4029.11 examples/s]",
        ),
        ("16it [00:00, 4029.11it/s]\rRuntimeError: x", "RuntimeError: x"),
        (f"Traceback (most recent call last):\r{BAR}", "Traceback (most recent call last):"),
        (
            "RuntimeError: first\rValueError: second",
            "ValueError: second",
        ),  # (as before: text redrawn by text)
        (f"RuntimeError: first\r{BAR}\rValueError: second\r{BAR}", "ValueError: second"),
        ("\r \r", ""),
    ],
)
def test_the_message_of_a_line_with_carriage_returns(message: str, expected: str) -> None:
    assert carriage_message(message) == expected
    line = Line("x.log", 1, "(WorkerDict pid=4187, ip=10.0.0.2) " + message)  # (a Line has no colour codes)
    assert Normalizer().normalize(line).message == expected


@pytest.mark.parametrize("prefix", ["", "[rank3]: ", RAY], ids=["bare", "rank", "ray"])
@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_fatal_line_a_bar_redraws_is_found(tmp_path: Path, prefix: str, fmt: str) -> None:
    log = tmp_path / "job.log"
    log.write_text(f"{prefix}INFO start\n{prefix}{OOM}\r 50%|##   | 3/6\n{prefix}\r{BAR}\n")
    result = run_cli(["scan", str(log), "--format", fmt])
    assert result.exit_code == EXIT_FAILURE_FOUND, result.output
    if fmt == "json":
        report = json.loads(result.stdout)
        assert report["root_cause"]["id"] == "cuda-oom"
        assert report["root_cause"]["error_line"]["line"] == 2


def test_a_fatal_line_a_bar_redraws_is_an_alert() -> None:
    result = run_cli(["scan", "-", "--format", "json"], input=f"{RAY}{OOM}\r{BAR}\n")
    assert result.exit_code == EXIT_FAILURE_FOUND
    assert "verl-logscan: ALERT cuda-oom" in result.stderr


def test_bars_behind_a_ray_prefix_are_read_the_same_with_and_without_the_fast_path(tmp_path: Path) -> None:
    """Bars alone, bars redrawn in one line, a bar after text, text after a bar: the progress lines'
    fast path and the normaliser make the same message of each (the reports are identical)."""
    lines = ["(TaskRunner pid=7) INFO start"]
    for step in range(1, 7):
        bar = BAR.replace("3/6", f"{step}/6")
        lines += [
            f"{RAY}\r{bar}",
            f"{RAY}\r{bar}\r{bar}",
            f"{RAY}checkpoint saved\r{bar}",
            f"{RAY}\r{bar}\rwaiting for the rollout",
            f"(TaskRunner pid=7) step:{step} - actor/pg_loss:0.{step} - timing_s/step:1.5",
        ]
    lines.append(f"{RAY}{OOM}\r{BAR}")
    log = tmp_path / "bars.log"
    log.write_text("\n".join(lines) + "\n")
    assert_same_reports(log, tmp_path)
    report = json.loads(run_cli(["scan", str(log), "--format", "json"]).stdout)
    assert report["root_cause"]["id"] == "cuda-oom"
    assert report["progress"]["last_step"] == 6


# -- a line longer than MAX_LINE_BYTES made of redraws (a tqdm bar written to a file, not a terminal) ------


def _redraws(count: int) -> str:
    return "".join(f"Training Progress: {i % 100}%|###| {i}/99999 [00:01<00:07]\r" for i in range(count))


@pytest.mark.slow  # 22 MB of redraws: about 1.4 s a case
@pytest.mark.parametrize("redraws", [16_000, 25_000, 400_000], ids=["0.9MB", "1.3MB", "22MB"])
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_failure_after_a_megabyte_of_redraws_survives_the_cut(
    tmp_path: Path, redraws: int, workers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.9 MB of redraws gave FAILED, 1.2 MB HEALTHY (exit 0): the cut kept the head of the line."""
    monkeypatch.setenv("VERL_LOGSCAN_READER_MB", "0.0001" if workers == "2" else "off")
    log = tmp_path / "job.log"
    log.write_text("2025-01-01 12:00:00 INFO start training\n" + _redraws(redraws) + OOM + "\n")
    result = run_cli(["scan", str(log), "--format", "json", "--workers", workers])
    assert result.exit_code == EXIT_FAILURE_FOUND, result.output
    report = json.loads(result.stdout)
    assert report["root_cause"]["id"] == "cuda-oom"
    assert report["root_cause"]["evidence"][-1]["line"] == 2


def test_a_segment_that_is_no_bar_survives_the_cut_wherever_it_is(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    middle = "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error"
    log.write_text("INFO start\n" + _redraws(20_000) + middle + "\r" + _redraws(20_000) + "\n")
    report = json.loads(run_cli(["scan", str(log), "--format", "json"]).stdout)
    assert report["root_cause"] is not None and "NCCL" in json.dumps(report["root_cause"]), report


def test_long_line_keeps_non_bars_and_the_tail_within_the_limit() -> None:
    from logparse.read.sources import MAX_LINE_BYTES, LongLine

    long = LongLine()
    text = (_redraws(30_000) + "ValueError: kept\r" + _redraws(30_000)).encode() + b"tail text"
    for i in range(0, len(text), 65_536):  # fed in pieces, as chunks arrive
        long.feed(text[i : i + 65_536])
    line = long.line()
    assert len(line) <= MAX_LINE_BYTES
    segments = line.split(b"\r")
    assert segments[0] == b"ValueError: kept" and segments[-1] == b"tail text"
    assert len(segments) == 3  # the last redraw before the tail stays (what the terminal showed)
    only_text = LongLine()
    only_text.feed(b"x" * (3 * MAX_LINE_BYTES))
    assert only_text.line() == b"x" * MAX_LINE_BYTES  # no carriage return: the head, as before


def test_the_two_line_cutters_agree() -> None:
    from logparse.read.blocks import cut_blocks
    from logparse.read.sources import CHUNK_BYTES, iter_raw_lines

    data = ("start\n" + _redraws(60_000) + OOM + "\nnext line\n").encode()
    chunks = [data[i : i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)]
    lines = [raw for raw, _ in iter_raw_lines(iter(chunks))]
    blocks = b"".join(block for block, _ in cut_blocks(iter(chunks)))
    assert blocks.split(b"\n")[:-1] == lines
    assert lines[1].endswith(OOM.encode()) and lines[2] == b"next line"
