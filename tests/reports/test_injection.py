"""Log text is inert in every report (checked with --no-redact: escaping alone, without the help of
redaction masking the e-mail address in the payload): no live Markdown (image, link, autolink, HTML,
@mention, issue reference, bare URL) from a log, no formula in a CSV cell, no escape sequence on the
terminal.

The hostile log is the bundled Ray sample with one payload planted in every field that reaches a
report: the exception message, a config value (quoted in the fix line), a path and a function of a
traceback frame, the Ray actor and task names, an environment version string and a metric key."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from reports.escape import (
    JOINER,
    code_spans,
    csv_cell,
    md_code,
    md_html,
    md_inline,
    md_text,
    neutralise,
    terminal_text,
)
from tests.conftest import SAMPLES, run_cli

PAYLOAD = (
    "` </details><img src=x onerror=alert(1)> ![i](https://evil.example/i.png) [l](https://evil.example/l) "
    "<https://evil.example/a> https://evil.example/b www.evil.example @evilmention #4242 GH-4242 "
    "evil/repo#7 `` ``` "
    "</summary> |x| &#64;evilentity mailto:evil@evil.example"
)
WORD = "</details><img/src/onerror>@evilmention#4242<www.evil.example>"  # no space, for names and paths
# where each payload goes in samples/ray-actor-exception.log
PLANTS = [
    ("Tried to allocate 2.00 GiB.", "Tried to allocate 2.00 GiB. " + PAYLOAD),
    ("'ppo_micro_batch_size_per_gpu': 16,", f"'ppo_micro_batch_size_per_gpu': '16 {PAYLOAD}',"),
    ("/workspace/job/main_ppo.py", f"/workspace/{WORD}/main_ppo.py"),
    ("in _forward_micro_batch", f"in _forward_{WORD}"),
    ("ray::WorkerDict.actor_rollout_update_actor()", "ray::WorkerDict<img>.actor_rollout_update_actor()"),
    ("(TaskRunner pid=11798)\x1b[0m Unhandled error", f"({WORD} pid=11798)\x1b[0m Unhandled error"),
    (
        "Training from scratch",
        f'Training from scratch\n(TaskRunner pid=11798) "transformers_version": "4.51.1 {PAYLOAD}"',
    ),
    (
        "- actor/pg_clipfrac:np.float64(0.0)",
        f"- actor/{WORD}/pg_loss:np.float64(nan) - actor/pg_clipfrac:np.float64(0.0)",
    ),
]
MD = MarkdownIt("commonmark", {"linkify": True}).enable(["table", "linkify"])  # GitHub autolinks bare URLs
OUR_HTML = re.compile(r"</?(?:details|summary)>")
# what GitHub turns into a mention, an issue reference or a link in a text node
LIVE_TEXT = re.compile(
    r"(?<![\w`])@[A-Za-z0-9]|(?<![\w&])#\d|\bGH-\d|\b[a-z]+://|\bwww\.|mailto:", re.IGNORECASE
)


@pytest.fixture(scope="module")
def hostile_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    text = (SAMPLES / "ray-actor-exception.log").read_text()
    for old, new in PLANTS:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path_factory.mktemp("hostile") / "job.log"
    path.write_text(text)
    return path


def test_the_payload_reaches_every_field(hostile_log: Path) -> None:
    report = json.loads(run_cli(["scan", str(hostile_log), "--format", "json", "--no-redact"]).stdout)
    rc = report["root_cause"]
    assert "@evilmention" in rc["message"] and "@evilmention" in rc["remediation"]["job_values"]
    tb = rc["traceback"]
    assert WORD in tb["frames"][-1]["file"] and WORD in tb["frames"][-1]["function"]
    assert tb["task"] == "WorkerDict<img>.actor_rollout_update_actor" and rc["actor"] == "WorkerDict<img>"
    assert PAYLOAD in report["environment"]["transformers"]
    assert any(WORD in a["key"] for a in report["metrics"]["anomalies"])
    assert any(WORD in (f["first"]["text"]) for f in report["findings"])  # the actor's own lines


def _live_constructs(text: str) -> dict[str, list[str]]:
    """What the Markdown makes live: image sources, link targets, raw HTML other than the report's own
    <details>/<summary>, and text that GitHub would turn into a mention, reference or link."""
    found: dict[str, list[str]] = {"image": [], "link": [], "html": [], "text": []}

    def walk(tokens, in_link: bool = False) -> None:
        for t in tokens:
            if t.type == "image":
                found["image"].append(t.attrGet("src") or "")
            elif t.type == "link_open":
                found["link"].append(t.attrGet("href") or "")
                in_link = True
            elif t.type == "link_close":
                in_link = False
            elif t.type in ("html_inline", "html_block"):
                rest = OUR_HTML.sub("", t.content)
                if re.search(r"<[A-Za-z/!?]", rest):
                    found["html"].append(t.content)
            elif t.type == "text" and not in_link and LIVE_TEXT.search(t.content):
                found["text"].append(t.content)
            if t.children:
                walk(t.children, in_link)

    walk(MD.parse(text))
    return found


def test_no_live_markdown_from_log_text(hostile_log: Path) -> None:
    clean = run_cli(["scan", str(SAMPLES / "ray-actor-exception.log"), "--format", "md"]).stdout
    hostile = run_cli(["scan", str(hostile_log), "--format", "md", "--no-redact"]).stdout
    assert hostile.count("evilmention") >= 6  # the payload is in the report, as text
    baseline = _live_constructs(clean)
    found = _live_constructs(hostile)
    assert found["image"] == []
    assert set(found["link"]) <= set(baseline["link"])  # only the catalog's references
    assert not any("evil" in href for href in found["link"])
    assert found["html"] == [] and baseline["html"] == []
    assert found["text"] == baseline["text"] == []
    html = MD.render(hostile)
    assert "<img" not in html and 'href="https://evil' not in html
    # only the report's own folds (evidence, traceback, library frames), each closed: none from the log
    clean_html = MD.render(clean)
    assert html.count("<details>") == html.count("</details>") == clean_html.count("</details>")
    assert "&lt;/details&gt;" in html  # the planted tag, as text


def test_the_fix_line_quotes_job_values_as_code_that_cannot_be_closed(hostile_log: Path) -> None:
    hostile = run_cli(["scan", str(hostile_log), "--format", "md", "--no-redact"]).stdout
    line = next(x for x in hostile.splitlines() if x.startswith("This job sets"))
    tokens = MD.parseInline(line)[0].children
    codes = [t.content for t in tokens if t.type == "code_inline"]
    assert any(" ".join(PAYLOAD.split()) in c for c in codes)  # the whole value, inside one span
    assert not [t for t in tokens if t.type in ("image", "link_open", "html_inline")]


def test_issue_references_in_the_root_cause_line_are_not_live(tmp_path: Path) -> None:
    """GitHub links `GH-1234`, `#1234` and `owner/repo#1` to issues: in the Markdown they stay text."""
    log = tmp_path / "job.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        '  File "/w/train.py", line 3, in main\n'
        "RuntimeError: fixed upstream in GH-4242 and gh-77, see #1234 and volcengine/verl#1\n"
    )
    text = run_cli(["scan", str(log), "--format", "md", "--no-redact"]).stdout
    line = next(x for x in text.splitlines() if x.startswith("**Root cause:**"))
    assert f"GH{JOINER}-4242" in line and f"gh{JOINER}-77" in line
    assert f"\\#{JOINER}1234" in line and f"volcengine/verl\\#{JOINER}1" in line
    assert _live_constructs(text)["text"] == []


def test_html_autoescapes_every_template() -> None:
    from reports.common import jinja_env

    env = jinja_env(True)
    assert env.autoescape is True
    assert env.from_string("{{ x }}").render(x='<img src="x">') == "&lt;img src=&#34;x&#34;&gt;"


def test_html_report_has_no_tag_or_attribute_from_the_log(hostile_log: Path) -> None:
    from tests.reports.test_html import tags

    page = run_cli(["scan", str(hostile_log), "--format", "html", "--no-redact"]).stdout
    t = tags(page)
    assert "img" not in t.starts and t.starts.get("script") == 1  # the page's own script only
    assert not any("onerror" in attrs for _, attrs in t.attrs)
    assert not any("evil" in (attrs.get("href") or "") for _, attrs in t.attrs)


# -- the escaping helpers on their own -----------------------------------------------------------------
@pytest.mark.parametrize(
    "text", [PAYLOAD, WORD, "a\n\nb", "``` x", "`", "| a | b |", "-- ---", "&amp; &#x40;x"]
)
def test_markdown_helpers_keep_any_text_inert(text: str) -> None:
    for rendered in (md_text(text), md_code(text), md_inline(text), f"`{md_inline('`' + text + '`')}`"):
        assert not any(_live_constructs(rendered).values()), rendered
        assert "\n" not in rendered
    # code keeps the text as it is (whitespace collapsed)
    spans = [t for t in MD.parseInline(md_code(text))[0].children if t.type == "code_inline"]
    assert len(spans) == 1 and spans[0].content.strip() == " ".join(text.split()).strip()


# the regex code_spans replaced (superlinear on runs of many lengths): the reference
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, database=None)
@given(st.lists(st.sampled_from(["`", "``", "```", "a", " ", "\n"]), max_size=16).map("".join))
def test_code_spans_pair_backtick_runs_as_the_code_span_pattern_did(text: str) -> None:
    want = [(m.start(), m.end(), m.group(2)) for m in CODE_SPAN.finditer(text)]
    assert list(code_spans(text)) == want


def test_html_in_the_markdown_summary_is_escaped() -> None:
    out = md_html("<img src=x onerror=alert(1)> @jdoe #5 https://x.example")
    assert "<" not in out and "@\u2060jdoe" in out and "#\u20605" in out and "https:\u2060//" in out


def test_neutralise_only_touches_what_github_links() -> None:
    assert neutralise("user@host mean@1 issue #12 see https://a.b www.c.d x#y") == (
        f"user@{JOINER}host mean@{JOINER}1 issue #{JOINER}12 see https:{JOINER}//a.b www{JOINER}.c.d x#y"
    )


# -- CSV ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value,expected",
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1+1", "'+1+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("plain", "plain"),
        (-0.5, -0.5),
        (3, 3),
        (None, None),
    ],
)
def test_csv_cell(value: object, expected: object) -> None:
    assert csv_cell(value) == expected


def test_metrics_csv_escapes_keys_and_keeps_negative_numbers(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(
        "".join(
            f"(TaskRunner pid=1) step:{s} - actor/pg_loss:{-0.5 * s} - =cmd|' /C calc'!A0:1.0 - "
            f"@SUM(A1):2.0 - -x:3.0 - +y:4.0\n"
            for s in (1, 2)
        )
    )
    out = tmp_path / "m.csv"
    run_cli(["scan", str(log), "--metrics-csv", str(out)])
    rows = list(csv.reader(out.open()))
    assert all(not cell.startswith(("=", "+", "-", "@")) for cell in rows[0])
    assert "'=cmd|' /C calc'!A0" in rows[0] and "'@SUM(A1)" in rows[0] and "'-x" in rows[0]
    loss = rows[0].index("actor/pg_loss")
    assert [float(r[loss]) for r in rows[1:]] == [-0.5, -1.0]  # numbers, not '-0.5


def test_fleet_csv_escapes_formula_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = tmp_path / "=HYPERLINK(evil)"
    job.mkdir()
    (job / "job.log").write_text(
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    monkeypatch.chdir(tmp_path)
    result = run_cli(["fleet", "=HYPERLINK(evil)", "--format", "csv", "--jobs", "1"])
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert rows[0]["job"] == "'=HYPERLINK(evil)" and rows[0]["error_line"] == "1"


# -- the terminal --------------------------------------------------------------------------------------
def test_terminal_text_drops_every_control() -> None:
    hostile = "a\x1b[31mred\x1b[0m \x1b]0;title\x07 \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ b\x08 \x9b2J \u202eevil\r\tz\n"
    out = terminal_text(hostile)
    assert out == "ared  link b 2J evil\tz\n"


def test_alert_line_carries_no_escape_sequence() -> None:
    log = "[rank0]: torch.OutOfMemoryError: CUDA out of memory. \x1b]0;owned\x07\x1b[2J\x1b[31mred \u202eevil\r\n"
    result = run_cli(["scan", "-", "--format", "json"], input=log.encode())
    alert = next(line for line in result.stderr.splitlines() if "ALERT" in line)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202e]", alert), repr(alert)
    assert "CUDA out of memory." in alert and "red" in alert


# -- escape sequences and controls in the report files ---------------------------------------------------
# what a terminal would act on, planted in an exception line: each is gone from every format
CONTROLS = {
    "DCS": "\x1bPq#0;2;0;0;0#0~~@@vv@@~~\x1b\\",  # a device control string (here: sixel graphics)
    "private CSI >": "\x1b[>0c",
    "private CSI =": "\x1b[=5h",
    "8-bit CSI": "\x9b",
    "bidi overrides": "\u202a\u202b\u202c\u202d\u202e",
    "bidi isolates": "\u2066\u2067\u2068\u2069",
    "backspaces": "\x08\x08\x08",
}
LEFTOVER = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]|q#0;2")


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@pytest.mark.parametrize("fmt", ["md", "html", "json", "text"])
@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_escape_sequences_and_controls_from_the_log_are_gone_from_every_format(
    name: str, fmt: str, tmp_path: Path
) -> None:
    log = tmp_path / "job.log"
    seq = CONTROLS[name]
    log.write_text(
        "Traceback (most recent call last):\n"
        f'  File "/w/{seq}train.py", line 3, in main{seq}\n'
        f"RuntimeError: before{seq} after\n",
        encoding="utf-8",
    )
    result = run_cli(["scan", str(log), "--format", fmt, "--no-redact"])
    assert result.exit_code == 1, result.output
    out = result.stdout
    if fmt == "json":
        report = json.loads(out)  # still valid JSON, every string valid text
        rc = report["root_cause"]
        assert rc["error_line"]["text"] == "RuntimeError: before after"
        assert [e["text"] for e in rc["evidence"]][-1] == "RuntimeError: before after"
        assert rc["traceback"]["frames"][0] == {"file": "/w/train.py", "line": 3, "function": "main"}
        leftovers = [s for s in _strings(report) if LEFTOVER.search(s)]
    else:
        assert "before after" in out
        leftovers = LEFTOVER.findall(out)
    assert not leftovers, leftovers


def test_the_reports_keep_a_carriage_return_as_text(tmp_path: Path) -> None:
    """A `\\r` in a log line is shown, not acted on: `\\r` in JSON, a space in the Markdown's error line."""
    log = tmp_path / "job.log"
    log.write_text(
        'Traceback (most recent call last):\n  File "/w/train.py", line 3, in main\nRuntimeError: a\rb\n'
    )
    report = json.loads(run_cli(["scan", str(log), "--format", "json"]).stdout)
    assert report["root_cause"]["evidence"][-1]["text"] == "RuntimeError: a\rb"
    assert "> 3: RuntimeError: a b\n" in run_cli(["scan", str(log), "--format", "md"]).stdout


def test_terminal_text_drops_device_control_strings_whole() -> None:
    """A DCS (and SOS, PM, APC) string is the terminal's data, not text: it goes up to its terminator."""
    hostile = "a\x1bPq#0;2;0;0;0\x1b\\b \x1b_apc\x1b\\c \x1bXsos\x07d \x1b^pm\x1b\\e"
    assert terminal_text(hostile) == "ab c d e"
