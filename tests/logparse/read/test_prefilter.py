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
def test_keywords_inside_longer_ones_are_searched_once_and_all_are_found() -> None:
    """Only the keywords no other contains are in the Hyperscan database (a bar calls back once, not
    twice); the longer ones are still found in every line the shorter marks, as the re engine finds
    them."""
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
    contained = {fast.keywords[i] for ids in fast._containing.values() for i in ids}
    assert contained == {
        "Training Progress:",
        "KeyError",
        "Error executing job",
        "CUDA error: ",
        "CUDA error: out of memory",
        ": nan",
    }
    rnd = random.Random(11)
    pieces = words + ["Training", " Progress", "CUDA", " error", "na", "n", "\n", " "]
    for _ in range(300):
        block = "".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 40))).encode()
        assert fast.lines(block) == slow.lines(block)
