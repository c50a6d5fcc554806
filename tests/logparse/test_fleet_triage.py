"""`fleet` as a triage page: on an 80-column terminal every job keeps a name of its own (columns go
before names are cut), a job counter shows while the jobs run, `--reports DIR` writes each job's own
report linked from its row, and Markdown groups the jobs by root cause with their counts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from logparse.process import EXIT_FAILURE_FOUND
from tests.conftest import FIXTURES, SAMPLES, run_cli, sample_logs
from tests.logparse.test_terminal import drain, open_pty, screen_lines

CLI = [sys.executable, "-m", "logparse"]


@pytest.fixture
def same_named_jobs(tmp_path: Path) -> list[str]:
    """Jobs whose file names end alike, in folders that differ: three `…xception.log` on the left cut."""
    jobs = []
    for run in ("run-a", "run-b", "run-c"):
        folder = tmp_path / "experiments" / "2024-06-01" / run
        folder.mkdir(parents=True)
        shutil.copy(SAMPLES / "ray-actor-exception.log", folder / "ray-actor-exception.log")
        jobs.append(str(folder / "ray-actor-exception.log"))
    return jobs + [str(p) for p in sample_logs()]


def on_pty(args: list[str], columns: int = 80, stderr_on_pty: bool = False) -> tuple[list[str], str, int]:
    """(stdout's screen lines, stderr raw, exit code), stdout on a pty of `columns`; stderr on it too
    when asked (then stderr's text is in the screen)."""
    master, slave = open_pty(columns)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    p = subprocess.Popen(
        CLI + args,
        stdout=slave,
        stderr=slave if stderr_on_pty else subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    os.close(slave)
    shown = bytearray()
    reader = drain(master, shown)
    code = p.wait(timeout=180)
    reader.join(timeout=10)
    os.close(master)
    err = p.stderr.read().decode() if p.stderr is not None else ""
    raw = shown.decode("utf-8", "replace")
    return screen_lines(raw), raw + err, code


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="pty behaviour checked on Linux")
def test_80_columns_name_every_job_apart_and_drop_columns_before_cutting_names(
    same_named_jobs: list[str],
) -> None:
    lines, _, code = on_pty(["fleet", *same_named_jobs, "--jobs", "2"], columns=80)
    assert code == EXIT_FAILURE_FOUND
    assert max(len(line) for line in lines) <= 79, [line for line in lines if len(line) > 79]
    assert lines[1].startswith("(left out to fit: conf., step")  # what went, said once
    header = next(i for i, line in enumerate(lines) if line.startswith("job "))
    rows = [line for line in lines[header + 1 :] if line and not line.startswith(" ")]
    rows = rows[: len(same_named_jobs)]
    names = [row.split("  ")[0] for row in rows]
    assert names[:3] == [f"run-{x}/ray-actor-exception.log" for x in "abc"]
    # a sample named like the runs' files is told apart by its folder; the others by their name alone
    assert names[3:] == [
        f"samples/{p.name}" if p.name == "ray-actor-exception.log" else p.name for p in sample_logs()
    ]
    assert len(set(names)) == len(names) and not any("…" in n for n in names)
    assert "root cause" in lines[header] and "status" in lines[header]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="pty behaviour checked on Linux")
def test_a_job_counter_shows_while_the_jobs_run_and_is_wiped_before_the_summary() -> None:
    jobs = [str(p) for p in sample_logs()]
    lines, raw, code = on_pty(["fleet", *jobs, "--jobs", "1"], columns=100, stderr_on_pty=True)
    assert code == EXIT_FAILURE_FOUND
    counts = [int(m.group(1)) for m in re.finditer(rf"verl-logscan: (\d+) of {len(jobs)} job\(s\) done", raw)]
    assert counts[0] == 0 and counts[-1] == len(jobs) and counts == sorted(counts)
    assert lines[0].startswith("fleet: ")  # the counter left nothing behind on the summary's line
    assert not [line for line in lines if "job(s) done" in line]


@pytest.mark.slow
def test_no_counter_when_stderr_is_not_a_terminal() -> None:
    r = subprocess.run(CLI + ["fleet", str(sample_logs()[0])], capture_output=True, text=True, timeout=120)
    assert "job(s) done" not in r.stderr


@pytest.mark.slow
def test_reports_dir_writes_each_jobs_report_and_every_row_links_to_it(
    tmp_path: Path, same_named_jobs: list[str]
) -> None:
    out = tmp_path / "summary" / "fleet.html"
    out.parent.mkdir()
    reports = tmp_path / "reports"
    r = run_cli(["fleet", *same_named_jobs, "-o", str(out), "--reports", str(reports)])
    assert r.exit_code == EXIT_FAILURE_FOUND, r.output
    page = out.read_text()
    links = re.findall(r'<a href="([^"]+)">report</a>', page)
    assert len(links) == len(same_named_jobs)
    targets = [(out.parent / urllib.parse.unquote(href)).resolve() for href in links]
    assert len(set(targets)) == len(targets) and all(t.parent == reports.resolve() for t in targets)
    # each is the job's own report, the same as scanning the job alone
    for job in (same_named_jobs[0], same_named_jobs[-1]):
        name = Path(job).parent.name + "__" if "experiments" in job else ""
        own = reports / f"{name}{Path(job).name.removesuffix('.log')}.html"
        alone = run_cli(["scan", job, "--format", "html"]).stdout
        assert own.read_text() == alone
    # JSON names them too; Markdown links them relative to where it is written
    data = json.loads(
        run_cli(["fleet", *same_named_jobs, "--format", "json", "--reports", str(reports)]).stdout
    )
    assert all(Path(row["report"]).name.endswith(".html") for row in data["jobs"])
    md = tmp_path / "fleet.md"
    run_cli(["fleet", *same_named_jobs[:2], "-o", str(md), "--reports", str(reports)])
    assert "[report](./reports/run-a__ray-actor-exception.html)" in md.read_text()


def test_without_reports_the_machine_formats_keep_their_columns() -> None:
    data = json.loads(run_cli(["fleet", str(sample_logs()[0]), "--format", "json"]).stdout)
    assert "report" not in data["jobs"][0]
    csv = run_cli(["fleet", str(sample_logs()[0]), "--format", "csv"]).stdout
    assert csv.splitlines()[0].split(",")[-1] == "message"


@pytest.mark.slow
def test_markdown_groups_the_jobs_by_root_cause_with_their_counts(same_named_jobs: list[str]) -> None:
    extra = [str(FIXTURES / "cascades" / "torchrun-oom-watchdog.log"), "/nonexistent/job.log"]
    md = run_cli(["fleet", *same_named_jobs, *extra, "--format", "md"]).stdout
    headings = re.findall(r"^### (.+)$", md, re.MULTILINE)
    assert headings[0] == "cuda-oom: 5 jobs"  # the most jobs first
    assert "healthy: 2 jobs" in headings and "could not be read: 1 job" in headings
    assert headings[-1] == "Failed jobs by stage"
    section = md.split("### cuda-oom: 5 jobs\n", 1)[1].split("\n### ", 1)[0]
    assert section.count("`cuda-oom`") == 5
