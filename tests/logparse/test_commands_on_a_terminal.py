"""`explain` and `catalog check` as a user sees them, the real command under a pty of 80 columns: rows
wrap at spaces (no `gpu_memory_utiliz` / `ation` that the terminal cut), headings bold and problems
red when colour is on; `catalog check` points a failing example at its own line, and warns when a
built-in entry beats a custom one on that entry's own example (naming it and its priority)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.logparse.test_diff_presentation import SGR, on_pty

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="pty behaviour checked on Linux"),
    pytest.mark.slow,  # 2-4 s each: the CLI as a process on a pty (catalog checks, a stall waited out)
]

# an entry of our own that names the CUDA OOM wording the built-in `cuda-oom` (priority 90) names too
MINE = """\
- id: team-oom
  title: The OOM wording our cluster's wrapper prints
  category: cuda-oom
  role: cause
  severity: fatal
  priority: 50
  keywords: ['CUDA out of memory']
  patterns:
    - 'CUDA out of memory\\. Tried to allocate'
  message: 'GPU memory exhausted'
  remediation:
    summary: Out of GPU memory.
    why: The batch does not fit.
    fix:
      - Lower the batch size.
    references: []
  examples:
    match:
      - 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.'
      - 'a line that is no OOM at all'
    no_match:
      - line: 'step:3 - loss:1.0'
        why: a healthy step line
"""


def rows(shown: str) -> list[str]:
    return SGR.sub("", shown).splitlines()


def test_explain_wraps_at_spaces_on_80_columns() -> None:
    shown, code = on_pty(["explain", "cuda-oom"])
    assert code == 0
    lines = rows(shown)
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    assert "gpu_memory_utilization" in text  # whole, on one row
    assert not re.search(r"gpu_memory_utiliz\n", text)
    # a fix step's continuation rows hang under its text, after `1. `
    step = next(i for i, line in enumerate(lines) if line.startswith("  1. "))
    assert lines[step + 1].startswith("     ") and lines[step + 1][5] != " "
    assert "\x1b[1mWhat it is\x1b[0m" in shown  # headings bold on a terminal
    plain, _ = on_pty(["explain", "cuda-oom"], env={"NO_COLOR": "1"})
    assert "\x1b[" not in plain


def test_catalog_check_points_at_the_example_and_warns_of_a_stronger_built_in(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(MINE)
    shown, code = on_pty(["catalog", "check", str(mine)])
    assert code == 2
    text = " ".join(" ".join(rows(shown)).split())  # the rows joined back, as one would read them
    assert max(len(line) for line in rows(shown)) <= 80
    # the failing example is on line 20 of the file, the entry starts on line 1
    assert f"{mine}:20: entry 'team-oom': match example does not match" in text
    assert (
        f"{mine}:19: warning: entry 'team-oom' (priority 50) fires on this example, but the built-in "
        "entry 'cuda-oom' (priority 90, cuda-oom) is the root cause" in text
    )
    assert "\x1b[33m" in shown and "\x1b[31m" in shown  # the warning yellow, the failure red
    # fixed: no failure, the warning stays and the result says so
    mine.write_text(MINE.replace("      - 'a line that is no OOM at all'\n", ""))
    shown, code = on_pty(["catalog", "check", str(mine)])
    assert code == 0
    assert "catalog ok: 1 entry, 2 examples; 1 warning" in " ".join(rows(shown))
    mine.write_text(
        MINE.replace("priority: 50", "priority: 95").replace("      - 'a line that is no OOM at all'\n", "")
    )
    shown, code = on_pty(["catalog", "check", str(mine)])
    assert code == 0 and "warning" not in shown


def test_stall_alert_is_coloured_and_names_where_each_stream_stopped(tmp_path: Path) -> None:
    """A torchrun job that hangs after step 2, piped in and left open: the stall ALERT on a terminal is
    bold magenta, its streams dim; a stream's last line is its message without torchrun's launcher
    prefix (the stream's name says whose it is); output without a prefix is `unprefixed output`."""
    import os
    import subprocess
    import time

    from tests.conftest import FIXTURES, ROOT
    from tests.logparse.test_terminal import drain, open_pty

    log = (FIXTURES / "stalls" / "torchrun-hang-py-spy" / "train.log").read_bytes()
    master, slave = open_pty(100)
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS")}
    cmd = [
        sys.executable,
        "-m",
        "logparse",
        "scan",
        "--stall-after",
        "1s",
        "-",
        "-o",
        str(tmp_path / "r.json"),
    ]
    p = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=slave, env=env, cwd=ROOT
    )
    os.close(slave)
    shown = bytearray()
    reader = drain(master, shown)
    try:
        assert p.stdin is not None
        p.stdin.write(log)
        p.stdin.flush()
        deadline = time.monotonic() + 60
        while b"last wrote" not in shown and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
    finally:
        if p.stdin is not None:
            p.stdin.close()
        p.wait(timeout=60)
        reader.join(timeout=10)
        os.close(master)
    text = shown.decode("utf-8", "replace")
    assert "\x1b[1m\x1b[35mverl-logscan: ALERT stalled: no new step" in text, text
    plain = SGR.sub("", text)
    assert "pid 1938 last wrote <stdin>:12: Sending process 1973 closing signal SIGTERM" in plain
    assert "torch/distributed/elastic/multiprocessing/api.py:1028]" not in plain.split("last wrote", 1)[1]
    assert "unprefixed output last wrote <stdin>:40:" in plain and "(no prefix)" not in plain


def test_fleet_status_column_is_coloured_as_scan_colours_its_verdict() -> None:
    from tests.conftest import FIXTURES, SAMPLES

    jobs = [str(SAMPLES / "torchrun-rank-exception.log"), str(SAMPLES / "torchrun-healthy.log")]
    shown, code = on_pty(["fleet", *jobs, str(FIXTURES / "stalls" / "torchrun-hang-py-spy")])
    assert code == 1
    assert "\x1b[1m\x1b[31mfailed\x1b[0m" in shown and "\x1b[32mhealthy\x1b[0m" in shown
    assert "\x1b[1m\x1b[35mstalled\x1b[0m" in shown
    assert max(len(line) for line in rows(shown)) <= 80  # the table still fits: colour takes no column
    plain, _ = on_pty(["fleet", *jobs], env={"NO_COLOR": "1"})
    assert "\x1b[" not in plain


def test_scan_warning_wraps_and_is_yellow(tmp_path: Path) -> None:
    from tests.conftest import SAMPLES

    for name in ("torchrun-sigkill.log", "ray-import-error.log", "torchrun-healthy.log"):
        (tmp_path / name).write_bytes((SAMPLES / name).read_bytes())
    shown, _ = on_pty(["scan", str(tmp_path)])
    warning = next(i for i, line in enumerate(rows(shown)) if "verl-logscan: warning:" in line)
    assert "\x1b[33mverl-logscan: warning:" in shown
    said = rows(shown)[warning : warning + 8]
    assert max(len(line) for line in said) <= 80, said
    assert "looks like 3 jobs" in " ".join(" ".join(said).split())


def test_fatal_alert_wraps_at_spaces_to_the_terminal(tmp_path: Path) -> None:
    from tests.logparse.test_terminal import OOM, run_live

    shown, _, _ = run_live(tmp_path, [(OOM, 0.5)], 60, {})
    text = shown.replace("\r\n", "\n")
    start = text.index("verl-logscan: ALERT")
    alert = SGR.sub("", text[start:]).split("\n")[:5]
    assert "\x1b[1m\x1b[31mverl-logscan: ALERT cuda-oom" in text
    assert all(len(row.split("\r")[-1]) <= 60 for row in alert[:3]), alert
    assert "CUDA out of memory." in " ".join(" ".join(alert).split())
