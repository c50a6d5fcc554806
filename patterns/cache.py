"""A start-up cache of what is the same from one run to the next: the built-in knowledge parsed
(catalog, stage markers, fallback and inference rules) and the prefilter's compiled Hyperscan
database. Parsing the YAML and compiling the database took about 60 ms of every run.

Where: `$VERL_LOGSCAN_CACHE_DIR`, else `$XDG_CACHE_HOME/verl-logscan`, else `~/.cache/verl-logscan`.
`VERL_LOGSCAN_CACHE=off` turns it off (nothing is read or written); deleting the folder clears it.

Why it can be trusted:
* A file is found by a SHA-256 of everything it was made from (the YAML, the source of the modules
  whose objects it holds, Python's version, the format of this file): the key names the file and is
  stored in it again, so a file made from other contents or another version of the code is never read.
* It is written to a temporary file in the same folder and renamed: a reader sees a whole file or
  none, and runs that race write the same bytes.
* The payload carries its own SHA-256 (a damaged or cut file is refused), and is read back with an
  unpickler that knows only the classes the caller names (no other global can be loaded, so a planted
  file cannot run code), then checked for the expected shape by the caller. Anything wrong: the file is
  ignored and rebuilt.
* A folder that cannot be made or written (read-only, no home): no cache, no error.
At most MAX_FILES files are kept; the oldest go first.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import pickle
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

CACHE_ENV = "VERL_LOGSCAN_CACHE"  # "off" (or 0, no, none): no cache
CACHE_DIR_ENV = "VERL_LOGSCAN_CACHE_DIR"
MAGIC = b"VLSC\x01"  # the file format; a change of it is a change of every key too
MAX_FILES = 32
MAX_BYTES = 64 << 20  # a cache file larger than this is not read


def cache_dir() -> Path | None:
    """The cache folder, or None when the cache is off."""
    if os.environ.get(CACHE_ENV, "").strip().lower() in ("off", "0", "no", "none", "false"):
        return None
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(base):  # (the XDG spec: a relative value is to be ignored)
        home = os.path.expanduser("~")
        if home == "~":
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "verl-logscan"


def key_of(kind: str, parts: Iterable[bytes]) -> str:
    """SHA-256 (hex) of what a cached object is made from, the file format and Python's version."""
    h = hashlib.sha256(MAGIC + kind.encode() + b"\0" + repr(sys.version_info[:2]).encode())
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def source_of(*modules: str) -> list[bytes]:
    """The source bytes of modules (by name), for a key: a change of the code is a change of the key. A
    module not imported yet (one imported only to build the value) is found where an import would find it."""
    out = []
    for name in modules:
        path = getattr(sys.modules.get(name), "__file__", None)
        if path is None:
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                spec = None
            path = spec.origin if spec is not None and spec.has_location else None
        out.append(Path(path).read_bytes() if path else name.encode())
    return out


def cached(
    kind: str,
    parts: Iterable[bytes],
    build: Callable[[], T],
    allowed: Iterable[type],
    check: Callable[[Any], bool],
    keep: Callable[[T], bool] | None = None,
) -> T:
    """`build()`, or what an earlier run cached of it for the same `parts`. `allowed`: the classes
    the object may hold (beyond the builtin containers, strings and numbers); `check(obj)`: does an
    object read back have the expected shape? `keep(value)`: is a value just built worth caching
    (not one that comes with problems to report)?"""
    folder = cache_dir()
    if folder is None:
        return build()
    key = key_of(kind, parts)
    path = folder / f"{kind}-{key[:40]}.bin"
    found = _read(path, key, allowed, check)
    if found is not _MISSING:
        return found
    value = build()
    if keep is None or keep(value):
        _write(folder, path, key, value)
    return value


_MISSING = object()


class _Unpickler(pickle.Unpickler):
    """Loads only the named classes: no other global (function, module attribute) can be reached."""

    def __init__(self, data: bytes, allowed: dict[tuple[str, str], type]):
        super().__init__(io.BytesIO(data))
        self._allowed = allowed

    def find_class(self, module: str, name: str) -> Any:
        found = self._allowed.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a cache file")
        return found


def _read(path: Path, key: str, allowed: Iterable[type], check: Callable[[Any], bool]) -> Any:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError:
        return _MISSING
    head = len(MAGIC) + 64
    if (
        len(data) > MAX_BYTES
        or len(data) < head + 32
        or not data.startswith(MAGIC)
        or data[len(MAGIC) : head] != key.encode()
    ):
        return _MISSING
    digest, payload = data[head : head + 32], data[head + 32 :]
    if hashlib.sha256(payload).digest() != digest:
        return _MISSING
    classes = {(c.__module__, c.__qualname__): c for c in allowed}
    try:
        value = _Unpickler(payload, classes).load()
        return value if check(value) else _MISSING
    except Exception:
        return _MISSING


def _write(folder: Path, path: Path, key: str, value: Any) -> None:
    try:
        payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return
    data = MAGIC + key.encode() + hashlib.sha256(payload).digest() + payload
    if len(data) > MAX_BYTES:
        return
    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        tmp = None
        _prune(folder)
    except OSError:  # a read-only or full folder: no cache
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _prune(folder: Path) -> None:
    """Keep the MAX_FILES most recent cache files."""
    files = []
    for entry in os.scandir(folder):
        if entry.name.endswith(".bin") and entry.is_file():
            try:
                files.append((entry.stat().st_mtime, entry.path))
            except OSError:
                continue
    files.sort(reverse=True)
    for _, stale in files[MAX_FILES:]:
        try:
            os.unlink(stale)
        except OSError:
            pass
