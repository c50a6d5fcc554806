"""What the terminal shows at the end of a scan, under a real pseudo-terminal of a set width: the
summary wraps to the width with a hanging indent (never a word cut at the edge), the error is a
snippet of at most three lines, the innermost user frame is a `path:line`, and one pytest-style line
ends it. `--help` fits 80 columns without cutting a description."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SAMPLES
from tests.logparse.test_terminal import SGR, drain, open_pty, screen_lines

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pty behaviour checked on Linux")

CLI = [sys.executable, "-m", "logparse"]
OOM_SAMPLE = SAMPLES / "ray-actor-exception.log"
INDENT = " " * 11  # two blanks and a label of nine ("symptoms" and a blank): where a field's text starts
OUTCOME = re.compile(r"^(FAILED|HEALTHY|EMPTY)\b.* · ")


def on_pty(
    args: list[str],
    columns: int,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    stdin: bytes | None = None,
    timeout: float = 60,
) -> tuple[list[str], int, str]:
    """Run the CLI with stdout and stderr on one pty `columns` wide (stdin: a pipe fed `stdin`, else
    nothing). Returns (the screen's lines, colour codes dropped; exit code; what was drawn, raw)."""
    master, slave = open_pty(columns)
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")}
    base.update(TERM="xterm", **(env or {}))
    p = subprocess.Popen(
        CLI + args,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=base,
        cwd=cwd,
    )
    os.close(slave)
    shown = bytearray()
    reader = drain(master, shown)
    try:
        if stdin is not None:
            p.stdin.write(stdin)
            p.stdin.close()
        code = p.wait(timeout=timeout)
    finally:
        if p.poll() is None:
            p.kill()
    reader.join(timeout=10)
    os.close(master)
    raw = shown.decode("utf-8", "replace")
    return screen_lines(raw), code, raw


def field(lines: list[str], label: str) -> list[str]:
    """A field's lines: its labelled line and the continuation lines indented under its text."""
    start = next(i for i, line in enumerate(lines) if line.startswith(f"  {label:9}"))
    out = [lines[start][11:]]
    for line in lines[start + 1 :]:
        if not line.startswith(INDENT):
            break
        out.append(line[11:])
    return out


@pytest.mark.slow
def test_summary_wraps_to_an_80_column_terminal_with_a_hanging_indent(tmp_path: Path) -> None:
    lines, code, raw = on_pty(["scan", str(OOM_SAMPLE)], columns=80)
    assert code == 1
    assert max(len(line) for line in lines) <= 80, lines
    assert "\x1b[" in raw  # a terminal: coloured
    # every line is a field, a continuation indented under its field's text, or the last line
    for line in lines[1:-1]:
        assert line.startswith(("  ", INDENT)), line
    # the error: a snippet of at most three lines, each word whole, the words in the log's order
    error = field(lines, "error")
    assert 2 <= len(error) <= 3
    words = " ".join(error).rstrip("…").split()
    message = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity"
    )
    assert " ".join(words).startswith(message)
    report = json.loads(
        subprocess.run(CLI + ["scan", str(OOM_SAMPLE), "--format", "json"], capture_output=True).stdout
    )
    full = report["root_cause"]["message"].split()
    assert words[:-1] == full[: len(words) - 1]  # no word cut at the edge of a line
    assert "more characters]" not in raw
    # where: the log's line and the innermost user frame, each a `path:line` a terminal can open
    assert field(lines, "at")[0].startswith(f"{OOM_SAMPLE}:88")
    assert field(lines, "code") == ["/workspace/job/main_ppo.py:89 in _forward_micro_batch"]
    # the fix wraps with its words whole too
    assert " ".join(field(lines, "fix")).startswith("Lower the rollout reservation: `actor_rollout_ref")
    # one pytest-style line ends it
    assert re.fullmatch(r"FAILED cuda-oom · WorkerDict pid 11847 · stage actor-update · \d+\.\d s", lines[-1])


@pytest.mark.slow
def test_a_wide_terminal_keeps_each_field_on_one_line_and_the_summary_names_the_report(
    tmp_path: Path,
) -> None:
    report = tmp_path / "r.html"
    lines, code, _ = on_pty(["scan", str(OOM_SAMPLE), "-o", str(report)], columns=250)
    assert code == 1 and report.exists()
    assert len(field(lines, "at")) == len(field(lines, "stage")) == len(field(lines, "fix")) == 1
    assert len(field(lines, "error")) == 3  # the whole message, which fits in three lines of 250
    assert field(lines, "error")[-1].endswith("#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)")
    assert all(len(line) > 200 for line in field(lines, "error")[:2])  # the width is used
    assert re.fullmatch(
        rf"FAILED cuda-oom · WorkerDict pid 11847 · stage actor-update · \d+\.\d s · full report written "
        rf"to {re.escape(str(report))}",
        lines[-1],
    )


def test_a_narrow_terminal_still_fits_and_stays_within_25_lines() -> None:
    lines, code, _ = on_pty(["scan", str(SAMPLES / "torchrun-sigkill.log")], columns=40)
    assert code == 1
    assert max(len(line) for line in lines) <= 40 and len(lines) <= 25, lines
    assert OUTCOME.match(lines[-2]) and lines[-1].startswith("  ")  # the last line wraps too


@pytest.mark.slow
def test_healthy_and_piped_summaries_end_with_the_outcome_line_but_no_time() -> None:
    lines, code, _ = on_pty(["scan", str(SAMPLES / "ray-healthy.log")], columns=80)
    assert code == 0
    assert re.fullmatch(r"HEALTHY · stage shutdown · step 5 of 5 · completed( · \d+\.\d s)?", lines[-1])
    piped = subprocess.run(CLI + ["scan", str(OOM_SAMPLE)], capture_output=True, text=True, timeout=60)
    last = piped.stdout.splitlines()[-1]
    assert last == "FAILED cuda-oom · WorkerDict pid 11847 · stage actor-update"  # nothing from the clock
    assert not SGR.search(piped.stdout)


@pytest.mark.slow
@pytest.mark.parametrize(
    "command", [[], ["scan"], ["fleet"], ["diff"], ["explain"], ["catalog"], ["catalog", "check"]]
)
def test_help_fits_80_columns_and_cuts_no_description(command: list[str]) -> None:
    lines, code, _ = on_pty([*command, "--help"], columns=80)
    assert code == 0
    assert max(len(line) for line in lines) <= 80, [line for line in lines if len(line) > 80]
    described = [line for line in lines if not line.startswith("Usage:")]
    assert not [line for line in described if line.endswith("...")], lines  # click's cut short help
