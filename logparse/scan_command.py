"""`verl-logscan scan`, without click (logparse.cli parses its options): the options checked against
each other before anything is read, the inputs fed to one analysis with the live view on the terminal
(logparse.live), then every report written, the terminal's summary, `--metrics-csv`, and the exit code.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from logparse.commands import CommandError, Terminal, load, load_known, redact_config, verdict_words, without
from logparse.commands import write as write_file
from logparse.explain import explain_hint
from logparse.live import LiveView, terminal_width, use_color
from logparse.model import Report
from logparse.outputs import (
    Output,
    OutputError,
    plan_outputs,
    refuse_inputs,
    same_path,
    write_file_atomically,
)
from logparse.pipeline import Analysis, ScanConfig, start_analysis
from logparse.process import (
    EXIT_FAILURE_FOUND,
    EXIT_HEALTHY,
    EXIT_NO_INPUT,
    EXIT_STALLED,
    isatty,
    stdout_closed,
)
from logparse.read.layout import several_jobs_note
from logparse.read.sources import InputError, expand
from logparse.redact import Names, RedactConfig, redactor_for
from patterns import Catalog

DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class ScanOptions:
    """`verl-logscan scan`'s arguments and options, as click parsed them."""

    paths: tuple[str, ...]
    fmt: str | None
    outputs: tuple[str, ...]
    catalogs: tuple[str, ...]
    color: bool | None
    redact_hosts: bool
    no_redact: bool
    follow: bool
    tee: bool
    metrics_csv: str | None
    disabled: tuple[str, ...]
    workers: int | None
    stall_after: str | None
    known_issue_files: tuple[str, ...]
    unwrap: str | int


def scan(options: ScanOptions, formats: Sequence[str], terminal: Terminal) -> int:
    """Scan the inputs and write the reports; the exit code (an interrupt's, else the verdict's)."""
    o = options
    started = time.monotonic()
    redact = redact_config(o.no_redact, o.redact_hosts)
    planned = plan_scan_outputs(o.outputs, o.fmt, formats, o.tee, o.follow, o.paths, o.metrics_csv)
    stall_s = stall_after(o.stall_after, o.follow or o.tee or list(o.paths) in ([], ["-"]))
    catalog = without(load(o.catalogs), o.disabled)
    known = load_known(o.known_issue_files)
    files, folder_notes = _inputs(o.paths, planned, o.metrics_csv, terminal)
    config = ScanConfig(all_metrics=bool(o.metrics_csv), unwrap=o.unwrap)
    if o.workers is not None:
        config = dataclasses.replace(config, workers=o.workers)
    analysis = start_analysis(catalog, config, redact is not None and redact.hosts, known)
    live = LiveView(files, o.follow, o.tee, o.color, terminal.clean, terminal.out, terminal.err)
    live.wire(analysis, redact, stall_s if o.stall_after is not None else ("auto" if o.follow else None))
    try:
        interrupted = live.feed(files)
    except InputError as exc:
        raise CommandError(str(exc)) from None
    trailing = live.notes()
    for note in trailing:
        terminal.say(f"verl-logscan: {note}")
    if interrupted is not None:
        note = f"interrupted by {interrupted[1]}: the report covers only the lines read before it"
        trailing.append(note)
        terminal.say(f"verl-logscan: {note}")
    report = analysis.report(redact, folder_notes, trailing, complete=interrupted is None)
    write_reports(report, planned, o.color, catalog, o.catalogs, terminal, started)
    if o.metrics_csv:  # after the report: a CSV that cannot be written loses nothing else
        _write_metrics(analysis, o.metrics_csv, redact, terminal)
    if interrupted is not None:
        return interrupted[0]
    if report.empty:
        return EXIT_NO_INPUT
    if report.stalled:
        return EXIT_STALLED
    return EXIT_FAILURE_FOUND if report.failed else EXIT_HEALTHY


def _inputs(
    paths: tuple[str, ...], planned: list[Output], metrics_csv: str | None, terminal: Terminal
) -> tuple[list[str], list[str]]:
    """The files the inputs name (no report over one of them), and the notes on what a folder holds
    (a note on several jobs in one folder is also said on stderr before the scan)."""
    try:
        expanded = expand(list(paths) or ["-"])
        files = expanded.files
        targets = [("--output", o.path) for o in planned if not o.to_stdout] + [
            ("--metrics-csv", metrics_csv)
        ]
        refuse_inputs(targets, files)
    except (InputError, OutputError) as exc:
        raise CommandError(str(exc)) from None
    folder_notes = [
        n for p in paths if p != "-" and os.path.isdir(p) for n in [several_jobs_note(p, files)] if n
    ]
    for note in folder_notes:
        terminal.say(f"verl-logscan: warning: {terminal.clean(note)}")
    folder_notes += expanded.notes  # (what a folder holds and was not read: in the report)
    if files == ["-"] and isatty(terminal.stdin):  # no silent wait for a log that is not coming
        terminal.say("verl-logscan: reading from stdin (Ctrl-D to end; pipe a log or pass a file)")
    return files, folder_notes


def _write_metrics(analysis: Analysis, path: str, redact: RedactConfig | None, terminal: Terminal) -> None:
    try:
        # a metric key that starts like a formula must not run in a spreadsheet
        names = analysis.names.names if analysis.names is not None else None
        transform = csv_transform(redact, names, terminal.csv_safe_frame)
        write_file_atomically(path, lambda tmp: analysis.metrics.to_csv(tmp, transform=transform))
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror or exc} (the report was written)") from None


def csv_transform(redact: RedactConfig | None, names: Names | None, csv_safe: Callable) -> Callable:
    """What `--metrics-csv` does to the metrics table before writing it: its metric names (and any text
    cell) redacted as the report's are (logparse.redact: a token in a metric key is masked in the JSON
    report, so in the CSV too), then every formula-like cell made inert (`csv_safe`)."""
    if redact is None:
        return csv_safe
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
        return csv_safe(frame)

    return transform


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


def stall_after(value: str | None, live: bool) -> float | str | None:
    """--stall-after as seconds (`auto` when given without a duration); a usage error when the scan is
    not live or the duration is not one."""
    if value is not None and not live:
        raise CommandError("--stall-after watches a live log: use it with --follow, --tee or stdin")
    if value is None or value == "auto":
        return value
    try:
        return parse_duration(value)
    except ValueError:
        raise CommandError(f"--stall-after {value}: not a duration (such as 90s, 30m, 2h)") from None


def plan_scan_outputs(
    outputs: tuple[str, ...],
    fmt: str | None,
    formats: Sequence[str],
    tee: bool,
    follow: bool,
    paths: tuple[str, ...],
    metrics_csv: str | None,
) -> list[Output]:
    """Where a scan's reports go; every contradiction among the options is a usage error, said before
    the scan."""
    try:
        planned = plan_outputs(outputs, fmt, formats)
    except OutputError as exc:
        raise CommandError(str(exc)) from None
    to_stdout = any(o.to_stdout for o in planned)
    if tee and to_stdout:
        if outputs or fmt not in (None, "text"):
            raise CommandError("--tee passes the log through to stdout, so the report needs -o FILE")
        # `... | verl-logscan scan --tee`: the log goes on to stdout, the summary to stderr at the end
        planned = [o for o in planned if not o.to_stdout]
        to_stdout = False
    if (to_stdout or tee) and stdout_closed():  # said before the scan, not after it
        raise CommandError(
            "standard output is closed; write the report with -o FILE"
            if to_stdout
            else "standard output is closed; --tee has nowhere to pass the log through"
        )
    if follow and len(paths) > 1:
        raise CommandError("--follow reads one file (or stdin); give a single PATH")
    for o in planned:
        if metrics_csv and not o.to_stdout and same_path(metrics_csv, o.path):
            raise CommandError(f"--metrics-csv and --output name the same file ({metrics_csv}); give two")
    return planned


def write_reports(
    report: Report,
    planned: list[Output],
    color: bool | None,
    catalog: Catalog,
    catalogs: tuple[str, ...],
    terminal: Terminal,
    started: float | None = None,
) -> None:
    """Every planned output, each rendered once; the terminal gets the summary when no report went to it.
    (The text summary is terminal-safe as rendered: log text carries no escape sequence into it.) A
    summary on a terminal wraps to its width and ends with the seconds since `started`."""
    hint = explain_hint(report, catalog, catalogs)

    def on_screen(stream) -> dict:
        width = terminal_width(stream)
        if width is None:
            return {}
        return {"width": width, "elapsed": time.monotonic() - started if started is not None else None}

    to_stdout = next((o for o in planned if o.to_stdout), None)
    files = [o for o in planned if not o.to_stdout]
    for o in files:
        write_file(o.path, terminal.render(report, o.fmt, color=False, explain=hint))
    written = ", ".join(o.path for o in files)
    if to_stdout is not None:
        painted = to_stdout.fmt == "text" and use_color(color, terminal.out)
        screen = on_screen(terminal.out) if to_stdout.fmt == "text" else {}
        terminal.report(terminal.render(report, to_stdout.fmt, color=painted, explain=hint, **screen))
        if files:
            terminal.say(f"verl-logscan: {verdict_words(report)}; also written to {terminal.clean(written)}")
        elif report.empty and to_stdout.fmt != "text":  # the text summary says it; JSON on a pipe does not
            terminal.say("verl-logscan: no log lines read")
    elif files and all(o.fmt == "text" for o in files):
        terminal.say(f"verl-logscan: {verdict_words(report)}; report written to {terminal.clean(written)}")
    else:  # the files (if any: --tee alone) hold the full report; stderr gets the summary and where
        err_color = use_color(color, terminal.err)
        summary = terminal.render(
            report,
            "text",
            color=err_color,
            report_path=written or None,
            explain=hint,
            **on_screen(terminal.err),
        )
        terminal.say(summary, nl=False, color=err_color)
