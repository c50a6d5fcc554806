"""Cascades, chronology, NCCL lag, unknown errors, and benign logs that must stay healthy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import FIXTURES, run_cli

CASCADES = FIXTURES / "cascades"
EXPECTED = yaml.safe_load((CASCADES / "expected.yaml").read_text())
BENIGN = sorted((FIXTURES / "benign").glob("*.log"))


def scan_json(path: Path) -> tuple[int, dict]:
    r = run_cli(["scan", str(path), "--format", "json"])
    return r.exit_code, json.loads(r.stdout)


@pytest.mark.parametrize("case", EXPECTED, ids=lambda c: c["file"])
def test_cascade(case: dict) -> None:
    code, report = scan_json(CASCADES / case["file"])
    assert code == 1
    rc = report["root_cause"]
    assert rc["category"] == case["category"], rc["explanation"]
    texts = [rc["message"]] + [e["text"] for e in rc["evidence"]]
    assert any(case["root_line"] in t for t in texts)
    for key in ("rank", "stage", "pid"):
        if key in case:
            assert rc[key] == case[key], key
    for sentence in case.get("explanation", []):
        assert any(sentence in line for line in rc["explanation"]), (sentence, rc["explanation"])
    if "similar" in case:
        assert len(rc["similar"]) == case["similar"]
    cats = {s["category"] for s in report["symptoms"]}
    for cat in case.get("symptom_categories", []):
        assert cat in cats
    for cat, ranks in case.get("symptom_ranks", {}).items():
        got = sorted({r for s in report["symptoms"] if s["category"] == cat for r in s["ranks"]})
        assert got == ranks


def test_cascade_symptoms_name_their_cause() -> None:
    _, report = scan_json(CASCADES / "torchrun-oom-watchdog.log")
    timeouts = [s for s in report["symptoms"] if s["category"] == "collective-timeout"]
    assert timeouts and all((s["explained_by"] or "").startswith("cuda-oom") for s in timeouts)
    assert any("Beat" in line and "echo" in line for line in report["root_cause"]["explanation"])


def test_chronology_beats_print_order(tmp_path: Path) -> None:
    """Two equally specific causes: the earlier timestamp wins even when printed later."""
    log = tmp_path / "two.log"
    log.write_text(
        "2025-10-03 18:00:00,000\tINFO worker.py:1832 -- Started a local Ray instance.\n"
        "(WorkerDict pid=7) ERROR 10-03 18:40:00 [loader.py:12] ModuleNotFoundError: No module named 'flash_attn'\n"
        "(WorkerDict pid=8) ERROR 10-03 18:30:00 [worker.py:88] torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which 1.00 GiB is free.\n"
    )
    _, report = scan_json(log)
    assert report["root_cause"]["category"] == "cuda-oom"


def test_wrapper_alone_is_low_confidence_not_healthy(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    log.write_text(
        "E0731 10:50:08.043000 3247964 torch/distributed/elastic/multiprocessing/api.py:869] failed "
        "(exitcode: -9) local_rank: 1 (pid: 3248030) of binary: /opt/venv/bin/python\n"
    )
    code, report = scan_json(log)
    assert code == 1
    assert report["root_cause"]["category"] == "host-oom"
    assert report["root_cause"]["confidence"] <= 0.4


@pytest.mark.parametrize("path", BENIGN, ids=lambda p: p.stem)
def test_benign_logs_stay_healthy(path: Path) -> None:
    code, report = scan_json(path)
    assert (code, report["status"], report["root_cause"]) == (0, "healthy", None), report.get("root_cause")


def test_enough_benign_fixtures() -> None:
    assert len(BENIGN) >= 10


def test_remediation_quotes_the_jobs_own_values() -> None:
    from tests.conftest import SAMPLES

    _, report = scan_json(SAMPLES / "ray-actor-exception.log")
    quoted = report["root_cause"]["remediation"]["job_values"]
    assert "`gpu_memory_utilization=0.6` (`actor_rollout_ref.rollout.gpu_memory_utilization`)" in quoted
    assert "`ppo_micro_batch_size_per_gpu=16`" in quoted


def test_loss_turning_nan_is_reported_with_its_step(tmp_path: Path) -> None:
    lines = [
        f"(TaskRunner pid=1) step:{n} - actor/pg_loss:np.float64({0.5 / n}) - actor/grad_norm:np.float64(1.{n})"
        for n in range(1, 6)
    ]
    lines += [
        f"(TaskRunner pid=1) step:{n} - actor/pg_loss:np.float64(nan) - actor/grad_norm:np.float64(nan)"
        for n in range(6, 9)
    ]
    log = tmp_path / "nan.log"
    log.write_text("\n".join(lines) + "\n")
    code, report = scan_json(log)
    assert code == 1 and report["root_cause"]["category"] == "numerical-instability"
    first = [a for a in report["metrics"]["anomalies"] if a["kind"] == "nan-inf"]
    assert first and min(a["step"] for a in first) == 6


def test_healthy_run_shows_last_step_and_trends() -> None:
    from tests.conftest import SAMPLES

    code, report = scan_json(SAMPLES / "ray-healthy.log")
    assert code == 0 and report["progress"]["last_step"] == 5 and report["progress"]["completed"]
    assert report["metrics"]["steps"] == 5 and report["metrics"]["series"]


def test_the_status_is_a_closed_vocabulary_that_reads_as_its_word() -> None:
    from logparse.model import ReportStatus
    from logparse.pipeline import analyse
    from patterns import load_catalog
    from reports import render
    from reports.escape import without_controls

    report = analyse([str(CASCADES / EXPECTED[0]["file"])], load_catalog([]))
    assert report.status is ReportStatus.FAILED and report.failed
    assert without_controls(report).status is ReportStatus.FAILED  # (not turned into a plain str)
    assert json.loads(render(report, "json"))["status"] == "failed"
    assert f"{report.status}" == str(report.status) == "failed"
