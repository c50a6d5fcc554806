"""Render a Report in one of the formats. Templates only format; every decision is in the Report or,
for what fits where (the Markdown size budget, the terminal's line budget), in the views built here."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from logparse.model import Evidence, FindingView, Report, Stall, compact_ranks
from reports.common import (
    Gap,
    basis_text,
    clip,
    env_rows,
    jinja_env,
    redaction_line,
    step_text,
    where,
)
from reports.escape import terminal_text, without_controls
from reports.jsonreport import render_json

FORMATS = ("text", "md", "html", "json")

# GitHub rejects an issue body over 65,536 characters; the report stays well under it so the reporter
# can add words of their own around it.
GITHUB_BODY_LIMIT = 65_536
MD_BUDGET = 60_000
MD_LINE_CHARS = 1_000  # a code line (evidence, traceback) longer than this is clipped
MD_CELL_CHARS = 300  # a table cell / list item
MD_MAX_FRAMES = 100  # traceback frames shown at most (the first fifth and the rest from the end)
SUMMARY_MAX_LINES = 25
SUMMARY_FIELD_CHARS = 200
SUMMARY_NOTES = 3

_ANSI = {
    "red": "\x1b[31m",
    "green": "\x1b[32m",
    "yellow": "\x1b[33m",
    "magenta": "\x1b[35m",
    "bold": "\x1b[1m",
    "dim": "\x1b[2m",
    "reset": "\x1b[0m",
}


def _paint(color: bool, mark: str):
    """Colours as markers (`mark` is a per-render nonce, which no log line can forge) that
    _unmark turns into escape codes once every log-derived escape has been dropped."""

    def paint(text: object, *styles: str) -> str:
        if not color or not styles:
            return str(text)
        return f"\ue000{mark}:{','.join(styles)}\ue001{text}\ue000{mark}:reset\ue001"

    return paint


def _unmark(text: str, mark: str) -> str:
    return re.sub(
        "\ue000" + re.escape(mark) + r":([a-z,]+)\ue001",
        lambda m: "".join(_ANSI[s] for s in m.group(1).split(",")),
        text,
    )


# -- Markdown: what fits in a GitHub issue --------------------------------------------------------------
@dataclass
class MdView:
    """What the Markdown template shows; lists shrink, in order of least value, until it fits."""

    findings: list[FindingView]
    symptoms: list[FindingView]
    evidence: list[Evidence | Gap]
    frames: list[tuple[str, int, str] | Gap]
    environment: list[tuple[str, str]]
    inputs: list
    explanation: list[str]
    notes: list[str]
    anomalies: list
    attempts: list
    cut: dict[str, tuple[int, int]] = field(default_factory=dict)  # what -> (left out, of)
    window: list[Evidence] = field(default_factory=list)  # the error line and the lines before it
    evidence_source: str | None = None  # the one file every evidence line is from

    def compact_frames(self, tb) -> list:
        """The (trimmed) frames with library runs folded (reports.layout.fold_frames)."""
        from reports.layout import fold_frames

        return fold_frames(tb, self.frames)

    def library_roots(self) -> tuple[str, ...]:
        from reports.layout import library_roots

        return library_roots([f for f in self.frames if isinstance(f, tuple)])

    def trim_note(self) -> str:
        if not self.cut:
            return ""
        parts = [f"{left:,} of {total:,} {what}" for what, (left, total) in self.cut.items()]
        return (
            f"Trimmed to fit a GitHub issue ({GITHUB_BODY_LIMIT:,} characters): left out "
            + "; ".join(parts)
            + ". `--format html` or `--format json` has everything."
        )


def keep_ends(items: Sequence, keep: int, head: int, must: object = None) -> tuple[list, int]:
    """The first `head` and the last `keep - head` of `items` with a Gap between; `must` (an item)
    stays wherever it is. Returns (items, how many were left out)."""
    if keep >= len(items):
        return list(items), 0
    head = min(head, keep)
    tail_n = keep - head
    kept_idx = set(range(head)) | set(range(len(items) - tail_n, len(items)))
    if must is not None and must in items:
        kept_idx.add(items.index(must))
    out: list = []
    run = 0
    for i, item in enumerate(items):
        if i in kept_idx:
            if run:
                out.append(Gap(run))
                run = 0
            out.append(item)
        else:
            run += 1
    if run:
        out.append(Gap(run))
    return out, len(items) - len(kept_idx)


def _keep_frames(frames: list, keep: int, innermost: object) -> tuple[list, int]:
    """`keep` of the frames (a Gap from an earlier cap counts as none of them)."""
    real = [f for f in frames if not isinstance(f, Gap)]
    capped = sum(f.count for f in frames if isinstance(f, Gap))
    if keep >= len(real):
        return list(frames), capped
    kept, left_out = keep_ends(real, keep, 1 if keep > 2 else 0, innermost)
    return kept, left_out + capped


def _md_view(report: Report) -> MdView:
    from reports.layout import error_window, evidence_locations

    rc = report.root_cause
    tb = rc.traceback if rc else None
    frames: list = list(tb.frames) if tb else []
    if tb is not None and tb.frames_cut:  # the scan kept the outermost and the innermost frames
        frames.insert(tb.frames_cut_after, Gap(tb.frames_cut))
    cut = {}
    if len(frames) > MD_MAX_FRAMES:  # a deep recursion says nothing more after its first and last frames
        frames, left_out = keep_ends(frames, MD_MAX_FRAMES, MD_MAX_FRAMES // 5, tb.innermost_user_frame)
        cut["traceback frames"] = (left_out, len(tb.frames))
    window = error_window(rc) if rc else None
    return MdView(
        cut=cut,
        window=list(window.lines) if window else [],
        evidence_source=evidence_locations(rc.evidence)[0] if rc else None,
        findings=list(report.findings),
        symptoms=list(report.symptoms),
        evidence=list(rc.evidence) if rc else [],
        frames=frames,
        environment=env_rows(report),
        inputs=list(report.inputs),
        explanation=list(rc.explanation) if rc else [],
        notes=list(report.notes),
        anomalies=list(report.metrics.anomalies) if report.metrics else [],
        attempts=list(report.attempts),
    )


def _render_md(report: Report, view: MdView) -> str:
    return (
        jinja_env(False)
        .get_template("report.md.j2")
        .render(
            r=report,
            v=view,
            step=step_text(report),
            redacted=redaction_line(report),
            line_chars=MD_LINE_CHARS,
            cell_chars=MD_CELL_CHARS,
            Gap=Gap,
        )
    )


def _shrunk(
    report: Report, view: MdView, label: str, attr: str, kept: tuple[list, int], total: int
) -> tuple[str, MdView]:
    """`view` with its list `attr` replaced by `kept` = (items, how many left out), rendered."""
    items, left_out = kept
    cut = dict(view.cut)
    if left_out:
        cut[label] = (left_out, total)
    else:
        cut.pop(label, None)
    trial = dataclasses.replace(view, **{attr: items}, cut=cut)
    return _render_md(report, trial), trial


def render_markdown(report: Report, budget: int = MD_BUDGET) -> str:
    """The Markdown report, trimmed to `budget` characters in order of least value: findings rows first,
    then input rows (a folder of many rank logs), symptom rows, the middle of the evidence, the middle of
    the traceback, then the smaller lists; the report says what each cut left out. Log text comes
    without escape sequences and controls (reports.escape.without_controls)."""
    report = without_controls(report)
    full = _md_view(report)
    text = _render_md(report, full)
    if len(text) <= budget:
        return text
    rc = report.root_cause
    innermost = rc.traceback.innermost_user_frame if rc and rc.traceback else None
    error_line = rc.error_line if rc else None
    # (label for the note, attribute, minimum kept, how to keep k of the original items)
    stages: list[tuple[str, str, int, Callable[[list, int], tuple[list, int]]]] = [
        ("findings rows", "findings", 0, lambda xs, k: (xs[:k], len(xs) - k)),
        ("input rows", "inputs", 1, lambda xs, k: (xs[:k], len(xs) - k)),
        ("symptom rows", "symptoms", 1, lambda xs, k: (xs[:k], len(xs) - k)),
        ("evidence lines", "evidence", 1, lambda xs, k: keep_ends(xs, k, k // 3, error_line)),
        ("traceback frames", "frames", 1, lambda xs, k: _keep_frames(xs, k, innermost)),
        ("environment rows", "environment", 0, lambda xs, k: (xs[:k], len(xs) - k)),
        ("notes", "notes", 0, lambda xs, k: (xs[:k], len(xs) - k)),
        ("anomalies", "anomalies", 0, lambda xs, k: (xs[:k], len(xs) - k)),
        ("earlier attempts", "attempts", 0, lambda xs, k: (xs[:k], len(xs) - k)),
        ("explanation lines", "explanation", 1, lambda xs, k: (xs[:k], len(xs) - k)),
    ]
    view = full
    for label, attr, minimum, keep in stages:
        original = getattr(full, attr)
        n = len(original)
        if n <= minimum:
            continue
        total = full.cut[label][1] if label in full.cut else n
        lo, hi = minimum, n  # the largest k in [lo, hi] that fits, or lo
        best_text, best = _shrunk(report, view, label, attr, keep(original, lo), total)
        if len(best_text) > budget:
            text, view = best_text, best
            continue
        while lo < hi:
            mid = (lo + hi + 1) // 2
            t, trial = _shrunk(report, view, label, attr, keep(original, mid), total)
            if len(t) <= budget:
                lo, best_text, best = mid, t, trial
            else:
                hi = mid - 1
        return best_text
    if len(text) > budget:  # only a catalog with enormous remediation text gets here
        text = text[:budget].rsplit("\n", 1)[0] + f"\n\n(report cut at {budget:,} characters)\n"
    return text


# -- the terminal summary ---------------------------------------------------------------------------
def _symptoms_line(report: Report) -> str:
    parts = []
    for s in report.symptoms[:4]:
        ranks = f" (ranks {compact_ranks(s.ranks)})" if s.ranks else ""
        parts.append(f"{s.id} x{s.count}{ranks}")
    more = f", +{len(report.symptoms) - 4} more" if len(report.symptoms) > 4 else ""
    return clip(", ".join(parts), SUMMARY_FIELD_CHARS) + more


def _failed_lines(
    r: Report,
    paint: Callable[..., str],
    *,
    where: str,
    stage: str,
    summary: str,
    error: str,
    fix: str,
    symptoms: str,
) -> list[str]:
    """The summary's first lines for a failure: the verdict, where, the stage, the error, the fix."""
    rc = r.root_cause
    out = [
        f"{paint('FAILED', 'bold', 'red')}  {paint(rc.category, 'bold')}  "
        f"(confidence {rc.confidence:.2f}, {basis_text(rc)})",
        f"  {summary}",
    ]
    if rc.error_line:
        out.append(
            f"  {paint('at      ', 'dim')}{rc.error_line.source}:{rc.error_line.line}"
            + (f"  ({where})" if where else "")
        )
    elif where:
        out.append(f"  {paint('at      ', 'dim')}{where}")
    out.append(f"  {paint('stage   ', 'dim')}{stage}")
    out.append(f"  {paint('error   ', 'dim')}{error}")
    if fix:
        out.append(f"  {paint('fix     ', 'dim')}{paint(fix, 'yellow')}")
    if symptoms:
        out.append(f"  {paint('symptoms', 'dim')} {len(r.symptoms)}: {symptoms}")
    return out


def _stalled_lines(st: Stall, paint: Callable[..., str], stage: str) -> list[str]:
    """The summary's lines of a stalled job: where it stopped, for how long, what each waited in, why."""
    cause = f"  ({st.cause.title})" if st.cause else ""
    out = [f"{paint('STALLED', 'bold', 'magenta')}  no progress and no error{cause}"]
    if stage:
        out.append(f"  {paint('stopped ', 'dim')}{stage}")
    out.append(f"  {paint('for     ', 'dim')}{clip(st.duration, SUMMARY_FIELD_CHARS)}")
    if st.odd_one_out:
        out.append(f"  {paint('odd one ', 'dim')}{clip(st.odd_one_out, SUMMARY_FIELD_CHARS)}")
    else:
        for g in st.waits[:3]:
            waiting = clip(", ".join(g.streams) + " in " + g.waiting_in, SUMMARY_FIELD_CHARS)
            out.append(f"  {paint('waiting ', 'dim')}{waiting}")
    if st.silent_first:
        quiet = clip("first to go quiet: " + ", ".join(st.silent_first), SUMMARY_FIELD_CHARS)
        out.append(f"  {paint('quiet   ', 'dim')}{quiet}")
    out.append(f"  {paint('evidence', 'dim')} {clip('; '.join(st.reasons), SUMMARY_FIELD_CHARS)}")
    if st.cause and st.cause.fix:
        out.append(
            f"  {paint('fix     ', 'dim')}{paint(clip(st.cause.fix[0], SUMMARY_FIELD_CHARS), 'yellow')}"
        )
    return out


def _summary_text(
    r: Report,
    paint: Callable[..., str],
    *,
    where: str,
    stage: str,
    summary: str,
    error: str,
    fix: str,
    symptoms: str,
    anomalies: str,
    redacted: str,
    notes: list[str],
    more_notes: int,
    report_path: str | None,
    lines: int,
    explain: str | None,
) -> str:
    """The summary's lines from the values render_summary chose. Plain Python, not a template: every
    scan that writes a file prints this summary, and Jinja2 (import, environment, compiling the
    template) cost it about 20 ms of a 0.2 s start-up. Like a template it only formats."""
    rc = r.root_cause
    if rc:
        out = _failed_lines(
            r, paint, where=where, stage=stage, summary=summary, error=error, fix=fix, symptoms=symptoms
        )
    elif r.status == "empty":
        out = [
            f"{paint('EMPTY', 'bold', 'yellow')}  no log lines read from {len(r.inputs)} input(s): "
            "nothing to judge"
        ]
    elif r.stall is not None:
        out = _stalled_lines(r.stall, paint, stage)
    else:
        out = [f"{paint('HEALTHY', 'bold', 'green')}  no failure found in {lines} line(s)"]
        if stage:
            out.append(f"  {paint('progress', 'dim')} {stage}")
    if anomalies:
        out.append(f"  {paint('metrics ', 'dim')} {anomalies}")
    if r.attempts:
        out.append(
            f"  {paint('attempts', 'dim')} {len(r.attempts)} earlier attempt(s) in this log; "
            "this is the last one"
        )
    if not r.complete:
        out.append(
            f"  {paint('partial ', 'yellow')} the scan was interrupted; this covers only what was read"
        )
    if redacted:
        out.append(f"  {paint('redacted', 'dim')} {redacted}")
    for n in notes:
        out.append(f"  {paint('note    ', 'dim')}{n}")
    if more_notes:
        out.append(f"  {paint('note    ', 'dim')}+{more_notes} more note(s) in the full report")
    if report_path:
        out.append(f"  {paint('report  ', 'dim')}full report written to {report_path}")
    elif rc:
        out.append(
            f"  {paint('more    ', 'dim')}-o report.html or -o report.md for the full report"
            + (f"; {explain}" if explain else "")
        )
    return "".join(line + "\n" for line in out)


def render_summary(
    report: Report, color: bool = False, report_path: str | None = None, explain: str | None = None
) -> str:
    """The short terminal summary (at most SUMMARY_MAX_LINES lines; every field on one line). `explain`:
    the `verl-logscan explain ...` command that works for this root cause (the caller knows the catalog)."""
    rc = report.root_cause
    p = report.progress
    if rc is not None:  # the failure's own stage; the progression's last is only a hint beside it
        last = f" (the log last showed {p.stage_reached})" if p is not None and p.stage_reached else ""
        stage = rc.stage or f"not shown in the log{last}"
    else:
        stage = (p.stage_reached if p else None) or ""
    stage_line = ", ".join(x for x in (stage, step_text(report)) if x)
    if p is not None and not rc:
        stage_line += ", completed" if p.completed else ""
    anomalies = report.metrics.anomalies if report.metrics else ()
    anomaly_line = ""
    if anomalies:
        a = anomalies[0]
        anomaly_line = clip(
            f"{len(anomalies)}: step {a.step} {a.kind} ({a.key}: {a.detail})", SUMMARY_FIELD_CHARS
        )
    notes = [clip(n, SUMMARY_FIELD_CHARS) for n in report.notes[:SUMMARY_NOTES]]
    if p is not None and p.note and not rc:
        notes.insert(0, clip(p.note, SUMMARY_FIELD_CHARS))
    mark = os.urandom(8).hex()  # = secrets.token_hex(8), without importing secrets for it
    text = _summary_text(
        report,
        _paint(color, mark),
        where=where(rc) if rc else "",
        stage=stage_line,
        summary=clip(rc.summary, SUMMARY_FIELD_CHARS) if rc else "",
        error=clip(rc.message.strip(), SUMMARY_FIELD_CHARS) if rc else "",
        fix=clip(rc.remediation.fix[0], SUMMARY_FIELD_CHARS) if rc and rc.remediation.fix else "",
        symptoms=_symptoms_line(report) if report.symptoms else "",
        anomalies=anomaly_line,
        redacted=redaction_line(report),
        notes=notes[:SUMMARY_NOTES],
        more_notes=max(
            0, len(report.notes) + (1 if p is not None and p.note and not rc else 0) - SUMMARY_NOTES
        ),
        report_path=report_path,
        lines=sum(i.lines for i in report.inputs),
        explain=explain,
    )
    # log text carries no escape sequence or control character onto the terminal; then the colours
    return _unmark(terminal_text(text), mark) if color else terminal_text(text)


def render(
    report: Report, fmt: str, color: bool = False, report_path: str | None = None, explain: str | None = None
) -> str:
    """`report` as `fmt`; `report_path` (text only) names where the full report was written, `explain`
    (text only) the command that explains the root cause's entry."""
    if fmt == "json":
        return render_json(report)
    if fmt == "md":
        return render_markdown(report)
    if fmt == "html":
        from reports.html import render_html  # (markupsafe and the chart code: only for HTML)

        return render_html(report)
    if fmt == "text":
        return render_summary(report, color=color, report_path=report_path, explain=explain)
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
