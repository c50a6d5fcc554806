"""The host and user names a log gives anywhere, for `--redact-hosts`.

A report is redacted after it is built (logparse.redact), from its own strings; but a host or user is
often named once, early (`MASTER_ADDR=gpu-node-17`, `USER=jdoe`, a shell prompt), and the error that
ends up in the report names it again without saying it is a host. So with host redaction on, the scan
adds the contexts that name one (logparse.redact.NAME_KEYWORDS) to its prefilter, and every line read
that holds a naming context (NAME_HINTS: those and the contexts common in bulk, such as NCCL's
`host:pid:tid` prefix, which are learnt from the lines read anyway) is learnt from here, into one Names
book that the report's redactor and the live ALERT lines adopt. What counts as a name, and the
bounds, are the redactor's (logparse.redact.Names).
"""

from __future__ import annotations

import re

from logparse.read.normalize import Record
from logparse.redact import NAME_HINTS, NAME_KEYWORDS, Names

MAX_LINE_CHARS = 4096  # of a line looked at (a name context is near a line's start; 1 MB lines exist)
_CONTEXT = re.compile("|".join(re.escape(k) for k in NAME_HINTS))


class NameSightings:
    """Learns host and user names from each record whose line holds a naming context."""

    keywords = NAME_KEYWORDS

    def __init__(self) -> None:
        self.names = Names()

    def feed(self, rec: Record) -> None:
        text = rec.line.text
        if len(text) > MAX_LINE_CHARS:
            text = text[:MAX_LINE_CHARS]
        if _CONTEXT.search(text):
            self.names.learn(text, strict=True)
