"""The loader reports every problem at once, with file:line, reason and help."""

from __future__ import annotations

from pathlib import Path

import pytest

from patterns import CatalogError, load_catalog
from tests.conftest import run_cli

GOOD = """\
- id: my-failure
  title: My failure
  category: data-error
  role: cause
  severity: error
  priority: 70
  keywords: ['MyDataError']
  patterns:
    - 'MyDataError: (?P<what>.+)'
  message: 'data broke: {what}'
  remediation:
    summary: The data broke.
    why: Because.
    fix: ['Fix the data.']
  examples:
    match: ['[rank1]: MyDataError: bad row 7']
    no_match:
      - line: 'MyDataErrorHandler installed'
        why: not an error
"""


def write(tmp_path: Path, text: str, name: str = "extra.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_good_extra_catalog_adds_entry(tmp_path: Path) -> None:
    cat = load_catalog([str(write(tmp_path, GOOD))])
    assert cat.get("my-failure").render_message({"what": "row 7"}) == "data broke: row 7"


def test_later_source_overrides_builtin_by_id(tmp_path: Path) -> None:
    override = GOOD.replace("my-failure", "cuda-oom")
    cat = load_catalog([str(write(tmp_path, override))])
    assert cat.get("cuda-oom").title == "My failure"


def test_every_problem_reported_with_line_and_help(tmp_path: Path) -> None:
    bad = (
        GOOD.replace("category: data-error", "category: data-eror")
        .replace("role: cause", "role: reason")
        .replace("priority: 70", "priority: 700")
        .replace("'data broke: {what}'", "'data broke: {nope}'")
        .replace("  keywords:", "  keywrds: ['x']\n  keywords:")
    )
    path = write(tmp_path, bad)
    with pytest.raises(CatalogError) as err:
        load_catalog([str(path)])
    text = str(err.value)
    problems = err.value.problems
    assert len(problems) == 5, text
    assert f"{path}:3: entry 'my-failure': unknown category 'data-eror'" in text
    assert "did you mean 'data-error'?" in text
    assert "did you mean 'keywords'?" in text
    assert "'priority' must be an integer 0-100" in text
    assert "placeholder '{nope}'" in text
    assert all(p.line > 0 for p in problems)


def test_a_fix_step_names_the_jobs_it_applies_to(tmp_path: Path) -> None:
    steps = (
        "fix:\n      - 'Fix the data.'\n      - step: 'Shrink the verl batch.'\n        applies_to: [verl]\n"
    )
    cat = load_catalog([str(write(tmp_path, GOOD.replace("fix: ['Fix the data.']\n", steps)))])
    r = next(e for e in cat.entries if e.id == "my-failure").remediation
    assert r.fix == ("Fix the data.", "Shrink the verl batch.") and r.applies_to == ((), ("verl",))


def test_a_fix_step_for_an_unknown_job_is_refused_with_the_known_ones(tmp_path: Path) -> None:
    steps = "fix:\n      - step: 'Shrink it.'\n        applies_to: [verl-vlm]\n"
    with pytest.raises(CatalogError) as err:
        load_catalog([str(write(tmp_path, GOOD.replace("fix: ['Fix the data.']\n", steps)))])
    assert "applies_to names jobs among: verl-vllm" in str(err.value)


def test_duplicate_id_within_one_source_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD + GOOD[0:0] + GOOD)
    with pytest.raises(CatalogError, match="duplicate id 'my-failure'"):
        load_catalog([str(path)])


def test_invalid_yaml_and_bad_regex(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"invalid YAML"):
        load_catalog([str(write(tmp_path, "- id: [unclosed\n", "a.yaml"))])
    with pytest.raises(CatalogError, match=r"does not compile"):
        load_catalog(
            [
                str(
                    write(
                        tmp_path,
                        GOOD.replace("'MyDataError: (?P<what>.+)'", "'MyDataError: (?P<what>.+'"),
                        "b.yaml",
                    )
                )
            ]
        )


def test_catastrophic_regex_rejected(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="nests unbounded quantifiers"):
        load_catalog(
            [str(write(tmp_path, GOOD.replace("'MyDataError: (?P<what>.+)'", "'MyDataError: (a+)+$'")))]
        )


def test_catalog_check_cli_fails_clearly_on_broken_example(tmp_path: Path) -> None:
    broken = GOOD.replace("'[rank1]: MyDataError: bad row 7'", "'[rank1]: SomethingElse happened'")
    path = write(tmp_path, broken)
    result = run_cli(["catalog", "check", str(path)])
    assert result.exit_code == 2
    assert "entry 'my-failure': match example does not match" in result.output
    assert "contains none of the keywords" in result.output


def test_catalog_check_refuses_a_match_example_a_scan_never_tries(tmp_path: Path) -> None:
    """A traceback's header line (`... hit an exception: Traceback (most recent call last):`) matches the
    pattern, but a scan tries no entry on it: the check says so, and how to write the entry instead."""
    header = GOOD.replace(
        "'[rank1]: MyDataError: bad row 7'",
        "'[rank1]: MyDataError: loader hit an exception: Traceback (most recent call last):'",
    )
    result = run_cli(["catalog", "check", str(write(tmp_path, header))])
    assert result.exit_code == 2
    assert (
        "entry 'my-failure': match example matches, but a scan reads the line as a traceback's start line"
        in result.output
    )
    assert "`block:` example" in result.output


@pytest.mark.slow
def test_catalog_check_cli_ok_and_broken_schema(tmp_path: Path) -> None:
    assert run_cli(["catalog", "check"]).exit_code == 0
    result = run_cli(["catalog", "check", str(write(tmp_path, GOOD.replace("role: cause", "role: bogus")))])
    assert result.exit_code == 2
    assert "'role' must be one of" in result.output


def test_scan_with_broken_catalog_is_exit_2(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("hello\n")
    result = run_cli(["scan", str(log), "--catalog", str(write(tmp_path, "- 3\n"))])
    assert result.exit_code == 2
    assert "catalog error" in result.output
