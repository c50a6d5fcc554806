"""Hostile user catalogs: each is refused by the loader with file:line and a reason (never a Python
traceback, never a hang), or bounded at match time; nothing in a catalog is run as code or template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import regex

from patterns import CatalogError, load_catalog
from patterns.loader import _builtin_dir, regex_risk, slow_probe
from tests.conftest import run_cli
from tests.patterns.test_loader import GOOD

ENTRY = GOOD  # a valid entry (tests/patterns/test_loader.py), made hostile field by field below
LOG = "INFO start\n[rank1]: MyDataError: bad row 7\n"


def write(tmp_path: Path, text: str, name: str = "mine.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def problems_of(tmp_path: Path, text: str) -> str:
    """The loader's message for a catalog file holding `text` (it must be refused). How long the
    refusals take is benchmarks/bench_hostile_inputs.py's to measure, not a test's."""
    with pytest.raises(CatalogError) as info:
        load_catalog([str(write(tmp_path, text))])
    return str(info.value)


def refused_at(tmp_path: Path, text: str, line: int, *words: str) -> str:
    message = problems_of(tmp_path, text)
    assert f"mine.yaml:{line}: " in message, message
    for w in words:
        assert w in message, message
    return message


def test_the_template_entry_loads(tmp_path: Path) -> None:
    assert load_catalog([str(write(tmp_path, ENTRY))]).get("my-failure") is not None


def test_invalid_yaml(tmp_path: Path) -> None:
    refused_at(tmp_path, ENTRY.replace("  title: My failure", "  title: [unclosed"), 3, "invalid YAML")


@pytest.mark.parametrize(
    "old,new,line,words",
    [
        (
            "  title: My failure",
            "  title: [a, list]",
            2,
            ("'title' must be a non-empty string, got list ['a', 'list']",),
        ),
        (
            "    - 'MyDataError: (?P<what>.+)'",
            "    - 123",
            9,
            ("pattern #1 must be a non-empty string", "got integer 123"),
        ),
        (
            "  keywords: ['MyDataError']",
            "  keywords: {MyDataError: 1}",
            7,
            ("'keywords' must be a list of non-empty strings",),
        ),
        ("  priority: 70", "  priority: '70'", 6, ("'priority' must be an integer 0-100",)),
        ("  priority: 70", "  priority: 1e308", 6, ("'priority' must be an integer 0-100",)),
        ("  role: cause", "  role: [cause]", 4, ("'role' must be one of",)),
        (
            "  priority: 70",
            "  priority: 70\n  stage: {a: 1}",
            7,
            ("'stage' must be a stage id (a string) or null",),
        ),
        (
            "  priority: 70",
            "  priority: 70\n  category_from: {group: what, map: {'1': [x]}, default: {a: 1}}",
            7,
            ("unknown category ['x'] in category_from.map", "unknown default category {'a': 1}"),
        ),
        (
            "  priority: 70",
            "  priority: 70\n  frames: [1, 2]",
            7,
            ("'frames' must be a non-empty list of regexes",),
        ),
        (
            "  remediation:\n    summary: The data broke.",
            "  remediation:\n    summary: [1]",
            12,
            ("remediation.summary must be a non-empty string",),
        ),
    ],
)
def test_wrong_types(tmp_path: Path, old: str, new: str, line: int, words: tuple[str, ...]) -> None:
    assert ENTRY.count(old) == 1
    refused_at(tmp_path, ENTRY.replace(old, new), line, *words)


def test_unknown_fields_with_a_suggestion(tmp_path: Path) -> None:
    text = ENTRY.replace("  priority: 70", "  priority: 70\n  keywrods: [x]\n  exec: 'import os'")
    msg = refused_at(tmp_path, text, 7, "unknown field 'keywrods'", "did you mean 'keywords'?")
    assert "mine.yaml:8: entry 'my-failure': unknown field 'exec'" in msg


def test_duplicate_ids_in_a_file_and_across_a_folder(tmp_path: Path) -> None:
    refused_at(tmp_path, ENTRY + ENTRY, 20, "duplicate id 'my-failure' (first at line 1)")
    folder = tmp_path / "cat"
    folder.mkdir()
    write(folder, ENTRY, "a.yaml")
    write(folder, ENTRY, "b.yaml")
    with pytest.raises(CatalogError, match=r"b\.yaml:1: duplicate id 'my-failure' \(also at .*a\.yaml:1\)"):
        load_catalog([str(folder)])


def test_duplicate_key_in_one_entry(tmp_path: Path) -> None:
    # PyYAML keeps the last of two equal keys silently; a catalog must not hide its first pattern list
    text = ENTRY.replace("  message: 'data broke: {what}'", "  message: 'data broke: {what}'\n  priority: 99")
    refused_at(tmp_path, text, 11, "invalid YAML", "found duplicate key 'priority' (first at line 6)")


@pytest.mark.parametrize(
    "pattern",
    [
        "(a+)+$",
        "(x+x+)+y",
        "(?:(?:a|a)+)+b",
        r"(?:\s*\w+\s*)*=",
        "(?:a{2,})+",
        r"(?P<n>\d+(?:\.\d+)?)+",
    ],
)
def test_nested_quantifiers_are_refused(tmp_path: Path, pattern: str) -> None:
    text = ENTRY.replace("'MyDataError: (?P<what>.+)'", f"'MyDataError: (?P<what>.+) {pattern}'")
    refused_at(tmp_path, text, 9, "pattern #1 is refused", "nests unbounded quantifiers")


@pytest.mark.parametrize(
    "pattern,words",
    [
        ("a{100000}", "a repetition count of 100000"),
        ("a{5,100000}", "a repetition count of 100000"),
        ("(?:a{999}){999}", "nested repetition counts multiply to 998001"),
        ("(?:(?:a{50}){50}){50}", "nested repetition counts multiply to 125000"),
    ],
)
def test_huge_repetition_counts_are_refused(tmp_path: Path, pattern: str, words: str) -> None:
    text = ENTRY.replace("'MyDataError: (?P<what>.+)'", f"'MyDataError: (?P<what>.+) {pattern}'")
    refused_at(tmp_path, text, 9, "pattern #1 is refused", words)


@pytest.mark.parametrize(
    "pattern", ["(?:a{1,30}){1,30}b", "(?:(?:a|a){1,9}){1,9}b", "(?:(?:a|aa){1,30}){1,30}b"]
)
def test_a_regex_that_compiles_but_is_slow_is_refused_by_its_probe(tmp_path: Path, pattern: str) -> None:
    assert regex_risk(pattern) is None  # not seen by the static check: the timing probe catches it
    text = ENTRY.replace("'MyDataError: (?P<what>.+)'", f"'MyDataError: (?P<what>.+)'\n    - '{pattern}'")
    refused_at(tmp_path, text, 10, "pattern #2 is refused", "catastrophic backtracking")


def test_frame_regexes_get_the_same_checks(tmp_path: Path) -> None:
    text = ENTRY.replace("  priority: 70", "  priority: 70\n  frames:\n    - 'ok_frame'\n    - '(a+)+$'")
    refused_at(tmp_path, text, 9, "frame regex #2 is refused", "nests unbounded quantifiers")


@pytest.mark.slow
def test_overlapping_alternation_is_bounded_at_match_time(tmp_path: Path) -> None:
    # (a|a)*b and (?:.*a){8}x pass the loader (the regex module does not blow up on the probes); a long
    # line is bounded by the matcher's per-search timeout and the report says so
    text = ENTRY.replace(
        "'MyDataError: (?P<what>.+)'", "'MyDataError: (?P<what>(a|a)*b)'\n    - 'MyDataError: (?:.*a){8}x'"
    )
    text = text.replace("['[rank1]: MyDataError: bad row 7']", "['[rank1]: MyDataError: aab']")
    text = text.replace("'data broke: {what}'", "'data broke'")
    cat = write(tmp_path, text)
    log = tmp_path / "job.log"
    log.write_text("".join("[rank1]: MyDataError: " + "a" * 5000 + "\n" for _ in range(20)))
    result = run_cli(["scan", str(log), "--catalog", str(cat), "--format", "json"])
    assert result.exit_code in (0, 1)
    report = json.loads(result.output)
    assert any("hit the match timeout" in n for n in report["notes"]), report["notes"]


def test_python_tags_are_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    for tag in (
        f"!!python/object/apply:os.system ['touch {marker}']",
        f"!!python/object/new:subprocess.check_output [['touch', '{marker}']]",
        "!!python/name:os.system",
        "!!python/object:collections.OrderedDict {}",
    ):
        msg = refused_at(
            tmp_path,
            ENTRY.replace("  title: My failure", f"  title: {tag}"),
            2,
            "is not allowed: a catalog is plain data",
        )
        assert "python/" in msg
    assert not marker.exists()


def test_billion_laughs_is_refused_quickly_with_a_short_message(tmp_path: Path) -> None:
    # 9 aliases of 9 aliases ... of 9 values: 387 million values from 10 lines. Refused where the
    # expansion passes the limit (the line of `xf`, 9**6 values), before anything is built from it
    lines = ["  xa: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"  x{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    text = ENTRY.replace("  title: My failure", "  title: My failure\n" + "\n".join(lines))
    text = text.replace("  priority: 70", "  priority: *i")
    msg = refused_at(tmp_path, text, 8, "YAML aliases expand this value to 597,871 values", "billion laughs")
    assert len(msg) < 5000 and msg.count("mine.yaml:") == 1


def test_deep_nesting_and_huge_files_are_refused(tmp_path: Path) -> None:
    msg = problems_of(tmp_path, ENTRY.replace("  title: My failure", "  title: " + "[" * 5000 + "]" * 5000))
    assert "invalid YAML" in msg and ("nesting depth" in msg or "nested too deeply" in msg)
    big = write(tmp_path, ENTRY + "#" + "x" * (9 << 20) + "\n", "big.yaml")
    with pytest.raises(CatalogError, match=r"big\.yaml:0: catalog file is \d+ bytes \(limit"):
        load_catalog([str(big)])


def test_scan_with_a_hostile_catalog_is_a_clean_exit_2(tmp_path: Path) -> None:
    cat = write(tmp_path, ENTRY.replace("'MyDataError: (?P<what>.+)'", "'(x+x+)+y'"))
    log = tmp_path / "job.log"
    log.write_text(LOG)
    result = run_cli(["scan", str(log), "--catalog", str(cat)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert f"{cat}:9: entry 'my-failure': pattern #1 is refused" in result.output


HOSTILE_TEXT = "{0} {{7*191}} {what.__class__} {what!r} %(what)s $HOME {% raw %}"


def test_catalog_text_is_never_a_template(tmp_path: Path) -> None:
    text = (
        ENTRY.replace(
            "'data broke: {what}'", "'data broke: {what} | " + HOSTILE_TEXT.replace("'", "''") + "'"
        )
        .replace("summary: The data broke.", "summary: 'Summary {{ 7*191 }} <script>x</script> {__class__}'")
        .replace("fix: ['Fix the data.']", "fix: ['{{ config }} {{ self.__init__.__globals__ }}']")
    )
    cat = write(tmp_path, text)
    log = tmp_path / "job.log"
    log.write_text(LOG)
    report = json.loads(run_cli(["scan", str(log), "--catalog", str(cat), "--format", "json"]).output)
    assert report["root_cause"]["summary"] == "data broke: bad row 7 | " + HOSTILE_TEXT
    assert (
        report["root_cause"]["remediation"]["summary"] == "Summary {{ 7*191 }} <script>x</script> {__class__}"
    )
    assert report["root_cause"]["remediation"]["fix"] == ["{{ config }} {{ self.__init__.__globals__ }}"]
    for fmt in ("text", "md", "html"):
        out = run_cli(["scan", str(log), "--catalog", str(cat), "--format", fmt, "--no-color"]).output
        assert "1337" not in out and "<class" not in out and "__globals__" in out, fmt
        assert "{0}" in out and "%(what)s" in out, fmt
        if fmt == "html":
            assert "<script>x</script>" not in out and "&lt;script&gt;" in out


def test_placeholder_names_are_groups_only(tmp_path: Path) -> None:
    # a placeholder must name a group of the patterns
    refused_at(
        tmp_path,
        ENTRY.replace("'data broke: {what}'", "'broke {__class__}'"),
        10,
        "placeholder '{__class__}' names no group of the patterns",
    )
    # a group may be called __class__: it is filled with the matched text, nothing else
    text = ENTRY.replace("(?P<what>.+)", "(?P<__class__>.+)").replace(
        "'data broke: {what}'", "'broke {__class__}'"
    )
    cat = write(tmp_path, text)
    log = tmp_path / "job.log"
    log.write_text(LOG)
    report = json.loads(run_cli(["scan", str(log), "--catalog", str(cat), "--format", "json"]).output)
    assert report["root_cause"]["summary"] == "broke bad row 7"


def test_builtin_catalog_passes_the_probes() -> None:
    """The built-in catalog is not probed at each load (that costs time at every start): here instead."""
    import yaml

    count = 0
    for f in sorted(_builtin_dir().glob("*.yaml")):
        for entry in yaml.safe_load(f.read_text()):
            for p in entry.get("patterns", []) + entry.get("frames", []):
                count += 1
                assert regex_risk(p) is None, (f.name, entry["id"], p)
                assert slow_probe(regex.compile(p)) is None, (f.name, entry["id"], p)
    assert count > 100


def test_the_builtin_catalog_loaded_lazily_equals_the_compiled_load() -> None:
    """At each start the built-in regexes are compiled on first use; loaded the strict way (compiled,
    risk-checked, placeholders checked against the compiled groups) the catalog is the same."""
    from patterns.loader import _load_source
    from patterns.schema import LazyPattern

    problems: list = []
    strict = _load_source(_builtin_dir(), "patterns/catalog", problems)
    lazy = _load_source(_builtin_dir(), "patterns/catalog", problems, lazy=True)
    assert not problems
    assert len(strict) == len(lazy) > 100
    for a, b in zip(strict, lazy, strict=True):
        assert all(isinstance(p, LazyPattern) for p in b.patterns + b.frames)
        assert [p.pattern for p in a.patterns] == [p.pattern for p in b.patterns]
        assert [p.pattern for p in a.frames] == [p.pattern for p in b.frames]
        assert {n for p in a.patterns for n in p.groupindex} == {n for p in b.patterns for n in p.group_names}
        assert a.id == b.id and a.message == b.message and a.category_from == b.category_from


def test_a_lazy_pattern_pickles_and_behaves_as_the_compiled_one() -> None:
    import pickle

    from patterns.schema import LazyPattern

    lazy = LazyPattern(r"CUDA out of memory\. Tried to allocate (?P<size>[\d.]+ [GM]iB)")
    line = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    for p in (lazy, pickle.loads(pickle.dumps(lazy))):
        assert p.search(line).group("size") == "2.00 GiB" and p.groupindex == {"size": 1}
    assert pickle.loads(pickle.dumps(lazy)).search(line) is not None  # after its first use too
