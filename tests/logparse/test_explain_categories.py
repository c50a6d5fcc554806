"""`explain` takes the word a summary shows after FAILED: a root-cause category is described with its
catalog entries, the fallback rules that name it and its fix; a name that is both an entry and a
category explains the entry and points to the category."""

from __future__ import annotations

import subprocess
import sys

import pytest

from logparse.process import EXIT_ERROR
from patterns import CATEGORIES, load_builtin_catalog
from tests.conftest import SAMPLES, run_cli

SECTIONS = ("What it is", "Why it happens", "Catalog entries", "Fix")


def sections(text: str) -> dict[str, list[str]]:
    """The text's sections: a heading line after a blank line, then its indented lines."""
    out: dict[str, list[str]] = {}
    current = None
    for block in text.split("\n\n"):
        head, *body = block.split("\n")
        current = head.split(" (")[0]
        out[current] = [line for line in body if line.strip()]
    return out


@pytest.mark.parametrize("category", sorted(set(CATEGORIES) - {"unknown"}))
def test_every_category_is_explained_with_its_entries_and_fix(category: str) -> None:
    r = run_cli(["explain", "--category", category])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"{category}: a root-cause category\n{CATEGORIES[category]}\n")
    parts = sections(r.stdout)
    for name in SECTIONS:
        assert parts.get(name), (category, name, r.stdout)
    entries = [e.id for e in load_builtin_catalog().entries if e.category == category]
    listed = [line.split()[0] for line in parts["Catalog entries"] if not line.strip().startswith("(")]
    assert sorted(listed) == sorted(entries) or (not entries and "none" in parts["Catalog entries"][0])


@pytest.mark.slow
def test_the_category_a_failed_summary_shows_is_explained() -> None:
    """`FAILED host-oom` on the terminal; `verl-logscan explain host-oom` answered 'no catalog entry'."""
    scan = subprocess.run(
        [sys.executable, "-m", "logparse", "scan", str(SAMPLES / "torchrun-sigkill.log")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    category = scan.stdout.split()[1]
    assert scan.stdout.startswith("FAILED") and category == "host-oom"
    r = subprocess.run(
        [sys.executable, "-m", "logparse", "explain", category], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("host-oom: a root-cause category")
    assert "process-killed-by-sigkill" in r.stdout  # the entry this job's verdict came from
    assert "dmesg" in sections(r.stdout)["Fix"][0]


def test_a_name_that_is_an_entry_and_a_category_explains_the_entry_and_points_to_the_category() -> None:
    entry = run_cli(["explain", "cuda-oom"])
    assert entry.exit_code == 0 and entry.stdout.startswith("cuda-oom: CUDA out of memory\n")
    assert entry.stdout.rstrip().endswith("verl-logscan explain --category cuda-oom")
    category = run_cli(["explain", "--category", "cuda-oom"])
    assert category.exit_code == 0 and category.stdout.startswith("cuda-oom: a root-cause category")


def test_an_unknown_name_suggests_entries_and_categories() -> None:
    r = run_cli(["explain", "hostoom"])
    assert r.exit_code == EXIT_ERROR and "did you mean 'host-oom'" in r.stderr
    r = run_cli(["explain", "--category", "module-not-found"])  # an entry, not a category
    assert r.exit_code == EXIT_ERROR and "no category 'module-not-found'" in r.stderr
