"""Live use with a writer process that appends over time: --follow (growth, truncation, rotation),
--tee (every byte passed through), fatal-line alerts. Only hang guards here, no timing targets
(the alert latency is measured in benchmarks/bench_live.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

OOM = (
    "(WorkerDict pid=7, ip=10.0.0.2) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
    "GPU 0 has a total capacity of 79.11 GiB of which 1.00 GiB is free.\n"
)
STEP = "(TaskRunner pid=1) step:{n} - actor/pg_loss:np.float64(0.1) - timing_s/step:1.5\n"
CLI = [sys.executable, "-m", "logparse"]


def read_until(stream, needle: str, timeout: float = 30.0) -> str:
    """Lines of `stream` until one contains `needle` (a reader thread, so a hang fails the test)."""
    got: list[str] = []
    done = threading.Event()

    def reader() -> None:
        for line in iter(stream.readline, ""):
            got.append(line)
            if needle in line:
                done.set()
                return

    threading.Thread(target=reader, daemon=True).start()
    assert done.wait(timeout), f"no {needle!r} within {timeout}s; got {got!r}"
    return "".join(got)


@pytest.mark.slow
def test_follow_survives_truncation_and_rotation_and_alerts(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("".join(STEP.format(n=n) for n in range(1, 4)))
    out = tmp_path / "report.json"
    p = subprocess.Popen(
        CLI + ["scan", "--follow", str(log), "--format", "json", "-o", str(out)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        time.sleep(1.0)
        with log.open("a") as fh:  # growth
            fh.write(STEP.format(n=4))
        time.sleep(0.5)
        log.write_text(STEP.format(n=1))  # truncation: starts over
        time.sleep(0.5)
        rotated = tmp_path / "job.log.1"
        os.replace(log, rotated)  # rotation: a new file at the path
        log.write_text(STEP.format(n=5))
        time.sleep(0.5)
        with log.open("a") as fh:
            fh.write(OOM)
        read_until(p.stderr, "ALERT cuda-oom")
        p.send_signal(signal.SIGINT)
        code = p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert code == 1  # Ctrl-C ends following; the scan then reports normally
    report = json.loads(out.read_text())
    assert report["root_cause"]["category"] == "cuda-oom"
    assert report["progress"]["last_step"] == 5


def test_tee_passes_bytes_through_and_alerts_while_running(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    p = subprocess.Popen(
        CLI + ["scan", "--tee", "--format", "md", "-o", str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    sent = b""
    lines = [STEP.format(n=n).encode() for n in range(1, 4)] + [
        b"\x1b[36mcolour\x1b[0m \rbar 1/3\rbar 2/3\n",
        b"bad utf8 \xff\n",
        OOM.encode(),
    ]
    stderr_lines: list[bytes] = []
    alerted = threading.Event()

    def read_err() -> None:
        for line in iter(p.stderr.readline, b""):
            stderr_lines.append(line)
            if b"ALERT" in line:
                alerted.set()

    threading.Thread(target=read_err, daemon=True).start()
    echoed = bytearray()

    def read_out() -> None:
        while True:
            chunk = p.stdout.read1(65536)
            if not chunk:
                return
            echoed.extend(chunk)

    t_out = threading.Thread(target=read_out, daemon=True)
    t_out.start()
    for line in lines:
        p.stdin.write(line)
        p.stdin.flush()
        sent += line
        time.sleep(0.1)
    assert alerted.wait(30), "no alert while the input was still open"
    p.stdin.close()
    assert p.wait(timeout=30) == 1
    t_out.join(10)
    assert bytes(echoed) == sent
    assert "cuda-oom" in out.read_text()


@pytest.mark.slow  # 5 s: the CLI as a process, fed through a pipe
def test_tee_without_output_passes_the_log_and_gives_the_summary_on_stderr() -> None:
    # (issue 24: `--tee` alone was a usage error; a report other than the summary still needs -o)
    p = subprocess.run(CLI + ["scan", "--tee"], input=b"x\n", capture_output=True, timeout=30)
    assert p.returncode == 0 and p.stdout == b"x\n" and p.stderr.startswith(b"HEALTHY")
    for extra in (["--format", "json"], ["-o", "-"]):
        p = subprocess.run(CLI + ["scan", "--tee", *extra], input=b"x\n", capture_output=True, timeout=30)
        assert p.returncode == 2 and b"needs -o" in p.stderr


def test_status_line_shows_bytes_of_the_total_rate_stage_and_step() -> None:
    import io

    from logparse.console import StatusLine
    from logparse.pipeline import Analysis
    from patterns import load_builtin_catalog
    from tests.conftest import SAMPLES

    log = SAMPLES / "ray-healthy.log"
    size = log.stat().st_size
    out = io.StringIO()
    status = StatusLine(out, total_bytes=size)
    scanner = Analysis(load_builtin_catalog())
    scanner.hear(on_progress=status)
    scanner.feed_inputs([str(log)])
    text = status.text(scanner, now=status._start + 1.0)
    assert f"of {size / 1e6:,.1f} MB (100%)" in text and "MB/s" in text
    assert "stage " in text and "step 5" in text and text.startswith("verl-logscan: ")
    assert out.getvalue().startswith("\rverl-logscan: ")  # drawn at least once while scanning
    grown = StatusLine(io.StringIO(), total_bytes=size, follow=True)  # a followed file has no total
    assert "MB read" in grown.text(scanner)
