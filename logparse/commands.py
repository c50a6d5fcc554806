"""What the commands do, without click: logparse.cli parses the arguments and hands them here; each
command returns its exit code (logparse.process) and writes only through the `Terminal` the CLI gives
it, the one place that prints and renders (reports). A usage or input problem is a CommandError, which
the CLI shows (`verl-logscan: error: ...`) and ends with exit 2.

This module holds what several commands share (loading the catalog and the known issues, the
redaction settings) and the small commands (`catalog list`, `catalog check`, `explain`, `diff`);
`scan` is logparse/scan_command.py, `fleet` logparse/fleet_command.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from logparse.live import terminal_width, use_color
from logparse.model import ReportStatus
from logparse.outputs import OutputError, plan_outputs, refuse_inputs, write_atomically
from logparse.pipeline import default_known_issues
from logparse.process import EXIT_ERROR, EXIT_FAILURE_FOUND, EXIT_HEALTHY, EXIT_NO_INPUT
from logparse.read.sources import InputError, expand_inputs
from logparse.redact import RedactConfig
from patterns import CATEGORIES, Catalog, CatalogError, load_catalog
from patterns.formats import FORMATS_ENV, line_formats
from patterns.upstream_issues import ENV_VAR as KNOWN_ISSUES_ENV
from patterns.upstream_issues import KnownIssues

if TYPE_CHECKING:
    from logparse.model import FleetSummary, Report


class CommandError(Exception):
    """What ends a command with exit 2: `message`, shown as `verl-logscan: error: MESSAGE`; or, with
    `problems` (a catalog's, a known-issues file's), shown as `verl-logscan: MESSAGE:` and the problems
    under it, one a line."""

    def __init__(self, message: str, problems: Sequence[object] | None = None):
        super().__init__(message)
        self.message = message
        self.problems = problems


class Terminal(Protocol):
    """What a command writes and how it renders, given by the CLI (the one module that prints and
    imports `reports`)."""

    out: TextIO  # the standard streams, as the command runs
    err: TextIO
    stdin: TextIO

    def echo(self, text: str, nl: bool = True) -> None:
        """`text` on standard output (a listing, an explanation)."""

    def say(self, text: str, nl: bool = True, color: bool | None = None) -> None:
        """`text` on standard error."""

    def report(self, text: str) -> None:
        """A report on standard output; one that cannot be written there is a CommandError."""

    def clean(self, value: object) -> str:
        """`value` without anything a terminal would act on (reports.escape.terminal_text)."""

    # reports/: the renderers, and the CSV cells made inert (plain functions: a fleet worker is
    # handed `render`)
    render: Callable[..., str]
    csv_safe_frame: Callable[[Any], Any]

    def render_fleet(
        self, summary: FleetSummary, fmt: str, width: int | None = None, color: bool = False
    ) -> str: ...

    def render_diff(self, diff: Any, fmt: str, color: bool = False, width: int | None = None) -> str: ...

    def report_file_names(self, jobs: list[str]) -> list[str]: ...


def load(catalog_paths: Sequence[str]) -> Catalog:
    """The built-in catalog with `catalog_paths` (--catalog) on top, and (checked with it) the launcher
    formats every Normalizer reads with; a bad one is a CommandError with every problem, before any scan."""
    try:
        catalog = load_catalog(list(catalog_paths))
    except CatalogError as exc:
        raise CommandError(f"catalog error ({len(exc.problems)} problem(s))", exc.problems) from None
    try:  # a team's own launcher prefixes ($VERL_LOGSCAN_FORMATS)
        line_formats()
    except CatalogError as exc:
        raise CommandError(
            f"formats error ({FORMATS_ENV}, {len(exc.problems)} problem(s))", exc.problems
        ) from None
    return catalog


def load_known(files: Sequence[str] = ()) -> KnownIssues:
    """The known upstream issues a report is matched against: the built-in ones, the files
    $VERL_LOGSCAN_KNOWN_ISSUES names, then `files` (--known-issues). A bad file is a CommandError with
    every problem listed (file:line, reason, help), before any scan."""
    try:
        return default_known_issues(tuple(files))
    except CatalogError as exc:
        env = os.environ.get(KNOWN_ISSUES_ENV)
        where = f" (--known-issues{', ' + KNOWN_ISSUES_ENV if env else ''})" if files or env else ""
        raise CommandError(
            f"known issues error{where} ({len(exc.problems)} problem(s))", exc.problems
        ) from None


def warn(terminal: Terminal, text: str, color: bool | None = None) -> None:
    """`verl-logscan: warning: TEXT` on standard error: made safe for a terminal, wrapped to its width
    at spaces, yellow when colour is on there (as scan's summary colours its notes)."""
    from logparse.console import RESET, YELLOW, wrap_text  # (only when there is a warning: a scan needs none)

    text = wrap_text(f"verl-logscan: warning: {terminal.clean(text)}", terminal_width(terminal.err))
    painted = use_color(color, terminal.err)
    terminal.say(f"{YELLOW}{text}{RESET}" if painted else text, color=painted)


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    from rapidfuzz import process

    best = process.extractOne(word, sorted(choices))
    return f" (did you mean '{best[0]}'?)" if best and best[1] >= 60 else ""


def without(catalog: Catalog, disabled: Sequence[str]) -> Catalog:
    """The catalog minus the --disable'd entries; an id it does not have is a usage error."""
    if not disabled:
        return catalog
    ids = [e.id for e in catalog.entries]
    for entry_id in disabled:
        if entry_id not in ids:
            raise CommandError(
                f"--disable {entry_id}: no catalog entry with that id{did_you_mean(entry_id, ids)}; "
                f"see 'verl-logscan catalog list'"
            )
    return catalog.without(set(disabled))


def counted(n: int, one: str, many: str | None = None) -> str:
    """`1 entry`, `3 entries`, `2 examples`."""
    return f"{n} {one}" if n == 1 else f"{n} {many or one + 's'}"


def redact_config(no_redact: bool, redact_hosts: bool) -> RedactConfig | None:
    if no_redact and redact_hosts:
        raise CommandError("--no-redact and --redact-hosts contradict each other; give one")
    return None if no_redact else RedactConfig(hosts=redact_hosts)


def verdict_words(report: Report) -> str:
    if report.root_cause is not None:
        return f"failed: {report.root_cause.category}"
    if report.stalled:
        return "stalled"
    if report.empty:
        return "no log lines read"
    return "healthy" if report.complete else "interrupted: no failure found in what was read (partial)"


# -- catalog list, catalog check, explain ----------------------------------------------------------
def list_catalog(catalogs: Sequence[str], terminal: Terminal) -> int:
    """`catalog list`: every entry (id, category, role, priority, title), by category."""
    catalog = load(catalogs)
    rows = sorted(catalog.entries, key=lambda e: (e.category, -e.priority, e.id))
    width = max((len(e.id) for e in rows), default=2)
    cwidth = max((len(e.category) for e in rows), default=8)
    terminal.echo(f"{'id':{width}}  {'category':{cwidth}}  {'role':7}  prio  title")
    for e in rows:  # (a user catalog's title may hold terminal escapes: dropped, as scan drops a log's)
        title = terminal.clean(e.title)
        terminal.echo(f"{e.id:{width}}  {e.category:{cwidth}}  {e.role.value:7}  {e.priority:4}  {title}")
    terminal.say(counted(len(rows), "entry", "entries"))
    return EXIT_HEALTHY


def _under(source: str, roots: Sequence[str]) -> bool:
    """Does an entry read from `source` come from one of `roots` (a file, or a folder it is in)?"""
    return any(source == root or source.startswith(root.rstrip("/") + "/") for root in roots)


def check(
    path: str | None, known_issue_files: Sequence[str], terminal: Terminal, color: bool | None = None
) -> int:
    """`catalog check [PATH] [--known-issues FILE]`: PATH's entries (on top of the built-in catalog),
    the --known-issues files' known issues; neither given, everything built in. Each problem and
    warning on standard error, wrapped to a terminal's width; failures red, warnings yellow."""
    from logparse.catalog_check import (  # here: a scan needs none of it
        check_catalog,
        check_known_issues,
        shadowed_examples,
    )
    from logparse.console import BOLD, GREEN, RED, RESET, YELLOW, wrap_text

    catalog = load((path,) if path else ())
    known = load_known(known_issue_files)
    only = {e.id for e in catalog.entries if _under(e.source, [str(Path(path))])} if path else None
    entries = path is not None or not known_issue_files
    count, failures, summary = check_catalog(catalog, only, builtin=not path) if entries else (0, [], "")
    if not path or known_issue_files:
        mine = [str(Path(f)) for f in known_issue_files]
        only_known = {k.id for k in known.entries if _under(k.source, mine)} if known_issue_files else None
        n, known_failures = check_known_issues(catalog, known, only_known)
        checked = len(only_known) if only_known is not None else len(known.entries)
        known_words = f"known issues: {counted(checked, 'entry', 'entries')}, {counted(n, 'example')}"
        summary = "; ".join(x for x in (summary, known_words) if x)
        failures = [*failures, *known_failures]
        count += n
    warnings = shadowed_examples(catalog, only) if only else []
    err_width, err_color = terminal_width(terminal.err), use_color(color, terminal.err)

    def say(text: str, paint: str = "") -> None:
        text = wrap_text(terminal.clean(text), err_width)
        terminal.say(f"{paint}{text}{RESET}" if paint and err_color else text, color=err_color)

    for w in warnings:
        say(str(w), YELLOW)
    if failures:
        for f in failures:
            say(str(f), RED)
        said = f"{len(failures)} of {count} examples ({summary})"
        say(f"verl-logscan: catalog check failed: {said}", BOLD + RED)
        return EXIT_ERROR
    warned = f"; {len(warnings)} warning{'s' if len(warnings) != 1 else ''}" if warnings else ""
    ok = wrap_text(terminal.clean(f"catalog ok: {summary}{warned}"), terminal_width(terminal.out))
    terminal.echo(f"{GREEN}{ok}{RESET}" if use_color(color, terminal.out) else ok)
    return EXIT_HEALTHY


def explain(
    name: str,
    catalogs: Sequence[str],
    as_category: bool,
    known_issue_files: Sequence[str],
    terminal: Terminal,
    color: bool | None = None,
) -> int:
    """`explain NAME`: an entry, a category or a fallback rule, and how to fix it."""
    from logparse.explain import explain_text, names

    catalog = load(catalogs)
    known = load_known(known_issue_files)
    text = explain_text(catalog, name, category=as_category, known=known)
    if text is None:
        what = "category" if as_category else "catalog entry, category or rule"
        choices = list(CATEGORIES) if as_category else names(catalog)
        raise CommandError(
            f"no {what} '{name}'{did_you_mean(name, choices)}; see 'verl-logscan catalog list'"
        )
    # (a user catalog's text: no escape reaches the terminal); on a terminal, wrapped to its width at
    # spaces, the headings bold when colour is on
    from logparse.console import wrap_text

    text = wrap_text(terminal.clean(text), terminal_width(terminal.out))
    if use_color(color, terminal.out):
        text = "\n".join(bold_heading(line) for line in text.split("\n"))
    terminal.echo(text, nl=False)
    return EXIT_HEALTHY


def bold_heading(line: str) -> str:
    """A line that starts at the first column (a heading, the entry's title) in bold."""
    from logparse.console import BOLD, RESET

    return f"{BOLD}{line}{RESET}" if line[:1].strip() else line


# -- diff ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DiffOptions:
    """`verl-logscan diff`'s arguments and options, as click parsed them."""

    good: str
    bad: str
    fmt: str | None
    outputs: tuple[str, ...]
    catalogs: tuple[str, ...]
    redact_hosts: bool
    no_redact: bool
    max_lines: int
    color: bool | None = None


def diff(options: DiffOptions, formats: Sequence[str], terminal: Terminal) -> int:
    """`diff GOOD BAD`: the two runs compared, in every planned output; 1 when they differ."""
    from logparse.diff import diff_runs

    good, bad = options.good, options.bad
    if good == "-" and bad == "-":
        raise CommandError("GOOD and BAD cannot both be stdin ('-')")
    try:
        planned = plan_outputs(options.outputs, options.fmt, formats)
        refuse_inputs([("--output", o.path) for o in planned if not o.to_stdout], expand_inputs([good, bad]))
    except (InputError, OutputError) as exc:
        raise CommandError(str(exc)) from None
    catalog = load(options.catalogs)
    load_known()  # ($VERL_LOGSCAN_KNOWN_ISSUES: a bad file is exit 2 before any job)
    redact = redact_config(options.no_redact, options.redact_hosts)
    try:
        result = diff_runs([good], [bad], catalog, redact, options.max_lines)
    except InputError as exc:
        raise CommandError(str(exc)) from None
    for o in planned:
        if o.to_stdout:
            on_screen = o.fmt == "text"
            color = on_screen and use_color(options.color, terminal.out)
            width = terminal_width(terminal.out) if on_screen else None
            terminal.report(terminal.render_diff(result, o.fmt, color=color, width=width))
        else:
            write(o.path, terminal.render_diff(result, o.fmt))
    if not any(o.to_stdout for o in planned):
        # as scan -o: the text on standard error, then where the reports went
        color = use_color(options.color, terminal.err)
        terminal.say(
            terminal.render_diff(result, "text", color=color, width=terminal_width(terminal.err)),
            nl=False,
            color=color,
        )
        words = "the runs differ" if result.differs else "no difference found"
        terminal.say(
            f"verl-logscan: {words}; written to {terminal.clean(', '.join(o.path for o in planned))}"
        )
    if ReportStatus.EMPTY in (result.good.status, result.bad.status):
        return EXIT_NO_INPUT
    return EXIT_FAILURE_FOUND if result.differs else EXIT_HEALTHY


def write(path: str, text: str) -> None:
    """Write a report file (atomically); a failure is a CommandError."""
    try:
        write_atomically(path, text)
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror or exc}") from None
