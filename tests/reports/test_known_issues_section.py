"""The Known issues section in every format: matches first and fixed-in-your-version last, and its
text (a team's file, the job's version as the log prints it) is hostile: escaped for each format,
redacted like every other section."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from tests.conftest import run_cli

MD = MarkdownIt("gfm-like")
PAYLOAD = "<script>alert(1)</script> @evilmention #1234 [x](https://evil.example/) \x1b[31mred"
TEAM = """\
- id: team-hostile
  project: our-infra
  url: https://tracker.example.internal/browse/RL-9
  title: "{p}"
  symptom:
    patterns: ['EngineCore encountered an issue']
  affected: {{vllm: '>=0.8.0,<0.9'}}
  fixed_in: {{text: "{p}"}}
  workaround: "export TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789 {p}"
  source_quote: "{p}"
  examples:
    match: ['ERROR 05-02 10:00:00 [core.py:343] EngineCore encountered an issue. See stack trace (above) for the root cause.']
    no_match: [{{line: 'INFO 05-02 10:00:00 [core.py:58] Initializing a V1 LLM engine (v0.8.2)', why: start-up}}]
"""
LOG = """\
INFO 05-02 09:58:00 [core.py:58] Initializing a V1 LLM engine (v0.8.2<img/src=x>) with config: model='/models/m'
ERROR 05-02 10:00:00 [core.py:343] EngineCore encountered an issue. See stack trace (above) for the root cause.
"""


@pytest.fixture(scope="module")
def args(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("hostile")
    team = d / "team.yaml"
    # (YAML refuses a raw ESC in a file; a double-quoted scalar's \\e is one)
    team.write_text(TEAM.format(p=PAYLOAD.replace("\x1b", "\\e")), encoding="utf-8")
    log = d / "job.log"
    log.write_text(LOG, encoding="utf-8")
    return [str(log), "--known-issues", str(team)]


def test_json_has_the_section_and_no_control_characters(args: list[str]) -> None:
    out = run_cli(["scan", *args, "--format", "json"]).output
    (k,) = json.loads(out)["known_issues"]
    assert k["verdict"] == "may-match"  # the version the log prints is no version
    assert "\x1b" not in out
    assert "hf_abcdefghijklmnopqrstuvwxyz0123456789" not in out  # redacted like every section


def test_markdown_makes_nothing_live(args: list[str]) -> None:
    md = run_cli(["scan", *args, "--format", "md"]).output
    assert "### Known upstream issues" in md and "\x1b" not in md
    html = MD.render(md)
    assert "<script>" not in html and "<img" not in html and 'href="https://evil' not in html
    assert "@evilmention" not in md  # the mention is broken by a joiner
    assert "<https://tracker.example.internal/browse/RL-9>" in md  # the entry's own link stays


def test_html_escapes_the_section(args: list[str], tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    run_cli(["scan", *args, "-o", str(page)])
    html = page.read_text(encoding="utf-8")
    section = html.split('<section id="known-issues">', 1)[1].split("</section>", 1)[0]
    assert "<script>" not in section and "<img" not in section and "&lt;script&gt;" in section
    assert 'href="https://tracker.example.internal/browse/RL-9"' in section
    assert "evil.example" not in section.split("href=")[1].split(">")[0]


def test_the_terminal_summary_has_no_escape_sequences(args: list[str]) -> None:
    text = run_cli(["scan", *args]).output
    assert "known    may match:" in text and "\x1b" not in text
