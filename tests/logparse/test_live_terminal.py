"""A live scan on a real pseudo-terminal: ALERT lines stand out (bold red, on a terminal only, NO_COLOR
honoured), a scan never waits in silence (stdin on a terminal says so; a quiet input shows what was
read, with how to stop), and `--tee` without -o passes the log on and ends with the summary on stderr."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import SAMPLES
from tests.logparse.test_terminal import SGR, drain, open_pty, screen_lines

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pty behaviour checked on Linux")

CLI = [sys.executable, "-m", "logparse"]
STEP = "(TaskRunner pid=1) step:{n} - actor/pg_loss:np.float64(0.1) - timing_s/step:1.5\n"
OOM = (
    "(WorkerDict pid=7, ip=10.0.0.2) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
    "GPU 0 has a total capacity of 79.11 GiB of which 1.00 GiB is free.\n"
)
# verl saves step S's checkpoint inside step S, then prints step S's line (patterns/stages.yaml)
SAVED = (
    "(WorkerDict pid=3588) INFO:2025-08-22 23:08:37,898:[Rank 0] Saved model to "
    "/root/ckpt/global_step_{n}/actor/model_world_size_1_rank_0.pt\n"
)
ALERT_ON = "\x1b[1m\x1b[31mverl-logscan: ALERT cuda-oom"


class Live:
    """The CLI with stderr (and stdin, when asked) on a pty; stdout a pipe unless `stdout_on_pty`."""

    def __init__(
        self,
        args: list[str],
        columns: int = 100,
        env: dict[str, str] | None = None,
        stdin_on_pty: bool = False,
        stdout_on_pty: bool = False,
    ):
        self.master, slave = open_pty(columns)
        base = {
            k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")
        }
        base.update({"TERM": "xterm", **(env or {})})
        self.p = subprocess.Popen(
            CLI + args,
            stdin=slave if stdin_on_pty else subprocess.PIPE,
            stdout=slave if stdout_on_pty else subprocess.PIPE,
            stderr=slave,
            env=base,
        )
        os.close(slave)
        self.raw = bytearray()
        self.out = bytearray()
        self.reader = drain(self.master, self.raw)
        self.out_reader = drain(self.p.stdout.fileno(), self.out) if self.p.stdout is not None else None

    def write(self, text: str, pause: float = 0.0) -> None:
        self.p.stdin.write(text.encode())
        self.p.stdin.flush()
        time.sleep(pause)

    def shown(self) -> str:
        return self.raw.decode("utf-8", "replace")

    def wait_for(self, pattern: str, timeout: float = 30) -> re.Match:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            m = re.search(pattern, SGR.sub("", self.shown()))
            if m:
                return m
            time.sleep(0.05)
        raise AssertionError(f"{pattern!r} never shown: {self.shown()[-2000:]!r}")

    def finish(self, timeout: float = 60) -> int:
        try:
            if self.p.stdin is not None and not self.p.stdin.closed:
                self.p.stdin.close()
            code = self.p.wait(timeout=timeout)
        finally:
            if self.p.poll() is None:
                self.p.kill()
        self.reader.join(timeout=10)
        if self.out_reader is not None:
            self.out_reader.join(timeout=10)
        os.close(self.master)
        return code


def statuses(shown: str) -> list[str]:
    return [
        s for s in re.split(r"[\r\n]", SGR.sub("", shown)) if s.startswith("verl-logscan: ") and "MB" in s
    ]


# -- 2. ALERT lines stand out ---------------------------------------------------------------------------
def test_alert_lines_are_bold_red_on_a_terminal() -> None:
    live = Live(["scan", "--tee", "-o", os.devnull, "--format", "json"])
    live.write(STEP.format(n=1) + OOM)
    live.wait_for("ALERT cuda-oom")
    assert live.finish() == 1
    shown = live.shown()
    assert ALERT_ON in shown
    # (wrapped at spaces to the terminal: the reset ends its last row)
    rows = [row.rstrip("\r") for row in shown[shown.index(ALERT_ON) :].split("\n")]
    last = next(row for row in rows if "\x1b[0m" in row)
    assert last.endswith("is free.\x1b[0m")


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"TERM": "dumb"}])
def test_alert_lines_are_plain_with_no_color_or_a_dumb_terminal(env: dict[str, str]) -> None:
    live = Live(["scan", "--tee", "-o", os.devnull, "--format", "json"], env=env)
    live.write(OOM)
    live.wait_for("ALERT cuda-oom")
    assert live.finish() == 1
    assert "verl-logscan: ALERT cuda-oom" in live.shown()
    assert not re.search(r"\x1b\[[0-9;]*m[^\n]*ALERT", live.shown())


def test_alert_lines_on_a_pipe_are_plain() -> None:
    p = subprocess.run(
        CLI + ["scan", "--format", "json"], input=OOM.encode(), capture_output=True, timeout=60
    )
    assert p.returncode == 1
    assert b"verl-logscan: ALERT cuda-oom" in p.stderr and b"\x1b[" not in p.stderr


# -- 3. no waiting in silence --------------------------------------------------------------------------
def test_stdin_on_a_terminal_says_where_the_scan_reads_from() -> None:
    live = Live(["scan"], stdin_on_pty=True, stdout_on_pty=True)
    live.wait_for(r"reading from stdin \(Ctrl-D to end; pipe a log or pass a file\)")
    os.write(live.master, b"\x04")  # Ctrl-D: the terminal's end of input
    assert live.finish() == 5  # nothing read


def test_a_piped_stdin_gets_no_hint() -> None:
    p = subprocess.run(CLI + ["scan"], input=b"", capture_output=True, timeout=60)
    assert b"reading from stdin" not in p.stderr


def test_a_followed_log_shows_what_was_read_and_how_to_stop(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes((SAMPLES / "torchrun-healthy.log").read_bytes())
    live = Live(["scan", "--follow", str(log)])
    # read to its end and waiting for more: the status says how far the log got (the sample ends with
    # torchrun's completion, so the job is in shutdown after step 20), and how to stop
    live.wait_for(r"stage shutdown, step 20, 0 finding\(s\); Ctrl-C to stop")
    with log.open("a") as f:
        f.write("[rank0]: step:21 - loss:0.5\n")
    live.wait_for(r"step 21, 0 finding\(s\); Ctrl-C to stop")
    live.p.send_signal(signal.SIGINT)
    assert live.finish() == 0
    assert bytes(live.out).startswith(b"HEALTHY")  # Ctrl-C ended following; the summary on stdout


def test_the_status_shows_the_end_of_a_burst_of_lines_not_its_start() -> None:
    live = Live(["scan", "--tee", "-o", os.devnull, "--format", "json"], env={"NO_COLOR": "1"})
    for n in range(1, 10):
        live.write(STEP.format(n=n), 0.05)
    live.wait_for(r"step 9, 0 finding\(s\); waiting for input")
    # a checkpoint's lines, then the step's own line, in one burst: the job is in the loop again
    live.write(SAVED.format(n=10) * 3 + STEP.format(n=10))
    live.wait_for(r"stage training, step 10, 0 finding\(s\); waiting for input")
    assert live.finish() == 0
    assert not [s for s in statuses(live.shown()) if "step 10" in s and "checkpoint" in s]


# -- 4. --tee without -o --------------------------------------------------------------------------------
def test_tee_without_output_passes_the_log_through_and_ends_with_the_summary_on_stderr() -> None:
    live = Live(["scan", "--tee"], columns=80)
    sent = STEP.format(n=1) + STEP.format(n=2) + OOM
    live.write(sent)
    live.wait_for("ALERT cuda-oom")
    assert live.finish() == 1
    assert bytes(live.out) == sent.encode()  # stdout: the log, byte for byte, and nothing else
    lines = [line for line in screen_lines(live.shown()) if line]
    assert any(line.startswith("FAILED  cuda-oom") for line in lines)
    assert re.fullmatch(r"FAILED cuda-oom · WorkerDict pid 7 · stage training( · \d+\.\d s)?", lines[-1])
    summary = lines[next(i for i, line in enumerate(lines) if line.startswith("FAILED  ")) :]
    assert max(len(line) for line in summary) <= 80  # wrapped to the terminal (the ALERT line is not)
