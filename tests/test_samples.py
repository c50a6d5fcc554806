"""`cat samples/<x>.log | verl-logscan scan --format json` agrees with what a person concluded
(samples/expected.yaml, written by hand, apart from the golden files)."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import SAMPLES, run_cli

EXPECTED = yaml.safe_load((SAMPLES / "expected.yaml").read_text())


def test_every_sample_has_an_expectation() -> None:
    assert {e["file"] for e in EXPECTED} == {p.name for p in SAMPLES.glob("*.log")}
    assert len(EXPECTED) >= 6


@pytest.mark.parametrize("case", EXPECTED, ids=lambda e: e["file"])
def test_sample_verdict(case: dict) -> None:
    data = (SAMPLES / case["file"]).read_bytes()
    result = run_cli(["scan", "--format", "json"], input=data)
    report = json.loads(result.stdout)
    assert report["status"] == case["status"]
    assert result.exit_code == (1 if case["status"] == "failed" else 0)
    rc = report["root_cause"]
    progress = report["progress"]
    for key in ("stage_reached", "last_step", "completed"):
        if key in case:
            assert progress[key] == case[key], key
    if case["status"] == "healthy":
        assert rc is None
        return
    assert rc["category"] == case["category"]
    texts = [rc["message"]] + [e["text"] for e in rc["evidence"]]
    assert any(case["root_line"] in t for t in texts), (case["root_line"], rc["message"])
    if "rank" in case:
        assert rc["rank"] == case["rank"]
    for key in ("stage",):
        if key in case:
            assert rc[key] == case[key]
