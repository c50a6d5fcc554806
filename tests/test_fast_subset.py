"""`pytest -m "not slow"` is the quick run README gives: it leaves out the tests that take seconds
(headless Chromium, fleet on Ray, 100,000 tracebacks, a million frame lines) and nothing else is
needed to run it; README's test command, which `.ci/run` runs, still runs every test."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()


def collected(*args: str) -> set[str]:
    """The ids pytest collects with `args` (in a fresh pytest, as a user's run would)."""
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    return {line for line in p.stdout.splitlines() if "::" in line}


SLOW_FILES = (
    "tests/logparse/test_robustness.py",
    "tests/logparse/test_fleet.py",
    "tests/logparse/test_fleet_outputs.py",
    "tests/logparse/observe/test_tracebacks.py",
    "tests/reports/test_html.py",
    "tests/reports/test_html_on_a_phone.py",
    "tests/logparse/read/test_prefilter.py",
    "tests/reports/test_json_writer.py",
)


@pytest.mark.slow
def test_not_slow_leaves_out_the_browser_ray_and_huge_input_tests_and_only_them() -> None:
    every = collected(*SLOW_FILES)
    quick = collected("-m", "not slow", *SLOW_FILES)
    slow = every - quick
    names = {test.split("::", 1)[1].split("[", 1)[0] for test in slow}
    assert {
        "test_100000_tracebacks",
        "test_never_ending_traceback_stays_bounded",
        "test_ray_engine_rows_equal_scanning_each_job_alone",
        "test_fleet_on_ray_masks_as_the_local_engine_does",
        "test_handmade_report_in_chromium",  # marked by its `browser` fixture
        "test_scan_report_fits_the_width",
        "test_line_ends_and_keywords_that_span_lines",  # the slowest of the rest (20-50 s)
        "test_the_writer_writes_what_json_dumps_writes",
    } <= names
    # the quick run keeps these files' other tests: slow is a mark on a few, not on a whole area
    assert quick and all(any(t.startswith(f) for t in quick) for f in SLOW_FILES[:5])
    assert not any("test_html_on_a_phone" in t for t in quick)


def test_readme_gives_the_quick_run_and_ci_runs_everything() -> None:
    command = re.search(r"<!-- test-command -->\n```\n(.*)\n```", README)
    assert command and "-m" not in command.group(1).split("pytest", 1)[1]  # .ci/run takes this one
    assert 'python -m pytest -q -m "not slow" -n auto' in README
    # how long each set takes, measured, and how to get the browser tests' Chromium
    assert re.search(r"the quick run takes \d+ min \d+ s", README)
    assert re.search(r"The slow tests .*\d+ min", README, re.S)
    assert "apt-get install chromium chromium-driver" in README
