"""The HTML reports at a phone's width (420 px) and a desktop's (1400 px) in headless Chromium, as the
CLI writes them: nothing sticks out on the right (the banner's links wrap between links, never inside
one; long identifiers and paths break), the stage timeline is drawn at a readable size, the fleet page
stacks each job into a card on a phone, and a healthy run's banner shows its metric anomalies as the
text summary does. Screenshots go to test-artifacts/ and are checked for their size."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, SAMPLES, run_cli, sample_logs
from tests.reports.test_html import ARTIFACTS, _load, browser  # noqa: F401 (the browser fixture)

pytestmark = pytest.mark.slow
WIDTHS = (420, 1400)


def spike_log(path: Path) -> Path:
    """A healthy verl run whose grad norm jumps at step 9 (a metric anomaly, not a failure)."""
    lines = [
        f"(TaskRunner pid=1) step:{n} - actor/pg_loss:np.float64(0.1) - actor/grad_norm:np.float64("
        f"{60.0 if n == 9 else 1.0 + n / 100}) - timing_s/step:1.5"
        for n in range(1, 13)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def at_width(driver, page: Path, width: int, shot: str) -> dict:
    """Load `page` in a `width` x 900 viewport; screenshot the whole page to test-artifacts/`shot`;
    return what the checks read."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        assert _load(driver, page) == []
        facts = driver.execute_script("""
            function visible(e) { return e.getClientRects().length > 0 && getComputedStyle(e).display != 'none'; }
            var sticking = [];
            document.querySelectorAll('body *').forEach(function (e) {
              var r = e.getBoundingClientRect();
              if (visible(e) && r.width > 0 && r.right > window.innerWidth + 0.5) sticking.push(e.tagName + '.' + e.className);
            });
            var nav = Array.from(document.querySelectorAll('#verdict nav a')).map(function (a) {
              var r = a.getBoundingClientRect();
              return {text: a.textContent, lines: a.getClientRects().length, right: r.right};
            });
            var labels = [];
            document.querySelectorAll('svg.timeline').forEach(function (svg) {
              if (!visible(svg)) return;
              svg.querySelectorAll('text').forEach(function (t) { labels.push(t.getBoundingClientRect().height); });
            });
            var cards = Array.from(document.querySelectorAll('table.jobs tbody tr')).filter(visible).map(function (tr) {
              var r = tr.getBoundingClientRect(); return {left: r.left, right: r.right};
            });
            return {width: window.innerWidth, scrollWidth: document.documentElement.scrollWidth,
                    sticking: sticking.slice(0, 10), nav: nav, timelineText: labels, cards: cards,
                    groups: Array.from(document.querySelectorAll('section.group h2')).map(function (h) { return h.textContent; }),
                    anomalies: (document.querySelector('#verdict [data-role=anomalies]') || {}).textContent || null};""")
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": min(height, 8000), "deviceScaleFactor": 1, "mobile": False},
        )
        ARTIFACTS.mkdir(exist_ok=True)
        out = ARTIFACTS / shot
        assert driver.save_screenshot(str(out))
        png = out.read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == width
        assert len(png) > 5000  # something was drawn
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    return facts


def assert_fits(facts: dict) -> None:
    assert facts["scrollWidth"] <= facts["width"], facts["sticking"]
    assert facts["sticking"] == []


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", ["ray-actor-exception", "torchrun-rank-exception", "ray-healthy"])
def test_scan_report_fits_the_width(browser, tmp_path: Path, name: str, width: int) -> None:  # noqa: F811
    page = tmp_path / f"{name}.html"
    assert run_cli(["scan", str(SAMPLES / f"{name}.log"), "-o", str(page)]).exit_code in (0, 1)
    facts = at_width(browser, page, width, f"phone-{name}-{width}.png")
    assert_fits(facts)
    # the banner's links: each on one line (no 'root' alone with 'cause' below), all on screen
    assert facts["nav"] and all(a["lines"] == 1 and a["right"] <= width for a in facts["nav"]), facts["nav"]
    assert any(a["text"] == "root cause" for a in facts["nav"]) or name == "ray-healthy"
    # the stage timeline's text is drawn at about its own size (it was 4 px at 420)
    assert facts["timelineText"] and min(facts["timelineText"]) >= 10, facts["timelineText"]


@pytest.mark.parametrize("width", WIDTHS)
def test_healthy_banner_shows_the_metric_anomalies_the_summary_shows(
    browser,  # noqa: F811
    tmp_path: Path,
    width: int,
) -> None:
    log = spike_log(tmp_path / "spike.log")
    page = tmp_path / "spike.html"
    summary = run_cli(["scan", str(log), "-o", str(page)]).stderr
    assert summary.startswith("HEALTHY")
    (metrics,) = [line.split("metrics", 1)[1].strip() for line in summary.splitlines() if "metrics  " in line]
    facts = at_width(browser, page, width, f"phone-healthy-anomaly-{width}.png")
    assert_fits(facts)
    assert facts["anomalies"] == metrics and "grad-norm-spike" in metrics


@pytest.mark.parametrize("width", WIDTHS)
def test_fleet_page_groups_the_jobs_and_fits_the_width(browser, tmp_path: Path, width: int) -> None:  # noqa: F811
    jobs = [str(p) for p in sample_logs()] + [str(p) for p in sorted((FIXTURES / "verl").glob("*.log"))]
    page = tmp_path / "fleet.html"
    r = run_cli(["fleet", *jobs, "/nonexistent/job.log", "-o", str(page), "--reports", str(tmp_path / "r")])
    assert r.exit_code == 1, r.output
    facts = at_width(browser, page, width, f"phone-fleet-{width}.png")
    assert_fits(facts)
    assert facts["groups"][0] == "config-error: 2 jobs"  # the most jobs first
    assert "healthy: 2 jobs" in facts["groups"] and "could not be read: 1 job" in facts["groups"]
    # every job's row (a card on a phone) is wholly on screen
    assert len(facts["cards"]) == len(jobs) + 1
    assert all(c["left"] >= 0 and c["right"] <= width for c in facts["cards"]), facts["cards"]
    counts = [int(re.search(r"(\d+) jobs?$", g).group(1)) for g in facts["groups"]]
    assert sum(counts) == len(jobs) + 1
