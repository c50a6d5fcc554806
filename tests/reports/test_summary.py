"""The terminal summary: at most 25 lines whatever the report, coloured only when asked (or on a
terminal), and with -o it tells where the full report went."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from logparse.model import Evidence, FindingView, ReportStatus
from reports import render
from reports.render import SUMMARY_MAX_LINES
from tests.conftest import run_cli, sample_logs
from tests.reports.test_html import handmade_report
from tests.reports.test_markdown import _distinct_errors_log


@pytest.mark.parametrize("sample", sample_logs(), ids=lambda p: p.stem)
def test_sample_summary_is_short_and_plain_when_piped(sample: Path) -> None:
    result = run_cli(["scan", str(sample)])  # CliRunner's stdout is no terminal
    assert result.exit_code in (0, 1)
    out = result.stdout
    assert "\x1b[" not in out
    assert len(out.splitlines()) <= SUMMARY_MAX_LINES
    first = out.splitlines()[0]
    assert first.startswith("FAILED" if result.exit_code == 1 else "HEALTHY")


def test_summary_of_a_huge_report_stays_within_25_lines() -> None:
    base = handmade_report(evil="line one\nline two\r\n" + "y" * 10_000)
    many = tuple(
        FindingView(
            f"entry-{i}",
            "unknown",
            f"title {i}",
            "symptom",
            i + 1,
            tuple(range(i % 64)),
            (),
            Evidence("job.log", i + 1, "z" * 1000),
        )
        for i in range(10_000)
    )
    report = dataclasses.replace(
        base, symptoms=many, findings=many, notes=tuple(f"note {i}\nwith a newline" for i in range(500))
    )
    text = render(report, "text")
    lines = text.splitlines()
    assert len(lines) <= SUMMARY_MAX_LINES
    assert all(len(line) < 400 for line in lines)  # long fields are clipped, newlines flattened
    assert "+9996 more" in text and "more note(s) in the full report" in text
    # what a reader needs first is all there
    assert lines[0].startswith("FAILED  numerical-instability")
    assert any(line.strip().startswith("at       job.log:120") for line in lines)
    assert any("actor-update, step 6 of 10 (failure after step 5)" in line for line in lines)
    assert any(line.strip().startswith("fix      Lower `actor_rollout_ref.actor.optim.lr`") for line in lines)
    assert any(line.strip().startswith("metrics  ") and "nan-inf" in line for line in lines)


@pytest.mark.slow
def test_summary_of_ten_thousand_errors(tmp_path: Path) -> None:
    log = _distinct_errors_log(tmp_path / "many.log")
    out = run_cli(["scan", str(log)]).stdout
    assert len(out.splitlines()) <= SUMMARY_MAX_LINES


def test_colour_on_request_only(tmp_path: Path) -> None:
    sample = sample_logs()[0]
    coloured = run_cli(["scan", str(sample), "--color"]).stdout
    assert "\x1b[1m\x1b[31mFAILED\x1b[0m" in coloured or "\x1b[1m\x1b[32mHEALTHY\x1b[0m" in coloured
    assert "\x1b[" not in run_cli(["scan", str(sample), "--no-color"]).stdout


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_output_file_gets_the_report_and_stderr_the_summary(tmp_path: Path, fmt: str) -> None:
    sample = next(p for p in sample_logs() if p.stem == "ray-actor-exception")
    out = tmp_path / f"report.{fmt}"
    result = run_cli(["scan", str(sample), "--format", fmt, "-o", str(out)])
    assert result.exit_code == 1
    assert result.stdout == ""
    err = result.stderr
    assert err.startswith("FAILED  cuda-oom")
    assert f"full report written to {out}" in err
    assert len(err.splitlines()) <= SUMMARY_MAX_LINES
    assert "\x1b[" not in err  # stderr is no terminal here
    assert out.read_text().strip()


def test_healthy_summary_shows_progress() -> None:
    report = dataclasses.replace(
        handmade_report(), status=ReportStatus.HEALTHY, root_cause=None, symptoms=(), findings=()
    )
    text = render(report, "text")
    assert text.startswith("HEALTHY  no failure found in 200 lines")
    assert "progress training, step 6 of 10" in text


def test_the_failing_step_agrees_with_the_error_line() -> None:
    """torchrun-rank-exception: the loss is NaN 'at step 5' after the log's `step:4` line. The report
    says the failure came in step 5, after step 4, in every format (not 'step 4')."""
    import json

    from tests.conftest import SAMPLES

    sample = str(SAMPLES / "torchrun-rank-exception.log")
    report = json.loads(run_cli(["scan", sample, "--format", "json"]).stdout)
    assert "at step 5" in report["root_cause"]["message"]
    assert report["root_cause"]["step"] == 5
    assert (report["progress"]["last_step"], report["progress"]["failure_step"]) == (4, 4)
    text = run_cli(["scan", sample]).stdout
    assert "stage    training, in step 5 (after step 4)" in text
    assert "| Step | in step 5 (after step 4) |" in run_cli(["scan", sample, "--format", "md"]).stdout


def test_a_failure_before_the_loop_or_after_it_has_no_failing_step(tmp_path: Path) -> None:
    import json

    before = tmp_path / "before.log"
    before.write_text(
        'Traceback (most recent call last):\n  File "/w/train.py", line 1, in <module>\nValueError: bad\n'
    )
    assert json.loads(run_cli(["scan", str(before), "--format", "json"]).stdout)["root_cause"]["step"] is None
    after = tmp_path / "after.log"  # the bar reached its total: the loop was over
    after.write_text(
        "(TaskRunner pid=1) \rTraining Progress: 100%|##########| 3/3 [00:03<00:00,  1.00s/it]\n"
        "(TaskRunner pid=1) step:3 - actor/pg_loss:0.1\n"
        'Traceback (most recent call last):\n  File "/w/train.py", line 1, in <module>\nValueError: bad\n'
    )
    report = json.loads(run_cli(["scan", str(after), "--format", "json"]).stdout)
    assert report["root_cause"] is not None and report["root_cause"]["step"] is None
