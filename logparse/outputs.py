"""Where a command's reports go and in which format, and how they are written.

Every command that writes a report (`scan`, `fleet`) plans its outputs here: each `-o FILE` takes its
format from its extension unless `--format` is given (`.md`/`.markdown`, `.html`/`.htm`, `.json`,
`.csv` where the command has it; any other name gets the text summary), `-o -` is standard output,
and a file is never one of the inputs. A report file is written to a temporary file beside it and
renamed, so it is never half-written. The library never prints or exits: a problem is an OutputError
with the sentence to show.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

# the format an -o FILE's extension names; .txt is plain text, but names no format strongly enough to
# contradict --format (a Markdown report saved as notes.txt is fine)
FORMAT_OF_SUFFIX = {
    ".md": "md",
    ".markdown": "md",
    ".html": "html",
    ".htm": "html",
    ".json": "json",
    ".csv": "csv",
}


class OutputError(Exception):
    """An output that cannot be planned or written; the message says why."""


@dataclass(frozen=True)
class Output:
    path: str  # '-' for stdout
    fmt: str

    @property
    def to_stdout(self) -> bool:
        return self.path == "-"


def format_of(path: str, formats: Sequence[str]) -> str | None:
    """The format the extension of `path` names, among `formats` (None: it names none of them)."""
    if path == "-":
        return None
    named = FORMAT_OF_SUFFIX.get(Path(path).suffix.lower())
    return named if named in formats else None


def plan_outputs(outputs: Sequence[str], fmt: str | None, formats: Sequence[str]) -> list[Output]:
    """Where each report goes and in which format: --format when given, else each -o FILE's extension
    (one of `formats`; anything else is the text summary). Raises OutputError."""
    if not outputs:
        return [Output("-", fmt or "text")]
    planned: list[Output] = []
    for path in outputs:
        named = format_of(path, formats)
        if fmt is not None and named is not None and named != fmt:
            raise OutputError(
                f"--format {fmt} contradicts -o {path} (a .{Path(path).suffix[1:]} name: "
                f"{named}); drop --format to let each file's extension decide"
            )
        planned.append(Output(path, fmt or named or "text"))
    if sum(o.to_stdout for o in planned) > 1:
        raise OutputError("-o - (standard output) is given more than once")
    seen: dict[str, str] = {}
    for o in planned:
        if o.to_stdout:
            continue
        key = os.path.abspath(o.path)
        if key in seen or any(same_file(o.path, other) for other in seen.values()):
            raise OutputError(f"-o {o.path} is given more than once")
        seen[key] = o.path
    return planned


def refuse_inputs(targets: Iterable[tuple[str, str | None]], inputs: Sequence[str]) -> None:
    """Raise OutputError when a target (option, path) is one of the input files."""
    for option, target in targets:
        if target and any(f != "-" and same_file(f, target) for f in inputs):
            raise OutputError(f"{option} {target} is one of the inputs; refusing to overwrite it")


def same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def same_path(a: str, b: str) -> bool:
    """The same file, or (neither existing yet) the same path."""
    return same_file(a, b) or os.path.abspath(a) == os.path.abspath(b)


def encoded(text: str) -> bytes:
    """UTF-8 bytes of a report. A lone surrogate (from JSON text inside a log) becomes '?' instead of an
    encoding error; bytes, not str, so a non-UTF-8 terminal locale cannot fail the write either."""
    return text.encode("utf-8", "replace")


def write_atomically(path: str, text: str) -> None:
    """Write to a temporary file beside `path`, then rename: never a half-written report."""
    data = encoded(text)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)

    write_file_atomically(path, write)


def write_file_atomically(path: str, write: Callable[[str], None]) -> None:
    """`write(tmp)` writes a temporary file beside `path`, which is then renamed to it: a failed write
    (a full disk) leaves the old file as it was and no temporary file behind. The file gets the mode of
    the one it replaces, else what the umask allows (not mkstemp's 0600)."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        try:
            mode = os.stat(target).st_mode & 0o777
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        write(tmp)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
