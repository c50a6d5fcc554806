"""What a command shows on the terminal while it runs, for the CLI: a scan's followed and teed streams,
its ALERT lines, its stall watch and its status line (logparse.console, logparse.live_stall), and the
count of a fleet's jobs done. It writes only to the streams the CLI hands it, and decides nothing about
the report.

A live scan's Ctrl-C ends the following (the scan then reports normally); any other interrupt ends the
reading, and the report covers what was read (`LiveView.feed`).
"""

from __future__ import annotations

import os
import signal
import stat
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TextIO

from logparse.process import (
    Terminated,
    hold_after_interrupt,
    interrupt_code,
    isatty,
    raise_swallowed_interrupt,
    stdout_to_devnull,
)
from logparse.read.sources import InputError
from logparse.redact import Names, RedactConfig, Redactor

if TYPE_CHECKING:  # logparse.console is imported where a scan follows, tees, alerts or shows a status line
    from logparse.console import StatusLine
    from logparse.live_stall import StallWatch
    from logparse.pipeline import Analysis
    from logparse.read.follow import FollowFile, TeeStream


def use_color(flag: bool | None, stream: object) -> bool:
    """Colour on `stream`? --color/--no-color decide; else NO_COLOR (https://no-color.org, any value)
    turns it off and FORCE_COLOR (any value) on, NO_COLOR winning; else a terminal that is not `dumb`."""
    if flag is not None:
        return flag
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return isatty(stream) and os.environ.get("TERM") != "dumb"


def terminal_width(stream) -> int | None:
    """The columns a summary on `stream` wraps to: a terminal's, else None (a file or a pipe gets every
    field on one line)."""
    if not isatty(stream):
        return None
    from logparse.console import terminal_columns

    return terminal_columns(stream)


def total_bytes(files: list[str]) -> int | None:
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


def alert_cleaner(
    redact: RedactConfig | None, names: Names | None, escape: Callable[[str], str]
) -> Callable[[str, bool], str]:
    """What an ALERT line does to log text before printing it: mask secrets (and hosts: those the scan
    learnt from the log read so far, `names`, and those the alert line names; their placeholders may
    be numbered unlike the report's) and drop terminal escape sequences (`escape`)."""
    redactor = Redactor(redact) if redact is not None else None

    def clean(text: str, cut: bool = False) -> str:
        if redactor is not None:
            if redact.hosts:
                if names is not None:
                    redactor.adopt(names)
                redactor.learn(text)
            text = redactor.text(text, cut=cut)
        return escape(text)

    return clean


class LiveView:
    """What a live scan adds: follow and tee streams, ALERT lines, the terminal's status line, on the
    CLI's standard output `out` and standard error `err`; `escape` drops what a terminal would act on
    from log text (reports.escape.terminal_text, given by the CLI)."""

    def __init__(
        self,
        files: list[str],
        follow: bool,
        tee: bool,
        color: bool | None,
        escape: Callable[[str], str],
        out: TextIO,
        err: TextIO,
        stdin: TextIO | None = None,
    ):
        self.files = files
        self.follow = follow
        self.tee = tee
        self.alerts = follow or tee or files == ["-"]
        self.color = color
        self.escape = escape
        self.out = out
        self.err = err
        self.followed: list[FollowFile] = []
        self.tees: list[TeeStream] = []
        self.status: StatusLine | None = None
        self.analysis: Analysis | None = None
        self.watch: StallWatch | None = None
        # (no status line over a log typed or pasted into the terminal: its echo shares the line)
        typed = files == ["-"] and stdin is not None and isatty(stdin)
        if isatty(err) and not typed:
            from logparse.console import StatusLine

            self.status = StatusLine(err, total_bytes(files), follow, color=use_color(color, err))

    def wire(
        self, analysis: Analysis, redact: RedactConfig | None, stall_s: float | str | None = None
    ) -> None:
        """Hook follow/tee streams, fatal-line alerts, the stall watch (`stall_s`: seconds, `auto`, or
        None: no watch) and the terminal status line into the analysis."""
        self.analysis = analysis
        names = analysis.names.names if analysis.names is not None else None
        on_fatal = None
        if self.alerts:
            from logparse.console import Alerts

            clean = alert_cleaner(redact, names, self.escape)
            on_fatal = Alerts(self.err, clean, self.status, color=use_color(self.color, self.err))
        on_progress = self.status
        if self.alerts and stall_s is not None:
            from logparse.live_stall import StallWatch

            explicit = None if stall_s == "auto" else float(stall_s)
            self.watch = StallWatch(
                self.err,
                alert_cleaner(redact, names, self.escape),
                explicit,
                self.status,
                color=use_color(self.color, self.err),
            )
            on_progress = self._progress
            self.watch.start()
        # a status line also hears when the input is quiet, to show what was read (not the state at
        # the start of the last burst of lines)
        wrap = self.follow or self.tee or (self.status is not None and self.files == ["-"])
        analysis.hear(self._open_stream if wrap else None, on_fatal, on_progress)
        if self.follow and self.files != ["-"]:
            signal.signal(signal.SIGINT, self._stop_following)

    def _stop_following(self, signum: int, frame: object) -> None:
        # Ctrl-C ends following: the scan finishes what was written and reports normally (a second
        # Ctrl-C interrupts at once)
        for f in self.followed:
            f.stop()
        signal.signal(signal.SIGINT, signal.default_int_handler)

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
                self.out.buffer,
                on_broken=stdout_to_devnull,
                status=self.status if isatty(self.out) else None,
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

    def feed(self, files: list[str]) -> tuple[int, str] | None:
        """Feed the inputs to the wired analysis; an interrupt ends the feeding (the report covers what
        was read): its exit code and signal name, else None. An unreadable input is an InputError,
        raised once the terminal is clean."""
        interrupted = None
        raise_swallowed_interrupt()  # (one during the start-up ends the command before the scan)
        try:
            self.analysis.feed_inputs(files)
            raise_swallowed_interrupt()
        except InputError:
            self.clear()
            raise
        except (KeyboardInterrupt, Terminated) as exc:  # report what was found so far, marked incomplete
            interrupted = interrupt_code(exc)
            hold_after_interrupt()
        self.clear()
        return interrupted

    def clear(self) -> None:
        if self.watch is not None:
            self.watch.stop()
        if self.status is not None:
            self.status.clear()

    def notes(self) -> list[str]:
        return [n for f in self.followed for n in f.notes] + [n for t in self.tees for n in t.notes]


def collect_rows(run: Iterable, total: int, err: TextIO) -> tuple[dict, tuple[int, str] | None]:
    """A fleet's rows of the jobs done, by index, as they finish (a counter on a terminal `err`
    meanwhile), and the exit code and signal name of an interrupt, which keeps the rows done. An
    EngineError is raised once the counter is wiped."""
    from logparse.fleet import EngineError

    counter = None
    if isatty(err):
        from logparse.console import JobCounter

        counter = JobCounter(err, total)
        counter.draw()
    rows: dict = {}
    interrupted = None
    try:
        for index, row in run:
            rows[index] = row
            if counter is not None:
                counter.one_done()
            raise_swallowed_interrupt()
    except EngineError:
        if counter is not None:
            counter.clear()
        raise
    except (KeyboardInterrupt, Terminated) as exc:
        interrupted = interrupt_code(exc)
        hold_after_interrupt()
    finally:
        run.close()  # stops the workers still running
        if counter is not None:
            counter.clear()
    return rows, interrupted
