"""A plain torchrun job says so by its launcher's lines (`torch/distributed/run.py`, the elastic agent)
and its ranks' `[rankN]:` prefixes alone, with no version printed: its fix starts with the torchrun
steps, not verl's rollout setting (issue 39, point 8). Through the real command."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli

OOM = (
    "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total "
    "capacity of 79.11 GiB of which 1.00 GiB is free.\n"
)
BANNER = (
    "W0731 10:50:05.111000 3247964 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment "
    "variable for each process to be 1 in default, to avoid your system being overloaded, please further "
    "tune the variable for optimal performance in your application as needed.\n"
)
VERL_STEP = "(TaskRunner pid=11) step:1 - actor/pg_loss:np.float64(0.1) - timing_s/step:1.5\n"


def _scan(tmp_path: Path, text: str) -> dict:
    log = tmp_path / "job.log"
    log.write_text(text)
    result = run_cli(["scan", str(log), "--format", "json"])
    return json.loads(result.stdout)


def test_rank_prefixes_alone_make_the_torchrun_fix_come_first(tmp_path: Path) -> None:
    report = _scan(tmp_path, OOM)
    assert report["environment"]["launcher"] == "torchrun"
    fix = report["root_cause"]["remediation"]["fix"]
    assert fix[0].startswith("Lower the per-GPU batch size or the sequence length")
    assert not any("actor_rollout_ref" in step for step in fix)


def test_the_launcher_banner_alone_makes_a_torchrun_job(tmp_path: Path) -> None:
    report = _scan(
        tmp_path, BANNER + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    assert report["environment"]["launcher"] == "torchrun"
    assert report["root_cause"]["remediation"]["fix"][0].startswith("Lower the per-GPU batch size")
    text = run_cli(["scan", str(tmp_path / "job.log")]).stdout
    [fix] = [line for line in text.splitlines() if line.startswith("  fix")]
    assert "Lower the per-GPU batch size" in fix


def test_a_ray_actors_rank_prefix_is_not_torchrun(tmp_path: Path) -> None:
    """torch's excepthook prints `[rank0]:` in a Ray worker too: a verl job stays a verl job."""
    report = _scan(tmp_path, VERL_STEP + "(WorkerDict pid=7, ip=10.0.0.2) " + OOM)
    assert "launcher" not in report["environment"]
    assert "gpu_memory_utilization" in report["root_cause"]["remediation"]["fix"][0]


def test_no_launcher_shown_keeps_every_step(tmp_path: Path) -> None:
    report = _scan(tmp_path, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert "launcher" not in report["environment"]
    assert "gpu_memory_utilization" in report["root_cause"]["remediation"]["fix"][0]
