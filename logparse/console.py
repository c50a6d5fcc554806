"""What a live scan shows on the terminal, for the CLI: an ALERT line per fatal cause the moment its
line is read, and a one-line status redrawn while scanning.

* `Alerts` is told about each finding and prints one line per fatal cause, once per catalog entry
  (bold red when colour is on, so that it stands out among passed-through log lines);
* `StatusLine` redraws a one-line status (stage, step, findings so far) on a terminal, cut to its
  width, and is wiped before any other output reaches that terminal.
"""

from __future__ import annotations

import os
import re
import textwrap
import time
from collections.abc import Callable
from typing import TextIO

STATUS_EVERY_SECONDS = 0.5
BOLD, RED, YELLOW, GREEN, RESET = "\x1b[1m", "\x1b[31m", "\x1b[33m", "\x1b[32m", "\x1b[0m"
_ITEM = re.compile(r"(\s*)(\d+\.\s+|[-*]\s+)?")  # a line's indent, and a list item's number or bullet


def wrap_text(text: str, width: int | None) -> str:
    """`text` (plain, already made safe for a terminal) with each line wrapped to `width` columns at
    spaces, never inside a word that fits on a line (`gpu_memory_utilization` stays whole), continuation
    rows under the line's text (after its indent and a list item's `1. `). None: as it is (a pipe)."""
    if width is None:
        return text
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        m = _ITEM.match(line)
        hang = " " * (len(m.group(1)) + len(m.group(2) or "") or 4)
        out += textwrap.wrap(
            line,
            width=max(width, 20),
            subsequent_indent=hang if len(hang) < width // 2 else "    ",
            break_on_hyphens=False,
            drop_whitespace=True,
        ) or [line]
    return "\n".join(out)


ALERT_MESSAGE_CHARS = 200  # of the error message shown in an alert
ALERT_WINDOW_CHARS = 4096  # of the message cleaned for it (a 1 MB line is not redacted whole per alert)


def _plain(text: str, cut: bool = False) -> str:
    return text


class Alerts:
    """One stderr line per fatal cause, the moment its line is read (once per catalog entry). The
    status line, when one is drawn on the same terminal, is wiped first.

    `clean(text, cut)` makes each log-derived piece of the line safe to print: the CLI masks secrets
    (and hosts) and strips terminal escape sequences; `cut` says the text was cut short, so a token at
    its very end may be incomplete."""

    def __init__(
        self,
        out: TextIO,
        clean: Callable[[str, bool], str] = _plain,
        status: StatusLine | None = None,
        color: bool = False,
    ):
        self.out = out
        self.clean = clean
        self.status = status
        self.color = color  # red and bold (on a terminal, unless NO_COLOR: the CLI decides)
        self.seen: set[str] = set()
        self.first_alert_at: float | None = None

    def __call__(self, hit) -> None:  # hit: logparse.observe.hits.Hit
        entry = hit.entry
        if entry.id in self.seen:
            return
        self.seen.add(entry.id)
        if self.first_alert_at is None:
            self.first_alert_at = time.monotonic()
        rec = hit.record
        where = rec.origin.where()
        if self.status is not None:
            self.status.before_output()
        place = self.clean(f"{rec.line.source}:{rec.line.number}{' on ' + where if where else ''}", False)
        message = rec.message
        # masked before it is clipped, so the clip cannot leave the start of a token in clear
        shown = self.clean(message[:ALERT_WINDOW_CHARS], len(message) > ALERT_WINDOW_CHARS)
        line = f"verl-logscan: ALERT {hit.category} ({entry.id}) at {place}: {shown[:ALERT_MESSAGE_CHARS]}"
        line = wrap_text(line, screen_width(self.out))  # (on a terminal: its width, at spaces)
        # (the log's part of the line is clean: no escape sequence of its own to end ours early)
        self.out.write(f"{_ALERT}{line}{_RESET}\n" if self.color else line + "\n")
        self.out.flush()


DEFAULT_COLUMNS = 80
_DIM, _RESET = "\x1b[2m", "\x1b[0m"
_ALERT = "\x1b[1m\x1b[31m"  # bold red: an alert stands out in a flood of passed-through log lines


def screen_width(stream: TextIO | None) -> int | None:
    """The columns a line on `stream` wraps to: a terminal's (terminal_columns), else None."""
    from logparse.process import isatty

    return terminal_columns(stream) if isatty(stream) else None


def terminal_columns(stream: TextIO | None) -> int:
    """Columns of the terminal behind `stream`: $COLUMNS when set (what a user or a test asks for),
    else the terminal's own size, else 80."""
    raw = os.environ.get("COLUMNS", "")
    if raw.strip().isdecimal() and int(raw) > 0:
        return int(raw)
    try:
        return os.get_terminal_size(stream.fileno()).columns or DEFAULT_COLUMNS  # type: ignore[union-attr]
    except (AttributeError, OSError, ValueError):
        return DEFAULT_COLUMNS


class StatusLine:
    """A one-line status on a terminal (stderr), redrawn at most every STATUS_EVERY_SECONDS: bytes read
    (of the total, when the inputs are files of known size), MB/s, stage, step, findings.

    It is cut to one column less than the terminal is wide (read at every redraw, so a resize is
    followed; a line as wide as the terminal would wrap and leave a stale copy behind), drawn with
    `\\r` and blanks only (no cursor escapes, so a dumb terminal shows it right), dimmed only when
    `color` is on, and wiped (`before_output`) before anything else is written to the terminal."""

    def __init__(
        self, out: TextIO, total_bytes: int | None = None, follow: bool = False, color: bool = False
    ):
        self.out = out
        self.total = total_bytes if total_bytes and not follow else None  # a followed file grows
        self.follow = follow
        self.color = color
        self._waited = False  # drawn once since the input went quiet
        self._start = time.monotonic()
        self._last = 0.0
        self._width = 0  # columns of the status now on screen (0: none drawn)
        self._held = False  # passed-through text left a line open: draw nothing until it is closed

    def __call__(self, analysis) -> None:  # analysis: logparse.pipeline.Analysis
        now = time.monotonic()
        self._waited = False  # input arrives: the next quiet moment is shown at once
        if self._held or now - self._last < STATUS_EVERY_SECONDS:
            return
        self._last = now
        self.draw(self.text(analysis, now))

    def waiting(self, analysis) -> None:
        """The input is quiet (a followed file at its end, a pipe with nothing to read): show what was
        read so far, at once the first time and then at most every STATUS_EVERY_SECONDS, with how to stop."""
        now = time.monotonic()
        if self._held or (self._waited and now - self._last < STATUS_EVERY_SECONDS):
            return
        self._waited = True
        self._last = now
        self.draw(self.text(analysis, now, waiting=True))

    def text(self, analysis, now: float | None = None, waiting: bool = False) -> str:
        """The status, plain (no control characters); `waiting`: the input is quiet (no rate, and how
        to stop: Ctrl-C ends a followed file, Ctrl-D a terminal's input)."""
        st = analysis.status()
        seconds = (now if now is not None else time.monotonic()) - self._start
        rate = f", {st.bytes_read / 1e6 / seconds:,.0f} MB/s" if seconds > 0 and not waiting else ""
        if self.total:
            read = st.bytes_read
            done = f"{read / 1e6:,.1f} of {self.total / 1e6:,.1f} MB ({min(read / self.total, 1.0):.0%})"
        else:
            done = f"{st.bytes_read / 1e6:,.1f} MB" + ("" if waiting else " read")  # (room for the hint)
        hint = ""
        if waiting:
            hint = "; Ctrl-C to stop" if self.follow else "; waiting for input"
        return (
            f"verl-logscan: {done}{rate}, stage {st.stage or '-'}, step "
            f"{st.step if st.step is not None else '-'}, {st.findings} finding(s){hint}"
        )

    def draw(self, text: str) -> None:
        room = max(terminal_columns(self.out) - 1, 0)
        text = text[:room]
        pad = " " * max(self._width - len(text), 0)  # blanks over the rest of a longer previous status
        shown = f"{_DIM}{text}{_RESET}" if self.color and text else text
        self.out.write("\r" + shown + pad)
        self.out.flush()
        self._width = len(text)

    def before_output(self) -> None:
        """Something else is about to be written to the terminal: wipe the status first."""
        self.clear()

    def after_output(self, line_open: bool) -> None:
        """Passed-through text was written; while it leaves a line open, a status would overwrite it."""
        self._held = line_open

    def clear(self) -> None:
        if self._width:
            self.out.write("\r" + " " * self._width + "\r")
            self.out.flush()
            self._width = 0


class JobCounter:
    """`fleet`'s progress on a terminal (stderr): `verl-logscan: 12 of 23 job(s) done`, redrawn as each
    job ends, so that the screen is not blank while the first jobs run; wiped before the summary."""

    def __init__(self, out: TextIO, total: int):
        self.out = out
        self.total = total
        self.done = 0
        self._width = 0

    def draw(self) -> None:
        text = f"verl-logscan: {self.done} of {self.total} job(s) done"
        text = text[: max(terminal_columns(self.out) - 1, 0)]
        self.out.write("\r" + text + " " * max(self._width - len(text), 0))
        self.out.flush()
        self._width = len(text)

    def one_done(self) -> None:
        self.done += 1
        self.draw()

    def clear(self) -> None:
        if self._width:
            self.out.write("\r" + " " * self._width + "\r")
            self.out.flush()
            self._width = 0
