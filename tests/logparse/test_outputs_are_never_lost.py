"""Nothing the user gave is lost or overwritten. --metrics-csv is written like -o
(atomically, never over an input, after the report); --tee whose reader goes away still scans to the end
and writes -o; --follow of a file replaced by a folder (or deleted) keeps what was read; a scan started
with stdout or stderr closed reports as documented (never exit 1 without a report)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from logparse import process
from logparse.observe.metrics import MetricsTracker
from logparse.process import EXIT_ERROR, EXIT_FAILURE_FOUND
from logparse.read.follow import FollowFile, TeeStream
from tests.conftest import SAMPLES, run_cli
from tests.logparse.test_live import read_until
from tests.logparse.test_robustness import run_process

SAMPLE = SAMPLES / "ray-actor-exception.log"  # a CUDA OOM after three step lines
CLI = [sys.executable, "-m", "logparse"]


def copy_sample(tmp_path: Path, name: str = "job.log") -> Path:
    log = tmp_path / name
    log.write_bytes(SAMPLE.read_bytes())
    return log


# -- --metrics-csv ------------------------------------------------------------------------------------


def test_metrics_csv_refuses_to_overwrite_an_input(tmp_path: Path) -> None:
    log = copy_sample(tmp_path)
    os.link(log, tmp_path / "hard.log")
    (tmp_path / "link.log").symlink_to(log)
    before = log.read_bytes()
    for target in (log, tmp_path / "hard.log", tmp_path / "link.log"):
        result = run_cli(["scan", str(log), "--metrics-csv", str(target)])
        assert result.exit_code == EXIT_ERROR, target
        assert result.output.strip() == (
            f"verl-logscan: error: --metrics-csv {target} is one of the inputs; refusing to overwrite it"
        )
    result = run_cli(["scan", str(tmp_path), "--metrics-csv", str(log)])  # a folder input holds the file
    assert result.exit_code == EXIT_ERROR and "refusing to overwrite" in result.output
    assert log.read_bytes() == before


def test_metrics_csv_and_output_cannot_be_one_file(tmp_path: Path) -> None:
    log = copy_sample(tmp_path)
    out = tmp_path / "out.txt"
    result = run_cli(["scan", str(log), "-o", str(out), "--metrics-csv", str(tmp_path / "." / "out.txt")])
    assert result.exit_code == EXIT_ERROR and "name the same file" in result.output
    assert not out.exists()


def test_metrics_csv_is_atomic_and_keeps_the_old_file_on_a_failed_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = copy_sample(tmp_path)
    target = tmp_path / "metrics.csv"
    target.write_text("previous metrics\n")
    target.chmod(0o640)
    real_to_csv = MetricsTracker.to_csv

    def disk_full(self: MetricsTracker, path, transform=None) -> None:  # half a CSV, then the disk is full
        with open(path, "w") as fh:
            fh.write("step,actor/pg_loss\n1,")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(MetricsTracker, "to_csv", disk_full)
    result = run_cli(["scan", str(log), "--format", "json", "--metrics-csv", str(target)])
    assert result.exit_code == EXIT_ERROR
    assert "cannot write" in result.stderr and "No space left" in result.stderr
    assert "(the report was written)" in result.stderr
    assert json.loads(result.stdout)["root_cause"]["id"] == "cuda-oom"  # the report came first
    assert target.read_text() == "previous metrics\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.log", "metrics.csv"]  # no temporary file

    monkeypatch.setattr(MetricsTracker, "to_csv", real_to_csv)
    result = run_cli(["scan", str(log), "--metrics-csv", str(target)])
    assert result.exit_code == EXIT_FAILURE_FOUND
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert [r["step"] for r in rows] == ["1", "2", "3"]
    assert target.stat().st_mode & 0o777 == 0o640  # the replaced file's mode is kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.log", "metrics.csv"]


def test_metrics_csv_rename_failure_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = copy_sample(tmp_path)
    target = tmp_path / "metrics.csv"
    target.write_text("previous metrics\n")

    def broken_replace(src, dst):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(os, "replace", broken_replace)
    result = run_cli(["scan", str(log), "--metrics-csv", str(target)])
    assert result.exit_code == EXIT_ERROR and "Read-only file system" in result.stderr
    assert target.read_text() == "previous metrics\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.log", "metrics.csv"]


# -- --tee whose reader goes away -----------------------------------------------------------------------


def test_tee_reader_going_away_still_scans_and_writes_the_report(tmp_path: Path) -> None:
    """`... | verl-logscan scan --tee -o r.md | head -1`: head exits after one line; the scan reads
    the log to its end (the OOM at the end included) and writes the report, with a note."""
    filler = b"".join(f"(TaskRunner pid=1) INFO worker heartbeat {i} ok\n".encode() for i in range(200_000))
    log = tmp_path / "job.log"
    log.write_bytes(filler + SAMPLE.read_bytes())  # 8 MB: far more than a pipe holds
    out = tmp_path / "r.md"
    with open(log, "rb") as stdin:
        p = subprocess.Popen(
            CLI + ["scan", "--tee", "-o", str(out), "--format", "md"],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            first = p.stdout.readline()
            p.stdout.close()  # as `head -1` does once it has its line
            _, err = p.communicate(timeout=300)
        finally:
            if p.poll() is None:
                p.kill()
    assert first.startswith(b"(TaskRunner pid=1) INFO worker heartbeat 0")
    err = err.decode()
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert p.returncode == EXIT_FAILURE_FOUND, err
    assert "--tee stopped passing the log through" in err
    text = out.read_text()
    assert "cuda-oom" in text and "--tee stopped passing the log through" in text


def test_tee_stream_stops_passing_on_a_broken_pipe() -> None:
    class Broken(io.BytesIO):
        def write(self, data: bytes) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    called = []
    tee = TeeStream(io.BytesIO(b"a\n" * 10), Broken(), on_broken=lambda: called.append(True))
    assert tee.read1(4) == b"a\na\n"
    assert tee.read1(100) == b"a\n" * 8  # reading goes on
    assert called == [True] and tee.out is None and len(tee.notes) == 1


# -- --follow of a file replaced or deleted ------------------------------------------------------------


def test_follow_of_a_file_replaced_by_a_folder_keeps_what_was_read(tmp_path: Path) -> None:
    log = copy_sample(tmp_path)
    out = tmp_path / "r.json"
    p = subprocess.Popen(
        CLI + ["scan", "--follow", str(log), "--format", "json", "-o", str(out)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        read_until(p.stderr, "ALERT cuda-oom")  # the OOM line was read
        log.unlink()
        log.mkdir()
        _, err = p.communicate(timeout=120)  # following ends by itself
    finally:
        if p.poll() is None:
            p.kill()
    assert "Traceback" not in err, err
    assert p.returncode == EXIT_FAILURE_FOUND, err
    report = json.loads(out.read_text())
    assert report["root_cause"]["id"] == "cuda-oom"
    assert report["inputs"][0]["lines"] == SAMPLE.read_bytes().count(b"\n")
    assert any("was replaced by a folder while followed; stopped following" in n for n in report["notes"])


def test_follow_of_a_deleted_file_reads_on_from_the_open_file(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    writer = open(log, "wb")  # noqa: SIM115 - the job's own handle, kept open
    writer.write(b"first line\n")
    writer.flush()
    follow = FollowFile(str(log), poll=0.01)
    assert follow.read1(1 << 20) == b"first line\n"
    log.unlink()
    follow._check_replaced()  # what read1 does when there is nothing new: it finds the path gone
    writer.write(b"written after the delete\n")
    writer.flush()
    assert follow.read1(1 << 20) == b"written after the delete\n"
    follow.stop()
    assert follow.read1(1 << 20) == b""
    assert any("deleted while followed (after 11 bytes)" in n for n in follow.notes), follow.notes
    writer.close()
    follow.close()


def test_a_rotation_leaves_no_deletion_note(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(b"one\n")
    follow = FollowFile(str(log), poll=0.01)
    assert follow.read1(100) == b"one\n"
    os.replace(log, tmp_path / "job.log.1")
    follow._check_replaced()  # between the rename and the new file: gone for a moment
    log.write_bytes(b"two\n")
    assert follow.read1(100) == b"two\n"
    follow.stop()
    assert follow.notes == [] and follow.rotations == 1
    follow.close()


# -- closed standard output or error -------------------------------------------------------------------


def closed(*fds: int):
    def close() -> None:
        for fd in fds:
            os.close(fd)

    return close


@pytest.mark.slow
def test_closed_stdout_without_output_is_exit_2_before_scanning(tmp_path: Path) -> None:
    copy_sample(tmp_path)
    run = run_process(["scan", "job.log"], tmp_path, preexec=closed(1))
    assert run.rc == EXIT_ERROR
    assert (
        run.stderr.strip() == "verl-logscan: error: standard output is closed; write the report with -o FILE"
    )
    run = run_process(["scan", "--tee", "-o", "r.md", "-"], tmp_path, preexec=closed(1))
    assert run.rc == EXIT_ERROR and "--tee has nowhere to pass the log through" in run.stderr
    run = run_process(["fleet", "job.log"], tmp_path, preexec=closed(1))
    assert run.rc == EXIT_ERROR and "standard output is closed" in run.stderr


@pytest.mark.slow
@pytest.mark.parametrize("fds", [(1,), (2,), (1, 2)], ids=["stdout", "stderr", "both"])
def test_closed_stdout_or_stderr_with_output_writes_the_report(tmp_path: Path, fds: tuple[int, ...]) -> None:
    copy_sample(tmp_path)
    run = run_process(["scan", "job.log", "--format", "json", "-o", "r.json"], tmp_path, preexec=closed(*fds))
    assert run.rc == EXIT_FAILURE_FOUND, run.stderr
    report = json.loads((tmp_path / "r.json").read_text())  # valid JSON: nothing else got into the file
    assert report["root_cause"]["id"] == "cuda-oom"


@pytest.mark.slow
def test_closed_stderr_reports_on_stdout_with_the_verdicts_exit_code(tmp_path: Path) -> None:
    copy_sample(tmp_path)
    run = run_process(["scan", "job.log", "--format", "json"], tmp_path, preexec=closed(2))
    assert run.rc == EXIT_FAILURE_FOUND
    assert run.json()["root_cause"]["id"] == "cuda-oom"
    # live use: the ALERT line and the messages have nowhere to go; the report is the same
    with open(SAMPLE, "rb") as stdin:
        proc = subprocess.run(
            CLI + ["scan", "--format", "json", "-"],
            stdin=stdin,
            stdout=subprocess.PIPE,
            preexec_fn=closed(2),
            timeout=300,
            check=False,
        )
    assert proc.returncode == EXIT_FAILURE_FOUND
    assert json.loads(proc.stdout)["root_cause"]["id"] == "cuda-oom"


def test_guarded_descriptors_are_not_reused_by_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process check of main()'s guard: with descriptor 1 closed, the next file opened would be
    descriptor 1; the guard puts /dev/null there first and remembers stdout was closed."""
    saved = os.dup(1)
    monkeypatch.setattr(process, "_STDOUT_WAS_CLOSED", False)
    try:
        os.close(1)
        process.guard_standard_descriptors()
        fd = os.open(tmp_path / "some-file", os.O_WRONLY | os.O_CREAT)
        assert fd not in (0, 1, 2)
        os.close(fd)
        assert process._STDOUT_WAS_CLOSED
    finally:
        os.dup2(saved, 1)
        os.close(saved)
