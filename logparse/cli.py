"""The `verl-logscan` command (click). The only module that imports `reports`; the library below it
never prints or exits."""

from __future__ import annotations

import dataclasses
import os
import shlex
import signal
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from logparse.decide.verdict import UNKNOWN_FIX
from logparse.read.layout import jobs_in_folder, several_jobs
from logparse.read.sources import InputError, expand_inputs
from logparse.redact import RedactConfig, Redactor, redact_report
from logparse.scan import ScanConfig, Scanner
from patterns import CatalogError, load_catalog
from reports import FORMATS, render
from reports.escape import csv_safe_frame, terminal_text

if TYPE_CHECKING:  # logparse.console is imported where a scan follows, tees, alerts or shows a status line
    from logparse.console import StatusLine
    from logparse.read.follow import FollowFile, TeeStream

EXIT_HEALTHY = 0
EXIT_FAILURE_FOUND = 1
EXIT_ERROR = 2
EXIT_NO_INPUT = 5  # no log line was read (an empty file or pipe); pytest uses 5 for "nothing collected"
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
EXIT_TERMINATED = 143  # 128 + SIGTERM


UNKNOWN_ID = "unknown"  # the root-cause id of an exception no catalog entry recognises
RULE_BASES = ("phrase", "weak-phrase", "type", "weak-type", "frame", "marker")  # bases that name a rule
BUILTIN_SOURCE = "patterns/catalog"  # how the loader names the source of a built-in entry


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


def _default_signals() -> None:
    """After the first interrupt, a second one ends the process at once (the report is written
    atomically, so that leaves no half-written file)."""
    if os.getpid() == _MAIN_PID:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _interrupt_code(exc: BaseException) -> tuple[int, str]:
    return (EXIT_TERMINATED, "SIGTERM") if isinstance(exc, Terminated) else (EXIT_INTERRUPTED, "SIGINT")


def _writable(text: str) -> bytes:
    """UTF-8 bytes of a report. A lone surrogate (from JSON text inside a log) becomes '?' instead of an
    encoding error; bytes, not str, so a non-UTF-8 terminal locale cannot fail the write either."""
    return text.encode("utf-8", "replace")


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
        click.echo(_writable(text), nl=False)
    except BrokenPipeError:
        raise
    except OSError as exc:
        _fail(f"cannot write the report to standard output: {exc.strerror or exc}")


def _load(catalog_paths: tuple[str, ...]):
    try:
        return load_catalog(list(catalog_paths))
    except CatalogError as exc:
        click.echo(f"verl-logscan: catalog error ({len(exc.problems)} problem(s)):", err=True)
        for p in exc.problems:
            click.echo(f"  {p}", err=True)
        sys.exit(EXIT_ERROR)


def _without(catalog, disabled: tuple[str, ...]):
    """The catalog minus the --disable'd entries; an id it does not have is a usage error."""
    if not disabled:
        return catalog
    ids = {e.id for e in catalog.entries}
    for entry_id in disabled:
        if entry_id not in ids:
            from rapidfuzz import process

            best = process.extractOne(entry_id, sorted(ids))
            hint = f" (did you mean '{best[0]}'?)" if best and best[1] >= 60 else ""
            _fail(
                f"--disable {entry_id}: no catalog entry with that id{hint}; see 'verl-logscan catalog list'"
            )
    return catalog.without(set(disabled))


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _same_path(a: str, b: str) -> bool:
    """The same file, or (neither existing yet) the same path."""
    return _same_file(a, b) or os.path.abspath(a) == os.path.abspath(b)


def _isatty(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError, OSError):  # closed, or no stream at all
        return False


def write_atomically(path: str, text: str) -> None:
    """Write to a temporary file beside `path`, then rename: never a half-written report."""
    data = _writable(text)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)

    write_file_atomically(path, write)


def write_file_atomically(path: str, write: Callable[[str], None]) -> None:
    """`write(tmp)` writes a temporary file beside `path`, which is then renamed to it: a failed write
    (a full disk) leaves the old file as it was and no temporary file behind. The file gets the mode of
    the one it replaces, else what the umask allows (not mkstemp's 0600)."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        try:
            mode = os.stat(target).st_mode & 0o777
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        write(tmp)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _total_bytes(files: list[str]) -> int | None:
    """Bytes in the inputs, when all are regular files (a .gz counts its compressed size: the
    status line then shows the decompressed bytes against it, so none is given)."""
    total = 0
    for f in files:
        if f == "-" or f.lower().endswith(".gz"):
            return None
        try:
            st = os.stat(f)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        total += st.st_size
    return total


def _alert_cleaner(redact: bool, hosts: bool) -> Callable[[str, bool], str]:
    """What an ALERT line does to log text before printing it: mask secrets (and hosts, learnt from the
    alert lines themselves: their placeholders may be numbered unlike the report's) and drop terminal
    escape sequences."""
    redactor = Redactor(RedactConfig(hosts=hosts)) if redact else None

    def clean(text: str, cut: bool = False) -> str:
        if redactor is not None:
            if hosts:
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


# the format an -o FILE's extension names; .txt is plain text, but names no format strongly enough to
# contradict --format (a Markdown report saved as notes.txt is fine)
FORMAT_OF_SUFFIX = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html", ".json": "json"}


@dataclasses.dataclass(frozen=True)
class Output:
    path: str  # '-' for stdout
    fmt: str

    @property
    def to_stdout(self) -> bool:
        return self.path == "-"


def plan_outputs(outputs: tuple[str, ...], fmt: str | None) -> list[Output]:
    """Where each report goes and in which format: --format when given, else each -o FILE's
    extension (.md, .html/.htm, .json; anything else is the text summary). Raises ValueError."""
    if not outputs:
        return [Output("-", fmt or "text")]
    planned: list[Output] = []
    for path in outputs:
        named = FORMAT_OF_SUFFIX.get(Path(path).suffix.lower()) if path != "-" else None
        if fmt is not None and named is not None and named != fmt:
            raise ValueError(
                f"--format {fmt} contradicts -o {path} (a .{Path(path).suffix[1:]} name: "
                f"{named}); drop --format to let each file's extension decide"
            )
        planned.append(Output(path, fmt or named or "text"))
    if sum(o.to_stdout for o in planned) > 1:
        raise ValueError("-o - (standard output) is given more than once")
    seen: dict[str, str] = {}
    for o in planned:
        if o.to_stdout:
            continue
        key = os.path.abspath(o.path)
        if key in seen or any(_same_file(o.path, other) for other in seen.values()):
            raise ValueError(f"-o {o.path} is given more than once")
        seen[key] = o.path
    return planned


def _wire_live(
    scanner: Scanner,
    files: list[str],
    follow: bool,
    tee: bool,
    alerts: bool,
    status: StatusLine | None,
    clean: Callable[[str, bool], str] | None = None,
) -> tuple[list[FollowFile], list[TeeStream]]:
    """Hook follow/tee streams, fatal-line alerts and the terminal status line into a scan; the
    followed files and tee streams opened (their notes are the report's)."""
    followed: list[FollowFile] = []
    tees: list[TeeStream] = []
    if follow or tee:
        from logparse.read.follow import FollowFile, TeeStream

        out = sys.stdout.buffer

        def open_stream(path: str, stream):
            if follow and path != "-":
                stream.close()
                stream = FollowFile(path)
                followed.append(stream)
            if tee:
                # the status line is wiped around passed-through text only when both share a terminal
                stream = TeeStream(
                    stream, out, on_broken=_stdout_to_devnull, status=status if _isatty(sys.stdout) else None
                )
                tees.append(stream)
            return stream

        scanner.open_stream = open_stream
        if follow and files != ["-"]:

            def stop_following(signum: int, frame: object) -> None:
                # Ctrl-C ends following: the scan finishes what was written and reports normally
                # (a second Ctrl-C interrupts at once)
                for f in followed:
                    f.stop()
                signal.signal(signal.SIGINT, signal.default_int_handler)

            signal.signal(signal.SIGINT, stop_following)
    if alerts:
        from logparse.console import Alerts

        scanner.on_fatal = (
            Alerts(sys.stderr, clean, status) if clean is not None else Alerts(sys.stderr, status=status)
        )
    if status is not None:
        scanner.on_progress = status
    return followed, tees


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
            return super().invoke(ctx)
        except (KeyboardInterrupt, Terminated) as exc:
            code, name = _interrupt_code(exc)
            click.echo(f"verl-logscan: interrupted ({name})", err=True)
            sys.exit(code)


@click.group(cls=DefaultToScan, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="verl-logscan", prog_name="verl-logscan")
def cli() -> None:
    """Find the root cause in the logs of a failed verl / torchrun / Ray job.

    \b
    Exit codes: 0 no failure found, 1 failure found, 2 usage, input or catalog error,
    5 no log line read (empty input).
    """


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(dir_okay=True, allow_dash=True, readable=False))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="Report format [default: from each -o FILE's extension (.md, .html, .json), else text].",
)
@click.option(
    "-o",
    "--output",
    "outputs",
    multiple=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Write the report to FILE (atomically) instead of stdout; the extension picks the format. "
    "Repeatable: -o report.md -o report.html -o report.json.",
)
@click.option(
    "--catalog",
    "catalogs",
    multiple=True,
    type=click.Path(exists=False),
    help="Extra catalog file or folder; adds to or overrides built-in entries by id. Repeatable.",
)
@click.option(
    "--color/--no-color",
    default=None,
    help="Colour the text summary and status line [default: on a terminal, unless NO_COLOR is set; "
    "FORCE_COLOR forces it].",
)
@click.option(
    "--redact-hosts",
    is_flag=True,
    help="Also mask IP addresses, host names and user names in home paths (stable placeholders "
    "such as node-1, ip-1, user-1). Secrets (tokens, API keys, passwords, e-mails) are always masked.",
)
@click.option("--no-redact", is_flag=True, help="Do not mask secrets in the report.")
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="Keep reading a file as it grows (survives rotation and truncation) until Ctrl-C; "
    "on stdin, read until the pipe closes. The report is written at the end.",
)
@click.option(
    "--tee",
    is_flag=True,
    help="Pass every input byte through to stdout unchanged (for `... 2>&1 | verl-logscan scan "
    "--tee -o report.md`); needs -o, since stdout carries the log. If the reader of stdout goes "
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
) -> None:
    """Scan log files, folders, .gz files or stdin (no PATH or '-') and report the root cause.

    \b
    Examples:
      verl-logscan scan job.log
      verl-logscan scan logs/ -o report.md -o report.html
      torchrun ... 2>&1 | verl-logscan scan --format json

    \b
    Exit codes: 0 no failure found, 1 failure found, 2 usage, input or catalog error,
    5 no log line read (empty input), 130 / 143 interrupted (SIGINT / SIGTERM).
    """
    if no_redact and redact_hosts:
        _fail("--no-redact and --redact-hosts contradict each other; give one")
    try:
        planned = plan_outputs(outputs, fmt)
    except ValueError as exc:
        _fail(str(exc))
    if tee and any(o.to_stdout for o in planned):
        _fail("--tee passes the log through to stdout, so the report needs -o FILE")
    to_stdout = any(o.to_stdout for o in planned)
    if (to_stdout or tee) and _stdout_closed():  # said before the scan, not after it
        _fail(
            "standard output is closed; write the report with -o FILE"
            if to_stdout
            else "standard output is closed; --tee has nowhere to pass the log through"
        )
    if follow and len(paths) > 1:
        _fail("--follow reads one file (or stdin); give a single PATH")
    for o in planned:
        if metrics_csv and not o.to_stdout and _same_path(metrics_csv, o.path):
            _fail(f"--metrics-csv and --output name the same file ({metrics_csv}); give two")
    catalog = _without(_load(catalogs), disabled)
    try:
        files = expand_inputs(list(paths) or ["-"])
    except InputError as exc:
        _fail(str(exc))
    targets = [("--output", o.path) for o in planned if not o.to_stdout] + [("--metrics-csv", metrics_csv)]
    for option, target in targets:
        if target and any(f != "-" and _same_file(f, target) for f in files):
            _fail(f"{option} {target} is one of the inputs; refusing to overwrite it")
    folder_notes = [
        n for p in paths if p != "-" and os.path.isdir(p) for n in [_several_jobs_note(p, files)] if n
    ]
    for note in folder_notes:
        click.echo(f"verl-logscan: warning: {terminal_text(note)}", err=True)
    scanner = Scanner(catalog, ScanConfig(all_metrics=bool(metrics_csv)))
    live = follow or tee or files == ["-"]
    status = None
    if _isatty(sys.stderr):
        from logparse.console import StatusLine

        status = StatusLine(sys.stderr, _total_bytes(files), follow, color=use_color(color, sys.stderr))
    followed, tees = _wire_live(
        scanner,
        files,
        follow=follow,
        tee=tee,
        alerts=live,
        status=status,
        clean=_alert_cleaner(redact=not no_redact, hosts=redact_hosts) if live else None,
    )
    interrupted: tuple[int, str] | None = None
    try:
        scanner.feed_inputs(files)
    except InputError as exc:
        if status is not None:
            status.clear()
        _fail(str(exc))
    except (KeyboardInterrupt, Terminated) as exc:  # report what was found so far, marked incomplete
        interrupted = _interrupt_code(exc)
        _default_signals()
    if status is not None:
        status.clear()
    report = scanner.report()
    live_notes = [n for f in followed for n in f.notes] + [n for t in tees for n in t.notes]
    if live_notes:
        report = dataclasses.replace(report, notes=(*report.notes, *live_notes))
        for note in live_notes:
            click.echo(f"verl-logscan: {note}", err=True)
    if interrupted is not None:
        note = f"interrupted by {interrupted[1]}: the report covers only the lines read before it"
        report = dataclasses.replace(report, complete=False, notes=(*report.notes, note))
        click.echo(f"verl-logscan: {note}", err=True)
    if folder_notes:
        report = dataclasses.replace(report, notes=(*folder_notes, *report.notes))
    if not no_redact:  # on the Report, not the log: evidence keeps its source:line
        report = redact_report(report, RedactConfig(hosts=redact_hosts))
    _write_reports(report, planned, color, catalog, catalogs)
    if metrics_csv:  # after the report: a CSV that cannot be written loses nothing else
        try:
            # a metric key that starts like a formula must not run in a spreadsheet
            write_file_atomically(
                metrics_csv, lambda tmp: scanner.metrics.to_csv(tmp, transform=csv_safe_frame)
            )
        except OSError as exc:
            _fail(f"cannot write {metrics_csv}: {exc.strerror or exc} (the report was written)")
    if interrupted is not None:
        sys.exit(interrupted[0])
    if report.empty:
        sys.exit(EXIT_NO_INPUT)
    sys.exit(EXIT_FAILURE_FOUND if report.failed else EXIT_HEALTHY)


MAX_GROUPS_NAMED = 6  # jobs named in the several-jobs warning (the rest are counted)
_GROUP_KIND = {"torchrun": "torchrun run", "ray": "Ray session", "name": "job"}


def _several_jobs_note(folder: str, files: list[str]) -> str | None:
    """A sentence when `folder` looks like several jobs (logparse.read.layout.jobs_in_folder), else None."""
    groups = jobs_in_folder(folder, files)
    if not several_jobs(groups):
        return None
    named = ", ".join(
        f"{_GROUP_KIND[g.kind]} {g.label}" + (f" ({len(g.files)} files)" if len(g.files) > 1 else "")
        for g in groups[:MAX_GROUPS_NAMED]
    )
    more = f" and {len(groups) - MAX_GROUPS_NAMED} more" if len(groups) > MAX_GROUPS_NAMED else ""
    if all(g.root for g in groups):
        roots = " ".join(shlex.quote(g.root) for g in groups[:MAX_GROUPS_NAMED])
        advice = f"for one row per job: verl-logscan fleet {roots}{' ...' if more else ''}"
    else:
        advice = (
            "scan each job's files on their own, or give each job its own folder and run verl-logscan fleet"
        )
    return f"{folder} looks like {len(groups)} jobs ({named}{more}), read here as one merged job; {advice}"


def _verdict_words(report) -> str:
    if report.root_cause is not None:
        return f"failed: {report.root_cause.category}"
    return "no log lines read" if report.empty else "healthy"


def _explain_hint(report, catalog, catalogs: tuple[str, ...]) -> str | None:
    """The `verl-logscan explain ...` command that works for this root cause, or None. An entry from a
    user catalog needs that catalog again; `unknown` is explained by `explain unknown`."""
    rc = report.root_cause
    if rc is None:
        return None
    if rc.id == UNKNOWN_ID:
        basis = rc.basis
        if basis is not None and basis.rule and basis.kind in RULE_BASES:
            return f"verl-logscan explain {shlex.quote(basis.rule)}"  # the fallback rule that named it
        return f"verl-logscan explain {UNKNOWN_ID}"
    entry = catalog.get(rc.id)
    if entry is None:
        return None
    extra = "".join(f" --catalog {shlex.quote(c)}" for c in catalogs if _defined_in(entry, c))
    if catalogs and not extra and not _builtin(entry):
        return None
    return f"verl-logscan explain {shlex.quote(rc.id)}{extra}"


def _defined_in(entry, path: str) -> bool:
    root = str(Path(path))
    return entry.source == root or entry.source.startswith(root.rstrip("/") + "/")


def _builtin(entry) -> bool:
    return _defined_in(entry, BUILTIN_SOURCE)


def _write_reports(
    report, planned: list[Output], color: bool | None, catalog, catalogs: tuple[str, ...]
) -> None:
    """Every planned output, each rendered once; the terminal gets the summary when no report went to it.
    (The text summary is terminal-safe as rendered: log text carries no escape sequence into it.)"""
    hint = _explain_hint(report, catalog, catalogs)
    to_stdout = next((o for o in planned if o.to_stdout), None)
    files = [o for o in planned if not o.to_stdout]
    for o in files:
        text = render(report, o.fmt, color=False, explain=hint)
        try:
            write_atomically(o.path, text)
        except OSError as exc:
            _fail(f"cannot write {o.path}: {exc.strerror or exc}")
    written = ", ".join(o.path for o in files)
    if to_stdout is not None:
        painted = to_stdout.fmt == "text" and use_color(color, sys.stdout)
        _echo_report(render(report, to_stdout.fmt, color=painted, explain=hint))
        if files:
            click.echo(
                f"verl-logscan: {_verdict_words(report)}; also written to {terminal_text(written)}", err=True
            )
        elif report.empty and to_stdout.fmt != "text":  # the text summary says it; JSON on a pipe does not
            click.echo("verl-logscan: no log lines read", err=True)
    elif all(o.fmt == "text" for o in files):
        click.echo(
            f"verl-logscan: {_verdict_words(report)}; report written to {terminal_text(written)}", err=True
        )
    else:  # the files hold the full report; the terminal gets the summary and where the files are
        err_color = use_color(color, sys.stderr)
        click.echo(
            render(report, "text", color=err_color, report_path=written, explain=hint),
            err=True,
            nl=False,
            color=err_color,
        )


FLEET_FORMATS = ("text", "md", "html", "csv", "json")  # = reports.fleet.FLEET_FORMATS (pandas loads lazily)
# = logparse.fleet.DEFAULT_JOB_TIMEOUT_S: a scan does not import the fleet module (multiprocessing, logging)
DEFAULT_JOB_TIMEOUT_S = 600.0


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=True))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FLEET_FORMATS),
    default="text",
    show_default=True,
    help="Summary format (csv: the job rows only).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Write the summary to FILE (atomically) instead of stdout.",
)
@click.option(
    "--catalog",
    "catalogs",
    multiple=True,
    type=click.Path(exists=False),
    help="Extra catalog file or folder, as for scan. Repeatable.",
)
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
def fleet(
    paths: tuple[str, ...],
    fmt: str,
    output: str | None,
    catalogs: tuple[str, ...],
    workers: int | None,
    engine: str,
    address: str | None,
    job_timeout: float,
) -> None:
    """Analyse many jobs at once and summarise them: one row per job, counts per category and stage.

    Each PATH is one job: a log file, or a folder whose log files are read together (as
    `verl-logscan scan FOLDER` does). Each job is analysed on its own, with the same result as
    scanning it alone; the rows keep the order of the PATHs.

    \b
    A PATH that cannot be read (missing, a folder without log files, not gzip), or whose job runs
    past --job-timeout, is a row with status `error` and the reason; the other jobs are still analysed.
    Ctrl-C or SIGTERM writes the rows done so far, marked incomplete (exit 130 / 143).
    Exit codes: 0 every job healthy; 1 a failure was found in at least one job (rows with status
    `error` may be among them); 2 no failure found but some job could not be read, or a usage,
    catalog or engine error (e.g. --engine ray without Ray installed, or no Ray at --address).

    \b
    Examples:
      verl-logscan fleet runs/*/ --format md -o fleet.md
      verl-logscan fleet logs/*.log --jobs 4 --format csv
      verl-logscan fleet runs/*/ --engine ray --address ray://head:10001
    """
    from logparse.console import terminal_columns
    from logparse.fleet import Engine, EngineError, JobStatus, import_ray, iter_fleet, summarise
    from reports.fleet import render_fleet

    if "-" in paths:
        _fail("fleet reads files and folders; stdin ('-') cannot be a job")
    if address is not None and engine != "ray":
        _fail("--address is for --engine ray")
    if (not output or output == "-") and _stdout_closed():
        _fail("standard output is closed; write the summary with -o FILE")
    if engine == "ray":
        try:
            import_ray()
        except EngineError as exc:
            _fail(str(exc))
    catalog = _load(catalogs)
    if output and output != "-":
        for p in paths:
            try:
                files = expand_inputs([p])
            except InputError:
                continue  # reported as an `error` row
            if any(_same_file(f, output) for f in files):
                _fail(f"--output {output} is one of the inputs; refusing to overwrite it")
    jobs = list(dict.fromkeys(paths))  # a job given twice is analysed once
    rows: dict = {}
    interrupted: tuple[int, str] | None = None
    run = iter_fleet(
        jobs,
        catalog,
        catalogs,
        engine=Engine(engine),
        workers=workers or os.cpu_count() or 1,
        address=address,
        job_timeout=job_timeout or None,
    )
    try:
        for index, row in run:  # rows as jobs finish: an interrupt keeps those done
            rows[index] = row
    except EngineError as exc:
        _fail(str(exc))
    except (KeyboardInterrupt, Terminated) as exc:
        interrupted = _interrupt_code(exc)
        _default_signals()
    finally:
        run.close()  # stops the workers still running
    summary = summarise(jobs, rows)
    for row in summary.jobs:
        if row.status is JobStatus.ERROR and row.message:
            click.echo(f"verl-logscan: {terminal_text(row.message)}", err=True)
    if interrupted is not None:
        click.echo(
            f"verl-logscan: interrupted by {interrupted[1]}: {len(summary.jobs)} of {len(jobs)} job(s) "
            f"analysed; the summary lists those",
            err=True,
        )
    to_terminal = (not output or output == "-") and _isatty(sys.stdout)
    text = render_fleet(summary, fmt, width=terminal_columns(sys.stdout) - 1 if to_terminal else None)
    if not output or output == "-":
        _echo_report(text)
    else:
        try:
            write_atomically(output, text)
        except OSError as exc:
            _fail(f"cannot write {output}: {exc.strerror or exc}")
        click.echo(
            f"verl-logscan: {len(summary.jobs)} job(s), {summary.failed} failed, {summary.errors} "
            f"unreadable; summary written to {output}",
            err=True,
        )
    if interrupted is not None:
        sys.exit(interrupted[0])
    if summary.failed:
        sys.exit(EXIT_FAILURE_FOUND)
    sys.exit(EXIT_ERROR if summary.errors else EXIT_HEALTHY)


@cli.group(name="catalog")
def catalog_group() -> None:
    """List or check the failure catalog."""


@catalog_group.command(name="list")
@click.option("--catalog", "catalogs", multiple=True, type=click.Path(), help="Extra catalog file or folder.")
def catalog_list(catalogs: tuple[str, ...]) -> None:
    """List every catalog entry: id, category, role, priority, title."""
    catalog = _load(catalogs)
    rows = sorted(catalog.entries, key=lambda e: (e.category, -e.priority, e.id))
    width = max((len(e.id) for e in rows), default=2)
    cwidth = max((len(e.category) for e in rows), default=8)
    click.echo(f"{'id':{width}}  {'category':{cwidth}}  {'role':7}  prio  title")
    for e in rows:
        click.echo(f"{e.id:{width}}  {e.category:{cwidth}}  {e.role.value:7}  {e.priority:4}  {e.title}")
    click.echo(f"{len(rows)} entries", err=True)


@catalog_group.command(name="check")
@click.argument("path", required=False, type=click.Path())
def catalog_check(path: str | None) -> None:
    """Validate the catalog (built-in, or PATH on top of it) and run every entry's examples."""
    from logparse.catalog_check import (
        check_examples,  # here: a scan needs none of it
        check_fallback_examples,
    )
    from logparse.wording_check import check_builtin_wordings
    from patterns.fallback import fallback_rules

    catalog = _load((path,) if path else ())
    only = None
    if path:
        root = str(Path(path))
        only = {
            e.id for e in catalog.entries if e.source == root or e.source.startswith(root.rstrip("/") + "/")
        }
    count, failures = check_examples(catalog, only)
    checked = len(only) if only is not None else len(catalog.entries)
    summary = f"{checked} entries, {count} examples"
    if not path:  # the built-in fallback rules (patterns/fallback.yaml) run their examples too
        rules = fallback_rules()
        n_examples, fallback_failures = check_fallback_examples(rules)
        failures = [*failures, *fallback_failures]
        count += n_examples
        summary += (
            f"; fallback rules: {len(rules.phrases) + len(rules.types) + len(rules.frames)} rules, "
            f"{n_examples} examples"
        )
        # ... and the wordings files (formats, environment, progress), through the code that reads them
        files, wording_failures = check_builtin_wordings()
        failures = [*failures, *wording_failures]
        count += sum(n for _, _, n in files)
        for label, n_wordings, n_examples in files:
            summary += f"; {label.rsplit('/', 1)[-1]}: {n_wordings} wordings, {n_examples} examples"
    if failures:
        for f in failures:
            click.echo(str(f), err=True)
        click.echo(
            f"verl-logscan: catalog check failed: {len(failures)} of {count} examples ({summary})", err=True
        )
        sys.exit(EXIT_ERROR)
    click.echo(f"catalog ok: {summary}")


@cli.command()
@click.argument("entry_id")
@click.option("--catalog", "catalogs", multiple=True, type=click.Path(), help="Extra catalog file or folder.")
def explain(entry_id: str, catalogs: tuple[str, ...]) -> None:
    """Show what a catalog entry means and how to fix it (`explain unknown`: what an unknown verdict
    means and how to add an entry)."""
    catalog = _load(catalogs)
    entry = catalog.get(entry_id)
    if entry is None and entry_id == UNKNOWN_ID:
        _explain_unknown(catalog)
        return
    if entry is None and _explain_rule(entry_id):
        return
    if entry is None:
        from rapidfuzz import process

        best = process.extractOne(entry_id, [e.id for e in catalog.entries])
        hint = f" (did you mean '{best[0]}'?)" if best and best[1] >= 60 else ""
        _fail(f"no catalog entry '{entry_id}'{hint}; see 'verl-logscan catalog list'")
    r = entry.remediation
    click.echo(f"{entry.id}: {entry.title}")
    click.echo(
        f"category {entry.category}, role {entry.role.value}, severity {entry.severity.value}, "
        f"priority {entry.priority}" + (f", stage {entry.stage}" if entry.stage else "")
    )
    click.echo("\nWhat it is\n  " + r.summary)
    click.echo("\nWhy it happens\n  " + r.why)
    click.echo("\nExample\n  " + entry.examples.match[0].line)
    click.echo("\nFix")
    for i, step in enumerate(r.fix, 1):
        click.echo(f"  {i}. {step}")
    if r.references:
        click.echo("\nReferences")
        for ref in r.references:
            click.echo(f"  {ref}")
    click.echo(f"\nDefined in {entry.source}:{entry.line}")


def _explain_rule(rule_id: str) -> bool:
    """`explain` of a fallback rule (patterns/fallback.yaml: a phrase, type or frame rule that names a
    failure no entry names); False when there is none of that id."""
    from patterns.fallback import FrameCategoryRule, MessageMarker, PhraseRule, fallback_rules

    rules = fallback_rules()
    rule = next(
        (
            r
            for r in (*rules.phrases, *rules.types, *rules.frames, *rules.bare.message_markers)
            if r.id == rule_id
        ),
        None,
    )
    if rule is None:
        return False
    if isinstance(rule, MessageMarker):
        click.echo(f"{rule.id}: a failure marker whose failure is the text printed before it")
        click.echo(f"category {rule.category}, when no phrase in that text names one")
        click.echo(f"\nWhat it looks for\n  a line matching {rule.pattern.pattern}")
        click.echo("\nWhy\n  " + rule.why)
        r = rules.fix_for(rule.category)
        click.echo("\nFix")
        for i, step in enumerate(r.fix if r is not None else UNKNOWN_FIX.fix, 1):
            click.echo(f"  {i}. {step}")
        click.echo(f"\nDefined in patterns/fallback.yaml:{rule.line}")
        return True
    kind = (
        "phrase"
        if isinstance(rule, PhraseRule)
        else "frame"
        if isinstance(rule, FrameCategoryRule)
        else "type"
    )
    click.echo(f"{rule.id}: a fallback {kind} rule, for failures that no catalog entry names")
    click.echo(
        f"category {rule.category}" + (" (a weak hint: tried after the frame rules)" if rule.weak else "")
    )
    click.echo("\nWhat it looks for")
    if isinstance(rule, PhraseRule):
        click.echo(
            "  a message holding " + " or ".join(repr(k) for k in rule.keywords) + ", and matching one of:"
        )
        for p in rule.patterns:
            click.echo(f"    {p.pattern}")
    elif isinstance(rule, FrameCategoryRule):
        for field in ("function", "file", "code"):
            if getattr(rule, field) is not None:
                click.echo(f"  a traceback frame whose {field} matches {getattr(rule, field).pattern}")
    else:
        click.echo(
            f"  an exception whose type matches {rule.type.pattern}"
            + (f" and whose message matches {rule.message.pattern}" if rule.message is not None else "")
        )
    if rule.examples.match:
        click.echo("\nExample\n  " + rule.examples.match[0].line.replace("\n", "\n  ").rstrip())
    r = rules.fix_for(rule.category)
    steps = [*getattr(rule, "fix", ()), *(r.fix if r is not None else UNKNOWN_FIX.fix)]
    if r is not None:
        click.echo("\nWhat it is\n  " + r.summary)
    click.echo("\nFix")
    for i, step in enumerate(steps, 1):
        click.echo(f"  {i}. {step}")
    click.echo(f"\nDefined in patterns/fallback.yaml:{rule.line}")
    return True


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


# the smallest entry that works, for `explain unknown`; `verl-logscan catalog check` validates a copy of it
# (tests/test_cli_outputs.py), so the skeleton users start from never rots
ENTRY_SKELETON = """\
- id: my-dataset-key-error
  title: A dataset row lacks the prompt key
  category: data-error
  role: cause
  severity: fatal
  priority: 60
  keywords: ['KeyError']
  patterns:
    - 'KeyError: .(?P<key>prompt|question).'
  message: 'a dataset row has no {key} column'
  remediation:
    summary: The dataset has no column named like the prompt key.
    why: verl reads each row's `data.prompt_key` column.
    fix: ['Set `data.prompt_key` to the column that holds the prompt.']
    references: []
  examples:
    match: ["(TaskRunner pid=42) KeyError: 'prompt'"]
    no_match:
      - line: "KeyError: 'labels'"
        why: another column
"""


def _explain_unknown(catalog) -> None:
    """`explain unknown`: the verdict for an exception that no catalog entry recognises."""
    r = UNKNOWN_FIX
    click.echo(f"{UNKNOWN_ID}: an error that no catalog entry recognises")
    click.echo(f"category {UNKNOWN_ID}, not a catalog entry ({len(catalog.entries)} entries are loaded)")
    click.echo(
        "\nWhat it is\n  The job failed with an exception that none of the catalog's entries names. "
        "verl-logscan then reports the exception that ended the first failing process as the root "
        "cause, with its error line, traceback and the evidence before it, and lists similar known "
        "entries when one comes close. Its category still comes from its evidence where the fallback "
        "rules (patterns/fallback.yaml) read one: a wording, the exception type, the frames it failed "
        "in, or the nearest known entry; the report's `basis` names the rule. Only when none applies "
        "is the category `unknown` too."
    )
    click.echo(
        "\nWhy it happens\n  " + r.why + " Echoes on other ranks (collective timeouts, lost peers, "
        "launcher summaries) are still counted as its symptoms."
    )
    click.echo("\nFix")
    for i, step in enumerate(r.fix, 1):
        click.echo(f"  {i}. {step}")
    click.echo("\nAdding an entry")
    click.echo(
        "  1. Copy the error line as the log prints it (with its [rank3]: or (WorkerDict pid=...) prefix)."
    )
    click.echo("  2. Write an entry in a YAML file of your own, e.g. my-entries.yaml:\n")
    for line in ENTRY_SKELETON.splitlines():
        click.echo(f"     {line}")
    click.echo("\n  3. Check it: verl-logscan catalog check my-entries.yaml")
    click.echo("  4. Use it:   verl-logscan scan job.log --catalog my-entries.yaml")
    click.echo(
        "  The README's 'Adding an entry' section describes every field; "
        "'verl-logscan catalog list' shows the entries there are."
    )
    if r.references:
        click.echo("\nReferences")
        for ref in r.references:
            click.echo(f"  {ref}")


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


if __name__ == "__main__":
    main()
