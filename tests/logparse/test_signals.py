"""Ctrl-C (SIGINT) or SIGTERM during a scan: the report of what was found so far is written (to stdout or,
atomically, to -o), marked incomplete, and the exit code is 130 / 143."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from logparse.pipeline import Analysis
from logparse.process import Terminated
from tests.conftest import ROOT, run_cli
from tests.logparse.test_robustness import OOM

EXPECTED = {signal.SIGINT: 130, signal.SIGTERM: 143}


def _sigint_default() -> None:
    # a shell starts background jobs with SIGINT ignored, and a child inherits that (Python then
    # installs no KeyboardInterrupt handler): give the scanner the SIGINT a terminal's Ctrl-C gives
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(args: list[str], cwd: Path, stdin=subprocess.DEVNULL) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "logparse", *args],
        cwd=cwd,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=_sigint_default,
    )


def finish(proc: subprocess.Popen, sig: int) -> tuple[int, bytes, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    return proc.returncode, out, err.decode()


def unread(fd: int) -> int:
    """Bytes still in a pipe or FIFO (FIONREAD works on either end on Linux)."""
    buf = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    return int.from_bytes(buf, sys.byteorder)


def wait_drained(fd: int, timeout: float = 30) -> None:
    """Wait until the scanner has read everything written so far, then give it a moment to scan it."""
    deadline = time.monotonic() + timeout
    while unread(fd) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)


def check_partial_report(text: bytes | str, name: str) -> dict:
    report = json.loads(text)
    assert report["complete"] is False
    assert report["root_cause"]["id"] == "cuda-oom"
    assert report["root_cause"]["error_line"]["line"] == 101
    assert report["inputs"][0]["bytes"] >= len(OOM)
    assert any(f"interrupted by {name}" in n for n in report["notes"])
    return report


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_while_reading_a_fifo_reports_what_was_found(tmp_path: Path, sig: int) -> None:
    fifo = tmp_path / "live.log"
    os.mkfifo(fifo)
    proc = start(["scan", "--format", "json", "live.log"], tmp_path)
    fd = os.open(fifo, os.O_WRONLY)  # returns once the scanner has opened the other end
    try:
        os.write(fd, "".join(f"INFO step {i}\n" for i in range(100)).encode() + OOM.encode() + b"\n")
        os.write(fd, b"INFO still running\n")
        wait_drained(fd)
        rc, out, err = finish(proc, sig)
    finally:
        os.close(fd)
    assert rc == EXPECTED[sig]
    assert "Traceback" not in err
    check_partial_report(out, sig.name)
    assert f"interrupted by {sig.name}" in err


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_while_reading_slow_stdin_writes_the_output_file(tmp_path: Path, sig: int) -> None:
    (tmp_path / "report.json").write_text("an older report\n")
    proc = start(["scan", "-", "--format", "json", "-o", "report.json"], tmp_path, stdin=subprocess.PIPE)
    try:
        proc.stdin.write("".join(f"INFO step {i}\n" for i in range(100)).encode() + OOM.encode() + b"\n")
        proc.stdin.flush()
        time.sleep(1.0)  # the interpreter starts before it reads
        wait_drained(proc.stdin.fileno())
        rc, _, err = finish(proc, sig)
    finally:
        proc.stdin.close()
    assert rc == EXPECTED[sig]
    assert "Traceback" not in err
    check_partial_report((tmp_path / "report.json").read_text(), sig.name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]  # no temporary file left


@pytest.mark.parametrize("exc,code,name", [(KeyboardInterrupt, 130, "SIGINT"), (Terminated, 143, "SIGTERM")])
def test_interrupt_inside_the_scan_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: type[BaseException], code: int, name: str
) -> None:
    log = tmp_path / "job.log"
    log.write_text("".join(f"INFO step {i}\n" for i in range(100)) + OOM + "\n" + "INFO more\n" * 100)
    real = Analysis.feed_record

    def feed_then_stop(self, rec) -> None:
        if rec.line.number > 150:
            raise exc()
        real(self, rec)

    monkeypatch.setattr(Analysis, "feed_record", feed_then_stop)
    result = run_cli(["scan", str(log), "--format", "json"])
    assert result.exit_code == code
    out = result.output[result.output.index("{") :]  # CliRunner mixes stderr in
    check_partial_report(out, name)
    text = run_cli(["scan", str(log)]).output
    assert "incomplete" in text.lower() or "interrupted" in text.lower()


def test_interrupt_outside_the_scan_is_130_not_click_abort(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("logparse.commands.load_catalog", interrupted)
    result = run_cli(["scan", str(tmp_path)])
    assert result.exit_code == 130
    assert "verl-logscan: interrupted (SIGINT)" in result.output and "Aborted" not in result.output


def test_importing_the_cli_installs_no_handler() -> None:
    # main() installs the SIGTERM handler; the library and in-process callers keep theirs
    import logparse.cli  # noqa: F401 (the import is what is tested)
    from logparse.process import on_sigterm

    assert signal.getsignal(signal.SIGTERM) is not on_sigterm


def test_forked_child_dies_of_sigterm_instead_of_raising(tmp_path: Path) -> None:
    """fleet's worker processes inherit the handler: there SIGTERM must still just end the process."""
    code = (
        "import os, signal, sys, time\n"
        "from logparse import process\n"
        "process.install_sigterm_handler()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(30)\n"
        "    os._exit(0)\n"
        "time.sleep(0.3)\n"
        "os.kill(pid, signal.SIGTERM)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.stdout.strip() == "True", proc.stderr
    assert "Traceback" not in proc.stderr


def test_fifo_closed_by_its_writer_is_a_complete_scan(tmp_path: Path) -> None:
    # a FIFO whose writer writes and closes at once: a normal, complete scan (exit 1, complete: true)
    fifo = tmp_path / "done.log"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as fh:
            fh.write(OOM.encode() + b"\n")

    t = threading.Thread(target=write, daemon=True)
    t.start()
    proc = start(["scan", "--format", "json", "done.log"], tmp_path)
    out, _ = proc.communicate(timeout=60)
    t.join(5)
    assert proc.returncode == 1 and json.loads(out)["complete"] is True


@pytest.mark.slow
@pytest.mark.parametrize("gap_ms", [0, 10, 20])
def test_a_second_sigterm_right_after_the_first_does_not_undo_the_reports(
    tmp_path: Path, gap_ms: int
) -> None:
    """A scheduler's second SIGTERM 10-20 ms after the first ended the process while it wrote: both
    reports were lost. The first starts the write; the second is held until it is done."""
    fifo = tmp_path / "live.log"
    os.mkfifo(fifo)
    for name in ("report.json", "report.md"):
        (tmp_path / name).write_text("an older report\n")
    proc = start(["scan", "live.log", "-o", "report.json", "-o", "report.md"], tmp_path)
    fd = os.open(fifo, os.O_WRONLY)
    try:
        os.write(fd, "".join(f"INFO step {i}\n" for i in range(100)).encode() + OOM.encode() + b"\n")
        wait_drained(fd)
        proc.send_signal(signal.SIGTERM)
        time.sleep(gap_ms / 1000)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        os.close(fd)
    assert proc.returncode == 143, err
    check_partial_report((tmp_path / "report.json").read_text(), "SIGTERM")
    assert "cuda-oom" in (tmp_path / "report.md").read_text()
    assert b"Traceback" not in err and not list(tmp_path.glob(".report*.tmp"))
