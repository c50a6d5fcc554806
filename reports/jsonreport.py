"""The JSON contract (reports/schema.json, schema_version 1)."""

from __future__ import annotations

import json
from typing import Any

from logparse.model import Evidence, FindingView, Report, RootCause


def _evidence(e: Evidence) -> dict[str, Any]:
    return {"source": e.source, "line": e.line, "text": e.text}


def _finding(f: FindingView) -> dict[str, Any]:
    return {
        "id": f.id, "category": f.category, "title": f.title, "role": f.role, "count": f.count,
        "ranks": list(f.ranks), "nodes": list(f.nodes), "first": _evidence(f.first),
        "explained_by": f.explained_by,
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
                {"file": t.innermost_user_frame[0], "line": t.innermost_user_frame[1],
                 "function": t.innermost_user_frame[2]} if t.innermost_user_frame else None),
            "task": t.task,
            "chain": list(t.chain),
        }
    return {
        "id": rc.id, "category": rc.category, "title": rc.title, "summary": rc.summary, "message": rc.message,
        "evidence": [_evidence(e) for e in rc.evidence],
        "error_line": _evidence(rc.error_line) if rc.error_line else None,
        "rank": rc.rank, "local_rank": rc.local_rank, "pid": rc.pid, "actor": rc.actor, "node": rc.node,
        "stage": rc.stage, "confidence": rc.confidence,
        "remediation": {"summary": rc.remediation.summary, "why": rc.remediation.why,
                        "fix": list(rc.remediation.fix), "references": list(rc.remediation.references)},
        "traceback": tb,
        "explanation": list(rc.explanation),
        "candidates": [{"id": c.id, "category": c.category, "reason": c.reason, "first": _evidence(c.first)}
                       for c in rc.candidates],
        "similar": list(rc.similar),
    }


def to_dict(report: Report) -> dict[str, Any]:
    return {
        "schema_version": report.schema_version,
        "status": report.status,
        "root_cause": _root(report.root_cause) if report.root_cause else None,
        "symptoms": [_finding(f) for f in report.symptoms],
        "findings": [_finding(f) for f in report.findings],
        "inputs": [{"path": i.path, "lines": i.lines, "bytes": i.bytes} for i in report.inputs],
        "notes": list(report.notes),
    }


def render_json(report: Report) -> str:
    return json.dumps(to_dict(report), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
