"""On a real pseudo-terminal: an interrupted scan says INTERRUPTED (never HEALTHY) in its headline, its
last line and its report's title; a log typed or pasted into the terminal gets no status line drawn
over it; stdin is `<stdin>:N`; a scan too quick to time says no `0.0 s` (issue 39, points 4 and 12)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from tests.conftest import ROOT, SAMPLES
from tests.logparse.test_live_terminal import Live
from tests.logparse.test_terminal import SGR, screen_lines

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pty behaviour checked on Linux")

HEALTHY_START = (SAMPLES / "torchrun-healthy.log").read_bytes()[:3000]  # steps, no failure, no end
INTERRUPTED = re.compile(r"^INTERRUPTED after (\d+) lines \(partial\)")


def _interrupted_scan(tmp_path: Path, args: list[str]) -> tuple[int, list[str]]:
    """`scan ARGS` on a terminal (stderr), fed part of a healthy log through a pipe that stays open,
    then Ctrl-C (SIGINT): its exit code and the screen's lines."""
    live = Live(["scan", *args], columns=300, env={"PYTHONPATH": str(ROOT)})
    try:
        live.write(HEALTHY_START.decode(), pause=0.2)
        live.wait_for(r"step \d+", timeout=30)  # the status line: the lines were read
        live.p.send_signal(signal.SIGINT)
        code = live.finish(timeout=60)
    finally:
        if live.p.poll() is None:
            live.p.kill()
    return code, [line for line in screen_lines(live.shown()) if line]


def test_an_interrupted_healthy_scan_says_interrupted_not_healthy(tmp_path: Path) -> None:
    code, lines = _interrupted_scan(tmp_path, ["-o", str(tmp_path / "r.md"), "-o", str(tmp_path / "r.html")])
    assert code == 130
    summary = [line for line in lines if not line.startswith("verl-logscan:")]
    assert not [line for line in lines if "HEALTHY" in line], lines
    head = INTERRUPTED.match(summary[0])
    assert head and summary[0].endswith("no failure found in what was read"), summary
    assert INTERRUPTED.match(summary[-1]) and " · stage training · " in summary[-1], summary
    assert "full report written to" in summary[-1]
    n = head.group(1)
    md = (tmp_path / "r.md").read_text()
    [title] = [t for t in MarkdownIt().parse(md) if t.type == "inline"][:1]
    assert (
        title.content
        == f"verl-logscan: INTERRUPTED after {n} lines (partial): no failure found in what was read"
    )
    html = (tmp_path / "r.html").read_text()
    assert f"<title>verl-logscan: INTERRUPTED after {n} lines (partial)" in html
    assert '<span class="status">INTERRUPTED</span>' in html and "HEALTHY" not in html


def test_an_interrupted_scan_with_a_failure_keeps_failed_and_says_partial(tmp_path: Path) -> None:
    live = Live(["scan"], columns=200, env={"PYTHONPATH": str(ROOT)})
    try:
        live.write((SAMPLES / "ray-actor-exception.log").read_text(), pause=0.2)
        live.wait_for(r"ALERT cuda-oom", timeout=30)
        live.p.send_signal(signal.SIGINT)
        assert live.finish(timeout=60) == 130
    finally:
        if live.p.poll() is None:
            live.p.kill()
    out = SGR.sub("", live.out.decode())
    last = out.strip().splitlines()[-1]
    assert last.startswith("FAILED cuda-oom") and re.search(r"INTERRUPTED after \d+ lines \(partial\)", last)


@pytest.mark.slow  # the CLI under a pty, waiting for a redraw that must not come: about 3 s
def test_no_status_line_over_a_log_pasted_into_the_terminal() -> None:
    """stdin on the terminal: what is pasted is echoed by the terminal on the line the status line
    would redraw; none is drawn (a pipe into the same scan gets one: test_live_terminal)."""
    live = Live(["scan"], columns=100, stdin_on_pty=True, stdout_on_pty=True, env={"PYTHONPATH": str(ROOT)})
    try:
        live.wait_for(r"reading from stdin")
        for line in HEALTHY_START.decode().splitlines()[:20]:
            os.write(live.master, (line + "\n").encode())
        time.sleep(2.5)  # longer than the quiet input's poll, after which a status line would be drawn
        os.write(live.master, b"\x04")
        code = live.finish(timeout=60)
    finally:
        if live.p.poll() is None:
            live.p.kill()
    shown = SGR.sub("", live.shown())
    assert code == 0
    assert not re.search(r"verl-logscan: [^\n]*(MB|KB|finding)", shown), shown[-1500:]


def test_stdin_is_named_stdin_and_a_quick_scan_shows_no_zero_seconds() -> None:
    live = Live(["scan"], columns=200, stdout_on_pty=True, env={"PYTHONPATH": str(ROOT)})
    live.write("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert live.finish(timeout=60) == 1
    lines = screen_lines(live.shown())
    at = next(line for line in lines if line.lstrip().startswith("at "))
    assert "<stdin>:1" in at and "-:1" not in at
    last = [line for line in lines if line.startswith("FAILED cuda-oom")][-1]
    assert "0.0 s" not in last
    # the line gave no GPU number and no capacity: the headline leaves them out, no `?`
    assert any(line.strip() == "GPU ran out of memory (tried to allocate 2.00 GiB)" for line in lines), lines


def test_stdin_name_in_every_format() -> None:
    log = b"[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    proc = subprocess.run(
        [sys.executable, "-m", "logparse", "scan", "--format", "json"],
        input=log,
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
    )
    assert b'"source": "<stdin>"' in proc.stdout
