"""Who wrote a file, from where it sits in a known log-folder layout.

* torchrun `--log-dir` (`--redirects`/`--tee`): `<run_id>_<random>/attempt_<N>/<local_rank>/stdout.log`,
  `stderr.log` and the `@record` `error.json`;
* a Ray session folder (`/tmp/ray/session_*/logs/`): `worker-<worker_id>-<job_id>-<pid>.out|.err`,
  `raylet.out`, `python-core-worker-<worker_id>_<pid>.log`, `gcs_server.out`.

What a line's own prefixes say always wins over what its file's place says.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import PurePath

import regex

from patterns.formats import formats
from patterns.numbers import log_int
from patterns.schema import LazyRe

# The layouts' wordings are patterns/formats.yaml's (`layouts`), compiled here once.
_F = formats()
TORCHRUN_FILE = regex.compile(_F.regex("torchrun-log-file"))
TORCHRUN_ERROR = regex.compile(_F.regex("torchrun-error-file"))
RAY_WORKER = regex.compile(_F.regex("ray-worker-file"))
RAY_CORE_WORKER = regex.compile(_F.regex("ray-core-worker-file"))
RAY_DAEMON = regex.compile(_F.regex("ray-daemon-file"))
ERROR_FILE = _F.literal("error-file-name")


@dataclass(frozen=True)
class FileOrigin:
    """What the file's place in a layout tells about every line in it."""

    layout: str | None = None  # torchrun | ray | None
    local_rank: int | None = None
    attempt: int | None = None
    pid: int | None = None
    actor: str | None = None
    error_file: bool = False


def file_origin(path: str) -> FileOrigin:
    p = PurePath(path).as_posix()
    m = TORCHRUN_FILE.search(p)
    if m:
        return FileOrigin(
            "torchrun", local_rank=log_int(m.group("local_rank")), attempt=log_int(m.group("attempt"))
        )
    m = TORCHRUN_ERROR.search(p)
    if m:
        return FileOrigin(
            "torchrun",
            local_rank=log_int(m.group("local_rank")),
            attempt=log_int(m.group("attempt")),
            error_file=True,
        )
    m = RAY_WORKER.search(p) or RAY_CORE_WORKER.search(p)
    if m:
        return FileOrigin("ray", pid=log_int(m.group("pid")), actor="worker")
    m = RAY_DAEMON.search(p)
    if m:
        return FileOrigin("ray", actor=m.group("daemon"))
    if p.endswith(ERROR_FILE):
        return FileOrigin(None, error_file=True)
    return FileOrigin()


# -- several jobs in one folder -------------------------------------------------------------------------
# Words and numbers that say which process or stream of a job a file holds, not which job: `rank3.log`,
# `node1/stdout.log`, `driver.log` and `train.log` are parts of one job; `job_a.log` and `job_b.log`, or
# `exp1/` and `exp2/`, are two.
_GENERIC_WORDS = frozenset(_F.literals("generic-words"))
# (LazyRe: compiled when a folder's file names are first compared)
_PER_PROCESS = LazyRe(_F.regex("per-process-name"), engine="regex")
# an index (rank 0-99); longer numbers (job ids, dates) differ
_SMALL_NUMBER = LazyRe(_F.regex("small-number"), engine="regex")
_NAME_SPLIT = LazyRe(_F.regex("name-separators"), engine="regex")
_LOG_EXTENSIONS = _F.literals("log-extensions")
_ATTEMPT_FOLDER = LazyRe(_F.regex("torchrun-attempt-folder"), engine="regex")
_SESSION_FOLDER = _F.literal("ray-session-folder")


@dataclass(frozen=True)
class JobGroup:
    """Files of a folder that look like one job."""

    kind: str  # torchrun | ray | name
    label: str  # the torchrun run folder, the Ray session folder, or the (first) file or subfolder name
    root: str | None  # one path that holds exactly this group's files (for `fleet`), when there is one
    files: tuple[str, ...]


def name_family(name: str) -> str:
    """What a file or folder name says about which job it belongs to, with the words and small numbers
    that name a process or a stream removed: '' for a generic name (`rank3.log`, `stdout`, `driver.out`)."""
    stem = name.lower()
    changed = True
    while changed:  # job.log.gz -> job
        changed = False
        for ext in _LOG_EXTENSIONS:
            if stem.endswith(ext) and len(stem) > len(ext):
                stem, changed = stem[: -len(ext)], True
    tokens = [t for t in _NAME_SPLIT.split(stem) if t]
    kept = [
        t
        for t in tokens
        if t not in _GENERIC_WORDS and not _PER_PROCESS.match(t) and not _SMALL_NUMBER.match(t)
    ]
    return "-".join(kept)


def jobs_in_folder(folder: str, files: list[str]) -> list[JobGroup]:
    """The jobs a folder's log files look like, from their places and names: each torchrun run folder
    (the one above `attempt_N/`), each Ray session folder (`session_*`, or the folder of Ray's own log
    files), and each family of other files named alike (see `name_family`; generic names join any job).
    Several groups of one kind mean several jobs; one torchrun run beside one driver log is one job."""
    base = PurePath(folder)
    layout: dict[tuple[str, str], list[str]] = {}
    roots: dict[tuple[str, str], str] = {}
    names: dict[str, list[str]] = {}
    name_roots: dict[str, set[str]] = {}
    for f in files:
        p = PurePath(f)
        try:
            parts = p.relative_to(base).parts
        except ValueError:
            continue
        origin = file_origin(f)
        if origin.layout == "torchrun":
            i = next((k for k, part in enumerate(parts) if _ATTEMPT_FOLDER.fullmatch(part)), None)
            run = parts[:i] if i else ()
            key = ("torchrun", "/".join(run) or ".")
            layout.setdefault(key, []).append(f)
            roots[key] = str(base.joinpath(*run)) if run else folder
            continue
        if origin.layout == "ray":
            i = next((k for k, part in enumerate(parts) if part.startswith(_SESSION_FOLDER)), None)
            session = parts[: i + 1] if i is not None else parts[:-1]
            key = ("ray", "/".join(session) or ".")
            layout.setdefault(key, []).append(f)
            roots[key] = str(base.joinpath(*session)) if session else folder
            continue
        family = name_family(parts[0])
        if not family:
            continue  # a generic name: part of whichever job this folder holds
        names.setdefault(family, []).append(f)
        name_roots.setdefault(family, []).append(parts[0])
    groups = [JobGroup(kind, label, roots[(kind, label)], tuple(fs)) for (kind, label), fs in layout.items()]
    for family, fs in names.items():
        entries = list(
            dict.fromkeys(name_roots[family])
        )  # the folder entries (files or subfolders) of the job
        groups.append(
            JobGroup("name", entries[0], str(base / entries[0]) if len(entries) == 1 else None, tuple(fs))
        )
    return groups


def several_jobs(groups: list[JobGroup]) -> bool:
    """Do these groups (of one folder) look like more than one job?"""
    counts: dict[str, int] = {}
    for g in groups:
        counts[g.kind] = counts.get(g.kind, 0) + 1
    return any(n >= 2 for n in counts.values())


MAX_GROUPS_NAMED = 6  # jobs named in the several-jobs warning (the rest are counted)
_GROUP_KIND = {"torchrun": "torchrun run", "ray": "Ray session", "name": "job"}


@dataclass(frozen=True)
class SeveralJobs:
    """A folder that looks like several jobs: what they are, in words, and the path of each (`fleet`'s
    PATHs for one row per job), or None when some job has no path of its own (its files share a folder
    with another job's: `scan_commands` then reads each on its own)."""

    described: str  # `4 jobs (torchrun run none_x3hri268 (11 files), job job_a.log, ...)`
    roots: list[str] | None
    groups: list[JobGroup]

    def scan_commands(self) -> str:
        """`verl-logscan scan F1 F2` for each job (the first MAX_GROUPS_NAMED), joined by `; `."""
        shown = [
            "verl-logscan scan " + " ".join(shlex.quote(f) for f in g.files)
            for g in self.groups[:MAX_GROUPS_NAMED]
        ]
        more = len(self.groups) - MAX_GROUPS_NAMED
        return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def several_jobs_in(folder: str, files: list[str]) -> SeveralJobs | None:
    """What `folder` holds when it looks like several jobs (jobs_in_folder), else None."""
    groups = jobs_in_folder(folder, files)
    if not several_jobs(groups):
        return None
    named = ", ".join(
        f"{_GROUP_KIND[g.kind]} {g.label}" + (f" ({len(g.files)} files)" if len(g.files) > 1 else "")
        for g in groups[:MAX_GROUPS_NAMED]
    )
    more = f" and {len(groups) - MAX_GROUPS_NAMED} more" if len(groups) > MAX_GROUPS_NAMED else ""
    roots = [g.root for g in groups] if all(g.root for g in groups) else None
    return SeveralJobs(f"{len(groups)} jobs ({named}{more})", roots, groups)  # type: ignore[arg-type]


def fleet_command(paths: list[str]) -> str:
    """The exact `verl-logscan fleet` command line for these PATHs, each quoted for a shell."""
    return "verl-logscan fleet " + " ".join(shlex.quote(p) for p in paths)


def several_jobs_note(folder: str, files: list[str]) -> str | None:
    """A sentence when `folder` looks like several jobs (jobs_in_folder), with the exact command that
    gives one row per job (or reads each job on its own); else None."""
    several = several_jobs_in(folder, files)
    if several is None:
        return None
    if several.roots is not None:
        advice = f"for one row per job: {fleet_command(several.roots)}"
    else:
        advice = f"to read each job on its own: {several.scan_commands()}"
    return f"{folder} looks like {several.described}, read here as one merged job; {advice}"
