"""Two runs of one job compared: `verl-logscan diff GOOD BAD` ("this worked yesterday").

Each side is analysed exactly as `verl-logscan scan` analyses it (logparse.pipeline.analyse); the diff
is made of facts from the two reports and from the two runs' lines, in the order a user needs them:

1. the environment and config values that differ (the environment tracker's fingerprint: versions
   first, then topology, then every `config.*` value);
2. where BAD's progress first leaves GOOD's: a step metric outside GOOD's band (or not finite), or
   BAD stopping at an earlier step or stage;
3. the lines new in BAD: messages whose masked template (observe.hits.mask: numbers, hex, paths and ids
   masked, as grouping does) never appears in GOOD, most error-like first (MAX_NEW_LINES of them), each
   with its stream and BAD's stage at that line; the new lines of one Python traceback (its
   `Traceback (most recent call last):`, frame, code and `^^^` lines and its exception line, in one
   stream) are one entry, shown by its most error-like line with the count of the others;
4. BAD's verdict, and whether GOOD shows the same failure (failed the same way, or printed it without
   failing).

A side read from a pipe (`-`, or a process substitution such as /dev/fd/63) is first copied to a
temporary file, since it is read twice (the analysis, then its lines). The report is redacted as a
scan's is (logparse.redact), with one placeholder per value across both sides.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace

from logparse.model import (
    DiffReport,
    Divergence,
    EnvChange,
    Evidence,
    MetricSeries,
    NewLine,
    Report,
    RunSummary,
)
from logparse.observe.hits import mask
from logparse.observe.printed_setup import PrintedSetup
from logparse.pipeline import ScanConfig, analyse_unredacted
from logparse.read.normalize import Normalizer, Record
from logparse.read.sources import InputStats, expand_inputs, open_input, read_input
from logparse.redact import RedactConfig, Redactor, redactor_for
from patterns import Catalog
from patterns.diff_words import error_words, level_scores

MAX_NEW_LINES = 25  # lines new in BAD shown at most (the count of all of them is kept)
MAX_TEMPLATES = 100_000  # templates remembered per side (a log of unique lines stays bounded)
MAX_STREAMS = 8  # streams named per new line
MAX_TEMPLATE_CHARS = 300
MAX_BEFORE_CHARS = 512  # of the end of the line before a new line's first, kept for its redaction
SCIENTIFIC_RE = re.compile(r"<\*>[eE][+-]?<\*>")
UNKNOWN = "unknown"  # the root-cause id of an exception no catalog entry names
# environment keys that are evidence or lists of hosts, not settings to compare
SKIPPED_KEYS = frozenset({"hosts", "verl_era_evidence"})
VERSION_KEYS = (
    "torch", "vllm", "vllm_engine", "sglang", "verl", "verl_era", "cuda", "cuda_driver", "nvidia_driver",
    "nccl", "ray", "transformers", "flash_attn", "python", "wandb",
)  # fmt: skip
TOPOLOGY_KEYS = ("world_size", "gpu_model", "gpu_memory_gib", "rollout_engine", "model_path")
# a metric leaves GOOD's band when it is beyond GOOD's range by more than this share of the range,
# and by more than FLAT_MARGIN of the values' size
BAND_MARGIN = 0.5
FLAT_MARGIN = 0.1
# how error-like a new line is: words (lower case) and levels, each with its weight (patterns/diff.yaml)
ERROR_WORDS = error_words()
LEVEL_SCORES = level_scores()


def diff_runs(
    good: list[str],
    bad: list[str],
    catalog: Catalog,
    redact: RedactConfig | None = None,
    max_new_lines: int = MAX_NEW_LINES,
) -> DiffReport:
    """GOOD's and BAD's inputs (files, folders, `-`) compared; redacted with `redact` (None: not)."""
    with ExitStack() as stack:
        good_paths = stack.enter_context(_readable_twice(good))
        bad_paths = stack.enter_context(_readable_twice(bad))
        config = ScanConfig(all_metrics=True)
        hosts = redact is not None and redact.hosts
        g_report, g_names = analyse_unredacted(good_paths, catalog, config, learn_names=hosts)
        b_report, b_names = analyse_unredacted(bad_paths, catalog, config, learn_names=hosts)
        g_lines = _templates(good_paths, keep_first=False)
        b_lines = _templates(bad_paths, keep_first=True)
    out = compare(g_report, b_report, g_lines, b_lines, max_new_lines)
    if redact is None:
        return replace(out, new_lines=tuple(replace(n, before=None) for n in out.new_lines))
    redactor = redactor_for([g_report, b_report, out], redact, [g_names, b_names])
    return _redacted(out, redactor)


def compare(
    good: Report, bad: Report, g_lines: Templates, b_lines: Templates, max_new_lines: int = MAX_NEW_LINES
) -> DiffReport:
    """The diff of two finished (unredacted) reports and their runs' templates."""
    new = _new_lines(bad, g_lines, b_lines)
    templates = sum(1 + n.folded for n in new)
    in_good, detail = _bad_in_good(good, bad, g_lines)
    changes = env_changes(_environment(good, g_lines), _environment(bad, b_lines), failure_text(bad))
    diverged = divergences(good, bad)
    notes = [f"GOOD: {n}" for n in good.notes[:3]] + [f"BAD: {n}" for n in bad.notes[:3]]
    if g_lines.truncated or b_lines.truncated:
        notes.append(f"a run had more than {MAX_TEMPLATES} distinct templates: the rest were not compared")
    return DiffReport(
        good=_summary(good),
        bad=_summary(bad),
        changes=changes,
        divergences=diverged,
        new_lines=tuple(new[:max_new_lines]),
        new_templates=templates,
        new_entries=len(new),
        bad_in_good=in_good,
        bad_in_good_detail=detail,
        series=_paired_series(good, bad),
        notes=tuple(notes),
        lead=lead(changes, diverged, new),
    )


def lead(changes: tuple[EnvChange, ...], diverged: tuple[Divergence, ...], new: list[NewLine]) -> str | None:
    """The difference that best explains BAD's verdict: a changed version or config value named in
    BAD's error or frames, then a metric that left GOOD's band (or BAD stopping short), then the most
    error-like new line, then any other change shown in both runs. A value shown in one run only
    never leads."""
    named = next((c for c in changes if c.why == NAMED_IN_ERROR), None)
    if named is not None:
        return f"{named.key}: {named.good} -> {named.bad}, {NAMED_IN_ERROR}"
    if diverged:
        return diverged[0].detail
    if new and new[0].score > 0:
        return f"new in BAD: {new[0].template}"
    both = next((c for c in changes if not c.one_run_only), None)
    return f"{both.key}: {both.good} -> {both.bad}" if both is not None else None


def _environment(report: Report, lines: Templates) -> dict:
    """The report's environment fingerprint, with the versions and config values the run printed in
    the shapes an ordinary script prints them (observe.printed_setup) where the fingerprint lacks them."""
    out: dict = {k: v for k, v in lines.setup.versions.items()}
    out.update({f"config.{k}": v for k, v in lines.setup.config.items() if v is not None})
    out.update(report.environment)
    return out


def failure_text(report: Report) -> str:
    """BAD's error and frames in lower case: what a changed value must be named in to lead."""
    rc = report.root_cause
    if rc is None:
        return ""
    parts = [rc.message]
    if rc.error_line is not None:
        parts.append(rc.error_line.text)
    tb = rc.traceback
    if tb is not None:
        parts += [tb.exception_type, tb.exception_message, *tb.chain]
        parts += [f"{file} {func}" for file, _, func in tb.frames]
    return "\n".join(parts).lower()


# -- the inputs ----------------------------------------------------------------------------------------
@contextmanager
def _readable_twice(paths: list[str]) -> Iterator[list[str]]:
    """`paths` with every pipe (stdin, a FIFO, /dev/fd/N) copied to a temporary file first."""
    tmpdir = None
    out = []
    try:
        for p in paths or ["-"]:
            if not _is_pipe(p):
                out.append(p)
                continue
            tmpdir = tmpdir or tempfile.mkdtemp(prefix="verl-logscan-diff-")
            copy = os.path.join(tmpdir, f"input-{len(out)}.log")
            src = open_input(p)
            try:
                with open(copy, "wb") as dst:
                    shutil.copyfileobj(src, dst)
            finally:
                if p != "-":
                    src.close()
            out.append(copy)
        yield out
    finally:
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)


def _is_pipe(path: str) -> bool:
    if path == "-":
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


TRACEBACK_START = "Traceback (most recent call last):"
# lines a chained traceback puts between its parts (the next part's first line opens it again)
CHAIN_LINES = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)


@dataclass
class Seen:
    first: Record
    before: str = ""  # the end of the line before `first` in its input (for the redaction)
    count: int = 0
    streams: list[str] = field(default_factory=list)
    traceback: tuple[str, int] | None = None  # (source, line) of the traceback `first` is part of
    ends: bool = False  # `first` is that traceback's exception line


class TracebackSpans:
    """Which Python traceback a record is part of, per stream: from its `Traceback (most recent call
    last):` line through the indented frame, code and marker lines to the first line that is not
    indented (the exception line), and a block framed by `=` rules right after it (torchrun's
    `ChildFailedError` summary of failures and root cause)."""

    def __init__(self) -> None:
        self.open: dict[str, tuple[str, int]] = {}
        self.after: dict[str, tuple[str, int]] = {}  # just after an exception line: a framed block may follow
        self.framed: dict[str, tuple[str, int]] = {}  # in that framed block

    def feed(self, rec: Record) -> tuple[tuple[str, int] | None, bool]:
        """(where the traceback `rec` is part of starts, or None; is `rec` its exception line)"""
        stream = rec.origin.where() or ""
        message = rec.message
        if TRACEBACK_START in message:
            self.framed.pop(stream, None)
            self.after.pop(stream, None)
            self.open[stream] = (rec.line.source, rec.line.number)
            return self.open[stream], False
        rule = len(message.strip()) >= 20 and set(message.strip()) == {"="}
        if stream in self.framed:
            return (self.framed.pop(stream) if rule else self.framed[stream]), False
        after = self.after.pop(stream, None)
        if after is not None and rule and after[0] == rec.line.source:
            self.framed[stream] = after
            return after, False
        at = self.open.get(stream)
        if at is None or at[0] != rec.line.source:
            return None, False
        if message[:1] in (" ", "\t") or message.strip() in ("", *CHAIN_LINES):
            return at, False
        del self.open[stream]  # the exception line: the last of it
        self.after[stream] = at
        return at, True


@dataclass
class Templates:
    """A run's masked message templates (in first-seen order), with BAD's first record of each."""

    seen: dict[str, Seen | None] = field(default_factory=dict)
    truncated: bool = False
    setup: PrintedSetup = field(default_factory=PrintedSetup)  # the versions and config it printed


def _templates(paths: list[str], keep_first: bool) -> Templates:
    out = Templates()
    normalizer = Normalizer()
    spans = TracebackSpans() if keep_first else None
    seq = 0
    for path in expand_inputs(paths):
        before = ""
        for line in read_input(path, InputStats(path)):
            seq += 1
            rec = normalizer.normalize(line, seq)
            out.setup.feed(rec.stream, rec.message)
            _note(out, rec, keep_first, before, spans.feed(rec) if spans is not None else (None, False))
            before = line.text
    out.setup.finish()
    return out


def template(message: str) -> str:
    """A message's masked template: grouping's mask (observe.hits.mask), and a number in scientific
    notation (`1e+30`, `3.2e-05`) as one `<*>`, so that a changed value does not make a line new."""
    return SCIENTIFIC_RE.sub("<*>", mask(message.strip()))[:MAX_TEMPLATE_CHARS]


def _note(
    out: Templates,
    rec: Record,
    keep_first: bool,
    before: str = "",
    traceback: tuple[tuple[str, int] | None, bool] = (None, False),
) -> None:
    """Count `rec`'s template (`before`: the line before it in its input, kept with a first one;
    `traceback`: where the traceback it is part of starts and whether it is its exception line, kept
    with a first one)."""
    if not rec.message.strip():
        return
    key = template(rec.message)
    seen = out.seen.get(key)
    if key not in out.seen:
        if len(out.seen) >= MAX_TEMPLATES:
            out.truncated = True
            return
        seen = out.seen[key] = (
            Seen(rec, before[-MAX_BEFORE_CHARS:], traceback=traceback[0], ends=traceback[1])
            if keep_first
            else None
        )
    if seen is not None:
        seen.count += 1
        where = rec.origin.where() or None
        if where and where not in seen.streams and len(seen.streams) < MAX_STREAMS:
            seen.streams.append(where)


# -- 1. environment and config ---------------------------------------------------------------------------
def env_changes(good: dict, bad: dict, failure: str = "") -> tuple[EnvChange, ...]:
    """Every fingerprint key whose value differs: first those named in BAD's error or frames
    (`failure`, lower case), then versions, topology and config values; a value shown in one run only
    is no difference the logs show, and comes last, said so."""
    keys = [k for k in dict.fromkeys([*good, *bad]) if k not in SKIPPED_KEYS]
    changed = [k for k in keys if _shown(good.get(k)) != _shown(bad.get(k))]
    out = []
    for key in changed:
        g, b = _shown(good.get(key)), _shown(bad.get(key))
        why = (
            ONE_RUN_ONLY if g is None or b is None else (NAMED_IN_ERROR if _named_in(key, failure) else None)
        )
        out.append(EnvChange(key, _kind(key), g, b, why))
    return tuple(sorted(out, key=_change_order))


NAMED_IN_ERROR = "named in BAD's error"
ONE_RUN_ONLY = "shown in one run only"
KINDS = {"version": 1, "environment": 2, "config": 3}


def _kind(key: str) -> str:
    """config.* keys are config values, the topology keys environment facts, every other key (the
    fingerprint's and the packages a run printed) a version."""
    if key.startswith("config."):
        return "config"
    return "environment" if key in TOPOLOGY_KEYS else "version"


def _change_order(c: EnvChange) -> tuple[int, int, int, str]:
    first = 0 if c.why == NAMED_IN_ERROR else 2 if c.why == ONE_RUN_ONLY else 1
    within = VERSION_KEYS.index(c.key) if c.key in VERSION_KEYS else len(VERSION_KEYS)
    if c.key in TOPOLOGY_KEYS:
        within = TOPOLOGY_KEYS.index(c.key)
    return (first, KINDS[c.kind], within, c.key)


def _named_in(key: str, failure: str) -> bool:
    """Is the package (a version's key) or the config leaf (its last part) a word of `failure`?"""
    if not failure:
        return False
    name = key.rsplit(".", 1)[-1].lower()
    if len(name) < 2:
        return False
    return re.search(rf"(?<![a-z0-9_]){re.escape(name)}(?![a-z0-9_])", failure) is not None


def _shown(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return str(value)


# -- 2. progress ---------------------------------------------------------------------------------------
def divergences(good: Report, bad: Report) -> tuple[Divergence, ...]:
    """Where BAD's progress leaves GOOD's: the first metric out of band per key, then where BAD stopped
    short; ordered by step (the earliest first)."""
    out = [d for g, b in _paired_series(good, bad) if (d := metric_divergence(g, b)) is not None]
    stop = _stops_earlier(good, bad)
    if stop is not None:
        out.append(stop)
    return tuple(sorted(out, key=lambda d: (d.step if d.step is not None else math.inf, d.kind != "metric")))


def _paired_series(good: Report, bad: Report) -> tuple[tuple[MetricSeries, MetricSeries], ...]:
    if good.metrics is None or bad.metrics is None:
        return ()
    theirs = {s.key: s for s in good.metrics.series}
    return tuple((theirs[s.key], s) for s in bad.metrics.series if s.key in theirs)


def metric_divergence(good: MetricSeries, bad: MetricSeries) -> Divergence | None:
    finite = [v for v in good.values if v is not None and math.isfinite(v)]
    if not finite:
        return None
    lo, hi = min(finite), max(finite)
    width = hi - lo
    # half the range, and never less than a tenth of the values' size (a timing that barely moves in
    # GOOD is no divergence for a few per cent more)
    margin = max(width * BAND_MARGIN, max(abs(lo), abs(hi), 1e-12) * FLAT_MARGIN)
    band = f"{_num(lo)} to {_num(hi)}"
    for step, value in zip(bad.steps, bad.values, strict=False):
        if value is None:
            continue
        if not math.isfinite(value):
            detail = f"{bad.key} is {_num(value)} at step {step} (GOOD: {band} over its run)"
            return Divergence("metric", step, bad.key, band, _num(value), detail)
        if value < lo - margin or value > hi + margin:
            side = "above" if value > hi else "below"
            detail = f"{bad.key} leaves GOOD's band at step {step}: {_num(value)}, {side} GOOD's {band}"
            return Divergence("metric", step, bad.key, band, _num(value), detail)
    return None


def _num(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}"


def _stops_earlier(good: Report, bad: Report) -> Divergence | None:
    gp, bp = good.progress, bad.progress
    if gp is None or bp is None:
        return None
    g_step, b_step = gp.last_step, bp.last_step
    if g_step is not None and (b_step is None or b_step < g_step):
        where = f"step {b_step}" if b_step is not None else "before its first step"
        stage = f" in {bp.stage_reached}" if bp.stage_reached else ""
        detail = f"BAD stops at {where}{stage}; GOOD reached step {g_step}"
        step = (b_step or 0) + 1
        return Divergence(
            "stops-earlier", step, None, str(g_step), str(b_step) if b_step is not None else None, detail
        )
    if g_step is None and b_step is None and gp.stage_reached != bp.stage_reached:
        detail = (
            f"BAD reached stage {bp.stage_reached or '(none)'}; GOOD reached {gp.stage_reached or '(none)'}"
        )
        return Divergence("stage", None, None, gp.stage_reached, bp.stage_reached, detail)
    return None


# -- 3. lines new in BAD -------------------------------------------------------------------------------
def _new_lines(bad: Report, good_lines: Templates, bad_lines: Templates) -> list[NewLine]:
    """BAD's new templates, the new lines of one traceback as one entry (its most error-like line, the
    latest of equals), most error-like first."""
    out: list[NewLine] = []
    tracebacks: dict[tuple[str, int], list[tuple[bool, NewLine]]] = {}
    rc = bad.root_cause
    verdict_line = template(rc.message) if rc is not None and rc.message else None
    for key, seen in bad_lines.seen.items():
        if seen is None or key in good_lines.seen:
            continue
        rec = seen.first
        line = NewLine(
            template=key,
            first=Evidence(rec.line.source, rec.line.number, rec.line.text.rstrip("\r\n")),
            count=seen.count,
            streams=tuple(seen.streams),
            stage=bad.progress.stage_at_line(rec.line.source, rec.line.number) if bad.progress else None,
            level=rec.origin.level,
            score=error_score(rec.message, rec.origin.level),
            before=seen.before,
            traceback_at=seen.traceback[1] if seen.traceback else None,
        )
        if seen.traceback is None:
            out.append(line)
        else:
            tracebacks.setdefault(seen.traceback, []).append((seen.ends, line))
    for members in tracebacks.values():
        # shown by its exception line when that is new, else by its most error-like line
        _, head = max(members, key=lambda m: (m[0], m[1].score, m[1].first.line))
        score = max(n.score for _, n in members)
        held = any(n.template == verdict_line for _, n in members)
        out.append(replace(head, folded=len(members) - 1, score=score, verdict=held))
    # the entry that holds BAD's own root-cause line explains BAD's verdict best: first (a launcher's
    # "failed (exitcode: 1)" that echoes it has as many error words)
    out = [replace(n, verdict=True) if n.template == verdict_line else n for n in out]
    out.sort(key=lambda n: (not n.verdict, -n.score, n.first.source, n.first.line))
    return out


def error_score(message: str, level: str | None) -> int:
    """How error-like a message is: its level, and the error words in it."""
    low = message.lower()
    score = LEVEL_SCORES.get((level or "").upper(), 0)
    score += sum(weight for word, weight in ERROR_WORDS if word in low)
    return score


# -- 4. BAD's verdict, and GOOD ---------------------------------------------------------------------------
def _summary(report: Report) -> RunSummary:
    rc = report.root_cause
    progress = report.progress
    if rc is not None:
        entry = f" ({rc.id})" if rc.id != UNKNOWN else ""  # no entry named it: the category alone
        where = (f" in {rc.stage}" if rc.stage else "") + (f", step {rc.step}" if rc.step is not None else "")
        verdict = f"failed: {rc.category}{entry}{where}"
        cause, category, error_line = rc.id, rc.category, rc.error_line
    elif report.stall is not None:
        cause = report.stall.cause.id if report.stall.cause else None
        verdict = "stalled" + (f": {report.stall.cause.title}" if report.stall.cause else "")
        category, error_line = None, None
    else:
        verdict = "no log lines read" if report.empty else "healthy"
        cause = category = error_line = None
    return RunSummary(
        status=report.status,
        verdict=verdict,
        root_cause=cause,
        category=category,
        stage_reached=progress.stage_reached if progress else None,
        last_step=progress.last_step if progress else None,
        completed=bool(progress and progress.completed),
        inputs=report.inputs,
        error_line=error_line,
    )


def _bad_in_good(good: Report, bad: Report, g_lines: Templates) -> tuple[str, str]:
    rc = bad.root_cause
    if rc is None:
        if bad.stall is not None:
            if good.stall is not None:
                return "same", "GOOD stalled as well"
            return "no", "GOOD did not stall"
        return "n/a", "BAD shows no failure"
    grc = good.root_cause
    if grc is not None and grc.id == rc.id:
        step = f" at step {grc.step}" if grc.step is not None else ""
        return "same", f"GOOD failed the same way ({grc.id}){step}"
    found = next((f for f in (*good.findings, *good.symptoms) if f.id == rc.id), None)
    if found is not None:
        where = f"{found.first.source}:{found.first.line}"
        return "silently", f"GOOD shows {rc.id} too, without failing of it (first at {where})"
    if rc.message and template(rc.message) in g_lines.seen:
        return "silently", "GOOD printed BAD's error message too, without failing of it"
    name = rc.category if rc.id == UNKNOWN else rc.id
    return "no", f"GOOD shows no sign of BAD's failure ({name})"


# -- redaction ---------------------------------------------------------------------------------------------
def _masked_change(c: EnvChange, redactor: Redactor) -> EnvChange:
    """A change's values masked with their key in view: a printed config's `api_key: rk-...` is a
    secret by its key, and a bare `rk-...` is not recognisable as one."""

    path = c.key.removeprefix("config.")
    leaf = path.rpartition(".")[2]
    # the shapes a value is printed in next to its key (a YAML or dict line, an override, JSON): the
    # redaction's rules read each of them; a value any of them masks is masked
    shapes = ((f"{path}: ", ""), (f"{path}=", ""), (f'"{leaf}": "', '"'))

    def side(value: str | None) -> str | None:
        if value is None:
            return None
        for head, tail in shapes:
            masked = redactor.text(head + value + tail)
            if masked == head + value + tail:
                continue
            if masked.startswith(head) and masked.endswith(tail):
                return masked[len(head) : len(masked) - len(tail)]
            return redactor.text(masked)
        return value

    good, bad = side(c.good), side(c.bad)
    return c if (good, bad) == (c.good, c.bad) else replace(c, good=good, bad=bad)


def _redacted(diff: DiffReport, redactor: Redactor) -> DiffReport:
    """The diff with every string masked by `redactor` (logparse.redact.redactor_for: one placeholder
    per value across both sides, the names both runs' whole logs give). A new line is masked with the
    line before it in BAD (a token a log wrapped onto it), which then goes."""
    lines = []
    for n in diff.new_lines:
        if n.before is not None:
            text = redactor.lines([n.before, n.first.text])[1]
            template = redactor.lines([n.before, n.template])[1]
            n = replace(n, first=replace(n.first, text=text), template=template, before=None)
        lines.append(n)
    changes = tuple(_masked_change(c, redactor) for c in diff.changes)
    # the lead quotes a change or a new line: said again from their masked forms
    first = lead(changes, diff.divergences, lines) if diff.lead is not None else None
    out = redactor.value(replace(diff, new_lines=tuple(lines), changes=changes, lead=first))
    assert isinstance(out, DiffReport)
    return replace(out, redactions=redactor.counts())
