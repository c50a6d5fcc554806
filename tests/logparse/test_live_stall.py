"""A live scan's stall ALERT: `scan --follow [--stall-after DURATION]` says on stderr, while the job
runs, that no new step arrived for that long and where each stream stopped. Hang guards only; the
time to the first ALERT per fixture is measured in benchmarks/bench_stalls.py."""

from __future__ import annotations

import io
import signal
import subprocess
from collections import deque
from pathlib import Path

import pytest

from logparse.decide.stall import live_alert_after
from logparse.live_stall import StallWatch
from logparse.model import Evidence
from logparse.observe.progression import StepMark
from logparse.scan_command import parse_duration
from patterns.stalls import stall_rules
from tests.conftest import FIXTURES, run_cli
from tests.logparse.test_live import CLI, read_until

HANG = FIXTURES / "stalls" / "torchrun-hang-py-spy" / "train.log"


def _before_the_hang() -> str:
    lines = HANG.read_text().splitlines(keepends=True)
    last_step = max(i for i, line in enumerate(lines) if "step:" in line)
    return "".join(lines[: last_step + 1])


@pytest.mark.slow  # 5 s: waits out a real 1 s stall and the resumed progress, as a user would
def test_follow_alerts_when_no_step_arrives_for_the_duration_and_says_when_progress_resumes(
    tmp_path: Path,
) -> None:
    log = tmp_path / "train.log"
    log.write_text(_before_the_hang())
    p = subprocess.Popen(
        CLI + ["scan", "--follow", "--stall-after", "1s", str(log), "-o", str(tmp_path / "r.json")],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        said = read_until(p.stderr, "ALERT stalled")
        assert "after step 2 in training" in said and "--stall-after" in said
        rest = read_until(p.stderr, "last wrote", timeout=10)  # where each stream stopped
        assert "train.log:" in rest
        with log.open("a") as fh:
            fh.write("2026-12-01 23:17:30,000 INFO step:3 - loss:8.0 - grad_norm:6.0 - lr:0.05\n")
        read_until(p.stderr, "progress resumed: step 3")
        p.send_signal(signal.SIGINT)
        code = p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert code == 0  # the report itself: a healthy run so far


def test_stall_after_needs_a_live_log(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("step:1 - loss:1.0\n")
    result = run_cli(["scan", "--stall-after", "5m", str(log)])
    assert result.exit_code == 2 and "live log" in result.stderr


def test_a_duration_that_is_none_is_a_usage_error(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("step:1 - loss:1.0\n")
    result = run_cli(["scan", "--follow", "--stall-after", "soon", str(log)])
    assert result.exit_code == 2 and "not a duration" in result.stderr


@pytest.mark.parametrize(
    "text, seconds", [("90", 90), ("90s", 90), ("30m", 1800), ("2h", 7200), ("1h30m", 5400)]
)
def test_durations_read_as_people_write_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_without_a_duration_the_limit_is_several_step_times_and_never_below_the_floor() -> None:
    rules = stall_rules()
    assert live_alert_after(None, None) is None  # no step time yet: no ALERT
    assert live_alert_after(600.0, None) == rules.follow_steps * 600.0
    assert live_alert_after(1.0, None) == rules.min_silence_s
    assert live_alert_after(1.0, 42.0) == 42.0


class _Stages:
    def __init__(self) -> None:
        self.last_step_line: StepMark | None = None
        self.step_times: deque = deque()

    @property
    def current_stage(self) -> str | None:
        return "training" if self.last_step_line else None


class _Stalls:
    def last_lines(self) -> list[tuple[str, Evidence, str]]:
        return [
            ("rank 3", Evidence("job.log", 7, "[rank3]:step:2 - loss:1.0"), "step:2 - loss:1.0"),
            ("rank 0", Evidence("job.log", 9, "[rank0]:x"), "x"),
        ]


class _Analysis:
    def __init__(self) -> None:
        self.stages = _Stages()
        self.stalls = _Stalls()


def test_the_watch_alerts_once_per_silence_measured_from_the_runs_own_step_time() -> None:
    now = [0.0]
    out = io.StringIO()
    watch = StallWatch(out, lambda text, cut: text, None, clock=lambda: now[0])
    a = _Analysis()
    # a backlog of 10 steps, 60 s apart by their own timestamps, read at once
    a.stages.step_times.extend((i, 1000.0 + 60 * i) for i in range(1, 11))
    a.stages.last_step_line = StepMark(10, 10)
    watch.tick(a)
    limit = max(stall_rules().follow_steps * 60, stall_rules().min_silence_s)
    for t in (0.5, 2.0, 2.0 + limit - 1):
        now[0] = t
        watch.check()
    assert out.getvalue() == ""  # caught up at 2 s; not yet silent for the limit
    now[0] = 2.0 + limit + 0.5
    watch.check()
    watch.check()
    said = out.getvalue()
    assert said.count("ALERT stalled") == 1
    assert "after step 10 in training" in said and "rank 3 last wrote job.log:7" in said
    a.stages.last_step_line = StepMark(11, 11)
    now[0] += 1
    watch.check()
    assert "progress resumed: step 11" in out.getvalue()


def test_a_healthy_run_that_keeps_stepping_never_alerts() -> None:
    now = [0.0]
    out = io.StringIO()
    watch = StallWatch(out, lambda text, cut: text, 5.0, clock=lambda: now[0])
    a = _Analysis()
    watch.tick(a)
    for step in range(1, 200):
        now[0] += 1.0  # a step a second, read as it is written
        a.stages.last_step_line = StepMark(step, step)
        watch.tick(a)
        watch.check()
    assert out.getvalue() == ""
