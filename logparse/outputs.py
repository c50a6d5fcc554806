"""Where a command's reports go and in which format, and how they are written.

Every command that writes a report (`scan`, `fleet`, `diff`) plans its outputs here: each `-o FILE`
takes its format from its extension unless `--format` is given (`.md`/`.markdown`, `.html`/`.htm`,
`.json`, `.csv` where the command has it; `.txt`, `.text`, `.log`, `.out` or no extension: the text
summary; any other extension, `r.pdf`, is refused with the known ones listed), `-o -` is standard
output, and a file is never one of the inputs. Every output is checked before the scan starts
(`check_writable`: its folder created when missing, as `fleet --reports` creates its folder; refused
at once when it cannot be written), so that a typo in `-o` is not found hours later, after a `--follow`.
The library never prints or exits: a problem is an OutputError with the sentence to show, or (writing)
an OSError whose `strerror` says why.

What a path names decides how it is written (a report, `--metrics-csv`, `fleet -o`):

* a regular file, or a name that does not exist yet: a temporary file beside it, renamed over it, so
  it is never half-written and a failed write (a full disk) leaves the old file as it was and no
  temporary file behind. The file keeps the mode of the one it replaces (else what the umask allows).
* a symbolic link: followed; the file it points to is replaced as above (created, for a dangling link)
  and the link stays a link. A link in a world-writable sticky folder (/tmp) that belongs neither to
  you nor to the folder's owner is refused: another user may have planted it (fs.protected_symlinks).
* a character device (`/dev/null`, a terminal) or a FIFO: opened for writing and written, never
  renamed over (as root, a rename turned `/dev/null` into a regular file). A FIFO waits for its reader
  as a shell's `>` does.
* one of this process's descriptors (`/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`):
  written through the descriptor, wherever it points (a pipe, a terminal, a file the shell opened).
* anything else (a folder, a socket, a block device): refused ("is a socket; give the name of a file
  to write"), never replaced.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import sys
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
# the extensions of a text summary (and a name without one: /dev/null, a FIFO, `report`)
TEXT_SUFFIXES = ("", ".txt", ".text", ".log", ".out")


class OutputError(Exception):
    """An output that cannot be planned or written; the message says why."""


@dataclass(frozen=True)
class Output:
    """A report to write: a path ('-' for stdout) and its format."""

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
    (one of `formats`, or a text name: TEXT_SUFFIXES). Raises OutputError."""
    if not outputs:
        return [Output("-", fmt or "text")]
    planned: list[Output] = []
    for path in outputs:
        named = format_of(path, formats)
        suffix = Path(path).suffix
        if fmt is None and named is None and path != "-" and suffix.lower() not in TEXT_SUFFIXES:
            raise OutputError(
                f"-o {path}: {suffix} is not a report format; name the file {known_suffixes(formats)}, "
                f"or give --format"
            )
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


def known_suffixes(formats: Sequence[str]) -> str:
    """`.md, .html, .json or .txt (text)`: the extensions a command's -o takes, for a usage error."""
    named = [s for s, f in FORMAT_OF_SUFFIX.items() if f in formats and s not in (".markdown", ".htm")]
    return ", ".join(named) + " or .txt (text)"


def check_writable(option: str, path: str) -> None:
    """Raise OutputError now, before any scan, when `path` (given as `option`) cannot be written: a
    folder, a socket, a file in a folder that cannot be written. A missing folder is created (as `fleet
    --reports DIR` creates DIR); a file that exists is left as it is until the report replaces it."""
    if path == "-":
        return
    try:
        target = resolve(path)
        if target.fd is not None:
            return
        if not target.replace:  # a device or FIFO: opened when written (a FIFO waits for its reader)
            if not os.access(target.path, os.W_OK):
                raise OSError(errno.EACCES, os.strerror(errno.EACCES))
            return
        folder = os.path.dirname(target.path) or "."
        os.makedirs(folder, exist_ok=True)
        name_max = os.pathconf(folder, "PC_NAME_MAX")
        if len(os.fsencode(os.path.basename(target.path))) > name_max:
            raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG))
        fd, probe = tempfile.mkstemp(prefix=".verl-logscan-", suffix=".probe", dir=folder)
        os.close(fd)
        _unlink(probe)
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise OutputError(f"cannot write {path}: {why} ({option})") from None


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
    """Write a report to `path` as what it names asks (see the module doc): never a half-written file.
    Raises OSError."""
    data = encoded(text)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)

    target = resolve(path)
    if target.replace:
        _replace(target.path, write)
    else:
        _stream(target, lambda fh: fh.write(data))


def write_file_atomically(path: str, write: Callable[[str], None]) -> None:
    """`write(name)` writes the output to the file `name`: a temporary file, renamed to `path`'s file,
    or (for a device, FIFO or descriptor) copied into it once complete. Raises OSError."""
    target = resolve(path)
    if target.replace:
        _replace(target.path, write)
        return
    fd, tmp = tempfile.mkstemp(prefix="verl-logscan-", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb") as src:
            _stream(target, lambda fh: shutil.copyfileobj(src, fh))
    finally:
        _unlink(tmp)


MAX_LINKS = 40  # symbolic links followed at most (the kernel's own limit)
NAME_IN_TEMP = 100  # characters of the target's name kept in its temporary file's name (NAME_MAX is 255)
KIND_REFUSED = {
    stat.S_IFDIR: (errno.EISDIR, "is a folder"),
    stat.S_IFSOCK: (errno.EINVAL, "is a socket"),
    stat.S_IFBLK: (errno.EINVAL, "is a block device"),
}


@dataclass(frozen=True)
class Target:
    """Where an output path leads: a file path to replace atomically (`replace`), a path to open and
    write (a device or FIFO), or a descriptor of this process (`fd`)."""

    path: str | None = None
    fd: int | None = None
    replace: bool = False


def resolve(path: str) -> Target:
    """Where writing `path` goes (see the module doc). Raises OSError when it must not be written (a
    folder, a socket, a block device, a loop of links) or cannot be looked at."""
    followed = _follow(path)
    if isinstance(followed, int):
        return Target(fd=followed)
    try:
        mode = os.stat(followed).st_mode
    except FileNotFoundError:
        return Target(path=followed, replace=True)  # a new file (also the target of a dangling link)
    if stat.S_ISREG(mode):
        return Target(path=followed, replace=True)
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return Target(path=followed)
    code, why = KIND_REFUSED.get(stat.S_IFMT(mode), (errno.EINVAL, "is not a regular file"))
    raise OSError(code, f"{why}; give the name of a file to write")


def _own_descriptor(folder: str, name: str) -> int | None:
    """N when `folder`/`name` is this process's descriptor N (the folder is /proc/<pid>/fd)."""
    if not name.isdecimal():
        return None
    return int(name) if folder in (f"/proc/{os.getpid()}/fd", "/proc/self/fd") else None


def _follow(path: str) -> str | int:
    """The path `path` leads to once its symbolic links are followed (in every component, the folders
    above included), or the descriptor number when it leads to one of this process's descriptors
    (`/dev/stdout` -> `/proc/self/fd/1` -> 1). A link that someone else planted in a shared sticky
    folder is refused (_refuse_planted_link)."""
    todo = os.path.abspath(path).split(os.sep)[::-1]  # the components still to walk, next last
    current = os.sep
    links = 0
    while todo:
        name = todo.pop()
        if name in ("", "."):
            continue
        if name == "..":  # (of a folder reached through links: its parent, as the kernel resolves it)
            current = os.path.dirname(current)
            continue
        fd = _own_descriptor(current, name)
        if fd is not None and not todo:
            return fd
        candidate = os.path.join(current, name)
        if not os.path.islink(candidate):
            current = candidate
            continue
        links += 1
        if links > MAX_LINKS:
            raise OSError(errno.ELOOP, "too many levels of symbolic links")
        _refuse_planted_link(candidate, current)
        target = os.readlink(candidate)
        if os.path.isabs(target):
            current = os.sep
        todo.extend(target.split(os.sep)[::-1])  # (a relative link is relative to its folder)
    return current


def _refuse_planted_link(link: str, folder: str) -> None:
    """Raise OSError when `link` lies in a world-writable sticky folder (/tmp, a shared scratch folder)
    and belongs neither to this process's user nor to the folder's owner: anyone may plant a link
    there, pointing at a file of yours for a report to replace. The kernel refuses to follow such a
    link (fs.protected_symlinks); resolving it here, and renaming onto its target, would sidestep that."""
    try:
        where = os.stat(folder)
        owner = os.lstat(link).st_uid
    except OSError:
        return  # (what cannot be looked at is refused, or not, by the write itself)
    shared = where.st_mode & stat.S_ISVTX and where.st_mode & stat.S_IWOTH
    if shared and owner not in (os.geteuid(), where.st_uid):
        raise OSError(
            errno.EACCES,
            f"is a symbolic link in the shared folder {folder} (world-writable, sticky) that belongs to "
            f"another user (uid {owner}), neither you nor the folder's owner; refusing to follow it, as "
            f"the kernel's fs.protected_symlinks does: remove it or write the report elsewhere",
        )


def _replace(real: str, write: Callable[[str], None]) -> None:
    """A temporary file beside `real`, written and renamed over it; removed when anything fails."""
    directory, name = os.path.split(real)
    fd, tmp = tempfile.mkstemp(prefix=f".{name[:NAME_IN_TEMP]}.", suffix=".tmp", dir=directory or ".")
    os.close(fd)
    try:
        try:
            mode = os.stat(real).st_mode & 0o777
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        write(tmp)
        os.replace(tmp, real)
    except BaseException:
        _unlink(tmp)
        raise


def _stream(target: Target, write: Callable) -> None:
    """Open the device, FIFO or descriptor of `target` and `write(file)` into it."""
    if target.fd is None:
        with open(target.path, "wb") as fh:
            write(fh)
        return
    if target.fd in (1, 2):  # what Python holds buffered for the descriptor goes first
        stream = sys.stdout if target.fd == 1 else sys.stderr
        if stream is not None:
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    try:
        fh = os.fdopen(os.dup(target.fd), "wb")
    except OSError as exc:
        if exc.errno == errno.EBADF:
            raise OSError(errno.EBADF, "that descriptor is not open") from None
        raise
    with fh:
        write(fh)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
