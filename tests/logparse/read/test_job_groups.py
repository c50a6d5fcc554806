"""A folder that holds several jobs is still read as one, but the user is told, with the `fleet`
command that gives one row per job; the layouts of one job (a torchrun --log-dir, a Ray session, rank
files beside a driver log) raise no warning."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from logparse.read.layout import jobs_in_folder, name_family, several_jobs
from logparse.read.sources import expand_inputs
from tests.conftest import FIXTURES, SAMPLES, run_cli

LOGDIR = FIXTURES / "torchrun" / "logdir"
RAY = FIXTURES / "ray"


@pytest.mark.parametrize(
    "name, family",
    [
        ("rank0.log", ""),
        ("rank_3.log", ""),
        ("local_rank0", ""),
        ("node1", ""),
        ("0", ""),
        ("stdout.log", ""),
        ("driver.log", ""),
        ("train.log", ""),
        ("console.log", ""),
        ("worker-3.err", ""),
        ("job_a.log", "a"),
        ("exp1", "exp1"),
        ("exp2", "exp2"),
        ("slurm-12345.out", "slurm-12345"),
        ("train_20240601.log.gz", "20240601"),
        ("wandb", "wandb"),
    ],
)
def test_name_family(name: str, family: str) -> None:
    assert name_family(name) == family


def groups_of(folder: Path) -> list:
    return jobs_in_folder(str(folder), expand_inputs([str(folder)]))


@pytest.mark.parametrize(
    "folder", [LOGDIR, RAY, LOGDIR / "none_x3hri268"], ids=["torchrun-logdir", "ray", "run"]
)
def test_one_job_layouts_are_one_job(folder: Path) -> None:
    assert not several_jobs(groups_of(folder))


def test_rank_files_beside_a_driver_log_are_one_job(tmp_path: Path) -> None:
    for name in ("rank0.log", "rank1.log", "driver.log", "node1/stdout.log", "node1/stderr.log"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("x\n")
    assert not several_jobs(groups_of(tmp_path))


def mixed_folder(root: Path) -> Path:
    shutil.copytree(LOGDIR / "none_x3hri268", root / "none_x3hri268")
    shutil.copytree(LOGDIR / "none_x3hri268", root / "none_k2p9q1aa")
    shutil.copy(SAMPLES / "torchrun-sigkill.log", root / "job_a.log")
    shutil.copy(SAMPLES / "torchrun-healthy.log", root / "job_b.log")
    (root / "driver.log").write_text("launching\n")  # a generic name joins no job of its own
    return root


def test_several_runs_and_unrelated_names_are_told_apart(tmp_path: Path) -> None:
    groups = groups_of(mixed_folder(tmp_path))
    assert several_jobs(groups)
    got = sorted((g.kind, g.label, len(g.files), g.root) for g in groups)
    assert got == [
        ("name", "job_a.log", 1, str(tmp_path / "job_a.log")),
        ("name", "job_b.log", 1, str(tmp_path / "job_b.log")),
        ("torchrun", "none_k2p9q1aa", 11, str(tmp_path / "none_k2p9q1aa")),
        ("torchrun", "none_x3hri268", 11, str(tmp_path / "none_x3hri268")),
    ]


def test_scan_of_a_several_job_folder_warns_and_notes_it(tmp_path: Path) -> None:
    folder = mixed_folder(tmp_path)
    r = run_cli(["scan", str(folder), "--format", "json"])
    assert r.exit_code == 1
    warning = r.stderr.splitlines()[0]
    assert warning.startswith(f"verl-logscan: warning: {folder} looks like 4 jobs")
    assert "torchrun run none_x3hri268 (11 files)" in warning and "job job_a.log" in warning
    fleet = warning.split("verl-logscan fleet ", 1)[1].split()
    assert sorted(fleet) == sorted(
        str(folder / n) for n in ("none_x3hri268", "none_k2p9q1aa", "job_a.log", "job_b.log")
    )
    notes = json.loads(r.stdout)["notes"]
    assert notes[0] == warning.removeprefix("verl-logscan: warning: ")  # the report says it too
    # the suggested command works: one row per job
    rows = json.loads(run_cli(["fleet", *fleet, "--format", "json"]).stdout)["jobs"]
    assert len(rows) == 4


def test_one_job_folder_scans_without_a_warning() -> None:
    r = run_cli(["scan", str(LOGDIR), "--format", "json"])
    assert "warning" not in r.stderr
    assert not any("looks like" in n for n in json.loads(r.stdout)["notes"])
