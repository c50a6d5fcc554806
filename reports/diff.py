"""`verl-logscan diff GOOD BAD` as text, Markdown, HTML and JSON (reports/diff.schema.json). Presents a
finished DiffReport; decides nothing."""

from __future__ import annotations

import html
import json
import math
import os
from typing import Any

from logparse.model import DiffReport, Divergence, EnvChange, MetricSeries, NewLine, RunSummary
from reports.escape import md_cell_code, md_text, without_controls
from reports.jsonreport import evidence_json
from reports.render import _paint, _plain, _unmark, _wrap_words

TEXT_LINE_CHARS = 160
CHART_W, CHART_H, PAD = 560, 160, 30


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
    return {"key": c.key, "kind": c.kind, "good": c.good, "bad": c.bad}


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
    good = c.good if c.good is not None else "(not shown)"
    bad = c.bad if c.bad is not None else "(not shown)"
    return f"{c.key}: {good} -> {bad}"


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
    head = (
        f"DIFF  GOOD {paint(_plain(g), *_verdict_style(g))}  vs  BAD {paint(_plain(b), *_verdict_style(b))}"
    )
    out.lines += [head, ""]
    out.add("Environment and config (GOOD -> BAD):", style=("bold",))
    for c in diff.changes:
        out.add(_change_text(c), INDENT)
    if not diff.changes:
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


def _shown(value: str | None) -> str:
    return "(not shown)" if value is None else md_cell_code(value)


def render_diff_markdown(diff: DiffReport) -> str:
    out = ["## verl-logscan diff", ""]
    out.append(f"- **GOOD:** {md_text(diff.good.verdict)}")
    out.append(f"- **BAD:** {md_text(diff.bad.verdict)}")
    out.append(f"- **In GOOD:** {md_text(diff.bad_in_good_detail)}")
    out += ["", "### Environment and config", ""]
    if diff.changes:
        out += ["| key | GOOD | BAD |", "|---|---|---|"]
        out += [f"| {_cell(c.key)} | {_shown(c.good)} | {_shown(c.bad)} |" for c in diff.changes]
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


def _or_not_shown(value: str | None) -> str:
    return "(not shown)" if value is None else value


def _chart(good: MetricSeries, bad: MetricSeries, at: int | None) -> str:
    """Both runs' series of one key on one chart (SVG): GOOD grey, BAD red; non-finite values marked."""
    pts = [(s, v) for series in (good, bad) for s, v in zip(series.steps, series.values, strict=False)]
    finite = [v for _, v in pts if v is not None and math.isfinite(v)]
    steps = [s for s, _ in pts]
    if not finite or not steps:
        return ""
    lo, hi = min(finite), max(finite)
    hi = hi if hi > lo else lo + 1.0
    s0, s1 = min(steps), max(steps)
    s1 = s1 if s1 > s0 else s0 + 1

    def x(step: int) -> float:
        return PAD + (step - s0) / (s1 - s0) * (CHART_W - 2 * PAD)

    def y(v: float) -> float:
        return CHART_H - PAD - (v - lo) / (hi - lo) * (CHART_H - 2 * PAD)

    parts = [f'<svg class="diff-chart" width="{CHART_W}" height="{CHART_H}" role="img">']
    parts.append(f"<title>{_e(bad.key)}: GOOD and BAD</title>")
    for series, color, name in ((good, "#777", "good"), (bad, "#c0392b", "bad")):
        line = " ".join(
            f"{x(s):.1f},{y(v):.1f}"
            for s, v in zip(series.steps, series.values, strict=False)
            if v is not None and math.isfinite(v)
        )
        parts.append(
            f'<polyline data-run="{name}" fill="none" stroke="{color}" stroke-width="2" points="{line}"/>'
        )
        for s, v in zip(series.steps, series.values, strict=False):
            if v is not None and not math.isfinite(v):
                parts.append(
                    f'<text x="{x(s):.1f}" y="{PAD - 8}" fill="{color}" font-size="11">{_e(v)}</text>'
                )
    if at is not None:
        parts.append(
            f'<line x1="{x(at):.1f}" x2="{x(at):.1f}" y1="{PAD}" y2="{CHART_H - PAD}" '
            'stroke="#c0392b" stroke-dasharray="4"/>'
        )
    caption = f"steps {s0}-{s1}; {_e(bad.key)} {lo:.4g} to {hi:.4g}; grey GOOD, red BAD"
    parts.append(f'<text x="{PAD}" y="{CHART_H - 8}" font-size="11">{caption}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _charts(diff: DiffReport) -> str:
    first = {d.key: d.step for d in diff.divergences if d.kind == "metric"}
    pairs = sorted(diff.series, key=lambda gb: (gb[1].key not in first, gb[1].key))
    return "\n".join(_chart(g, b, first.get(b.key)) for g, b in pairs[:6])


def render_diff_html(diff: DiffReport) -> str:
    rows = "".join(
        f"<tr><td><code>{_e(c.key)}</code></td><td>{_e(_or_not_shown(c.good))}</td>"
        f"<td>{_e(_or_not_shown(c.bad))}</td></tr>"
        for c in diff.changes
    )
    divs = "".join(f"<li>{_e(d.detail)}</li>" for d in diff.divergences)
    lines = "".join(
        f"<tr><td><code>{_e(n.first.source)}:{n.first.line}</code></td><td>{_e(', '.join(n.streams))}</td>"
        f"<td>{_e(n.stage)}</td><td>{n.count}</td><td><pre>{_e(n.first.text.strip())}</pre></td></tr>"
        for n in diff.new_lines
    )
    notes = "".join(f"<li>{_e(n)}</li>" for n in diff.notes)
    body = [
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>verl-logscan diff</title>',
        "<style>body{font-family:system-ui,sans-serif;max-width:1000px;margin:24px auto;padding:0 16px}"
        "table{border-collapse:collapse}"
        "td,th{border:1px solid #ddd;padding:3px 8px;vertical-align:top;text-align:left}"
        "pre{margin:0;white-space:pre-wrap}.bad{color:#c0392b}</style></head><body>",
        "<h1>verl-logscan diff</h1>",
        f"<p>GOOD: <strong>{_e(diff.good.verdict)}</strong>; "
        f'BAD: <strong class="bad">{_e(diff.bad.verdict)}</strong>. '
        f"{_e(diff.bad_in_good_detail)}.</p>",
        '<section id="changes"><h2>Environment and config</h2>',
        f"<table><tr><th>key</th><th>GOOD</th><th>BAD</th></tr>{rows}</table>"
        if rows
        else "<p>No difference the logs show.</p>",
        '</section><section id="divergence"><h2>First divergence</h2>',
        f"<ol>{divs}</ol>" if divs else "<p>None: BAD's progress stays within GOOD's.</p>",
        _charts(diff),
        f'</section><section id="new-lines"><h2>Lines new in BAD ({diff.new_templates})</h2>',
        "<table><tr><th>where</th><th>streams</th><th>stage</th><th>lines</th><th>first line</th></tr>"
        f"{lines}</table>"
        if lines
        else "<p>None.</p>",
        "</section>",
        f'<ul class="notes">{notes}</ul>' if notes else "",
        "</body></html>",
    ]
    return "\n".join(body) + "\n"
