"""Render a `FleetSummary` (one row per job, counts per status, category and stage) as text, Markdown,
HTML, CSV or JSON. Every table is a pandas DataFrame built here from the summary; the formats only
lay the same frames out, so they all say the same thing.

CSV holds the job rows only (one table per file); the counts follow from them. JSON holds the rows
and the counts, keys sorted, `schema_version` 1.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from dataclasses import dataclass
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
        "report": row.report,
    }


def _error_at(row: JobRow) -> str | None:
    """Where the error is, `path:line` as the row gives it (relative to where the command ran, else
    absolute: logparse.fleet.from_cwd), which a terminal or an editor opens."""
    if row.error_source is None:
        return None
    return f"{row.error_source}:{row.error_line}" if row.error_line is not None else row.error_source


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
# Which columns go, in order, when the job table is wider than the terminal: whole columns first (a
# column cut to a few characters says nothing), names last. Job, status and root cause always stay.
_DROP = ("conf.", "step", "category", "stage")
# ... then these shrink (cut on the right, ids; a path on the left, after the end of a path named it:
# `error at` keeps its `file:line`)
_SHRINK = (
    ("error at", 16, "left"),
    ("root cause", 12, "right"),
    ("job", 14, "left"),
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


def short_names(jobs: list[str]) -> list[str]:
    """Each job named by the fewest last parts of its path that tell it from every other job
    (`run-7/`, `a/rank0.log` and `b/rank0.log`), as editors name tabs of files with the same name: a
    fleet's jobs mostly share all but the end of their paths."""
    parts = [[p for p in job.replace(os.sep, "/").split("/") if p not in ("", ".")] or [job] for job in jobs]
    depth = [1] * len(jobs)

    def name(i: int) -> str:
        tail = "/".join(parts[i][-depth[i] :])
        return tail + "/" if jobs[i].endswith(("/", os.sep)) and depth[i] <= len(parts[i]) else tail

    while True:
        names = [name(i) for i in range(len(jobs))]
        seen: dict[str, list[int]] = {}
        for i, n in enumerate(names):
            seen.setdefault(n, []).append(i)
        clashes = [i for group in seen.values() if len(group) > 1 for i in group if depth[i] < len(parts[i])]
        if not clashes:
            return [n if depth[i] < len(parts[i]) else jobs[i] for i, n in enumerate(names)]
        for i in clashes:
            depth[i] += 1


def report_file_names(jobs: list[str]) -> list[str]:
    """A file name for each job's own report (`fleet --reports DIR`): its short name with `/` as
    `__` and only the characters a file name is safe with, unique, `.html`."""
    out: list[str] = []
    for name in short_names(jobs):
        stem = re.sub(r"(?:\.(?:log|out|err|txt|json|gz))+$", "", name.strip("/"))  # `rank0.log.gz`: `rank0`
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", stem.replace("/", "__")).strip("._") or "job"
        stem = stem[:120]
        candidate, n = stem, 1
        while f"{candidate}.html" in out:
            n += 1
            candidate = f"{stem}-{n}"
        out.append(f"{candidate}.html")
    return out


def _fit_columns(columns: list[str], widths: list[int], width: int) -> tuple[list[int], list[str]]:
    """Which columns stay (their indexes) and which were dropped, and the widths, so that the table
    fits `width`: columns are dropped (_DROP) before any is cut (_SHRINK)."""
    keep = list(range(len(columns)))
    dropped: list[str] = []

    def excess() -> int:
        return sum(widths[i] for i in keep) + _GAP * (len(keep) - 1) - width

    for name in _DROP:
        if excess() <= 0:
            break
        if name in columns and columns.index(name) in keep:
            keep.remove(columns.index(name))
            dropped.append(name)
    # then, on a very narrow terminal, the ids and names give up width, down to their minimums
    for floor in (lambda name, minimum: max(minimum, len(name)), lambda name, minimum: _LAST_RESORT):
        for name, minimum, _ in _SHRINK:
            over = excess()
            if over <= 0:
                break
            if name in columns:
                i = columns.index(name)
                give = min(over, max(widths[i] - floor(name, minimum), 0))
                widths[i] -= give
    return keep, dropped


# the status column on a terminal, in scan's colours (reports.render: failed red, healthy green)
STATUS_COLORS = {
    "failed": "\x1b[1m\x1b[31m",
    "stalled": "\x1b[1m\x1b[35m",
    "error": "\x1b[33m",
    "healthy": "\x1b[32m",
}


def _painted_status(cell: str) -> str:
    """A status cell (padded) with its word coloured, the padding outside the colour."""
    word = cell.rstrip()
    code = STATUS_COLORS.get(word)
    return f"{code}{word}\x1b[0m{cell[len(word) :]}" if code else cell


def _text_table(frame: pd.DataFrame, width: int | None = None, color: bool = False) -> tuple[str, list[str]]:
    """Columns two spaces apart, text left-aligned, numbers right-aligned, no trailing blanks; with
    `width`, columns are dropped (and then the widest cut) until the table fits (_fit_columns).
    Returns the table and the names of the columns dropped."""
    cells = frame.astype(str).map(terminal_text)  # no escape sequences from a path or a message
    columns = [str(c) for c in cells.columns]
    widths = [min(max([len(c)] + [len(v) for v in cells[c]]), TEXT_CELL_CHARS) for c in columns]
    keep, dropped = list(range(len(columns))), []
    if width is not None:
        keep, dropped = _fit_columns(columns, widths, width)
    sides = {name: side for name, _, side in _SHRINK}
    right = [c in _NUMERIC_COLUMNS for c in columns]

    status = columns.index("status") if "status" in columns else -1

    def line(values: list[str], paint: bool = False) -> str:
        shown = [
            (_cut(values[i], widths[i], sides.get(columns[i], "right")), widths[i], right[i]) for i in keep
        ]
        out = [v.rjust(w) if r else v.ljust(w) for v, w, r in shown]
        if paint and status in keep:
            at = keep.index(status)
            out[at] = _painted_status(out[at])
        return "  ".join(out).rstrip()

    rows = [line(columns)] + [line(list(r), color) for r in cells.itertuples(index=False)]
    return "\n".join(rows), dropped


def render_fleet_text(summary: FleetSummary, width: int | None = None, color: bool = False) -> str:
    """The fleet summary for a terminal; `width`: its columns (the job table is fitted to them: each
    job named by the end of its path that tells it from the others, and columns left out, said in a
    line under the headline, before anything is cut). A row's message (why a job could not be read,
    the error of an `unknown` failure) goes on an indented line under the row rather than in a
    column: one long message would widen every row."""
    frame = jobs_frame(summary, messages=False).rename(columns=_TEXT_HEADERS)
    if width is not None:
        frame["job"] = short_names([j.job for j in summary.jobs])
    text, dropped = _text_table(frame, width, color)
    table = text.split("\n")
    lines = table[:1]
    # (strict=False: a job name holding a line break spans more than one line of the table)
    for row, body in zip(summary.jobs, table[1:], strict=False):
        lines.append(body)
        if row.message:
            note = "    " + _text_cell(" ".join(row.message.split()))
            lines.append(_cut(note, width, "right") if width is not None else note)
    head = [f"fleet: {_headline(summary)}"]
    if dropped:
        note = f"(left out to fit: {', '.join(dropped)}; --format html or md has them)"
        head.append(_cut(note, width, "right"))
    out = ["\n".join(head), "", "\n".join(lines)]
    if summary.category_counts():
        out += [
            "",
            "failed jobs by category",
            _text_table(counts_frame(summary.category_counts(), "category"))[0],
        ]
        out += ["", "failed jobs by stage", _text_table(counts_frame(summary.stage_counts(), "stage"))[0]]
    return "\n".join(out) + "\n"


# -- groups: the triage view of Markdown and HTML ------------------------------------------------
@dataclass(frozen=True)
class Group:
    """Jobs with the same outcome: failed ones by root-cause category (most jobs first), then the
    healthy ones, then those that could not be read."""

    key: str  # the anchor: `cuda-oom`, `healthy`, `error`
    title: str  # `cuda-oom: 5 jobs`
    status: JobStatus
    frame: pd.DataFrame  # the rows, with the columns that say something within the group


_GROUP_COLUMNS = {
    JobStatus.FAILED: ["job", "root cause", "stage", "last step", "confidence", "error at", "message"],
    # (a stall's likely cause stands in `root cause`; its message: who waits for whom)
    JobStatus.STALLED: ["job", "root cause", "stage", "last step", "error at", "message"],
    JobStatus.HEALTHY: ["job", "last step"],
    JobStatus.ERROR: ["job", "message"],
}


def _jobs(n: int) -> str:
    return f"{n} job" if n == 1 else f"{n} jobs"


def groups(summary: FleetSummary) -> list[Group]:
    """The jobs in groups, each with its count (`cuda-oom: 5 jobs`): what a triage page reads first."""
    out = []

    def group(key: str, title: str, status: JobStatus, rows: list[JobRow]) -> None:
        frame = jobs_frame(FleetSummary(tuple(rows)))
        columns = [c for c in _GROUP_COLUMNS[status] if c in frame.columns]
        if any(r.report for r in rows):
            frame["report"] = [r.report or MISSING for r in rows]
            columns.append("report")
        out.append(Group(key, title, status, frame[columns]))

    failed = [j for j in summary.jobs if j.status is JobStatus.FAILED]
    for category, n in summary.category_counts():
        rows = [j for j in failed if (j.category or "unknown") == category]
        group(category, f"{category}: {_jobs(n)}", JobStatus.FAILED, rows)
    for status, key, title in (
        (JobStatus.STALLED, "stalled", "stalled"),
        (JobStatus.HEALTHY, "healthy", "healthy"),
        (JobStatus.ERROR, "unreadable", "could not be read"),
    ):
        rows = [j for j in summary.jobs if j.status is status]
        if rows:
            group(key, f"{title}: {_jobs(len(rows))}", status, rows)
    return out


def report_href(path: str) -> str:
    """A job's report path (relative to the summary) as a link target: every character that is not
    plain in a URL path is %-escaped, so no path makes another link, markup or a `javascript:` URL."""
    return "./" + urllib.parse.quote(path.replace(os.sep, "/"), safe="/")


# -- Markdown --------------------------------------------------------------------------------------
_MD_CODE_COLUMNS = {"job", "root cause", "error at"}


def _md_table(frame: pd.DataFrame) -> str:
    def cell(column: str, value: object) -> str:
        if value == MISSING:
            return MISSING
        if column == "report":
            return f"[report]({report_href(str(value))})"
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
    """The fleet as a triage page for an issue: the headline, then one section per group of jobs
    (failed ones by root-cause category, most jobs first, with their count), then the failed jobs by
    stage."""
    out = ["## verl-logscan fleet summary", "", md_text(_headline(summary))]
    for g in groups(summary):
        out += ["", f"### {md_text(g.title)}", "", _md_table(g.frame)]
    if summary.category_counts():
        out += ["", "### Failed jobs by stage", "", _md_table(counts_frame(summary.stage_counts(), "stage"))]
    return "\n".join(out) + "\n"


# -- HTML ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HtmlCell:
    text: str
    label: str  # the column, shown before the value when a narrow screen stacks a row's cells
    kind: str  # CSS classes: "num", "mono job" (a path: breaks anywhere), "mono short" (never breaks), ...
    href: str | None = None


def _html_rows(frame: pd.DataFrame) -> list[list[HtmlCell]]:
    rows = []
    for record in frame.itertuples(index=False):
        row = []
        for column, value in zip(frame.columns, record, strict=True):
            text = str(value)
            if column == "report" and text != MISSING:
                row.append(HtmlCell("report", column, "short", report_href(text)))
            elif column in _NUMERIC_COLUMNS:
                row.append(HtmlCell(text, column, "num"))
            elif column == "job":
                row.append(HtmlCell(text, column, "mono job"))
            else:
                short = column in ("root cause", "stage", "error at", "report", "category")
                mono = column in _MD_CODE_COLUMNS
                row.append(HtmlCell(text, column, " ".join(c for c in ("mono" * mono, "short" * short) if c)))
        rows.append(row)
    return rows


def render_fleet_html(summary: FleetSummary) -> str:
    """The fleet as a triage page in the scan report's style (the same banner, palette and tables):
    a banner with the counts, a link per group, then the groups, each a table whose rows stack into
    cards on a phone. Every string is escaped by the template."""
    from reports.common import jinja_env

    # the worst of the jobs
    status = next(
        (
            word
            for word, n in (
                ("failed", summary.failed),
                ("error", summary.errors),
                ("stalled", summary.stalled),
            )
            if n
        ),
        "healthy",
    )
    stage_counts = counts_frame(summary.stage_counts(), "stage") if summary.category_counts() else None
    return (
        jinja_env(True)
        .get_template("fleet.html.j2")
        .render(
            summary=summary,
            status=status,
            headline=_headline(summary),
            groups=[(g, list(g.frame.columns), _html_rows(g.frame)) for g in groups(summary)],
            stages=(list(stage_counts.columns), _html_rows(stage_counts))
            if stage_counts is not None
            else None,
        )
    )


# -- CSV and JSON ----------------------------------------------------------------------------------
def _row_keys(summary: FleetSummary) -> list[str]:
    """The keys of a machine-readable row: `report` too when the jobs' reports were written."""
    return list(ROW_KEYS) + (["report"] if any(j.report for j in summary.jobs) else [])


def render_fleet_csv(summary: FleetSummary) -> str:
    keys = _row_keys(summary)
    frame = pd.DataFrame(
        [{k: v for k, v in _row_dict(j).items() if k in keys} for j in summary.jobs],
        columns=keys,
        dtype=object,
    )
    return csv_safe_frame(frame).to_csv(index=False, lineterminator="\n")  # no formula runs in a spreadsheet


def fleet_to_dict(summary: FleetSummary) -> dict[str, Any]:
    keys = _row_keys(summary)
    return {
        "schema_version": FLEET_SCHEMA_VERSION,
        "complete": summary.complete,
        "not_analysed": list(summary.pending),
        "jobs": [{k: v for k, v in _row_dict(j).items() if k in keys} for j in summary.jobs],
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


def render_fleet(summary: FleetSummary, fmt: str, width: int | None = None, color: bool = False) -> str:
    """`summary` as `fmt`; text only: `width`, the terminal's columns, which the job table fits, and
    `color`, the status column coloured as scan colours its verdict."""
    if fmt == "text":
        return render_fleet_text(summary, width, color)
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
