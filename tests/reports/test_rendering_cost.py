"""Rendering costs time in proportion to the log text it shows, whatever its shape: a regex that runs on
log text in reports/ is linear or bounded. Timed as a ratio to the same report with short text (CPU
time of this process, the best of a few runs: the machine is shared), never as seconds.

A frame path of 100,000 folders once cost `regex` about 3 s per match of the library-root pattern,
and a Markdown report matches it many times while it fits the report to its size budget: a 1.6 MB log
of four such frames took 97 s to render as Markdown and HTML (some 100,000 times the short log).
The reports are built from the model, as the scan builds them for such a log (its frames and its
evidence), so that only rendering is timed; benchmarks/bench_hostile_inputs.py runs the whole CLI."""

from __future__ import annotations

import dataclasses
import time

from logparse.model import FRAME_USER, Evidence, Report
from reports import render
from tests.reports.test_html import handmade_report

FOLDERS = 100_000
CARETS = 400_000
RUNS = 3
# linear work on 1.6 MB of paths renders in some tens of times the short report's time (a 1.6 MB HTML
# file is written); the quadratic shape was 26,000 times (100,000 folders), far above this bound
MAX_RATIO = 1_000


def _report(folders: str = "/abc", code_marks: str = "^^^^") -> Report:
    """A failed report whose traceback has four frames under `folders`, and whose evidence is that
    traceback with `code_marks` (Python 3.11's marker line) just before the error line."""
    base = handmade_report()
    rc = base.root_cause
    assert rc is not None and rc.traceback is not None and rc.error_line is not None
    frames = tuple((f"{folders}/f{i}.py", i + 1, f"fn{i}") for i in range(4))
    lines = ["Traceback (most recent call last):"]
    for file, line, function in frames:
        lines += [f'  File "{file}", line {line}, in {function}', f"    call{line}()"]
    lines.append(f"    {code_marks}")
    first = rc.error_line.line - len(lines)
    evidence = (*(Evidence("job.log", first + i, text) for i, text in enumerate(lines)), rc.error_line)
    traceback = dataclasses.replace(
        rc.traceback, frames=frames, frame_kinds=(FRAME_USER,) * 4, innermost_user_frame=frames[-1]
    )
    return dataclasses.replace(
        base, root_cause=dataclasses.replace(rc, evidence=evidence, traceback=traceback)
    )


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


def _ratio(long: Report, short: Report) -> float:
    render(short, "md"), render(short, "html")  # (templates compiled before anything is timed)
    return _render_seconds(long) / _render_seconds(short)


def test_frame_paths_of_many_folders_render_in_time_linear_in_their_length() -> None:
    long = _report(folders="/abc" * FOLDERS)
    assert sum(len(e.text) for e in long.root_cause.evidence) > 1_600_000  # type: ignore[union-attr]
    html = render(long, "html")
    assert html.count("/abc" * FOLDERS) >= 4  # every frame and evidence line is in the report, whole
    ratio = _ratio(long, _report())
    assert ratio < MAX_RATIO, f"rendering four frame paths of {FOLDERS:,} folders took {ratio:.0f}x"


def test_a_long_line_of_carets_renders_in_time_linear_in_its_length() -> None:
    """Python's `^^^` marker lines are skipped in the error window: a line of markers that does not end
    as one is checked in one pass (it was one pass per marker)."""
    ratio = _ratio(_report(code_marks="^" * CARETS + "x"), _report(code_marks="^^^^x"))
    assert ratio < MAX_RATIO, f"rendering a line of {CARETS:,} carets took {ratio:.0f}x"
