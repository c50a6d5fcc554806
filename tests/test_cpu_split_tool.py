"""benchmarks/cpu_split.py: a missing log or a --tree that is no checkout is named, exit 2 (it was a
traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "cpu_split.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_missing_log_is_named(tmp_path: Path) -> None:
    out = _run(str(tmp_path / "nope.log"))
    assert out.returncode == 2 and "nope.log: no such file" in out.stderr and "Traceback" not in out.stderr


def test_a_tree_that_is_no_checkout_is_named(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("hello\n")
    out = _run(str(log), "--tree", str(tmp_path))
    assert (
        out.returncode == 2 and "not a verl-logscan checkout" in out.stderr and "Traceback" not in out.stderr
    )
