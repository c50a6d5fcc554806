"""benchmarks/instructions.py: the instruction counts docs/benchmarks.md compares across machines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import instructions  # noqa: E402


def test_head_stops_at_the_end_of_the_line_the_limit_falls_in(tmp_path):
    log = tmp_path / "a.log"
    log.write_bytes(b"first line\nsecond line\nthird\n")
    assert instructions.head(log, 0, tmp_path / "0.log").read_bytes() == b"first line\n"
    assert instructions.head(log, 13e-6, tmp_path / "13.log").read_bytes() == b"first line\nsecond line\n"
    assert instructions.head(log, 1, tmp_path / "all.log").read_bytes() == log.read_bytes()


@pytest.mark.parametrize(
    "summary",
    ["==4242== I   refs:      3,954,310,123", "==4242== I refs:        3,954,310,123"],
)
def test_reads_valgrinds_summary_in_both_spellings(summary):
    m = instructions.REFS.search(f"==4242== \n{summary}\n==4242== \n")
    assert m is not None and int(m.group(1).replace(",", "")) == 3_954_310_123


def _run(args, env):
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "instructions.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )


def test_without_valgrind_it_says_so_and_exits_2(tmp_path):
    log = tmp_path / "a.log"
    log.write_text("step:1 - actor/pg_loss:0.1\n")
    env = {**os.environ, "PATH": str(tmp_path)}  # (no valgrind there; the script runs by its full path)
    p = _run([str(log)], env)
    assert p.returncode == 2
    assert "valgrind" in p.stderr and "Traceback" not in p.stderr


def test_a_missing_log_is_named_and_exits_2(tmp_path):
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is checked first")
    p = _run([str(tmp_path / "none.log")], dict(os.environ))
    assert p.returncode == 2
    assert "none.log" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
def test_counts_the_work_of_the_lines_beyond_start_up(tmp_path):
    if shutil.which("valgrind") is None:
        pytest.skip("needs valgrind")
    log = tmp_path / "steps.log"
    log.write_text(
        "".join(f"step:{i} - actor/pg_loss:{i / 7:.4f} - actor/entropy:{i / 3:.4f}\n" for i in range(1, 2001))
    )
    p = _run([str(log), "--mb", "1"], dict(os.environ))
    assert p.returncode == 0, p.stderr
    row = next(line for line in p.stdout.splitlines() if line.startswith("| steps.log"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    lines_g, start_g = float(cells[2]), float(cells[3])
    # 2,000 step lines cost something beyond the start-up, and far less than it
    assert 0 < lines_g < start_g


def test_a_tree_that_is_no_checkout_is_named_and_exits_2(tmp_path):
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is checked first")
    log = tmp_path / "a.log"
    log.write_text("step:1 - actor/pg_loss:0.1\n")
    p = _run([str(log), "--tree", str(tmp_path / "elsewhere")], dict(os.environ))
    assert p.returncode == 2
    assert "elsewhere" in p.stderr and "Traceback" not in p.stderr
