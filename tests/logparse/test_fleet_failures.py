"""A stuck job becomes an `error` row after --job-timeout and the others go on; SIGTERM
writes the rows done (marked incomplete, exit 143); a Ray address where nothing listens is a clear
exit 2 at once; a job that crashes its analysis is a row, not the end of the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logparse import fleet
from logparse.fleet import JobStatus, analyse_job, ray_endpoint
from logparse.process import EXIT_ERROR, EXIT_FAILURE_FOUND, EXIT_TERMINATED
from patterns import load_catalog
from tests.conftest import SAMPLES, run_cli

SAMPLE = SAMPLES / "ray-actor-exception.log"
CLI = [sys.executable, "-m", "logparse"]


def stuck_job(tmp_path: Path) -> Path:
    """A FIFO that no one writes: opening it to read blocks for ever (as a hung network mount does)."""
    fifo = tmp_path / "stuck.log"
    os.mkfifo(fifo)
    return fifo


@pytest.mark.slow
def test_a_stuck_job_becomes_an_error_row_and_the_others_go_on(tmp_path: Path) -> None:
    stuck = stuck_job(tmp_path)
    result = run_cli(
        ["fleet", str(stuck), str(SAMPLE), "--jobs", "2", "--job-timeout", "2", "--format", "json"]
    )
    assert result.exit_code == EXIT_FAILURE_FOUND, result.output
    data = json.loads(result.stdout)
    assert [r["status"] for r in data["jobs"]] == ["error", "failed"]
    assert data["jobs"][0]["message"] == f"{stuck}: not finished after 2 s (--job-timeout); stopped"
    assert data["jobs"][1]["root_cause"] == "cuda-oom"
    assert data["complete"] is True and data["not_analysed"] == []
    assert "not finished after 2 s" in result.stderr


@pytest.mark.slow
def test_one_worker_runs_the_jobs_one_after_the_other_with_the_same_timeout(tmp_path: Path) -> None:
    stuck = stuck_job(tmp_path)
    result = run_cli(
        [
            "fleet",
            str(SAMPLE),
            str(stuck),
            str(SAMPLE.parent / "ray-healthy.log"),
            "--jobs",
            "1",
            "--job-timeout",
            "1",
            "--format",
            "json",
        ]
    )
    assert result.exit_code == EXIT_FAILURE_FOUND
    assert [r["status"] for r in json.loads(result.stdout)["jobs"]] == ["failed", "error", "healthy"]


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        return []


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs /proc to see the workers")
def test_sigterm_writes_the_rows_done_marked_incomplete(tmp_path: Path) -> None:
    stuck = stuck_job(tmp_path)
    out = tmp_path / "fleet.json"
    p = subprocess.Popen(
        CLI
        + [
            "fleet",
            str(stuck),
            str(SAMPLE),
            "--jobs",
            "2",
            "--job-timeout",
            "0",
            "--format",
            "json",
            "-o",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # both jobs start; the sample's worker ends once its row is sent, the stuck one stays. The
        # sample's job can end before the first look (a warm start-up cache): one worker left, and
        # still one a while later, is the stuck one alone too
        deadline = time.monotonic() + 120  # a hang guard, not a speed target
        seen_two = False
        one_since = None
        while time.monotonic() < deadline:
            n = len(_children(p.pid))
            seen_two = seen_two or n == 2
            one_since = (one_since or time.monotonic()) if n == 1 else None
            if n == 1 and (seen_two or time.monotonic() - one_since > 3):
                break
            time.sleep(0.05)
        else:
            pytest.fail("the sample's job did not finish")
        time.sleep(0.3)  # its row is received right after its worker ends
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == EXIT_TERMINATED, err
    assert "Traceback" not in err
    assert "interrupted by SIGTERM: 1 of 2 job(s) analysed" in err
    data = json.loads(out.read_text())
    assert data["complete"] is False and data["not_analysed"] == [str(stuck)]
    assert [(r["job"], r["status"]) for r in data["jobs"]] == [(str(SAMPLE), "failed")]
    assert _children(p.pid) == []


def test_a_ray_address_where_nothing_listens_is_a_clear_error_at_once() -> None:
    pytest.importorskip("ray")
    r = run_cli(["fleet", str(SAMPLE), "--engine", "ray", "--address", "127.0.0.1:1"])
    assert r.exit_code == EXIT_ERROR
    assert r.stderr.startswith("verl-logscan: error: cannot reach Ray at 127.0.0.1:1: ")
    assert "ray start --head" in r.stderr and r.stderr.count("\n") == 1


def test_ray_addresses_are_read_as_ray_reads_them() -> None:
    assert ray_endpoint("127.0.0.1:6379") == ("127.0.0.1", 6379)
    assert ray_endpoint("ray://head.cluster:10001") == ("head.cluster", 10001)
    assert ray_endpoint("[::1]:6379") == ("::1", 6379)
    assert ray_endpoint("auto") is None and ray_endpoint("local") is None
    assert ray_endpoint("ray://head") is None


def test_an_analysis_that_crashes_is_an_error_row(monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(files, catalog, config=None, learn_names=False):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(fleet, "analyse_unredacted", crash)
    row = analyse_job(str(SAMPLE), load_catalog()).row
    assert row.status is JobStatus.ERROR
    assert (
        row.message == f"{SAMPLE}: could not be analysed (RecursionError: maximum recursion depth exceeded)"
    )
