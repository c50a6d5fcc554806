"""Who wrote a file, from where it sits in a known log-folder layout.

* torchrun `--log-dir` (`--redirects`/`--tee`): `<run_id>_<random>/attempt_<N>/<local_rank>/stdout.log`,
  `stderr.log` and the `@record` `error.json`;
* a Ray session folder (`/tmp/ray/session_*/logs/`): `worker-<worker_id>-<job_id>-<pid>.out|.err`,
  `raylet.out`, `python-core-worker-<worker_id>_<pid>.log`, `gcs_server.out`.

What a line's own prefixes say always wins over what its file's place says.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

import regex

TORCHRUN_FILE = regex.compile(r"(?:^|/)attempt_(?P<attempt>\d+)/(?P<local_rank>\d+)/(?:stdout|stderr)\.log$")
TORCHRUN_ERROR = regex.compile(r"(?:^|/)attempt_(?P<attempt>\d+)/(?P<local_rank>\d+)/error\.json$")
RAY_WORKER = regex.compile(r"(?:^|/)worker-[0-9a-f]+-[0-9a-f]+-(?P<pid>\d+)\.(?:out|err)$")
RAY_CORE_WORKER = regex.compile(r"(?:^|/)python-core-(?:worker|driver)-[0-9a-f]+_(?P<pid>\d+)\.log$")
RAY_DAEMON = regex.compile(r"(?:^|/)(?P<daemon>raylet|gcs_server|monitor|log_monitor|dashboard(?:_agent)?)"
                           r"(?:\.\d+)?\.(?:out|err|log)$")


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
        return FileOrigin("torchrun", local_rank=int(m.group("local_rank")), attempt=int(m.group("attempt")))
    m = TORCHRUN_ERROR.search(p)
    if m:
        return FileOrigin("torchrun", local_rank=int(m.group("local_rank")), attempt=int(m.group("attempt")),
                          error_file=True)
    m = RAY_WORKER.search(p) or RAY_CORE_WORKER.search(p)
    if m:
        return FileOrigin("ray", pid=int(m.group("pid")), actor="worker")
    m = RAY_DAEMON.search(p)
    if m:
        return FileOrigin("ray", actor=m.group("daemon"))
    if p.endswith("error.json"):
        return FileOrigin(None, error_file=True)
    return FileOrigin()
