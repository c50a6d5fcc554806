"""Exception lines that several processes wrote into one stream at the same moment.

CPython prints the last line of an uncaught exception in separate writes: the type, `: `, the
message, then the newline; and the caret line under a frame one character at a time (`strace -e
write` shows it, buffered or not). Ranks that share a stderr (torchrun without `--tee` or
`--redirects`, a shell's `&`, mpirun) and fail on the same batch at the same moment interleave those
writes. Seen with 4 processes raising the same KeyError:

    KeyErrorKeyError: : 'input_ids_j''input_ids_j'
    KeyError: KeyError'input_ids_j':
    KeyError: 'input_ids_j'KeyError
    ~~~^^^^KeyError^^: ^'input_ids_j'^
         KeyError : ~'input_ids_j'^

Read as they stand, the first names a `KeyErrorKeyError` and no entry matches any of them.
`unweave` gives such a line back as one process wrote it (`KeyError: 'input_ids_j'`); patterns run on
that, while the report's evidence keeps the line as the log has it. It changes a line only on the
evidence of interleaving: caret-line characters before the type or between it and its colon, the
type written twice or more in a row, the type again followed by its separator or run into the end of
the line, or a separator left dangling at the end.
"""

from __future__ import annotations

import re

MAX_TYPE_CHARS = 200  # the type pieces before the first `: ` (a longer head is no exception type)
# the endings of exception class names (logparse.observe.tracebacks.EXC_NAME_RE is made of them too)
NAME_ENDINGS = (
    "Error",
    "Exception",
    "Interrupt",
    "Exit",
    "Warning",
    "Failure",
    "Fault",
    "Iteration",
    "Timeout",
)
_NAME = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*")
SEP = ": "
NOISE = " ^~"  # what a caret line is written as, a character at a time: its indentation, `~` and `^`
# the type and message with another process's caret-line characters between them (each piece is one
# write, so nothing gets inside a piece)
_NOISY = re.compile(
    r"(?P<lead>[ ~^]*)(?P<type>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?P<gap>[ ~^]*): (?P<msg>.*)", re.DOTALL
)


def _period(text: str) -> int:
    """The shortest p with text == text[:p] * (len(text) // p) (len(text) when there is none)."""
    p = (text + text).find(text, 1)
    return p if 0 < p < len(text) and len(text) % p == 0 else len(text)


def unweave(message: str) -> str | None:
    """`message` as one process wrote it (`Type: message`) when it reads as exception lines that
    several processes interleaved; None when it does not (or is already one). The normaliser asks
    it only of a line that starts with a caret line's character, or whose text before its first `: `
    ends like an exception type and whose first characters come again later in the line."""
    carets = message[:1] in NOISE
    if carets:  # another process's caret line may have run into this one
        message = _without_carets(message)
        if message is None:
            return None
    i = message.find(SEP)
    if i <= 0 or i > MAX_TYPE_CHARS or not message.endswith(NAME_ENDINGS, 0, i):
        return None
    if not carets and message.find(message[:4], 1) < 0:
        return None  # (the common case: the type's first characters once, so no type is written twice)
    head = message[:i]
    etype = head[: _period(head)]  # the type, written k >= 1 times in a row
    rest = message[i:]
    if not (carets or len(etype) < i) and not _type_again(etype, rest):
        return None
    if not etype.endswith(NAME_ENDINGS) or not _NAME.fullmatch(etype):
        return None
    rest = _message_of(rest.replace(etype, ""))
    fixed = f"{etype}: {rest}" if rest else etype
    return fixed if fixed != message or carets else None


def _without_carets(message: str) -> str | None:
    """A line that starts with another process's caret line: the exception line after it, or None."""
    m = _NOISY.fullmatch(message)
    if m is None:
        return None
    lead, gap = m.group("lead"), m.group("gap")
    # (an indented `Type: message` without them is a quoted or nested exception line: left as it is)
    if not gap and "^" not in lead and "~" not in lead:
        return None
    return f"{m.group('type')}{SEP}{m.group('msg').strip(NOISE)}"


def _type_again(etype: str, rest: str) -> bool:
    """Is the type written again after the first `: `, as a piece of its own?"""
    if rest.endswith(SEP):
        return etype in rest
    if rest.endswith(etype):  # run into the message (`'key'KeyError`; after a space it is words)
        before = rest[: -len(etype)]
        return not (before[-1:].isspace() and not before.endswith(SEP))
    return etype + SEP in rest


def _message_of(rest: str) -> str:
    """The message among the other processes' pieces (the types gone): their separators dropped, their
    copies of the message, run together or with another process's separator between, made one."""
    start, end = 0, len(rest)  # (by index: a slice a step would make a line of 500,000 `: ` quadratic)
    while rest.startswith(SEP, start):
        start += len(SEP)
    while end - start >= len(SEP) and rest.endswith(SEP, start, end):
        end -= len(SEP)
    rest = rest[start:end].rstrip(":")
    if not rest:
        return rest
    copies = {part[: _period(part)] for part in rest.split(SEP) if part}
    if len(copies) == 1:  # (a message without `: ` of its own)
        return copies.pop()
    rest = rest[: _period(rest)]
    joined = rest + SEP
    p = _period(joined)
    if p < len(joined) and joined[:p].endswith(SEP):
        rest = joined[: p - len(SEP)]
    return rest
