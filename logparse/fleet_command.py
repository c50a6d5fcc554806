"""`verl-logscan fleet`, without click (logparse.cli parses its options): where the summary goes, the
jobs run by logparse.fleet (a counter on the terminal meanwhile: logparse.live), each job's own HTML
report written by the worker that analysed it (`--reports DIR`) and linked from the summary's row, the
summary written, and the exit code.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass

from logparse.commands import CommandError, Terminal, load, load_known, redact_config, write
from logparse.live import collect_rows, terminal_width
from logparse.model import FleetSummary, Report
from logparse.outputs import Output, OutputError, plan_outputs, refuse_inputs, same_path, write_atomically
from logparse.process import EXIT_ERROR, EXIT_FAILURE_FOUND, EXIT_HEALTHY, EXIT_STALLED, stdout_closed
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
    output: str | None
    catalogs: tuple[str, ...]
    workers: int | None
    engine: str
    address: str | None
    job_timeout: float
    redact_hosts: bool
    no_redact: bool
    reports_dir: str | None


def fleet(options: FleetOptions, terminal: Terminal) -> int:
    """Analyse every job and write the summary; the exit code (an interrupt's, else the worst row's)."""
    from logparse.fleet import Engine, EngineError, JobStatus, iter_fleet, summarise

    o = options
    redact = redact_config(o.no_redact, o.redact_hosts)
    target = plan_fleet_output(o.paths, o.fmt, o.output, o.engine, o.address)
    catalog = load(o.catalogs)
    load_known()  # ($VERL_LOGSCAN_KNOWN_ISSUES: a bad file is exit 2 before any job)
    jobs = list(dict.fromkeys(o.paths))  # a job given twice is analysed once
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
    summary = linked_from(summarise(jobs, rows, redact), None if target.to_stdout else target.path)
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
    _write_summary(summary, target, terminal)
    if interrupted is not None:
        return interrupted[0]
    if summary.failed:
        return EXIT_FAILURE_FOUND
    if summary.errors:
        return EXIT_ERROR
    return EXIT_STALLED if summary.stalled else EXIT_HEALTHY


def _write_summary(summary: FleetSummary, target: Output, terminal: Terminal) -> None:
    width = terminal_width(terminal.out) if target.to_stdout else None
    text = terminal.render_fleet(summary, target.fmt, width=width - 1 if width is not None else None)
    if target.to_stdout:
        terminal.report(text)
        return
    write(target.path, text)
    terminal.say(
        f"verl-logscan: {len(summary.jobs)} job(s), {summary.failed} failed, {summary.errors} "
        f"unreadable; summary written to {target.path}"
    )


def plan_fleet_output(
    paths: tuple[str, ...], fmt: str | None, output: str | None, engine: str, address: str | None
) -> Output:
    """Where the fleet summary goes and in which format (-o FILE's extension unless --format); the
    usage errors said before any job runs."""
    from logparse.fleet import EngineError, import_ray

    if "-" in paths:
        raise CommandError("fleet reads files and folders; stdin ('-') cannot be a job")
    if address is not None and engine != "ray":
        raise CommandError("--address is for --engine ray")
    try:
        target = plan_outputs((output,) if output else (), fmt, FLEET_FORMATS)[0]
    except OutputError as exc:
        raise CommandError(str(exc)) from None
    if target.to_stdout and stdout_closed():
        raise CommandError("standard output is closed; write the summary with -o FILE")
    if engine == "ray":
        try:
            import_ray()
        except EngineError as exc:
            raise CommandError(str(exc)) from None
    if not target.to_stdout:
        for p in paths:
            try:
                files = expand_inputs([p])
            except InputError:
                continue  # reported as an `error` row
            try:
                refuse_inputs([("--output", target.path)], files)
            except OutputError as exc:
                raise CommandError(str(exc)) from None
    return target


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
