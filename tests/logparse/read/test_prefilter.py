"""The fast (Hyperscan) and the pure-Python (re) prefilter engines give identical results."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from logparse.pipeline import ScanConfig, analyse
from logparse.read.prefilter import Prefilter, available_engines
from patterns import load_builtin_catalog
from reports.jsonreport import to_dict
from tests.conftest import FIXTURES, SAMPLES

CATALOG = load_builtin_catalog()
LOGS = (
    sorted(SAMPLES.glob("*.log"))
    + sorted((FIXTURES / "cascades").glob("*.log"))
    + sorted((FIXTURES / "benign").glob("*.log"))
    + [FIXTURES / "torchrun" / "tee-interleaved.log"]
)
needs_hyperscan = pytest.mark.skipif("hyperscan" not in available_engines(), reason="hyperscan not installed")


@needs_hyperscan
@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_engines_give_identical_reports(log: Path) -> None:
    a = to_dict(analyse([str(log)], CATALOG, ScanConfig(engine="hyperscan")))
    b = to_dict(analyse([str(log)], CATALOG, ScanConfig(engine="re")))
    assert a == b


@needs_hyperscan
def test_engines_find_the_same_lines_and_keywords() -> None:
    rnd = random.Random(3)
    words = ["CUDA out of memory", "step:", "Traceback (most recent call last)", "NCCL", "é中", "a"]
    pf = {e: Prefilter(words, e) for e in ("hyperscan", "re")}
    for _ in range(200):
        parts = [
            rnd.choice(words + ["x", " ", "\n", "CUDA out", "tep:"]) for _ in range(rnd.randrange(1, 40))
        ]
        block = "".join(parts).encode("utf-8")
        assert pf["hyperscan"].lines(block) == pf["re"].lines(block)


def test_unknown_engine_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown prefilter engine"):
        Prefilter(["x"], "grep")


@needs_hyperscan
def test_keywords_inside_longer_ones_are_all_found() -> None:
    """Every keyword is in the Hyperscan database, those that hold others too (MAX_SEARCHED = 0: each
    calls back once a line, LINE_REST, which costs less than searching the lines of the shorter);
    every line and keyword is found as the re engine finds it."""
    words = [
        "Training Progress",
        "Training Progress:",
        "Error",
        "KeyError",
        "Error executing job",
        "error:",
        "CUDA error: ",
        "CUDA error: out of memory",
        "nan",
        ": nan",
        "x",
    ]
    fast, slow = Prefilter(words, "hyperscan"), Prefilter(words, "re")
    assert fast._containing == {}
    rnd = random.Random(11)
    pieces = words + ["Training", " Progress", "CUDA", " error", "na", "n", "\n", " "]
    for _ in range(300):
        block = "".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 40))).encode()
        assert fast.lines(block) == slow.lines(block)


@needs_hyperscan
@pytest.mark.slow  # 20-50 s on 2 cores: every line end and keyword split at every offset, both engines
def test_line_ends_and_keywords_that_span_lines() -> None:
    """lines_and_ends gives where each line ends (its newline, or the end of a block that has none),
    as the re engine does; so with a keyword in the database by its prefix only. A keyword that holds
    a newline (then no keyword takes the rest of its line) marks the line of its match's end, as it
    did before (the re engine marks that of its start)."""
    rnd = random.Random(5)
    long = "L" * 20_000
    for words in (["step:", "epoch", "'epoch':", "a b", long], ["x\ny", "step:", "y"]):
        fast, slow = Prefilter(words, "hyperscan"), Prefilter(words, "re")
        assert fast._whole_lines == ("x\ny" not in words)
        pieces = [*words, "x", "y", "\n", " ", "e", "L" * 19_000]
        for _ in range(300):
            block = "".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 40))).encode()
            found, ends = fast.lines_and_ends(block)
            if fast._whole_lines:
                assert (found, ends) == slow.lines_and_ends(block)
            assert found == fast.lines(block)
            for (start, _), end in zip(found, ends, strict=True):
                newline = block.find(b"\n", start)
                assert end == (newline if newline >= 0 else len(block))
    assert fast.lines_and_ends(b"ab x\ny step:\nzz") == ([(5, frozenset({0, 1, 2}))], [12])


@needs_hyperscan
@pytest.mark.slow  # 7 s: compiles a keyword set of thousands with both engines
def test_a_large_keyword_set_is_compiled_as_literals_with_the_same_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past MAX_LINE_REST_KEYWORDS keywords (a large user catalog) the database holds the keywords alone,
    compiled by the literal compiler (20,000 keywords took 8 s to compile with LINE_REST, 0.34 s so):
    the lines and keywords found are those of the other engine and of the line-rest database."""
    from logparse.read import prefilter

    rnd = random.Random(5)
    words = ["CUDA out of memory", "step:", "Traceback (most recent call last)", "NCCL", "é中", "a", "Error"]
    words += [f"MyErr{i:05d}x" for i in range(3000)]
    many = Prefilter(words, "hyperscan")
    assert many._literals and not many._whole_lines
    monkeypatch.setattr(prefilter, "MAX_LINE_REST_KEYWORDS", 10**6)
    rest, slow = Prefilter(words, "hyperscan"), Prefilter(words, "re")
    assert not rest._literals
    pieces = [*words[:7], "MyErr00042x", "MyErr0", "x", " ", "\n", "CUDA out", "tep:", "Err"]
    for _ in range(300):
        block = "".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 40))).encode("utf-8")
        assert many.lines_and_ends(block) == rest.lines_and_ends(block) == slow.lines_and_ends(block)


@pytest.mark.slow
@needs_hyperscan
def test_a_scan_with_a_large_user_catalog_reports_as_the_re_engine_does(tmp_path: Path) -> None:
    entry = (
        "- id: my-data-error\n  title: My data error\n  category: data-error\n  role: cause\n"
        "  severity: error\n  priority: 70\n  keywords: [{words}]\n  patterns: ['MyDataError: (?P<what>.+)']\n"
        "  message: 'data broke'\n  remediation:\n    summary: s\n    why: w\n    fix: ['f']\n"
        "  examples:\n    match: ['[rank1]: MyDataError: x']\n    no_match:\n"
        "      - line: 'MyDataErrorHandler installed'\n        why: not an error\n"
    )
    words = ", ".join(["'MyDataError'", *(f"'MyErr{i:05d}x'" for i in range(3000))])
    (tmp_path / "big.yaml").write_text(entry.format(words=words))
    from patterns import load_catalog

    catalog = load_catalog([str(tmp_path / "big.yaml")])
    for log in [SAMPLES / "ray-actor-exception.log", FIXTURES / "torchrun" / "tee-interleaved.log"]:
        a = to_dict(analyse([str(log)], catalog, ScanConfig(engine="hyperscan")))
        b = to_dict(analyse([str(log)], catalog, ScanConfig(engine="re")))
        assert a == b
