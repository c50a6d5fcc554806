"""The HTML report: self-contained, escaped, and drawn right in a real (headless) Chromium.

The browser tests need Debian's `chromium` and `chromium-driver` (`.ci/run` installs them in CI). They
skip when the browser is missing, except under CI=true, where they must run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest

from logparse.model import (
    Anomaly,
    Evidence,
    FindingView,
    Fix,
    InputInfo,
    Metrics,
    MetricSeries,
    Progress,
    Report,
    ReportStatus,
    RootCause,
    StageSpan,
    TracebackView,
)
from reports import render
from tests.conftest import ROOT, SAMPLES, run_cli, sample_logs

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = ROOT / "test-artifacts"
EVIL = "<script>alert(1)</script> </details> </code> ```python <b>bold</b> & `tick` |pipe|"


def handmade_report(evil: str = "", steps: int = 6, failure_step: int = 5) -> Report:
    """A failed report with everything a renderer shows: progress with a timeline, metrics with one
    series per key (`steps` step rows, a nan in loss at the failure step), anomalies, environment,
    symptoms, findings, a traceback; `evil` is planted in every log-derived string."""
    src = "job.log"
    error = Evidence(src, 120, f"RuntimeError: loss is nan at step {failure_step} {evil}")
    evidence = (
        Evidence(src, 100, f"step:{failure_step - 1} - loss:1.0 {evil}"),
        Evidence(src, 101, "Traceback (most recent call last):"),
        Evidence(src, 102, f'  File "/workspace/train.py", line 10, in main {evil}'),
        error,
    )
    tb = TracebackView(
        exception_type="RuntimeError",
        exception_message=f"loss is nan at step {failure_step} {evil}",
        frames=(
            ("/opt/venv/lib/python3.11/site-packages/torch/x.py", 5, "wrapper"),
            ("/workspace/train.py", 10, f"main{evil}"),
            ("/opt/venv/lib/python3.11/site-packages/torch/y.py", 7, "inner"),
        ),
        innermost_user_frame=("/workspace/train.py", 10, f"main{evil}"),
        task=None,
        chain=(f"ValueError: earlier {evil}",),
        frame_kinds=("library", "user", "library"),
    )
    rc = RootCause(
        id="loss-is-nan",
        category="numerical-instability",
        title="Loss became NaN",
        summary=f"The loss became nan {evil}",
        message=f"RuntimeError: loss is nan {evil}",
        evidence=evidence,
        rank=2,
        local_rank=2,
        pid=4242,
        actor=None,
        node="10.0.0.7",
        stage="actor-update",
        confidence=0.85,
        remediation=Fix(
            "Find the bad batch.",
            "NaN spreads.",
            ("Lower `actor_rollout_ref.actor.optim.lr`.",),
            ("https://verl.readthedocs.io/",),
        ),
        error_line=error,
        traceback=tb,
        explanation=(f"Chosen: loss-is-nan {evil}",),
    )
    step_rows = tuple(range(1, steps + 1))
    loss = tuple(float("nan") if s == failure_step else 2.0 / s for s in step_rows)
    grad = tuple(None if s == 2 else 1.0 + s for s in step_rows)
    symptom = FindingView(
        "nccl-watchdog-timeout",
        "collective-timeout",
        f"NCCL watchdog {evil}",
        "symptom",
        7,
        (0, 1, 2, 3, 5, 6, 7),
        ("node-a",),
        Evidence(src, 130, f"watchdog {evil}"),
    )
    finding = FindingView(
        "loss-is-nan", "numerical-instability", "Loss became NaN", "cause", 1, (2,), (), error
    )
    return Report(
        status=ReportStatus.FAILED,
        root_cause=rc,
        symptoms=(symptom,),
        findings=(finding, symptom),
        inputs=(InputInfo(src, 200, 12345),),
        notes=(f"a note {evil}",),
        progress=Progress(
            stage_reached="training",
            last_step=steps,
            total_steps=10,
            completed=False,
            seconds_per_step=12.5,
            timeline=(
                StageSpan("launch", src, 1, src, 5),
                StageSpan("model-load", src, 6, src, 40),
                StageSpan("training", src, 41, src, 130),
            ),
            failure_step=failure_step,
        ),
        metrics=Metrics(
            steps=steps,
            keys=("actor/pg_loss", "actor/grad_norm"),
            series=(
                MetricSeries("actor/pg_loss", step_rows, loss),
                MetricSeries("actor/grad_norm", step_rows, grad),
            ),
            anomalies=(
                Anomaly("nan-inf", failure_step, "actor/pg_loss", float("nan"), f"loss is nan {evil}", True),
            ),
        ),
        environment={
            "torch": "2.4.0",
            "world_size": 8,
            "hosts": ["node-a", f"node-b{evil}"],
            "config": {"actor_rollout_ref.actor.optim.lr": 1e-06},
        },
    )


class TagCounter(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.starts: dict[str, int] = {}
        self.ends: dict[str, int] = {}
        self.attrs: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.starts[tag] = self.starts.get(tag, 0) + 1
        self.attrs.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        self.ends[tag] = self.ends.get(tag, 0) + 1


def tags(html: str) -> TagCounter:
    parser = TagCounter()
    parser.feed(html)
    return parser


def assert_self_contained(html: str) -> None:
    t = tags(html)
    assert "link" not in t.starts and "img" not in t.starts and "iframe" not in t.starts
    for tag, attrs in t.attrs:
        assert "src" not in attrs, f"<{tag} src=...> loads something"
    assert "@import" not in html and "url(" not in html and "@font-face" not in html
    assert t.starts.get("script", 0) <= 1  # the tiny inline beforeprint helper, and nothing else


@pytest.mark.parametrize("sample", sample_logs(), ids=lambda p: p.stem)
def test_every_sample_renders_a_self_contained_page(sample: Path) -> None:
    result = run_cli(["scan", str(sample), "--format", "html"])
    assert result.exit_code in (0, 1)
    html = result.stdout
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert_self_contained(html)
    assert "@media print" in html
    report = json.loads(run_cli(["scan", str(sample), "--format", "json"]).stdout)
    verdict = "FAILED" if report["status"] == "failed" else "HEALTHY"
    assert f'<span class="status">{verdict}</span>' in html


def test_handmade_report_has_every_section() -> None:
    html = render(handmade_report(), "html")
    for section in (
        "verdict",
        "root-cause",
        "traceback",
        "fix",
        "progress",
        "metrics",
        "symptoms",
        "environment",
        "findings",
        "inputs",
    ):
        assert f'id="{section}"' in html, section
    assert 'class="user innermost"' in html and "innermost user frame" in html
    assert html.count('class="metric-chart"') == 2
    assert "0-3, 5-7" in html  # symptom ranks, compact
    # the root cause's stage (actor-update) has no span: no stage is marked failed (a renderer decides
    # no stage), and the failure is still placed on the timeline
    assert (
        re.findall(
            r'data-stage="([^"]+)" data-stretches="\d+">\s*<title>[^<]*</title>\s*'
            r'<text class="stage-label failed"',
            html,
        )
        == []
    )
    # one failure marker in each layout of the timeline (issue 24: a wide one, and a narrow one for a phone)
    timelines = [t.split("</svg>", 1)[0] for t in html.split('<svg class="timeline ')[1:]]
    assert [t.split('"', 1)[0] for t in timelines] == ["wide", "narrow"]
    assert [t.count('<g class="failure-marker">') for t in timelines] == [1, 1]
    assert "nan-inf" in html  # the anomaly list


def test_log_text_stays_text_in_html() -> None:
    html = render(handmade_report(EVIL), "html")
    t = tags(html)
    assert t.starts.get("script") == 1 and "alert(1)" not in html.split("<script>")[1]
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert t.starts.get("details", 0) == t.ends.get("details", 0) == 1  # only the findings fold
    assert t.starts.get("b", 0) == 0
    assert_self_contained(html)


def test_failure_marker_and_points_in_the_markup() -> None:
    html = render(handmade_report(steps=6, failure_step=5), "html")
    charts = re.findall(r'<figure class="metric-chart".*?</figure>', html, re.DOTALL)
    assert len(charts) == 2
    for chart in charts:
        assert len(re.findall(r'<circle class="point', chart)) == 6
        assert 'class="failure-marker" data-step="5"' in chart
    assert 'class="point nonfinite anomaly" data-step="5"' in charts[0]
    assert 'class="point missing" data-step="2"' in charts[1]


# -- in a real browser ---------------------------------------------------------------------------------
def _browser_available() -> bool:
    return Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not _browser_available():
        if os.environ.get("CI") == "true":
            pytest.fail(
                f"CI=true but {CHROMIUM} / {CHROMEDRIVER} are missing: .ci/run installs them "
                "(apt-get install chromium chromium-driver)"
            )
        pytest.skip("headless Chromium not installed (apt-get install chromium chromium-driver)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("selenium not installed (pip install -e '.[test]')")

    profile = tempfile.mkdtemp(prefix="verl-logscan-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--window-size=1280,2000",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _load(driver, path: Path) -> list[dict]:
    driver.get(path.resolve().as_uri())
    assert driver.execute_script("return document.readyState") == "complete"
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def _screenshot(driver, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(height, 800), 12000))
    out = ARTIFACTS / name
    assert driver.save_screenshot(str(out))
    assert out.stat().st_size > 1000
    return out


def _charts(driver) -> list[dict]:
    return driver.execute_script("""
        return Array.from(document.querySelectorAll('.metric-chart')).map(function (c) {
          var m = c.querySelector('.failure-marker');
          return {key: c.dataset.key, points: c.querySelectorAll('.point').length,
                  steps: Array.from(c.querySelectorAll('.point')).map(function (p) { return +p.dataset.step; }),
                  failure: m ? +m.dataset.step : null,
                  markerVisible: m ? m.getBoundingClientRect().height > 0 : false};
        });""")


def test_handmade_report_in_chromium(browser, tmp_path: Path) -> None:
    page = tmp_path / "handmade.html"
    page.write_text(render(handmade_report(EVIL, steps=6, failure_step=5), "html"), encoding="utf-8")
    assert _load(browser, page) == []
    charts = _charts(browser)
    assert [c["key"] for c in charts] == ["actor/pg_loss", "actor/grad_norm"]
    for c in charts:
        assert c["points"] == 6 and c["steps"] == [1, 2, 3, 4, 5, 6]
        assert c["failure"] == 5 and c["markerVisible"]
    # the planted markup stayed text: one script (ours), no <b>, one <details>, and the text is shown
    counts = browser.execute_script(
        "return [document.scripts.length, document.querySelectorAll('b').length,"
        " document.querySelectorAll('details').length, document.body.innerText]"
    )
    assert counts[:3] == [1, 0, 1]
    assert "<script>alert(1)</script>" in counts[3]
    assert browser.execute_script("return document.querySelectorAll('li.innermost').length") == 1
    _screenshot(browser, "html-handmade.png")


def _step_rows(log: Path) -> list[int]:
    """The distinct verl step rows (`step:N - ...`) of a log, in order."""
    seen: list[int] = []
    for m in re.finditer(r"(?:^|[\s\]])step:(\d+) - ", log.read_text(errors="replace"), re.MULTILINE):
        if int(m.group(1)) not in seen:
            seen.append(int(m.group(1)))
    return seen


@pytest.mark.parametrize("name", ["ray-actor-exception", "torchrun-rank-exception"])
def test_sample_report_in_chromium(browser, tmp_path: Path, name: str) -> None:
    sample = SAMPLES / f"{name}.log"
    page = tmp_path / f"{name}.html"
    result = run_cli(["scan", str(sample), "--format", "html", "-o", str(page)])
    assert result.exit_code == 1, result.output
    assert _load(browser, page) == []
    report = json.loads(run_cli(["scan", str(sample), "--format", "json"]).stdout)
    assert browser.execute_script("return document.querySelector('.banner .status').textContent") == "FAILED"
    charts = _charts(browser)
    metrics = report["metrics"]
    if metrics and metrics["series"]:
        rows = _step_rows(sample)
        progress = report["progress"] or {}
        failure = progress.get("failure_step")
        if failure is None:
            failure = max(rows)
        assert [c["key"] for c in charts] == [s["key"] for s in metrics["series"]]
        for c, s in zip(charts, metrics["series"], strict=True):
            assert c["points"] == len(rows) == len(s["steps"]), c["key"]
            assert c["steps"] == rows
            assert c["failure"] == failure and c["markerVisible"]
    else:  # a scan without metrics draws no chart
        assert charts == []
    _screenshot(browser, f"html-{name}.png")


# -- the first screen: the cause before anything else ----------------------------------------------------
FIRST_SCREEN = (1400, 900)


def _first_screen(driver, page: Path, shot: Path) -> dict:
    """Load `page` in a 1400x900 viewport (the window's chrome not counted), screenshot it to `shot`,
    and return the bounding rects of what must be seen without scrolling."""
    width, height = FIRST_SCREEN
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        assert _load(driver, page) == []
        rects = driver.execute_script("""
            function rect(sel) {
              var e = document.querySelector(sel);
              if (!e) return null;
              var r = e.getBoundingClientRect();
              return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, text: e.textContent,
                      visible: e.checkVisibility()};
            }
            return {viewport: [window.innerWidth, window.innerHeight], scrollY: window.scrollY,
                    verdict: rect('#verdict .status'), summary: rect('#verdict .summary'),
                    location: rect('[data-role=location]'), error: rect('[data-role=error]'),
                    context: rect('.error-context tr.error-line'),
                    firstEvidence: rect('.all-evidence table.evidence tr')};""")
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 1000
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    return rects


def _on_screen(rect: dict | None, height: int) -> bool:
    return rect is not None and rect["top"] >= 0 and rect["bottom"] <= height and rect["bottom"] > rect["top"]


@pytest.mark.parametrize(
    "name",
    [
        "ray-actor-exception",
        "torchrun-sigkill",
        "torchrun-rank-exception",
        "ray-import-error",
        "torchrun-gloo-timeout",
    ],
)
def test_first_screen_shows_the_verdict_the_error_line_and_where(browser, tmp_path: Path, name: str) -> None:
    page = tmp_path / f"{name}.html"
    assert run_cli(["scan", str(SAMPLES / f"{name}.log"), "-o", str(page)]).exit_code == 1
    report = json.loads(run_cli(["scan", str(SAMPLES / f"{name}.log"), "--format", "json"]).stdout)
    rc = report["root_cause"]
    rects = _first_screen(browser, page, tmp_path / f"first-screen-{name}.png")
    height = FIRST_SCREEN[1]
    assert rects["viewport"] == list(FIRST_SCREEN) and rects["scrollY"] == 0
    assert rects["verdict"]["text"] == "FAILED" and _on_screen(rects["verdict"], height)
    assert _on_screen(rects["summary"], height)
    # where: the error line's file:line, fully on the first screen
    assert f"{rc['error_line']['source']}:{rc['error_line']['line']}" in rects["location"]["text"]
    assert _on_screen(rects["location"], height)
    assert _on_screen(rects["error"], height)
    # the error line itself, in the log's own words with the lines before it, starts on the first screen
    assert rects["context"] is not None and rects["context"]["top"] < height
    assert rc["error_line"]["text"][:60] in rects["context"]["text"]
    assert rects["context"]["visible"] and rects["location"]["visible"]
    # the rest of the evidence is folded: its rows are not rendered until opened
    if rects["firstEvidence"] is not None:
        assert not rects["firstEvidence"]["visible"]


def test_first_screen_with_a_long_traceback_and_evidence(browser, tmp_path: Path) -> None:
    """A report whose evidence is 60 lines and whose traceback is deep still leads with the cause."""
    base = handmade_report()
    rc = base.root_cause
    assert rc is not None and rc.traceback is not None and rc.error_line is not None
    lib = "/opt/venv/lib/python3.11/site-packages"
    frames = tuple((f"{lib}/torch/nn/modules/module.py", 1500 + i, "_call_impl") for i in range(30))
    frames += (("/workspace/train.py", 10, "main"),)
    evidence = tuple(
        Evidence("job.log", 60 + i, f'  File "{lib}/torch/nn/modules/module.py", line {1500 + i}')
        for i in range(59)
    ) + (rc.error_line,)
    report = dataclasses.replace(
        base,
        root_cause=dataclasses.replace(
            rc,
            evidence=evidence,
            traceback=dataclasses.replace(
                rc.traceback, frames=frames, frame_kinds=("library",) * 30 + ("user",)
            ),
        ),
    )
    page = tmp_path / "long.html"
    page.write_text(render(report, "html"), encoding="utf-8")
    rects = _first_screen(browser, page, tmp_path / "first-screen-long.png")
    height = FIRST_SCREEN[1]
    for key in ("verdict", "location", "error", "context"):
        assert _on_screen(rects[key], height), (key, rects[key])
    # the 30 torch frames are one folded line that opens on a click (as Sentry folds library frames)
    folded = browser.execute_script(
        "return Array.from(document.querySelectorAll('#traceback li.folded')).map(function (li) {"
        " return [li.querySelector('summary').textContent, li.querySelector('li').checkVisibility()]; })"
    )
    assert folded == [["30 library frame(s) (torch)", False]]
    browser.execute_script("document.querySelector('#traceback li.folded summary').click()")
    opened = browser.execute_script(
        "var lis = document.querySelectorAll('#traceback li.folded li');"
        " return [lis.length, lis[0].checkVisibility(), lis[0].textContent, lis[0].title]"
    )
    assert opened[0] == 30 and opened[1] is True
    assert opened[2] == "torch/nn/modules/module.py:1500 in _call_impl"  # shortened; the full path on hover
    assert opened[3] == f"{lib}/torch/nn/modules/module.py"
