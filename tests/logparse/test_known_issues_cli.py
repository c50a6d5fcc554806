"""A team's own known issues on the command line: --known-issues FILE and $VERL_LOGSCAN_KNOWN_ISSUES,
a bad file (exit 2, every problem said, no traceback), `catalog check --known-issues` and `explain`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logparse.process import EXIT_ERROR, EXIT_FAILURE_FOUND
from tests.conftest import run_cli

OURS = """\
- id: team-reward-server-down
  project: our-infra
  url: https://tracker.example.internal/browse/RL-77
  title: Reward server rejects connections after its nightly restart
  symptom:
    patterns: ['reward server at \\S+ refused the connection']
  affected: not stated
  fixed_in: {text: Not fixed; the server team tracks it in RL-77.}
  workaround: Retry after 02:30 UTC.
  source_quote: 'RL-77: "the server restarts nightly at 02:00 UTC".'
  examples:
    match: ['(TaskRunner pid=77) RuntimeError: reward server at 10.0.0.9:8000 refused the connection']
    no_match: [{line: '(TaskRunner pid=77) RuntimeError: reward server returned 500', why: another failure}]
"""
LOG = "(TaskRunner pid=77) RuntimeError: reward server at 10.0.0.9:8000 refused the connection\n"


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path]:
    ours = tmp_path / "ours.yaml"
    ours.write_text(OURS, encoding="utf-8")
    log = tmp_path / "job.log"
    log.write_text(LOG, encoding="utf-8")
    return ours, log


def _known(result) -> list[dict]:
    return json.loads(result.output)["known_issues"]


def test_a_team_file_matches_with_its_internal_url(files: tuple[Path, Path]) -> None:
    ours, log = files
    result = run_cli(["scan", str(log), "--format", "json", "--known-issues", str(ours)])
    assert result.exit_code == EXIT_FAILURE_FOUND
    (k,) = _known(result)
    assert (k["id"], k["verdict"]) == ("team-reward-server-down", "may-match")
    assert k["url"] == "https://tracker.example.internal/browse/RL-77"
    assert "states no affected versions" in k["reason"]


def test_the_environment_variable_names_the_same_file(files: tuple[Path, Path], monkeypatch) -> None:
    ours, log = files
    monkeypatch.setenv("VERL_LOGSCAN_KNOWN_ISSUES", str(ours))
    (k,) = _known(run_cli(["scan", str(log), "--format", "json"]))
    assert k["id"] == "team-reward-server-down"
    text = run_cli(["scan", str(log)]).output
    assert "known    may match: Reward server rejects connections" in text


@pytest.mark.parametrize("how", ["option", "env"])
def test_a_bad_file_is_exit_2_with_its_problems(files: tuple[Path, Path], monkeypatch, how: str) -> None:
    ours, log = files
    ours.write_text(
        OURS.replace("affected: not stated", "affected: {vllm: 'newer than 0.8'}"), encoding="utf-8"
    )
    args = ["scan", str(log)]
    if how == "option":
        args += ["--known-issues", str(ours)]
    else:
        monkeypatch.setenv("VERL_LOGSCAN_KNOWN_ISSUES", str(ours))
    result = run_cli(args)
    assert result.exit_code == EXIT_ERROR
    assert "known issues error" in result.output
    assert f"{ours}:" in result.output and "is not a PEP 440 version range" in result.output
    assert "Traceback" not in result.output


def test_a_missing_file_is_exit_2(tmp_path: Path, files: tuple[Path, Path]) -> None:
    _, log = files
    result = run_cli(["scan", str(log), "--known-issues", str(tmp_path / "nope.yaml")])
    assert result.exit_code == EXIT_ERROR and "does not exist" in result.output


def test_catalog_check_runs_a_team_file(files: tuple[Path, Path]) -> None:
    ours, _ = files
    result = run_cli(["catalog", "check", "--known-issues", str(ours)])
    assert result.exit_code == 0, result.output
    assert "known issues: 1 entry, 2 examples" in result.output
    ours.write_text(OURS.replace("8000 refused the connection']", "8000 timed out']"), encoding="utf-8")
    result = run_cli(["catalog", "check", "--known-issues", str(ours)])
    assert result.exit_code == EXIT_ERROR
    assert "known issue 'team-reward-server-down': match example" in result.output


@pytest.mark.slow  # (the whole built-in catalog's check: seconds)
def test_catalog_check_runs_the_builtin_known_issues() -> None:
    result = run_cli(["catalog", "check"])
    assert result.exit_code == 0, result.output
    assert "known issues: " in result.output


def test_explain_lists_an_entrys_known_issues_and_shows_one() -> None:
    text = run_cli(["explain", "cuda-illegal-memory-access"]).output
    assert "Known upstream issues" in text
    assert "verl-vllm-0-6-3-illegal-memory-access" in text and "vllm <=0.6.3" in text
    one = run_cli(["explain", "vllm-fork-cuda-reinit"]).output
    assert "https://github.com/vllm-project/vllm/issues/9469" in one and "Workaround" in one


def test_the_readme_example_passes_catalog_check(tmp_path: Path) -> None:
    """The entry README shows users to start from is a working one."""
    import re

    from tests.conftest import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"#### Adding your own known issue.*?```yaml\n(.*?)```", readme, re.S)
    assert block is not None
    ours = tmp_path / "readme.yaml"
    ours.write_text(block.group(1), encoding="utf-8")
    result = run_cli(["catalog", "check", "--known-issues", str(ours)])
    assert result.exit_code == 0, result.output
    assert "known issues: 1 entry, 2 examples" in result.output
