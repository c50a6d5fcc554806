"""The Markdown report pasted into a GitHub issue, parsed as GitHub would: no table with an empty header
row, the environment folded behind a one-line summary, a long error line quoted as text that wraps (its
copy in the code block cut, so that no one-line message needs a sideways scroll), and a symptom with no
category of its own says what it is instead of `unknown`."""

from __future__ import annotations

from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from reports.render import MD_FENCE_CHARS
from tests.conftest import FIXTURES, SAMPLES, run_cli, sample_logs

MD = MarkdownIt("commonmark").enable("table")
LOGS = (
    sample_logs() + sorted((FIXTURES / "cascades").glob("*.log")) + sorted((FIXTURES / "verl").glob("*.log"))
)


def markdown(log: Path) -> str:
    result = run_cli(["scan", str(log), "--format", "md"])
    assert result.exit_code in (0, 1), result.output
    return result.stdout


def tables(text: str) -> list[list[list[str]]]:
    """Each table as rows of cell texts (the header row first)."""
    tokens = MD.parse(text)
    out: list[list[list[str]]] = []
    for i, tok in enumerate(tokens):
        if tok.type == "table_open":
            out.append([])
        elif tok.type == "tr_open":
            out[-1].append([])
        elif tok.type in ("th_open", "td_open"):
            out[-1][-1].append(tokens[i + 1].content)
    return out


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_no_table_has_an_empty_header_row(log: Path) -> None:
    for table in tables(markdown(log)):
        assert all(cell.strip() for cell in table[0]), table[0]


def test_the_environment_is_folded_behind_a_summary_of_it() -> None:
    text = markdown(SAMPLES / "ray-actor-exception.log")
    section = text.split("### Environment\n", 1)[1].split("\n### ", 1)[0]
    assert section.lstrip().startswith("<details><summary>28 value(s): python 3.11, verl_era &gt;=0.6, ")
    assert "verl\\_era\\_evidence" in section and section.rstrip().endswith("</details>")
    html = MD.render(text)
    folded = html.split("<details><summary>28 value(s)", 1)[1].split("</details>", 1)[0]
    assert "<table>" in folded and "verl_era_evidence" in folded  # the table is inside the fold


def test_a_long_error_line_is_quoted_as_text_and_cut_in_the_code_block() -> None:
    text = markdown(SAMPLES / "ray-actor-exception.log")
    tokens = MD.parse(text)
    section = text.split("### Error line\n", 1)[1].split("\n### ", 1)[0]
    # the message in full, as a quote: text that wraps on any screen
    quote = MD.render(section).split("<blockquote>", 1)[1].split("</blockquote>", 1)[0]
    assert "CUDA out of memory. Tried to allocate 2.00 GiB." in quote
    assert "to avoid fragmentation" in quote  # the end of the message too
    # the code block's copy of it is cut: no sideways scroll for a one-line message
    fence = next(t for t in tokens if t.type == "fence")
    error = next(line for line in fence.content.splitlines() if line.startswith("> 88: "))
    assert error.endswith("… (in full above)")
    assert len(error) <= len("> 88: ") + MD_FENCE_CHARS + len("… (in full above)")


def test_a_short_error_line_is_shown_once() -> None:
    text = markdown(SAMPLES / "ray-import-error.log")
    section = text.split("### Error line\n", 1)[1].split("\n### ", 1)[0]
    assert "<blockquote>" not in MD.render(section)
    assert "ModuleNotFoundError: No module named 'flash_attn'" in section


def test_a_symptom_of_no_category_says_what_it_is() -> None:
    text = markdown(SAMPLES / "ray-actor-exception.log")
    symptoms = next(t for t in tables(text) if t[0][:2] == ["finding", "category"])
    kinds = {row[0].split("`")[1]: row[1] for row in symptoms[1:]}
    assert kinds["hydra-error-executing-job"] == "wrapper of cuda-oom"  # was `unknown`
    assert "unknown" not in kinds.values()
