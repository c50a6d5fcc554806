"""Live use: follow a growing file, pass the input through (tee), raise alerts as fatal lines arrive.

* `FollowFile` reads a file like `tail -F`: at its end it waits and reads what is appended; when the
  file is truncated it reads from the start again, and when it is replaced (log rotation: a new inode
  at the path) it opens the new file. Ctrl-C ends following and the scan finishes normally. A path
  deleted is followed in the file still open (its writer may go on writing to it); a path replaced by
  something that is no file (a folder), or that cannot be opened, ends following with a note: what was
  read is kept and reported.
* `TeeStream` writes every byte it reads to another stream, unchanged, as soon as it is read. When the
  reader of that stream goes away (a broken pipe: `... | head -1`), it stops passing bytes on and keeps
  reading, so the scan and its report are not lost; a note says so.
* `Alerts` is told about each finding and prints one line per fatal cause, once per catalog entry;
  `StatusLine` redraws a one-line status (stage, step, findings so far) on a terminal, cut to its
  width, and is wiped before any other output reaches that terminal.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
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
        self.read_bytes = 0
        self._notes: list[str] = []
        self._missing_at: int | None = None  # bytes read when the path was found gone (at the last look)

    def stop(self) -> None:
        self.stopped = True

    def _check_replaced(self) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            # between a rotation's rename and the new file's creation, or deleted: the open file is
            # still read (its writer may still write to it)
            if self._missing_at is None:
                self._missing_at = self.read_bytes
            return
        except OSError as exc:
            self._give_up(f"cannot be looked at any more ({exc.strerror or exc})")
            return
        self._missing_at = None
        pos = self._fh.tell()
        if st.st_ino != self._ino:
            if stat.S_ISDIR(st.st_mode):
                self._give_up("was replaced by a folder")
                return
            try:
                fh = open(self.path, "rb")  # noqa: SIM115
            except OSError as exc:
                self._give_up(f"was replaced by something that cannot be read ({exc.strerror or exc})")
                return
            self._fh.close()
            self._fh = fh
            self._ino = os.fstat(self._fh.fileno()).st_ino
            self.rotations += 1
        elif st.st_size < pos:
            self._fh.seek(0)
            self.truncations += 1

    @property
    def notes(self) -> list[str]:
        """What a report should say about following: why it stopped, or that the path is gone."""
        out = list(self._notes)
        if self._missing_at is not None:  # still gone at the end: no rotation, a deletion
            out.append(
                f"{self.path}: deleted while followed (after {self._missing_at} bytes); the file still "
                f"open was read on"
            )
        return out

    def _give_up(self, why: str) -> None:
        self._notes.append(
            f"{self.path}: {why} while followed; stopped following after {self.read_bytes} bytes "
            f"(the report covers what was read)"
        )
        self.stopped = True

    def read1(self, n: int = -1) -> bytes:
        while True:
            data = self._fh.read1(n) if n > 0 else self._fh.read()
            if data:
                self.read_bytes += len(data)
                return data
            if self.stopped:
                return b""
            try:
                self._check_replaced()
                if self.stopped:
                    return b""
                data = self._fh.read1(n) if n > 0 else self._fh.read()
                if data:
                    self.read_bytes += len(data)
                    return data
                time.sleep(self.poll)
            except KeyboardInterrupt:
                self.stopped = True
                return b""

    read = read1

    def close(self) -> None:
        self._fh.close()


class TeeStream:
    """Reads from `inner`, writing each chunk to `out` before handing it on; once `out` is a broken pipe,
    only reads (and calls `on_broken` once, e.g. to point the descriptor at /dev/null). When `out` is
    the terminal that also shows the status line, the status line is wiped before each chunk and held
    while the passed-through text leaves a line open, so the two never run into each other on screen."""

    def __init__(
        self,
        inner: BinaryIO,
        out: BinaryIO,
        on_broken: Callable[[], None] | None = None,
        status: StatusLine | None = None,
    ):
        self.inner = inner
        self.out: BinaryIO | None = out
        self.on_broken = on_broken
        self.status = status
        self.passed = 0  # bytes passed through
        self.notes: list[str] = []
        self._read = getattr(inner, "read1", None) or inner.read

    def read1(self, n: int = -1) -> bytes:
        data = self._read(n)
        if data and self.out is not None:
            try:
                if self.status is not None:
                    self.status.before_output()
                self.out.write(data)
                self.out.flush()
                self.passed += len(data)
                if self.status is not None:
                    self.status.after_output(line_open=not data.endswith(b"\n"))
            except OSError as exc:  # BrokenPipeError (EPIPE), or a closed or full output
                self.out = None
                why = (
                    "its reader went away" if isinstance(exc, BrokenPipeError) else (exc.strerror or str(exc))
                )
                self.notes.append(
                    f"--tee stopped passing the log through after {self.passed} bytes ({why}); "
                    f"the log was still read to its end"
                )
                if self.on_broken is not None:
                    self.on_broken()
        return data

    read = read1

    def close(self) -> None:
        if hasattr(self.inner, "close"):
            self.inner.close()


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
        self, out: TextIO, clean: Callable[[str, bool], str] = _plain, status: StatusLine | None = None
    ):
        self.out = out
        self.clean = clean
        self.status = status
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
        self.out.write(
            f"verl-logscan: ALERT {hit.category} ({entry.id}) at {place}: {shown[:ALERT_MESSAGE_CHARS]}\n"
        )
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

    def __init__(
        self, out: TextIO, total_bytes: int | None = None, follow: bool = False, color: bool = False
    ):
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
        return (
            f"verl-logscan: {done}{rate}, stage {p.stage_reached or '-'}, step "
            f"{p.last_step if p.last_step is not None else '-'}, {len(scanner.collector.groups)} finding(s)"
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
