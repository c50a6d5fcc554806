"""A path with a component longer than the file system allows (NAME_MAX, 255 bytes) is bad input: a
one-line error naming it and exit 2, never an OSError traceback. (Outputs: tests/logparse/test_output_targets.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from logparse.process import EXIT_ERROR
from tests.conftest import SAMPLES, run_cli

LONG = "a" * 300


@pytest.mark.parametrize(
    "args",
    [
        ["scan", "{long}.log"],
        ["scan", "{long}/"],
        ["scan", "{long}/job.log"],
        ["scan", "{job}", "{long}.log"],
        ["scan", "{job}", "--catalog", "{long}.yaml"],
        ["catalog", "check", "{long}.yaml"],
        ["explain", "cuda-oom", "--catalog", "{long}.yaml"],
    ],
    ids=["file", "folder", "under-a-folder", "second-input", "catalog", "catalog-check", "explain"],
)
def test_a_name_too_long_is_a_one_line_error(tmp_path: Path, args: list[str]) -> None:
    job = SAMPLES / "ray-actor-exception.log"
    argv = [a.format(long=tmp_path / LONG, job=job) for a in args]
    result = run_cli(argv)
    assert result.exit_code == EXIT_ERROR, result.output
    assert "Traceback" not in result.output and "OSError" not in result.output
    assert "File name too long" in result.stderr


def test_fleet_reports_a_name_too_long_as_an_error_row(tmp_path: Path) -> None:
    result = run_cli(["fleet", str(tmp_path / LONG), "--format", "csv"])
    assert result.exit_code == EXIT_ERROR
    assert "File name too long" in result.stderr and "OSError" not in result.output
