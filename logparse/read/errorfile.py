"""torchrun's `@record` error file (`error.json`): its py_callstack (or message) becomes the lines
scanned, and line numbers count lines of the callstack. Anything else is scanned as plain text."""

from __future__ import annotations

import json
from collections.abc import Iterator

from logparse.read.sources import InputStats, Line, clean_text
from patterns.schema import LazyRe

MAX_ERROR_JSON_BYTES = 16 << 20
MAX_ERROR_JSON_DEPTH = 64  # torchrun writes 3 levels; deeper is not its error file
# (compiled on first use: only an error file's text is read with it, and most scans have none)
JSON_TOKEN_RE = LazyRe(r'"(?:[^"\\]|\\.)*+"|[\[\]{}]', engine="regex")


def error_file_lines(stats: InputStats, lines: Iterator[Line]) -> Iterator[Line]:
    """The lines to scan of an error file read as `lines`: its callstack's, else the file's own."""
    buffered = []
    size = 0
    for line in lines:
        buffered.append(line)
        size += len(line.text)
        if size > MAX_ERROR_JSON_BYTES:
            yield from buffered
            yield from lines
            return
    text = _callstack(stats, "\n".join(line.text for line in buffered))
    if text is None:
        yield from buffered
        return
    stats.notes.append(f"{stats.path}: read as a torchrun error file (its py_callstack)")
    for i, t in enumerate(text.splitlines(), 1):
        yield Line(stats.path, i, clean_text(t))


def _callstack(stats: InputStats, text: str) -> str | None:
    """The py_callstack (or message) of an error file's text, or None when it is not one."""
    try:
        if json_depth(text) > MAX_ERROR_JSON_DEPTH:
            # (json.loads recurses once a level: a hostile file of 1,000 levels raises RecursionError)
            stats.notes.append(
                f"{stats.path}: JSON nested more than {MAX_ERROR_JSON_DEPTH} levels deep; read as plain text"
            )
            return None
        message = json.loads(text)["message"]
        if isinstance(message, dict):
            text = message.get("extraInfo", {}).get("py_callstack") or message.get("message", "")
        else:
            text = str(message)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    if not isinstance(text, str) or not text.strip():
        return None
    return text


def json_depth(text: str) -> int:
    """How deep the arrays and objects of JSON `text` nest (brackets inside strings not counted),
    without parsing it."""
    depth = deepest = 0
    for m in JSON_TOKEN_RE.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest
