"""The Python API (README, "From Python"): README's example runs as written, and its reports are the
ones `verl-logscan scan` writes for the same logs and options (issue 39, point 11)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT, SAMPLES, run_cli

README = (ROOT / "README.md").read_text()


def readme_example() -> str:
    section = README.split("### From Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_the_readme_example_runs_as_written(tmp_path: Path) -> None:
    """In a fresh interpreter, from the repository (the example's sample path), writing into tmp_path."""
    script = tmp_path / "example.py"
    script.write_text(
        f"import os\nos.chdir({str(ROOT)!r})\n"
        + readme_example().replace('Path("report.md")', f"Path({str(tmp_path / 'report.md')!r})")
    )
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "FAILED cuda-oom · WorkerDict pid 11847 · stage actor-update"  # as README says
    assert lines[1].startswith("cuda-oom None actor-update Lower the rollout reservation")
    assert (tmp_path / "report.md").read_text().startswith("## verl-logscan: job failed: `cuda-oom`")


@pytest.mark.parametrize("fmt", ["json", "md", "html", "text"])
def test_the_api_reports_are_the_cli_reports(fmt: str) -> None:
    from logparse import analyse

    log = str(SAMPLES / "torchrun-sigkill.log")
    report = analyse(log)
    cli = run_cli(["scan", log, "--format", fmt]).stdout
    rendered = {
        "json": report.to_json,
        "md": report.to_markdown,
        "html": report.to_html,
        "text": report.to_text,
    }
    assert rendered[fmt]() == cli
    assert report.exit_code == 1 and report.status == "failed"


def test_options_and_errors_as_the_cli_has_them(tmp_path: Path) -> None:
    from logparse import AnalysisError, analyse

    folder = str(FIXTURES / "torchrun" / "logdir")
    plain = analyse(folder, disable=["dataset-file-not-found"], redact=False)
    assert json.loads(plain.to_json()) == json.loads(
        run_cli(
            ["scan", folder, "--format", "json", "--disable", "dataset-file-not-found", "--no-redact"]
        ).stdout
    )
    with pytest.raises(AnalysisError, match="no such file"):
        analyse(str(tmp_path / "missing.log"))
    with pytest.raises(AnalysisError, match="--disable nope: no catalog entry"):
        analyse(folder, disable=["nope"])
    healthy = analyse([str(SAMPLES / "torchrun-healthy.log")])
    assert healthy.exit_code == 0 and healthy.root_cause is None
