"""Render a `FleetSummary` (one row per job, counts per status, category and stage) as text, Markdown,
HTML, CSV or JSON. Every table is a pandas DataFrame built here from the summary; the formats only
lay the same frames out, so they all say the same thing.

CSV holds the job rows only (one table per file); the counts follow from them. JSON holds the rows
and the counts, keys sorted, `schema_version` 1.
"""

from __future__ import annotations

import html
import json
import os
from typing import Any

import pandas as pd

from logparse.model import FleetSummary, JobRow, JobStatus
from reports.escape import csv_safe_frame, md_cell_code, md_text, terminal_text

FLEET_FORMATS = ("text", "md", "html", "csv", "json")
FLEET_SCHEMA_VERSION = 1
MISSING = "-"
TEXT_CELL_CHARS = 120  # a terminal cell longer than this is clipped (the message of an error row)

# the columns a person reads (text, md, html); CSV and JSON split `error at` into source and line
JOB_COLUMNS = ("job", "status", "root cause", "category", "stage", "last step", "confidence", "error at")
# the keys of a machine-readable row (CSV columns, JSON row keys)
ROW_KEYS = (
    "job",
    "status",
    "root_cause",
    "category",
    "stage",
    "last_step",
    "confidence",
    "error_source",
    "error_line",
    "message",
)


def _row_dict(row: JobRow) -> dict[str, Any]:
    """The machine-readable row (CSV, JSON): plain values, null where unknown."""
    return {
        "job": row.job,
        "status": row.status.value,
        "root_cause": row.root_cause,
        "category": row.category,
        "stage": row.stage,
        "last_step": row.last_step,
        "confidence": row.confidence,
        "error_source": row.error_source,
        "error_line": row.error_line,
        "message": row.message,
    }


def _error_at(row: JobRow) -> str | None:
    """Where the error is, relative to the job (the job column already names its folder or file):
    `rank0.log:88`, not the full path again."""
    if row.error_source is None:
        return None
    job = os.path.normpath(row.job)
    source = os.path.normpath(row.error_source)
    if source == job and row.error_line is not None:  # a one-file job: the line is all that is new
        return f"line {row.error_line}"
    base = job if os.path.isdir(row.job) else os.path.dirname(job)
    rel = (
        os.path.relpath(source, base) if base and source.startswith(base.rstrip(os.sep) + os.sep) else source
    )
    return f"{rel}:{row.error_line}" if row.error_line is not None else rel


def jobs_frame(summary: FleetSummary, messages: bool = True) -> pd.DataFrame:
    """One row per job, in the order given, with the columns a person reads (`message` when any job
    could not be read or failed with an unknown error, unless `messages` is off). Cells are strings
    (`-` where unknown)."""
    with_message = messages and any(j.message for j in summary.jobs)
    rows = []
    for j in summary.jobs:
        cells = [
            j.job,
            j.status.value,
            j.root_cause,
            j.category,
            j.stage,
            j.last_step,
            f"{j.confidence:.2f}" if j.confidence is not None else None,
            _error_at(j),
        ]
        if with_message:
            cells.append(j.message)
        rows.append([MISSING if c is None else str(c) for c in cells])
    columns = list(JOB_COLUMNS) + (["message"] if with_message else [])
    return pd.DataFrame(rows, columns=columns, dtype=object)


def counts_frame(counts: tuple[tuple[str, int], ...], key: str) -> pd.DataFrame:
    return pd.DataFrame([(k, n) for k, n in counts], columns=[key, "jobs"]).astype(
        {key: object, "jobs": "int64"}
    )


def _headline(summary: FleetSummary) -> str:
    counts = dict(summary.status_counts())
    parts = [
        f"{counts[s.value]} {s.value}"
        for s in (JobStatus.FAILED, JobStatus.STALLED, JobStatus.HEALTHY, JobStatus.ERROR)
        if counts[s.value] or s not in (JobStatus.ERROR, JobStatus.STALLED)
    ]
    line = f"{len(summary.jobs)} job(s): " + ", ".join(parts)
    if not summary.complete:
        line += f" (incomplete: interrupted before {len(summary.pending)} more job(s))"
    return line


# -- text ------------------------------------------------------------------------------------------
def _text_cell(value: object) -> str:
    text = terminal_text(value)  # no escape sequences from a path or a message onto the terminal
    return text if len(text) <= TEXT_CELL_CHARS else text[: TEXT_CELL_CHARS - 1] + "…"


_NUMERIC_COLUMNS = {"last step", "confidence", "jobs", "step", "conf."}
# Which columns give up width, in order, when a table is wider than the terminal, and how far: the
# paths first (cut on the left: a path's end names the job), then the ids. Status and the numbers
# never shrink.
_SHRINK = (
    ("job", 14, "left"),
    ("error at", 8, "left"),
    ("root cause", 10, "right"),
    ("category", 10, "right"),
    ("stage", 8, "right"),
)
_LAST_RESORT = 5  # the narrowest a shrinking column gets
# short headers on a terminal, so that the job table fits 80 columns
_TEXT_HEADERS = {"last step": "step", "confidence": "conf."}
_GAP = 2


def _cut(text: str, width: int, side: str) -> str:
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    return "…" + text[len(text) - width + 1 :] if side == "left" else text[: width - 1] + "…"


def _text_table(frame: pd.DataFrame, width: int | None = None) -> str:
    """Columns two spaces apart, text left-aligned, numbers right-aligned, no trailing blanks; with
    `width`, the wide columns shrink (see _SHRINK) until the table fits, as far as their minimums allow."""
    cells = frame.astype(str).map(terminal_text)  # no escape sequences from a path or a message
    columns = [str(c) for c in cells.columns]
    widths = [min(max([len(c)] + [len(v) for v in cells[c]]), TEXT_CELL_CHARS) for c in columns]
    if width is not None:
        excess = sum(widths) + _GAP * (len(widths) - 1) - width
        # first down to each column's minimum (or its header), then, on a very narrow terminal, further
        for floor in (lambda name, minimum: max(minimum, len(name)), lambda name, minimum: _LAST_RESORT):
            for name, minimum, _ in _SHRINK:
                if excess <= 0:
                    break
                if name in columns:
                    i = columns.index(name)
                    give = min(excess, max(widths[i] - floor(name, minimum), 0))
                    widths[i] -= give
                    excess -= give
    sides = {name: side for name, _, side in _SHRINK}
    right = [c in _NUMERIC_COLUMNS for c in columns]

    def line(values: list[str]) -> str:
        values = [_cut(v, w, sides.get(c, "right")) for v, w, c in zip(values, widths, columns, strict=True)]
        return "  ".join(
            v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right, strict=True)
        ).rstrip()

    return "\n".join([line(columns)] + [line(list(r)) for r in cells.itertuples(index=False)])


def render_fleet_text(summary: FleetSummary, width: int | None = None) -> str:
    """The fleet summary for a terminal; `width`: its columns (the job table is fitted to them). A
    row's message (why a job could not be read, the error of an `unknown` failure) goes on an
    indented line under the row rather than in a column: one long message would widen every row."""
    frame = jobs_frame(summary, messages=False).rename(columns=_TEXT_HEADERS)
    table = _text_table(frame, width).split("\n")
    lines = table[:1]
    # (strict=False: a job name holding a line break spans more than one line of the table)
    for row, body in zip(summary.jobs, table[1:], strict=False):
        lines.append(body)
        if row.message:
            note = "    " + _text_cell(" ".join(row.message.split()))
            lines.append(_cut(note, width, "right") if width is not None else note)
    out = [f"fleet: {_headline(summary)}", "", "\n".join(lines)]
    if summary.category_counts():
        out += [
            "",
            "failed jobs by category",
            _text_table(counts_frame(summary.category_counts(), "category")),
        ]
        out += ["", "failed jobs by stage", _text_table(counts_frame(summary.stage_counts(), "stage"))]
    return "\n".join(out) + "\n"


# -- Markdown --------------------------------------------------------------------------------------
_MD_CODE_COLUMNS = {"job", "root cause", "error at"}


def _md_table(frame: pd.DataFrame) -> str:
    def cell(column: str, value: object) -> str:
        if value == MISSING:
            return MISSING
        return md_cell_code(value) if column in _MD_CODE_COLUMNS else md_text(value)

    lines = [
        "| " + " | ".join(md_text(c) for c in frame.columns) + " |",
        "|"
        + "|".join("---:" if c in ("last step", "confidence", "jobs") else "---" for c in frame.columns)
        + "|",
    ]
    for record in frame.itertuples(index=False):
        lines.append("| " + " | ".join(cell(c, v) for c, v in zip(frame.columns, record, strict=True)) + " |")
    return "\n".join(lines)


def render_fleet_markdown(summary: FleetSummary) -> str:
    out = [
        "## verl-logscan fleet summary",
        "",
        md_text(_headline(summary)),
        "",
        _md_table(jobs_frame(summary)),
    ]
    if summary.category_counts():
        out += [
            "",
            "### Failed jobs by category",
            "",
            _md_table(counts_frame(summary.category_counts(), "category")),
        ]
        out += ["", "### Failed jobs by stage", "", _md_table(counts_frame(summary.stage_counts(), "stage"))]
    return "\n".join(out) + "\n"


# -- HTML ------------------------------------------------------------------------------------------
_HTML_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}"
    "th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;font-size:.9em}"
    "th{background:#f3f3f3}"
)


def _html_table(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, escape=True, border=0, classes="fleet")


def render_fleet_html(summary: FleetSummary) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>verl-logscan fleet summary</title>",
        f"<style>{_HTML_STYLE}</style></head><body>",
        "<h1>verl-logscan fleet summary</h1>",
        f"<p>{html.escape(_headline(summary))}</p>",
        _html_table(jobs_frame(summary)),
    ]
    if summary.category_counts():
        parts += [
            "<h2>Failed jobs by category</h2>",
            _html_table(counts_frame(summary.category_counts(), "category")),
            "<h2>Failed jobs by stage</h2>",
            _html_table(counts_frame(summary.stage_counts(), "stage")),
        ]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# -- CSV and JSON ----------------------------------------------------------------------------------
def render_fleet_csv(summary: FleetSummary) -> str:
    frame = pd.DataFrame([_row_dict(j) for j in summary.jobs], columns=list(ROW_KEYS), dtype=object)
    return csv_safe_frame(frame).to_csv(index=False, lineterminator="\n")  # no formula runs in a spreadsheet


def fleet_to_dict(summary: FleetSummary) -> dict[str, Any]:
    return {
        "schema_version": FLEET_SCHEMA_VERSION,
        "complete": summary.complete,
        "not_analysed": list(summary.pending),
        "jobs": [_row_dict(j) for j in summary.jobs],
        "counts": {
            "status": dict(summary.status_counts()),
            "category": dict(summary.category_counts()),
            "stage": dict(summary.stage_counts()),
        },
    }


def render_fleet_json(summary: FleetSummary) -> str:
    return (
        json.dumps(fleet_to_dict(summary), indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
        + "\n"
    )


def render_fleet(summary: FleetSummary, fmt: str, width: int | None = None) -> str:
    """`summary` as `fmt`; `width` (text only): the terminal's columns, which the job table fits."""
    if fmt == "text":
        return render_fleet_text(summary, width)
    renderers = {
        "text": render_fleet_text,
        "md": render_fleet_markdown,
        "html": render_fleet_html,
        "csv": render_fleet_csv,
        "json": render_fleet_json,
    }
    if fmt not in renderers:
        raise ValueError(f"unknown fleet format {fmt!r}; one of {', '.join(FLEET_FORMATS)}")
    return renderers[fmt](summary)
