"""The known upstream issues as data (patterns/known_issues, patterns/upstream_issues.py): the built-in
entries are complete (thread, range or an explicit "not stated", quote, working examples), and a bad
file is refused with every problem at once, each with its file and line."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from logparse.catalog_check import check_known_issues
from patterns import CatalogError, load_builtin_catalog
from patterns.upstream_issues import PACKAGES, load_known_issues

BUILTIN = load_known_issues()


def test_at_least_forty_entries_from_several_projects() -> None:
    projects = Counter(k.project for k in BUILTIN.entries)
    assert len(BUILTIN.entries) >= 40
    assert {"verl", "vllm", "sglang", "ray", "pytorch", "flash-attn"} <= set(projects)


def test_every_entry_has_its_thread_range_quote_and_examples() -> None:
    for k in BUILTIN.entries:
        assert k.url.startswith("https://github.com/"), k.id
        assert k.title and k.source_quote and k.workaround and k.fixed_in.text, k.id
        assert k.examples.match and k.examples.no_match, k.id
        for a in k.affected:  # a stated range, or None for an explicit "not stated"
            assert a.package in PACKAGES
        # each file is one upstream project's
        assert Path(k.source).stem == k.project, k.id


@pytest.mark.slow  # (81 examples, each a scan of its own: seconds)
def test_catalog_check_runs_every_example() -> None:
    count, failures = check_known_issues(load_builtin_catalog(), BUILTIN)
    assert failures == []
    assert count == sum(len(k.examples.match) + len(k.examples.no_match) for k in BUILTIN.entries)


GOOD = """\
- id: ours
  project: our-infra
  url: https://tracker.example.internal/browse/RL-1
  title: t
  symptom: {patterns: ['boom']}
  affected: {vllm: '>=0.8'}
  fixed_in: {text: not yet}
  workaround: w
  source_quote: q
  examples:
    match: ['RuntimeError: boom']
    no_match: [{line: 'RuntimeError: bang', why: other}]
"""


def _problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "k.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CatalogError) as exc:
        load_known_issues([str(path)], builtin=False)
    return [str(p) for p in exc.value.problems]


def test_a_good_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "k.yaml"
    path.write_text(GOOD, encoding="utf-8")
    (k,) = load_known_issues([str(path)], builtin=False).entries
    assert k.url == "https://tracker.example.internal/browse/RL-1" and k.specifier_of("vllm") == ">=0.8"


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("'>=0.8'", "'>=0.8 and <0.9'", "is not a PEP 440 version range"),
        ("{vllm: '>=0.8'}", "{vlm: '>=0.8'}", "unknown package 'vlm'"),
        (
            "fixed_in: {text: not yet}",
            "fixed_in: {text: x, versions: {vllm: 0.8.1}}",
            "lies inside its affected range",
        ),
        (
            "fixed_in: {text: not yet}",
            "fixed_in: {text: x, versions: {vllm: banana}}",
            "is not a PEP 440 version",
        ),
        (
            "url: https://tracker.example.internal/browse/RL-1",
            "url: 'javascript:alert(1)'",
            "must be an http(s) URL",
        ),
        ("symptom: {patterns: ['boom']}", "symptom: {patterns: ['(a+)+']}", "nests unbounded quantifiers"),
        ("affected: {vllm: '>=0.8'}", "affected: maybe", "must be a mapping of package"),
        ("  workaround: w\n", "  workaround: w\n  sourcequote: x\n", "unknown field 'sourcequote'"),
    ],
)
def test_a_bad_entry_is_refused_with_file_and_line(tmp_path: Path, old: str, new: str, said: str) -> None:
    assert old in GOOD
    problems = _problems(tmp_path, GOOD.replace(old, new))
    assert any(said in p for p in problems), problems
    assert all(p.startswith(str(tmp_path / "k.yaml") + ":") for p in problems)


def test_not_stated_is_explicit(tmp_path: Path) -> None:
    path = tmp_path / "k.yaml"
    path.write_text(GOOD.replace("affected: {vllm: '>=0.8'}", "affected: not stated"), encoding="utf-8")
    (k,) = load_known_issues([str(path)], builtin=False).entries
    assert k.affected == ()
    problems = _problems(tmp_path, GOOD.replace("  affected: {vllm: '>=0.8'}\n", ""))
    assert any("'affected' must be a mapping" in p for p in problems)
