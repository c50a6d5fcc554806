"""`fleet` names its stalled jobs in every format, links their reports, points `error at` at a
`path:line` relative to where it ran, and writes every `-o` it is given (issue 39, points 2 and 3).
Driven as a user runs it: `python -m logparse fleet ...` in a folder of jobs; the Markdown read through
markdown-it."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from logparse.process import EXIT_FAILURE_FOUND
from tests.conftest import FIXTURES, ROOT, SAMPLES

STALLED = FIXTURES / "stalls" / "torchrun-hang-py-spy"  # py-spy dumps: pid 1968 is the odd one out


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with three jobs (a failure, a healthy run, a hang) and the fleet's outputs, written by
    one command (`-o f.md -o f.html -o f.csv -o f.json --reports reps`)."""
    where = tmp_path_factory.mktemp("fleet")
    shutil.copy(SAMPLES / "ray-actor-exception.log", where / "oom.log")
    shutil.copy(SAMPLES / "torchrun-healthy.log", where / "ok.log")
    shutil.copytree(STALLED, where / "hang")
    proc = subprocess.run(
        [sys.executable, "-m", "logparse", "fleet", "oom.log", "ok.log", "hang", "--jobs", "2"]
        + ["-o", "f.html", "-o", "f.md", "-o", "f.csv", "-o", "f.json", "--reports", "reps"],
        cwd=where,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == EXIT_FAILURE_FOUND, proc.stderr
    (where / "stderr.txt").write_text(proc.stderr)
    return where


def test_every_output_is_written_and_said_once(fleet_dir: Path) -> None:
    err = (fleet_dir / "stderr.txt").read_text()
    assert err.splitlines() == [
        "verl-logscan: 3 job(s), 1 failed, 1 stalled, 0 unreadable; summary written to f.html, f.md, "
        "f.csv, f.json"
    ]  # no "could not write the report": every job's report was written
    assert (fleet_dir / "f.html").read_text().startswith("<!DOCTYPE html>")
    assert (fleet_dir / "f.md").read_text().startswith("## verl-logscan fleet summary")
    assert sorted(p.name for p in (fleet_dir / "reps").iterdir()) == ["hang.html", "ok.html", "oom.html"]


def _md_tables(text: str) -> dict[str, list[dict[str, str]]]:
    """Each `###` section's table as rows of {column: cell text}, as markdown-it parses them (code
    spans and escapes read as the text they show)."""
    tokens = MarkdownIt().enable("table").parse(text)
    tables: dict[str, list[dict[str, str]]] = {}
    section, header, row, cells = "", [], None, []
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.tag == "h3":
            section = tokens[i + 1].content
        elif tok.type == "tr_open":
            row, cells = [], []
        elif tok.type == "inline" and row is not None:  # the cell as a reader sees it; a link: its target
            links = [c.attrs["href"] for c in tok.children or () if c.type == "link_open"]
            cells.append(links[0] if links else "".join(c.content for c in tok.children or ()))
        elif tok.type == "tr_close":
            if not header:
                header = cells
            else:
                tables.setdefault(section, []).append(dict(zip(header, cells, strict=True)))
            row = None
        elif tok.type == "table_close":
            header = []
    return tables


def test_markdown_names_the_stalled_job_with_its_report_and_where(fleet_dir: Path) -> None:
    tables = _md_tables((fleet_dir / "f.md").read_text())
    assert set(tables) >= {"cuda-oom: 1 job", "stalled: 1 job", "healthy: 1 job"}
    [row] = tables["stalled: 1 job"]
    assert row["job"] == "hang"
    assert row["root cause"] == "collective-one-rank-elsewhere"
    assert row["error at"] == "hang/py-spy-dump.txt:13"  # the odd process's stack dump
    assert "pid 1968 in wait_for_shard_lock (toy_train.py:150)" in row["message"]
    assert row["report"] == "./reps/hang.html"
    [oom] = tables["cuda-oom: 1 job"]
    assert oom["error at"] == "oom.log:88"  # path:line relative to where the command ran


def test_html_has_a_stalled_group_linked_to_its_report(fleet_dir: Path) -> None:
    html = (fleet_dir / "f.html").read_text()
    assert 'data-key="stalled" data-jobs="1"' in html
    assert '<a class="chip stalled" href="#group-2"><b>1</b> stalled</a>' in html
    stalled = html[html.index('data-key="stalled"') :]
    stalled = stalled[: stalled.index("</section>")]
    assert '<a href="./reps/hang.html">report</a>' in stalled
    assert "hang/py-spy-dump.txt:13" in stalled


def test_json_and_csv_rows_carry_the_report_and_where(fleet_dir: Path) -> None:
    rows = {r["job"]: r for r in json.loads((fleet_dir / "f.json").read_text())["jobs"]}
    hang = rows["hang"]
    assert hang["status"] == "stalled" and hang["report"] == "reps/hang.html"
    assert (hang["error_source"], hang["error_line"]) == ("hang/py-spy-dump.txt", 13)
    assert rows["oom.log"]["error_source"] == "oom.log"
    csv_rows = {r["job"]: r for r in csv.DictReader(io.StringIO((fleet_dir / "f.csv").read_text()))}
    assert csv_rows["hang"]["report"] == "reps/hang.html" and csv_rows["hang"]["error_line"] == "13"


def test_text_summary_points_at_path_and_line(fleet_dir: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "logparse", "fleet", "oom.log", "hang", "--jobs", "1"],
        cwd=fleet_dir,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = proc.stdout.splitlines()
    assert any(line.startswith("oom.log ") and line.endswith("oom.log:88") for line in lines)
    assert any(line.startswith("hang ") and line.endswith("hang/py-spy-dump.txt:13") for line in lines)
