"""Ctrl-C (SIGINT) or SIGTERM while verl-logscan starts (imports, click, the catalog load with a cold
start-up cache) ends with the one-line message and 130 / 143, never a KeyboardInterrupt traceback;
one that comes after the report was written leaves the run's own exit code.

The signal is sent at several delays after the process reached its first line of code (logparse.startup
holds SIGINT and SIGTERM then: /proc/PID/status shows them blocked), so every delay lands in verl-logscan's
start-up and not in the interpreter's own (`site`), which no program can guard."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES

EXPECTED = {signal.SIGINT: 130, signal.SIGTERM: 143}
DELAYS = (0.0, 0.05, 0.1, 0.2, 0.35, 0.6, 1.0)


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as a terminal's Ctrl-C finds it (not a shell's `&`)


def blocked(pid: int, sig: int) -> bool | None:
    """Is `sig` blocked in process `pid`? None once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("SigBlk:"):
                    return bool(int(line.split()[1], 16) & (1 << (sig - 1)))
    except OSError:
        return None
    return False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("delay", DELAYS)
def test_a_signal_during_start_up_is_a_one_line_exit(tmp_path: Path, sig: int, delay: float) -> None:
    log = tmp_path / "job.log"
    log.write_bytes((SAMPLES / "ray-actor-exception.log").read_bytes())
    env = dict(os.environ, PYTHONPATH=str(ROOT), VERL_LOGSCAN_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "logparse", "scan", str(log), "-o", str(tmp_path / "r.json")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=_sigint_default,
    )
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and not blocked(proc.pid, signal.SIGINT) and time.monotonic() < deadline:
            time.sleep(0.001)  # the interpreter's own start-up
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = err.decode()
    assert "Traceback" not in text and "Exception ignored" not in text and "Aborted" not in text, text
    report = tmp_path / "r.json"
    if proc.returncode == 1:  # the scan was done before the signal came: its own report and code
        assert json.loads(report.read_text())["root_cause"]["id"] == "cuda-oom"
        return
    assert proc.returncode == EXPECTED[sig], text
    name = "SIGINT" if sig == signal.SIGINT else "SIGTERM"
    assert f"interrupted by {name}" in text or text.strip() == f"verl-logscan: interrupted ({name})", text


SWALLOWED = """
import os, signal, sys
from logparse.process import install_sigterm_handler, raise_swallowed_interrupt

class Finalised:
    def __del__(self):  # the signal's handler runs here, where no exception can be passed on
        os.kill(os.getpid(), getattr(signal, sys.argv[1]))
        for _ in range(1000):  # (the handler runs at the next bytecode boundaries)
            pass

install_sigterm_handler()
Finalised()
print("went on", flush=True)
try:
    raise_swallowed_interrupt()
except BaseException as exc:
    print("raised", type(exc).__name__)
"""


@pytest.mark.parametrize("name, raised", [("SIGINT", "KeyboardInterrupt"), ("SIGTERM", "Terminated")])
def test_an_interrupt_a_finaliser_swallowed_is_raised_again_without_a_traceback(
    name: str, raised: str
) -> None:
    """A signal that lands in a `__del__` (the regex module's, while the catalog compiles) printed
    "Exception ignored in" with a traceback, and the scan went on to exit 1 as if none had come."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", SWALLOWED, name],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        preexec_fn=_sigint_default,
    )
    assert done.stderr == ""
    assert done.stdout.split("\n")[:2] == ["went on", f"raised {raised}"]
