"""`verl-logscan fleet`, without click (logparse.cli parses its options): where the summary goes, the
jobs run by logparse.fleet (a counter on the terminal meanwhile: logparse.live), each job's own HTML
report written by the worker that analysed it (`--reports DIR`) and linked from the summary's row, the
summary written, and the exit code.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from logparse.commands import CommandError, Terminal, load, load_known, redact_config
from logparse.live import collect_rows, terminal_width, use_color
from logparse.model import FleetSummary, Report
from logparse.outputs import (
    Output,
    OutputError,
    check_writable,
    plan_outputs,
    refuse_inputs,
    same_path,
    write_atomically,
)
from logparse.process import EXIT_ERROR, EXIT_FAILURE_FOUND, EXIT_HEALTHY, EXIT_STALLED, stdout_closed
from logparse.read.layout import fleet_command, several_jobs_in
from logparse.read.sources import InputError, expand_inputs
from logparse.redact import RedactConfig, Redactor

FLEET_FORMATS = ("text", "md", "html", "csv", "json")  # = reports.fleet.FLEET_FORMATS (pandas loads lazily)
# = logparse.fleet.DEFAULT_JOB_TIMEOUT_S: a scan does not import the fleet module (multiprocessing, logging)
DEFAULT_JOB_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class FleetOptions:
    """`verl-logscan fleet`'s arguments and options, as click parsed them."""

    paths: tuple[str, ...]
    fmt: str | None
    outputs: tuple[str, ...]
    catalogs: tuple[str, ...]
    workers: int | None
    engine: str
    address: str | None
    job_timeout: float
    redact_hosts: bool
    no_redact: bool
    reports_dir: str | None
    color: bool | None = None


def fleet(options: FleetOptions, terminal: Terminal) -> int:
    """Analyse every job and write the summary; the exit code (an interrupt's, else the worst row's)."""
    from logparse.fleet import Engine, EngineError, JobStatus, iter_fleet, summarise

    o = options
    redact = redact_config(o.no_redact, o.redact_hosts)
    targets = plan_fleet_outputs(o.paths, o.fmt, o.outputs, o.engine, o.address)
    catalog = load(o.catalogs)
    load_known()  # ($VERL_LOGSCAN_KNOWN_ISSUES: a bad file is exit 2 before any job)
    jobs = list(dict.fromkeys(o.paths))  # a job given twice is analysed once
    for warning in several_jobs_warnings(jobs, o.outputs):
        terminal.say(f"verl-logscan: warning: {terminal.clean(warning)}")
    run = iter_fleet(
        jobs,
        catalog,
        o.catalogs,
        engine=Engine(o.engine),
        workers=o.workers or os.cpu_count() or 1,
        address=o.address,
        job_timeout=o.job_timeout or None,
        redact=redact,
        write_report=plan_job_reports(o.reports_dir, jobs, redact, terminal),
    )
    try:
        rows, interrupted = collect_rows(run, len(jobs), terminal.err)
    except EngineError as exc:
        raise CommandError(str(exc)) from None
    summary = summarise(jobs, rows, redact)
    for row in summary.jobs:
        if o.reports_dir and row.status is not JobStatus.ERROR and row.report is None:
            terminal.say(f"verl-logscan: could not write the report of {terminal.clean(row.job)}")
    for row in summary.jobs:
        if row.status is JobStatus.ERROR and row.message:
            terminal.say(f"verl-logscan: {terminal.clean(row.message)}")
    if interrupted is not None:
        terminal.say(
            f"verl-logscan: interrupted by {interrupted[1]}: {len(summary.jobs)} of {len(jobs)} job(s) "
            f"analysed; the summary lists those"
        )
    if not _write_summaries(summary, targets, terminal, o.color):
        return interrupted[0] if interrupted is not None else EXIT_ERROR
    if interrupted is not None:
        return interrupted[0]
    if summary.failed:
        return EXIT_FAILURE_FOUND
    if summary.errors:
        return EXIT_ERROR
    return EXIT_STALLED if summary.stalled else EXIT_HEALTHY


def _write_summaries(
    summary: FleetSummary, targets: list[Output], terminal: Terminal, color: bool | None = None
) -> bool:
    """The summary in every planned output (each file's report links relative to its own folder; on a
    terminal, the status column coloured unless --no-color / NO_COLOR); False when a file could not be
    written (the others are still written, and said)."""
    written, failed = [], False
    for target in targets:
        linked = linked_from(summary, None if target.to_stdout else target.path)
        if target.to_stdout:
            width = terminal_width(terminal.out)
            painted = target.fmt == "text" and use_color(color, terminal.out)
            text = terminal.render_fleet(
                linked, target.fmt, width=width - 1 if width else None, color=painted
            )
            terminal.report(text)
            continue
        try:
            write_atomically(target.path, terminal.render_fleet(linked, target.fmt))
        except OSError as exc:
            terminal.say(
                f"verl-logscan: error: cannot write {terminal.clean(target.path)}: {exc.strerror or exc}"
            )
            failed = True
            continue
        written.append(target.path)
    if written:
        stalled = f", {summary.stalled} stalled" if summary.stalled else ""
        terminal.say(
            f"verl-logscan: {len(summary.jobs)} job(s), {summary.failed} failed{stalled}, {summary.errors} "
            f"unreadable; summary written to {terminal.clean(', '.join(written))}"
        )
    return not failed


def plan_fleet_outputs(
    paths: tuple[str, ...], fmt: str | None, outputs: tuple[str, ...], engine: str, address: str | None
) -> list[Output]:
    """Where the fleet summary goes and in which formats (each -o FILE's extension unless --format);
    the usage errors said, and every file checked (logparse.outputs.check_writable), before any job
    runs."""
    from logparse.fleet import EngineError, import_ray

    if "-" in paths:
        raise CommandError("fleet reads files and folders; stdin ('-') cannot be a job")
    if address is not None and engine != "ray":
        raise CommandError("--address is for --engine ray")
    try:
        targets = plan_outputs(outputs, fmt, FLEET_FORMATS)
    except OutputError as exc:
        raise CommandError(str(exc)) from None
    if any(t.to_stdout for t in targets) and stdout_closed():
        raise CommandError("standard output is closed; write the summary with -o FILE")
    if engine == "ray":
        try:
            import_ray()
        except EngineError as exc:
            raise CommandError(str(exc)) from None
    files = [t.path for t in targets if not t.to_stdout]
    try:
        for p in paths if files else ():
            try:
                inputs = expand_inputs([p])
            except InputError:
                continue  # reported as an `error` row
            refuse_inputs([("--output", f) for f in files], inputs)
        for f in files:
            check_writable("-o", f)
    except OutputError as exc:
        raise CommandError(str(exc)) from None
    return targets


def several_jobs_warnings(jobs: list[str], outputs: tuple[str, ...]) -> list[str]:
    """For each job that is a folder of several jobs (logparse.read.layout, the test `scan` warns
    with): a sentence saying it is analysed as one job (one row), with the exact command that gives one
    row per job: the same PATHs, that folder replaced by its jobs, and the same -o."""
    warnings = []
    for job in jobs:
        if not os.path.isdir(job):
            continue
        try:
            several = several_jobs_in(job, expand_inputs([job]))
        except InputError:
            continue  # (its row says why)
        if several is None:
            continue
        if several.roots is None:
            advice = f"to read each job on its own: {several.scan_commands()}"
        else:
            paths = [p for j in jobs for p in (several.roots if j == job else [j])]
            command = fleet_command(paths) + "".join(f" -o {shlex.quote(o)}" for o in outputs)
            advice = f"for one row per job: {command}"
        warnings.append(f"{job} looks like {several.described}, analysed as one job (one row); {advice}")
    return warnings


def plan_job_reports(
    folder: str | None, jobs: list[str], redact: RedactConfig | None, terminal: Terminal
) -> Callable[[str, Report], str | None] | None:
    """`fleet --reports DIR`: the function each worker calls to write its job's HTML report into DIR,
    under the job's short name (reports.fleet.report_file_names, made a file name; a secret in it
    masked, as the summary that links it shows the name); None without DIR."""
    if folder is None:
        return None
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise CommandError(f"--reports {folder}: cannot create the folder: {exc.strerror or exc}") from None
    shown = jobs if redact is None else [Redactor(RedactConfig()).text(job) for job in jobs]
    names = dict(zip(jobs, terminal.report_file_names(shown), strict=True))
    for job, name in names.items():
        if same_path(os.path.join(folder, name), job):
            raise CommandError(f"--reports {folder}: {name} would be written over the job {job}")
    return functools.partial(write_job_report, folder, names, terminal.render)


def write_job_report(
    folder: str, names: dict[str, str], render: Callable[..., str], job: str, report: Report
) -> str | None:
    """In a fleet worker: write `job`'s HTML report (`render`: reports.render); where, or None when it
    cannot be written."""
    path = os.path.join(folder, names[job])
    try:
        write_atomically(path, render(report, "html"))
    except OSError:
        return None
    return path


def linked_from(summary: FleetSummary, summary_path: str | None) -> FleetSummary:
    """`summary` with each job's report path relative to the folder of the summary (the current folder
    for stdout), as its links need them."""
    base = os.path.dirname(os.path.abspath(summary_path)) if summary_path else os.getcwd()
    jobs = tuple(
        dataclasses.replace(row, report=os.path.relpath(os.path.abspath(row.report), base))
        if row.report
        else row
        for row in summary.jobs
    )
    return dataclasses.replace(summary, jobs=jobs)
