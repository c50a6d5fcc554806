"""`fleet FOLDER` of many jobs says so, with the exact command that gives one row per job, and `scan`'s
warning names every job's path (no `...`): the command printed is the command that works (issue 39,
point 7). Through the real command."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

from tests.conftest import FIXTURES, SAMPLES, run_cli

RUN = FIXTURES / "torchrun" / "logdir" / "none_x3hri268"  # one torchrun --log-dir run


def _folder_of_jobs(root: Path, runs: int) -> Path:
    folder = root / "runs"
    for i in range(runs):
        shutil.copytree(RUN, folder / f"none_run{i:02d}")
    shutil.copy(SAMPLES / "torchrun-sigkill.log", folder / "job_a.log")
    return folder


def _command(warning: str) -> list[str]:
    return shlex.split(warning.split("for one row per job: ", 1)[1])


def test_fleet_of_a_folder_of_jobs_prints_the_exact_command_and_it_works(tmp_path: Path) -> None:
    folder = _folder_of_jobs(tmp_path, 2)
    out = tmp_path / "f.json"
    r = run_cli(["fleet", str(folder), str(SAMPLES / "ray-healthy.log"), "-o", str(out)])
    assert r.exit_code == 1, r.output
    [warning] = [line for line in r.stderr.splitlines() if "warning" in line]
    assert warning.startswith(f"verl-logscan: warning: {folder} looks like 3 jobs")
    assert "analysed as one job (one row)" in warning
    assert len(json.loads(out.read_text())["jobs"]) == 2  # as given: the folder is one row
    command = _command(warning)
    assert command[:2] == ["verl-logscan", "fleet"]
    assert command[2:] == [
        str(folder / "none_run00"),
        str(folder / "none_run01"),
        str(folder / "job_a.log"),
        str(SAMPLES / "ray-healthy.log"),
        "-o",
        str(out),
    ]
    again = run_cli(command[1:])  # the printed command, run as printed
    assert again.exit_code == 1 and "warning" not in again.stderr
    rows = json.loads(out.read_text())["jobs"]
    assert [row["job"] for row in rows] == command[2:-2]


def test_scan_names_every_job_of_a_large_folder(tmp_path: Path) -> None:
    folder = _folder_of_jobs(tmp_path, 7)  # more jobs than the warning describes by name
    r = run_cli(["scan", str(folder), "--format", "json"])
    warning = r.stderr.splitlines()[0]
    assert "and 2 more" in warning  # (the description is bounded)
    command = _command(warning)
    assert "..." not in command and len(command) == 2 + 8  # every job's path: the command is exact
    rows = json.loads(run_cli([*command[1:], "--format", "json"]).stdout)["jobs"]
    assert len(rows) == 8


def test_jobs_that_share_a_folder_get_a_scan_command_each(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    for name in ("alpha-1.log", "alpha-2.log", "beta-1.log", "beta-2.log"):
        shutil.copy(SAMPLES / "torchrun-healthy.log", folder / name)
    r = run_cli(["fleet", str(folder), "--format", "json"])
    [warning] = [line for line in r.stderr.splitlines() if "warning" in line]
    advice = warning.split("to read each job on its own: ", 1)[1]
    commands = [shlex.split(c) for c in advice.split("; ")]
    jobs = sorted(sorted(Path(f).name for f in c[2:]) for c in commands)
    assert jobs == [["alpha-1.log", "alpha-2.log"], ["beta-1.log", "beta-2.log"]]
    for c in commands:
        assert c[:2] == ["verl-logscan", "scan"] and len(c) == 4
        assert run_cli(c[1:]).exit_code == 0
