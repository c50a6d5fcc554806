"""`verl-logscan diff` as a user sees it, the real command each time: under a pty of 80 columns it is
coloured and every row fits (no word cut that a space could have broken); the lines of one traceback
are one entry that says how many it folds; the Markdown's count is the count of its rows (read with
markdown-it); `-o` prints the text on standard error, then where the report went, as `scan -o` does."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from tests.conftest import ROOT, SAMPLES, run_cli
from tests.logparse.test_terminal import drain, open_pty

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pty behaviour checked on Linux")

CLI = [sys.executable, "-m", "logparse"]
SGR = re.compile(r"\x1b\[[0-9;]*m")
GOOD = str(SAMPLES / "torchrun-healthy.log")
BAD = str(SAMPLES / "torchrun-rank-exception.log")


def on_pty(args: list[str], columns: int = 80, env: dict[str, str] | None = None) -> tuple[str, int]:
    """The command with stdout and stderr on a pty of `columns`: (what it showed, exit code)."""
    master, slave = open_pty(columns)
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")}
    base.update(TERM="xterm", **(env or {}))
    p = subprocess.Popen(CLI + args, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=base, cwd=ROOT)
    os.close(slave)
    shown = bytearray()
    reader = drain(master, shown)
    code = p.wait(timeout=120)
    reader.join(timeout=10)
    os.close(master)
    return shown.decode("utf-8", "replace").replace("\r\n", "\n"), code


@pytest.mark.slow  # 2-4 s: two diffs, each the CLI as a process on a pty
def test_diff_on_a_terminal_is_coloured_and_fits_80_columns() -> None:
    shown, code = on_pty(["diff", GOOD, BAD])
    assert code == 1
    plain = SGR.sub("", shown)
    assert "\x1b[31m" in shown and "\x1b[32m" in shown  # BAD's verdict red, GOOD's green
    assert max(len(line) for line in plain.splitlines()) <= 80, plain
    assert plain.startswith("DIFF  GOOD healthy")
    # the traceback of rank 2 is one entry, shown by its exception line, with what it folds
    assert re.search(r"rank-exception\.log:22; rank 2;\s+training;\s+\+12\s+more\s+lines\s+of", plain)
    assert "[rank2]:   File" not in plain and "^^^^" not in plain
    assert "Lines new in BAD (5 entries from 49 templates)" in plain


@pytest.mark.slow  # 2-4 s: the CLI as a process, on a pty and on a pipe
def test_no_color_and_a_pipe_get_plain_text() -> None:
    shown, _ = on_pty(["diff", GOOD, BAD], env={"NO_COLOR": "1"})
    assert "\x1b[" not in shown
    piped = subprocess.run(CLI + ["diff", GOOD, BAD], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "\x1b[" not in piped.stdout and "Lines new in BAD (5 entries" in piped.stdout


def test_markdown_count_is_the_rows_shown(tmp_path: Path) -> None:
    out = tmp_path / "d.md"
    r = run_cli(["diff", GOOD, BAD, "--max-lines", "3", "-o", str(out)])
    assert r.exit_code == 1
    tokens = MarkdownIt("commonmark").enable("table").parse(out.read_text())
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    heading = next(h for h in headings if h.startswith("Lines new in BAD"))
    at = next(i for i, t in enumerate(tokens) if t.type == "inline" and t.content == heading)
    body = next(i for i in range(at, len(tokens)) if tokens[i].type == "tbody_open")
    end = next(i for i in range(body, len(tokens)) if tokens[i].type == "tbody_close")
    rows = sum(1 for t in tokens[body:end] if t.type == "tr_open")
    assert heading == f"Lines new in BAD (5 entries from 49 templates, first {rows} shown)" and rows == 3
    data = json.loads(run_cli(["diff", GOOD, BAD, "--format", "json"]).stdout)
    assert data["new_entries"] == 5 and data["new_templates"] == 49
    assert sum(1 + n["folded"] for n in data["new_lines"]) == 49


@pytest.mark.slow  # 2 s: the CLI as a process on a pty
def test_dash_o_prints_the_summary_and_where_it_went(tmp_path: Path) -> None:
    out = tmp_path / "d.html"
    shown, code = on_pty(["diff", GOOD, BAD, "-o", str(out)])
    assert code == 1 and out.exists()
    plain = SGR.sub("", shown)
    assert plain.startswith("DIFF  GOOD healthy") and "BAD's verdict: failed" in plain
    assert plain.rstrip().endswith(f"the runs differ; written to {out}")
    assert "\x1b[31m" in shown  # coloured on the terminal, as scan -o's summary is
