"""Golden JSON, Markdown, HTML and the text summary for every sample; re-bless with `pytest tests/reports/test_golden.py --bless`."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import GOLDEN, ROOT, run_cli, sample_logs

SCHEMA = json.loads((ROOT / "reports" / "schema.json").read_text())
FORMATS = {"json": ".json", "md": ".md", "html": ".html", "text": ".txt"}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("sample", sample_logs(), ids=lambda p: p.stem)
def test_golden(sample: Path, fmt: str, bless: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    rel = sample.relative_to(ROOT).as_posix()
    result = run_cli(["scan", rel, "--format", fmt])
    assert result.exit_code in (0, 1), result.output
    golden = GOLDEN / f"{sample.stem}{FORMATS[fmt]}"
    if bless:
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(result.stdout)
    assert golden.exists(), f"no golden file {golden}; run with --bless"
    assert result.stdout == golden.read_text(), f"{golden} differs; re-bless with --bless and read the diff"


@pytest.mark.parametrize("sample", sample_logs(), ids=lambda p: p.stem)
def test_report_validates_against_schema(sample: Path) -> None:
    result = run_cli(["scan", str(sample), "--format", "json"])
    jsonschema.validate(json.loads(result.stdout), SCHEMA)


def test_golden_json_files_validate() -> None:
    files = sorted(GOLDEN.glob("*.json"))
    assert files
    for f in files:
        jsonschema.validate(json.loads(f.read_text()), SCHEMA)
