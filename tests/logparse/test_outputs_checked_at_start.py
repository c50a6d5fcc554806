"""Every output a scan writes is checked before the scan starts (a typo in `-o` is not found after an
hour of `--tee`), and a finished analysis is never lost to a write error: the summary is shown and the
error says where the report could not go. Driven as a user runs it: a subprocess fed through a pipe."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import time
from pathlib import Path

from logparse.process import EXIT_ERROR, EXIT_FAILURE_FOUND
from tests.conftest import ROOT, SAMPLES, run_cli

CLI = [sys.executable, "-m", "logparse"]
SIGKILL_LOG = SAMPLES / "torchrun-sigkill.log"
OOM_LOG = SAMPLES / "ray-actor-exception.log"  # a CUDA OOM after three step lines


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def test_tee_into_a_missing_folder_makes_it_and_writes_the_report(tmp_path: Path) -> None:
    """The issue's repro: `cat log | scan --tee -o missing/dir/r.md >/dev/null` was exit 2 and no
    summary, after the whole scan."""
    proc = subprocess.run(
        [*CLI, "scan", "--tee", "-o", "missing/dir/r.md"],
        input=SIGKILL_LOG.read_bytes(),
        capture_output=True,
        cwd=tmp_path,
        env=_env(),
        timeout=120,
    )
    assert proc.returncode == EXIT_FAILURE_FOUND, proc.stderr.decode()
    assert proc.stdout == SIGKILL_LOG.read_bytes()  # the log passed through
    report = (tmp_path / "missing" / "dir" / "r.md").read_text()
    assert report.startswith("## verl-logscan: job failed: `host-oom`")
    assert "full report written to missing/dir/r.md" in proc.stderr.decode()


def test_an_output_that_cannot_be_written_is_refused_before_reading(tmp_path: Path) -> None:
    """A folder that is a file: exit 2 at once, while the pipe that feeds the scan is still open (a
    training run that has hours to go)."""
    (tmp_path / "notes").write_text("a file, not a folder\n")
    proc = subprocess.Popen(
        [*CLI, "scan", "--tee", "-o", "notes/r.md"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=_env(),
    )
    try:
        proc.stdin.write(SIGKILL_LOG.read_bytes()[:2000])  # part of the log; the pipe stays open
        proc.stdin.flush()
        started = time.monotonic()
        code = proc.wait(timeout=60)
        waited = time.monotonic() - started
    finally:
        proc.kill()
        proc.stdin.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert code == EXIT_ERROR, err
    assert err.strip() == "verl-logscan: error: cannot write notes/r.md: Not a directory (-o)"
    assert waited < 60


def test_metrics_csv_is_checked_before_the_scan_too(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("x\n")
    result = run_cli(["scan", str(OOM_LOG), "--metrics-csv", str(tmp_path / "plain" / "m.csv")])
    assert result.exit_code == EXIT_ERROR
    assert result.output.strip().endswith("Not a directory (--metrics-csv)")
    assert "FAILED" not in result.output  # nothing was scanned


def test_a_report_that_cannot_be_written_after_the_scan_still_shows_the_analysis(tmp_path: Path) -> None:
    """/dev/full accepts the check (a device one may write) and fails the write: the summary comes on
    stderr, the other report is written, and the last line says where the report could not go."""
    good = tmp_path / "r.md"
    proc = subprocess.run(
        [*CLI, "scan", str(OOM_LOG), "--format", "md", "-o", str(good), "-o", "/dev/full"],
        capture_output=True,
        env=_env(),
        timeout=120,
    )
    err = proc.stderr.decode()
    assert proc.returncode == EXIT_ERROR
    assert err.startswith("FAILED  cuda-oom")  # the analysis is on the screen
    assert f"full report written to {good}" in err
    assert err.splitlines()[-1] == (
        "verl-logscan: error: cannot write /dev/full: No space left on device (the report was written)"
    )
    assert good.read_text().startswith("## verl-logscan: job failed")


def test_no_report_written_anywhere_still_prints_the_summary(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*CLI, "scan", str(OOM_LOG), "--format", "json", "-o", "/dev/full"],
        capture_output=True,
        env=_env(),
        timeout=120,
    )
    err = proc.stderr.decode()
    assert proc.returncode == EXIT_ERROR
    assert err.startswith("FAILED  cuda-oom") and "gpu_memory_utilization" in err
    assert err.splitlines()[-1].endswith("No space left on device (the summary above is the analysis)")


def test_an_unknown_extension_is_refused_with_the_known_ones(tmp_path: Path) -> None:
    result = run_cli(["scan", str(OOM_LOG), "-o", str(tmp_path / "r.pdf")])
    assert result.exit_code == EXIT_ERROR
    assert result.output.strip() == (
        f"verl-logscan: error: -o {tmp_path / 'r.pdf'}: .pdf is not a report format; name the file "
        ".md, .html, .json or .txt (text), or give --format"
    )
    assert not (tmp_path / "r.pdf").exists()
    # --format names the format of any name; a text name stays text
    assert run_cli(["scan", str(OOM_LOG), "--format", "md", "-o", str(tmp_path / "r.pdf")]).exit_code == 1
    assert run_cli(["scan", str(OOM_LOG), "-o", str(tmp_path / "r.txt")]).exit_code == 1


def test_metrics_csv_is_named_in_the_written_line_and_integer_keys_stay_integers(tmp_path: Path) -> None:
    metrics = tmp_path / "m.csv"
    result = run_cli(["scan", str(OOM_LOG), "-o", str(tmp_path / "r.txt"), "--metrics-csv", str(metrics)])
    assert result.exit_code == EXIT_FAILURE_FOUND
    assert result.stderr.strip() == (
        f"verl-logscan: failed: cuda-oom; report written to {tmp_path / 'r.txt'}; metrics to {metrics}"
    )
    result = run_cli(["scan", str(OOM_LOG), "--metrics-csv", str(metrics)])
    assert result.stderr.strip() == f"verl-logscan: failed: cuda-oom; metrics written to {metrics}"
    rows = list(csv.DictReader(io.StringIO(metrics.read_text())))
    assert [r["training/global_step"] for r in rows] == ["1", "2", "3"]  # not 1.0, 2.0, 3.0
    assert [r["step"] for r in rows] == ["1", "2", "3"]
