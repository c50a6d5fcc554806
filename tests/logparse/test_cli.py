"""CLI in, report out: paths, stdin, folders, .gz, -o, exit codes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from logparse.process import EXIT_ERROR, EXIT_FAILURE_FOUND, EXIT_HEALTHY
from tests.conftest import run_cli

OOM = """\
(TaskRunner pid=100) step:1 - actor/pg_loss:np.float64(0.1)
Traceback (most recent call last):
  File "/workspace/job/main_ppo.py", line 64, in main
    run_ppo(config)
ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_update_actor() (pid=4, ip=10.0.0.9, actor_id=a, repr=<x>)
  File "/opt/venv/lib/python3.10/site-packages/verl/workers/fsdp_workers.py", line 466, in update_actor
    metrics = self.actor.update_policy(data=data)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.11 GiB of which 1.02 GiB is free.
"""
HEALTHY = "(TaskRunner pid=1) step:1 - actor/pg_loss:np.float64(0.1)\n(TaskRunner pid=1) step:2 - x:1\n"


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    (tmp_path / "oom.log").write_text(OOM)
    (tmp_path / "ok.log").write_text(HEALTHY)
    return tmp_path


def test_file_failed_exit_1_text_summary(logs: Path) -> None:
    r = run_cli(["scan", str(logs / "oom.log")])
    assert r.exit_code == EXIT_FAILURE_FOUND
    assert "FAILED" in r.stdout and "cuda-oom" in r.stdout
    assert "\x1b[" not in r.stdout  # not a terminal: no colour


def test_healthy_exit_0(logs: Path) -> None:
    r = run_cli(["scan", str(logs / "ok.log"), "--format", "json"])
    assert r.exit_code == EXIT_HEALTHY
    report = json.loads(r.stdout)
    assert report["status"] == "healthy" and report["root_cause"] is None


def test_json_root_cause_fields(logs: Path) -> None:
    r = run_cli(["scan", str(logs / "oom.log"), "--format", "json"])
    rc = json.loads(r.stdout)["root_cause"]
    assert rc["category"] == "cuda-oom"
    assert rc["stage"] == "actor-update"
    assert rc["message"].startswith("torch.OutOfMemoryError: CUDA out of memory.")
    assert rc["evidence"][-1] == {"source": str(logs / "oom.log"), "line": 8, "text": OOM.splitlines()[7]}
    assert rc["pid"] == 4 and rc["node"] == "10.0.0.9"


def test_stdin_dash_and_bare_pipe_agree(logs: Path) -> None:
    a = run_cli(["scan", "-", "--format", "json"], input=OOM)
    b = run_cli(["scan", "--format", "json"], input=OOM)
    c = run_cli([], input=OOM)
    d = run_cli(["--format", "json"], input=OOM)
    assert a.exit_code == b.exit_code == c.exit_code == d.exit_code == EXIT_FAILURE_FOUND
    assert a.stdout == b.stdout == d.stdout
    assert json.loads(a.stdout)["inputs"][0]["path"] == "<stdin>"
    assert "cuda-oom" in c.stdout


def test_several_files_and_folder(logs: Path) -> None:
    r = run_cli(["scan", str(logs / "ok.log"), str(logs / "oom.log"), "--format", "json"])
    report = json.loads(r.stdout)
    assert [i["path"] for i in report["inputs"]] == [str(logs / "ok.log"), str(logs / "oom.log")]
    assert report["root_cause"]["category"] == "cuda-oom"
    r2 = run_cli(["scan", str(logs), "--format", "json"])
    assert sorted(i["path"] for i in json.loads(r2.stdout)["inputs"]) == sorted(
        [str(logs / "ok.log"), str(logs / "oom.log")]
    )
    assert r2.exit_code == EXIT_FAILURE_FOUND


def test_gz_input(logs: Path) -> None:
    gz = logs / "oom.log.gz"
    gz.write_bytes(gzip.compress(OOM.encode()))
    r = run_cli(["scan", str(gz), "--format", "json"])
    assert json.loads(r.stdout)["root_cause"]["category"] == "cuda-oom"


def test_output_file_written_atomically_and_input_protected(logs: Path) -> None:
    out = logs / "report.md"
    r = run_cli(["scan", str(logs / "oom.log"), "--format", "md", "-o", str(out)])
    assert r.exit_code == EXIT_FAILURE_FOUND
    assert r.stdout == ""
    assert "report written to" in r.stderr
    assert out.read_text().startswith("## verl-logscan: job failed")
    assert not list(logs.glob(".report.md.*"))
    before = (logs / "oom.log").read_text()
    r = run_cli(["scan", str(logs / "oom.log"), "-o", str(logs / "oom.log")])
    assert r.exit_code == EXIT_ERROR
    assert "refusing to overwrite" in r.stderr
    assert (logs / "oom.log").read_text() == before


def test_bad_inputs_exit_2_with_one_line(logs: Path) -> None:
    r = run_cli(["scan", str(logs / "missing.log")])
    assert r.exit_code == EXIT_ERROR
    assert r.stderr.strip() == f"verl-logscan: error: {logs / 'missing.log'}: no such file or folder"
    r = run_cli(["scan", str(logs / "ok.log"), "--format", "xml"])
    assert r.exit_code == EXIT_ERROR
    empty = logs / "empty"
    empty.mkdir()
    r = run_cli(["scan", str(empty)])
    assert r.exit_code == EXIT_ERROR and "no log files" in r.stderr


def test_catalog_list_and_explain() -> None:
    r = run_cli(["catalog", "list"])
    assert r.exit_code == 0 and "cuda-oom" in r.stdout
    r = run_cli(["explain", "cuda-oom"])
    assert r.exit_code == 0
    for section in ("What it is", "Why it happens", "Example", "Fix"):
        assert section in r.stdout
    r = run_cli(["explain", "cuda-om"])
    assert r.exit_code == EXIT_ERROR and "did you mean 'cuda-oom'" in r.stderr


def test_python_dash_m_works() -> None:
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-m", "logparse", "--version"], capture_output=True, text=True, check=False
    )
    assert p.returncode == 0 and "verl-logscan" in p.stdout
