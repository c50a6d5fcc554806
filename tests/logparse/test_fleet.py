"""`verl-logscan fleet`: each job analysed on its own, in parallel (process pool or Ray tasks), with the
same verdict as scanning it alone; the summary in every format; exit codes."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from logparse.fleet import Engine, analyse_fleet, job_row
from logparse.pipeline import analyse
from logparse.process import EXIT_ERROR, EXIT_FAILURE_FOUND, EXIT_HEALTHY
from patterns import load_catalog
from tests.conftest import FIXTURES, run_cli, sample_logs

LOGDIR = FIXTURES / "torchrun" / "logdir"  # a job folder: console.log and per-rank stdout/stderr/error.json
HEALTHY = "(TaskRunner pid=1) step:1 - actor/pg_loss:np.float64(0.1)\n(TaskRunner pid=1) step:2 - x:1\n"
MARKER_CATALOG = """\
- id: fleet-marker-failure
  title: Fleet marker failure
  category: data-error
  role: cause
  severity: error
  priority: 99
  keywords: ['FleetMarkerError']
  patterns:
    - 'FleetMarkerError: (?P<what>.+)'
  message: 'marker: {what}'
  remediation:
    summary: A marker line for the fleet tests.
    why: Only the extra catalog knows it.
    fix: ['Nothing to fix.']
  examples:
    match: ['[rank1]: FleetMarkerError: bad row 7']
    no_match:
      - line: 'FleetMarkerErrorHandler installed'
        why: not an error
"""


def jobs() -> list[str]:
    return [str(p) for p in sample_logs()] + [str(LOGDIR)]


def expected_row(job: str, catalog) -> dict[str, Any]:
    """What scanning the job alone says, read straight off its Report (not through logparse.fleet)."""
    report = analyse([job], catalog)
    rc = report.root_cause
    return {
        "job": job,
        "status": report.status,
        "root_cause": rc.id if rc else None,
        "category": rc.category if rc else None,
        "stage": rc.stage if rc else None,
        "last_step": report.progress.last_step if report.progress else None,
        "confidence": rc.confidence if rc else None,
        "error_source": shown_from_cwd(rc.error_line.source) if rc and rc.error_line else None,
        "error_line": rc.error_line.line if rc and rc.error_line else None,
        "message": rc.summary if rc and rc.id == "unknown" else None,
    }


def shown_from_cwd(path: str) -> str:
    """A row's `error at`: relative to where the command ran when the log is under it (these tests run
    from the repository), else absolute."""
    inside = Path(path).resolve().is_relative_to(Path.cwd())
    return os.path.relpath(path) if inside else str(Path(path).resolve())


@pytest.fixture(scope="module")
def expected() -> list[dict[str, Any]]:
    catalog = load_catalog([])
    return [expected_row(job, catalog) for job in jobs()]


def fleet_json(args: list[str], exit_code: int = EXIT_FAILURE_FOUND) -> dict[str, Any]:
    r = run_cli(["fleet", *args, "--format", "json"])
    assert r.exit_code == exit_code, r.output + r.stderr
    return json.loads(r.stdout)


def test_samples_cover_both_verdicts_and_a_folder(expected: list[dict[str, Any]]) -> None:
    statuses = {row["status"] for row in expected}
    assert statuses == {"healthy", "failed"}
    folder = expected[-1]
    assert folder["job"] == str(LOGDIR) and folder["error_source"].startswith(
        shown_from_cwd(str(LOGDIR)) + os.sep
    )


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
def test_local_engine_rows_equal_scanning_each_job_alone(
    expected: list[dict[str, Any]], workers: str
) -> None:
    data = fleet_json([*jobs(), "--jobs", workers, "--engine", "local"])
    assert data["schema_version"] == 1
    assert data["jobs"] == expected


@pytest.mark.slow
def test_counts_per_status_category_and_stage(expected: list[dict[str, Any]]) -> None:
    data = fleet_json([*jobs(), "--jobs", "2"])
    failed = [row for row in expected if row["status"] == "failed"]
    assert data["counts"]["status"] == {
        "failed": len(failed),
        "healthy": len(expected) - len(failed),
        "error": 0,
        "stalled": 0,  # (a status of its own since issue 23: a job that stopped making progress)
    }
    assert sum(data["counts"]["category"].values()) == len(failed)
    assert sum(data["counts"]["stage"].values()) == len(failed)
    for row in failed:
        assert data["counts"]["category"][row["category"]] >= 1


@pytest.mark.slow
def test_library_rows_equal_job_row_of_each_scan() -> None:
    catalog = load_catalog([])
    summary = analyse_fleet(jobs(), catalog, (), engine=Engine.LOCAL, workers=2)
    assert list(summary.jobs) == [job_row(job, analyse([job], catalog)) for job in jobs()]


@pytest.mark.slow  # fleet on Ray
def test_ray_engine_rows_equal_scanning_each_job_alone(expected: list[dict[str, Any]]) -> None:
    if os.environ.get("CI") == "true":
        import ray  # under CI the Ray engine must be tested: the `test` extra installs ray
    else:
        ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        data = fleet_json([*jobs(), "--engine", "ray"])
    finally:
        ray.shutdown()
    assert data["jobs"] == expected
    assert data == fleet_json([*jobs(), "--engine", "local", "--jobs", "2"])


@pytest.mark.slow  # fleet on Ray
def test_ray_engine_starts_its_own_ray_with_an_extra_catalog(tmp_path: Path) -> None:
    if os.environ.get("CI") != "true":
        pytest.importorskip("ray")
    (tmp_path / "marker.yaml").write_text(MARKER_CATALOG)
    (tmp_path / "a.log").write_text(HEALTHY + "[rank1]: FleetMarkerError: bad row 7\n")
    data = fleet_json(
        [
            str(tmp_path / "a.log"),
            "--engine",
            "ray",
            "--jobs",
            "2",
            "--catalog",
            str(tmp_path / "marker.yaml"),
        ]
    )
    assert data["jobs"][0]["root_cause"] == "fleet-marker-failure"


def test_workers_load_the_extra_catalog(tmp_path: Path) -> None:
    (tmp_path / "marker.yaml").write_text(MARKER_CATALOG)
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.log").write_text(HEALTHY + "[rank1]: FleetMarkerError: bad row 7\n")
    logs = [str(tmp_path / f"{n}.log") for n in ("a", "b", "c")]
    data = fleet_json([*logs, "--jobs", "2", "--catalog", str(tmp_path / "marker.yaml")])
    assert [row["root_cause"] for row in data["jobs"]] == ["fleet-marker-failure"] * 3
    assert data["jobs"][0]["last_step"] == 2


def test_engine_ray_without_ray_installed_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    r = run_cli(["fleet", str(sample_logs()[0]), "--engine", "ray"])
    assert r.exit_code == EXIT_ERROR
    assert "pip install 'verl-logscan[ray]'" in r.stderr


@pytest.mark.slow
def test_csv_parses_one_row_per_job(expected: list[dict[str, Any]]) -> None:
    r = run_cli(["fleet", *jobs(), "--format", "csv", "--jobs", "2"])
    assert r.exit_code == EXIT_FAILURE_FOUND
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert [row["job"] for row in rows] == jobs()
    for row, exp in zip(rows, expected, strict=True):
        assert row["status"] == exp["status"]
        assert row["root_cause"] == (exp["root_cause"] or "")
        assert row["error_line"] == ("" if exp["error_line"] is None else str(exp["error_line"]))
        assert row["last_step"] == ("" if exp["last_step"] is None else str(exp["last_step"]))


def md_tables(text: str) -> list[list[list[str]]]:
    """Each table as rows of cell texts (header first), parsed as GitHub would (tables on)."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    tables: list[list[list[str]]] = []
    row: list[str] | None = None
    for i, tok in enumerate(tokens):
        if tok.type == "table_open":
            tables.append([])
        elif tok.type == "tr_open":
            row = []
        elif tok.type in ("th_open", "td_open"):
            row.append(tokens[i + 1].content)
        elif tok.type == "tr_close":
            tables[-1].append(row)
    return tables


@pytest.mark.slow
def test_md_tables_render(tmp_path: Path) -> None:
    odd = tmp_path / "a|b `x` <i>.log"  # a cell must survive a pipe, backticks and HTML in a path
    odd.write_text(HEALTHY)
    r = run_cli(["fleet", *jobs(), str(odd), "--format", "md"])
    assert r.exit_code == EXIT_FAILURE_FOUND
    tables = md_tables(r.stdout)
    # (issue 24: the jobs are grouped, a table per root-cause category and one for the healthy jobs,
    # where there was one table of every job and one of counts per category; then the stages)
    *job_tables, stages = tables
    assert stages[0] == ["stage", "jobs"]
    assert [t[0][:2] for t in job_tables[:-1]] == [["job", "root cause"]] * (len(job_tables) - 1)
    assert job_tables[-1][0] == ["job", "last step"]  # the healthy jobs
    rows = [row for t in job_tables for row in t[1:]]
    assert len(rows) == len(jobs()) + 1
    assert all(len(row) == len(t[0]) for t in job_tables for row in t[1:])
    assert str(odd) in job_tables[-1][-1][0]
    assert "<i>" not in MarkdownIt("commonmark").enable("table").render(r.stdout)


@pytest.mark.slow
def test_text_and_html(tmp_path: Path) -> None:
    r = run_cli(["fleet", *jobs(), "--jobs", "2"])
    assert r.exit_code == EXIT_FAILURE_FOUND
    assert r.stdout.startswith(f"fleet: {len(jobs())} job(s): ")
    assert "failed jobs by category" in r.stdout and "failed jobs by stage" in r.stdout
    odd = tmp_path / "<script>.log"
    odd.write_text(HEALTHY)
    r = run_cli(["fleet", str(odd), "--format", "html"])
    assert r.exit_code == EXIT_HEALTHY
    assert r.stdout.startswith("<!DOCTYPE html>") and "<table" in r.stdout
    assert "<script>" not in r.stdout and "&lt;script&gt;" in r.stdout


def test_missing_job_is_an_error_row_and_exit_codes(tmp_path: Path) -> None:
    ok = tmp_path / "ok.log"
    ok.write_text(HEALTHY)
    missing = str(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_cli(["fleet", str(ok), missing, str(empty), "--format", "json"])
    assert r.exit_code == EXIT_ERROR  # nothing failed, but not every job could be read
    data = json.loads(r.stdout)
    assert [row["status"] for row in data["jobs"]] == ["healthy", "error", "error"]
    assert "no such file or folder" in data["jobs"][1]["message"]
    assert "no log files" in data["jobs"][2]["message"]
    assert "no such file or folder" in r.stderr
    # a failure found outranks unreadable jobs: exit 1, the error rows still listed
    data = fleet_json([str(sample_logs()[0]), missing], exit_code=EXIT_FAILURE_FOUND)
    assert [row["status"] for row in data["jobs"]] == ["failed", "error"]
    assert run_cli(["fleet", str(ok)]).exit_code == EXIT_HEALTHY


def test_duplicates_analysed_once_and_order_kept(tmp_path: Path) -> None:
    a, b = str(sample_logs()[1]), str(sample_logs()[0])
    data = fleet_json([a, b, a, "--jobs", "2"])
    assert [row["job"] for row in data["jobs"]] == [a, b]


@pytest.mark.slow
def test_output_file_written_and_never_an_input(tmp_path: Path) -> None:
    out = tmp_path / "fleet.csv"
    r = run_cli(["fleet", *jobs(), "--format", "csv", "-o", str(out)])
    assert r.exit_code == EXIT_FAILURE_FOUND
    assert r.stdout == "" and "summary written to" in r.stderr
    assert len(list(csv.DictReader(out.open()))) == len(jobs())
    assert [p.name for p in tmp_path.iterdir()] == ["fleet.csv"]  # no temporary file left behind
    log = tmp_path / "job.log"
    log.write_text(HEALTHY)
    r = run_cli(["fleet", str(tmp_path), "-o", str(log)])
    assert r.exit_code == EXIT_ERROR and "refusing to overwrite" in r.stderr
    assert log.read_text() == HEALTHY


def test_usage_errors() -> None:
    assert run_cli(["fleet"]).exit_code == EXIT_ERROR  # no PATH
    r = run_cli(["fleet", "-"])
    assert r.exit_code == EXIT_ERROR and "stdin" in r.stderr
    r = run_cli(["fleet", str(sample_logs()[0]), "--address", "auto"])
    assert r.exit_code == EXIT_ERROR and "--engine ray" in r.stderr
    assert run_cli(["fleet", str(sample_logs()[0]), "--jobs", "0"]).exit_code == EXIT_ERROR
