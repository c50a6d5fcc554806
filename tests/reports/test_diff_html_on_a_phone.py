"""`verl-logscan diff -o d.html` in headless Chromium at a phone's width (420 px) and a desktop's
(1400 px): the scan report's banner and palette, nothing sticking out on the right, the environment
table's BAD column on screen (a card per key on a phone, as fleet's jobs), and a chart per metric with
value and step axes. Screenshots go to test-artifacts/ and are checked for their size."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES, run_cli
from tests.reports.test_html import browser  # noqa: F401 (the browser fixture)
from tests.reports.test_html_on_a_phone import assert_fits, at_width

pytestmark = pytest.mark.slow
PAIR = FIXTURES / "diff" / "learning-rate"

FACTS = """
function visible(e) { return e.getClientRects().length > 0 && getComputedStyle(e).display != 'none'; }
var bad = Array.from(document.querySelectorAll('table.changes td[data-label=BAD]')).map(function (td) {
  var r = td.getBoundingClientRect(); return {left: r.left, right: r.right, width: r.width, text: td.textContent};
});
var charts = Array.from(document.querySelectorAll('svg.diff-chart')).filter(visible).map(function (svg) {
  var r = svg.getBoundingClientRect();
  return {width: r.width, y: svg.querySelectorAll('text.y-tick').length, x: svg.querySelectorAll('text.x-tick').length,
          axes: svg.querySelectorAll('line.axis').length, runs: svg.querySelectorAll('polyline.run').length};
});
var banner = document.querySelector('header.banner');
return {bad: bad, charts: charts, banner: banner ? getComputedStyle(banner).borderLeftColor : null,
        status: (document.querySelector('.banner .status') || {}).textContent || null};
"""


@pytest.mark.parametrize("width", (420, 1400))
def test_diff_page_fits_and_shows_bad_and_axes(browser, tmp_path: Path, width: int) -> None:  # noqa: F811
    page = tmp_path / "diff.html"
    r = run_cli(["diff", str(PAIR / "good.log"), str(PAIR / "bad.log"), "-o", str(page)])
    assert r.exit_code == 1, r.output
    assert_fits(at_width(browser, page, width, f"diff-{width}.png"))
    browser.execute_cdp_cmd(  # (at_width leaves the page as loaded, its viewport back to the window's)
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        facts = browser.execute_script(FACTS)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert facts["status"] == "DIFFERS" and facts["banner"] == "rgb(180, 35, 24)"  # the report's --bad
    assert facts["bad"] and all(c["right"] <= width and c["width"] >= 100 for c in facts["bad"]), facts["bad"]
    assert "1e+30" in facts["bad"][0]["text"]
    assert facts["charts"], "no chart drawn"
    for c in facts["charts"]:
        assert c["axes"] == 2 and c["y"] >= 2 and c["x"] >= 2 and c["runs"] == 2, c
        assert c["width"] <= width
