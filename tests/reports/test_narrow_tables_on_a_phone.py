"""The scan report's tables of many narrow columns (symptoms; a stall's "what each process waited in")
in headless Chromium: at 420 px each row is a card of `label: value` lines as wide as the page (not six
columns squeezed to a few characters each), at 1400 px a table; the banner's error is cut at a word and
the whole message folds under it, never `[301 more characters]`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES, SAMPLES, run_cli
from tests.reports.test_html import browser  # noqa: F401 (the browser fixture)
from tests.reports.test_html_on_a_phone import assert_fits, at_width

pytestmark = pytest.mark.slow

FACTS = """
var out = {};
['table.symptoms', 'table.stall-waits'].forEach(function (sel) {
  var t = document.querySelector(sel); if (!t) return;
  var rows = Array.from(t.querySelectorAll('tr')).filter(function (tr) { return getComputedStyle(tr).display != 'none'; });
  out[sel] = rows.map(function (tr) {
    var cells = Array.from(tr.querySelectorAll('td'));
    return {width: tr.getBoundingClientRect().width, narrowest: Math.min.apply(null, cells.map(function (td) {
      return td.getBoundingClientRect().width; })), label: cells.length ? getComputedStyle(cells[0], '::before').content : ''};
  });
});
var error = document.querySelector('#verdict [data-role=error]');
out.error = error ? error.textContent : null;
out.folded = document.querySelectorAll('#verdict details.whole-message').length;
out.page = document.querySelector('main').getBoundingClientRect().width;
return out;
"""


def facts_at(driver, page: Path, width: int, shot: str) -> dict:
    assert_fits(at_width(driver, page, width, shot))
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        return driver.execute_script(FACTS)
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


@pytest.mark.parametrize("width", (420, 1400))
@pytest.mark.parametrize(
    ("log", "table"),
    [
        (SAMPLES / "ray-actor-exception.log", "table.symptoms"),
        (FIXTURES / "stalls" / "torchrun-hang-py-spy", "table.stall-waits"),
    ],
)
def test_narrow_tables_are_cards_on_a_phone(
    browser,  # noqa: F811
    tmp_path: Path,
    log: Path,
    table: str,
    width: int,
) -> None:
    page = tmp_path / "r.html"
    assert run_cli(["scan", str(log), "-o", str(page)]).exit_code in (1, 3)
    facts = facts_at(browser, page, width, f"cards-{log.stem}-{width}.png")
    rows = facts[table]
    assert rows, facts
    if width == 420:  # a card per row, as wide as the page; each value on its own line under its label
        assert all(r["width"] >= facts["page"] - 40 for r in rows), rows
        assert all(r["narrowest"] >= facts["page"] - 60 for r in rows), rows
        assert all(r["label"].startswith('"') and r["label"] != '""' for r in rows), rows
    else:  # a table: a header row and several cells side by side
        assert all(r["narrowest"] < r["width"] / 2 for r in rows[1:]), rows
        assert all(r["label"] in ("none", "normal", "") for r in rows), rows
    if facts["error"] is not None:
        assert "more characters" not in facts["error"]
        assert facts["folded"] == 1 and "the whole message (601 characters)" in facts["error"]
