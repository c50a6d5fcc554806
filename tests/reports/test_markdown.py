"""The Markdown report parses as intended (tables, <details>, code blocks), keeps log text inert, and
fits a GitHub issue body whatever the log."""

from __future__ import annotations

import dataclasses
import random
import string
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from logparse.model import Evidence, FindingView, InputInfo
from reports import render
from reports.render import GITHUB_BODY_LIMIT
from tests.conftest import run_cli, sample_logs
from tests.reports.test_html import EVIL, handmade_report

MD = MarkdownIt("commonmark").enable("table")


def token_types(text: str) -> list[str]:
    return [t.type for t in MD.parse(text)]


@pytest.mark.parametrize("sample", sample_logs(), ids=lambda p: p.stem)
def test_sample_markdown_structure(sample: Path) -> None:
    text = run_cli(["scan", str(sample), "--format", "md"]).stdout
    tokens = MD.parse(text)
    types = [t.type for t in tokens]
    assert "table_open" in types  # at least the inputs table
    html = MD.render(text)
    assert "<script" not in html
    if text.startswith("## verl-logscan: job failed"):
        fences = [t for t in tokens if t.type == "fence"]
        assert fences and fences[0].content.splitlines()[-1]  # the evidence block
        if "<details>" in text:
            blocks = [t.content for t in tokens if t.type == "html_block"]
            assert any(b.startswith("<details>") for b in blocks) and any("</details>" in b for b in blocks)
            assert html.count("<details>") == html.count("</details>")
    assert len(text) < GITHUB_BODY_LIMIT


def test_handmade_markdown_sections() -> None:
    text = render(handmade_report(), "md")
    for heading in (
        "### Error line",
        "### What to do",
        "### Why this cause",
        "### Progress",
        "### Environment",
        "### Symptoms",
        "**Metric anomalies:**",
        "<details><summary>All findings (2)</summary>",
    ):
        assert heading in text, heading
    assert "| Last step | 6 of 10 |" in text and "| Failure after step | 5 |" in text
    assert "| Seconds per step | 12.5 |" in text
    assert "| 0-3, 5-7 |" in text
    assert "> /workspace/train.py:10 in main" in text  # the innermost user frame, marked
    html = MD.render(text)
    assert html.count("<table>") == 6  # verdict, progress, environment, symptoms, findings, inputs
    # traceback, findings, and the environment (folded since issue 24: about 28 rows of config)
    assert html.count("<details>") == 3 and html.count("</details>") == 3


def test_empty_sections_render_nothing() -> None:
    report = dataclasses.replace(handmade_report(), progress=None, metrics=None, environment={})
    text = render(report, "md")
    assert "### Progress" not in text and "### Environment" not in text and "Metric anomalies" not in text


def test_log_text_stays_text_in_markdown() -> None:
    text = render(handmade_report(EVIL), "md")
    tokens = MD.parse(text)
    html = MD.render(text)
    # no tag from the log becomes markup: the only raw HTML is ours (<details>/<summary>)
    assert "<script>" not in html and "<b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<details>") == html.count("</details>") == 3  # traceback, environment, findings
    # backticks inside log lines don't end a code block: each fence holds whole lines, the evidence
    # fence has all four evidence lines
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) == 2  # the error line with the lines before it (all the evidence here), traceback
    evidence = fences[0].content.splitlines()
    assert len(evidence) == 4 and all("```python" in line for line in evidence[:1] + evidence[2:])
    assert "<script>alert(1)</script>" in fences[0].content  # verbatim inside the code block
    # a `|` in log text does not split a table cell: the symptom row still ends with its first-seen cell
    assert "<td><code>job.log:130</code></td>\n</tr>" in html


def _distinct_errors_log(path: Path, n: int = 10_000) -> Path:
    """n different errors: unrecognised exception tracebacks and catalog hits, each message distinct."""
    rng = random.Random(7)
    lines = []
    for i in range(n):
        word = "".join(rng.choice(string.ascii_lowercase) for _ in range(12))
        if i % 2:
            lines += [
                "Traceback (most recent call last):",
                f'  File "/workspace/job/mod_{word}.py", line {i + 1}, in handler_{word}',
                f"    run_{word}()",
                f"{word.capitalize()}Error: field {word} is not valid for stage {word[::-1]} ```",
            ]
        else:
            lines.append(f"[rank{i % 8}]: ModuleNotFoundError: No module named 'pkg_{word}'")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_ten_thousand_distinct_errors_fit_a_github_issue(tmp_path: Path) -> None:
    log = _distinct_errors_log(tmp_path / "many.log")
    result = run_cli(["scan", str(log), "--format", "md"])
    assert result.exit_code == 1
    text = result.stdout
    assert len(text) < GITHUB_BODY_LIMIT
    assert "Trimmed to fit a GitHub issue" in text and "findings rows" in text
    assert "finding row(s) left out to fit a GitHub issue" in text
    html = MD.render(text)
    assert "<table>" in html and html.count("<details>") == html.count("</details>")


def test_every_list_is_trimmed_in_order_when_huge() -> None:
    """Findings go first, then input rows, then symptoms; long lines are clipped, not dropped."""
    base = handmade_report()
    rc = base.root_cause
    assert rc is not None and rc.traceback is not None
    big = "x" * 5_000  # lines are clipped, not dropped
    evidence = tuple(Evidence("job.log", i, f"context line {i} {big}") for i in range(1, 60)) + (
        rc.error_line,
    )
    frames = tuple((f"/workspace/f{i}.py", i, f"fn{i}") for i in range(3_000)) + (
        rc.traceback.innermost_user_frame,
    )
    findings = tuple(
        FindingView(
            f"entry-{i}",
            "unknown",
            f"title {i}",
            "cause",
            1,
            (i,),
            (),
            Evidence("job.log", i + 1, f"error {i}"),
        )
        for i in range(5_000)
    )
    report = dataclasses.replace(
        base,
        findings=findings,
        symptoms=findings[:3_000],
        root_cause=dataclasses.replace(
            rc, evidence=evidence, traceback=dataclasses.replace(rc.traceback, frames=frames)
        ),
        inputs=tuple(InputInfo(f"logs/rank{i}.log", 10, 100) for i in range(2_000)),
    )
    text = render(report, "md")
    assert len(text) < GITHUB_BODY_LIMIT
    note = next(line for line in text.splitlines() if line.startswith("> Trimmed to fit"))
    assert "5,000 of 5,000 findings rows" in note
    assert "1,999 of 2,000 input rows" in note
    assert "of 3,000 symptom rows" in note
    assert "2,901 of 3,001 traceback frames" in note  # capped at 100 whatever the budget
    order = [note.index(what) for what in ("findings rows", "input rows", "symptom rows", "evidence lines")]
    assert order == sorted(order)
    assert "[" in text and "more characters]" in text  # 5,000-character lines were clipped
    # what's kept still reads: the error line and the innermost frame are always there
    assert "> 120: RuntimeError: loss is nan" in text  # first, with the lines before it
    assert "\n120: RuntimeError: loss is nan" in text  # and in the (trimmed) folded evidence
    assert "> /workspace/train.py:10 in main" in text
    html = MD.render(text)
    assert html.count("<details>") == html.count("</details>")


def test_small_reports_are_not_trimmed() -> None:
    text = render(handmade_report(), "md")
    assert "Trimmed to fit" not in text and "left out" not in text
