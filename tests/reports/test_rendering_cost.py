"""Rendering costs time in proportion to the log text it shows, whatever its shape: a regex that runs on
log text in reports/ is linear or bounded. Timed as a ratio to the same log with short text (CPU time
of this process, the best of a few runs: the machine is shared), never as seconds.

A frame path of 100,000 folders once cost `regex` about 3 s per match of the library-root pattern,
and a Markdown report matches it many times while it fits the report to its size budget: a 1.6 MB log
of four such frames took 97 s to render as Markdown and HTML (some 100,000 times the short log)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from logparse.model import Report
from logparse.scan import scan_paths
from patterns import load_catalog
from reports import render

FOLDERS = 100_000
CARETS = 400_000
RUNS = 3
# linear work on 1.6 MB of paths renders in some tens of times the short log's time (a 1.6 MB HTML file is
# written); a quadratic shape is thousands of times slower than this bound
MAX_RATIO = 400


def _log(path: Path, folder_path: str = "/abc", code_marks: str = "^^^^") -> Path:
    lines = ["start", "Traceback (most recent call last):"]
    for i in range(4):
        lines += [f'  File "{folder_path}/f{i}.py", line {i + 1}, in fn{i}', f"    call{i}()"]
    lines += [f"    {code_marks}", "RuntimeError: boom"]
    path.write_text("\n".join(lines) + "\n")
    return path


def _render_seconds(report: Report) -> float:
    """CPU seconds to render `report` as Markdown and HTML, the best of RUNS."""
    best = None
    for _ in range(RUNS):
        start = time.process_time()
        render(report, "md")
        render(report, "html")
        took = time.process_time() - start
        best = took if best is None else min(best, took)
    assert best is not None
    return max(best, 1e-4)  # (the resolution of a CPU clock: no division by zero)


def _ratio(long_log: Path, short_log: Path) -> float:
    catalog = load_catalog([])
    short, long = scan_paths([str(short_log)], catalog), scan_paths([str(long_log)], catalog)
    render(short, "md"), render(short, "html")  # (templates compiled before anything is timed)
    return _render_seconds(long) / _render_seconds(short)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rendering-cost")


def test_frame_paths_of_many_folders_render_in_time_linear_in_their_length(logs: Path) -> None:
    long_log = _log(logs / "long-paths.log", folder_path="/abc" * FOLDERS)
    assert long_log.stat().st_size > 1_600_000
    report = scan_paths([str(long_log)], load_catalog([]))
    assert report.root_cause is not None and report.root_cause.traceback is not None
    assert [len(f[0]) for f in report.root_cause.traceback.frames] == [4 * FOLDERS + 6] * 4  # shown whole
    ratio = _ratio(long_log, _log(logs / "short-paths.log"))
    assert ratio < MAX_RATIO, f"rendering four frame paths of {FOLDERS:,} folders took {ratio:.0f}x"


def test_a_long_line_of_carets_renders_in_time_linear_in_its_length(logs: Path) -> None:
    """Python's `^^^` marker lines are skipped in the error window: a line of markers that does not end
    as one is checked in one pass (it was one pass per marker)."""
    long_log = _log(logs / "long-carets.log", code_marks="^" * CARETS + "x")
    ratio = _ratio(long_log, _log(logs / "short-carets.log", code_marks="^^^^x"))
    assert ratio < MAX_RATIO, f"rendering a line of {CARETS:,} carets took {ratio:.0f}x"
