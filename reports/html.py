"""The HTML report: one self-contained file (inline CSS and SVG, no fonts, scripts or links to load).

Everything the template shows is computed here: chart geometry (SVG coordinates), which evidence
line is the error, which frame is the innermost user frame, where the failure marker goes. The
template only formats, and Jinja's autoescape keeps every log-derived string text.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from markupsafe import Markup, escape

from logparse.model import Evidence, FindingView, MetricSeries, Report, compact_ranks, downsample
from reports.common import (
    Gap,
    anomaly_text,
    cut_words,
    env_rows,
    finding_kind,
    finding_steps,
    jinja_env,
    number,
    partial_words,
    redaction_line,
    step_text,
    where,
)
from reports.escape import code_spans, without_controls
from reports.layout import (
    FoldedFrames,
    FrameLine,
    error_window,
    evidence_locations,
    fold_frames,
    library_roots,
)

FINDINGS_OPEN_ROWS = 50  # a longer findings table starts folded (it unfolds for printing)
CELL_CHARS = 500  # a log line quoted in a table cell
BANNER_ERROR_CHARS = 300
FOLDED_ERROR_CHARS = 20_000  # the banner's folded whole message

# chart geometry (SVG user units; the SVGs scale to their box)
TL_WIDTH, TL_LABEL, TL_RIGHT, TL_ROW, TL_BAR, TL_TOP, TL_AXIS = 960, 150, 24, 24, 14, 22, 34
TL_MIN_BAR = 1.5  # a stretch of one line is still drawn


@dataclass(frozen=True)
class TimelineShape:
    """Where a timeline's parts go: `wide` (labels left of the bars, for a screen) or `narrow` (each
    label above its bar, across a phone's width, so that its text is drawn at about its own size: the
    wide one scaled to 400 px drew 4 px text)."""

    name: str
    width: int
    left: int  # where the bars start
    right: int  # the room after them
    row: int
    top: int
    stacked: bool  # labels above the bars, not left of them


TL_WIDE = TimelineShape("wide", TL_WIDTH, TL_LABEL, TL_RIGHT, TL_ROW, TL_TOP, False)
TL_NARROW = TimelineShape("narrow", 380, 8, 12, 34, 28, True)
MC_WIDTH, MC_HEIGHT, MC_LEFT, MC_RIGHT, MC_TOP, MC_BOTTOM = 440, 190, 58, 14, 16, 30
DRAW_MAX_POINTS = 300  # vertices of a chart's line: about one per unit of its 368-unit plot width
MARKER_MAX_POINTS = 100  # beyond this many points a marker on each is a solid block: markers only for news
SMOOTH_MIN_POINTS = 100  # a smoothed (EMA) line is drawn over series at least this long
MIN_SPAN_SHARE = 0.1  # the value axis spans at least a tenth of the series' magnitude
ZERO_BASE_SHARE = 0.25  # a positive series whose minimum is under a quarter of its maximum starts at zero


def inline_code(text: object) -> Markup:
    """Catalog text (remediation, the fix line quoting a job's settings) with its `code` spans (any
    backtick run, as in Markdown) as <code>; everything escaped first."""
    text = str(escape(str(text)))
    out: list[str] = []
    last = 0
    for start, end, code in code_spans(text):
        out += [text[last:start], f"<code>{code.strip()}</code>"]
        last = end
    out.append(text[last:])
    return Markup("".join(out))


def safe_href(url: str) -> str | None:
    return url if re.match(r"https?://[^\s\"'<>]+$", url) else None


def clip_cell(text: str, limit: int = CELL_CHARS) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit:,} more characters]"


@dataclass(frozen=True)
class EvidenceRow:
    source: str
    line: int
    text: str
    is_error: bool
    loc: str = ""  # the label shown: the line number when the evidence is from one file


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class Bar:
    """One stretch of the job in a stage."""

    x: float
    width: float
    span: str  # "lines 12-80" / "2026-11-30T11:52:28 - 2026-11-30T11:53:02"
    where: str  # "job.log:12 - job.log:80"


@dataclass(frozen=True)
class Row:
    """A stage of the timeline: its stretches on one row."""

    stage: str
    y: float
    label_y: float
    bars: tuple[Bar, ...]
    summary: str  # "3 stretch(es), lines 40-135"
    failed: bool  # the stage the root cause happened in


@dataclass(frozen=True)
class Timeline:
    width: int
    height: int
    axis_y: float
    plot_left: int
    plot_right: int
    axis: str  # "log line" | "time"
    rows: tuple[Row, ...]
    ticks: tuple[Tick, ...]
    failure_x: float | None
    failure_label: str
    shape: str = "wide"  # TimelineShape.name
    label_x: float = TL_LABEL - 8  # where the stage labels are anchored
    label_anchor: str = "end"
    failure_anchor: str = "end"  # the failure's label: left of its line, or right of it near the start


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    step: int
    value: str
    kind: str  # "" | "missing" | "nonfinite"
    anomaly: bool


@dataclass(frozen=True)
class Chart:
    key: str
    width: int
    height: int
    plot: tuple[float, float, float, float]  # left, top, right, bottom
    path: str
    points: tuple[
        Point, ...
    ]  # the markers drawn: every point of a short series, else only NaN/Inf and anomalies
    drawn: int  # vertices of the series line (at most DRAW_MAX_POINTS)
    ema_path: str  # the smoothed line ("" for a short series)
    smoothing: float | None  # its EMA weight
    y_ticks: tuple[tuple[float, str], ...]
    x_ticks: tuple[Tick, ...]
    failure_x: float | None
    failure_step: int | None
    last: str
    low: str
    high: str


@dataclass(frozen=True)
class FindingRow:
    id: str
    title: str
    category: str
    role: str
    count: int
    ranks: str
    nodes: str
    source: str
    line: int
    text: str
    explained_by: str
    set_aside: str = ""
    steps: str = ""


@dataclass(frozen=True)
class HtmlView:
    title: str
    status: str
    verdict: str
    evidence: tuple[EvidenceRow, ...]  # every evidence line (folded under the error window)
    window: tuple[EvidenceRow, ...]  # the error line and the lines just before it: shown first
    evidence_source: str | None  # the one file all evidence lines are from (then rows show line numbers)
    frames: tuple[FrameLine | FoldedFrames, ...]
    library_roots: tuple[str, ...]  # folders cut off the library frames' paths
    where: str
    step: str
    redacted: str
    references: tuple[tuple[str, str | None], ...]  # (text, href or None)
    error: str  # the error message's start for the banner, cut at a word (the evidence has it in full)
    error_full: str  # the whole message (bounded at FOLDED_ERROR_CHARS), folded under it when cut; else ''

    timeline: Timeline | None
    timeline_narrow: Timeline | None  # the same, laid out for a phone (shown under 640 px)
    charts: tuple[Chart, ...]
    symptoms: tuple[FindingRow, ...]
    findings: tuple[FindingRow, ...]
    findings_open: bool
    environment: tuple[tuple[str, str], ...]
    confidence_pct: int
    anomalies: str  # the metric anomalies in one line, for the banner (as the text summary shows them)


def _finding_row(f: FindingView) -> FindingRow:
    return FindingRow(
        f.id,
        f.title,
        finding_kind(f),  # (a symptom of no category says what it is: `echo of cuda-oom`)
        f.role,
        f.count,
        compact_ranks(f.ranks) or "-",
        ", ".join(f.nodes) or "-",
        f.first.source,
        f.first.line,
        clip_cell(f.first.text),
        f.explained_by or "",
        f.set_aside or "",
        finding_steps(f),
    )


_EPOCH = datetime(1970, 1, 1)


def _parse_time(text: str | None) -> float | None:
    """Seconds of a naive ISO 8601 time (no time zone, so no local-time conversion either way)."""
    if not text:
        return None
    try:
        return (datetime.fromisoformat(text).replace(tzinfo=None) - _EPOCH).total_seconds()
    except ValueError:
        return None


def _clock(seconds: float) -> str:
    return (_EPOCH + timedelta(seconds=seconds)).strftime("%H:%M:%S")


def _nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values spanning [lo, hi] (1, 2, 5 x 10^n steps)."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    ticks = []
    v = first
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 12))
        v += step
    return ticks


def timeline(report: Report, shape: TimelineShape = TL_WIDE) -> Timeline | None:
    """The stage timeline as the job's progression: one row per stage (in order of first appearance),
    a bar for each stretch the job spent in it, a stretch ending where the next stage began
    (Progress.segments; a report without them draws each stage from its first to its last line);
    laid out as `shape` says."""
    p = report.progress
    if p is None or not (p.segments or p.timeline):
        return None
    segments = p.segments or p.timeline
    rc = report.root_cause
    sources = {s.first_source for s in segments} | {s.last_source for s in segments}
    times = [(_parse_time(s.first_time), _parse_time(s.last_time)) for s in segments]
    # One file: log lines place every stage and the failure exactly. Several files have no common line
    # numbers, so their timestamps place the stages (when every stretch has them).
    use_time = len(sources) > 1 and all(a is not None and b is not None for a, b in times)
    if use_time:
        starts = [a for a, _ in times]
        ends = [max(b, a) for a, b in times]
    else:
        starts = [float(s.first_line) for s in segments]
        ends = [float(max(s.last_line, s.first_line)) for s in segments]
    lo, hi = min(starts), max(ends)
    failure_value = None
    failure_label = ""
    if rc is not None:
        if not use_time and rc.error_line is not None and rc.error_line.source in sources:
            failure_value = float(rc.error_line.line)
            failure_label = (
                f"failure: line {rc.error_line.line}"
                if shape.stacked
                else f"failure: {rc.error_line.source}:{rc.error_line.line}"
            )
        else:
            failure_value = hi
            failure_label = "failure (after the last stage line)"
        hi = max(hi, failure_value)
    if hi <= lo:
        hi = lo + 1
    left, right = shape.left, shape.width - shape.right

    def x(v: float) -> float:
        return round(left + (v - lo) / (hi - lo) * (right - left), 1)

    order = list(dict.fromkeys(s.stage for s in segments))
    # the stage the failure happened in, as the verdict says (none: the log does not show it; the
    # failure's place on the timeline still says where it came)
    failed_stage = rc.stage if rc is not None and rc.stage in order else None
    rows = []
    for r, stage in enumerate(order):
        y = shape.top + r * shape.row + (14 if shape.stacked else 0)
        bars = []
        mine = [i for i, s in enumerate(segments) if s.stage == stage]
        for i in mine:
            s = segments[i]
            x0, x1 = x(starts[i]), x(ends[i])
            if use_time:
                span = f"{s.first_time} - {s.last_time}"
            else:
                span = (
                    f"lines {s.first_line}-{s.last_line}"
                    if s.last_line != s.first_line
                    else f"line {s.first_line}"
                )
            bars.append(
                Bar(
                    x0,
                    max(TL_MIN_BAR, round(x1 - x0, 1)),
                    span,
                    f"{s.first_source}:{s.first_line} - {s.last_source}:{s.last_line}",
                )
            )
        first, last = segments[mine[0]], segments[mine[-1]]
        reach = (
            f"{first.first_time} - {last.last_time}"
            if use_time
            else f"lines {first.first_line}-{last.last_line}"
        )
        rows.append(
            Row(
                stage,
                y,
                y - 4 if shape.stacked else y + TL_BAR - 3,
                tuple(bars),
                f"{len(bars)} stretch(es), {reach}",
                stage == failed_stage,
            )
        )
    axis_y = shape.top + len(order) * shape.row + (0 if shape.stacked else 4)
    if use_time:
        ticks = tuple(Tick(x(lo + d), _clock(lo + d)) for d in _nice_ticks(0, hi - lo))
    else:
        ticks = tuple(Tick(x(v), f"{int(v):,}") for v in _nice_ticks(lo, hi) if v == int(v))
    return Timeline(
        shape.width,
        int(axis_y + TL_AXIS),
        axis_y,
        left,
        right,
        "time" if use_time else "log line",
        tuple(rows),
        ticks,
        x(failure_value) if failure_value is not None else None,
        failure_label,
        shape.name,
        shape.left if shape.stacked else shape.left - 8,
        "start" if shape.stacked else "end",
        "start" if failure_value is not None and x(failure_value) < shape.width / 2 else "end",
    )


def y_range(finite: list[float]) -> tuple[float, float]:
    """The value axis of a chart. Not simply [min, max]: on a short run noise of a few parts in a
    thousand would fill the height and look dramatic, so the range spans at least MIN_SPAN_SHARE of the
    largest magnitude (centred on the data); a positive series that comes near zero starts at zero."""
    if not finite:
        return 0.0, 1.0
    lo, hi = min(finite), max(finite)
    magnitude = max(abs(lo), abs(hi))
    if lo >= 0 and lo <= ZERO_BASE_SHARE * hi:
        lo = 0.0  # lengths, rewards, counts: read from zero when they come near it anyway
    floor = magnitude * MIN_SPAN_SHARE if magnitude else 1.0
    if hi - lo < floor:
        mid = (hi + lo) / 2
        lo, hi = mid - floor / 2, mid + floor / 2
        if min(finite) >= 0 > lo:  # a positive series never gets a negative axis
            lo, hi = 0.0, hi - lo
    pad = (hi - lo) * 0.08
    return lo - (pad if lo != 0 or min(finite) < 0 else 0.0), hi + pad


def smoothing_weight(n: int) -> float | None:
    """The EMA weight of the smoothed line: a window of about n / 50 steps (W&B draws a debiased EMA
    too); none below SMOOTH_MIN_POINTS points, where every point is seen."""
    if n < SMOOTH_MIN_POINTS:
        return None
    window = max(2.0, n / 50)
    return round(1 - 1 / window, 4)


def ema(values: list[float | None], weight: float) -> list[float | None]:
    """The debiased exponential moving average W&B and TensorBoard draw as a smoothed line:
    s_t = weight * s_(t-1) + (1 - weight) * x_t, divided by (1 - weight^t) so the start is not pulled
    towards zero. Missing and non-finite values are skipped (their smoothed value is None)."""
    out: list[float | None] = []
    acc = 0.0
    count = 0
    for v in values:
        if v is None or not math.isfinite(v):
            out.append(None)
            continue
        count += 1
        acc = weight * acc + (1 - weight) * v
        out.append(acc / (1 - weight**count) if weight < 1 else v)
    return out


def chart(series: MetricSeries, failure_step: int | None, anomaly_steps: set[int]) -> Chart:
    steps = list(series.steps)
    values = list(series.values)
    finite = [v for v in values if v is not None and math.isfinite(v)]
    left, top = MC_LEFT, MC_TOP
    right, bottom = MC_WIDTH - MC_RIGHT, MC_HEIGHT - MC_BOTTOM
    s_lo = min(steps) if steps else 0
    s_hi = max(steps) if steps else 1
    if failure_step is not None:
        s_lo, s_hi = min(s_lo, failure_step), max(s_hi, failure_step)
    v_lo, v_hi = y_range(finite)

    def x(step: float) -> float:
        if s_hi == s_lo:
            return round((left + right) / 2, 1)
        return round(left + (step - s_lo) / (s_hi - s_lo) * (right - left), 1)

    def y(v: float) -> float:
        return round(bottom - (v - v_lo) / (v_hi - v_lo) * (bottom - top), 1)

    # what is drawn: at most DRAW_MAX_POINTS points (the extremes of each stretch of steps kept, so the
    # highest spike is always on the line); markers only where a point is worth a look on its own
    pairs = list(zip(steps, values, strict=False))
    drawn_pairs = downsample(pairs, DRAW_MAX_POINTS)
    every_point = len(drawn_pairs) <= MARKER_MAX_POINTS
    points = []
    path: list[str] = []
    pen_down = False
    for step, v in drawn_pairs:
        marked = every_point or step in anomaly_steps
        if v is None:
            if marked:
                points.append(Point(x(step), bottom, step, "no value", "missing", step in anomaly_steps))
            pen_down = False
        elif not math.isfinite(v):
            points.append(
                Point(x(step), bottom if v < 0 else top, step, number(v), "nonfinite", step in anomaly_steps)
            )
            pen_down = False
        else:
            px, py = x(step), y(v)
            path.append(f"{'L' if pen_down else 'M'}{px} {py}")
            pen_down = True
            if marked:
                points.append(Point(px, py, step, number(v), "", step in anomaly_steps))
    weight = smoothing_weight(len(finite))
    ema_path = ""
    if weight is not None:
        smoothed = [(st, sv) for st, sv in zip(steps, ema(values, weight), strict=False) if sv is not None]
        # one point per pixel column is all a line needs: the smoothed value at the end of each stretch
        stride = max(1, -(-len(smoothed) // DRAW_MAX_POINTS))
        kept = smoothed[stride - 1 :: stride]
        if kept and kept[-1] != smoothed[-1]:
            kept.append(smoothed[-1])
        ema_path = " ".join(f"{'M' if i == 0 else 'L'}{x(st)} {y(sv)}" for i, (st, sv) in enumerate(kept))
    y_ticks = tuple((y(v), number(v)) for v in _nice_ticks(v_lo, v_hi, 4))
    x_ticks = tuple(Tick(x(v), str(int(v))) for v in _nice_ticks(s_lo, s_hi, 5) if v == int(v))
    return Chart(
        key=series.key,
        width=MC_WIDTH,
        height=MC_HEIGHT,
        plot=(left, top, right, bottom),
        path=" ".join(path),
        points=tuple(points),
        drawn=len(path),
        ema_path=ema_path,
        smoothing=weight,
        y_ticks=y_ticks,
        x_ticks=x_ticks,
        failure_x=x(failure_step) if failure_step is not None else None,
        failure_step=failure_step,
        last=number(values[-1]) if values else "-",
        low=number(min(finite)) if finite else "-",
        high=number(max(finite)) if finite else "-",
    )


def charts(report: Report) -> tuple[Chart, ...]:
    m = report.metrics
    if m is None or not m.series:
        return ()
    failure_step = None
    if report.failed:
        if report.progress is not None and report.progress.failure_step is not None:
            failure_step = report.progress.failure_step
        else:  # no better knowledge: the job failed after the last step it logged
            failure_step = max((max(s.steps) for s in m.series if s.steps), default=None)
    out = []
    for s in m.series:
        anomaly_steps = {a.step for a in m.anomalies if a.key == s.key}
        out.append(chart(s, failure_step, anomaly_steps))
    return tuple(out)


def view(report: Report) -> HtmlView:
    rc = report.root_cause
    evidence: tuple[EvidenceRow, ...] = ()
    window: tuple[EvidenceRow, ...] = ()
    evidence_source: str | None = None
    frames: tuple[FrameLine | FoldedFrames, ...] = ()
    roots: tuple[str, ...] = ()
    references: tuple[tuple[str, str | None], ...] = ()
    if rc is not None:
        err: Evidence | None = rc.error_line
        ew = error_window(rc)
        evidence_source, labels = evidence_locations([*rc.evidence, *ew.lines])

        def row(e: Evidence) -> EvidenceRow:
            is_error = err is not None and (e.source, e.line) == (err.source, err.line)
            return EvidenceRow(
                e.source, e.line, e.text, is_error, labels.get((e.source, e.line), str(e.line))
            )

        evidence = tuple(row(e) for e in rc.evidence)
        window = tuple(row(e) for e in ew.lines)
        if rc.traceback is not None:
            tb = rc.traceback
            listed: list = list(tb.frames)
            if tb.frames_cut:  # the scan kept the outermost and the innermost frames
                listed.insert(tb.frames_cut_after, Gap(tb.frames_cut))
            frames = tuple(fold_frames(tb, listed))
            roots = library_roots(rc.traceback.frames)
        references = tuple((ref, safe_href(ref)) for ref in rc.remediation.references)
    status = report.status
    verdict = (
        f"failed: {rc.category}" if rc else ("no log lines read" if report.empty else "no failure found")
    )
    if not report.complete:  # (no failure in what was read says nothing of the job's health)
        verdict = (
            f"{verdict}, {partial_words(report)}"
            if rc or report.stall
            else f"{partial_words(report)}: {verdict} in what was read"
        )
        status = status if rc or report.stall else "interrupted"
    findings = tuple(_finding_row(f) for f in report.findings)
    return HtmlView(
        title=f"verl-logscan: {verdict}",
        status=status,
        verdict=verdict,
        evidence=evidence,
        window=window,
        evidence_source=evidence_source,
        frames=frames,
        library_roots=roots,
        where=where(rc) if rc else "",
        step=step_text(report),
        error=cut_words(rc.message, BANNER_ERROR_CHARS) if rc else "",
        error_full=clip_cell(rc.message, FOLDED_ERROR_CHARS)
        if rc and len(rc.message) > BANNER_ERROR_CHARS
        else "",
        redacted=redaction_line(report),
        references=references,
        timeline=timeline(report),
        timeline_narrow=timeline(report, TL_NARROW),
        charts=charts(report),
        symptoms=tuple(_finding_row(f) for f in report.symptoms),
        findings=findings,
        findings_open=len(findings) <= FINDINGS_OPEN_ROWS,
        environment=tuple(env_rows(report)),
        confidence_pct=round(rc.confidence * 100) if rc else 0,
        anomalies=clip_cell(anomaly_text(report), BANNER_ERROR_CHARS),
    )


def render_html(report: Report) -> str:
    """The HTML report; log text without escape sequences and controls (reports.escape.without_controls),
    the rest of it escaped by the template."""
    report = without_controls(report)
    env = jinja_env(True)
    env.filters.setdefault("inline_code", inline_code)
    env.tests.setdefault("folded", lambda value: isinstance(value, FoldedFrames))
    return env.get_template("report.html.j2").render(r=report, v=view(report), number=number)
