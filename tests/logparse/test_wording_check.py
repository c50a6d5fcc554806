"""The wordings' examples run through the code that reads them (`verl-logscan catalog check`): every
built-in example passes, and a broken one is reported with its file and line."""

from __future__ import annotations

import re

import pytest

from logparse import wording_check
from logparse.wording_check import check_builtin_wordings, check_wordings
from patterns.formats import load_formats, read_formats_text
from tests.conftest import ROOT, run_cli


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.mark.slow
def test_every_example_of_every_wordings_file_passes() -> None:
    summary, failures = check_builtin_wordings()
    assert not failures, "\n".join(map(str, failures))
    assert {label for label, _, _ in summary} == {
        "patterns/formats.yaml",
        "patterns/environment.yaml",
        "patterns/progress.yaml",
        "patterns/diff.yaml",
    }
    assert all(n > 0 for _, _, n in summary)


def test_a_prefix_example_states_what_the_normaliser_makes_of_the_line() -> None:
    text = read_formats_text()
    broken = text.replace(
        "expect: {message: Training from scratch, actor: TaskRunner, pid: 1888103}",
        "expect: {message: Training from scratch, actor: TaskRunner, pid: 1888104}",
    )
    assert broken != text
    _, failures = check_wordings(load_formats(broken, "x/formats.yaml"))
    assert [str(f).splitlines()[0] for f in failures] == [
        f"x/formats.yaml:{_line_of(text, '(TaskRunner pid=1888103) Training from scratch')}: wording 'ray-actor': "
        "match example gives pid = 1888103 where the example states 1888104"
    ]


def test_a_stated_group_is_checked_against_the_regex() -> None:
    broken = read_formats_text().replace(
        "groups: {actor: TaskRunner, pid: '1888103'}", "groups: {actor: Task}"
    )
    _, failures = check_wordings(load_formats(broken, "x.yaml"))
    assert len(failures) == 1
    assert (
        "wording 'ray-actor': match example group 'actor' holds 'TaskRunner', the example states 'Task'"
        in str(failures[0])
    )


def test_a_wording_that_stops_hitting_its_lines_fails_its_examples() -> None:
    text = read_formats_text()
    broken = text.replace(
        "literal: 'Traceback (most recent call last):'", "literal: 'Traceback (most recent call first):'"
    )
    _, failures = check_wordings(load_formats(broken, "x.yaml"))
    reasons = [str(f) for f in failures if f.wording == "traceback-start"]
    assert any("match example is not hit by the wording's literal" in r for r in reasons)


def test_a_no_match_line_the_wording_hits_is_reported_with_its_why() -> None:
    text = read_formats_text()
    broken = text.replace("'2025/04/30 20:59:12 slashes'", "'2025-04-30 20:59:12 slashes'")
    _, failures = check_wordings(load_formats(broken, "x.yaml"))
    line = _line_of(broken, "'2025-04-30 20:59:12 slashes'")
    assert any(
        str(f).startswith(f"x.yaml:{line}: wording 'stamped': no_match example is hit by the wording's regex")
        and "(not an ISO date)" in str(f)
        for f in failures
    )


def test_a_frame_kind_example_goes_through_the_frame_classifier() -> None:
    text = read_formats_text()
    broken = text.replace(
        "- path: /opt/venv/bin/torchrun\n          expect: {kind: launcher}",
        "- path: /opt/venv/bin/torchrun\n          expect: {kind: user}",
    )
    assert broken != text
    _, failures = check_wordings(load_formats(broken, "x.yaml"))
    assert ["gives kind = 'launcher' where the example states 'user'" in str(f) for f in failures] == [True]


def test_an_unknown_fact_names_those_the_reader_tells() -> None:
    broken = read_formats_text().replace("expect: {family: exp1rank0}", "expect: {familly: exp1rank0}")
    _, failures = check_wordings(load_formats(broken, "x.yaml"))
    assert len(failures) == 1 and "states 'familly', which the layouts reader does not tell" in str(
        failures[0]
    )


@pytest.mark.slow
def test_catalog_check_counts_the_wordings_and_fails_on_a_broken_example(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = run_cli(["catalog", "check"])
    assert result.exit_code == 0
    assert "; formats.yaml: " in result.output and " wordings, " in result.output
    module = "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py"
    broken = read_formats_text().replace(
        f"- path: {module}\n          expect: {{kind: library}}",
        f"- path: {module}\n          expect: {{kind: user}}",
    )
    monkeypatch.setattr(wording_check, "builtin_wording_files", lambda: [lambda: load_formats(broken)])
    result = run_cli(["catalog", "check"])
    assert result.exit_code == 2
    line = _line_of(broken, f"- path: {module}")
    assert (
        f"patterns/formats.yaml:{line}: wording 'installed-packages': match example gives kind"
        in result.output
    )
    assert "catalog check failed: 1 of " in result.output


# sections whose items the code reads as a whole table, in file order, not one by one by id (the line
# formats: by the generic reader of logparse/read/normalize.py)
WHOLE_SECTIONS = {
    "frame_kinds",
    "hosts",
    "era",
    "styles",
    "prefixes",
    "message_fields",
    "error_words",
    "levels",
}
# line formats some code looks up by id for another use than reading a line, and why
LOOKED_UP_ELSEWHERE = {"nccl-host": "logparse/redact.py learns the host it names, to mask it"}


def test_every_wording_is_read_by_the_code() -> None:
    files = [*(ROOT / "logparse").rglob("*.py"), *(ROOT / "patterns").glob("*.py")]
    sources = "\n".join(p.read_text(encoding="utf-8") for p in files)
    for load in wording_check.builtin_wording_files():
        for item in load().items:
            if item.section not in WHOLE_SECTIONS:
                assert f'"{item.id}"' in sources, f"{item.id} is read by no module"


def test_no_code_reads_a_line_format_by_its_id() -> None:
    """A launcher prefix is read by its declaration alone: no module names one (a reader per id would)."""
    files = [*(ROOT / "logparse").rglob("*.py"), *(ROOT / "patterns").glob("*.py")]
    sources = "\n".join(p.read_text(encoding="utf-8") for p in files)
    for item in load_formats().items:
        if item.section in ("prefixes", "message_fields") and item.id not in LOOKED_UP_ELSEWHERE:
            lookup = re.compile(rf'\.(?:regex|item|literal|literals|table|value)\("{re.escape(item.id)}"\)')
            assert not lookup.search(sources), f"{item.id} is looked up in the code"


@pytest.mark.slow
def test_a_version_line_goes_through_the_environment_tracker() -> None:
    from patterns.environment import load_environment, read_environment_text

    text = read_environment_text()
    broken = text.replace("expect: {nccl: 2.20.5, cuda: '12.4'}", "expect: {nccl: 2.20.6, cuda: '12.4'}")
    assert broken != text
    _, failures = check_wordings(load_environment(broken, "x/environment.yaml"))
    line = _line_of(text, "(WorkerDict pid=490522) NCCL version 2.20.5+cuda12.4")
    assert [str(f).splitlines()[0] for f in failures] == [
        f"x/environment.yaml:{line}: wording 'nccl-version': match example gives nccl = '2.20.5' "
        "where the example states '2.20.6'"
    ]


@pytest.mark.slow
def test_a_step_value_format_is_tried_on_each_value_of_the_step_line() -> None:
    from patterns.environment import load_environment, read_environment_text

    broken = read_environment_text().replace(
        "'step:1 - global_seqlen/min:85236 - actor/pg_loss:0.0181 - critic/vf_loss:7.4551'",
        "'step:1 - global_seqlen/min:85236 - actor/pg_loss:0.018 - critic/vf_loss:7.4551'",
    )
    _, failures = check_wordings(load_environment(broken, "x.yaml"))
    assert any(
        f.wording == "era-three-decimals" and "no_match example is hit by the wording's regex" in str(f)
        for f in failures
    )
