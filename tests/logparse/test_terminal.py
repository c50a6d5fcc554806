"""The live status line under a real pseudo-terminal of a set width: cut to the width, wiped before an
alert and before passed-through text, never in the --tee'd stdout, dimmed only when colour is on
(NO_COLOR honoured). The CLI runs as a child process with its stderr (and in one case its stdout) on
the pty; a writer feeds its stdin slowly so that the status is redrawn between lines."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pty behaviour checked on Linux")

CLI = [sys.executable, "-m", "logparse"]
STEP = "(TaskRunner pid=1) step:{n} - actor/pg_loss:np.float64(0.1) - timing_s/step:1.5\n"
OOM = (
    "(WorkerDict pid=7, ip=10.0.0.2) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
    "GPU 0 has a total capacity of 79.11 GiB of which 1.00 GiB is free.\n"
)
SGR = re.compile(r"\x1b\[[0-9;]*m")
STATUS = "verl-logscan: "


def open_pty(columns: int, rows: int = 24) -> tuple[int, int]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    return master, slave


def drain(fd: int, into: bytearray) -> threading.Thread:
    """Read a pty master until the child side closes (EIO on Linux)."""

    def run() -> None:
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                return
            if not data:
                return
            into.extend(data)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def run_live(
    tmp_path: Path,
    chunks: list[tuple[str, float]],
    columns: int,
    env: dict[str, str],
    stdout_on_pty: bool = False,
) -> tuple[str, bytes, int]:
    """`scan --tee -o report.json` on stdin fed `chunks` (text, pause after); stderr on a pty of
    `columns`. Returns (what the pty showed, the bytes stdout got when it is a pipe, exit code)."""
    master, slave = open_pty(columns)
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")}
    base.update(TERM="xterm", **env)
    p = subprocess.Popen(
        CLI + ["scan", "--tee", "-o", str(tmp_path / "report.json")],
        stdin=subprocess.PIPE,
        stdout=slave if stdout_on_pty else subprocess.PIPE,
        stderr=slave,
        env=base,
        cwd=tmp_path,
    )
    os.close(slave)
    shown = bytearray()
    reader = drain(master, shown)
    out = bytearray()
    out_reader = drain(p.stdout.fileno(), out) if p.stdout is not None else None
    try:
        for text, pause in chunks:
            p.stdin.write(text.encode())
            p.stdin.flush()
            time.sleep(pause)
        p.stdin.close()
        code = p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    reader.join(timeout=10)
    if out_reader is not None:
        out_reader.join(timeout=10)
    os.close(master)
    return shown.decode("utf-8", "replace"), bytes(out), code


def segments(shown: str) -> list[str]:
    """What each carriage return or newline starts: the pieces a terminal draws from column 0."""
    return [s for s in re.split(r"[\r\n]", shown) if s]


def feed(steps: int = 6, pause: float = 0.3) -> list[tuple[str, float]]:
    """Step lines, then the fatal line (last: training that went on would make it no root cause)."""
    return [(STEP.format(n=n), pause) for n in range(1, steps + 1)] + [(OOM, pause)]


def status_segments(shown: str) -> list[str]:
    return [s for s in segments(SGR.sub("", shown)) if s.startswith(STATUS) and "ALERT" not in s]


@pytest.mark.slow
def test_status_is_cut_to_the_terminal_width_and_kept_out_of_teed_stdout(tmp_path: Path) -> None:
    chunks = feed()
    shown, out, code = run_live(tmp_path, chunks, columns=50, env={"NO_COLOR": "1"})
    assert code == 1
    assert out == "".join(text for text, _ in chunks).encode()  # stdout: the log, byte for byte
    statuses = status_segments(shown)
    assert statuses, f"no status drawn: {shown!r}"
    # one column short of the width: a full-width line would wrap and leave a stale copy behind; the
    # blanks that wipe a status are as wide as it was
    assert all(len(s) <= 49 for s in statuses + [s for s in segments(shown) if not s.strip()]), statuses
    assert any(len(s) == 49 for s in statuses)  # cut, not merely short
    assert "\x1b" not in shown  # NO_COLOR: no escape sequence at all


@pytest.mark.slow
def test_status_is_wiped_before_an_alert(tmp_path: Path) -> None:
    shown, _, code = run_live(tmp_path, feed(), columns=80, env={"NO_COLOR": "1"})
    assert code == 1
    at = shown.index("verl-logscan: ALERT")
    line = re.split(r"\n", shown[:at])[-1]  # what was drawn on the alert's line before it
    if line:  # a status was up: the last thing before the alert blanks it out and returns
        assert line.endswith("\r")
        last = line[:-1].rsplit("\r", 1)[-1]
        assert last.strip() == "", repr(line)
    # the alert, wrapped at spaces to the 80 columns: its rows up to the end of the message
    rows = [row.rstrip("\r") for row in shown[at:].split("\n")]
    rows = rows[: next(i for i, row in enumerate(rows) if row.endswith("is free.")) + 1]
    assert not any("finding(s)" in row for row in rows) and all(len(row) <= 80 for row in rows), rows
    assert "1.00 GiB is free." in " ".join(" ".join(rows).split())


@pytest.mark.slow
def test_colour_dims_the_status_unless_no_color(tmp_path: Path) -> None:
    shown, _, _ = run_live(tmp_path, feed(steps=3), columns=100, env={})
    assert "\x1b[2m" + STATUS in shown  # dimmed on a colour terminal
    assert all(len(s) <= 99 for s in status_segments(shown))
    shown, _, _ = run_live(tmp_path, feed(steps=3), columns=100, env={"NO_COLOR": "1"})
    assert "\x1b[" not in shown


def screen_lines(shown: str) -> list[str]:
    """The lines a terminal keeps once everything was drawn: CR returns to column 0 and overwrites,
    LF ends the line (the pty turns LF into CR LF). Colour codes are dropped."""
    lines: list[str] = []
    current: list[str] = []
    col = 0
    for ch in SGR.sub("", shown):
        if ch == "\r":
            col = 0
        elif ch == "\n":
            lines.append("".join(current).rstrip())
            current, col = [], 0
        else:
            if col < len(current):
                current[col] = ch
            else:
                current.append(ch)
            col += 1
    if current:
        lines.append("".join(current).rstrip())
    return lines


@pytest.mark.slow
def test_teed_text_on_the_same_terminal_never_runs_into_the_status(tmp_path: Path) -> None:
    # the reported bug: `...0 finding(s)epoch 9 ok` on a terminal that shows both
    chunks = [
        ("epoch 1 ok\n", 0.6),
        ("epoch 2 ", 0.8),
        ("half a line, finished later\n", 0.6),
        (OOM, 0.6),
        ("epoch 9 ok\n", 0.6),
    ]
    shown, _, code = run_live(tmp_path, chunks, columns=80, env={"NO_COLOR": "1"}, stdout_on_pty=True)
    assert code == 1
    lines = [line for line in screen_lines(shown) if line]
    for text in ("epoch 1 ok", "epoch 2 half a line, finished later", OOM.strip(), "epoch 9 ok"):
        assert text in lines, (text, lines)  # each passed-through line intact, on a line of its own
    assert not [line for line in lines if "finding(s)" in line and "epoch" in line]
    assert any(line.startswith("verl-logscan: ALERT cuda-oom") for line in lines)
    assert "finding(s)" in shown  # the status was drawn in between
