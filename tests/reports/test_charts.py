"""Metric charts stay readable on long runs: a bounded number of drawn points chosen so that no spike
is lost (at the report's series and again at drawing), markers only where a point is news, a smoothed
(EMA) line on long series, and a value axis that does not make noise look dramatic."""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import pytest

from logparse.model import MetricSeries, downsample
from logparse.observe.metrics import MAX_CHART_POINTS
from logparse.pipeline import analyse
from patterns import load_catalog
from reports.html import DRAW_MAX_POINTS, MARKER_MAX_POINTS, chart, charts, ema, smoothing_weight, y_range
from tests.conftest import run_cli
from tests.reports.test_html import _load, browser  # noqa: F401 - the headless Chromium fixture

STEP_LINE = (
    "(TaskRunner pid=4242) step:{n} - actor/pg_loss:np.float64({loss}) - actor/grad_norm:np.float64({grad}) "
    "- critic/score/mean:{score} - response_length/mean:{length} - timing_s/step:{seconds}\n"
)
SPIKE_STEP = 3217
SPIKE_SECONDS = 41.5  # one slow step among ~1.5 s steps (no anomaly rule reads timing)
GRAD_PEAK_STEP = 1234
GRAD_PEAK = 4.75  # a grad-norm bump under the 10x spike rule: only the downsampling can keep it


def long_run_log(path: Path, steps: int = 5_000) -> Path:
    """A healthy verl run of `steps` noisy step lines with one slow step and one grad-norm bump."""
    rng = random.Random(3)
    with path.open("w") as fh:
        fh.write("(TaskRunner pid=4242) Total training steps: 5000\n")
        for n in range(1, steps + 1):
            seconds = SPIKE_SECONDS if n == SPIKE_STEP else 1.5 + rng.uniform(-0.2, 0.2)
            grad = GRAD_PEAK if n == GRAD_PEAK_STEP else 1.0 + rng.uniform(-0.3, 0.3)
            fh.write(
                STEP_LINE.format(
                    n=n,
                    loss=0.5 * math.exp(-n / 2000) + rng.gauss(0, 0.02),
                    grad=grad,
                    score=min(1.0, n / 4000) + rng.uniform(-0.05, 0.05),
                    length=400 + rng.uniform(-30, 30),
                    seconds=seconds,
                )
            )
    return path


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return long_run_log(tmp_path_factory.mktemp("long") / "job.log")


def _vertices(path: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in re.findall(r"[ML]([-\d.]+) ([-\d.]+)", path)]


def test_downsample_keeps_extremes_ends_and_nonfinite() -> None:
    rng = random.Random(5)
    points: list[tuple[int, float | None]] = [(i, rng.random()) for i in range(10_000)]
    points[4321] = (4321, 99.0)
    points[777] = (777, -5.0)
    points[6000] = (6000, float("nan"))
    points[6001] = (6001, None)
    kept = downsample(points, 300)
    assert len(kept) <= 300
    assert kept[0] == points[0] and kept[-1] == points[-1]
    assert (4321, 99.0) in kept and (777, -5.0) in kept
    assert any(s == 6000 and math.isnan(v) for s, v in kept)
    assert [s for s, _ in kept] == sorted(s for s, _ in kept)
    short = points[:50]
    assert downsample(short, 300) == short


def _reference_downsample(points: list, max_points: int) -> list:
    """downsample as first written: each bucket's first lowest and highest finite value and first
    non-finite one, found point by point."""
    n = len(points)
    if n <= max_points:
        return list(points)
    buckets = max(1, (max_points - 2) // 3)
    keep = {0, n - 1}
    for b in range(buckets):
        low = high = odd = None
        for i in range(1 + b * (n - 2) // buckets, 1 + (b + 1) * (n - 2) // buckets):
            v = points[i][1]
            if v is None:
                continue
            if not math.isfinite(v):
                odd = i if odd is None else odd
                continue
            low = i if low is None or v < points[low][1] else low
            high = i if high is None or v > points[high][1] else high
        keep.update(i for i in (low, high, odd) if i is not None)
    return [points[i] for i in sorted(keep)]


@pytest.mark.parametrize("seed", range(30))
def test_downsample_equals_the_point_by_point_rule(seed: int) -> None:
    """Ties, signed zeros, gaps and non-finite values pick the same points as the point-by-point rule."""
    rng = random.Random(seed)
    pool = [0.0, -0.0, 1.0, 1.0, 2.5, -3.0, None, float("nan"), float("inf"), -float("inf")]
    odd = rng.random() < 0.5
    points = [
        (
            i,
            rng.choice(pool)
            if odd and rng.random() < 0.1
            else rng.choice(pool[:6])
            if rng.random() < 0.5
            else rng.random(),
        )
        for i in range(rng.randrange(1, 3000))
    ]
    for max_points in (5, 50, 2000):
        got, want = downsample(points, max_points), _reference_downsample(points, max_points)
        assert [(s, repr(v)) for s, v in got] == [(s, repr(v)) for s, v in want]


def test_ema_is_debiased_and_skips_gaps() -> None:
    assert ema([2.0, 2.0, 2.0], 0.9) == pytest.approx([2.0, 2.0, 2.0])  # no pull towards zero at the start
    out = ema([1.0, None, float("nan"), 3.0], 0.5)
    assert out[1] is None and out[2] is None
    assert out[3] == pytest.approx((0.5 * 0.5 * 1.0 + 0.5 * 3.0) / (1 - 0.25))


def test_short_noisy_run_is_not_drawn_dramatic() -> None:
    lo, hi = y_range([1.02, 1.01, 1.03])
    assert hi - lo >= 0.1 * 1.03  # a 2% wobble uses a fraction of the height
    c = chart(MetricSeries("actor/pg_loss", (1, 2, 3), (1.02, 1.01, 1.03)), None, set())
    ys = [y for _, y in _vertices(c.path)]
    plot_height = c.plot[3] - c.plot[1]
    assert max(ys) - min(ys) < 0.25 * plot_height
    # a positive series that comes near zero reads from zero; a negative one keeps its sign
    assert y_range([10.0, 300.0])[0] == 0.0
    assert y_range([-3.0, -1.0])[1] < 0


def test_markers_only_on_short_series_or_news() -> None:
    steps = tuple(range(1, 401))
    values = tuple(float("nan") if s == 200 else 1.0 + (s % 7) / 10 for s in steps)
    c = chart(MetricSeries("actor/pg_loss", steps, values), None, {300})
    assert len(c.points) == 2 and {p.step for p in c.points} == {200, 300}  # the NaN and the anomaly
    assert c.drawn <= DRAW_MAX_POINTS and c.ema_path
    short = chart(MetricSeries("actor/pg_loss", steps[:40], values[:40]), None, set())
    assert len(short.points) == 40 <= MARKER_MAX_POINTS and not short.ema_path  # every point, no smoothing


def test_five_thousand_step_run_charts_are_readable(long_run: Path) -> None:
    report = analyse([str(long_run)], load_catalog([]))
    assert report.status == "healthy" and report.metrics is not None and report.metrics.steps == 5_000
    by_key = {s.key: s for s in report.metrics.series}
    # the report's series: bounded, and the spikes are in them
    for s in report.metrics.series:
        assert len(s.steps) <= MAX_CHART_POINTS
    assert SPIKE_SECONDS in by_key["timing_s/step"].values
    assert GRAD_PEAK in by_key["actor/grad_norm"].values
    drawn = {c.key: c for c in charts(report)}
    for c in drawn.values():
        vertices = _vertices(c.path)
        assert len(vertices) == c.drawn <= DRAW_MAX_POINTS
        assert len(c.points) == 0  # no markers on 5,000 points (no NaN, no anomaly in this run)
        assert c.ema_path and len(_vertices(c.ema_path)) <= DRAW_MAX_POINTS + 1
    for key, step, value in (
        ("timing_s/step", SPIKE_STEP, SPIKE_SECONDS),
        ("actor/grad_norm", GRAD_PEAK_STEP, GRAD_PEAK),
    ):
        c = drawn[key]
        left, _, right, _ = c.plot
        top_x, _ = min(_vertices(c.path), key=lambda v: v[1])  # the highest point drawn
        assert top_x == pytest.approx(left + (step - 1) / (5_000 - 1) * (right - left), abs=0.1), key
        assert c.high == f"{value:.4g}"
    assert smoothing_weight(5_000) == pytest.approx(0.99)


def test_long_run_html_through_the_cli(long_run: Path, tmp_path: Path) -> None:
    page = tmp_path / "long.html"
    r = run_cli(["scan", str(long_run), "-o", str(page), "-o", str(tmp_path / "long.json")])
    assert r.exit_code == 0
    html = page.read_text()
    figures = re.findall(
        r'<figure class="metric-chart has-ema" data-key="([^"]+)" data-points="(\d+)" '
        r'data-markers="(\d+)"',
        html,
    )
    assert len(figures) == 5 and all(int(p) <= DRAW_MAX_POINTS and m == "0" for _, p, m in figures)
    assert html.count("<circle") == 0
    assert 'id="smooth"' in html and html.count('class="ema"') == 5
    notes = json.loads((tmp_path / "long.json").read_text())["notes"]
    assert any("no spike is lost" in n for n in notes)


def test_long_run_charts_in_chromium(browser, long_run: Path, tmp_path: Path) -> None:  # noqa: F811
    page = tmp_path / "long.html"
    assert run_cli(["scan", str(long_run), "-o", str(page)]).exit_code == 0
    assert _load(browser, page) == []
    drawn = browser.execute_script("""
        return Array.from(document.querySelectorAll('.metric-chart')).map(function (c) {
          var d = c.querySelector('path.series').getAttribute('d');
          var box = c.querySelector('path.series').getBBox();
          return {key: c.dataset.key, vertices: (d.match(/[ML]/g) || []).length,
                  circles: c.querySelectorAll('circle').length, ema: !!c.querySelector('path.ema'),
                  emaShown: c.querySelector('path.ema').checkVisibility(), height: box.height};
        });""")
    assert [c["key"] for c in drawn] == [
        "actor/pg_loss",
        "actor/grad_norm",
        "critic/score/mean",
        "response_length/mean",
        "timing_s/step",
    ]
    for c in drawn:
        assert 0 < c["vertices"] <= DRAW_MAX_POINTS and c["circles"] == 0 and c["emaShown"], c
    # the smoothed line is optional: unticking the box hides it (no script: a CSS :checked rule)
    browser.execute_script("document.getElementById('smooth').click()")
    assert browser.execute_script(
        "return Array.from(document.querySelectorAll('path.ema')).every(function (p) { return !p.checkVisibility(); })"
    )
    browser.execute_script("document.getElementById('smooth').click()")
    browser.execute_script("document.getElementById('metrics').scrollIntoView()")
    shot = tmp_path / "long-run-charts.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 1000
