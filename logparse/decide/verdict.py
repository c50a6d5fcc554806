"""Observations to a verdict, and the verdict to the Report: the root cause with its evidence, where
and at which stage it happened, what to do, the symptoms, and why this cause.

Each question has its own module, the only one that answers it: candidates and echoes
(logparse.decide.candidates), the category of a failure no entry names (logparse.decide.classify), the
choice (logparse.decide.choose), where (logparse.decide.locate), the stage (logparse.decide.stage) and
the fix (logparse.decide.remedy). This module puts their answers together, once: nothing after it
changes a verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from logparse import model
from logparse.decide.candidates import Aside, Choice, classify_choice, live_bare_lines, recurrence_key
from logparse.decide.choose import choose, confidence_for, describe, explanation, why_lost
from logparse.decide.ending import Interruption, interruption, stopped_sentence
from logparse.decide.known_issues import match_known_issues
from logparse.decide.locate import Place, absent_rank, absent_rank_sentence, locate
from logparse.decide.remedy import remedy
from logparse.decide.stage import (
    StageEvidence,
    StageSource,
    messages_of,
    stage_of,
    stage_of_wait,
    stage_reached,
    step_failed_in,
    task_called_after,
)
from logparse.decide.stall import judge_stall
from logparse.model import (
    AttemptVerdict,
    Basis,
    Candidate,
    Environment,
    Evidence,
    FindingView,
    Fix,
    InputInfo,
    Report,
    RootCause,
    TracebackView,
)
from logparse.observe.bare_lines import BareLine
from logparse.observe.collectives import CollectiveReport
from logparse.observe.evidence import FailureEvidence
from logparse.observe.hits import FindingCollector, FindingGroup, merge_similar
from logparse.observe.progression import Progression
from logparse.observe.stalls import StallFacts
from logparse.observe.tracebacks import HEAD_FRAMES, Traceback, frame_kind
from logparse.observe.worker_deaths import DeadWorker, death_reports
from logparse.read.normalize import Record
from patterns import Catalog, Entry, Role
from patterns.inference import inference_rules
from patterns.upstream_issues import KnownIssues


@dataclass(frozen=True)
class Observations:
    """What the observers saw in one attempt of a job (logparse.observe), as the decision reads it.
    Taken when the attempt is over: the progression and the environment are frozen values
    (StageTracker.freeze, EnvironmentTracker.fingerprint), so nothing the scan reads later changes
    what was decided from them."""

    collector: FindingCollector
    tracebacks: tuple[Traceback, ...]
    bare_lines: tuple[BareLine, ...]  # the bare failure lines kept
    progress: Progression
    collective: CollectiveReport | None
    environment: Environment
    stall: StallFacts | None = None  # (only for the report's own attempt, once the inputs ended)


MAX_EVIDENCE = 60
CONTEXT_LINES = 5
MAX_SURVIVED_TITLE = 300  # characters of a survived exception's type and message in its row
MAX_CHARTED_EXPLANATION = 8


def evidence_of(record: Record) -> Evidence:
    return Evidence(record.line.source, record.line.number, record.line.text)


def build_evidence(
    error: Record, tb: Traceback | None, context: list[Record], after: list[Record] | None = None
) -> tuple[Evidence, ...]:
    records: list[Record] = list(context[-CONTEXT_LINES:])
    if tb is not None:
        body = tb.all_records()
        room = MAX_EVIDENCE - len(records)
        if len(body) > room:
            head = body[:10]
            tail = body[-(room - len(head)) :]
            body = head + tail
        records.extend(body)
    if all(r is not error for r in records):
        records.append(error)
        records.extend(after or ())
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
    shown, chain_cut = tb.chain_shown()
    return TracebackView(
        exception_type=tb.final.type,
        exception_message=tb.final.message,
        frames=tuple((f.file, f.line, f.function) for f in tb.frames),
        innermost_user_frame=(user.file, user.line, user.function) if user else None,
        task=tb.task,
        chain=tuple(f"{e.type}: {e.message}".rstrip(": ") for e in shown),
        frames_cut=tb.frames_cut,
        frames_cut_after=HEAD_FRAMES if tb.frames_cut else 0,
        chain_cut=chain_cut,
        chain_cut_after=1 if chain_cut else 0,
        frame_kinds=tuple(frame_kind(f.file).value for f in tb.frames),
    )


def finding_view(
    group: FindingGroup,
    category: str | None = None,
    explained_by: str | None = None,
    set_aside: Aside | None = None,
    progress: Progression | None = None,
) -> FindingView:
    """A group of hits as a report shows it; `progress`: the steps they came in are shown."""
    last = group.last if group.last is not None else group.first
    return FindingView(
        explained_by=explained_by,
        set_aside=set_aside.why if set_aside is not None else None,
        set_aside_kind=set_aside.kind if set_aside is not None else None,
        first_step=step_failed_in(progress, group.first.seq) if progress is not None else None,
        last_step=step_failed_in(progress, last.seq) if progress is not None else None,
        id=group.entry.id,
        category=category or group.first.category,
        title=group.entry.title,
        role=group.entry.role.value,
        count=group.count,
        ranks=tuple(sorted(group.ranks)),
        nodes=tuple(sorted(group.nodes)),
        first=evidence_of(group.first.record),
    )


def similar_entries(catalog: Catalog, evidence: FailureEvidence | None, limit: int = 3) -> tuple[str, ...]:
    """The catalog entries most like an unrecognised failure (its message against their examples)."""
    if evidence is None:
        return ()
    from logparse.decide.classify import nearest_entries  # (only for a failure no entry names)

    return tuple(n.entry_id for n in nearest_entries(evidence, catalog, limit=limit))


def basis_of(choice: Choice) -> Basis:
    """What decided the category: a catalog entry, or a fallback rule (phrase, type, frame, nearest)."""
    c = choice.classification
    if c is not None:
        return Basis(c.basis, c.rule, c.detail)
    if choice.hit is not None:
        return Basis("entry", choice.hit.entry.id, f"catalog entry {choice.hit.entry.id}")
    return Basis("none", None, "no entry or fallback rule names it")


@dataclass(frozen=True)
class Failure:
    """The chosen failure's own evidence, whatever kind of candidate it is."""

    id: str
    title: str
    summary: str
    record: Record
    traceback: Traceback | None
    entry: Entry | None
    context: Sequence[Record]
    after: Sequence[Record]
    similar: FailureEvidence | None  # what to compare with the catalog (None: no similar entries)


def failure_of(choice: Choice) -> Failure:
    if choice.hit is not None:
        hit = choice.hit
        decided = choice.classification is not None
        return Failure(
            hit.entry.id,
            hit.entry.title,
            hit.entry.render_message(hit.groups),
            hit.record,
            hit.traceback,
            hit.entry,
            hit.context if hit.traceback is None else hit.traceback.context,
            hit.after,
            choice.evidence() if decided else None,
        )
    if choice.bare is not None:
        bare = choice.bare
        what = bare.exc_type or (
            "traceback (its exception line is missing)" if bare.traceback else "error line"
        )
        title = f"Unrecognised {what}" if bare.exc_type or bare.traceback else "Unrecognised error line"
        rec = bare.record
        return Failure(
            "unknown",
            title,
            rec.message.strip(),
            rec,
            bare.traceback,
            None,
            list(bare.context),
            bare.after,
            bare.evidence(),
        )
    tb = choice.traceback
    exc = tb.final
    text = f"{exc.type}: {exc.message}" if exc.message else exc.type
    return Failure(
        "unknown",
        f"Unrecognised error: {exc.short_type}",
        text,
        exc.record,
        tb,
        None,
        tb.context,
        (),
        choice.evidence(),
    )


def root_cause_of(
    choice: Choice,
    choices: list[Choice],
    groups: list[FindingGroup],
    catalog: Catalog,
    obs: Observations,
    extra_explanation: tuple[str, ...] = (),
) -> RootCause:
    if choice.kind in ("unknown", "bare", "wrapper") and choice.classification is None:
        classify_choice(choice, catalog, nearest=True)  # the nearest entry only for the one chosen
    echoes = sum(
        1
        for g in groups
        if g.entry.role in (Role.SYMPTOM, Role.WRAPPER) and (choice.group is None or g is not choice.group)
    )
    failure = failure_of(choice)
    rec, tb = failure.record, failure.traceback
    messages = messages_of(rec.message, failure.after)
    deaths = death_reports(g.first for g in groups)
    place = locate(
        rec,
        tb if choice.bare is None else None,
        choice.category,
        choice.hit.category if choice.hit is not None else None,
        obs.tracebacks,
        obs.collector.groups.values(),
        obs.collective,
        choice.hit.groups if choice.hit is not None else None,
        messages,
        deaths,
        obs.stall.streams if obs.stall is not None else (),
    )
    stage, source = stage_of(
        StageEvidence(
            rec.seq,
            choice.category,
            failure.entry,
            tb,
            messages,
            place.actor,
            obs.tracebacks,
            obs.collective,
            obs.progress,
        )
    )
    death = deaths.get(place.pid) if place.pid is not None else None
    dead = () if death is None else (death_sentence(death, task_called_after(obs.tracebacks, rec.seq)),)
    return assemble_root(
        place,
        stage,
        source,
        id=failure.id,
        category=choice.category,
        title=failure.title,
        summary=failure.summary,
        message=rec.message,
        evidence=build_evidence(rec, tb, failure.context, failure.after),
        step=step_failed_in(obs.progress, rec.seq),
        confidence=confidence_for(choice, choices, dead_worker_known=bool(dead) and death.node is not None),
        remediation=remedy(choice, obs.environment),
        error_line=evidence_of(rec),
        traceback=traceback_view(tb),
        explanation=tuple(explanation(choice, choices, echoes))
        + dead
        + _absent(choice, obs, place)
        + extra_explanation,
        candidates=tuple(
            Candidate(other.entry_id, other.category, why_lost(choice, other), evidence_of(other.record))
            for other in choices[1:MAX_CHARTED_EXPLANATION]
        ),
        similar=similar_entries(catalog, failure.similar),
        basis=basis_of(choice),
    )


def _absent(choice: Choice, obs: Observations, place: Place) -> tuple[str, ...]:
    """Why a collective timeout is placed on a rank that printed no timeout (decide.locate.absent_rank)."""
    if choice.hit is None or obs.stall is None or place.rank is None:
        return ()
    observer = inference_rules().observer_categories
    absent = absent_rank(obs.collector.groups.values(), observer, obs.stall.streams)
    if choice.hit.category not in observer or absent is None or not absent.who.endswith(f" {place.rank}"):
        return ()
    return (absent_rank_sentence(place.rank, absent),)


def assemble_root(place: Place, stage: str | None, source: StageSource | None, **what) -> RootCause:
    """The one place a RootCause is built: where from decide/locate's Place, the stage from decide/stage
    (and the source that named it), the rest (`what`) from the failure."""
    return RootCause(
        rank=place.rank,
        local_rank=place.local_rank,
        pid=place.pid,
        actor=place.actor,
        node=place.node,
        stage=stage,
        stage_source=source.value if source else None,
        **what,
    )


# what Ray's exit types say of a worker's death (reference §4.3, §4.4)
EXIT_TYPE_SAYS = {
    "SYSTEM_ERROR": (
        "Ray saw the process vanish without a Python error and names no cause of its own: a SIGKILL from "
        "the kernel OOM killer (host memory) is the most common, `ray stop --force` or a crash in native "
        "code (SIGSEGV) the others; check the node's kernel log (`dmesg -T | grep -i oom`)."
    ),
    "NODE_OUT_OF_MEMORY": "Ray's memory monitor killed it: the node ran low on host memory.",
    "USER_ERROR": "Its own code raised: its traceback is the cause.",
}


def death_sentence(death: DeadWorker, task: str | None) -> str:
    """One sentence of who died, where, in which task, and what Ray's exit type says of why."""
    who = death.actor or "a Ray worker"
    named = f" ({death.name}{f', rank {death.rank}' if death.rank is not None else ''})" if death.name else ""
    where = f" on node {death.node}" if death.node else ""
    during = f" while running {task}" if task else ""
    exit_type = f", exit type {death.exit_type}" if death.exit_type else ""
    says = EXIT_TYPE_SAYS.get(death.exit_type or "", "")
    return f"The worker that died: {who} pid {death.pid}{named}{where}{during}{exit_type}. {says}".rstrip()


@dataclass(frozen=True)
class Verdict:
    """What infer decided of one attempt: the root cause, its symptoms, the other findings."""

    root: RootCause | None
    symptoms: tuple[FindingView, ...]
    findings: tuple[FindingView, ...]
    notes: tuple[str, ...] = ()
    root_seq: int | None = None  # position of the root-cause line in the scan
    stopped: Interruption | None = None  # the job was stopped from outside (decide.ending)


def infer(obs: Observations, catalog: Catalog, extra_explanation: tuple[str, ...] = ()) -> Verdict:
    """The verdict of one attempt: the root cause (or none), the symptoms (the failures the run survived
    among them) and every finding."""
    collector, tracebacks = obs.collector, list(obs.tracebacks)
    groups = merge_similar(sorted(collector.groups.values(), key=lambda g: g.first.seq))
    findings = tuple(finding_view(g) for g in groups)
    stop = interruption(obs.stall, tracebacks)
    bare = live_bare_lines(list(obs.bare_lines), tracebacks, obs.progress, stop)
    choice, choices = choose(collector, groups, tracebacks, obs.progress, bare, catalog, stop)
    aside = {c.group.entry.id: c.aside for c in choices if c.group is not None and c.aside is not None}
    survived = tuple(survived_views(choices, obs.progress))
    if choice is None:
        symptoms = [
            finding_view(g, set_aside=aside.get(g.entry.id), progress=obs.progress)
            for g in merge_by_entry([g for g in groups if g.entry.role != Role.CONTEXT])
            if g.entry.id in aside
        ]
        return Verdict(None, (*symptoms, *survived), findings, stopped=stop)
    root = root_cause_of(choice, choices, groups, catalog, obs, extra_explanation)
    explained_by = {
        c.group.entry.id: describe(c.explained_by)
        for c in choices
        if c.group is not None and c.explained_by is not None
    }
    echo_of = describe(choice) if choice.kind in ("cause", "unknown", "bare") else None
    symptoms = []
    for g in merge_by_entry([g for g in groups if g is not choice.group and g.entry.role != Role.CONTEXT]):
        cause = echo_of if g.entry.role in (Role.SYMPTOM, Role.WRAPPER) else explained_by.get(g.entry.id)
        symptoms.append(
            finding_view(g, explained_by=cause, set_aside=aside.get(g.entry.id), progress=obs.progress)
        )
    return Verdict(root, (*symptoms, *survived), findings, (), choice.record.seq, stop)


def survived_views(choices: list[Choice], progress: Progression) -> list[FindingView]:
    """The exceptions no entry names that the run's story set aside, one row per error (its type,
    message and raising frame: candidates.recurrence_key), with how often and in which steps."""
    rows: dict[tuple, list[Choice]] = {}
    for c in choices:
        if c.kind == "unknown" and c.aside is not None and c.traceback is not None:
            rows.setdefault(recurrence_key(c.traceback), []).append(c)
    out = []
    for members in rows.values():
        first, last = members[0], members[-1]
        exc = first.traceback.final
        origins = [m.record.origin for m in members]
        out.append(
            FindingView(
                id="unknown",
                category=first.category,
                title=f"{exc.type}: {exc.message}"[:MAX_SURVIVED_TITLE] if exc.message else exc.type,
                role="cause",
                count=len(members),
                ranks=tuple(sorted({o.rank for o in origins if o.rank is not None})),
                nodes=tuple(sorted({o.node for o in origins if o.node})),
                first=evidence_of(first.record),
                set_aside=last.aside.why,
                set_aside_kind=last.aside.kind,
                first_step=step_failed_in(progress, first.seq),
                last_step=step_failed_in(progress, last.seq),
            )
        )
    return out


def merge_by_entry(groups: list[FindingGroup]) -> list[FindingGroup]:
    """One symptom row per entry: counts added, rank and node sets joined, the earliest first line."""
    out: dict[str, FindingGroup] = {}
    for g in groups:
        k = out.get(g.entry.id)
        if k is None:
            out[g.entry.id] = FindingGroup(
                g.entry, g.key, g.first, g.count, set(g.ranks), set(g.nodes), g.last
            )
            continue
        k.count += g.count
        k.ranks |= g.ranks
        k.nodes |= g.nodes
        if g.first.seq < k.first.seq:
            k.first = g.first
        if g.last is not None and (k.last is None or g.last.seq > k.last.seq):
            k.last = g.last
    return list(out.values())


def build_report(
    verdict: Verdict,
    obs: Observations,
    metrics: model.Metrics | None,
    inputs: Sequence[InputInfo],
    attempts: Sequence[AttemptVerdict],
    input_notes: Sequence[str] = (),
    scan_notes: Sequence[str] = (),
    leading: Sequence[str] = (),
    trailing: Sequence[str] = (),
    complete: bool = True,
    known_issues: KnownIssues | None = None,
) -> Report:
    """The Report of a job from its last attempt's verdict and observations. Notes, in order:
    `leading` (what was said before the scan), what reading the inputs left to say (`input_notes`),
    the verdict's, what the observers left to say (`scan_notes`), `trailing` (what was said after).
    `complete`: False when the scan was interrupted; `known_issues`: the known upstream issues the root
    cause is matched against (logparse.decide.known_issues), once the verdict is final."""
    root = verdict.root
    stall = judge_stall(obs.stall, obs.progress, obs.tracebacks, root, verdict.root_seq, obs.environment)
    notes = [*input_notes, *verdict.notes, *scan_notes]
    if stall is not None:
        failure = wait_failure(stall, root)
        if failure is not None:
            root, stall = failure, None  # the wait it hung in is the failure (resources no node has)
        else:
            notes[:0] = stall_notes(stall, root)
            root = None  # (the failure, if any, was how the hung job ended)
    failed = root is not None
    reached = stage_reached(obs.progress, root.stage if root else None)
    stopped = verdict.stopped if not failed and stall is None else None
    progress = obs.progress.snapshot(
        failed, verdict.root_seq if failed else None, reached, say_stopped=stall is None and stopped is None
    )
    if stopped is not None and not progress.completed:
        notes.insert(0, stopped_sentence(stopped, progress))
    status = (
        model.ReportStatus.FAILED
        if failed
        else model.ReportStatus.STALLED
        if stall
        else model.ReportStatus.HEALTHY
    )
    if not failed and inputs and not any(i.lines for i in inputs):
        # an empty file or pipe is not a healthy job: there was nothing to judge (and no "stopped
        # before the first step" either)
        status = model.ReportStatus.EMPTY
        which = "every input was empty or skipped" if len(inputs) > 1 else "the input was empty or skipped"
        notes.insert(0, "no log lines read: " + which)
        progress = obs.progress.snapshot(failed, None, reached, say_stopped=False)
    return Report(
        status=status,
        root_cause=root,
        symptoms=verdict.symptoms,
        findings=verdict.findings,
        inputs=tuple(inputs),
        notes=(*leading, *notes, *trailing),
        progress=progress,
        metrics=metrics,
        environment=obs.environment,
        attempts=tuple(attempts),
        complete=complete,
        stall=stall,
        known_issues=match_known_issues(root, obs.environment, known_issues),
    )


def wait_failure(stall: model.Stall, named: RootCause | None) -> RootCause | None:
    """The failure a hang is when its cause says it is one (patterns/stalls.yaml `causes` with a
    `category`: a wait for resources no node has is ray-error, whether the job then hung, was killed or
    timed out); None when the hang is a stall. `named`: the failure chosen from the log's lines, which
    stays the root cause when the catalog names the same wait (Ray's pending-request warning)."""
    cause = stall.cause
    if cause is None or cause.category is None:
        return None
    if named is not None and named.category == cause.category:
        return named
    first = stall.evidence[0] if stall.evidence else None
    stage, source = stage_of_wait(cause.stage_hint, stall.stage)
    return assemble_root(
        Place(),  # (a hang's stacks name who waited, not one failing process: the odd one out says it)
        stage,
        source,
        id=cause.id,
        category=cause.category,
        title=cause.title[:1].upper() + cause.title[1:],
        summary=cause.summary,
        message=stall.odd_one_out or (first.text if first else cause.title),
        evidence=stall.evidence,
        confidence=0.6,
        remediation=Fix(cause.title, cause.summary, cause.fix, (), cause.cited),
        error_line=first,
        explanation=(
            *stall.reasons,
            f"The job waited ({cause.title}) and never went on: a wait for resources that never come is "
            f"the failure ({cause.category}), and whatever ended the job after it is its echo.",
        ),
        basis=Basis("stall", cause.id, f"the wait the job hung in ({cause.id} of patterns/stalls.yaml)"),
    )


def stall_notes(stall: model.Stall, superseded: RootCause | None) -> list[str]:
    """What a stall adds to the notes: how the hung job ended, and the failure that was only that (or
    the catalog's name of the wait the stall's sign shows)."""
    if stall.interrupted is None:
        if superseded is None:
            return []
        return [f"{superseded.title} ({superseded.category}) is the wait the job hung in, not a failure"]
    e = stall.interrupted
    note = f"interrupted after it stalled ({e.source}:{e.line}): the signal is how the job ended, not why"
    if superseded is not None:
        note += f"; {superseded.title} ({superseded.category}) came with the interruption"
    return [note]


def attempt_verdict(index: int, first_line: Evidence, verdict: Verdict) -> AttemptVerdict:
    """An earlier attempt of the job (a restart), diagnosed on its own."""
    root = verdict.root
    return AttemptVerdict(
        index=index,
        first_line=first_line,
        status=model.ReportStatus.FAILED if root else model.ReportStatus.HEALTHY,
        category=root.category if root else None,
        summary=root.summary if root else None,
    )
