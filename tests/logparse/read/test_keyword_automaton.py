"""The keyword automaton finds the keywords a text holds, and which keywords hold which, as asking each
pair would, in work linear in the keywords' length (counted in lines run, not timed): a user catalog of 4x the
keywords takes about 4x the work (it was quadratic: 20,000 keywords took 17 s to load)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from logparse.read import keyword_automaton
from logparse.read.keyword_automaton import KeywordAutomaton
from logparse.read.prefilter import Prefilter, containing
from tests.conftest import ROOT, run_cli

LIMIT = 4  # how many holders a keyword may have to be searched for (the prefilter's LIMIT was 4)


def pairs(words: list[str]) -> dict[int, list[int]]:
    """Which keywords hold which, by asking every pair (the reference)."""
    out: dict[int, list[int]] = {}
    for i, w in enumerate(words):
        for j, v in enumerate(words):
            if i != j and w in v:
                out.setdefault(i, []).append(j)
    return out


def test_found_and_containers_agree_with_asking_every_pair() -> None:
    rnd = random.Random(3)
    for trial in range(300):
        alphabet = "ab" if trial % 2 else "abé"
        words = sorted(
            {
                "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 7)))
                for _ in range(rnd.randint(1, 40))
            }
        )
        automaton = KeywordAutomaton(words)
        for _ in range(5):
            text = "".join(rnd.choice(alphabet + "x") for _ in range(rnd.randint(0, 30)))
            assert automaton.found(text) == {i for i, w in enumerate(words) if w in text}
        reference = pairs(words)
        for limit in (0, 1, 2, LIMIT, 100):
            got = {i: sorted(js) for i, js in automaton.containers(limit).items()}
            assert got == {i: js for i, js in reference.items() if len(js) <= limit}


def test_bytes_keywords_work_the_same() -> None:
    words = [w.encode() for w in ("CUDA", "CUDA error", "error", "é中")]
    assert KeywordAutomaton(words).found("x CUDA error é中".encode()) == {0, 1, 2, 3}


def test_containing_leaves_keywords_with_a_newline_out() -> None:
    words = ["ab", "xaby", "a\nb", "a\nbc"]
    assert containing(words, LIMIT) == {0: (1,)}


def words(n: int, seed: int = 1) -> list[str]:
    rnd = random.Random(seed)
    return ["MyErr" + "".join(rnd.choice("abcdefghij") for _ in range(8)) + str(i) for i in range(n)]


def lines_run(work, files: tuple[str, ...] = (keyword_automaton.__file__,)) -> int:
    """The lines of `files` (paths, or folders: a path that starts with one) that `work()` executes: a
    count of the work that does not move with the machine or its load (a ratio of timings did: 9.6,
    where 4 was linear and 8 the bound, on a loaded machine)."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(files) else None

    sys.settrace(calls)
    try:
        work()
    finally:
        sys.settrace(None)
    return count


@pytest.mark.slow
def test_which_keywords_hold_which_is_linear_in_the_keywords() -> None:
    """4,000 keywords against 1,000 (4x): about 4x the lines run (quadratic would be 16x)."""
    small, large = words(1_000), words(4_000)
    ratio = lines_run(lambda: KeywordAutomaton(large).containers(LIMIT)) / lines_run(
        lambda: KeywordAutomaton(small).containers(LIMIT)
    )
    assert ratio < 6, ratio
    # and a family where every keyword holds every shorter one (`a`, `aa`, ...): linear in the characters
    fam_small = ["a" * i for i in range(1, 101)]  # 5,050 characters
    fam_large = ["a" * i for i in range(1, 201)]  # 20,100 characters: 4x
    ratio = lines_run(lambda: KeywordAutomaton(fam_large).containers(LIMIT)) / lines_run(
        lambda: KeywordAutomaton(fam_small).containers(LIMIT)
    )
    assert ratio < 6, ratio


ENTRY = """\
- id: my-failure-{i}
  title: My failure {i}
  category: data-error
  role: cause
  severity: error
  priority: 70
  keywords: {keywords}
  patterns:
    - '(?P<what>MyErr\\w+): bad row'
  message: 'data broke'
  remediation:
    summary: The data broke.
    why: Because.
    fix: ['Fix the data.']
  examples:
    match: ['[rank1]: {first}: bad row 7']
    no_match:
      - line: 'nothing here'
        why: not an error
"""


def user_catalog(path: Path, keywords: list[str]) -> Path:
    path.write_text(ENTRY.format(i=0, keywords=keywords, first=keywords[0]))
    return path


@pytest.mark.slow
def test_the_first_load_of_a_large_user_catalog_is_linear(tmp_path: Path, monkeypatch) -> None:
    """A scan with a user catalog of 4,000 keywords, no start-up cache: the prefilter is built from
    scratch (the keywords that hold others, the Hyperscan database or the `re` trie). 4x the keywords,
    about 4x the project's Python lines run in the part that depends on them (Hyperscan's compile,
    in C, is not counted)."""
    monkeypatch.setenv("VERL_LOGSCAN_CACHE", "off")
    log = tmp_path / "job.log"
    project = (str(ROOT / "logparse") + "/", str(ROOT / "patterns") + "/")

    def scan(keywords: list[str]) -> int:
        cat = user_catalog(tmp_path / f"c{len(keywords)}.yaml", keywords)
        log.write_text(f"[rank1]: {keywords[-1]}: bad row 7\n")
        outcome = []
        count = lines_run(
            lambda: outcome.append(run_cli(["scan", str(log), "--catalog", str(cat), "--format", "json"])),
            project,
        )
        assert outcome[0].exit_code == 1, outcome[0].output
        return count

    scan(words(10))  # (the first scan in a process compiles patterns on first use, once)
    none = scan(words(10))  # the built-in catalog and the rest of a scan
    small, large = scan(words(1_000)), scan(words(4_000))
    assert 0 < none < small < large, (none, small, large)
    assert (large - none) / (small - none) < 6, (none, small, large)  # (3.9 here; quadratic: ~16)


@pytest.mark.slow  # 4 s: keyword sets past Hyperscan's limits compiled and searched
def test_keywords_too_long_for_hyperscan_are_found_whole() -> None:
    """Hyperscan refuses an expression over 16,000 characters: such a keyword is in its database by a
    prefix, and a line with the prefix alone is no candidate for it."""
    long = "K" * 20_000 + "Z"
    escaped = "." * 9_000  # 18,000 characters once escaped
    pf = {engine: Prefilter([long, escaped, "other"], engine) for engine in ("hyperscan", "re")}
    block = (
        "a\n" + long + " seen\n" + "K" * 20_000 + "Y no\n" + escaped + "\nother " + escaped[:10]
    ).encode()
    for engine, prefilter in pf.items():
        found = {
            block[s : s + 5]: {prefilter.keywords[i][:3] for i in ids} for s, ids in prefilter.lines(block)
        }
        assert found == {b"KKKKK": {"KKK"}, b".....": {"..."}, b"other": {"oth"}}, engine


@pytest.mark.slow
def test_a_catalog_keyword_too_long_for_hyperscan_passes_check_and_scan(tmp_path: Path) -> None:
    """`catalog check` accepted a keyword of 16,001 characters that `scan` could not load
    (hyperscan.error: Pattern length exceeds limit); both work with it now, with either engine."""
    for keyword in ("K" * 16_000 + "Z", "." * 8_001, "é" * 20_000):
        cat = tmp_path / "long.yaml"
        cat.write_text(ENTRY.format(i=0, keywords=["MyErrData", keyword], first="MyErrData"))
        check = run_cli(["catalog", "check", str(cat)])
        assert check.exit_code == 0, check.output
        log = tmp_path / "job.log"
        log.write_text(f"INFO {keyword} seen\n[rank1]: MyErrData: bad row 7\n")
        result = run_cli(["scan", str(log), "--catalog", str(cat), "--format", "json"])
        assert result.exit_code == 1, result.output
        assert '"id": "my-failure-0"' in result.stdout
