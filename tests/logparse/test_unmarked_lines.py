"""A line no prefilter keyword marks is read only for its own stream: while that stream has a traceback,
a message or a dump open. While a traceback of one process is open, its input's other lines are read
too (the reader cannot tell whose a line is before reading its prefix), but a line of a process with
nothing open is then seen by no observer, as it would not be outside the traceback: what a report says
does not depend on which other process happened to be failing nearby."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from logparse.pipeline import Analysis, ScanConfig, analyse
from logparse.read.records import RecordReader
from patterns import load_catalog
from reports.jsonreport import render_json

A = "(WorkerDict pid=101, ip=10.0.0.1) "  # the process whose caught traceback opens a region
B = "(WorkerDict pid=202, ip=10.0.0.2) "  # a process with nothing open

TRACEBACK = [
    A + "Traceback (most recent call last):",
    A + '  File "/opt/venv/lib/python3.11/site-packages/verl/workers/fsdp_workers.py", line 12, in update',
    A + "    self.step(batch)",
    B + "/opt/venv/lib/python3.10/site-packages/x/y.py:7: FutureWarning: the old API goes away",
    A + "ValueError: bad batch shape (8, 3)",
    A + "  expected (8, 4) after the padding",
    A + "",
]


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def report(catalog, tmp_path: Path, lines: list[str], name: str = "job.log") -> dict:
    """The JSON report of `lines`, without what differs when a line is left out: the inputs' line count
    and the line numbers; the file is named `job.log` wherever it is."""
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    text = render_json(analyse([str(path)], catalog)).replace(str(path), "job.log")
    text = re.sub(r"job\.log:\d+", "job.log:N", text)
    data = json.loads(text)
    data.pop("inputs", None)
    return without_line_numbers(data)


def without_line_numbers(value):
    if isinstance(value, dict):
        return {k: without_line_numbers(v) for k, v in value.items() if k != "line"}
    if isinstance(value, list):
        return [without_line_numbers(v) for v in value]
    return value


def test_a_quiet_process_line_inside_a_traceback_is_seen_by_no_observer(catalog, tmp_path: Path) -> None:
    with_line = report(catalog, tmp_path, TRACEBACK, "with.log")
    without = report(catalog, tmp_path, [t for t in TRACEBACK if not t.startswith(B)], "without.log")
    assert with_line == without
    env = with_line["environment"]
    assert "10.0.0.2" not in env.get("hosts", [])  # B's Ray prefix: not a host the report names
    assert env["python"] == "3.11"  # A's frame path, not B's warning (python3.10)


def test_the_open_stream_keeps_its_lines_without_a_keyword(catalog, tmp_path: Path) -> None:
    analysis = Analysis(catalog, ScanConfig(workers=1, reader_process_bytes=None))
    path = tmp_path / "job.log"
    path.write_text("\n".join(TRACEBACK) + "\n")
    analysis.feed_inputs([str(path)])
    analysis.finish()
    (tb,) = analysis.assembler.kept()
    assert tb.stream[3] == 101
    assert [f.code for f in tb.frames] == ["self.step(batch)"]  # the code line under the frame
    (exc,) = tb.exceptions
    assert exc.type == "ValueError" and exc.extra == ["expected (8, 4) after the padding"]
    assert all(r.origin.pid == 101 for r in tb.all_records())


def test_a_line_is_seen_the_same_inside_and_outside_another_process_traceback(
    catalog, tmp_path: Path
) -> None:
    """B's unmarked lines name a host and a Python: neither is learned, inside A's traceback or after
    it (its blank line closes it); A's frames give the Python."""
    a_only = [t for t in TRACEBACK if not t.startswith(B)]
    chatter = [B + f"worker chatter {i} from /opt/venv/lib/python3.10/site-packages/x.py" for i in range(3)]
    inside = report(catalog, tmp_path, a_only[:3] + chatter + a_only[3:], "inside.log")
    after = report(catalog, tmp_path, a_only + chatter, "after.log")
    assert inside["environment"] == after["environment"]
    assert inside["environment"]["python"] == "3.11"
    assert "python" not in report(catalog, tmp_path, chatter, "alone.log")["environment"]


def random_job(seed: int) -> list[str]:
    """Processes of a Ray job writing chatter, caught tracebacks with multi-line messages, nested Ray
    prefixes (the inner pid is the line's) and error lines, interleaved."""
    rng = random.Random(seed)
    procs = [f"(WorkerDict pid={100 + k}, ip=10.0.{k}.1) " for k in range(4)]
    procs += ["(vLLMHttpServer pid=300, ip=10.0.9.1) (EngineCore_DP0 pid=101) ", "(TaskRunner pid=77) "]
    lines: list[str] = []
    for _ in range(400):
        p = rng.choice(procs)
        kind = rng.random()
        if kind < 0.08:
            lines += [
                p + "Traceback (most recent call last):",
                p + f'  File "/opt/venv/lib/python3.1{rng.randint(0, 2)}/site-packages/m.py", line 3, in f',
                p + "    f()",
                p + "RuntimeError: the batch went wrong",
                p + f"  detail line {rng.randint(0, 9)} of the message",
            ]
            if rng.random() < 0.5:
                lines.append(p)
        elif kind < 0.12:
            lines.append(p + "ERROR 12-01 10:00:00 worker.py:12] something failed badly")
            lines.append(p + "  its continuation without a keyword")
        else:
            host = f"10.1.{rng.randint(0, 9)}.{rng.randint(0, 9)}"
            lines.append(
                p + f"chatter {rng.randint(0, 99)} /opt/venv/lib/python3.9/site-packages/z.py {host}"
            )
    return lines


@pytest.mark.parametrize("seed", range(6))
def test_lines_of_quiet_processes_left_unread_change_no_report(
    catalog, tmp_path: Path, seed: int, monkeypatch
) -> None:
    """The reader leaves unread an unmarked line of a Ray actor process with nothing open (records
    RecordReader._quiet_line); the report is the one of reading it and dropping it in the analysis."""
    lines = random_job(seed)
    path = tmp_path / "job.log"
    path.write_text("\n".join(lines) + "\n")

    def scan() -> tuple[str, int]:
        analysis = Analysis(catalog, ScanConfig(workers=1, reader_process_bytes=None))
        analysis.feed_inputs([str(path)])
        return render_json(analysis.report(None)), analysis.seq

    fast, fast_seq = scan()
    monkeypatch.setattr(RecordReader, "_quiet_line", lambda self, data, start, end, source: False)
    read, read_seq = scan()
    assert fast == read and fast_seq == read_seq
