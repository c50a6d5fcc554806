"""From findings to a verdict: the root cause, its evidence, the symptoms, and why.

v0 rules (issue 2): the highest-priority `cause` finding wins, the earliest among equals; wrappers
and symptoms never win while a cause exists. A traceback whose final exception no catalog entry
recognises is an `unknown` cause candidate (below every catalog cause). With no cause at all, the
best wrapper decides its own category (TAXONOMY's wrapper table, via `category_from`), then the best
symptom; both with low confidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from rapidfuzz import fuzz
from rapidfuzz import process as fuzz_process

from logparse.findings import FindingCollector, FindingGroup, Hit
from logparse.model import Candidate, Evidence, FindingView, Fix, RootCause, TracebackView
from logparse.normalize import Record
from logparse.tracebacks import Traceback
from patterns import Catalog, Entry, Role
from patterns.stages import stage_of_task

MAX_EVIDENCE = 60
CONTEXT_LINES = 5
UNKNOWN_PRIORITY = 10
IGNORED_EXCEPTIONS = {"KeyboardInterrupt", "SystemExit", "GeneratorExit", "StopIteration"}

UNKNOWN_FIX = Fix(
    summary="No catalog entry recognises this error; its line and traceback are shown as evidence.",
    why="verl-logscan names the exception that ended the first failing process when it knows no better.",
    fix=(
        "Read the traceback above: the innermost frame in your code or in verl is where to start.",
        "If this failure is a known kind, add a catalog entry (see README, 'Adding a catalog entry') "
        "so the next scan names it.",
    ),
    references=("https://github.com/verl-project/verl/issues",),
)


@dataclass
class Choice:
    kind: str  # cause | unknown | wrapper | symptom
    priority: int
    seq: int
    hit: Hit | None = None
    traceback: Traceback | None = None


def evidence_of(record: Record) -> Evidence:
    return Evidence(record.line.source, record.line.number, record.line.text)


def build_evidence(error: Record, tb: Traceback | None, context: list[Record]) -> tuple[Evidence, ...]:
    records: list[Record] = list(context[-CONTEXT_LINES:])
    if tb is not None:
        body = tb.all_records()
        room = MAX_EVIDENCE - len(records)
        if len(body) > room:
            head = body[:10]
            tail = body[-(room - len(head)):]
            body = head + tail
        records.extend(body)
    if all(r is not error for r in records):
        records.append(error)
        records = records[-MAX_EVIDENCE:]
    seen = set()
    out = []
    for r in records:
        key = (r.line.source, r.line.number)
        if key not in seen:
            seen.add(key)
            out.append(evidence_of(r))
    return tuple(out)


def traceback_view(tb: Traceback | None) -> TracebackView | None:
    if tb is None or tb.final is None:
        return None
    user = tb.innermost_user_frame()
    chain = []
    prev = tb.chained_from
    while prev is not None and len(chain) < 5:
        if prev.final is not None:
            chain.append(f"{prev.final.type}: {prev.final.message}".rstrip(": "))
        prev = prev.chained_from
    return TracebackView(
        exception_type=tb.final.type,
        exception_message=tb.final.message,
        frames=tuple((f.file, f.line, f.function) for f in tb.frames),
        innermost_user_frame=(user.file, user.line, user.function) if user else None,
        task=tb.task,
        chain=tuple(reversed(chain)),
    )


def fix_of(entry: Entry) -> Fix:
    r = entry.remediation
    return Fix(r.summary, r.why, r.fix, r.references)


def finding_view(group: FindingGroup, category: str | None = None) -> FindingView:
    return FindingView(
        id=group.entry.id,
        category=category or group.first.category,
        title=group.entry.title,
        role=group.entry.role.value,
        count=group.count,
        ranks=tuple(sorted(group.ranks)),
        nodes=tuple(sorted(group.nodes)),
        first=evidence_of(group.first.record),
    )


def similar_entries(catalog: Catalog, text: str, limit: int = 3) -> tuple[str, ...]:
    choices = {e.id: " ".join((e.title, *e.keywords, *(x.line for x in e.examples.match[:2])))
               for e in catalog.entries if e.role in (Role.CAUSE, Role.WRAPPER)}
    if not choices or not text:
        return ()
    best = fuzz_process.extract(text, choices, scorer=fuzz.token_set_ratio, limit=limit)
    return tuple(key for _, _, key in best)


def stage_for(entry: Entry | None, tb: Traceback | None) -> str | None:
    if tb is not None:
        stage = stage_of_task(tb.task)
        if stage:
            return stage
    return entry.stage if entry is not None else None


def choose(collector: FindingCollector, tracebacks: list[Traceback]) -> tuple[Choice | None, list[Choice]]:
    """All candidates ordered best first; the first is the verdict."""
    choices: list[Choice] = []
    for g in collector.by_role(Role.CAUSE):
        choices.append(Choice("cause", g.entry.priority, g.first.seq, hit=g.first))
    for tb in tracebacks:
        exc = tb.final
        if exc is None or exc.short_type in IGNORED_EXCEPTIONS:
            continue
        if exc.record.seq in collector.hit_seqs:
            continue
        choices.append(Choice("unknown", UNKNOWN_PRIORITY, exc.record.seq, traceback=tb))
    kind_rank = {"cause": 0, "unknown": 0, "wrapper": 1, "symptom": 2}
    if not choices:
        for g in collector.by_role(Role.WRAPPER):
            choices.append(Choice("wrapper", g.entry.priority, g.first.seq, hit=g.first))
        if not choices:
            for g in collector.by_role(Role.SYMPTOM):
                choices.append(Choice("symptom", g.entry.priority, g.first.seq, hit=g.first))
    choices.sort(key=lambda c: (kind_rank[c.kind], -c.priority, c.seq))
    return (choices[0] if choices else None), choices


def confidence_for(choice: Choice, symptom_count: int) -> float:
    if choice.kind == "cause":
        entry = choice.hit.entry
        base = 0.8 if entry.severity.value == "fatal" else 0.65
        if choice.hit.traceback is not None:
            base += 0.05
        if symptom_count:
            base += 0.05
        return round(min(base, 0.95), 2)
    return {"unknown": 0.4, "wrapper": 0.3, "symptom": 0.2}[choice.kind]


def describe(choice: Choice) -> str:
    if choice.hit is not None:
        r = choice.hit.record
        return f"{choice.hit.entry.id} at {r.line.source}:{r.line.number}"
    exc = choice.traceback.final
    return f"unrecognised {exc.type} at {exc.record.line.source}:{exc.record.line.number}"


def why_lost(winner: Choice, other: Choice) -> str:
    if other.kind in ("wrapper", "symptom") and winner.kind in ("cause", "unknown"):
        return f"a {other.kind}, never the root cause while a cause is visible"
    if other.kind == "unknown" and winner.kind == "cause":
        return "an exception no catalog entry names; a recognised cause wins"
    if other.priority < winner.priority:
        return f"lower priority ({other.priority} < {winner.priority})"
    if other.seq > winner.seq:
        return "same priority, seen later"
    return "ranked lower"


def _where(rec: Record, tb: Traceback | None) -> dict:
    """rank/local_rank/pid/actor/node of the failing process: the line's prefixes, else the
    traceback's first line, else (for a RayTaskError seen in the driver) the worker in its header."""
    o = rec.origin
    start = tb.start.origin if tb is not None else o
    out = {
        "rank": o.rank if o.rank is not None else start.rank,
        "local_rank": o.local_rank if o.local_rank is not None else start.local_rank,
        "pid": o.pid if o.pid is not None else start.pid,
        "actor": o.actor or start.actor,
        "node": o.node or start.node,
    }
    if tb is not None and tb.task and tb.task_pid is not None:
        # the error was raised in the Ray worker named in the header, wherever it was printed
        out["pid"] = tb.task_pid
        out["actor"] = tb.task.split(".", 1)[0]
        out["node"] = tb.task_node or out["node"]
    return out


def root_cause_of(choice: Choice, choices: list[Choice], collector: FindingCollector,
                  catalog: Catalog) -> RootCause:
    symptoms = len(collector.groups) - 1
    explanation = []
    candidates = []
    for other in choices[1:8]:
        reason = why_lost(choice, other)
        rec = other.hit.record if other.hit else other.traceback.final.record
        cid = other.hit.entry.id if other.hit else "unknown"
        cat = other.hit.category if other.hit else "unknown"
        candidates.append(Candidate(cid, cat, reason, evidence_of(rec)))
    if choice.hit is not None:
        hit = choice.hit
        entry = hit.entry
        rec = hit.record
        tb = hit.traceback
        explanation.append(
            f"Chosen: {describe(choice)}, a catalog {choice.kind} (priority {entry.priority})"
            + (f" on {rec.origin.where()}" if rec.origin.where() else "")
        )
        if choice.kind == "wrapper":
            explanation.append("Only wrappers were found; the wrapper's own category decides, with low confidence.")
        if choice.kind == "symptom":
            explanation.append("Only symptoms were found; their category is reported with low confidence.")
        return RootCause(
            id=entry.id,
            category=hit.category,
            title=entry.title,
            summary=entry.render_message(hit.groups),
            message=rec.message,
            evidence=build_evidence(rec, tb, hit.context if tb is None else tb.context),
            **_where(rec, tb),
            stage=stage_for(entry, tb),
            confidence=confidence_for(choice, symptoms),
            remediation=fix_of(entry),
            error_line=evidence_of(rec),
            traceback=traceback_view(tb),
            explanation=tuple(explanation) + tuple(f"Beat {c.id} ({c.first.source}:{c.first.line}): {c.reason}"
                                                   for c in candidates),
            candidates=tuple(candidates),
        )
    tb = choice.traceback
    exc = tb.final
    rec = exc.record
    text = f"{exc.type}: {exc.message}".rstrip(": ") if exc.message else exc.type
    explanation.append(f"Chosen: {describe(choice)}: no catalog entry matched; it is the exception that "
                       f"ended the first failing stream")
    return RootCause(
        id="unknown",
        category="unknown",
        title=f"Unrecognised error: {exc.short_type}",
        summary=text,
        message=rec.message,
        evidence=build_evidence(rec, tb, tb.context),
        **_where(rec, tb),
        stage=stage_for(None, tb),
        confidence=confidence_for(choice, symptoms),
        remediation=UNKNOWN_FIX,
        error_line=evidence_of(rec),
        traceback=traceback_view(tb),
        explanation=tuple(explanation) + tuple(f"Beat {c.id} ({c.first.source}:{c.first.line}): {c.reason}"
                                               for c in candidates),
        candidates=tuple(candidates),
        similar=similar_entries(catalog, text),
    )


def infer(collector: FindingCollector, tracebacks: list[Traceback], catalog: Catalog
          ) -> tuple[RootCause | None, tuple[FindingView, ...], tuple[FindingView, ...]]:
    choice, choices = choose(collector, tracebacks)
    groups = sorted(collector.groups.values(), key=lambda g: g.first.seq)
    findings = tuple(finding_view(g) for g in groups)
    if choice is None:
        return None, (), findings
    root = root_cause_of(choice, choices, collector, catalog)
    winner_group = None
    if choice.hit is not None:
        winner_group = next(g for g in groups if g.first is choice.hit)
    symptoms = tuple(
        finding_view(g) for g in groups
        if g is not winner_group and g.entry.role != Role.CONTEXT
    )
    return root, symptoms, findings
