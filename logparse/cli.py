"""The `verl-logscan` command (click): it parses the arguments, calls the analysis (logparse.pipeline)
and writes what it returns (logparse.outputs). The only module that imports `reports`; the library
below it never prints or exits."""

from __future__ import annotations

import dataclasses
import errno
import os
import signal
import stat
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from logparse.explain import explain_hint, explain_text
from logparse.model import Report
from logparse.outputs import (
    Output,
    OutputError,
    encoded,
    plan_outputs,
    refuse_inputs,
    same_path,
    write_atomically,
    write_file_atomically,
)
from logparse.pipeline import (
    DEFAULT_MAX_WORKERS,
    Analysis,
    ScanConfig,
    SettingError,
    check_settings,
    default_known_issues,
    start_analysis,
)
from logparse.read.blocks import MAX_WORKERS
from logparse.read.layout import several_jobs_note
from logparse.read.sources import InputError, expand, expand_inputs
from logparse.read.unwrap import parse_unwrap
from logparse.redact import Names, RedactConfig, Redactor, redactor_for
from logparse.startup import hold_signals, release_signals
from patterns import CATEGORIES, Catalog, CatalogError, load_catalog
from patterns.upstream_issues import ENV_VAR as KNOWN_ISSUES_ENV
from patterns.upstream_issues import KnownIssues
from reports import FORMATS, render
from reports.escape import csv_safe_frame, terminal_text

if TYPE_CHECKING:  # logparse.console is imported where a scan follows, tees, alerts or shows a status line
    from logparse.console import StatusLine
    from logparse.live_stall import StallWatch
    from logparse.read.follow import FollowFile, TeeStream

EXIT_HEALTHY = 0
EXIT_FAILURE_FOUND = 1
EXIT_ERROR = 2
EXIT_STALLED = 3  # no failure, but the job stopped making progress (a hang)
EXIT_NO_INPUT = 5  # no log line was read (an empty file or pipe); pytest uses 5 for "nothing collected"
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
EXIT_TERMINATED = 143  # 128 + SIGTERM
STALL_FLOOR_WORDS = "5 min"  # = patterns/stalls.yaml min_silence_s (said in --help without loading it)
# errors of a write that the disk or device refused (ENOSPC: /dev/full, a full disk; EDQUOT: a quota;
# EFBIG: a file size limit; EIO: the device)
WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


class Terminated(BaseException):
    """SIGTERM arrived. A BaseException, like KeyboardInterrupt, so no `except Exception` swallows it."""


_MAIN_PID: int | None = None  # set by main() when it installs the SIGTERM handler
_STDOUT_WAS_CLOSED = False  # set by main(): the process started with descriptor 1 closed


def _on_sigterm(signum: int, frame: object) -> None:
    if os.getpid() != _MAIN_PID:  # a forked worker (fleet): die as SIGTERM means
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    raise Terminated()


def _hold_after_interrupt() -> None:
    """After the first interrupt the report of what was read is built and written: a second SIGINT or
    SIGTERM (a scheduler sends more, 10-20 ms apart) is held until the process ends, instead of ending
    it in the middle of the write (a second one used to lose every report). The exit code stays that
    of the first. A report into a FIFO without a reader still waits (as a shell's `>` does): SIGKILL
    ends that."""
    if os.getpid() == _MAIN_PID:
        hold_signals()


def _interrupt_code(exc: BaseException) -> tuple[int, str]:
    return (EXIT_TERMINATED, "SIGTERM") if isinstance(exc, Terminated) else (EXIT_INTERRUPTED, "SIGINT")


def _fail(message: str) -> None:
    # a message can quote a path or a line: no escape sequence from it reaches the terminal
    click.echo(f"verl-logscan: error: {terminal_text(message)}", err=True)
    sys.exit(EXIT_ERROR)


def _stdout_closed() -> bool:
    """Was the process started with its standard output closed (`>&-`)? (main() then puts /dev/null
    on the descriptor, so that no file opened later takes it, and Python has no sys.stdout.)"""
    return sys.stdout is None or _STDOUT_WAS_CLOSED


def _echo_report(text: str) -> None:
    """The report on standard output (bytes: click writes them as they are). A write error is exit 2;
    a reader that went away (`| head`) is main()'s to handle."""
    if _stdout_closed():
        _fail("standard output is closed; write the report with -o FILE")
    try:
        click.echo(encoded(text), nl=False)
    except BrokenPipeError:
        raise
    except OSError as exc:
        _fail(f"cannot write the report to standard output: {exc.strerror or exc}")


def _write(path: str, text: str, after: str = "") -> None:
    """Write a report file (atomically); a failure is exit 2 with what was written before said."""
    try:
        write_atomically(path, text)
    except OSError as exc:
        _fail(f"cannot write {path}: {exc.strerror or exc}{after}")


def _load(catalog_paths: tuple[str, ...]) -> Catalog:
    try:
        return load_catalog(list(catalog_paths))
    except CatalogError as exc:
        click.echo(f"verl-logscan: catalog error ({len(exc.problems)} problem(s)):", err=True)
        for p in exc.problems:  # (a file name or a catalog's text may hold terminal escapes: dropped)
            click.echo(f"  {terminal_text(p)}", err=True)
        sys.exit(EXIT_ERROR)


def _load_known(files: tuple[str, ...] = ()) -> KnownIssues:
    """The known upstream issues a report is matched against: the built-in ones, the files
    $VERL_LOGSCAN_KNOWN_ISSUES names, then `files` (--known-issues). A bad file is exit 2 with every
    problem listed (file:line, reason, help), before any scan."""
    try:
        return default_known_issues(files)
    except CatalogError as exc:
        env = os.environ.get(KNOWN_ISSUES_ENV)
        where = f" (--known-issues{', ' + KNOWN_ISSUES_ENV if env else ''})" if files or env else ""
        click.echo(f"verl-logscan: known issues error{where} ({len(exc.problems)} problem(s)):", err=True)
        for p in exc.problems:
            click.echo(f"  {terminal_text(str(p))}", err=True)
        sys.exit(EXIT_ERROR)


def _known_issues_option(f: Callable) -> Callable:
    return click.option(
        "--known-issues",
        "known_issue_files",
        multiple=True,
        type=click.Path(exists=False),
        metavar="FILE",
        help="A file (or folder) of your own known issues, matched like the built-in ones; repeatable "
        f"[{KNOWN_ISSUES_ENV} names more, separated like PATH].",
    )(f)


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    from rapidfuzz import process

    best = process.extractOne(word, sorted(choices))
    return f" (did you mean '{best[0]}'?)" if best and best[1] >= 60 else ""


def _without(catalog: Catalog, disabled: tuple[str, ...]) -> Catalog:
    """The catalog minus the --disable'd entries; an id it does not have is a usage error."""
    if not disabled:
        return catalog
    ids = [e.id for e in catalog.entries]
    for entry_id in disabled:
        if entry_id not in ids:
            _fail(
                f"--disable {entry_id}: no catalog entry with that id{_did_you_mean(entry_id, ids)}; "
                f"see 'verl-logscan catalog list'"
            )
    return catalog.without(set(disabled))


def _isatty(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError, OSError):  # closed, or no stream at all
        return False


def _total_bytes(files: list[str]) -> int | None:
    """Bytes in the inputs, when all are regular files (a .gz counts its compressed size: the
    status line then shows the decompressed bytes against it, so none is given)."""
    total = 0
    for f in files:
        if f == "-" or f.lower().endswith((".gz", ".zst")):
            return None
        try:
            st = os.stat(f)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        total += st.st_size
    return total


def _redact_config(no_redact: bool, redact_hosts: bool) -> RedactConfig | None:
    if no_redact and redact_hosts:
        _fail("--no-redact and --redact-hosts contradict each other; give one")
    return None if no_redact else RedactConfig(hosts=redact_hosts)


def _alert_cleaner(redact: RedactConfig | None, names: Names | None = None) -> Callable[[str, bool], str]:
    """What an ALERT line does to log text before printing it: mask secrets (and hosts: those the scan
    learnt from the log read so far, `names`, and those the alert line names; their placeholders may
    be numbered unlike the report's) and drop terminal escape sequences."""
    redactor = Redactor(redact) if redact is not None else None

    def clean(text: str, cut: bool = False) -> str:
        if redactor is not None:
            if redact.hosts:
                if names is not None:
                    redactor.adopt(names)
                redactor.learn(text)
            text = redactor.text(text, cut=cut)
        return terminal_text(text)

    return clean


def use_color(flag: bool | None, stream: object) -> bool:
    """Colour on `stream`? --color/--no-color decide; else NO_COLOR (https://no-color.org, any value)
    turns it off and FORCE_COLOR (any value) on, NO_COLOR winning; else a terminal that is not `dumb`."""
    if flag is not None:
        return flag
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return _isatty(stream) and os.environ.get("TERM") != "dumb"


class _Live:
    """What a live scan adds: follow and tee streams, ALERT lines, the terminal's status line."""

    def __init__(self, files: list[str], follow: bool, tee: bool, color: bool | None):
        self.files = files
        self.follow = follow
        self.tee = tee
        self.alerts = follow or tee or files == ["-"]
        self.color = color
        self.followed: list[FollowFile] = []
        self.tees: list[TeeStream] = []
        self.status: StatusLine | None = None
        self.analysis: Analysis | None = None
        self.watch: StallWatch | None = None
        if _isatty(sys.stderr):
            from logparse.console import StatusLine

            self.status = StatusLine(
                sys.stderr, _total_bytes(files), follow, color=use_color(color, sys.stderr)
            )

    def wire(
        self, analysis: Analysis, redact: RedactConfig | None, stall_s: float | str | None = None
    ) -> None:
        """Hook follow/tee streams, fatal-line alerts, the stall watch (`stall_s`: seconds, `auto`, or
        None: no watch) and the terminal status line into the analysis."""
        self.analysis = analysis
        on_fatal = None
        if self.alerts:
            from logparse.console import Alerts

            names = analysis.names.names if analysis.names is not None else None
            on_fatal = Alerts(
                sys.stderr,
                _alert_cleaner(redact, names),
                self.status,
                color=use_color(self.color, sys.stderr),
            )
        on_progress = self.status
        if self.alerts and stall_s is not None:
            from logparse.live_stall import StallWatch

            names = analysis.names.names if analysis.names is not None else None
            explicit = None if stall_s == "auto" else float(stall_s)
            self.watch = StallWatch(sys.stderr, _alert_cleaner(redact, names), explicit, self.status)
            on_progress = self._progress
            self.watch.start()
        # a status line also hears when the input is quiet, to show what was read (not the state at
        # the start of the last burst of lines)
        wrap = self.follow or self.tee or (self.status is not None and self.files == ["-"])
        analysis.hear(self._open_stream if wrap else None, on_fatal, on_progress)
        if self.follow and self.files != ["-"]:

            def stop_following(signum: int, frame: object) -> None:
                # Ctrl-C ends following: the scan finishes what was written and reports normally
                # (a second Ctrl-C interrupts at once)
                for f in self.followed:
                    f.stop()
                signal.signal(signal.SIGINT, signal.default_int_handler)

            signal.signal(signal.SIGINT, stop_following)

    def _open_stream(self, path: str, stream):
        from logparse.read.follow import FollowFile, QuietStream, TeeStream

        if self.follow and path != "-":
            stream.close()
            stream = FollowFile(path, on_wait=self._quiet)
            self.followed.append(stream)
        elif path == "-" and self.status is not None:
            stream = QuietStream(stream, self._quiet)
        if self.tee:
            # the status line is wiped around passed-through text only when both share a terminal
            stream = TeeStream(
                stream,
                sys.stdout.buffer,
                on_broken=_stdout_to_devnull,
                status=self.status if _isatty(sys.stdout) else None,
            )
            self.tees.append(stream)
        return stream

    def _quiet(self) -> None:
        """The input is quiet: the status line shows what was read so far."""
        if self.status is not None and self.analysis is not None:
            self.status.waiting(self.analysis)

    def _progress(self, analysis: Analysis) -> None:
        if self.status is not None:
            self.status(analysis)
        if self.watch is not None:
            self.watch.tick(analysis)

    def clear(self) -> None:
        if self.watch is not None:
            self.watch.stop()
        if self.status is not None:
            self.status.clear()

    def notes(self) -> list[str]:
        return [n for f in self.followed for n in f.notes] + [n for t in self.tees for n in t.notes]


def _stdout_to_devnull() -> None:
    """The reader of our standard output went away: later writes (and the flush at exit) go nowhere
    instead of failing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass


class DefaultToScan(click.Group):
    """`... | verl-logscan` with piped input scans stdin, like `verl-logscan scan -`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        piped = sys.stdin is not None and not sys.stdin.isatty()
        if piped and not args:
            args = ["scan", "-"]
        elif piped and args[0].startswith("-") and args[0] not in ("-h", "--help", "--version"):
            args = ["scan", *args]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context):
        # an interrupt outside a scan's reading (which reports what it found): a one-line message and
        # 130 / 143, not click's "Aborted!" with exit code 1 (which means "failure found" here)
        try:
            release_signals()  # one held during start-up (logparse.startup) arrives here
            return super().invoke(ctx)
        except (KeyboardInterrupt, Terminated) as exc:
            code, name = _interrupt_code(exc)
            click.echo(f"verl-logscan: interrupted ({name})", err=True)
            sys.exit(code)


def _report_options(what: str, repeat: str) -> Callable:
    """--format and -o (repeatable), as scan and diff take them: a report in FORMATS, each -o FILE's
    format from its extension."""

    def add(f: Callable) -> Callable:
        f = click.option(
            "-o",
            "--output",
            "outputs",
            multiple=True,
            type=click.Path(dir_okay=False, allow_dash=True),
            help=f"Write the {what} to FILE (atomically) instead of stdout; the extension picks the format. "
            + repeat,
        )(f)
        return click.option(
            "--format",
            "fmt",
            type=click.Choice(FORMATS),
            default=None,
            help="Report format [default: from each -o FILE's extension (.md, .html, .json), else text].",
        )(f)

    return add


def _catalog_option(help_text: str) -> Callable:
    """--catalog, repeatable: an extra catalog file or folder (scan, fleet, diff)."""
    return click.option("--catalog", "catalogs", multiple=True, type=click.Path(exists=False), help=help_text)


def _redaction_options(what: str, hosts_help: str) -> Callable:
    """--redact-hosts and --no-redact, as every command that writes log text has them."""

    def add(f: Callable) -> Callable:
        f = click.option("--no-redact", is_flag=True, help=f"Do not mask secrets in the {what}.")(f)
        return click.option("--redact-hosts", is_flag=True, help=hosts_help)(f)

    return add


@click.group(cls=DefaultToScan, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="verl-logscan", prog_name="verl-logscan")
def cli() -> None:
    """Find the root cause in the logs of a failed verl / torchrun / Ray job.

    \b
    Exit codes: 0 no failure found, 1 failure found,
    2 usage, input or catalog error, 3 stalled (no failure, no progress),
    5 no log line read (empty input).
    """
    try:
        check_settings()
    except SettingError as exc:
        _fail(str(exc))


@cli.command(short_help="Report the root cause of one job: files, folders, .gz or stdin.")
@click.argument("paths", nargs=-1, type=click.Path(dir_okay=True, allow_dash=True, readable=False))
@_report_options("report", "Repeatable: -o report.md -o report.html -o report.json.")
@_catalog_option("Extra catalog file or folder; adds to or overrides built-in entries by id. Repeatable.")
@_known_issues_option
@click.option(
    "--color/--no-color",
    default=None,
    help="Colour the text summary and status line [default: on a terminal, unless NO_COLOR is set; "
    "FORCE_COLOR forces it].",
)
@_redaction_options(
    "report",
    "Also mask IP addresses, host names and user names in home paths (stable placeholders "
    "such as node-1, ip-1, user-1). Secrets (tokens, API keys, passwords, e-mails) are always masked.",
)
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="Keep reading a file as it grows (survives rotation and truncation) until Ctrl-C; "
    "on stdin, read until the pipe closes. The report is written at the end.",
)
@click.option(
    "--stall-after",
    "stall_after",
    is_flag=False,
    flag_value="auto",
    default=None,
    metavar="DURATION",
    help="Live scans (--follow, --tee, stdin): an ALERT on stderr when no new training step arrives "
    "for DURATION (90s, 30m, 2h), saying where each stream stopped [default with --follow: "
    f"several times the run's own step time, at least {STALL_FLOOR_WORDS}].",
)
@click.option(
    "--tee",
    is_flag=True,
    help="Pass every input byte through to stdout unchanged (for `... 2>&1 | verl-logscan scan "
    "--tee -o report.md`); without -o the summary goes to stderr at the end. If the reader of stdout goes "
    "away, the log is still read to its end and the report written.",
)
@click.option(
    "--metrics-csv",
    type=click.Path(dir_okay=False),
    help="Also write the step metrics (one row per step, one column per key) to this CSV file "
    "(atomically, after the report; never over an input).",
)
@click.option(
    "--disable",
    "disabled",
    multiple=True,
    metavar="ID",
    help="Scan without this catalog entry (e.g. one that misfires on your logs; or to see what the "
    "tool concludes without it). Repeatable.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, MAX_WORKERS),
    default=None,
    metavar="N",
    help="Processes that share the work on a large file (32 MB or more; 1: one process) "
    f"[default: the CPUs available, at most {DEFAULT_MAX_WORKERS}; VERL_LOGSCAN_WORKERS sets it too]. "
    "The report is the same.",
)
@click.option(
    "--unwrap",
    default="auto",
    metavar="auto|off|COLUMNS",
    callback=lambda ctx, param, value: _unwrap_setting(value),
    help="Lines a terminal or `fold` cut into rows of a fixed width (a pasted or tmux-captured log) are "
    "joined back before reading, each numbered by its first row: auto (default) where an input shows "
    "it, COLUMNS to join rows of that width, off to read rows as they are.",
)
def scan(
    paths: tuple[str, ...],
    fmt: str | None,
    outputs: tuple[str, ...],
    catalogs: tuple[str, ...],
    color: bool | None,
    redact_hosts: bool,
    no_redact: bool,
    follow: bool,
    tee: bool,
    metrics_csv: str | None,
    disabled: tuple[str, ...],
    workers: int | None,
    stall_after: str | None,
    known_issue_files: tuple[str, ...],
    unwrap: str | int,
) -> None:
    """Scan log files, folders, .gz files or stdin (no PATH or '-') and report the root cause.

    \b
    Examples:
      verl-logscan scan job.log
      verl-logscan scan logs/ -o report.md -o report.html
      torchrun ... 2>&1 | verl-logscan scan --format json

    \b
    Exit codes: 0 no failure found, 1 failure found,
    2 usage, input or catalog error, 3 stalled (no failure, no progress),
    5 no log line read (empty input), 130 / 143 interrupted (SIGINT / SIGTERM).
    """
    started = time.monotonic()
    redact = _redact_config(no_redact, redact_hosts)
    planned = _plan_scan_outputs(outputs, fmt, tee, follow, paths, metrics_csv)
    stall_s = _stall_after(stall_after, follow or tee or list(paths) in ([], ["-"]))
    catalog = _without(_load(catalogs), disabled)
    known = _load_known(known_issue_files)
    try:
        expanded = expand(list(paths) or ["-"])
        files = expanded.files
        targets = [("--output", o.path) for o in planned if not o.to_stdout] + [
            ("--metrics-csv", metrics_csv)
        ]
        refuse_inputs(targets, files)
    except (InputError, OutputError) as exc:
        _fail(str(exc))
    folder_notes = [
        n for p in paths if p != "-" and os.path.isdir(p) for n in [several_jobs_note(p, files)] if n
    ]
    for note in folder_notes:
        click.echo(f"verl-logscan: warning: {terminal_text(note)}", err=True)
    folder_notes += expanded.notes  # (what a folder holds and was not read: in the report)
    if files == ["-"] and _isatty(sys.stdin):  # no silent wait for a log that is not coming
        click.echo("verl-logscan: reading from stdin (Ctrl-D to end; pipe a log or pass a file)", err=True)
    config = ScanConfig(all_metrics=bool(metrics_csv), unwrap=unwrap)
    if workers is not None:
        config = dataclasses.replace(config, workers=workers)
    analysis = start_analysis(catalog, config, redact is not None and redact.hosts, known)
    live = _Live(files, follow, tee, color)
    live.wire(analysis, redact, stall_s if stall_after is not None else ("auto" if follow else None))
    interrupted = _feed(analysis, files, live)
    trailing = live.notes()
    for note in trailing:
        click.echo(f"verl-logscan: {note}", err=True)
    if interrupted is not None:
        note = f"interrupted by {interrupted[1]}: the report covers only the lines read before it"
        trailing.append(note)
        click.echo(f"verl-logscan: {note}", err=True)
    report = analysis.report(redact, folder_notes, trailing, complete=interrupted is None)
    _write_reports(report, planned, color, catalog, catalogs, started)
    if metrics_csv:  # after the report: a CSV that cannot be written loses nothing else
        try:
            # a metric key that starts like a formula must not run in a spreadsheet
            names = analysis.names.names if analysis.names is not None else None
            transform = _csv_transform(redact, names)
            write_file_atomically(metrics_csv, lambda tmp: analysis.metrics.to_csv(tmp, transform=transform))
        except OSError as exc:
            _fail(f"cannot write {metrics_csv}: {exc.strerror or exc} (the report was written)")
    if interrupted is not None:
        sys.exit(interrupted[0])
    if report.empty:
        sys.exit(EXIT_NO_INPUT)
    if report.stalled:
        sys.exit(EXIT_STALLED)
    sys.exit(EXIT_FAILURE_FOUND if report.failed else EXIT_HEALTHY)


def _csv_transform(redact: RedactConfig | None, names: Names | None) -> Callable:
    """What `--metrics-csv` does to the metrics table before writing it: its metric names (and any text
    cell) redacted as the report's are (logparse.redact: a token in a metric key is masked in the JSON
    report, so in the CSV too), then every formula-like cell made inert."""
    if redact is None:
        return csv_safe_frame
    redactor = redactor_for((), redact, [names])

    def transform(frame):
        texts = [str(c) for c in frame.columns]
        for column in frame.columns[frame.dtypes.eq(object)]:
            texts += [v for v in frame[column] if isinstance(v, str)]
        for text in texts if redact.hosts else ():
            redactor.learn(text)
        frame = frame.rename(columns=lambda c: redactor.text(str(c)))
        for column in frame.columns[frame.dtypes.eq(object)]:
            frame[column] = [redactor.text(v) if isinstance(v, str) else v for v in frame[column]]
        return csv_safe_frame(frame)

    return transform


DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """`90`, `90s`, `30m`, `2h`, `1h30m` -> seconds (ValueError when it is none of these)."""
    total, number = 0.0, ""
    for ch in text.strip().lower():
        if ch.isdigit() or ch == ".":
            number += ch
        elif ch in DURATION_UNITS and number:
            total += float(number) * DURATION_UNITS[ch]
            number = ""
        else:
            raise ValueError(text)
    if number:
        total += float(number)
    if total <= 0:
        raise ValueError(text)
    return total


def _unwrap_setting(value: str) -> str | int:
    """--unwrap: auto, off or a width in columns."""
    try:
        return parse_unwrap(value)
    except ValueError:
        raise click.BadParameter(f"{value!r}: give auto, off or a width in columns (e.g. 80)") from None


def _stall_after(value: str | None, live: bool) -> float | str | None:
    """--stall-after as seconds (`auto` when given without a duration); a usage error when the scan is
    not live or the duration is not one."""
    if value is None or value == "auto":
        if value is not None and not live:
            _fail("--stall-after watches a live log: use it with --follow, --tee or stdin")
        return value
    if not live:
        _fail("--stall-after watches a live log: use it with --follow, --tee or stdin")
    try:
        return parse_duration(value)
    except ValueError:
        _fail(f"--stall-after {value}: not a duration (such as 90s, 30m, 2h)")
    return None


def _plan_scan_outputs(
    outputs: tuple[str, ...],
    fmt: str | None,
    tee: bool,
    follow: bool,
    paths: tuple[str, ...],
    metrics_csv: str | None,
) -> list[Output]:
    """Where a scan's reports go; every contradiction among the options is a usage error, said before
    the scan."""
    try:
        planned = plan_outputs(outputs, fmt, FORMATS)
    except OutputError as exc:
        _fail(str(exc))
    to_stdout = any(o.to_stdout for o in planned)
    if tee and to_stdout:
        if outputs or fmt not in (None, "text"):
            _fail("--tee passes the log through to stdout, so the report needs -o FILE")
        # `... | verl-logscan scan --tee`: the log goes on to stdout, the summary to stderr at the end
        planned = [o for o in planned if not o.to_stdout]
        to_stdout = False
    if (to_stdout or tee) and _stdout_closed():  # said before the scan, not after it
        _fail(
            "standard output is closed; write the report with -o FILE"
            if to_stdout
            else "standard output is closed; --tee has nowhere to pass the log through"
        )
    if follow and len(paths) > 1:
        _fail("--follow reads one file (or stdin); give a single PATH")
    for o in planned:
        if metrics_csv and not o.to_stdout and same_path(metrics_csv, o.path):
            _fail(f"--metrics-csv and --output name the same file ({metrics_csv}); give two")
    return planned


def _feed(analysis: Analysis, files: list[str], live: _Live) -> tuple[int, str] | None:
    """Feed the inputs; an interrupt ends the feeding (the report covers what was read): its exit code
    and signal name, else None."""
    interrupted = None
    try:
        analysis.feed_inputs(files)
    except InputError as exc:
        live.clear()
        _fail(str(exc))
    except (KeyboardInterrupt, Terminated) as exc:  # report what was found so far, marked incomplete
        interrupted = _interrupt_code(exc)
        _hold_after_interrupt()
    live.clear()
    return interrupted


def _verdict_words(report: Report) -> str:
    if report.root_cause is not None:
        return f"failed: {report.root_cause.category}"
    if report.stalled:
        return "stalled"
    return "no log lines read" if report.empty else "healthy"


def _terminal_width(stream) -> int | None:
    """The columns a summary on `stream` wraps to: a terminal's, else None (a file or a pipe gets every
    field on one line)."""
    if not _isatty(stream):
        return None
    from logparse.console import terminal_columns

    return terminal_columns(stream)


def _write_reports(
    report: Report,
    planned: list[Output],
    color: bool | None,
    catalog: Catalog,
    catalogs: tuple[str, ...],
    started: float | None = None,
) -> None:
    """Every planned output, each rendered once; the terminal gets the summary when no report went to it.
    (The text summary is terminal-safe as rendered: log text carries no escape sequence into it.) A
    summary on a terminal wraps to its width and ends with the seconds since `started`."""
    hint = explain_hint(report, catalog, catalogs)

    def on_screen(stream) -> dict:
        width = _terminal_width(stream)
        if width is None:
            return {}
        return {"width": width, "elapsed": time.monotonic() - started if started is not None else None}

    to_stdout = next((o for o in planned if o.to_stdout), None)
    files = [o for o in planned if not o.to_stdout]
    for o in files:
        _write(o.path, render(report, o.fmt, color=False, explain=hint))
    written = ", ".join(o.path for o in files)
    if to_stdout is not None:
        painted = to_stdout.fmt == "text" and use_color(color, sys.stdout)
        screen = on_screen(sys.stdout) if to_stdout.fmt == "text" else {}
        _echo_report(render(report, to_stdout.fmt, color=painted, explain=hint, **screen))
        if files:
            click.echo(
                f"verl-logscan: {_verdict_words(report)}; also written to {terminal_text(written)}", err=True
            )
        elif report.empty and to_stdout.fmt != "text":  # the text summary says it; JSON on a pipe does not
            click.echo("verl-logscan: no log lines read", err=True)
    elif files and all(o.fmt == "text" for o in files):
        click.echo(
            f"verl-logscan: {_verdict_words(report)}; report written to {terminal_text(written)}", err=True
        )
    else:  # the files (if any: --tee alone) hold the full report; stderr gets the summary and where
        err_color = use_color(color, sys.stderr)
        click.echo(
            render(
                report,
                "text",
                color=err_color,
                report_path=written or None,
                explain=hint,
                **on_screen(sys.stderr),
            ),
            err=True,
            nl=False,
            color=err_color,
        )


FLEET_FORMATS = ("text", "md", "html", "csv", "json")  # = reports.fleet.FLEET_FORMATS (pandas loads lazily)
# = logparse.fleet.DEFAULT_JOB_TIMEOUT_S: a scan does not import the fleet module (multiprocessing, logging)
DEFAULT_JOB_TIMEOUT_S = 600.0


@cli.command(short_help="Summarise many jobs at once: one row per job.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=True))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FLEET_FORMATS),
    default=None,
    help="Summary format (csv: the job rows only) [default: from -o FILE's extension (.md, .html, "
    ".csv, .json), else text].",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Write the summary to FILE (atomically) instead of stdout; the extension picks the format.",
)
@_catalog_option("Extra catalog file or folder, as for scan. Repeatable.")
@click.option(
    "-j",
    "--jobs",
    "workers",
    type=click.IntRange(min=1),
    default=None,
    help="Jobs analysed at once (worker processes, or CPUs of a local Ray instance). [default: all cores]",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="local: a process pool on this machine; ray: one Ray task per job (pip install "
    "'verl-logscan[ray]').",
)
@click.option(
    "--address",
    default=None,
    help="Ray cluster to connect to (--engine ray; default: RAY_ADDRESS, else a local Ray instance).",
)
@click.option(
    "--job-timeout",
    type=click.FloatRange(min=0),
    default=DEFAULT_JOB_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="A job still running after this many seconds is stopped and becomes an `error` row (0: no limit).",
)
@_redaction_options(
    "summary", "Also mask IP addresses, host names and user names, as for scan. Secrets are always masked."
)
@click.option(
    "--reports",
    "reports_dir",
    type=click.Path(file_okay=False),
    default=None,
    metavar="DIR",
    help="Also write each job's own HTML report into DIR (created if missing), linked from its row "
    "in the Markdown and HTML summaries.",
)
def fleet(
    paths: tuple[str, ...],
    fmt: str | None,
    output: str | None,
    catalogs: tuple[str, ...],
    workers: int | None,
    engine: str,
    address: str | None,
    job_timeout: float,
    redact_hosts: bool,
    no_redact: bool,
    reports_dir: str | None,
) -> None:
    """Analyse many jobs at once and summarise them: one row per job, counts per category and stage.

    Each PATH is one job: a log file, or a folder whose log files are read together (as
    `verl-logscan scan FOLDER` does). Each job is analysed on its own, with the same result as
    scanning it alone (redacted the same way); the rows keep the order of the PATHs.

    A PATH that cannot be read (missing, a folder without log files, not gzip), or whose job runs
    past --job-timeout, is a row with status `error` and the reason; the other jobs are still analysed.
    Ctrl-C or SIGTERM writes the rows done so far, marked incomplete (exit 130 / 143).

    Exit codes: 0 every job healthy; 1 a failure was found in at least one job (rows with status
    `error` may be among them); 2 no failure found but some job could not be read, or a usage,
    catalog or engine error (e.g. --engine ray without Ray installed, or no Ray at --address);
    3 no failure and every job read, but some job stalled.

    \b
    Examples:
      verl-logscan fleet runs/*/ -o fleet.md
      verl-logscan fleet runs/*/ -o fleet.html --reports reports/
      verl-logscan fleet logs/*.log --jobs 4 --format csv
      verl-logscan fleet runs/*/ --engine ray --address ray://head:10001
    """
    from logparse.console import terminal_columns
    from logparse.fleet import Engine, JobStatus, iter_fleet, summarise
    from reports.fleet import render_fleet

    redact = _redact_config(no_redact, redact_hosts)
    target = _plan_fleet_output(paths, fmt, output, engine, address)
    catalog = _load(catalogs)
    _load_known()  # ($VERL_LOGSCAN_KNOWN_ISSUES: a bad file is exit 2 before any job)
    jobs = list(dict.fromkeys(paths))  # a job given twice is analysed once
    run = iter_fleet(
        jobs,
        catalog,
        catalogs,
        engine=Engine(engine),
        workers=workers or os.cpu_count() or 1,
        address=address,
        job_timeout=job_timeout or None,
        redact=redact,
        write_report=_plan_job_reports(reports_dir, jobs, redact),
    )
    rows, interrupted = _fleet_rows(run, len(jobs))
    summary = _linked_from(summarise(jobs, rows, redact), None if target.to_stdout else target.path)
    for row in summary.jobs:
        if reports_dir and row.status is not JobStatus.ERROR and row.report is None:
            click.echo(f"verl-logscan: could not write the report of {terminal_text(row.job)}", err=True)
    for row in summary.jobs:
        if row.status is JobStatus.ERROR and row.message:
            click.echo(f"verl-logscan: {terminal_text(row.message)}", err=True)
    if interrupted is not None:
        click.echo(
            f"verl-logscan: interrupted by {interrupted[1]}: {len(summary.jobs)} of {len(jobs)} job(s) "
            f"analysed; the summary lists those",
            err=True,
        )
    to_terminal = target.to_stdout and _isatty(sys.stdout)
    text = render_fleet(summary, target.fmt, width=terminal_columns(sys.stdout) - 1 if to_terminal else None)
    if target.to_stdout:
        _echo_report(text)
    else:
        _write(target.path, text)
        click.echo(
            f"verl-logscan: {len(summary.jobs)} job(s), {summary.failed} failed, {summary.errors} "
            f"unreadable; summary written to {target.path}",
            err=True,
        )
    if interrupted is not None:
        sys.exit(interrupted[0])
    if summary.failed:
        sys.exit(EXIT_FAILURE_FOUND)
    if summary.errors:
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_STALLED if summary.stalled else EXIT_HEALTHY)


def _fleet_rows(run, total: int) -> tuple[dict, tuple[int, str] | None]:
    """The rows of the jobs done, by index, as they finish (a counter on a terminal meanwhile), and the
    exit code and signal name of an interrupt, which keeps the rows done."""
    from logparse.fleet import EngineError

    counter = None
    if _isatty(sys.stderr):
        from logparse.console import JobCounter

        counter = JobCounter(sys.stderr, total)
        counter.draw()
    rows: dict = {}
    interrupted = None
    try:
        for index, row in run:
            rows[index] = row
            if counter is not None:
                counter.one_done()
    except EngineError as exc:
        if counter is not None:
            counter.clear()
        _fail(str(exc))
    except (KeyboardInterrupt, Terminated) as exc:
        interrupted = _interrupt_code(exc)
        _hold_after_interrupt()
    finally:
        run.close()  # stops the workers still running
        if counter is not None:
            counter.clear()
    return rows, interrupted


def _plan_job_reports(folder: str | None, jobs: list[str], redact: RedactConfig | None):
    """`fleet --reports DIR`: the function each worker calls to write its job's HTML report into DIR,
    under the job's short name (reports.fleet.short_names, made a file name; a secret in it masked, as
    the summary that links it shows the name); None without DIR."""
    if folder is None:
        return None
    import functools

    from reports.fleet import report_file_names

    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        _fail(f"--reports {folder}: cannot create the folder: {exc.strerror or exc}")
    shown = jobs if redact is None else [Redactor(RedactConfig()).text(job) for job in jobs]
    names = dict(zip(jobs, report_file_names(shown), strict=True))
    for job, name in names.items():
        if same_path(os.path.join(folder, name), job):
            _fail(f"--reports {folder}: {name} would be written over the job {job}")
    return functools.partial(_write_job_report, folder, names)


def _write_job_report(folder: str, names: dict[str, str], job: str, report: Report) -> str | None:
    """In a fleet worker: write `job`'s HTML report; where, or None when it cannot be written."""
    path = os.path.join(folder, names[job])
    try:
        write_atomically(path, render(report, "html"))
    except OSError:
        return None
    return path


def _linked_from(summary, summary_path: str | None):
    """`summary` with each job's report path relative to the folder of the summary (the current folder
    for stdout), as its links need them."""
    import dataclasses

    base = os.path.dirname(os.path.abspath(summary_path)) if summary_path else os.getcwd()
    jobs = tuple(
        dataclasses.replace(row, report=os.path.relpath(os.path.abspath(row.report), base))
        if row.report
        else row
        for row in summary.jobs
    )
    return dataclasses.replace(summary, jobs=jobs)


def _plan_fleet_output(
    paths: tuple[str, ...], fmt: str | None, output: str | None, engine: str, address: str | None
) -> Output:
    """Where the fleet summary goes and in which format (-o FILE's extension unless --format); the
    usage errors said before any job runs."""
    from logparse.fleet import EngineError, import_ray

    if "-" in paths:
        _fail("fleet reads files and folders; stdin ('-') cannot be a job")
    if address is not None and engine != "ray":
        _fail("--address is for --engine ray")
    try:
        target = plan_outputs((output,) if output else (), fmt, FLEET_FORMATS)[0]
    except OutputError as exc:
        _fail(str(exc))
    if target.to_stdout and _stdout_closed():
        _fail("standard output is closed; write the summary with -o FILE")
    if engine == "ray":
        try:
            import_ray()
        except EngineError as exc:
            _fail(str(exc))
    if not target.to_stdout:
        for p in paths:
            try:
                files = expand_inputs([p])
            except InputError:
                continue  # reported as an `error` row
            try:
                refuse_inputs([("--output", target.path)], files)
            except OutputError as exc:
                _fail(str(exc))
    return target


@cli.command(name="diff", short_help="Compare a good run with a bad one: what changed first.")
@click.argument("good", type=click.Path(dir_okay=True, allow_dash=True, readable=False))
@click.argument("bad", type=click.Path(dir_okay=True, allow_dash=True, readable=False))
@_report_options("diff", "Repeatable.")
@_catalog_option("Extra catalog file or folder.")
@_redaction_options(
    "diff", "Also mask IP addresses, host names and user names (as scan does). Secrets are always masked."
)
@click.option(
    "--max-lines",
    type=click.IntRange(0, 1000),
    default=25,
    show_default=True,
    help="Lines new in BAD shown at most.",
)
def diff_command(
    good: str,
    bad: str,
    fmt: str | None,
    outputs: tuple[str, ...],
    catalogs: tuple[str, ...],
    redact_hosts: bool,
    no_redact: bool,
    max_lines: int,
) -> None:
    """Compare a good run with a bad one: what changed, where BAD first diverged, what is new in it.

    GOOD and BAD are each a log file, a folder or '-' (stdin; one of the two), read as `scan` reads
    them. The diff lists the versions, topology and config values that differ; the first step where
    BAD's metrics leave GOOD's band or BAD stops short; the lines whose masked template GOOD never
    printed, most error-like first; and BAD's verdict, with whether GOOD shows the same failure.

    \b
    Examples:
      verl-logscan diff yesterday.log today.log
      verl-logscan diff good/ bad/ -o diff.html

    \b
    Exit codes: 0 no difference found, 1 the runs differ,
    2 usage, input or catalog error, 5 no log line read in GOOD or BAD.
    """
    from logparse.diff import diff_runs
    from reports.diff import render_diff

    if good == "-" and bad == "-":
        _fail("GOOD and BAD cannot both be stdin ('-')")
    try:
        planned = plan_outputs(outputs, fmt, FORMATS)
        refuse_inputs([("--output", o.path) for o in planned if not o.to_stdout], expand_inputs([good, bad]))
    except (InputError, OutputError) as exc:
        _fail(str(exc))
    catalog = _load(catalogs)
    _load_known()  # ($VERL_LOGSCAN_KNOWN_ISSUES: a bad file is exit 2 before any job)
    try:
        result = diff_runs([good], [bad], catalog, _redact_config(no_redact, redact_hosts), max_lines)
    except InputError as exc:
        _fail(str(exc))
    for o in planned:
        text = render_diff(result, o.fmt)
        if o.to_stdout:
            _echo_report(text)
        else:
            _write(o.path, text)
    if any(not o.to_stdout for o in planned) and not any(o.to_stdout for o in planned):
        words = "the runs differ" if result.differs else "no difference found"
        click.echo(
            f"verl-logscan: {words}; written to {terminal_text(', '.join(o.path for o in planned))}", err=True
        )
    if result.good.status == "empty" or result.bad.status == "empty":
        sys.exit(EXIT_NO_INPUT)
    sys.exit(EXIT_FAILURE_FOUND if result.differs else EXIT_HEALTHY)


@cli.group(name="catalog")
def catalog_group() -> None:
    """List or check the failure catalog."""


@catalog_group.command(name="list", short_help="List every catalog entry.")
@click.option("--catalog", "catalogs", multiple=True, type=click.Path(), help="Extra catalog file or folder.")
def catalog_list(catalogs: tuple[str, ...]) -> None:
    """List every catalog entry: id, category, role, priority, title."""
    catalog = _load(catalogs)
    rows = sorted(catalog.entries, key=lambda e: (e.category, -e.priority, e.id))
    width = max((len(e.id) for e in rows), default=2)
    cwidth = max((len(e.category) for e in rows), default=8)
    click.echo(f"{'id':{width}}  {'category':{cwidth}}  {'role':7}  prio  title")
    for e in rows:  # (a user catalog's title may hold terminal escapes: dropped, as scan drops a log's)
        title = terminal_text(e.title)
        click.echo(f"{e.id:{width}}  {e.category:{cwidth}}  {e.role.value:7}  {e.priority:4}  {title}")
    click.echo(f"{len(rows)} entries", err=True)


@catalog_group.command(name="check", short_help="Validate the catalog and run its examples.")
@click.argument("path", required=False, type=click.Path())
@_known_issues_option
def catalog_check(path: str | None, known_issue_files: tuple[str, ...]) -> None:
    """Validate the catalog (built-in, or PATH on top of it) and run every entry's examples; and the
    known upstream issues (built-in, or the --known-issues files): their schema, version ranges and
    examples, each scanned as a log and matched as a report matches it."""
    from logparse.catalog_check import check_catalog, check_known_issues  # here: a scan needs none of it

    catalog = _load((path,) if path else ())
    known = _load_known(known_issue_files)
    only = None
    if path:
        root = str(Path(path))
        only = {
            e.id for e in catalog.entries if e.source == root or e.source.startswith(root.rstrip("/") + "/")
        }
    # PATH: its entries only; --known-issues FILE: its known issues only; neither: everything built in
    entries = path is not None or not known_issue_files
    count, failures, summary = check_catalog(catalog, only, builtin=not path) if entries else (0, [], "")
    if not path or known_issue_files:
        mine = {str(Path(f)) for f in known_issue_files}
        only_known = (
            {
                k.id
                for k in known.entries
                if any(k.source == m or k.source.startswith(m.rstrip("/") + "/") for m in mine)
            }
            if known_issue_files
            else None
        )
        n, known_failures = check_known_issues(catalog, known, only_known)
        checked = len(only_known) if only_known is not None else len(known.entries)
        summary = "; ".join(x for x in (summary, f"known issues: {checked} entries, {n} examples") if x)
        failures = [*failures, *known_failures]
        count += n
    if failures:
        for f in failures:
            click.echo(terminal_text(f), err=True)
        said = terminal_text(summary)
        click.echo(
            f"verl-logscan: catalog check failed: {len(failures)} of {count} examples ({said})", err=True
        )
        sys.exit(EXIT_ERROR)
    click.echo(f"catalog ok: {terminal_text(summary)}")


@cli.command(short_help="What an entry or a category means, and how to fix it.")
@click.argument("entry_id", metavar="NAME")
@click.option("--catalog", "catalogs", multiple=True, type=click.Path(), help="Extra catalog file or folder.")
@click.option(
    "--category",
    "as_category",
    is_flag=True,
    help="Explain the category NAME where an entry has that id too.",
)
@_known_issues_option
def explain(
    entry_id: str, catalogs: tuple[str, ...], as_category: bool, known_issue_files: tuple[str, ...]
) -> None:
    """Show what a catalog entry (cuda-oom), a root-cause category (host-oom, the word after FAILED
    in a summary) or a fallback rule means and how to fix it (`explain unknown`: what an unknown
    verdict means and how to add an entry)."""
    from logparse.explain import names

    catalog = _load(catalogs)
    known = _load_known(known_issue_files)
    text = explain_text(catalog, entry_id, category=as_category, known=known)
    if text is None:
        what = "category" if as_category else "catalog entry, category or rule"
        known = list(CATEGORIES) if as_category else names(catalog)
        _fail(f"no {what} '{entry_id}'{_did_you_mean(entry_id, known)}; see 'verl-logscan catalog list'")
    click.echo(terminal_text(text), nl=False)  # (a user catalog's text: no escape reaches the terminal)


def _guard_standard_descriptors() -> None:
    """Standard descriptors the process was started without (`>&-`, `2>&-`) get /dev/null: otherwise
    the next file opened (a log, the report's temporary file) would take descriptor 1 or 2, and a
    library's message to stderr would land in it. Without stderr, messages are dropped and the scan
    goes on (the report and the exit code do not depend on them); without stdout, a report meant for
    it is an error (exit 2), one written with -o is not."""
    global _STDOUT_WAS_CLOSED
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        try:
            devnull = os.open(os.devnull, os.O_RDWR)
        except OSError:
            continue
        if devnull != fd:
            os.dup2(devnull, fd)
            os.close(devnull)
        if fd == 1:
            _STDOUT_WAS_CLOSED = True
        elif fd == 2:
            sys.stderr = open(fd, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115


def main() -> None:
    global _MAIN_PID
    _MAIN_PID = os.getpid()
    _guard_standard_descriptors()
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        cli.main(prog_name="verl-logscan")
    except BrokenPipeError:
        # the reader of our stdout went away (e.g. `| head`): not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(EXIT_ERROR)
    except OSError as exc:
        if exc.errno not in WRITE_ERRORS:
            raise
        # what a command prints on stdout (explain, catalog list, --help) could not be written: a full
        # disk, /dev/full, a quota; (a report's own writes say so themselves, with their path)
        _stdout_to_devnull()  # (so that the flush at exit has somewhere to go)
        _fail(f"cannot write to standard output: {exc.strerror or exc}")


if __name__ == "__main__":
    main()
