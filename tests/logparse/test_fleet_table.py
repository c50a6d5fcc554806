"""The fleet summary a person reads: the text table fits the terminal, `unknown` failures carry their
error message, an empty job is an error row, `error at` does not repeat the job's path."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from logparse.fleet import FleetSummary, JobRow, JobStatus
from logparse.process import EXIT_FAILURE_FOUND
from reports.fleet import render_fleet
from tests.conftest import FIXTURES, run_cli, sample_logs
from tests.logparse.test_terminal import drain, open_pty

UNKNOWN = FIXTURES / "cascades" / "unknown-exception.log"
SHARD_ERROR = "shards.ShardChecksumError: shard 17 checksum mismatch: 9f1c2e != 77aa01"


@pytest.fixture
def fleet_jobs(tmp_path: Path) -> list[str]:
    deep = tmp_path / "very" / "long" / "path" / "to" / "an" / "experiment-group" / "run-2024-06-01-abcdef"
    deep.mkdir(parents=True)
    shutil.copy(UNKNOWN, deep / "rank1.log")
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    return [str(deep), *[str(p) for p in sample_logs()], str(empty), str(tmp_path / "missing")]


@pytest.mark.slow
def test_unknown_rows_carry_their_error_and_an_empty_job_is_an_error(fleet_jobs: list[str]) -> None:
    r = run_cli(["fleet", *fleet_jobs, "--format", "json"])
    assert r.exit_code == EXIT_FAILURE_FOUND
    rows = {row["job"]: row for row in json.loads(r.stdout)["jobs"]}
    unknown = rows[fleet_jobs[0]]
    assert unknown["root_cause"] == "unknown" and unknown["message"] == SHARD_ERROR
    assert all(
        row["message"] is None
        for row in rows.values()
        if row["status"] in ("healthy",) or row["root_cause"] not in (None, "unknown")
    )
    empty = rows[fleet_jobs[-2]]
    assert empty["status"] == "error" and empty["message"].endswith("no log lines read")
    md = run_cli(["fleet", *fleet_jobs, "--format", "md"]).stdout
    assert "ShardChecksumError: shard 17 checksum mismatch" in md


def _lines_of_job_table(text: str) -> list[str]:
    return text.split("\n\n")[1].splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("width", [79, 99, 139])
def test_text_table_fits_the_width(fleet_jobs: list[str], width: int) -> None:
    r = run_cli(["fleet", *fleet_jobs, "--format", "json"])
    summary = FleetSummary(
        tuple(
            JobRow(
                job=row["job"],
                status=JobStatus(row["status"]),
                root_cause=row["root_cause"],
                category=row["category"],
                stage=row["stage"],
                last_step=row["last_step"],
                confidence=row["confidence"],
                error_source=row["error_source"],
                error_line=row["error_line"],
                message=row["message"],
            )
            for row in json.loads(r.stdout)["jobs"]
        )
    )
    text = render_fleet(summary, "text", width=width)
    table = _lines_of_job_table(text)
    assert max(len(line) for line in text.splitlines()) <= width
    assert table[0].split()[:3] == ["job", "status", "root"]
    # the message of the unknown failure: on an indented line under its row, not in a column
    at = next(i for i, line in enumerate(table) if "unknown" in line)
    assert table[at + 1].startswith("    shards.ShardChecksumError")
    # `error at` is `path:line`, relative to where the command ran (else absolute)
    # (cut on the left on a narrow terminal: its `file:line` end stays)
    tail = "samples/ray-actor-exception.log:88" if width >= 99 else ".log:88"
    assert any(line.rstrip().endswith(tail) for line in table)
    if width >= 139:
        assert table[at].rstrip().endswith("rank1.log:9")
        assert "run-2024-06-01-abcdef" in table[at]  # the path is cut on the left: its end names the job
    unfitted = render_fleet(summary, "text")  # a file or a pipe: cells up to 120 characters
    assert fleet_jobs[0][-110:] in unfitted and max(len(line) for line in unfitted.splitlines()) > 200


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="pty behaviour checked on Linux")
def test_fleet_on_an_80_column_terminal(fleet_jobs: list[str]) -> None:
    master, slave = open_pty(columns=80)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    p = subprocess.Popen(
        [sys.executable, "-m", "logparse", "fleet", *fleet_jobs, "--jobs", "1"],
        stdout=slave,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    os.close(slave)
    shown = bytearray()
    reader = drain(master, shown)
    p.wait(timeout=120)
    reader.join(timeout=10)
    os.close(master)
    assert p.returncode == EXIT_FAILURE_FOUND
    # (the status column is coloured on a terminal: the colour takes no column)
    lines = re.sub(r"\x1b\[[0-9;]*m", "", shown.decode()).replace("\r\n", "\n").splitlines()
    assert lines[0].startswith("fleet: ")
    assert max(len(line) for line in lines) <= 79, [line for line in lines if len(line) > 79]
    assert any(line.startswith("    shards.ShardChecksumError") for line in lines)
    assert b"no such file or folder" in p.stderr.read()
