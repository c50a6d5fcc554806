"""The finished report: plain typed values that every renderer reads (renderers decide nothing)."""

from __future__ import annotations

import math
import operator
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum

SCHEMA_VERSION = 1


def compact_ranks(ranks) -> str:
    """(0, 1, 2, 3, 5, 6, 7) -> '0-3, 5-7'."""
    out = []
    ranks = sorted(set(ranks))
    i = 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        out.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
    return ", ".join(out)


@dataclass(frozen=True)
class Evidence:
    """A log line a report cites: its file, its line number and its text."""

    source: str
    line: int
    text: str


@dataclass(frozen=True)
class CitedValue:
    """One of the job's own settings, as its log shows it, that a fix concerns."""

    key: str  # its dotted path in the job's config (`actor_rollout_ref.rollout.gpu_memory_utilization`)
    value: str  # its value as the log shows it

    @property
    def leaf(self) -> str:
        return self.key.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Fix:
    """What to do about a root cause: the remediation, with the job's own settings it concerns."""

    summary: str
    why: str
    fix: tuple[str, ...]
    references: tuple[str, ...]
    cited: tuple[CitedValue, ...] = ()  # the job's own settings that the fix steps concern


# Whose code a traceback frame is (the values of logparse.observe.tracebacks.FrameKind, which decides it)
FRAME_USER = "user"  # the job's own code, or verl
FRAME_LIBRARY = "library"  # an installed package or the standard library
FRAME_LAUNCHER = "launcher"  # a console script or interpreter entry point that started the program


@dataclass(frozen=True)
class TracebackView:
    """The root cause's traceback as a report shows it: the exception, its frames, its chain."""

    exception_type: str
    exception_message: str
    frames: tuple[tuple[str, int, str], ...]  # (file, line, function)
    innermost_user_frame: tuple[str, int, str] | None
    task: str | None
    chain: tuple[str, ...]  # earlier exceptions of a chain, "Type: message"
    frames_cut: int = 0  # frames left out between the first `frames_cut_after` frames and the rest
    frames_cut_after: int = 0
    # whose code each frame is (FRAME_USER, FRAME_LIBRARY, FRAME_LAUNCHER), parallel to `frames`; empty
    # when not known, and then every frame is shown as user code. Not part of the JSON report.
    frame_kinds: tuple[str, ...] = ()
    chain_cut: int = 0  # earlier exceptions of the chain left out after the first `chain_cut_after`
    chain_cut_after: int = 0


@dataclass(frozen=True)
class Candidate:
    """A cause that was considered and lost (or won): for the explanation."""

    id: str
    category: str
    reason: str
    first: Evidence


@dataclass(frozen=True)
class Basis:
    """What decided a root cause's category: a catalog entry, or a fallback rule of
    patterns/fallback.yaml (phrase, type, frame, weak-phrase, weak-type, marker, nearest), or none."""

    kind: str  # entry | phrase | type | frame | weak-phrase | weak-type | marker | nearest | stall | none
    rule: str | None  # the entry or rule id (nearest: the nearest entry's id)
    detail: str


@dataclass(frozen=True)
class RootCause:
    """The failure that ended the job: what, where, at which stage and step, why, and what to do."""

    id: str
    category: str
    title: str
    summary: str
    message: str
    evidence: tuple[Evidence, ...]
    rank: int | None
    local_rank: int | None
    pid: int | None
    actor: str | None
    node: str | None
    stage: str | None
    confidence: float
    remediation: Fix
    error_line: Evidence | None = None  # where the error line itself is (also within `evidence`)
    traceback: TracebackView | None = None
    explanation: tuple[str, ...] = ()
    candidates: tuple[Candidate, ...] = ()
    similar: tuple[str, ...] = ()
    stage_source: str | None = None  # where `stage` came from (logparse.decide.stage.StageSource)
    step: int | None = None  # the training step it failed in (the one after the last step the log shows)
    basis: Basis | None = None


@dataclass(frozen=True)
class FindingView:
    """A catalog entry's hits grouped (or, `id` unknown, an exception no entry names that the run
    survived): how often, on which ranks and nodes, the first line, the steps it came in."""

    id: str
    category: str
    title: str
    role: str
    count: int
    ranks: tuple[int, ...]
    nodes: tuple[str, ...]
    first: Evidence
    explained_by: str | None = None  # the cause this finding is an echo of, when known
    # why the run's story says it is not the run's failure ("training went on to step 8 after it", "it
    # recurred 8 times while the job went on", "printed after the run completed: its teardown")
    set_aside: str | None = None
    set_aside_kind: str | None = None  # survived | recurring | caught | teardown | interrupted
    first_step: int | None = None  # the training step of its first occurrence (None: none shown)
    last_step: int | None = None  # ... and of its last


@dataclass(frozen=True)
class StageSpan:
    """One stage of the timeline: where it was first and last seen."""

    stage: str
    first_source: str
    first_line: int
    last_source: str
    last_line: int
    first_time: str | None = None  # ISO 8601 (no time zone) where the log carries a timestamp
    last_time: str | None = None


@dataclass(frozen=True)
class Progress:
    """How far the job got: the stage reached, the steps, the timeline of its stages."""

    stage_reached: str | None
    last_step: int | None
    total_steps: int | None
    completed: bool
    seconds_per_step: float | None
    timeline: tuple[StageSpan, ...] = ()  # each stage's first and last line
    failure_step: int | None = None  # the last step seen before the root-cause line
    note: str | None = None  # e.g. "stopped at step N in rollout with no error: ..."
    # the job's progression: each stretch in one stage, ending where the next stage began (see
    # logparse.observe.progress.StageTracker.segments); what the timeline chart draws
    segments: tuple[StageSpan, ...] = ()
    attempts: int = 0  # attempt starts seen up to its end (0: none seen, the log is one attempt)

    def stage_at_line(self, source: str, line: int) -> str | None:
        """The stage the progression shows at `source:line`: that of the last stretch (segment, else
        timeline span) that began at or before it in that input; None before the first. A question the
        report answers from its own progression (logparse.observe.progress decided it)."""
        stage = None
        for span in self.segments or self.timeline:
            if span.first_source == source and span.first_line <= line:
                stage = span.stage
        return stage


@dataclass(frozen=True)
class MetricSeries:
    """One metric key's values by step, as a chart draws them (at most MAX_CHART_POINTS)."""

    key: str
    steps: tuple[int, ...]
    values: tuple[float | None, ...]  # None where a step has no value for this key; nan/inf kept as floats


def downsample(points: list[tuple[int, float | None]], max_points: int) -> list[tuple[int, float | None]]:
    """At most `max_points` of `points` (step, value; in step order) that keep the series' shape: the
    first and the last point, and in each of (max_points - 2) // 3 buckets of consecutive steps its
    lowest and its highest finite value (so no spike and no dip is ever dropped, unlike every k-th
    point) and its first non-finite value (a NaN or Inf is news). Missing values (None) are dropped
    once the series is reduced. Order is kept; a series short enough is returned as it is.

    A function on series data, here so that both sides use the one rule: the scan keeps at most
    logparse.observe.metrics.MAX_CHART_POINTS points of a MetricSeries, a chart draws at most its
    plot's width."""
    if len(points) <= max_points:
        return list(points)
    return [points[i] for i in downsampled(list(map(operator.itemgetter(1), points)), max_points)]


def downsampled(values: list[float | None], max_points: int) -> list[int]:
    """The places (in order) of the points downsample keeps of a series with these values: all of them
    when there are at most `max_points` (for a caller that holds steps and values apart)."""
    n = len(values)
    if n <= max_points:
        return list(range(n))
    buckets = max(1, (max_points - 2) // 3)
    keep = {0, n - 1}
    inner = n - 2
    isfinite = math.isfinite
    for b in range(buckets):
        lo = 1 + b * inner // buckets
        hi = 1 + (b + 1) * inner // buckets
        if hi > lo:
            bucket = values[lo:hi]
            try:
                plain = all(map(isfinite, bucket))
            except TypeError:  # a None
                plain = False
            if plain:  # (min and max give the first lowest and highest, as the loop below)
                keep.add(lo + bucket.index(min(bucket)))
                keep.add(lo + bucket.index(max(bucket)))
                continue
        low = high = odd = None
        for i in range(lo, hi):
            v = values[i]
            if v is None:
                continue
            if not math.isfinite(v):
                if odd is None:
                    odd = i
                continue
            if low is None or v < values[low]:
                low = i
            if high is None or v > values[high]:
                high = i
        keep.update(i for i in (low, high, odd) if i is not None)
    return sorted(keep)


@dataclass(frozen=True)
class Anomaly:
    """A training anomaly the step metrics show (logparse.observe.metrics): its kind, first step and key."""

    kind: str  # nan-inf | grad-norm-spike | response-length-collapse | clip-ratio-blowup | reward-collapse
    step: int
    key: str
    value: float | None
    detail: str
    fatal: bool = False


@dataclass(frozen=True)
class Metrics:
    """The step metrics a report shows: rows counted, keys seen, the charted series, the anomalies."""

    steps: int  # step rows parsed
    keys: tuple[str, ...]  # every metric key seen (bounded)
    series: tuple[MetricSeries, ...]  # the key training metrics, for charts
    anomalies: tuple[Anomaly, ...] = ()


@dataclass(frozen=True)
class AttemptVerdict:
    """An earlier attempt in the same log (a restart), diagnosed on its own."""

    index: int  # 1-based
    first_line: Evidence
    status: ReportStatus  # failed | healthy
    category: str | None
    summary: str | None


@dataclass(frozen=True)
class InputInfo:
    """An input of the scan: its path, its lines and bytes read."""

    path: str
    lines: int
    bytes: int


class ReportStatus(str, Enum):
    """A report's verdict in a word (JSON `status`). A str whose str() and format() are its value, so
    every report and template shows it as the word it is."""

    FAILED = "failed"
    HEALTHY = "healthy"
    EMPTY = "empty"  # no log line was read at all (an empty file or pipe): nothing to judge
    STALLED = "stalled"  # no failure, no completion, and the log's own evidence says progress stopped

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


@dataclass(frozen=True)
class StreamEnd:
    """Where one stream of the job (a rank, a Ray actor, a process) last wrote."""

    stream: str  # how the report names it: `rank 3`, `TaskRunner pid=20308`, `pid 19041`, `launcher`
    last: Evidence  # its last line
    time: str | None = None  # ISO 8601 (no time zone), where the log carries a timestamp
    seconds_before_end: float | None = None  # how long before the log's last timestamp it went quiet


@dataclass(frozen=True)
class WaitGroup:
    """Streams whose stacks, taken while the job hung, end in the same place."""

    streams: tuple[str, ...]  # `rank 0`, `pid 19041`, ...
    waiting_in: str  # the innermost frame worth naming, `all_reduce (torch/distributed/distributed_c10d.py)`
    kind: str | None  # what that frame waits for (patterns/stalls.yaml `waits`): collective, data, ...
    frames: tuple[str, ...]  # the stack, innermost first (`function (file:line)`), bounded
    source: str  # faulthandler | py-spy | interrupt (where each was when the job was interrupted)
    first: Evidence  # the dump's first line
    odd: bool = False  # the odd one out: the others wait for it


@dataclass(frozen=True)
class StallCause:
    """The likely cause of a stall and what to do (patterns/stalls.yaml `causes`)."""

    id: str
    title: str
    summary: str
    fix: tuple[str, ...]
    cited: tuple[CitedValue, ...] = ()  # the job's own settings the fix concerns
    category: str | None = None  # a hang of this cause is a failure of this category (not a stall)
    stage_hint: str | None = None  # ... in the stage such a wait is in (patterns/stalls.yaml; decide/stage)


@dataclass(frozen=True)
class Stall:
    """A job that stopped making progress: where, for how long, what its ranks waited in, why."""

    stage: str | None  # the last stage the log shows
    step: int | None  # the last step the log shows
    evidence: tuple[Evidence, ...]  # the lines that say progress stopped (a watchdog's dump, ...)
    reasons: tuple[str, ...]  # each kind of evidence in a sentence
    streams: tuple[StreamEnd, ...]  # where each stream last wrote, the first to go quiet first
    silent_first: tuple[str, ...]  # the streams that went quiet well before the others
    silence_s: float | None  # from the last step to the log's last timestamp
    step_time_s: float | None  # the median step time measured in the run itself
    duration: str  # the sentence on how long (or why that cannot be known)
    waits: tuple[WaitGroup, ...]  # stacks grouped, the odd one out first
    odd_one_out: str | None  # `rank 3 in __getitem__ (toy_train.py), ranks 0-2 in all_reduce (...)`
    cause: StallCause | None
    interrupted: Evidence | None = None  # the signal that ended the job after it stalled


@dataclass(frozen=True)
class VersionCheck:
    """One package of a known issue against the job: the stated range and fix, the version the log
    shows, and what they say (logparse.decide.known_issues.State)."""

    package: str  # the PEP 503 name: vllm, torch, flash-attn, ...
    affected: str | None  # the PEP 440 range the thread states (None: not stated)
    fixed: str | None  # the first release with the fix, where the thread states one
    job: str | None  # the job's version as the log shows it (approximate when not `exact`)
    exact: bool
    state: str  # in-range | outside | fixed | no-range | unknown
    check: str | None = None  # how to find the version the log does not show (`pip show vllm`)


@dataclass(frozen=True)
class KnownIssueMatch:
    """A known upstream issue the root cause matches (logparse.decide.known_issues): the thread, the
    verdict for the job's versions, the fix and the workaround."""

    id: str
    project: str
    url: str
    title: str
    verdict: str  # matches | may-match | fixed-in-your-version
    reason: str  # the verdict in a sentence (which versions, what to check)
    matched_on: tuple[str, ...]  # `entry vllm-engine-dead`, `message`, `frame ...`
    versions: tuple[VersionCheck, ...]
    fixed_in: str
    fix_pr: str | None
    workaround: str
    source_quote: str


@dataclass(frozen=True, eq=False)  # (equal as mappings are: Mapping's ==, whatever the order)
class Environment(Mapping):
    """The job's environment as the log shows it (logparse.observe.environment decides it): versions,
    GPUs, hosts, world size, its config values (`config.<dotted.path>`), each name -> a str, int, float
    or list of str, in the fingerprint's order; names whose value is unknown are absent. Read-only: a
    Mapping, never changed once built (the decision reads it, the report shows it)."""

    pairs: tuple[tuple[str, object], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", dict(self.pairs))  # (a frozen value: its lookup table once)

    @classmethod
    def of(cls, values: Mapping[str, object]) -> Environment:
        return cls(tuple(values.items()))

    def __getitem__(self, key: str) -> object:
        return self._index[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self.pairs)

    def __hash__(self) -> int:  # (its values may be lists: identity, as a Mapping's equality is by items)
        return id(self)


@dataclass(frozen=True)
class Report:
    """The finished verdict of one job, which every renderer reads (reports/)."""

    status: ReportStatus
    root_cause: RootCause | None
    symptoms: tuple[FindingView, ...]
    findings: tuple[FindingView, ...]
    inputs: tuple[InputInfo, ...]
    notes: tuple[str, ...] = ()
    schema_version: int = SCHEMA_VERSION
    progress: Progress | None = None
    metrics: Metrics | None = None
    environment: Environment = field(default_factory=lambda: Environment())  # versions, GPUs, config, ...
    attempts: tuple[AttemptVerdict, ...] = ()  # earlier attempts; the verdict is the last attempt's
    redactions: dict = field(default_factory=dict)  # kind -> count of values masked in this report
    complete: bool = True  # False when the scan was interrupted
    stall: Stall | None = None  # status `stalled`: where and why progress stopped
    # known upstream issues the root cause matches, matches first (logparse.decide.known_issues)
    known_issues: tuple[KnownIssueMatch, ...] = ()

    @property
    def failed(self) -> bool:
        return self.status is ReportStatus.FAILED

    @property
    def stalled(self) -> bool:
        return self.status is ReportStatus.STALLED

    @property
    def empty(self) -> bool:
        return self.status is ReportStatus.EMPTY


# -- many jobs (`verl-logscan fleet`): one row per job's report, and the counts the fleet reports show
NO_STAGE = "(none)"  # the count key for failed jobs whose log does not show the stage


class JobStatus(str, Enum):
    HEALTHY = "healthy"
    FAILED = "failed"
    ERROR = "error"  # the job's logs could not be read
    STALLED = "stalled"  # no failure, and the job stopped making progress


@dataclass(frozen=True)
class JobRow:
    """One job of the fleet: the verdict of its report, or why it could not be read."""

    job: str  # the path as given
    status: JobStatus
    root_cause: str | None = None  # catalog entry id (or `unknown`)
    category: str | None = None
    stage: str | None = None  # where the failure happened (null when the log does not show it)
    last_step: int | None = None
    confidence: float | None = None
    error_source: str | None = None  # where the root cause's error line is (a stall: the odd one's dump)
    error_line: int | None = None
    # status `error`: what could not be read and why; an `unknown` failure: its error (the category
    # says nothing there, so the row carries the exception itself); `stalled`: the odd one out (who
    # waits for whom)
    message: str | None = None
    report: str | None = None  # where the job's own report was written (`fleet --reports DIR`)


@dataclass(frozen=True)
class FleetSummary:
    """Every job's row, in the order given, and the counts the renderers show."""

    jobs: tuple[JobRow, ...]
    pending: tuple[str, ...] = ()  # jobs not analysed: the run was interrupted before them

    @property
    def complete(self) -> bool:
        return not self.pending

    @property
    def failed(self) -> int:
        return sum(1 for j in self.jobs if j.status is JobStatus.FAILED)

    @property
    def errors(self) -> int:
        return sum(1 for j in self.jobs if j.status is JobStatus.ERROR)

    @property
    def stalled(self) -> int:
        return sum(1 for j in self.jobs if j.status is JobStatus.STALLED)

    def status_counts(self) -> tuple[tuple[str, int], ...]:
        """Every status, including those no job has (a fixed shape to compare fleets by)."""
        counts = Counter(j.status for j in self.jobs)
        return tuple((s.value, counts.get(s, 0)) for s in JobStatus)

    def category_counts(self) -> tuple[tuple[str, int], ...]:
        """Failed jobs per root-cause category, most frequent first."""
        return _ranked(j.category or "unknown" for j in self.jobs if j.status is JobStatus.FAILED)

    def stage_counts(self) -> tuple[tuple[str, int], ...]:
        """Failed jobs per stage of the failure, most frequent first."""
        return _ranked(j.stage or NO_STAGE for j in self.jobs if j.status is JobStatus.FAILED)


def _ranked(keys: Iterable[str]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(Counter(keys).items(), key=lambda kv: (-kv[1], kv[0])))


# -- two runs compared (`verl-logscan diff GOOD BAD`): facts from their two reports and their lines ---
@dataclass(frozen=True)
class RunSummary:
    """One side of a diff: its verdict in a line, and how far it got."""

    status: ReportStatus
    verdict: str  # `failed: out-of-memory (cuda-oom)`, `healthy`, `stalled: ...`
    root_cause: str | None  # the catalog entry id (or the stall's likely cause)
    category: str | None
    stage_reached: str | None
    last_step: int | None
    completed: bool
    inputs: tuple[InputInfo, ...]
    error_line: Evidence | None = None  # the root cause's error line


@dataclass(frozen=True)
class EnvChange:
    """A version, a topology fact or a config value that differs between the runs (None: not shown)."""

    key: str  # the environment fingerprint's key: torch, world_size, config.data.train_batch_size, ...
    kind: str  # version | environment | config
    good: str | None
    bad: str | None
    # why it is listed where it is: "named in BAD's error" (it comes first), "shown in one run only"
    # (a value one run printed and the other did not: no difference the logs show, listed last)
    why: str | None = None

    @property
    def one_run_only(self) -> bool:
        return self.good is None or self.bad is None


@dataclass(frozen=True)
class Divergence:
    """Where BAD's progress first leaves GOOD's."""

    kind: str  # metric | stops-earlier | stage
    step: int | None
    key: str | None  # the metric's key (kind metric)
    good: str | None  # GOOD's value or band at that step, as a report shows it
    bad: str | None
    detail: str  # the whole fact in a sentence


@dataclass(frozen=True)
class NewLine:
    """A message whose masked template never appears in GOOD."""

    template: str  # the masked message (numbers, hex, paths and ids as <*>)
    first: Evidence  # its first line in BAD
    count: int  # lines of BAD with this template
    streams: tuple[str, ...]  # `rank 3`, `pid 812`, ... (bounded)
    stage: str | None  # BAD's stage at its first line
    level: str | None  # the line's log level, when its prefix tells
    score: int  # how error-like (higher first): level, error words, a traceback's last line
    # other new templates of the same Python traceback (its frame, code and `^^^` lines), folded into
    # this entry, its most error-like line (logparse.diff: one traceback is one entry)
    folded: int = 0
    traceback_at: int | None = None  # the line of that traceback's `Traceback (most recent call last):`
    verdict: bool = False  # it holds BAD's root-cause line (listed first: it explains BAD's verdict)
    # the line before its first line in BAD, for the redaction only (a token a log wrapped onto this
    # line is masked with the line it started on); no renderer shows it, and a redacted report has none
    before: str | None = None


@dataclass(frozen=True)
class DiffReport:
    """`verl-logscan diff GOOD BAD`: what differs, most telling first."""

    good: RunSummary
    bad: RunSummary
    changes: tuple[
        EnvChange, ...
    ]  # named in BAD's error first, then versions, topology, config; one run only last
    divergences: tuple[Divergence, ...]  # the first one first
    new_lines: tuple[NewLine, ...]  # most error-like first, then in time order (bounded)
    new_templates: int  # templates new in BAD in all (a traceback's are one entry)
    bad_in_good: str  # whether GOOD shows BAD's failure: same | silently | no | n/a
    bad_in_good_detail: str
    series: tuple[tuple[MetricSeries, MetricSeries], ...] = ()  # (GOOD's, BAD's) per key, for charts
    notes: tuple[str, ...] = ()
    redactions: dict = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    # the difference that best explains BAD's verdict, in a sentence: a changed version or config value
    # named in BAD's error or frames, else a metric that left GOOD's band, else the first new error line
    lead: str | None = None
    new_entries: int = 0  # entries the new templates make in all (new_lines holds the first of them)

    @property
    def differs(self) -> bool:
        return (
            bool(self.changes or self.divergences or self.new_lines) or self.good.verdict != self.bad.verdict
        )
