"""Live use: follow a growing file, pass the input through (tee), raise alerts as fatal lines arrive.

* `FollowFile` reads a file like `tail -F`: at its end it waits and reads what is appended; when the
  file is truncated it reads from the start again, and when it is replaced (log rotation: a new inode
  at the path) it opens the new file. Ctrl-C ends following and the scan finishes normally.
* `TeeStream` writes every byte it reads to another stream, unchanged, as soon as it is read.
* `Alerts` is told about each finding and prints one line per fatal cause, once per catalog entry;
  `StatusLine` redraws a one-line status (stage, step, findings so far) on a terminal, cut to its
  width, and is wiped before any other output reaches that terminal.
"""

from __future__ import annotations

import os
import time
from typing import BinaryIO, TextIO

POLL_SECONDS = 0.2
STATUS_EVERY_SECONDS = 0.5


class FollowFile:
    """A binary stream over `path` that never ends by itself (until stop() or Ctrl-C)."""

    def __init__(self, path: str, poll: float = POLL_SECONDS):
        self.path = path
        self.poll = poll
        self._fh = open(path, "rb")  # noqa: SIM115 - closed in close()
        self._ino = os.fstat(self._fh.fileno()).st_ino
        self.stopped = False
        self.rotations = 0
        self.truncations = 0

    def stop(self) -> None:
        self.stopped = True

    def _check_replaced(self) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return  # between a rotation's rename and the new file's creation
        pos = self._fh.tell()
        if st.st_ino != self._ino:
            self._fh.close()
            self._fh = open(self.path, "rb")  # noqa: SIM115
            self._ino = os.fstat(self._fh.fileno()).st_ino
            self.rotations += 1
        elif st.st_size < pos:
            self._fh.seek(0)
            self.truncations += 1

    def read1(self, n: int = -1) -> bytes:
        while True:
            data = self._fh.read1(n) if n > 0 else self._fh.read()
            if data:
                return data
            if self.stopped:
                return b""
            try:
                self._check_replaced()
                data = self._fh.read1(n) if n > 0 else self._fh.read()
                if data:
                    return data
                time.sleep(self.poll)
            except KeyboardInterrupt:
                self.stopped = True
                return b""

    read = read1

    def close(self) -> None:
        self._fh.close()


class TeeStream:
    """Reads from `inner`, writing each chunk to `out` before handing it on. When `out` is the terminal
    that also shows the status line, the status line is wiped before each chunk and held while the
    passed-through text leaves a line open, so the two never run into each other on screen."""

    def __init__(self, inner: BinaryIO, out: BinaryIO, status: StatusLine | None = None):
        self.inner = inner
        self.out = out
        self.status = status
        self._read = getattr(inner, "read1", None) or inner.read

    def read1(self, n: int = -1) -> bytes:
        data = self._read(n)
        if data:
            if self.status is not None:
                self.status.before_output()
            self.out.write(data)
            self.out.flush()
            if self.status is not None:
                self.status.after_output(line_open=not data.endswith(b"\n"))
        return data

    read = read1

    def close(self) -> None:
        if hasattr(self.inner, "close"):
            self.inner.close()


class Alerts:
    """One stderr line per fatal cause, the moment its line is read (once per catalog entry). The
    status line, when one is drawn on the same terminal, is wiped first."""

    def __init__(self, out: TextIO, status: StatusLine | None = None):
        self.out = out
        self.status = status
        self.seen: set[str] = set()
        self.first_alert_at: float | None = None

    def __call__(self, hit) -> None:  # hit: logparse.findings.Hit
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
        self.out.write(f"verl-logscan: ALERT {hit.category} ({entry.id}) at {rec.line.source}:{rec.line.number}"
                       f"{' on ' + where if where else ''}: {rec.message[:200]}\n")
        self.out.flush()


DEFAULT_COLUMNS = 80
_DIM, _RESET = "\x1b[2m", "\x1b[0m"


def terminal_columns(stream: TextIO | None) -> int:
    """Columns of the terminal behind `stream`: $COLUMNS when set (what a user or a test asks for),
    else the terminal's own size, else 80."""
    raw = os.environ.get("COLUMNS", "")
    if raw.strip().isdigit() and int(raw) > 0:
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

    def __init__(self, out: TextIO, total_bytes: int | None = None, follow: bool = False, color: bool = False):
        self.out = out
        self.total = total_bytes if total_bytes and not follow else None  # a followed file grows
        self.color = color
        self._start = time.monotonic()
        self._last = 0.0
        self._width = 0  # columns of the status now on screen (0: none drawn)
        self._held = False  # passed-through text left a line open: draw nothing until it is closed

    def __call__(self, scanner) -> None:  # scanner: logparse.scan.Scanner
        now = time.monotonic()
        if self._held or now - self._last < STATUS_EVERY_SECONDS:
            return
        self._last = now
        self.draw(self.text(scanner, now))

    def text(self, scanner, now: float | None = None) -> str:
        """The status, plain (no control characters)."""
        p = scanner.stages.progress(None, failed=False)
        read = sum(s.bytes for s in scanner.inputs)
        seconds = (now if now is not None else time.monotonic()) - self._start
        rate = f", {read / 1e6 / seconds:,.0f} MB/s" if seconds > 0 else ""
        if self.total:
            done = f"{read / 1e6:,.1f} of {self.total / 1e6:,.1f} MB ({min(read / self.total, 1.0):.0%})"
        else:
            done = f"{read / 1e6:,.1f} MB read"
        return (f"verl-logscan: {done}{rate}, stage {p.stage_reached or '-'}, step "
                f"{p.last_step if p.last_step is not None else '-'}, {len(scanner.collector.groups)} finding(s)")

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
