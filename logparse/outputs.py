"""Write a report (or the metrics CSV) where the user asked, without destroying what is there.

What a path names decides how it is written:

* a regular file, or a name that does not exist yet: a temporary file beside it, renamed over it, so
  a failed write (a full disk) leaves the old file as it was and no temporary file behind. The file
  keeps the mode of the one it replaces (else what the umask allows).
* a symbolic link: followed; the file it points to is replaced as above (created, for a dangling link)
  and the link stays a link.
* a character device (`/dev/null`, a terminal) or a FIFO: opened for writing and written, never
  renamed over (as root, a rename would turn `/dev/null` into a regular file). A FIFO waits for its
  reader as a shell's `>` does.
* one of this process's descriptors (`/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`):
  written through the descriptor, wherever it points (a pipe, a terminal, a file the shell opened).
* anything else (a folder, a socket, a block device): refused, never replaced.

The library never prints or exits: every refusal or failure is an OutputError whose text the CLI
prints (`cannot write PATH: why`).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

MAX_LINKS = 40  # symbolic links followed at most (the kernel's own limit)
NAME_IN_TEMP = 100  # characters of the target's name kept in its temporary file's name (NAME_MAX is 255)


class OutputError(Exception):
    """An output cannot be written: `str()` is the one-line message for the user."""

    def __init__(self, path: str, why: str):
        super().__init__(f"cannot write {path}: {why}")
        self.path = path
        self.why = why


@dataclass(frozen=True)
class Target:
    """Where an output path leads: a file path to replace atomically (`replace`), a path to open and
    write (`stream`: a device or FIFO), or a descriptor of this process (`fd`)."""

    path: str | None = None
    fd: int | None = None
    replace: bool = False


def _own_descriptor(path: str) -> int | None:
    """N when `path` is this process's descriptor N (its folder resolves to /proc/<pid>/fd)."""
    parent, name = os.path.split(path)
    if not name.isdigit():
        return None
    real = os.path.realpath(parent)
    return int(name) if real in (f"/proc/{os.getpid()}/fd", "/proc/self/fd") else None


def _follow(path: str) -> str | int:
    """The path `path` leads to once its symbolic links are followed, or the descriptor number when
    it leads to one of this process's descriptors (`/dev/stdout` -> `/proc/self/fd/1` -> 1).
    Raises OutputError for a loop."""
    current = os.path.abspath(path)
    for _ in range(MAX_LINKS):
        fd = _own_descriptor(current)
        if fd is not None:
            return fd
        parent, name = os.path.split(current)
        current = os.path.join(os.path.realpath(parent), name)
        if not os.path.islink(current):
            return current
        # a relative link is relative to its folder; `..` in it is resolved with the folders above
        current = os.path.join(os.path.dirname(current), os.readlink(current))
    raise OutputError(path, "too many levels of symbolic links")


KIND_REFUSED = {
    stat.S_IFDIR: "is a folder",
    stat.S_IFSOCK: "is a socket",
    stat.S_IFBLK: "is a block device",
}


def resolve(path: str) -> Target:
    """Where writing `path` goes (see the module doc); OutputError when it must not be written."""
    try:
        followed = _follow(path)
    except OSError as exc:
        raise OutputError(path, exc.strerror or str(exc)) from None
    if isinstance(followed, int):
        return Target(fd=followed)
    try:
        mode = os.stat(followed).st_mode
    except FileNotFoundError:
        return Target(path=followed, replace=True)  # a new file (also the target of a dangling link)
    except OSError as exc:
        raise OutputError(path, exc.strerror or str(exc)) from None
    if stat.S_ISREG(mode):
        return Target(path=followed, replace=True)
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return Target(path=followed)
    why = KIND_REFUSED.get(stat.S_IFMT(mode), "is not a regular file")
    raise OutputError(path, f"{why}; give the name of a file to write")


def write_bytes(path: str, data: bytes) -> None:
    """Write `data` to `path` as its kind asks (see the module doc)."""

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)

    target = resolve(path)
    if target.replace:
        _replace(path, target.path, write)
    else:
        _stream(path, target, lambda fh: fh.write(data))


def write_file(path: str, write: Callable[[str], None]) -> None:
    """`write(name)` writes the output to the file `name`: a temporary file, renamed to `path`'s file,
    or (for a device, FIFO or descriptor) copied into it once complete."""
    target = resolve(path)
    if target.replace:
        _replace(path, target.path, write)
        return
    fd, tmp = tempfile.mkstemp(prefix="verl-logscan-", suffix=".tmp")
    os.close(fd)
    try:
        try:
            write(tmp)
        except OSError as exc:
            raise OutputError(path, exc.strerror or str(exc)) from None
        with open(tmp, "rb") as src:
            _stream(path, target, lambda fh: shutil.copyfileobj(src, fh))
    finally:
        _unlink(tmp)


def _replace(path: str, real: str, write: Callable[[str], None]) -> None:
    """A temporary file beside `real`, written and renamed over it."""
    directory, name = os.path.split(real)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name[:NAME_IN_TEMP]}.", suffix=".tmp", dir=directory or ".")
    except OSError as exc:
        raise OutputError(path, exc.strerror or str(exc)) from None
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
    except OSError as exc:
        _unlink(tmp)
        raise OutputError(path, exc.strerror or str(exc)) from None
    except BaseException:
        _unlink(tmp)
        raise


def _stream(path: str, target: Target, write: Callable) -> None:
    """Open the device, FIFO or descriptor of `target` and `write(file)` into it."""
    try:
        if target.fd is not None:
            if target.fd in (1, 2):  # what Python holds buffered for it goes first
                stream = sys.stdout if target.fd == 1 else sys.stderr
                if stream is not None:
                    try:
                        stream.flush()
                    except (OSError, ValueError):
                        pass
            fh = os.fdopen(os.dup(target.fd), "wb")
        else:
            fh = open(target.path, "wb")  # noqa: SIM115 - closed below
        with fh:
            write(fh)
    except OSError as exc:
        if exc.errno == errno.EBADF:
            raise OutputError(path, "that descriptor is not open") from None
        raise OutputError(path, exc.strerror or str(exc)) from None


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
