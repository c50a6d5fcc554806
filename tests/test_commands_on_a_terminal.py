"""`explain` and `catalog check` as a user sees them, the real command under a pty of 80 columns: rows
wrap at spaces (no `gpu_memory_utiliz` / `ation` that the terminal cut), headings bold and problems
red when colour is on; `catalog check` points a failing example at its own line, and warns when a
built-in entry beats a custom one on that entry's own example (naming it and its priority)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.test_diff_presentation import SGR, on_pty

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pty behaviour checked on Linux")

# an entry of our own that names the CUDA OOM wording the built-in `cuda-oom` (priority 90) names too
MINE = """\
- id: team-oom
  title: The OOM wording our cluster's wrapper prints
  category: cuda-oom
  role: cause
  severity: fatal
  priority: 50
  keywords: ['CUDA out of memory']
  patterns:
    - 'CUDA out of memory\\. Tried to allocate'
  message: 'GPU memory exhausted'
  remediation:
    summary: Out of GPU memory.
    why: The batch does not fit.
    fix:
      - Lower the batch size.
    references: []
  examples:
    match:
      - 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.'
      - 'a line that is no OOM at all'
    no_match:
      - line: 'step:3 - loss:1.0'
        why: a healthy step line
"""


def rows(shown: str) -> list[str]:
    return SGR.sub("", shown).splitlines()


def test_explain_wraps_at_spaces_on_80_columns() -> None:
    shown, code = on_pty(["explain", "cuda-oom"])
    assert code == 0
    lines = rows(shown)
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    assert "gpu_memory_utilization" in text  # whole, on one row
    assert not re.search(r"gpu_memory_utiliz\n", text)
    # a fix step's continuation rows hang under its text, after `1. `
    step = next(i for i, line in enumerate(lines) if line.startswith("  1. "))
    assert lines[step + 1].startswith("     ") and lines[step + 1][5] != " "
    assert "\x1b[1mWhat it is\x1b[0m" in shown  # headings bold on a terminal
    plain, _ = on_pty(["explain", "cuda-oom"], env={"NO_COLOR": "1"})
    assert "\x1b[" not in plain


def test_catalog_check_points_at_the_example_and_warns_of_a_stronger_built_in(tmp_path: Path) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(MINE)
    shown, code = on_pty(["catalog", "check", str(mine)])
    assert code == 2
    text = " ".join(" ".join(rows(shown)).split())  # the rows joined back, as one would read them
    assert max(len(line) for line in rows(shown)) <= 80
    # the failing example is on line 20 of the file, the entry starts on line 1
    assert f"{mine}:20: entry 'team-oom': match example does not match" in text
    assert (
        f"{mine}:19: warning: entry 'team-oom' (priority 50) fires on this example, but the built-in "
        "entry 'cuda-oom' (priority 90, cuda-oom) is the root cause" in text
    )
    assert "\x1b[33m" in shown and "\x1b[31m" in shown  # the warning yellow, the failure red
    # fixed: no failure, the warning stays and the result says so
    mine.write_text(MINE.replace("      - 'a line that is no OOM at all'\n", ""))
    shown, code = on_pty(["catalog", "check", str(mine)])
    assert code == 0
    assert "catalog ok: 1 entries, 2 examples; 1 warning" in " ".join(rows(shown))
    mine.write_text(
        MINE.replace("priority: 50", "priority: 95").replace("      - 'a line that is no OOM at all'\n", "")
    )
    shown, code = on_pty(["catalog", "check", str(mine)])
    assert code == 0 and "warning" not in shown
