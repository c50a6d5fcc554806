"""The wordings files (patterns/formats.yaml, ...): their schema, checked at load with file:line for
every problem at once, and what a scan receives of them (the values, without the examples)."""

from __future__ import annotations

import pytest

from patterns import CatalogError
from patterns.formats import SECTIONS, formats, load_formats
from patterns.wordings import load_wordings

SPEC = {name: SECTIONS[name] for name in ("prefixes", "layouts")}  # (a file of two sections)
GOOD = """\
prefixes:
  - id: my-prefix
    regex: '<(?P<who>\\w+)> '
    groups:
      who: the writer
    examples:
      match:
        - line: '<bob> hello'
          groups: {who: bob}
      no_match:
        - line: 'bob> hello'
          why: no opening bracket
"""


def test_the_formats_file_loads_with_an_example_of_each_kind_for_every_wording() -> None:
    wordings = load_formats()
    assert len(wordings.items) >= 50
    for item in wordings.items:
        assert item.match and item.no_match, item.id
        assert all(ex.why for ex in item.no_match), item.id


def test_a_scan_receives_the_same_values_without_the_examples() -> None:
    full, light = load_formats(), formats()
    assert [(w.id, w.kind, w.value, w.fields) for w in full.items] == [
        (w.id, w.kind, w.value, w.fields) for w in light.items
    ]
    assert not any(w.match or w.no_match for w in light.items)


def test_a_good_wording_loads() -> None:
    item = load_wordings(GOOD, "f.yaml", {"prefixes": SECTIONS["prefixes"]}).item("my-prefix")
    assert item.kind == "regex" and item.value == "<(?P<who>\\w+)> "
    assert item.match[0].groups == (("who", "bob"),) and item.no_match[0].why == "no opening bracket"


def test_a_broken_wordings_file_is_refused_with_every_problem_and_its_line() -> None:
    text = (
        GOOD
        + """\
  - id: Bad_Id
    regex: '(?P<a>x)(?P<b>y'
    literal: 'x'
    examples:
      match: ['x']
      no_match:
        - line: 'y'
  - id: undocumented
    regex: '(?P<a>x)'
    colour: blue
    examples:
      match: ['x']
      no_match:
        - line: 'y'
          why: no x
  - id: my-prefix
    regex: 'z'
    examples:
      match: ['z']
      no_match: [{line: 'y', why: no z}]
layouts:
  - id: some-literal
    literal: 'x'
    groups: {a: b}
    examples:
      match: ['x']
      no_match: [{path: 'y', why: no x, groups: {a: b}}]
"""
    )
    with pytest.raises(CatalogError) as info:
        load_wordings(text, "f.yaml", SPEC)
    problems = str(info.value)
    assert "f.yaml:13: wording 'Bad_Id': id 'Bad_Id' is not kebab-case" in problems
    assert "f.yaml:13: wording 'Bad_Id': needs exactly one of regex (has regex, literal)" in problems
    assert "f.yaml:19: wording 'Bad_Id': examples.no_match item lacks 'why'" in problems
    assert "f.yaml:20: wording 'undocumented': named group 'a' is not described" in problems
    assert "f.yaml:22: wording 'undocumented': unknown field 'colour'" in problems
    assert "duplicate wording id 'my-prefix' (first at line 2)" in problems
    assert "wording 'some-literal': only a regex has named groups" in problems
    assert "example states group 'a', which the regex does not have" in problems


def test_a_regex_that_does_not_compile_is_refused() -> None:
    with pytest.raises(CatalogError, match=r"f\.yaml:3: wording 'my-prefix': regex does not compile"):
        load_wordings(
            GOOD.replace("'<(?P<who>\\w+)> '", "'<(?P<who>\\w+> '"),
            "f.yaml",
            {"prefixes": SECTIONS["prefixes"]},
        )


def test_an_unknown_section_is_named_with_a_suggestion() -> None:
    with pytest.raises(
        CatalogError, match=r"f\.yaml:1: unknown top-level field 'prefixs'\n    help: did you mean 'prefixes'"
    ):
        load_wordings(GOOD.replace("prefixes:", "prefixs:"), "f.yaml", {"prefixes": SECTIONS["prefixes"]})


def test_the_environment_file_refuses_a_common_keyword_no_wording_has() -> None:
    from patterns.environment import load_environment, read_environment_text

    text = read_environment_text()
    broken = text.replace("literals: ['version', '-packages/'", "literals: ['versions', '-packages/'")
    assert broken != text
    with pytest.raises(CatalogError, match="common keyword 'versions' is the keyword of no wording"):
        load_environment(broken, "x.yaml")


def test_every_wordings_file_ships_as_package_data() -> None:
    from importlib.resources import files

    for name in ("formats.yaml", "environment.yaml", "progress.yaml", "taxonomy.yaml"):
        assert files("patterns").joinpath(name).is_file(), name


def test_the_start_up_cache_gives_what_parsing_gives(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from patterns.environment import environment_wordings, load_environment
    from patterns.progress import load_progress, progress_wordings

    monkeypatch.setenv("VERL_LOGSCAN_CACHE_DIR", str(tmp_path))
    pairs = (
        (formats, load_formats),
        (environment_wordings, load_environment),
        (progress_wordings, load_progress),
    )
    try:
        for light, full in pairs:
            light.cache_clear()
            built = light()  # parsed, checked and written
            light.cache_clear()
            assert light() == built == full().without_examples()  # read back
        assert {p.name.split("-")[0] for p in tmp_path.iterdir()} >= {"formats", "environment", "progress"}
    finally:
        for light, _ in pairs:
            light.cache_clear()
