"""The `verl-logscan` command (click): it parses the arguments and hands them to the command's module
(logparse.commands: catalog, explain, diff; logparse.scan_command; logparse.fleet_command), which
returns the exit code. With logparse.cli_terminal (the `Terminal` the commands print and render
through, and how a CommandError is shown: exit 2) the only modules that import click and `reports`
(logparse.api, the Python front end, renders too); the library below them never prints or exits."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import click

from logparse import commands, scan_command
from logparse.cli_terminal import TERMINAL, fail, show
from logparse.commands import CommandError, DiffOptions
from logparse.fleet_command import DEFAULT_JOB_TIMEOUT_S, FLEET_FORMATS, FleetOptions
from logparse.pipeline import DEFAULT_MAX_WORKERS, SettingError, check_settings
from logparse.process import (
    EXIT_ERROR,
    WRITE_ERRORS,
    Terminated,
    guard_standard_descriptors,
    install_sigterm_handler,
    interrupt_code,
    stdout_to_devnull,
)
from logparse.read.blocks import MAX_WORKERS
from logparse.read.unwrap import parse_unwrap
from logparse.startup import release_signals
from patterns.upstream_issues import ENV_VAR as KNOWN_ISSUES_ENV
from reports import FORMATS

STALL_FLOOR_WORDS = "5 min"  # = patterns/stalls.yaml min_silence_s (said in --help without loading it)


def _color_option(f: Callable) -> Callable:
    return click.option(
        "--color/--no-color",
        default=None,
        help="Colour the text [default: on a terminal, unless NO_COLOR is set; FORCE_COLOR forces it].",
    )(f)


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
        except CommandError as exc:
            show(exc)
        except (KeyboardInterrupt, Terminated) as exc:
            code, name = interrupt_code(exc)
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
        fail(str(exc))


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
def scan(**options) -> None:
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
    sys.exit(scan_command.scan(scan_command.ScanOptions(**options), FORMATS, TERMINAL))


def _unwrap_setting(value: str) -> str | int:
    """--unwrap: auto, off or a width in columns."""
    try:
        return parse_unwrap(value)
    except ValueError:
        raise click.BadParameter(f"{value!r}: give auto, off or a width in columns (e.g. 80)") from None


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
    "outputs",
    multiple=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Write the summary to FILE (atomically) instead of stdout; the extension picks the format. "
    "Repeatable: -o fleet.md -o fleet.html -o fleet.csv.",
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
@_color_option
def fleet(**options) -> None:
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
    from logparse.fleet_command import fleet as run_fleet

    sys.exit(run_fleet(FleetOptions(**options), TERMINAL))


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
    help="Lines new in BAD shown at most (a traceback's lines are one).",
)
@_color_option
def diff_command(**options) -> None:
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
    sys.exit(commands.diff(DiffOptions(**options), FORMATS, TERMINAL))


@cli.group(name="catalog")
def catalog_group() -> None:
    """List or check the failure catalog."""


@catalog_group.command(name="list", short_help="List every catalog entry.")
@click.option("--catalog", "catalogs", multiple=True, type=click.Path(), help="Extra catalog file or folder.")
def catalog_list(catalogs: tuple[str, ...]) -> None:
    """List every catalog entry: id, category, role, priority, title."""
    sys.exit(commands.list_catalog(catalogs, TERMINAL))


@catalog_group.command(name="check", short_help="Validate the catalog and run its examples.")
@click.argument("path", required=False, type=click.Path())
@_known_issues_option
@_color_option
def catalog_check(path: str | None, known_issue_files: tuple[str, ...], color: bool | None) -> None:
    """Validate the catalog (built-in, or PATH on top of it) and run every entry's examples; and the
    known upstream issues (built-in, or the --known-issues files): their schema, version ranges and
    examples, each scanned as a log and matched as a report matches it."""
    sys.exit(commands.check(path, known_issue_files, TERMINAL, color))


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
@_color_option
def explain(
    entry_id: str,
    catalogs: tuple[str, ...],
    as_category: bool,
    known_issue_files: tuple[str, ...],
    color: bool | None,
) -> None:
    """Show what a catalog entry (cuda-oom), a root-cause category (host-oom, the word after FAILED
    in a summary) or a fallback rule means and how to fix it (`explain unknown`: what an unknown
    verdict means and how to add an entry)."""
    sys.exit(commands.explain(entry_id, catalogs, as_category, known_issue_files, TERMINAL, color))


def main() -> None:
    install_sigterm_handler()
    guard_standard_descriptors()
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
        stdout_to_devnull()  # (so that the flush at exit has somewhere to go)
        fail(f"cannot write to standard output: {exc.strerror or exc}")


if __name__ == "__main__":
    main()
