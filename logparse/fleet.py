"""Many jobs at once: each file or folder given is one job, analysed on its own exactly as
`verl-logscan scan JOB` would (logparse.pipeline.analyse, redacted the same way), in parallel, and
summarised one row per job.

Two engines run the same per-job function, `analyse_job`:

* `local`: one child process per job (forked: it inherits the loaded catalog; where fork is missing,
  spawned, and it loads the catalog itself), at most `workers` at a time. A child is killed when its
  job runs past `job_timeout` seconds, and the job becomes an `error` row.
* `ray`: one Ray task per job on a Ray cluster (`ray` is the optional extra `verl-logscan[ray]`).
  Each Ray worker process loads the catalog once and caches it. Tasks run in the caller's working
  directory (when it exists on the node), so relative paths name the same files as here; on a
  multi-node cluster the logs and any `--catalog` files must be on storage every node sees, and
  verl-logscan must be installed in the cluster's Python. An address is first tried with a TCP
  connection and a gRPC handshake (RAY_PROBE_S): ray.init retries an address where nothing listens,
  or where another service such as the dashboard does, for minutes.

A job that cannot be read (no such path, a folder without log files, a permission or gzip error, or
no log line at all), that crashes its worker or that runs past the timeout is a row with status `error`
and the reason; the other jobs are still analysed. `iter_fleet` yields the rows as jobs finish (so that
an interrupted run keeps what is done); `analyse_fleet` returns them in the order the jobs were given.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from multiprocessing.connection import Connection, wait
from types import ModuleType

from logparse.handshake import CLIENT_METHOD, GCS_METHOD, grpc_refusal
from logparse.model import Evidence, FleetSummary, JobRow, JobStatus, Report, Stall
from logparse.pipeline import analyse_unredacted
from logparse.read.sources import InputError
from logparse.redact import Names, RedactConfig, redact_report, redactor_for
from patterns import Catalog, load_catalog

UNKNOWN_ROOT_CAUSE = "unknown"  # the root-cause id of an exception that no catalog entry recognises
DEFAULT_JOB_TIMEOUT_S = 600.0  # a job still running after this is stuck (a FIFO without writer, a hung mount)
RAY_PROBE_S = 5.0  # a TCP connection to the Ray address must open within this
POLL_S = 1.0  # the longest the parent waits before looking at the clock (and at signals) again


class Engine(str, Enum):
    LOCAL = "local"
    RAY = "ray"


# what a job's own report becomes (`fleet --reports DIR`): told the job and its report, in the worker
# that analysed it, it writes the report and returns where (None: not written); the CLI gives one that
# renders, since this module renders nothing
ReportWriter = Callable[[str, Report], "str | None"]


class EngineError(Exception):
    """The engine could not run the jobs: Ray is not installed or not reachable, a worker process died."""


@dataclass(frozen=True)
class JobOutcome:
    """What a worker hands back for one job: its row (not redacted: the summary is redacted once, for
    all jobs together) and, with host redaction, the host and user names its whole log gave."""

    row: JobRow
    names: Names | None = None


def job_row(job: str, report: Report, written: str | None = None) -> JobRow:
    """The fleet row of one job's report (`written`: where the report itself was written)."""
    rc = report.root_cause
    last_step = report.progress.last_step if report.progress is not None else None
    if report.empty:  # nothing to judge: not a healthy job
        return JobRow(job=job, status=JobStatus.ERROR, message=f"{job}: no log lines read")
    if report.stall is not None:  # (the likely cause's id stands where a root cause's would)
        st = report.stall
        at = stall_line(st)
        return JobRow(
            job=job,
            status=JobStatus.STALLED,
            root_cause=st.cause.id if st.cause else None,
            stage=st.stage,
            last_step=last_step,
            error_source=from_cwd(at.source) if at else None,
            error_line=at.line if at else None,
            message=st.odd_one_out,
            report=written,
        )
    if rc is None:
        return JobRow(job=job, status=JobStatus.HEALTHY, last_step=last_step, report=written)
    return JobRow(
        job=job,
        status=JobStatus.FAILED,
        root_cause=rc.id,
        category=rc.category,
        stage=rc.stage,
        last_step=last_step,
        confidence=rc.confidence,
        error_source=from_cwd(rc.error_line.source) if rc.error_line else None,
        error_line=rc.error_line.line if rc.error_line else None,
        message=rc.summary if rc.id == UNKNOWN_ROOT_CAUSE else None,
        report=written,
    )


def stall_line(stall: Stall) -> Evidence | None:
    """The line a stalled job's row points at: the odd one out's stack dump (the process the others
    wait for), else the first stack dump, else the first line that says progress stopped."""
    odd = next((w for w in stall.waits if w.odd), None)
    if odd is not None:
        return odd.first
    if stall.waits:
        return stall.waits[0].first
    return stall.evidence[0] if stall.evidence else None


def from_cwd(path: str) -> str:
    """A log's path as the row shows it, `path:line` a terminal or editor opens from where the command
    ran: relative to the working folder when the file is under it, else absolute."""
    if path == "-":
        return path
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute, os.getcwd())
    return absolute if relative == ".." or relative.startswith(".." + os.sep) else relative


def analyse_job(
    job: str, catalog: Catalog, redact: RedactConfig | None = None, write_report: ReportWriter | None = None
) -> JobOutcome:
    """Analyse one job (a file, or a folder read as one job) exactly as a scan of it does; with
    `write_report`, its report (redacted as a scan's) is also written (in this worker: the reports are
    written in parallel). The row is redacted with the others' (summarise)."""
    hosts = redact is not None and redact.hosts
    try:
        # (raises InputError for a missing path or a folder with no log files)
        report, names = analyse_unredacted([job], catalog, learn_names=hosts)
    except InputError as exc:
        return JobOutcome(JobRow(job=job, status=JobStatus.ERROR, message=str(exc)))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        return JobOutcome(error_row(job, f"could not be analysed ({type(exc).__name__}: {exc})"))
    written = None
    if write_report is not None and not report.empty:
        written = write_report(job, report if redact is None else redact_report(report, redact, names))
    return JobOutcome(job_row(job, report, written), names)


def error_row(job: str, why: str) -> JobRow:
    return JobRow(job=job, status=JobStatus.ERROR, message=f"{job}: {why}")


# -- local engine: one child process per job, killed past the job timeout --------------------------
_worker_catalog: tuple[tuple[str, ...], Catalog] | None = None  # (catalog paths, catalog), inherited by fork


def _child_main(
    job: str,
    catalog_paths: tuple[str, ...],
    redact: RedactConfig | None,
    out: Connection,
    write_report: ReportWriter | None = None,
) -> None:
    """In a child: analyse one job and send its row. Ctrl-C is the parent's to handle (it stops the
    children); SIGTERM ends a child at once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if _worker_catalog is not None and _worker_catalog[0] == catalog_paths:
        catalog = _worker_catalog[1]
    else:  # spawned (no fork here): load it
        catalog = load_catalog(list(catalog_paths))
    out.send(analyse_job(job, catalog, redact, write_report))
    out.close()


def _process_context() -> multiprocessing.context.BaseContext:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def run_local(
    jobs: Sequence[str],
    catalog: Catalog,
    catalog_paths: Sequence[str],
    workers: int,
    job_timeout: float | None = DEFAULT_JOB_TIMEOUT_S,
    redact: RedactConfig | None = None,
    write_report: ReportWriter | None = None,
) -> Iterator[tuple[int, JobOutcome]]:
    """(index, outcome) of each job as it finishes; at most `workers` children at a time, each killed when
    its job runs past `job_timeout` seconds (None: no limit). Closing the generator (an interrupt)
    kills the children still running."""
    global _worker_catalog
    workers = max(1, min(workers, len(jobs)))
    paths = tuple(catalog_paths)
    _worker_catalog = (paths, catalog)
    ctx = _process_context()
    waiting = deque(enumerate(jobs))
    running: dict[Connection, tuple[int, multiprocessing.process.BaseProcess, float]] = {}
    try:
        while waiting or running:
            while waiting and len(running) < workers:
                index, job = waiting.popleft()
                recv, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(
                    target=_child_main,
                    args=(job, paths, redact, send, write_report),
                    daemon=True,
                    name=f"verl-logscan-fleet-{index}",
                )
                proc.start()
                send.close()
                running[recv] = (index, proc, time.monotonic())
            now = time.monotonic()
            timeout = POLL_S
            if job_timeout is not None:
                timeout = min(
                    [timeout] + [max(0.0, started + job_timeout - now) for _, _, started in running.values()]
                )
            ready = set(wait(list(running) + [p.sentinel for _, p, _ in running.values()], timeout))
            now = time.monotonic()
            for conn, (index, proc, started) in list(running.items()):
                row = None
                if conn in ready or proc.sentinel in ready:
                    try:
                        row = conn.recv() if conn.poll() else None
                    except (EOFError, OSError):
                        row = None
                    if row is None:
                        proc.join(5)
                        row = JobOutcome(
                            error_row(
                                jobs[index],
                                f"its worker process ended without a result (exit code "
                                f"{proc.exitcode}: killed, e.g. out of memory?)",
                            )
                        )
                elif job_timeout is not None and now - started > job_timeout:
                    proc.kill()
                    row = JobOutcome(
                        error_row(
                            jobs[index], f"not finished after {job_timeout:g} s (--job-timeout); stopped"
                        )
                    )
                if row is None:
                    continue
                del running[conn]
                conn.close()
                proc.join(5)
                yield index, row
    finally:
        for conn, (_, proc, _) in running.items():
            if proc.is_alive():
                proc.kill()
            proc.join(5)
            conn.close()
        _worker_catalog = None


# -- ray engine: one task per job, the catalog loaded once per Ray worker process ------------------
_ray_catalogs: dict[tuple[str, ...], Catalog] = {}


def _analyse_as_ray_task(
    job: str,
    catalog_paths: tuple[str, ...],
    cwd: str,
    redact: RedactConfig | None = None,
    write_report: ReportWriter | None = None,
) -> JobOutcome:
    if os.path.isdir(cwd) and os.getcwd() != cwd:
        os.chdir(cwd)  # a Ray worker starts wherever its raylet did; relative paths are the caller's
    catalog = _ray_catalogs.get(catalog_paths)
    if catalog is None:
        catalog = _ray_catalogs[catalog_paths] = load_catalog(list(catalog_paths))
    return analyse_job(job, catalog, redact, write_report)


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise EngineError(
            "--engine ray needs Ray, which is not installed: pip install 'verl-logscan[ray]'"
        ) from None
    return ray


def ray_endpoint(address: str) -> tuple[str, int] | None:
    """(host, port) of a Ray address given as `host:port`, `ray://host:port` or `[v6]:port`; None
    for `auto`, `local` and anything without a port (Ray resolves those itself)."""
    rest = address.split("://", 1)[1] if "://" in address else address
    rest = rest.split("/", 1)[0]
    if rest.startswith("["):
        host, _, port = rest[1:].partition("]:")
    else:
        host, _, port = rest.rpartition(":")
    if not host or not port.isdecimal():
        return None
    return host, int(port)


def probe_ray_address(address: str, timeout: float = RAY_PROBE_S) -> None:
    """Raise EngineError unless a TCP connection to the address opens and what listens answers a gRPC
    handshake (logparse.handshake; not with TLS on), all within `timeout` seconds: ray.init would retry
    an address where nothing listens, or where another service does, for minutes."""
    endpoint = ray_endpoint(address)
    if endpoint is None:
        return
    host, port = endpoint
    start = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            tls = os.environ.get("RAY_USE_TLS", "").strip().lower() in ("1", "true")
            left = max(0.5, timeout - (time.monotonic() - start))
            method = CLIENT_METHOD if address.startswith("ray://") else GCS_METHOD
            where = f"{host}:{port}"
            refusal = None if tls else grpc_refusal(sock, left, said=timeout, method=method, authority=where)
    except OSError as exc:
        why = "timed out" if isinstance(exc, socket.timeout) else (exc.strerror or str(exc))
        raise EngineError(
            f"cannot reach Ray at {address}: {why} (is a Ray cluster running there? "
            f"`ray start --head` starts one; `ray status` shows its address)"
        ) from None
    if refusal is not None:
        raise EngineError(
            f"cannot reach Ray at {address}: {refusal} (give the address of the head's GCS, HOST:6379 by "
            f"default, or ray://HOST:10001; `ray status` on the head shows it)"
        )


def _init_ray(ray: ModuleType, address: str | None, kwargs: dict) -> None:
    """ray.init, keeping this process's SIGTERM handler: Ray replaces it with one that exits with status
    15; a SIGTERM that arrives during ray.init is handed to the handler it replaced."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main else None
    where = f" at {address}" if address else ""
    try:
        ray.init(address=address, **kwargs)
    except SystemExit as exc:
        if exc.code == signal.SIGTERM and callable(previous):
            previous(signal.SIGTERM, None)
        raise
    except Exception as exc:  # Ray raises many kinds; each means it cannot run here
        raise EngineError(f"cannot start or reach Ray{where}: {exc}") from exc
    finally:
        if main and previous is not None:
            signal.signal(signal.SIGTERM, previous)


def run_ray(
    jobs: Sequence[str],
    catalog_paths: Sequence[str],
    address: str | None = None,
    workers: int | None = None,
    job_timeout: float | None = DEFAULT_JOB_TIMEOUT_S,
    redact: RedactConfig | None = None,
    write_report: ReportWriter | None = None,
) -> Iterator[tuple[int, JobOutcome]]:
    """(index, outcome) of each job as it finishes, one Ray task per job (at most `workers` in flight when
    given, so a job's time counts from its start). Uses the Ray session this process already has, else
    connects to `address` (or `RAY_ADDRESS`), else starts a local Ray instance of `workers` CPUs and
    stops it after. A task past `job_timeout` is cancelled and becomes an `error` row."""
    ray = import_ray()
    started = False
    if not ray.is_initialized():
        kwargs: dict = {"include_dashboard": False, "logging_level": logging.WARNING}
        if address is None and not os.environ.get("RAY_ADDRESS") and workers:
            kwargs["num_cpus"] = workers
        probe_ray_address(address or os.environ.get("RAY_ADDRESS") or "auto")
        _init_ray(ray, address, kwargs)
        started = True
    try:
        task = ray.remote(num_cpus=1)(_analyse_as_ray_task)
        cwd = os.getcwd()
        waiting = deque(enumerate(jobs))
        # as many in flight as can run at once (one CPU a task), so that a job's time counts from its start
        flight = max(1, workers or 1, int(ray.cluster_resources().get("CPU", 1)))
        running: dict = {}  # ref -> (index, submitted)
        while waiting or running:
            while waiting and len(running) < flight:
                index, job = waiting.popleft()
                ref = task.remote(job, tuple(catalog_paths), cwd, redact, write_report)
                running[ref] = (index, time.monotonic())
            done, _ = ray.wait(list(running), num_returns=1, timeout=POLL_S)
            for ref in done:
                index, _ = running.pop(ref)
                try:
                    outcome = ray.get(ref)
                except Exception as exc:
                    outcome = JobOutcome(
                        error_row(jobs[index], f"its Ray task failed ({type(exc).__name__}: {exc})")
                    )
                yield index, outcome
            now = time.monotonic()
            for ref, (index, submitted) in list(running.items()):
                if job_timeout is not None and now - submitted > job_timeout:
                    ray.cancel(ref, force=True)
                    del running[ref]
                    why = f"not finished after {job_timeout:g} s (--job-timeout); cancelled"
                    yield index, JobOutcome(error_row(jobs[index], why))
    finally:
        if started:
            ray.shutdown()


def iter_fleet(
    jobs: Sequence[str],
    catalog: Catalog,
    catalog_paths: Sequence[str] = (),
    engine: Engine = Engine.LOCAL,
    workers: int | None = None,
    address: str | None = None,
    job_timeout: float | None = DEFAULT_JOB_TIMEOUT_S,
    redact: RedactConfig | None = None,
    write_report: ReportWriter | None = None,
) -> Iterator[tuple[int, JobOutcome]]:
    """(index into `jobs`, outcome) of each job as it finishes. `catalog` must be
    `load_catalog(catalog_paths)` (workers that cannot inherit it reload it from the paths);
    `redact`: how each job's report is redacted (None: not at all); `write_report`: writes each job's
    own report (see ReportWriter)."""
    if not jobs:
        return
    if engine is Engine.RAY:
        yield from run_ray(
            jobs,
            catalog_paths,
            address=address,
            workers=workers,
            job_timeout=job_timeout,
            redact=redact,
            write_report=write_report,
        )
    else:
        cores = workers or os.cpu_count() or 1
        yield from run_local(jobs, catalog, catalog_paths, cores, job_timeout, redact, write_report)


def summarise(
    jobs: Sequence[str], outcomes: dict[int, JobOutcome], redact: RedactConfig | None = None
) -> FleetSummary:
    """The rows done, in the order of `jobs`; the others are pending (an interrupted run). `redact`:
    every row redacted as a scan redacts, together: one placeholder per value across the jobs, with the
    names every job's log gave (a job path names a user its own log named: `/home/jdoe/job-a`)."""
    done = [outcomes[i] for i in range(len(jobs)) if i in outcomes]
    pending = tuple(job for i, job in enumerate(jobs) if i not in outcomes)
    rows = [o.row for o in done]
    if redact is None:
        return FleetSummary(tuple(rows), pending)
    # (a job's report link is a file this run named, not log text: masking it would break the link)
    plain = [replace(row, report=None) for row in rows]
    redactor = redactor_for([*plain, pending], redact, [o.names for o in done])
    masked = tuple(replace(redactor.value(p), report=row.report) for p, row in zip(plain, rows, strict=True))
    return FleetSummary(masked, tuple(redactor.text(job) for job in pending))


def analyse_fleet(
    jobs: Sequence[str],
    catalog: Catalog,
    catalog_paths: Sequence[str] = (),
    engine: Engine = Engine.LOCAL,
    workers: int | None = None,
    address: str | None = None,
    job_timeout: float | None = DEFAULT_JOB_TIMEOUT_S,
    redact: RedactConfig | None = None,
) -> FleetSummary:
    """Every job analysed on its own; `catalog` must be `load_catalog(catalog_paths)` (workers reload
    it from the paths). Duplicate job paths are analysed once."""
    unique = list(dict.fromkeys(jobs))
    done = dict(iter_fleet(unique, catalog, catalog_paths, engine, workers, address, job_timeout, redact))
    return summarise(unique, done, redact)
