"""One job's analysis: read -> route -> observe -> decide, and the report it gives.

`analyse(paths, catalog)` is the one entry that `scan`, `fleet` (local and on Ray), `--follow` and the
catalog check's block examples use: the inputs are read into records (logparse.read), each record is
routed by its prefilter keywords (logparse.observe.routes) to the observers that need it
(logparse.observe), and once the inputs end the observations are decided into a verdict and a Report
(logparse.decide), redacted (logparse.redact) unless asked not to be.

A (re)start printed where an input already showed progress or errors begins a new attempt: the
attempt so far is decided on its own and set aside, and the report is the last attempt's.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import BinaryIO

from logparse.decide.verdict import Observations, attempt_verdict, build_report, infer
from logparse.model import Evidence, InputInfo, Report
from logparse.observe.bare_lines import BareLines
from logparse.observe.collectives import COLLECTIVE_WORDS, CollectiveAnalyzer
from logparse.observe.environment import EnvironmentTracker
from logparse.observe.hits import CatalogHits, Hit, mask
from logparse.observe.messages import OpenMessages
from logparse.observe.metrics import MetricsTracker
from logparse.observe.progress import StageTracker
from logparse.observe.routes import Route, Routes
from logparse.observe.stalls import StallObserver
from logparse.observe.tracebacks import LineRole, TracebackAssembler
from logparse.read.blocks import MAX_WORKERS, available_cpus
from logparse.read.lookback import LOOKBACK_LINES, stream_lines_before
from logparse.read.normalize import Record
from logparse.read.prefilter import STRUCTURAL_KEYWORDS, Prefilter, available_engines
from logparse.read.progress_syntax import ProgressRun, ProgressSyntax
from logparse.read.records import MAX_MERGE_FILES, ReaderHooks, RecordReader
from logparse.read.sources import Line, expand
from logparse.read.steps import STEP_KEYWORD, STEP_RE
from logparse.redact import Names, RedactConfig, redact_report
from patterns import Catalog
from patterns.formats import formats
from patterns.stalls import stall_rules
from patterns.upstream_issues import ENV_VAR, KnownIssues, known_issue_files_from_env, load_known_issues

# verl's reward managers print decoded samples during validation over many lines: never evidence
# (patterns/formats.yaml `sample_text`: what opens one, what closes it)
SAMPLE_TEXT_START = formats().literals("sample-text-start")
SAMPLE_TEXT_END = formats().literals("sample-text-end")
SAMPLE_TEXT_MARKS = SAMPLE_TEXT_START + SAMPLE_TEXT_END
MAX_SAMPLE_TEXT_LINES = 5000  # lines of decoded model text skipped at most
MAX_NOTED_PROCESSES = 65_536  # (actor, node) pairs of progress lines the environment tracker was told of
# the roles of lines that no entry is tried on: a traceback's frames and source lines, and its header
# (`catalog check` refuses a match example that reads as one: it would never fire in a scan)
UNMATCHED_ROLES = (LineRole.FRAME, LineRole.START)
TRACED_ROLES = (LineRole.EXCEPTION, LineRole.MESSAGE)
READER_PROCESS_BYTES = 32 << 20  # below this, forking a reader costs more than it saves
# processes of a scan by default at most (ScanConfig.workers): the process tree stays under 150 MB,
# each further reader adding 11-14 MB, and past 4 the scanner's own work is most of the critical path
# on most logs (docs/usage.md has the figures); --workers N asks for more
DEFAULT_MAX_WORKERS = 4
NO_ROUTE = Route(None, None, None, None, True)  # a record not prefiltered: every observer looks


class SettingError(ValueError):
    """An environment variable of verl-logscan's holds a value it cannot use (the message says which)."""


def _reader_bytes_from_env() -> int | None:
    raw = os.environ.get("VERL_LOGSCAN_READER_MB")
    if raw is None or not raw.strip():
        return READER_PROCESS_BYTES
    if raw.strip().lower() in ("off", "no", "none", "0"):
        return None
    try:
        mb = float(raw)
    except ValueError:
        mb = math.nan
    if not math.isfinite(mb) or mb < 0:  # (`inf` was an OverflowError traceback)
        raise SettingError(
            f"VERL_LOGSCAN_READER_MB={raw.strip()[:40]!r}: not a size in MB (a number such as 32, or off)"
        )
    return max(1, int(mb * (1 << 20)))


def default_workers() -> int:
    """The CPUs this process may run on, at most DEFAULT_MAX_WORKERS: past that the scanner's own work,
    which one process does, is the most of a scan's time, and each further reader only costs memory."""
    return max(1, min(available_cpus(), DEFAULT_MAX_WORKERS))


def _workers_from_env() -> int:
    raw = os.environ.get("VERL_LOGSCAN_WORKERS")
    if raw is not None and raw.strip():
        try:
            return max(1, min(int(raw), MAX_WORKERS))
        except ValueError:
            raise SettingError(
                f"VERL_LOGSCAN_WORKERS={raw.strip()[:40]!r}: not a number of processes (1 to {MAX_WORKERS})"
            ) from None
    return default_workers()


def _engine_from_env() -> str | None:
    raw = (os.environ.get("VERL_LOGSCAN_ENGINE") or "").strip()
    if not raw:
        return None
    engines = available_engines()
    if raw not in engines:  # (`foo` was a ValueError traceback from the prefilter)
        known = ", ".join(("hyperscan", "re"))
        why = "is not installed here" if raw == "hyperscan" else "is no prefilter engine"
        raise SettingError(
            f"VERL_LOGSCAN_ENGINE={raw[:40]!r} {why} (engines: {known}; here: {', '.join(engines)})"
        )
    return raw


def check_settings() -> None:
    """Raise SettingError when an environment variable of verl-logscan's (VERL_LOGSCAN_READER_MB,
    VERL_LOGSCAN_WORKERS, VERL_LOGSCAN_ENGINE) holds a value it cannot use: the CLI says so in one
    line before it reads anything."""
    _reader_bytes_from_env()
    _workers_from_env()
    _engine_from_env()


@dataclass(frozen=True)
class ScanConfig:
    """Knobs of one analysis (frozen: its state lives apart, in Analysis)."""

    max_groups: int = 2000
    merge_files: int = MAX_MERGE_FILES
    # prefilter engine: hyperscan (default when installed) or re; VERL_LOGSCAN_ENGINE overrides
    engine: str | None = field(default_factory=lambda: _engine_from_env())
    # a file at least this large is read (gunzipped, prefiltered) by a reader process while the scan
    # works on the blocks before (logparse.read.blocks); None: never. VERL_LOGSCAN_READER_MB overrides.
    reader_process_bytes: int | None = field(default_factory=lambda: _reader_bytes_from_env())
    # keep the values of every metric key (for --metrics-csv), not only those a report charts or checks
    all_metrics: bool = False
    # processes that share the work on a large file's blocks (logparse.read.blocks.blocks_in_process:
    # this one and workers - 1 readers); 1: this process alone. VERL_LOGSCAN_WORKERS overrides the
    # default, the CPUs available, at most DEFAULT_MAX_WORKERS.
    workers: int = field(default_factory=lambda: _workers_from_env())
    # apply the progress lines of an input read alone without making records of them
    # (logparse.read.progress_lines); False: every line worth a look is a record (the reference that the
    # tests compare reports with)
    progress_lines: bool = True
    # learn host and user names from every line that names one (logparse.observe.names), for a report
    # redacted with hosts: set by `analyse` and `scan` when `--redact-hosts` is given
    learn_names: bool = False
    # rows a terminal or `fold` cut at a fixed width (a pasted or tmux-captured log): `auto` joins them
    # back where an input shows it, `off` never, a width in columns joins those (logparse.read.unwrap)
    unwrap: str | int = "auto"


@dataclass(frozen=True)
class ScanStatus:
    """How far a running analysis got (the terminal's status line)."""

    bytes_read: int
    stage: str | None
    step: int | None
    findings: int


class Analysis:
    """One job's analysis: feed its inputs (or lines), then ask for the `report()`."""

    def __init__(
        self, catalog: Catalog, config: ScanConfig | None = None, known_issues: KnownIssues | None = None
    ):
        self.catalog = catalog
        # the known upstream issues the root cause is matched against (None: the built-in ones and
        # the files $VERL_LOGSCAN_KNOWN_ISSUES names: default_known_issues)
        self.known_issues = known_issues
        self.config = config = config or ScanConfig()
        self.seq = 0  # records (and lines applied without one) so far
        self.sample_text: dict[tuple, int] = {}  # stream -> lines of decoded model text so far
        self._active_sources: set[str] = set()  # inputs that showed progress or a finding
        self.hits = CatalogHits(catalog, config.max_groups)
        # what a progress line says, read from a record or fast from its bytes (a step line's rows with
        # every value when all_metrics: --metrics-csv)
        self.syntax = ProgressSyntax(all_keys=config.all_metrics)
        self.stages = StageTracker(syntax=self.syntax)
        self.metrics = MetricsTracker()
        self.env = EnvironmentTracker()
        self.collectives = CollectiveAnalyzer()
        self.bare = BareLines()
        self.messages = OpenMessages()
        self._open_messages = self.messages.streams  # stream -> open message (checked every record)
        rules_of_stalls = stall_rules()
        stall_words = set(rules_of_stalls.keywords)
        keywords = set(STRUCTURAL_KEYWORDS) | set(self.stages.keywords) | set(self.env.scan_keywords)
        keywords |= set(self.bare.keywords) | stall_words
        self.names = None
        if config.learn_names:  # (--redact-hosts only)
            from logparse.observe.names import NameSightings

            self.names = NameSightings()
        if self.names is not None:
            keywords |= set(self.names.keywords)
        for entry in catalog.entries:
            keywords.update(entry.keywords)
        prefilter = Prefilter(keywords, config.engine)
        self.stalls = StallObserver(
            rules_of_stalls,
            keyword_ids=frozenset(i for i, k in enumerate(prefilter.keywords) if k in stall_words),
            is_progress=self.syntax.says_progress,
        )
        self._open_dumps = self.stalls.regions  # source -> py-spy dumps being read (checked every line)
        self.routes = Routes(
            prefilter.keywords,
            self.hits.matcher,
            self.stages.keywords,
            self.env.scan_keywords,
            self.bare.keywords,
            STRUCTURAL_KEYWORDS,
        )
        self._routes = self.routes.cache  # (looked up inline: every record asks)
        hooks = ReaderHooks(
            self.region_open, self.process_quiet, self.routes.progress_words, self.premask, self.take_progress
        )
        self.reader = RecordReader(
            prefilter,
            self.syntax,
            self.env.ignores,
            hooks,
            merge_files=config.merge_files,
            reader_process_bytes=config.reader_process_bytes,
            all_metrics=config.all_metrics,
            progress_lines=config.progress_lines,
            workers=config.workers,
            unwrap=config.unwrap,
        )
        self._reading = self.reader.reading_blocks  # source -> the block being read (lines read back)
        self.assembler = self._new_assembler()
        # the processes of progress lines EnvironmentTracker.note_process took (_note)
        self._noted: set[tuple[str | None, str | None]] = set()
        self.attempts: list = []  # earlier attempts, each decided on its own (AttemptVerdict)
        self._attempt_count = 0
        self._attempt_first: Evidence | None = None
        self.on_progress: Callable[[Analysis], None] | None = None  # told as records and blocks are read

    # -- live use ----------------------------------------------------------------------------------
    def hear(
        self,
        open_stream: Callable[[str, BinaryIO], BinaryIO] | None = None,
        on_fatal: Callable[[Hit], None] | None = None,
        on_progress: Callable[[Analysis], None] | None = None,
    ) -> None:
        """Live use: wrap each opened input (follow, tee); hear of each fatal cause as its line is read;
        hear of progress as records and blocks are read (a status line)."""
        self.reader.open_stream = open_stream
        self.hits.on_fatal = on_fatal
        self.on_progress = on_progress
        self.reader.on_progress = (lambda: on_progress(self)) if on_progress is not None else None

    def status(self) -> ScanStatus:
        p = self.stages.progress()
        read = sum(s.bytes for s in self.reader.inputs)
        return ScanStatus(read, p.stage_reached, p.last_step, len(self.hits.collector.groups))

    # -- reading -----------------------------------------------------------------------------------
    def feed_inputs(self, paths: list[str]) -> None:
        """Several inputs are one job (logparse.read.records); one that cannot be read is skipped with a
        note (a single unreadable input is an error: InputError). The garbage collector pauses
        meanwhile (_collector_paused)."""
        with _collector_paused():
            for rec in self.reader.job(paths):
                self.feed_record(rec)

    def feed_line(self, line: Line) -> None:
        self.feed_record(self.reader.normalizer.normalize(line))

    # -- what the reader asks (logparse.read.records.ReaderHooks) ----------------------------------
    def progress_words(self, ids: frozenset[int]) -> tuple[tuple[str, ...], bool] | None:
        return self.routes.progress_words(ids)

    def premask(self, ids: frozenset[int], message: str) -> str | None:
        route = self._routes.get(ids) or self.routes.route(ids)
        return mask(message) if route.entries else None

    def region_open(self, source: str, number: int) -> bool:
        """Must the next line of `source` be read even without a keyword (a traceback, a message or a
        config dump of it is open)?"""
        self.assembler.expire(source, number)
        if self._open_messages and self.messages.open_in(source, number):
            return True
        if self._open_dumps and source in self._open_dumps:
            return True
        return self.assembler.open_in(source) or self.env.dump_open_in(source)

    def _stream_quiet(self, stream: tuple) -> bool:
        """Has `stream` nothing open that a line no keyword marks may continue (_open_streams)?"""
        return stream not in self._open_streams()

    def process_quiet(self, source: str, pid: int) -> bool:
        """Has no stream of `source` that Ray actor process `pid` writes anything open? Such a stream's
        key is (source, "pid", node, pid) whatever its node (Origin.stream_key), so its unmarked lines
        are then dropped by feed_record: the reader need not read them (ProgressSink.process_quiet)."""
        for stream in self._open_streams():
            if stream[0] == source and len(stream) == 4 and stream[1] == "pid" and stream[3] == pid:
                return False
        return True

    def _open_streams(self) -> Iterator[tuple]:
        """The streams with a traceback, message, config dump or stack dump open (_stream_quiet's)."""
        yield from self.assembler.open_streams()
        yield from self._open_messages
        yield from self.stalls.dump_streams()
        dump = self.env.dump_stream
        if dump is not None:
            yield dump

    # -- progress lines read fast (logparse.read.records.ProgressIntake) ----------------------------
    def take_progress(self, run: ProgressRun, region: bool, stream: Callable[[], tuple]) -> int:
        """Progress lines the reader read fast from their bytes: as many of `run`'s, from its first, as
        need no record, applied as their records would be (the stage tracker, the metrics, the
        environment tracker's processes); how many (0: the first needs its record). A line needs its
        record while a config dump is open, as a step line before the step-line format is known, when
        a traceback or message of its stream waits for it (`region`: one of the input is open;
        `stream`: the first line's), and when its Ray actor is new to the environment tracker; while
        model text is open, only the first line is taken (a line of a stream in model text is skipped
        as its record would be: _model_text). No line here starts an attempt (a marker that does is
        read from its record: logparse.read.progress_lines)."""
        env = self.env
        if env.dump_open() or (run.steps[0] >= 0 and not env.step_format_known()):
            return 0
        alone = region or bool(self.sample_text)
        if alone:
            taken = self._in_stream(stream(), region, run.steps[0] >= 0)
            if taken is not None:
                return taken
        process = run.processes[0]
        if process not in self._noted and not self._note(process):
            return 0  # a new Ray actor: its record tells the era rules
        n = 1 if alone else self._run_length(run)
        if n < len(run.numbers):
            run = run.head(n)
        seq = self.seq + 1
        self.seq += n
        self.stages.apply(seq, run)
        if run.rows:  # (a step line)
            self.metrics.take(run)
            self._active_sources.add(run.source)
        return n

    def _run_length(self, run: ProgressRun) -> int:
        """How many of `run`'s lines, from its first (taken), go without records: up to a line of a
        process the environment tracker was not told of, or a step line while its format is unknown."""
        n = len(run.numbers)
        processes = run.processes
        if n > 1 and not self._noted.issuperset(processes):
            n = next(j for j in range(1, n) if processes[j] not in self._noted)
        if n > 1 and not self.env.step_format_known():
            steps = run.steps
            n = next((j for j in range(1, n) if steps[j] >= 0), n)
        return n

    def _in_stream(self, stream: tuple, region: bool, step: bool) -> int | None:
        """What only a progress line's stream tells: 0 when a traceback or message of its stream waits
        for it; 1 when it is skipped as model text (as _model_text skips a record of it: model text goes
        on until a step line); None when neither."""
        if region and (self.assembler.current(stream) is not None or stream in self.messages):
            return 0
        sample_text = self.sample_text
        if stream in sample_text:
            lines = sample_text[stream] + 1
            if not step and lines < MAX_SAMPLE_TEXT_LINES:
                sample_text[stream] = lines
                self.seq += 1
                return 1
            del sample_text[stream]
        return None

    def _note(self, process: tuple[str | None, str | None]) -> bool:
        """Tell the environment tracker of a progress line's process; False when it needs the record."""
        if not self.env.note_process(*process):
            return False
        if len(self._noted) < MAX_NOTED_PROCESSES:
            self._noted.add(process)
        return True

    # -- observing ---------------------------------------------------------------------------------
    def feed_record(self, rec: Record) -> None:
        ids = rec.keywords
        if ids is not None and not ids and self._stream_quiet(rec.stream):
            # a line no keyword marks, read while another stream's region of its input is open: it
            # continues nothing of its own stream, so it is not seen, as it is not outside the region
            return
        self.seq += 1
        rec.seq = self.seq
        if (self.sample_text or rec.message.startswith(SAMPLE_TEXT_MARKS)) and self._model_text(rec):
            return
        if self.names is not None:
            self.names.feed(rec)
        route = NO_ROUTE if ids is None else self._routes.get(ids) or self.routes.route(ids)
        run = None
        if route.stage_words is None or route.stage_words:
            run = self._stage_line(rec, route.stage_words)
        self.stalls.feed(rec, run is not None and run.says)
        if self.stages.attempts_started != self._attempt_count:  # (a count: a list cost every line)
            self._attempt_started(rec)
        role = self.assembler.feed(rec)
        if role != LineRole.FRAME:
            if run is not None or STEP_KEYWORD in rec.message:
                self._step_rows(rec, run)
            self.env.feed(rec, route.env_words)
        else:
            self.env.frame(rec)
        if self._open_messages and rec.stream in self._open_messages:
            self.messages.feed(rec, role)
        if role in UNMATCHED_ROLES:
            return
        msg = rec.message
        if "step:" in msg and self.stages.stepped_at(rec.seq):
            self._active_sources.add(rec.line.source)
        if rec.origin.rank is not None or any(word in msg for word in COLLECTIVE_WORDS):
            self.collectives.feed(rec)
        self._match(rec, route, role)

    def _stage_line(self, rec: Record, words: list[str] | None) -> ProgressRun | None:
        """The run of one a record is read into (ProgressSyntax.read: `words`, the stage keywords seen in
        its raw line, None: not known), applied to the stage tracker; None when it has none of them."""
        run = self.syntax.read(rec, words)
        if run is not None:
            self.stages.apply(rec.seq, run)
        return run

    def _attempt_started(self, rec: Record) -> None:
        """The stage tracker started an attempt at `rec`."""
        self._attempt_count = self.stages.attempts_started
        if rec.line.source in self._active_sources:
            # a (re)start printed where this input already showed progress or errors: a new attempt.
            # (A launcher's banner in its own file, merged among the ranks' files, is not one.)
            self._new_attempt(rec)

    def _step_rows(self, rec: Record, run: ProgressRun | None) -> None:
        """The metrics of a record's step line (not a traceback frame's), from the run it was read into;
        `run` None: none of the stage tracker's keywords was seen in its raw line, though `step:` is in
        its message (an escape code inside `step:`): it is read for its rows alone."""
        if run is None:
            run = self.syntax.read(rec, ())
        if run is not None and run.rows:
            self.metrics.take(run)

    def _model_text(self, rec: Record) -> bool:
        """Is `rec` decoded model text (a validation sample), which is never evidence?"""
        msg = rec.message
        stream = rec.stream
        if msg.startswith(SAMPLE_TEXT_MARKS):
            if msg.startswith(SAMPLE_TEXT_START):
                self.sample_text[stream] = 0
            else:
                self.sample_text.pop(stream, None)
            return True
        if self.sample_text and stream in self.sample_text:
            n = self.sample_text[stream] + 1
            if n < MAX_SAMPLE_TEXT_LINES and not STEP_RE.search(msg):
                self.sample_text[stream] = n
                return True
            del self.sample_text[stream]
        return False

    def _match(self, rec: Record, route: Route, role: LineRole) -> None:
        """The catalog's entries on `rec`; a line that none matches may be a bare failure line."""
        traced = role in TRACED_ROLES
        entries = route.entries
        if not traced and entries:
            # no traceback can be the line's: entries that need one cannot fire, and are not tried
            # (a catch-all exception entry of a reward function's frames is on most error lines)
            entries = route.untraced
        matches = self.hits.match(rec, rec.keywords, entries, traced)
        last = self.stages.last_step_line
        step = last.step if last else None
        hits = []
        if matches:
            tb = self.assembler.current(rec.stream) if traced else None
            hits = self.hits.record(rec, matches, tb, step, self._hit_context)
            if hits:
                self._active_sources.add(rec.line.source)
                if tb is None:
                    self.messages.open(rec.stream, hits[0])
                return
        if role == LineRole.NONE and (route.bare or rec.origin.level in self.bare.error_levels):
            # (outside a traceback, entries that need one cannot fire)
            line = self.bare.feed(rec, step, self._context, self._lines_before)
            if line is not None:
                self._active_sources.add(rec.line.source)
                self.messages.open(rec.stream, line)

    # -- context -------------------------------------------------------------------------------------
    def _new_assembler(self) -> TracebackAssembler:
        return TracebackAssembler(self._context, self._remembers_context)

    def _context(self, rec: Record, lines: int = LOOKBACK_LINES) -> Sequence[Record]:
        """Up to CONTEXT_LINES lines of `rec`'s stream just before it, read back from the raw block;
        without one at hand, the last lines of its stream the traceback assembler kept."""
        context = self.reader.context(rec, lines)
        if context is None:
            context = self.assembler.context_of(rec.stream)
            return context[:-1] if context and context[-1] is rec else context
        return context

    def _hit_context(self, rec: Record) -> Sequence[Record]:
        """The context of an error line outside a traceback (without the line itself, which the
        assembler's own record of its stream ends with)."""
        context = self.assembler.context_for(rec)
        if isinstance(context, list) and context and context[-1] is rec:
            context = context[:-1]
        return context

    def _lines_before(self, rec: Record, lines: int) -> list[Record] | None:
        """The lines of `rec`'s stream just before it (at most `lines` back), nearest first, blank ones
        too; None when its raw block is not at hand."""
        raw = self.reader.raw_before(rec, lines)
        if raw is None:
            return None
        default = self.reader.default_origin(rec.line.source)
        return list(stream_lines_before(rec, raw, default, self.reader.lookback_normalizer))

    def _remembers_context(self, rec: Record) -> bool:
        """Must the traceback assembler remember `rec` as context of its stream? Not for a line of a
        block being read (it is read back from the raw block, so a stream that printed and went quiet
        costs nothing); yes for the others (an error.json's, lines fed one by one)."""
        return rec.line.source not in self._reading

    # -- deciding ------------------------------------------------------------------------------------
    def finish(self) -> None:
        """Close open tracebacks and decide the hits that waited for them."""
        self.assembler.close_all()
        self.hits.decide_deferred()

    def observations(self, final: bool = False) -> Observations:
        """What the observers saw; `final`: the inputs ended (the stall observer reads their tails)."""
        stall = None
        if final:
            stall = self.stalls.facts(
                self.reader.tails(), self.reader.default_origins(), tuple(self.stages.step_times)
            )
        return Observations(
            self.hits.collector,
            tuple(self.assembler.kept()),
            tuple(self.bare.kept()),
            self.stages.freeze(),
            self.collectives.report(),
            self.env.fingerprint(),
            stall,
        )

    def _new_attempt(self, rec: Record) -> None:
        """A (re)start marker after progress: the attempt so far is decided on its own and set aside;
        the verdict is the last attempt's."""
        first = Evidence(rec.line.source, rec.line.number, rec.line.text)
        if (
            self.hits.collector.groups
            or self.assembler.total
            or self.assembler.kept()
            or self.stages.last_step_line
            or self.bare
        ):
            self.finish()
            verdict = infer(self.observations(), self.catalog)
            self.attempts.append(
                attempt_verdict(len(self.attempts) + 1, self._attempt_first or first, verdict)
            )
            self.hits.new_attempt()
            self.assembler = self._new_assembler()
            self.bare.new_attempt()
            self.collectives = CollectiveAnalyzer()
            self.messages.clear()
            self.stalls.new_attempt()
            self.stages.forget_last_step()
        self._attempt_first = first

    def report(
        self,
        redact: RedactConfig | None = None,
        leading: Sequence[str] = (),
        trailing: Sequence[str] = (),
        complete: bool = True,
    ) -> Report:
        """The report of what was fed: the last attempt's verdict, redacted with `redact` (None: not
        redacted). `leading` / `trailing`: notes said before / after the scan (a folder that looks like
        several jobs; follow and tee notes, an interruption); `complete`: False when interrupted."""
        self.finish()
        obs = self.observations(final=True)
        nccl = obs.collective
        verdict = infer(obs, self.catalog, nccl.sentences if nccl else ())
        scan_notes = [*self.hits.notes(), *self.reader.unwoven_notes(), *self.hits.disabled_notes()]
        scan_notes += self.stages.notes + self.metrics.notes
        report = build_report(
            verdict,
            obs,
            self.metrics.snapshot(verdict.root is not None),
            tuple(InputInfo(s.path, s.lines, s.bytes) for s in self.reader.inputs),
            self.attempts,
            input_notes=self.reader.input_notes(),
            scan_notes=scan_notes,
            leading=leading,
            trailing=trailing,
            complete=complete,
            known_issues=self.known_issues if self.known_issues is not None else default_known_issues(),
        )
        if redact is None:
            return report
        return redact_report(report, redact, self.names.names if self.names is not None else None)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a scan feeds, and what exists before it (the
    catalog, compiled patterns, modules) frozen out of its view; as it was after. A scan's records,
    marks and findings form no reference cycles (a scan of any size leaves about a thousand
    unreachable objects, the scanner's own), so nothing waits for a collection meanwhile, and
    collections that walked the scan's growing state took 15-25% of the scanner's time on dense logs."""
    enabled = gc.isenabled()
    frozen = gc.get_freeze_count()  # (objects a caller froze stay frozen)
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        if not frozen:
            gc.unfreeze()


def default_known_issues(extra: Sequence[str] = ()) -> KnownIssues:
    """The built-in known issues, the files $VERL_LOGSCAN_KNOWN_ISSUES names, then `extra` (a later
    one replaces an entry of the same id). CatalogError (every problem at once) for a bad file: the
    CLI loads them before any scan, so a scan that gets here has had them checked."""
    # (the built-in entries are parsed once a process; a team's files are read at each call, so that
    # an edited file is never answered from a stale copy)
    return load_known_issues((*known_issue_files_from_env(os.environ.get(ENV_VAR)), *extra))


def analyse(
    paths: list[str],
    catalog: Catalog,
    config: ScanConfig | None = None,
    redact: RedactConfig | None = None,
    known_issues: KnownIssues | None = None,
) -> Report:
    """The report of one job: its files and folders (or stdin, `-`) read as one job. `redact`: how to
    mask secrets in it (None: not at all); `known_issues`: what the root cause is matched against
    (None: default_known_issues())."""
    report, names = analyse_unredacted(
        paths, catalog, config, learn_names=redact is not None and redact.hosts, known_issues=known_issues
    )
    return report if redact is None else redact_report(report, redact, names)


def analyse_unredacted(
    paths: list[str],
    catalog: Catalog,
    config: ScanConfig | None = None,
    learn_names: bool = False,
    known_issues: KnownIssues | None = None,
) -> tuple[Report, Names | None]:
    """The report of one job, not redacted, and (with `learn_names`) the host and user names its whole
    log gives: for a command that redacts several jobs' text together (fleet, diff), with the names
    learnt from all of them (logparse.redact.redactor_for)."""
    expanded = expand(paths or ["-"])
    analysis = start_analysis(catalog, config, learn_names, known_issues)
    analysis.feed_inputs(expanded.files)
    report = analysis.report(None, leading=expanded.notes)
    return report, analysis.names.names if analysis.names is not None else None


def start_analysis(
    catalog: Catalog,
    config: ScanConfig | None = None,
    learn_names: bool = False,
    known_issues: KnownIssues | None = None,
) -> Analysis:
    """The first step of `analyse`, for a caller that feeds the job itself: a scan that follows a file,
    tees a pipe or shows a status line while it reads (cli.scan), or the catalog's examples fed line by
    line (catalog_check). Then `feed_inputs(paths)` (or `feed_line`) and `report(redact, ...)`, as
    `analyse` does. `learn_names`: learn the host and user names the whole log gives (--redact-hosts).
    The only place an Analysis is built (tests/test_owners.py)."""
    if learn_names:
        config = dataclasses.replace(config or ScanConfig(), learn_names=True)
    return Analysis(catalog, config, known_issues)
