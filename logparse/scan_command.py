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

import regex

from logparse.commands import (
    CommandError,
    Terminal,
    load,
    load_known,
    redact_config,
    verdict_words,
    warn,
    without,
)
from logparse.explain import explain_hint
from logparse.live import LiveView, terminal_width, use_color
from logparse.model import Report
from logparse.outputs import (
    Output,
    OutputError,
    check_writable,
    plan_outputs,
    refuse_inputs,
    same_path,
    write_atomically,
    write_file_atomically,
)
from logparse.pipeline import Analysis, ScanConfig, start_analysis
from logparse.process import (
    EXIT_ERROR,
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
    stall_s = stall_after(o.stall_after, o.follow or o.tee or list(o.paths) in ([], ["-"]), o.paths)
    catalog = without(load(o.catalogs), o.disabled)
    known = load_known(o.known_issue_files)
    files, folder_notes = _inputs(o.paths, planned, o.metrics_csv, terminal, o.color)
    check_outputs(planned, o.metrics_csv)  # (a typo in -o is said now, not after an hour of --follow)
    config = ScanConfig(all_metrics=bool(o.metrics_csv), unwrap=o.unwrap)
    if o.workers is not None:
        config = dataclasses.replace(config, workers=o.workers)
    analysis = start_analysis(catalog, config, redact is not None and redact.hosts, known)
    live = LiveView(
        files, o.follow, o.tee, o.color, terminal.clean, terminal.out, terminal.err, terminal.stdin
    )
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
    metrics = _metrics_writer(analysis, o.metrics_csv, redact, terminal) if o.metrics_csv else None
    failures = write_reports(report, planned, o.color, catalog, o.catalogs, terminal, started, metrics)
    if failures:  # the analysis was shown; only where it could not go is the error
        return interrupted[0] if interrupted is not None else EXIT_ERROR
    if interrupted is not None:
        return interrupted[0]
    return report_exit_code(report)


def report_exit_code(report: Report) -> int:
    """The exit code of a complete scan with this report (README, Exit codes; the Python API's too)."""
    if report.empty:
        return EXIT_NO_INPUT
    if report.stalled:
        return EXIT_STALLED
    return EXIT_FAILURE_FOUND if report.failed else EXIT_HEALTHY


def _inputs(
    paths: tuple[str, ...],
    planned: list[Output],
    metrics_csv: str | None,
    terminal: Terminal,
    color: bool | None = None,
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
        warn(terminal, note, color)
    folder_notes += expanded.notes  # (what a folder holds and was not read: in the report)
    if files == ["-"] and isatty(terminal.stdin):  # no silent wait for a log that is not coming
        terminal.say("verl-logscan: reading from stdin (Ctrl-D to end; pipe a log or pass a file)")
    return files, folder_notes


def _metrics_writer(
    analysis: Analysis, path: str, redact: RedactConfig | None, terminal: Terminal
) -> tuple[str, Callable[[], None]]:
    """`--metrics-csv PATH`: the path and the function that writes it (atomically; raises OSError)."""
    # a metric key that starts like a formula must not run in a spreadsheet
    names = analysis.names.names if analysis.names is not None else None
    transform = csv_transform(redact, names, terminal.csv_safe_frame)
    return path, lambda: write_file_atomically(
        path, lambda tmp: analysis.metrics.to_csv(tmp, transform=transform)
    )


def check_outputs(planned: list[Output], metrics_csv: str | None) -> None:
    """Every file a scan will write, checked before the scan (logparse.outputs.check_writable): a
    missing folder is created, a path that cannot be written is a usage error now."""
    try:
        for o in planned:
            check_writable("-o", o.path)
        if metrics_csv:
            check_writable("--metrics-csv", metrics_csv)
    except OutputError as exc:
        raise CommandError(str(exc)) from None


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


UNIT_WORDS = {  # the words a duration's unit may be written as (`20 minutes`, `90sec`, `2 h`)
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), "s"),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), "m"),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), "h"),
    **dict.fromkeys(("d", "day", "days"), "d"),
}
_DURATION_PART = regex.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)")


def parse_duration(text: str) -> float:
    """`90`, `90s`, `30m`, `2h`, `1h30m`, `20 minutes`, `1 hour 30 min` -> seconds (ValueError when it
    is none of these)."""
    total, pos, rest = 0.0, 0, text.strip().lower()
    while pos < len(rest):
        m = _DURATION_PART.match(rest, pos)
        if m is None or (m.group(2) and m.group(2) not in UNIT_WORDS):
            raise ValueError(text)
        total += float(m.group(1)) * DURATION_UNITS[UNIT_WORDS.get(m.group(2), "s")]
        pos = m.end()
        if not m.group(2) and rest[pos:].strip():  # a bare number is only the last part
            raise ValueError(text)
        while pos < len(rest) and rest[pos] in " ,":
            pos += 1
    if total <= 0:
        raise ValueError(text)
    return total


def stall_after(value: str | None, live: bool, paths: tuple[str, ...] = ()) -> float | str | None:
    """--stall-after as seconds (`auto` when given without a duration); a usage error when the scan is
    not live or the duration is not one. `paths`: the scan's inputs, where the unit of an unquoted
    `--stall-after 20 minutes` lands."""
    unit = next((p for p in paths if p.lower() in UNIT_WORDS and not os.path.exists(p)), None)
    if value is not None and unit is not None:
        number = value if value != "auto" else "N"
        raise CommandError(
            f"--stall-after {number} {unit}: the unit was read as a file to scan; write the duration as "
            f"one word, --stall-after {number}{UNIT_WORDS[unit.lower()]}"
        )
    if value is not None and not live:
        raise CommandError("--stall-after watches a live log: use it with --follow, --tee or stdin")
    if value is None or value == "auto":
        return value
    try:
        return parse_duration(value)
    except ValueError:
        raise CommandError(
            f"--stall-after {value}: not a duration (such as 90s, 30m, 2h, 1h30m or '20 minutes')"
        ) from None


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
    metrics: tuple[str, Callable[[], None]] | None = None,
) -> list[str]:
    """Every planned output, each rendered once, and `metrics` (--metrics-csv: its path and writer);
    the terminal gets the summary when no report went to it, or when a file could not be written (a
    finished analysis is never lost to a write error). Returns why each file that could not be
    written could not (`cannot write r.md: No space left on device`). (The text summary is
    terminal-safe as rendered: log text carries no escape sequence into it.) A summary on a terminal
    wraps to its width and ends with the seconds since `started`."""
    hint = explain_hint(report, catalog, catalogs)
    to_stdout = next((o for o in planned if o.to_stdout), None)
    written: list[str] = []
    failures: list[str] = []
    for o in planned:
        if not o.to_stdout:
            _try_write(
                o.path,
                lambda o=o: write_atomically(o.path, terminal.render(report, o.fmt, explain=hint)),
                written,
                failures,
            )
    metrics_written = None
    if metrics is not None and _try_write(metrics[0], metrics[1], [], failures):
        metrics_written = metrics[0]
    where = _written_words(written, metrics_written)
    full = (
        ", ".join(written) + (f"; metrics to {metrics_written}" if metrics_written else "")
        if written
        else None
    )
    if to_stdout is not None:
        _report_to_stdout(report, to_stdout.fmt, color, hint, terminal, started)
        if where:
            also = _written_words(written, metrics_written, "also written to")
            terminal.say(f"verl-logscan: {verdict_words(report)}; {terminal.clean(also)}")
        elif report.empty and to_stdout.fmt != "text":  # the text summary says it; JSON on a pipe does not
            terminal.say("verl-logscan: no log lines read")
    elif written and all(o.fmt == "text" for o in planned) and not failures:
        terminal.say(f"verl-logscan: {verdict_words(report)}; {terminal.clean(where)}")
    else:  # the files (if any: --tee alone) hold the full report; stderr gets the summary and where
        _summary_to_stderr(report, color, hint, terminal, started, full)
        if metrics_written and not written:
            terminal.say(f"verl-logscan: {terminal.clean(where)}")
    shown = (
        " (the report was written)"
        if written or to_stdout is not None
        else " (the summary above is the analysis)"
    )
    for failure in failures:
        terminal.say(f"verl-logscan: error: {terminal.clean(failure)}{shown}")
    return failures


def _try_write(path: str, write: Callable[[], None], written: list[str], failures: list[str]) -> bool:
    """Write one file; its path joins `written`, or why it failed joins `failures`."""
    try:
        write()
    except OSError as exc:
        failures.append(f"cannot write {path}: {exc.strerror or exc}")
        return False
    written.append(path)
    return True


def _written_words(reports: list[str], metrics: str | None, lead: str = "report written to") -> str:
    """`report written to r.md, r.json; metrics to m.csv`: where a scan's files went."""
    parts = [f"{lead} {', '.join(reports)}"] if reports else []
    if metrics is not None:
        parts.append(f"metrics written to {metrics}" if not reports else f"metrics to {metrics}")
    return "; ".join(parts)


def _on_screen(stream, started: float | None) -> dict:
    """A summary's width and elapsed time on a terminal (nothing for a file or a pipe)."""
    width = terminal_width(stream)
    if width is None:
        return {}
    return {"width": width, "elapsed": time.monotonic() - started if started is not None else None}


def _report_to_stdout(
    report: Report, fmt: str, color: bool | None, hint: str | None, terminal: Terminal, started: float | None
) -> None:
    painted = fmt == "text" and use_color(color, terminal.out)
    screen = _on_screen(terminal.out, started) if fmt == "text" else {}
    terminal.report(terminal.render(report, fmt, color=painted, explain=hint, **screen))


def _summary_to_stderr(
    report: Report,
    color: bool | None,
    hint: str | None,
    terminal: Terminal,
    started: float | None,
    where: str | None,
) -> None:
    err_color = use_color(color, terminal.err)
    summary = terminal.render(
        report, "text", color=err_color, report_path=where, explain=hint, **_on_screen(terminal.err, started)
    )
    terminal.say(summary, nl=False, color=err_color)
