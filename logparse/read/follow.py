"""Live inputs: follow a growing file, pass the input through (tee).

* `FollowFile` reads a file like `tail -F`: at its end it waits and reads what is appended; when the
  file is truncated it reads from the start again, and when it is replaced (log rotation: a new inode
  at the path) it opens the new file. Ctrl-C ends following and the scan finishes normally. A path
  deleted is followed in the file still open (its writer may go on writing to it); a path replaced by
  something that is no file (a folder), or that cannot be opened, ends following with a note: what was
  read is kept and reported.
* `QuietStream` tells a listener while its input (a pipe) is silent, so a status can show what was
  read so far instead of the state at the start of the last burst.
* `TeeStream` writes every byte it reads to another stream, unchanged, as soon as it is read. When the
  reader of that stream goes away (a broken pipe: `... | head -1`), it stops passing bytes on and keeps
  reading, so the scan and its report are not lost; a note says so.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from typing import BinaryIO, Protocol


class Screen(Protocol):
    """A terminal line that passed-through text must not run into (logparse.console.StatusLine)."""

    def before_output(self) -> None: ...

    def after_output(self, line_open: bool) -> None: ...


POLL_SECONDS = 0.2


class FollowFile:
    """A binary stream over `path` that never ends by itself (until stop() or Ctrl-C)."""

    def __init__(self, path: str, poll: float = POLL_SECONDS, on_wait: Callable[[], None] | None = None):
        self.path = path
        self.poll = poll
        self.on_wait = on_wait  # told at each look while at the end of the file (the status line)
        self._fh = open(path, "rb")  # noqa: SIM115 - closed in close()
        self._ino = os.fstat(self._fh.fileno()).st_ino
        self.stopped = False
        self.rotations = 0
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
                if self.on_wait is not None:
                    self.on_wait()
                time.sleep(self.poll)
            except KeyboardInterrupt:
                self.stopped = True
                return b""

    read = read1

    def close(self) -> None:
        self._fh.close()


class QuietStream:
    """Reads from `inner` (a pipe: stdin) as it is, but tells `on_wait` every `poll` seconds while no
    byte arrives, so that what waits on the input (the status line) can say what was read so far."""

    def __init__(self, inner: BinaryIO, on_wait: Callable[[], None], poll: float = POLL_SECONDS):
        self.inner = inner
        self.on_wait = on_wait
        self.poll = poll
        self._read = getattr(inner, "read1", None) or inner.read
        try:
            self._fd: int | None = inner.fileno()
        except (AttributeError, OSError, ValueError):
            self._fd = None

    def read1(self, n: int = -1) -> bytes:
        if self._fd is not None:
            import select

            try:
                while not select.select([self._fd], [], [], self.poll)[0]:
                    self.on_wait()
            except (OSError, ValueError):  # not a descriptor select takes: read as it is
                self._fd = None
        return self._read(n)

    read = read1

    def close(self) -> None:
        if hasattr(self.inner, "close"):
            self.inner.close()


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
        status: Screen | None = None,
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
