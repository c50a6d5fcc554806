"""`fleet` writes what `scan` would: each job's log text redacted through the same pipeline (secrets
always, hosts on request, nothing with --no-redact), in every format; and the summary's format comes
from -o FILE's extension, as a scan's report's does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logparse.process import EXIT_ERROR, EXIT_FAILURE_FOUND
from tests.conftest import run_cli

TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
# an error no catalog entry names: its summary is the row's message, the log text fleet prints
UNKNOWN_ERROR = f"[rank0]: WeirdQuotaError: the hub rejected token {TOKEN} for node gpu-node-17.example.org\n"
FORMATS = ("text", "json", "md", "html", "csv")


@pytest.fixture
def job(tmp_path: Path) -> Path:
    log = tmp_path / "job.log"
    log.write_text(
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/workspace/job/train.py", line 3, in <module>\n'
        "[rank0]:     upload()\n" + UNKNOWN_ERROR
    )
    return log


@pytest.mark.parametrize("fmt", FORMATS)
def test_fleet_masks_the_secrets_scan_masks(job: Path, tmp_path: Path, fmt: str) -> None:
    scan = run_cli(["scan", str(job), "--format", "json"])
    assert TOKEN not in scan.output and "[redacted:" in scan.output
    result = run_cli(["fleet", str(job), "--jobs", "1", "--format", fmt])
    assert result.exit_code == EXIT_FAILURE_FOUND, result.output
    assert TOKEN not in result.output
    assert "redacted" in result.output  # the message is there, masked


def test_fleet_masks_hosts_on_request_and_nothing_with_no_redact(job: Path) -> None:
    hosts = run_cli(["fleet", str(job), "--jobs", "1", "--format", "json", "--redact-hosts"])
    assert "gpu-node-17" not in hosts.output and TOKEN not in hosts.output
    raw = run_cli(["fleet", str(job), "--jobs", "1", "--format", "json", "--no-redact"])
    assert TOKEN in raw.output
    both = run_cli(["fleet", str(job), "--no-redact", "--redact-hosts"])
    assert both.exit_code == EXIT_ERROR and "contradict" in both.output


@pytest.mark.parametrize(
    ("name", "check"),
    [
        ("fleet.html", lambda text: text.lstrip().lower().startswith("<!doctype html")),
        ("fleet.md", lambda text: text.startswith("#") or "| job |" in text.lower()),
        ("fleet.json", lambda text: json.loads(text)["jobs"][0]["status"] == "failed"),
        ("fleet.csv", lambda text: text.splitlines()[0].startswith("job,")),
        ("fleet.txt", lambda text: "failed" in text and not text.lstrip().startswith(("<", "{"))),
    ],
)
def test_fleet_takes_its_format_from_the_output_extension(
    job: Path, tmp_path: Path, name: str, check
) -> None:
    out = tmp_path / name
    result = run_cli(["fleet", str(job), "--jobs", "1", "-o", str(out)])
    assert result.exit_code == EXIT_FAILURE_FOUND, result.output
    assert check(out.read_text()), out.read_text()[:300]


def test_a_format_that_contradicts_the_extension_is_a_usage_error(job: Path, tmp_path: Path) -> None:
    result = run_cli(["fleet", str(job), "--format", "csv", "-o", str(tmp_path / "fleet.html")])
    assert result.exit_code == EXIT_ERROR and "contradicts" in result.output
    assert not (tmp_path / "fleet.html").exists()


@pytest.mark.slow  # fleet on Ray
def test_fleet_on_ray_masks_as_the_local_engine_does(job: Path) -> None:
    ray = pytest.importorskip("ray")
    local = run_cli(["fleet", str(job), "--jobs", "1", "--format", "json"])
    ray.init(address="local", num_cpus=1, include_dashboard=False)  # (a Ray of its own, whatever runs here)
    try:
        on_ray = run_cli(["fleet", str(job), "--format", "json", "--engine", "ray"])
    finally:
        ray.shutdown()
    assert on_ray.exit_code == EXIT_FAILURE_FOUND, on_ray.output
    assert TOKEN not in on_ray.output
    assert json.loads(on_ray.output)["jobs"] == json.loads(local.output)["jobs"]
