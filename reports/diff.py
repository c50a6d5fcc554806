"""`verl-logscan diff GOOD BAD` as text, Markdown, HTML and JSON (reports/diff.schema.json). Presents a
finished DiffReport; decides nothing."""

from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path
from typing import Any

from logparse.model import DiffReport, Divergence, EnvChange, MetricSeries, NewLine, RunSummary
from reports.escape import md_cell_code, md_text, without_controls
from reports.jsonreport import evidence_json
from reports.render import _paint, _plain, _unmark, _wrap_words

TEXT_LINE_CHARS = 160
CHART_W, CHART_H, CHART_LEFT = 560, 200, 56


def render_diff(diff: DiffReport, fmt: str, color: bool = False, width: int | None = None) -> str:
    """The diff in `fmt`; log text carries no control character into any format (text: none a
    terminal acts on). Text only: `color` (ANSI colours) and `width` (a terminal's columns, which
    every line wraps to; None: a file or a pipe)."""
    if fmt != "text":
        diff = without_controls(diff)
    if fmt == "json":
        return json.dumps(without_controls(diff_dict(diff)), indent=2, allow_nan=False) + "\n"
    if fmt == "md":
        return render_diff_markdown(diff)
    if fmt == "html":
        return render_diff_html(diff)
    return render_diff_text(diff, color=color, width=width)


# -- JSON ----------------------------------------------------------------------------------------------
def _run(r: RunSummary) -> dict[str, Any]:
    return {
        "status": r.status,
        "verdict": r.verdict,
        "root_cause": r.root_cause,
        "category": r.category,
        "stage_reached": r.stage_reached,
        "last_step": r.last_step,
        "completed": r.completed,
        "inputs": [{"path": i.path, "lines": i.lines, "bytes": i.bytes} for i in r.inputs],
        "error_line": evidence_json(r.error_line) if r.error_line else None,
    }


def _change(c: EnvChange) -> dict[str, Any]:
    return {"key": c.key, "kind": c.kind, "good": c.good, "bad": c.bad, "why": c.why}


def _divergence(d: Divergence) -> dict[str, Any]:
    return {"kind": d.kind, "step": d.step, "key": d.key, "good": d.good, "bad": d.bad, "detail": d.detail}


def _new_line(n: NewLine) -> dict[str, Any]:
    return {
        "template": n.template,
        "first": evidence_json(n.first),
        "count": n.count,
        "streams": list(n.streams),
        "stage": n.stage,
        "level": n.level,
        "score": n.score,
        "folded": n.folded,
        "traceback_at": n.traceback_at,
    }


def _value(v: float | None) -> float | str | None:
    return v if v is None or math.isfinite(v) else str(v)


def diff_dict(diff: DiffReport) -> dict[str, Any]:
    return {
        "schema_version": diff.schema_version,
        "kind": "diff",
        "differs": diff.differs,
        "good": _run(diff.good),
        "bad": _run(diff.bad),
        "lead": diff.lead,
        "changes": [_change(c) for c in diff.changes],
        "divergences": [_divergence(d) for d in diff.divergences],
        "new_lines": [_new_line(n) for n in diff.new_lines],
        "new_templates": diff.new_templates,
        "new_entries": diff.new_entries,
        "bad_in_good": {"answer": diff.bad_in_good, "detail": diff.bad_in_good_detail},
        "series": [{"key": b.key, "good": _points(g), "bad": _points(b)} for g, b in diff.series],
        "notes": list(diff.notes),
        "redactions": dict(diff.redactions),
    }


def _points(s: MetricSeries) -> list[list[Any]]:
    return [[step, _value(v)] for step, v in zip(s.steps, s.values, strict=False)]


# -- text ----------------------------------------------------------------------------------------------
TEXT_ROW_LINES = 3  # a new line's text on a terminal: wrapped to at most this many rows
INDENT = 2


def _cut(text: str, limit: int = TEXT_LINE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _change_text(c: EnvChange) -> str:
    if c.one_run_only:
        side, value = ("GOOD", c.good) if c.bad is None else ("BAD", c.bad)
        return f"{c.key}: {value} (shown in {side} only)"
    return f"{c.key}: {c.good} -> {c.bad}" + (f" ({c.why})" if c.why else "")


def _folded_words(n: NewLine) -> str:
    if not n.folded:
        return ""
    return f"+{n.folded} more line{'s' if n.folded > 1 else ''} of its traceback"


def _new_line_where(n: NewLine) -> str:
    parts = [f"{n.first.source}:{n.first.line}"]
    if n.streams:
        parts.append(", ".join(n.streams))
    if n.stage:
        parts.append(n.stage)
    if n.count > 1:
        parts.append(f"{n.count}x")
    if n.folded:
        parts.append(_folded_words(n))
    return "; ".join(parts)


def new_lines_heading(diff: DiffReport) -> str:
    """`Lines new in BAD (...)`: the entries in all, the ones shown, the templates they hold."""
    shown, entries = len(diff.new_lines), diff.new_entries or len(diff.new_lines)
    count = f"{entries} entr{'y' if entries == 1 else 'ies'}"
    if diff.new_templates > entries:
        count += f" from {diff.new_templates} templates"
    if shown < entries:
        count += f", first {shown} shown"
    return f"Lines new in BAD ({count})" if entries else "Lines new in BAD"


class _TextOut:
    """The lines of the text diff: each wrapped to `width` (None: one line each, cut at
    TEXT_LINE_CHARS), continuation rows under the text's first column, painted once wrapped."""

    def __init__(self, width: int | None, paint) -> None:
        self.width, self.paint, self.lines = width, paint, []

    def add(self, text: str, indent: int = 0, style: tuple[str, ...] = (), rows: int = 2) -> None:
        text = _plain(text)
        if self.width is None:
            self.lines.append(" " * indent + self.paint(_cut(text), *style))
            return
        room = max(self.width - indent, 20)
        hang = indent + (2 if indent else 4)
        for i, row in enumerate(_wrap_words(text, room, max(self.width - hang, 20), rows)):
            self.lines.append(" " * (indent if i == 0 else hang) + self.paint(row, *style))


def _verdict_style(verdict: str) -> tuple[str, ...]:
    if verdict.startswith("failed"):
        return ("red", "bold")
    if verdict.startswith("stalled"):
        return ("magenta", "bold")
    return ("green", "bold") if verdict == "healthy" else ("yellow", "bold")


def render_diff_text(diff: DiffReport, color: bool = False, width: int | None = None) -> str:
    """The diff for a terminal: wrapped to `width` columns (None: a file or a pipe, one line per
    field), coloured when `color` (the verdicts, the headings, where each line is)."""
    mark = os.urandom(8).hex()
    paint = _paint(color, mark)
    out = _TextOut(width, paint)
    g, b = diff.good.verdict, diff.bad.verdict
    good, bad = f"DIFF  GOOD {_plain(g)}", f"  vs  BAD {_plain(b)}"
    if width is not None and len(good) + len(bad) > width:  # BAD's verdict under GOOD's
        out.add(good, style=_verdict_style(g))
        out.add(bad.strip(), INDENT, _verdict_style(b))
    else:
        painted_g, painted_b = paint(_plain(g), *_verdict_style(g)), paint(_plain(b), *_verdict_style(b))
        out.lines.append(f"DIFF  GOOD {painted_g}  vs  BAD {painted_b}")
    if diff.lead:
        out.add(f"First difference: {diff.lead}", style=("bold",))
    out.lines.append("")
    out.add("Environment and config (GOOD -> BAD):", style=("bold",))
    for c in diff.changes:
        out.add(_change_text(c), INDENT)
    if all(c.one_run_only for c in diff.changes):
        out.add("no difference the logs show", INDENT, ("dim",))
    out.add("First divergence:", style=("bold",))
    for d in diff.divergences:
        out.add(d.detail, INDENT, ("yellow",))
    if not diff.divergences:
        out.add("none: BAD's progress stays within GOOD's", INDENT, ("dim",))
    out.add(new_lines_heading(diff) + ", most error-like first:", style=("bold",))
    for n in diff.new_lines:
        out.add(_new_line_where(n), INDENT, ("dim",))
        out.add(n.first.text.strip(), INDENT * 2, (), TEXT_ROW_LINES)
    if not diff.new_lines:
        out.add("none", INDENT, ("dim",))
    out.add(f"BAD's verdict: {b}", style=_verdict_style(b))
    if diff.bad.error_line is not None:
        e = diff.bad.error_line
        out.add(f"{e.source}:{e.line}: {e.text.strip()}", INDENT, (), TEXT_ROW_LINES)
    out.add(f"In GOOD: {diff.bad_in_good_detail}")
    for note in diff.notes:
        out.add(f"note: {note}", 0, ("dim",))
    text = "\n".join(out.lines) + "\n"
    # log text carries no escape sequence onto the terminal (_plain); then the colours
    return _unmark(text, mark) if color else text


# -- Markdown ------------------------------------------------------------------------------------------
def _cell(value: object) -> str:
    return "" if value is None else md_cell_code(value)


def side_text(c: EnvChange, side: str) -> str:
    """One run's value of a change: blank where the log did not show it ("shown in BAD only" on the
    other side: a value one run does not show is no difference), the reason it leads on BAD's."""
    value, other = (c.good, c.bad) if side == "GOOD" else (c.bad, c.good)
    if value is None:
        return ""
    if other is None:
        return f"{value} (shown in {side} only)"
    return f"{value} ({c.why})" if side == "BAD" and c.why else value


def _shown(c: EnvChange, side: str) -> str:
    text = side_text(c, side)
    return md_cell_code(text) if text else "-"


def render_diff_markdown(diff: DiffReport) -> str:
    out = ["## verl-logscan diff", ""]
    out.append(f"- **GOOD:** {md_text(diff.good.verdict)}")
    out.append(f"- **BAD:** {md_text(diff.bad.verdict)}")
    out.append(f"- **In GOOD:** {md_text(diff.bad_in_good_detail)}")
    if diff.lead:
        out.append(f"- **First difference:** {md_text(diff.lead)}")
    out += ["", "### Environment and config", ""]
    if diff.changes:
        out += ["| key | GOOD | BAD |", "|---|---|---|"]
        out += [f"| {_cell(c.key)} | {_shown(c, 'GOOD')} | {_shown(c, 'BAD')} |" for c in diff.changes]
    else:
        out.append("No difference the logs show.")
    out += ["", "### First divergence", ""]
    out += [f"- {md_text(d.detail)}" for d in diff.divergences] or [
        "None: BAD's progress stays within GOOD's."
    ]
    out += ["", f"### {new_lines_heading(diff)}", ""]
    if diff.new_lines:
        out += ["| where | streams | stage | line |", "|---|---|---|---|"]
        for n in diff.new_lines:
            where = f"{n.first.source}:{n.first.line}" + (f" ({n.count}x)" if n.count > 1 else "")
            where += f"; {_folded_words(n)}" if n.folded else ""
            out.append(
                f"| {_cell(where)} | {md_text(', '.join(n.streams))} | {md_text(n.stage or '')} | "
                f"{_cell(_cut(n.first.text.strip()))} |"
            )
    else:
        out.append("None.")
    if diff.notes:
        out += ["", *[f"> {md_text(n)}" for n in diff.notes]]
    return "\n".join(out) + "\n"


# -- HTML ----------------------------------------------------------------------------------------------
def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _axis_number(v: float) -> str:
    return f"{v:.4g}"


def _chart(good: MetricSeries, bad: MetricSeries, at: int | None) -> str:
    """Both runs' series of one key on one chart (SVG, scaled to its box): value and step axes with
    ticks, GOOD grey, BAD red, a non-finite value marked at the top, BAD's first divergence dashed."""
    from reports.html import _nice_ticks, y_range  # (the scan report's axes: one way to draw them)

    pts = [(s, v) for series in (good, bad) for s, v in zip(series.steps, series.values, strict=False)]
    finite = [v for _, v in pts if v is not None and math.isfinite(v)]
    steps = [s for s, _ in pts]
    if not finite or not steps:
        return ""
    lo, hi = y_range(finite)
    s0, s1 = min(steps), max(steps)
    s1 = s1 if s1 > s0 else s0 + 1
    left, right, top, bottom = CHART_LEFT, CHART_W - 12, 16, CHART_H - 28

    def x(step: float) -> float:
        return left + (step - s0) / (s1 - s0) * (right - left)

    def y(v: float) -> float:
        return bottom - (v - lo) / (hi - lo) * (bottom - top)

    parts = [
        f'<figure class="chart"><figcaption><code>{_e(bad.key)}</code> <span class="legend">'
        '<span class="key good">GOOD</span> <span class="key bad">BAD</span></span></figcaption>',
        f'<svg class="diff-chart" viewBox="0 0 {CHART_W} {CHART_H}" role="img">',
        f"<title>{_e(bad.key)}: GOOD and BAD by step</title>",
        f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{bottom}"/>',
        f'<line class="axis" x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}"/>',
    ]
    for v in _nice_ticks(lo, hi, 4):
        parts.append(
            f'<line class="grid" x1="{left}" x2="{right}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>'
            f'<text class="y-tick" x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">'
            f"{_axis_number(v)}</text>"
        )
    for v in _nice_ticks(s0, s1, 5):
        if v == int(v):
            parts.append(
                f'<text class="x-tick" x="{x(v):.1f}" y="{bottom + 16}" text-anchor="middle">{int(v)}</text>'
            )
    parts.append(f'<text class="x-label" x="{right}" y="{CHART_H - 1}" text-anchor="end">step</text>')
    for series, name in ((good, "good"), (bad, "bad")):
        line = " ".join(
            f"{x(s):.1f},{y(v):.1f}"
            for s, v in zip(series.steps, series.values, strict=False)
            if v is not None and math.isfinite(v)
        )
        parts.append(f'<polyline class="run {name}" data-run="{name}" points="{line}"/>')
        for s, v in zip(series.steps, series.values, strict=False):
            if v is not None and not math.isfinite(v):
                parts.append(
                    f'<text class="nonfinite {name}" x="{x(s):.1f}" y="{top + 10}" text-anchor="middle">'
                    f"{_e(v)}</text>"
                )
    if at is not None:
        parts.append(f'<line class="diverges" x1="{x(at):.1f}" x2="{x(at):.1f}" y1="{top}" y2="{bottom}"/>')
    parts.append("</svg></figure>")
    return "".join(parts)


def _charts(diff: DiffReport) -> str:
    first = {d.key: d.step for d in diff.divergences if d.kind == "metric"}
    pairs = sorted(diff.series, key=lambda gb: (gb[1].key not in first, gb[1].key))
    drawn = [c for g, b in pairs[:6] if (c := _chart(g, b, first.get(b.key)))]
    return f'<div class="charts">{"".join(drawn)}</div>' if drawn else ""


def _status(diff: DiffReport) -> str:
    """The banner's class and word: BAD's status when the runs differ, else healthy (no difference)."""
    if not diff.differs:
        return "healthy"
    return "stalled" if diff.bad.verdict.startswith("stalled") else "failed"


DIFF_CSS = (Path(__file__).parent / "templates" / "diff.css").read_text(encoding="utf-8")


def _cells(*cells: tuple[str, str, str]) -> str:
    """A row of (label, class, HTML) cells; the label heads the cell's card line on a phone."""
    return (
        "<tr>"
        + "".join(f'<td data-label="{lab}" class="{cls}">{body}</td>' for lab, cls, body in cells)
        + "</tr>"
    )


def _new_line_row(n: NewLine) -> str:
    where = f"<code>{_e(n.first.source)}:{n.first.line}</code>"
    if n.folded:
        where += f'<span class="folded">{_e(_folded_words(n))}</span>'
    return _cells(
        ("where", "", where),
        ("streams", "", _e(", ".join(n.streams))),
        ("stage", "", _e(n.stage)),
        ("lines", "", str(n.count)),
        ("line", "", f"<pre>{_e(_cut(n.first.text.strip(), 2000))}</pre>"),
    )


def render_diff_html(diff: DiffReport) -> str:
    status = _status(diff)
    rows = "".join(
        _cells(
            ("key", "", f"<code>{_e(c.key)}</code>"),
            ("GOOD", "", _e(side_text(c, "GOOD") or "-")),
            ("BAD", "bad-run", _e(side_text(c, "BAD") or "-")),
        )
        for c in diff.changes
    )
    divs = "".join(f"<li>{_e(d.detail)}</li>" for d in diff.divergences)
    lines = "".join(_new_line_row(n) for n in diff.new_lines)
    notes = "".join(f"<li>{_e(n)}</li>" for n in diff.notes)
    error = diff.bad.error_line
    where = (
        f"<code>{_e(error.source)}:{error.line}</code> <code>{_e(_cut(error.text.strip(), 300))}</code>"
        if error
        else ""
    )
    body = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta name="generator" content="verl-logscan diff (schema_version {diff.schema_version})">',
        f"<title>verl-logscan diff: {'the runs differ' if diff.differs else 'no difference found'}</title>",
        f"<style>{DIFF_CSS}</style></head><body><main>",
        f'<header class="banner {status}" id="verdict"><div class="top"><span class="status">'
        f"{'DIFFERS' if diff.differs else 'SAME'}</span>"
        f'<span class="muted">GOOD against BAD: what changed first</span></div>',
        f'<h1 class="summary">BAD {_e(diff.bad.verdict)}; GOOD {_e(diff.good.verdict)}</h1>',
        '<dl class="facts">',
        f"<dt>GOOD</dt><dd>{_e(diff.good.verdict)}</dd>",
        f'<dt>BAD</dt><dd class="bad-run">{_e(diff.bad.verdict)}</dd>',
        f"<dt>error</dt><dd>{where}</dd>" if where else "",
        f"<dt>in GOOD</dt><dd>{_e(diff.bad_in_good_detail)}</dd>",
        f"<dt>first difference</dt><dd>{_e(diff.lead)}</dd>" if diff.lead else "",
        "</dl>",
        '<nav><a href="#changes">environment and config</a><a href="#divergence">first divergence</a>'
        '<a href="#new-lines">lines new in BAD</a></nav></header>',
        '<section id="changes"><h2>Environment and config</h2>',
        '<table class="cards changes"><thead><tr><th>key</th><th>GOOD</th><th>BAD</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
        if rows
        else "<p>No difference the logs show.</p>",
        '</section><section id="divergence"><h2>First divergence</h2>',
        f"<ol>{divs}</ol>" if divs else "<p>None: BAD's progress stays within GOOD's.</p>",
        _charts(diff),
        f'</section><section id="new-lines"><h2>{_e(new_lines_heading(diff))}</h2>',
        '<table class="cards lines"><colgroup><col class="where"><col class="streams"><col class="stage">'
        '<col class="count"><col></colgroup><thead><tr><th>where</th><th>streams</th><th>stage</th>'
        f"<th>lines</th><th>first line</th></tr></thead><tbody>{lines}</tbody></table>"
        if lines
        else "<p>None.</p>",
        "</section>",
        f'<ul class="notes">{notes}</ul>' if notes else "",
        "<footer>verl-logscan diff</footer></main></body></html>",
    ]
    return "\n".join(b for b in body if b) + "\n"
