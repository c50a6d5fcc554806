"""Error lines outside a traceback that are still collecting their continuation lines.

The lines right after an error line that no traceback holds (a catalog hit, a bare failure line)
belong to its message until a blank line, a new log record (a level or a timestamp), a traceback, or
MAX_AFTER_LINES; a message still open MAX_MESSAGE_GAP lines of its input after its error line is
closed. At most one message is open per stream (one process's output).
"""

from __future__ import annotations

from typing import Protocol

from logparse.observe.tracebacks import LineRole
from logparse.read.normalize import Record

MAX_AFTER_LINES = 8
MAX_MESSAGE_GAP = 50  # a message still open after this many lines of its input is closed


class Message(Protocol):
    """What collects continuation lines: a catalog Hit or a BareLine."""

    record: Record
    after: list[Record]


class OpenMessages:
    """stream -> the error line of that stream still collecting continuation lines."""

    def __init__(self) -> None:
        self._open: dict[tuple, Message] = {}
        # (the analysis reads this table directly for its per-record checks: a method call a line
        # cost more than the check)
        self.streams = self._open

    def __bool__(self) -> bool:
        return bool(self._open)

    def __contains__(self, stream: tuple) -> bool:
        return stream in self._open

    def open(self, stream: tuple, message: Message) -> None:
        """`message` collects its stream's next lines, unless one is open there already."""
        if stream not in self._open:
            self._open[stream] = message

    def feed(self, rec: Record, role: LineRole) -> None:
        """A line of a stream with an open message: its continuation, or the end of it."""
        message = self._open[rec.stream]
        text = rec.message.strip()
        if (
            role != LineRole.NONE
            or not text
            or rec.origin.level is not None
            or rec.origin.time is not None
            or len(message.after) >= MAX_AFTER_LINES
        ):
            del self._open[rec.stream]
            return
        message.after.append(rec)

    def open_in(self, source: str, line_number: int) -> bool:
        """Is a message of `source` open at line `line_number`? Those open for more than
        MAX_MESSAGE_GAP lines are closed on the way. (No copy of the dict per line: 64 ranks keep 64
        messages open on every line of a cascade.)"""
        if not self._open:
            return False
        expired = []
        found = False
        for stream, message in self._open.items():
            if stream[0] == source:
                if line_number - message.record.line.number > MAX_MESSAGE_GAP:
                    expired.append(stream)
                else:
                    found = True
                    break
        for stream in expired:
            del self._open[stream]
        return found

    def clear(self) -> None:
        self._open.clear()
