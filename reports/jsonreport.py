"""The JSON contract (reports/schema.json, schema_version 1)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from logparse.model import (
    Evidence,
    FindingView,
    KnownIssueMatch,
    Metrics,
    Progress,
    Report,
    RootCause,
    StageSpan,
    Stall,
)
from reports.common import job_values
from reports.escape import without_controls


def evidence_json(e: Evidence) -> dict[str, Any]:
    """An evidence line as every JSON report writes it (scan's and diff's)."""
    return {"source": e.source, "line": e.line, "text": e.text}


def _finding(f: FindingView) -> dict[str, Any]:
    return {
        "id": f.id,
        "category": f.category,
        "title": f.title,
        "role": f.role,
        "count": f.count,
        "ranks": list(f.ranks),
        "nodes": list(f.nodes),
        "first": evidence_json(f.first),
        "explained_by": f.explained_by,
        "set_aside": f.set_aside,
        "set_aside_kind": f.set_aside_kind,
        "first_step": f.first_step,
        "last_step": f.last_step,
    }


def _root(rc: RootCause) -> dict[str, Any]:
    tb = None
    if rc.traceback is not None:
        t = rc.traceback
        tb = {
            "exception_type": t.exception_type,
            "exception_message": t.exception_message,
            "frames": [{"file": f, "line": n, "function": fn} for f, n, fn in t.frames],
            "innermost_user_frame": (
                {
                    "file": t.innermost_user_frame[0],
                    "line": t.innermost_user_frame[1],
                    "function": t.innermost_user_frame[2],
                }
                if t.innermost_user_frame
                else None
            ),
            "task": t.task,
            "chain": list(t.chain),
            "frames_cut": t.frames_cut,
            "chain_cut": t.chain_cut,
        }
    return {
        "id": rc.id,
        "category": rc.category,
        "title": rc.title,
        "summary": rc.summary,
        "message": rc.message,
        "evidence": [evidence_json(e) for e in rc.evidence],
        "error_line": evidence_json(rc.error_line) if rc.error_line else None,
        "rank": rc.rank,
        "local_rank": rc.local_rank,
        "pid": rc.pid,
        "actor": rc.actor,
        "node": rc.node,
        "stage": rc.stage,
        "step": rc.step,
        "confidence": rc.confidence,
        "remediation": {
            "summary": rc.remediation.summary,
            "why": rc.remediation.why,
            "fix": list(rc.remediation.fix),
            "references": list(rc.remediation.references),
            "job_values": job_values(rc.remediation),
            "cited": [{"key": c.key, "value": c.value} for c in rc.remediation.cited],
        },
        "traceback": tb,
        "explanation": list(rc.explanation),
        "candidates": [
            {"id": c.id, "category": c.category, "reason": c.reason, "first": evidence_json(c.first)}
            for c in rc.candidates
        ],
        "similar": list(rc.similar),
        "stage_source": rc.stage_source,
        "basis": (
            {"kind": rc.basis.kind, "rule": rc.basis.rule, "detail": rc.basis.detail}
            if rc.basis is not None
            else None
        ),
    }


def number(value: float | None) -> float | str | None:
    """JSON has no NaN or infinity: those become the strings "nan", "inf", "-inf" (null stays missing)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _plain(value: Any) -> Any:
    """Environment values (str, numbers, lists, dicts) as JSON-safe values."""
    if isinstance(value, float):
        return number(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def _span(s: StageSpan) -> dict[str, Any]:
    return {
        "stage": s.stage,
        "first": {"source": s.first_source, "line": s.first_line},
        "last": {"source": s.last_source, "line": s.last_line},
        "first_time": s.first_time,
        "last_time": s.last_time,
    }


def _progress(p: Progress) -> dict[str, Any]:
    return {
        "stage_reached": p.stage_reached,
        "last_step": p.last_step,
        "total_steps": p.total_steps,
        "completed": p.completed,
        "seconds_per_step": number(p.seconds_per_step),
        "failure_step": p.failure_step,
        "note": p.note,
        "timeline": [_span(s) for s in p.timeline],
        "segments": [_span(s) for s in p.segments],
    }


def _metrics(m: Metrics) -> dict[str, Any]:
    return {
        "steps": m.steps,
        "keys": list(m.keys),
        "series": [{"key": s.key, "steps": list(s.steps), "values": _numbers(s.values)} for s in m.series],
        "anomalies": [
            {
                "kind": a.kind,
                "step": a.step,
                "key": a.key,
                "value": number(a.value),
                "detail": a.detail,
                "fatal": a.fatal,
            }
            for a in m.anomalies
        ],
    }


def _numbers(values: tuple[float | None, ...]) -> list[float | str | None]:
    """[number(v) for v in values], at once when every value is a finite number (their sum is)."""
    if _NUMBERS.issuperset(map(type, values)) and math.isfinite(sum(values)):
        return list(values)
    return [number(v) for v in values]


def _stall(st: Stall) -> dict[str, Any]:
    return {
        "stage": st.stage,
        "step": st.step,
        "evidence": [evidence_json(e) for e in st.evidence],
        "reasons": list(st.reasons),
        "streams": [
            {
                "stream": s.stream,
                "last": evidence_json(s.last),
                "time": s.time,
                "seconds_before_end": number(s.seconds_before_end),
            }
            for s in st.streams
        ],
        "silent_first": list(st.silent_first),
        "silence_s": number(st.silence_s),
        "step_time_s": number(st.step_time_s),
        "duration": st.duration,
        "waits": [
            {
                "streams": list(g.streams),
                "waiting_in": g.waiting_in,
                "kind": g.kind,
                "frames": list(g.frames),
                "source": g.source,
                "first": evidence_json(g.first),
                "odd": g.odd,
            }
            for g in st.waits
        ],
        "odd_one_out": st.odd_one_out,
        "cause": None
        if st.cause is None
        else {
            "id": st.cause.id,
            "title": st.cause.title,
            "summary": st.cause.summary,
            "fix": list(st.cause.fix),
            "cited": [{"key": c.key, "value": c.value} for c in st.cause.cited],
        },
        "interrupted": evidence_json(st.interrupted) if st.interrupted else None,
    }


def to_dict(report: Report) -> dict[str, Any]:
    out = _report_dict(report)
    if report.stall is not None:  # (only then: the reports of every other status stay as they were)
        out["stall"] = _stall(report.stall)
    return out


def _report_dict(report: Report) -> dict[str, Any]:
    return {
        "schema_version": report.schema_version,
        "status": report.status,
        "root_cause": _root(report.root_cause) if report.root_cause else None,
        "symptoms": [_finding(f) for f in report.symptoms],
        "findings": [_finding(f) for f in report.findings],
        "inputs": [{"path": i.path, "lines": i.lines, "bytes": i.bytes} for i in report.inputs],
        "notes": list(report.notes),
        "progress": _progress(report.progress) if report.progress else None,
        "metrics": _metrics(report.metrics) if report.metrics else None,
        "environment": _plain(dict(report.environment)),
        "attempts": [
            {
                "index": a.index,
                "first_line": evidence_json(a.first_line),
                "status": a.status,
                "category": a.category,
                "summary": a.summary,
            }
            for a in report.attempts
        ],
        "known_issues": [_known_issue(k) for k in report.known_issues],
        "redactions": {str(k): int(v) for k, v in report.redactions.items()},
        "complete": report.complete,
    }


def _known_issue(k: KnownIssueMatch) -> dict[str, Any]:
    return {
        "id": k.id,
        "project": k.project,
        "url": k.url,
        "title": k.title,
        "verdict": k.verdict,
        "reason": k.reason,
        "matched_on": list(k.matched_on),
        "versions": [
            {
                "package": v.package,
                "affected": v.affected,
                "fixed": v.fixed,
                "job": v.job,
                "exact": v.exact,
                "state": v.state,
                "check": v.check,
            }
            for v in k.versions
        ],
        "fixed_in": k.fixed_in,
        "fix_pr": k.fix_pr,
        "workaround": k.workaround,
        "source_quote": k.source_quote,
    }


def render_json(report: Report) -> str:
    """The JSON report; log text without escape sequences and controls (reports.escape.without_controls):
    whoever prints a field prints text."""
    return _dumps(to_dict(without_controls(report))) + "\n"


_SCALARS = frozenset({int, float, str, type(None)})  # (exactly: a bool is written as true / false)
_NUMBERS = frozenset({int, float})


class _Written:
    """A list of scalars that _dumps writes itself; json.dumps writes its `token` in its place."""

    def __init__(self, index: int):
        self.token = f"\0verl-logscan-series-{index}\0"


def _dumps(data: dict[str, Any]) -> str:
    """json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False), with each metric
    series' steps and values (up to 2,000 numbers each) written with one join, not the encoder's
    generator per item (most of the JSON report's time on a long run): the same text."""
    written: list[tuple[str, list]] = []
    for series in (data.get("metrics") or {}).get("series", ()):
        for name in ("steps", "values"):
            items = series[name]
            if len(items) > 1 and _SCALARS.issuperset(map(type, items)):
                series[name] = _Written(len(written))
                written.append((json.dumps(series[name].token), items))
    # allow_nan=False: a non-finite float that slipped through is a bug, never invalid JSON
    text = json.dumps(
        data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False, default=lambda w: w.token
    )
    parts = []
    start = 0
    for token, items in written:
        at = text.index(token, start)
        line = text.rfind("\n", 0, at) + 1
        head = text[line:at]  # (the list starts on this line: its items go one deeper, its `]` as deep)
        indent = head[: len(head) - len(head.lstrip(" "))]
        inner = ",\n" + indent + "  "
        parts += [text[start:at], "[\n", indent, "  ", inner.join(_scalars(items)), "\n", indent, "]"]
        start = at + len(token)
    return "".join([*parts, text[start:]]) if written else text


def _scalars(items: list) -> Iterator[str]:
    """The items as json.dumps writes them: numbers alone (finite: their sum is) by repr."""
    if _NUMBERS.issuperset(map(type, items)) and math.isfinite(sum(items)):
        return map(repr, items)
    return map(_scalar, items)


def _scalar(value: int | float | str | None) -> str:
    """A scalar as json.dumps writes it (ensure_ascii=False, allow_nan=False)."""
    if value is None:
        return "null"
    if type(value) is str:
        return json.encoder.encode_basestring(value)
    if type(value) is float and not math.isfinite(value):
        raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
    return repr(value)
