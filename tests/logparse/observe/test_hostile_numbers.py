"""A number in a log line longer than any real one (past int64, or past the 4,300 digits Python reads
at all) ends no scan: every sample and fixture with each of its numbers made 25 and 5,000 digits long
is scanned through the CLI (exit 0, 1, 3 or 5 with a report, no exception), and its blocks are made as a
reader process makes them when it reads the candidates' prefixes apart (pre_records: an int64 row)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from logparse.pipeline import Analysis, ScanConfig
from logparse.read.blocks import BlockMaker
from logparse.read.pre_records import PreReader
from logparse.read.progress_lines import ProgressLineParser
from logparse.read.steps import StepParser
from patterns import load_catalog
from patterns.numbers import TOO_BIG, log_int
from tests.conftest import FIXTURES, SAMPLES, run_cli

INPUTS = sorted(SAMPLES.glob("*.log")) + sorted(FIXTURES.rglob("*.log"))


def widened(path: Path, digits: int) -> str:
    """The log with each run of fewer than 40 digits replaced by `digits` nines."""
    text = path.read_text(errors="replace")
    return re.sub(r"\d+", lambda m: "9" * digits if len(m.group()) < 40 else m.group(), text)


def test_log_int_reads_what_python_reads_and_too_many_digits_as_too_big() -> None:
    assert log_int("007") == 7 and log_int(b"12") == 12
    assert log_int("9" * 25) == int("9" * 25)
    assert log_int("9" * 5000) == TOO_BIG > (1 << 63)


@pytest.mark.slow  # (134 scans of lines with 5,000-digit numbers: ~30 s)
@pytest.mark.parametrize("digits", [25, 5000])
def test_no_number_ends_a_scan(tmp_path: Path, digits: int) -> None:
    for path in INPUTS:
        log = tmp_path / "job.log"
        log.write_text(widened(path, digits))
        out = tmp_path / "r.json"
        result = run_cli(["scan", str(log), "--format", "json", "-o", str(out), "--workers", "1"])
        assert result.exit_code in (0, 1, 3, 5), (path, result.output[-500:])  # (5: an empty file)
        assert "root_cause" in json.loads(out.read_text()), path


@pytest.mark.parametrize("digits", [25, 5000])
def test_a_reader_reads_the_prefixes_of_any_number_apart(digits: int) -> None:
    analysis = Analysis(load_catalog(), ScanConfig(workers=1, reader_process_bytes=None))
    reader = analysis.reader
    for path in INPUTS:
        progress = ProgressLineParser(analysis.progress_words, reader.syntax, StepParser(), reader.ignores)
        maker = BlockMaker(reader.prefilter, StepParser(), progress, PreReader(analysis.premask))
        data = widened(path, digits).encode()
        maker.make(data if data.endswith(b"\n") else data + b"\n", 0, False, read_apart=True)
