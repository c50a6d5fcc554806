"""README's set-up advice stays true: a virtual environment (or pipx) first, because PEP 668 makes the
system pip refuse; pandas is where README says it is used, and nowhere else."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES

README = (ROOT / "README.md").read_text()


def _section(title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", README, re.MULTILINE | re.DOTALL)
    assert m, f"README has no '## {title}' section"
    return m.group(1)


def test_set_up_starts_with_a_virtual_environment_or_pipx() -> None:
    setup = _section("Set up")
    blocks = re.findall(r"```\n(.*?)```", setup, re.DOTALL)
    # the first command a reader meets makes the environment; pip runs inside it
    assert blocks[0].splitlines()[0] == "python3 -m venv .venv && . .venv/bin/activate"
    assert "pip install -e ." in blocks[0]
    assert "PEP 668" in setup and "externally-managed-environment" in setup
    assert "pipx install ." in setup


def _modules_after(args: list[str], tmp_path: Path) -> set[str]:
    """The modules a CLI run imported (in a fresh interpreter, as a user's run would)."""
    code = (
        "import sys\nfrom logparse.cli import main\nsys.argv = ['verl-logscan', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(m for m in sys.modules if m in ('pandas', 'numpy'))), file=sys.stderr)\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    return set(p.stderr.strip().splitlines()[-1].split()) if p.stderr.strip() else set()


@pytest.mark.slow
def test_pandas_only_where_readme_says(tmp_path: Path) -> None:
    sample = str(SAMPLES / "ray-healthy.log")
    assert "pandas" not in _modules_after(["scan", sample, "--format", "json"], tmp_path)
    assert "pandas" in _modules_after(
        ["scan", sample, "--format", "json", "--metrics-csv", "m.csv"], tmp_path
    )
    assert (tmp_path / "m.csv").read_text().startswith("step,")
    assert "pandas" in _modules_after(["fleet", sample, "--format", "csv"], tmp_path)
    setup = _section("Set up")
    assert "`--metrics-csv`" in setup and "`fleet`" in setup and "a plain `scan` never imports it" in setup
