"""Many jobs at once: each file or folder given is one job, analysed on its own exactly as
`scan_paths([job])` would, in parallel, and summarised one row per job.

Two engines run the same per-job function, `analyse_job`:

* `local`: a `concurrent.futures.ProcessPoolExecutor`; each worker process loads the catalog once
  (the pool's initializer) and keeps it for every job it is given. One worker (or one job) runs in
  this process, with no pool.
* `ray`: one Ray task per job on a Ray cluster (`ray` is the optional extra `verl-logscan[ray]`).
  Each Ray worker process loads the catalog once and caches it. Tasks run in the caller's working
  directory (when it exists on the node), so relative paths name the same files as here; on a
  multi-node cluster the logs and any `--catalog` files must be on storage every node sees, and
  verl-logscan must be installed in the cluster's Python.

A job that cannot be read (no such path, a folder without log files, a permission or gzip error, or
no log line at all) is a row with status `error` and the reason; the other jobs are still analysed. Results come back in
the order the jobs were given, whatever order the workers finish in.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from enum import Enum
from types import ModuleType

from logparse.model import Report
from logparse.reader import InputError, expand_inputs
from logparse.scan import scan_paths
from patterns import Catalog, load_catalog

UNKNOWN_ROOT_CAUSE = "unknown"  # the root-cause id of an exception that no catalog entry recognises
NO_STAGE = "(none)"  # the count key for failed jobs whose log does not show the stage


class JobStatus(str, Enum):
    HEALTHY = "healthy"
    FAILED = "failed"
    ERROR = "error"  # the job's logs could not be read


class Engine(str, Enum):
    LOCAL = "local"
    RAY = "ray"


class EngineError(Exception):
    """The engine could not run the jobs: Ray is not installed or not reachable, a worker process died."""


@dataclass(frozen=True)
class JobRow:
    """One job of the fleet: the verdict of its report, or why it could not be read."""

    job: str  # the path as given
    status: JobStatus
    root_cause: str | None = None  # catalog entry id (or `unknown`)
    category: str | None = None
    stage: str | None = None  # where the failure happened (null when the log does not show it)
    last_step: int | None = None
    confidence: float | None = None
    error_source: str | None = None  # where the root cause's error line is
    error_line: int | None = None
    # status `error`: what could not be read and why; an `unknown` failure: its error (the category
    # says nothing there, so the row carries the exception itself)
    message: str | None = None

    @property
    def error_at(self) -> str | None:
        if self.error_source is None:
            return None
        return f"{self.error_source}:{self.error_line}" if self.error_line is not None else self.error_source


@dataclass(frozen=True)
class FleetSummary:
    """Every job's row, in the order given, and the counts the renderers show."""

    jobs: tuple[JobRow, ...]

    @property
    def failed(self) -> int:
        return sum(1 for j in self.jobs if j.status is JobStatus.FAILED)

    @property
    def errors(self) -> int:
        return sum(1 for j in self.jobs if j.status is JobStatus.ERROR)

    def status_counts(self) -> tuple[tuple[str, int], ...]:
        """Every status, including those no job has (a fixed shape to compare fleets by)."""
        counts = Counter(j.status for j in self.jobs)
        return tuple((s.value, counts.get(s, 0)) for s in JobStatus)

    def category_counts(self) -> tuple[tuple[str, int], ...]:
        """Failed jobs per root-cause category, most frequent first."""
        return _ranked(j.category or "unknown" for j in self.jobs if j.status is JobStatus.FAILED)

    def stage_counts(self) -> tuple[tuple[str, int], ...]:
        """Failed jobs per stage of the failure, most frequent first."""
        return _ranked(j.stage or NO_STAGE for j in self.jobs if j.status is JobStatus.FAILED)


def _ranked(keys: Iterable[str]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(Counter(keys).items(), key=lambda kv: (-kv[1], kv[0])))


def job_row(job: str, report: Report) -> JobRow:
    """The fleet row of one job's report."""
    rc = report.root_cause
    last_step = report.progress.last_step if report.progress is not None else None
    if report.empty:  # nothing to judge: not a healthy job
        return JobRow(job=job, status=JobStatus.ERROR, message=f"{job}: no log lines read")
    if rc is None:
        return JobRow(job=job, status=JobStatus.HEALTHY, last_step=last_step)
    return JobRow(
        job=job,
        status=JobStatus.FAILED,
        root_cause=rc.id,
        category=rc.category,
        stage=rc.stage,
        last_step=last_step,
        confidence=rc.confidence,
        error_source=rc.error_line.source if rc.error_line else None,
        error_line=rc.error_line.line if rc.error_line else None,
        message=rc.summary if rc.id == UNKNOWN_ROOT_CAUSE else None,
    )


def analyse_job(job: str, catalog: Catalog) -> JobRow:
    """Scan one job (a file, or a folder read as one job) exactly as `scan_paths([job])` does."""
    try:
        files = expand_inputs([job])  # raises for a missing path or a folder with no log files
        report = scan_paths(files, catalog)
    except InputError as exc:
        return JobRow(job=job, status=JobStatus.ERROR, message=str(exc))
    return job_row(job, report)


# -- local engine: a process pool, the catalog loaded once per worker -------------------------------
_worker_catalog: Catalog | None = None


def _init_worker(catalog_paths: tuple[str, ...]) -> None:
    global _worker_catalog
    _worker_catalog = load_catalog(list(catalog_paths))


def _analyse_in_worker(job: str) -> JobRow:
    assert _worker_catalog is not None, "worker used before its initializer ran"
    return analyse_job(job, _worker_catalog)


def run_local(jobs: Sequence[str], catalog: Catalog, catalog_paths: Sequence[str], workers: int) -> list[JobRow]:
    """`workers` processes (at most one per job); a single worker runs here, with `catalog`."""
    workers = max(1, min(workers, len(jobs)))
    if workers == 1:
        return [analyse_job(job, catalog) for job in jobs]
    try:
        with ProcessPoolExecutor(max_workers=workers, initializer=_init_worker,
                                 initargs=(tuple(catalog_paths),)) as pool:
            # chunksize 1: a job is a large unit of work, and uneven in size
            return list(pool.map(_analyse_in_worker, jobs, chunksize=1))
    except BrokenProcessPool as exc:
        raise EngineError(f"a worker process died before its job was done (killed, e.g. out of memory?); "
                          f"try fewer --jobs: {exc}") from exc


# -- ray engine: one task per job, the catalog loaded once per Ray worker process ------------------
_ray_catalogs: dict[tuple[str, ...], Catalog] = {}


def _analyse_as_ray_task(job: str, catalog_paths: tuple[str, ...], cwd: str) -> JobRow:
    if os.path.isdir(cwd) and os.getcwd() != cwd:
        os.chdir(cwd)  # a Ray worker starts wherever its raylet did; relative paths are the caller's
    catalog = _ray_catalogs.get(catalog_paths)
    if catalog is None:
        catalog = _ray_catalogs[catalog_paths] = load_catalog(list(catalog_paths))
    return analyse_job(job, catalog)


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise EngineError(
            "--engine ray needs Ray, which is not installed: pip install 'verl-logscan[ray]'"
        ) from None
    return ray


def run_ray(jobs: Sequence[str], catalog_paths: Sequence[str], address: str | None = None,
            workers: int | None = None) -> list[JobRow]:
    """One Ray task per job. Uses the Ray session this process already has, else connects to
    `address` (or `RAY_ADDRESS`), else starts a local Ray instance of `workers` CPUs and stops it after."""
    ray = import_ray()
    started = False
    if not ray.is_initialized():
        kwargs: dict = {"include_dashboard": False, "logging_level": logging.WARNING}
        if address is None and not os.environ.get("RAY_ADDRESS") and workers:
            kwargs["num_cpus"] = workers
        try:
            ray.init(address=address, **kwargs)
        except Exception as exc:  # Ray raises many kinds; each means it cannot run here
            raise EngineError(f"cannot start or reach Ray{f' at {address}' if address else ''}: {exc}") from exc
        started = True
    try:
        task = ray.remote(num_cpus=1)(_analyse_as_ray_task)
        cwd = os.getcwd()
        refs = [task.remote(job, tuple(catalog_paths), cwd) for job in jobs]
        return list(ray.get(refs))
    finally:
        if started:
            ray.shutdown()


def analyse_fleet(jobs: Sequence[str], catalog: Catalog, catalog_paths: Sequence[str] = (),
                  engine: Engine = Engine.LOCAL, workers: int | None = None,
                  address: str | None = None) -> FleetSummary:
    """Every job analysed on its own; `catalog` must be `load_catalog(catalog_paths)` (workers reload
    it from the paths). Duplicate job paths are analysed once."""
    unique = list(dict.fromkeys(jobs))
    if not unique:
        return FleetSummary(())
    if engine is Engine.RAY:
        rows = run_ray(unique, catalog_paths, address=address, workers=workers)
    else:
        rows = run_local(unique, catalog, catalog_paths, workers or os.cpu_count() or 1)
    return FleetSummary(tuple(rows))
