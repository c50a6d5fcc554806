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
    anomaly_text,
    basis_text,
    cut_words,
    env_rows,
    finding_aside,
    finding_label,
    finding_steps,
    jinja_env,
    known_issues_line,
    partial_words,
    plural,
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
# an error line longer than this is quoted as wrapping text above the code block, where it is cut: a
# code block on GitHub does not wrap, and a one-line message should not need a sideways scroll
MD_FENCE_CHARS = 100
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
    error_line: tuple[str, int] | None = None  # (source, line) of the error line

    @property
    def long_error(self) -> bool:
        """Is the error line, shown in the window, too long for a code block that does not scroll?"""
        return any(e.text is not None and len(e.text) > MD_FENCE_CHARS for e in self._error_rows())

    def _error_rows(self) -> list[Evidence]:
        return [
            e for e in self.window if self.error_line is not None and (e.source, e.line) == self.error_line
        ]

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
        error_line=(rc.error_line.source, rc.error_line.line) if rc and rc.error_line else None,
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


def _cut_in_fence(text: str, limit: int, note: str) -> str:
    return text if len(text) <= limit else text[:limit] + "…" + note


def _render_md(report: Report, view: MdView) -> str:
    env = jinja_env(False)
    env.filters.setdefault("cut", _cut_in_fence)
    return env.get_template("report.md.j2").render(
        r=report,
        v=view,
        step=step_text(report),
        redacted=redaction_line(report),
        line_chars=MD_LINE_CHARS,
        cell_chars=MD_CELL_CHARS,
        fence_chars=MD_FENCE_CHARS,
        Gap=Gap,
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
SUMMARY_ERROR_LINES = 3  # the error: a 3-line snippet at most (the full reports have it whole)
SUMMARY_FIELD_LINES = 3  # any other field, wrapped
SUMMARY_ERROR_CHARS = 300  # the error's budget when nothing is wrapped (a file or a pipe)
LABEL = 9  # a field label's width (`stage    `) after an indent of two: the longest (`symptoms`) and a blank
_PRIVATE = re.compile("[\ue000-\ue001]")  # the colour markers' brackets: never from log text


@dataclass(frozen=True)
class _Field:
    """One line of the summary before it is fitted to the terminal: `head` (painted; what the text
    follows), `text` (plain) painted with `style` once wrapped, continuation lines indented by `hang`
    columns, at most `lines` lines."""

    head: str
    width: int  # the columns `head` takes on screen
    text: str
    lines: int = 2
    style: tuple[str, ...] = ()
    hang: int | None = None  # None: under the text's first column

    def wrapped(self, width: int | None, lines: int, paint: Callable[..., str]) -> list[str]:
        if width is None or self.width + len(self.text) <= width:
            return [self.head + paint(self.text, *self.style)]
        hang = self.width if self.hang is None else self.hang
        rows = _wrap_words(self.text, max(width - self.width, 10), max(width - hang, 10), lines)
        return [self.head + paint(rows[0], *self.style)] + [
            " " * hang + paint(row, *self.style) for row in rows[1:]
        ]


def _wrap_words(text: str, first: int, rest: int, lines: int) -> list[str]:
    """`text` in lines of at most `first` (the first line) and `rest` columns, broken at spaces (a word
    longer than a line is cut), at most `lines` lines, the last cut with `…` when text is left over."""
    out: list[str] = []
    current = ""
    for word in text.split(" "):
        room = first if not out else rest
        if current and len(current) + 1 + len(word) <= room:
            current += " " + word
            continue
        if current:
            out.append(current)
            room = rest
        while len(word) > room:  # longer than a whole line (a path, a token): cut where it must be
            out.append(word[:room])
            word, room = word[room:], rest
        current = word
    out.append(current)
    if len(out) > lines:
        room = first if lines == 1 else rest
        out = out[: lines - 1] + [cut_words(out[lines - 1] + " " + out[lines], room)]
    return out


def _symptoms_line(report: Report) -> str:
    parts = []
    for s in report.symptoms[:4]:
        ranks = f"{'rank' if len(set(s.ranks)) == 1 else 'ranks'} {compact_ranks(s.ranks)}" if s.ranks else ""
        about = ", ".join(x for x in (ranks, finding_steps(s), finding_aside(s)) if x)
        parts.append(f"{finding_label(s)} x{s.count}" + (f" ({about})" if about else ""))
    more = f", +{len(report.symptoms) - 4} more" if len(report.symptoms) > 4 else ""
    return cut_words(", ".join(parts), SUMMARY_FIELD_CHARS) + more


def _label(paint: Callable[..., str], name: str, style: str = "dim") -> tuple[str, int]:
    """A field's head: two blanks and the label, padded (a longer label is followed by one blank)."""
    padded = name.ljust(LABEL) if len(name) < LABEL else name + " "
    return f"  {paint(padded, style)}", 2 + len(padded)


def _field(paint: Callable[..., str], name: str, text: str, lines: int = 2, *style: str) -> _Field:
    head, width = _label(paint, name)
    return _Field(head, width, text, lines, style)


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
    code: str = "",
) -> list[_Field]:
    """The summary's first lines for a failure: the verdict, where (the log's file:line, and the
    innermost user frame's, both as `path:line`, which terminals make clickable), the stage, the
    error (a snippet of up to SUMMARY_ERROR_LINES lines), the fix."""
    rc = r.root_cause
    verdict = f"{paint('FAILED', 'bold', 'red')}  {paint(rc.category, 'bold')}  "
    out = [
        _Field(
            verdict,
            len(f"FAILED  {rc.category}  "),
            f"(confidence {rc.confidence:.2f}, {basis_text(rc)})",
            hang=2,
        ),
        _Field("  ", 2, summary),
    ]
    if where:
        out.append(_field(paint, "at", where))
    if code:
        out.append(_field(paint, "code", code))
    out.append(_field(paint, "stage", stage))
    out.append(_field(paint, "error", error, SUMMARY_ERROR_LINES))
    if fix:
        out.append(_field(paint, "fix", fix, SUMMARY_FIELD_LINES, "yellow"))
    if symptoms:
        out.append(_field(paint, "symptoms", f"{len(r.symptoms)}: {symptoms}"))
    return out


def _outcome_line(
    r: Report,
    paint: Callable[..., str],
    report_path: str | None,
    elapsed: float | None,
) -> _Field:
    """The last line, as pytest ends its run: the verdict and where in one line
    (`FAILED cuda-oom · rank 3 · stage rollout · 1.2 s · full report written to r.html`)."""
    rc = r.root_cause
    parts: list[str] = []
    if rc is not None:
        head, shown = (
            f"{paint('FAILED', 'bold', 'red')} {paint(rc.category, 'bold')}",
            f"FAILED {rc.category}",
        )
        if rc.rank is not None:
            parts.append(f"rank {rc.rank}")
        elif rc.actor or rc.pid is not None:
            parts.append(" ".join(x for x in (rc.actor, f"pid {rc.pid}" if rc.pid is not None else "") if x))
        parts.append(f"stage {rc.stage}" if rc.stage else "stage not shown")
    elif r.empty:
        head, shown = paint("EMPTY", "bold", "yellow"), "EMPTY"
        parts.append("no log lines read")
    elif r.stall is not None:
        head, shown = paint("STALLED", "bold", "magenta"), "STALLED"
        p = r.progress
        if p is not None and p.stage_reached:
            parts.append(f"stage {p.stage_reached}")
        parts += [x for x in (step_text(r),) if x]
    else:
        # (an interrupted scan found no failure in what it read: that says nothing of the job's health)
        word = "HEALTHY" if r.complete else partial_words(r)
        head, shown = paint(word, "bold", "green" if r.complete else "yellow"), word
        p = r.progress
        if p is not None and p.stage_reached:
            parts.append(f"stage {p.stage_reached}")
        parts += [x for x in (step_text(r), "completed" if p is not None and p.completed else "") if x]
    if not r.complete and (rc is not None or r.stall is not None):
        parts.append(partial_words(r))
    if elapsed is not None and elapsed >= 0.05:  # (`0.0 s` says nothing)
        parts.append(f"{elapsed:.1f} s")
    if report_path:
        parts.append(f"full report written to {report_path}")
    if not parts:
        return _Field(head, len(shown), "")
    return _Field(head + " · ", len(shown) + 3, " · ".join(parts), hang=2)


def _stalled_lines(st: Stall, paint: Callable[..., str], stage: str) -> list[_Field]:
    """The summary's lines of a stalled job: where it stopped, for how long, what each waited in, why."""
    cause = f"  ({st.cause.title})" if st.cause else ""
    out = [_Field(f"{paint('STALLED', 'bold', 'magenta')}  ", 9, f"no progress and no error{cause}", hang=2)]
    if stage:
        out.append(_field(paint, "stopped", stage))
    out.append(_field(paint, "for", cut_words(st.duration, SUMMARY_FIELD_CHARS)))
    if st.odd_one_out:
        out.append(_field(paint, "odd one", cut_words(st.odd_one_out, SUMMARY_FIELD_CHARS)))
    else:
        for g in st.waits[:3]:
            waiting = cut_words(", ".join(g.streams) + " in " + g.waiting_in, SUMMARY_FIELD_CHARS)
            out.append(_field(paint, "waiting", waiting, 1))
    if st.silent_first:
        quiet = cut_words("first to go quiet: " + ", ".join(st.silent_first), SUMMARY_FIELD_CHARS)
        out.append(_field(paint, "quiet", quiet))
    out.append(_field(paint, "evidence", cut_words("; ".join(st.reasons), SUMMARY_FIELD_CHARS)))
    if st.cause and st.cause.fix:
        out.append(_field(paint, "fix", cut_words(st.cause.fix[0], SUMMARY_FIELD_CHARS), 2, "yellow"))
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
    known: str = "",
    notes: list[str],
    more_notes: int,
    report_path: str | None,
    lines: int,
    explain: str | None,
    width: int | None = None,
    elapsed: float | None = None,
    code: str = "",
) -> str:
    """The summary's lines from the values render_summary chose. Plain Python, not a template: every
    scan that writes a file prints this summary, and Jinja2 (import, environment, compiling the
    template) cost it about 20 ms of a 0.2 s start-up. Like a template it only formats; with `width`
    (a terminal's columns) each field wraps to it with a hanging indent."""
    rc = r.root_cause
    if rc:
        out = _failed_lines(
            r,
            paint,
            where=where,
            stage=stage,
            summary=summary,
            error=error,
            fix=fix,
            symptoms=symptoms,
            code=code,
        )
    else:
        out = _verdict_lines(r, paint, stage, lines)
    out += _context_lines(r, paint, known, anomalies, redacted, notes, more_notes)
    if not report_path and rc:
        more = "-o report.html or -o report.md for the full report" + (f"; {explain}" if explain else "")
        out.append(_field(paint, "more", more))
    out.append(_outcome_line(r, paint, report_path, elapsed))
    return "".join(line + "\n" for line in _fit(out, width, paint))


def _verdict_lines(r: Report, paint: Callable[..., str], stage: str, lines: int) -> list[_Field]:
    """The summary's first lines when there is no root cause: empty, stalled or healthy."""
    if r.empty:
        return [
            _Field(
                f"{paint('EMPTY', 'bold', 'yellow')}  ",
                len("EMPTY  "),
                f"no log lines read from {len(r.inputs)} input(s): nothing to judge",
                hang=2,
            )
        ]
    if r.stall is not None:
        return _stalled_lines(r.stall, paint, stage)
    if not r.complete:
        word = partial_words(r)
        out = [
            _Field(
                f"{paint(word, 'bold', 'yellow')}  ",
                len(word) + 2,
                "no failure found in what was read",
                hang=2,
            )
        ]
    else:
        out = [
            _Field(
                f"{paint('HEALTHY', 'bold', 'green')}  ",
                9,
                f"no failure found in {plural(lines, 'line')}",
                hang=2,
            )
        ]
    if stage:
        out.append(_field(paint, "progress", stage))
    return out


def _context_lines(
    r: Report,
    paint: Callable[..., str],
    known: str,
    anomalies: str,
    redacted: str,
    notes: list[str],
    more_notes: int,
) -> list[_Field]:
    """The summary's lines after the verdict's: known issues, metrics, attempts, redactions, notes."""
    out: list[_Field] = []
    if known:
        out.append(_field(paint, "known", known, SUMMARY_FIELD_LINES))
    if anomalies:
        out.append(_field(paint, "metrics", anomalies))
    if r.attempts:
        out.append(
            _field(
                paint, "attempts", f"{len(r.attempts)} earlier attempt(s) in this log; this is the last one"
            )
        )
    if not r.complete and (r.root_cause is not None or r.stall is not None):  # (else the headline says it)
        head, shown = _label(paint, "partial", "yellow")
        out.append(_Field(head, shown, "the scan was interrupted; this covers only what was read"))
    if redacted:
        out.append(_field(paint, "redacted", redacted))
    for n in notes:
        out.append(_field(paint, "note", n))
    if more_notes:
        out.append(_field(paint, "note", f"+{more_notes} more note(s) in the full report", 1))
    return out


def _fit(fields: list[_Field], width: int | None, paint: Callable[..., str]) -> list[str]:
    """The lines of `fields` wrapped to `width`; when that makes more than SUMMARY_MAX_LINES, the
    fields may take fewer lines, the last ones first (the verdict, where and the error come first)."""
    limits = [f.lines for f in fields]
    while True:
        lines = [row for f, n in zip(fields, limits, strict=True) for row in f.wrapped(width, n, paint)]
        if len(lines) <= SUMMARY_MAX_LINES or max(limits) <= 1:
            return lines
        limits[max(i for i, n in enumerate(limits) if n > 1)] -= 1


def _location(rc) -> str:
    """Where the error line is in the log (`path:line`, which a terminal makes a link) and who wrote it."""
    who = where(rc)
    if rc.error_line is None:
        return who
    return f"{rc.error_line.source}:{rc.error_line.line}" + (f"  ({who})" if who else "")


def _innermost(rc) -> str:
    """The innermost user frame of the root cause's traceback as `path:line in function`, or ''."""
    frame = rc.traceback.innermost_user_frame if rc.traceback else None
    return f"{frame[0]}:{frame[1]} in {frame[2]}" if frame is not None else ""


def _plain(text: object) -> str:
    """Log text for a summary line: on one line, without what a terminal acts on or our colour
    markers' brackets."""
    return _PRIVATE.sub("", terminal_text(str(text).replace("\r", " ").replace("\n", " ")))


def render_summary(
    report: Report,
    color: bool = False,
    report_path: str | None = None,
    explain: str | None = None,
    width: int | None = None,
    elapsed: float | None = None,
) -> str:
    """The short terminal summary (at most SUMMARY_MAX_LINES lines), ending with one line that says
    it all (as pytest's last line does). `explain`: the `verl-logscan explain ...` command that works
    for this root cause (the caller knows the catalog); `width`: the terminal's columns, which every
    field wraps to with a hanging indent (None: a file or a pipe, every field on one line); `elapsed`:
    the seconds the scan took (for a terminal only: a report file holds nothing from the clock)."""
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
    anomaly_line = anomaly_text(report)
    limit = SUMMARY_FIELD_CHARS if width is None else max(width, 40) * SUMMARY_FIELD_LINES

    def field(text: object, chars: int = limit) -> str:  # log text, on one line, bounded
        return cut_words(_plain(text), chars)

    notes = [field(n) for n in report.notes[:SUMMARY_NOTES]]
    if p is not None and p.note and not rc:
        notes.insert(0, field(p.note))
    mark = os.urandom(8).hex()  # = secrets.token_hex(8), without importing secrets for it
    error_chars = SUMMARY_ERROR_CHARS if width is None else max(width, 40) * SUMMARY_ERROR_LINES
    text = _summary_text(
        report,
        _paint(color, mark),
        where=field(_location(rc)) if rc else "",
        code=field(_innermost(rc)) if rc else "",
        stage=field(stage_line),
        summary=field(rc.summary) if rc else "",
        error=field(rc.message.strip(), error_chars) if rc else "",
        fix=field(rc.remediation.fix[0]) if rc and rc.remediation.fix else "",
        symptoms=field(_symptoms_line(report)) if report.symptoms else "",
        anomalies=field(anomaly_line),
        known=field(known_issues_line(report)) if report.known_issues else "",
        redacted=field(redaction_line(report)),
        notes=notes[:SUMMARY_NOTES],
        more_notes=max(
            0, len(report.notes) + (1 if p is not None and p.note and not rc else 0) - SUMMARY_NOTES
        ),
        report_path=_plain(report_path) if report_path else None,
        lines=sum(i.lines for i in report.inputs),
        explain=explain,
        width=width,
        elapsed=elapsed,
    )
    # log text carries no escape sequence or control character onto the terminal; then the colours
    return _unmark(terminal_text(text), mark) if color else terminal_text(text)


def render(
    report: Report,
    fmt: str,
    color: bool = False,
    report_path: str | None = None,
    explain: str | None = None,
    width: int | None = None,
    elapsed: float | None = None,
) -> str:
    """`report` as `fmt`; for text only: `report_path` names where the full report was written,
    `explain` the command that explains the root cause's entry, `width` the terminal's columns and
    `elapsed` the seconds the scan took (see render_summary)."""
    if fmt == "json":
        return render_json(report)
    if fmt == "md":
        return render_markdown(report)
    if fmt == "html":
        from reports.html import render_html  # (markupsafe and the chart code: only for HTML)

        return render_html(report)
    if fmt == "text":
        return render_summary(
            report, color=color, report_path=report_path, explain=explain, width=width, elapsed=elapsed
        )
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
