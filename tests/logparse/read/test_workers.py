"""A large file's blocks made by several processes (--workers N: the scanner and N - 1 readers, each
making the oldest block cut and not taken) give the reports one process gives, byte for byte: on every
sample and fixture, on every benchmark shape, with every value kept (--metrics-csv) and without; the
work is shared among them, errors come after the blocks before them, and no reader outlives the scan."""

from __future__ import annotations

import gzip
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logparse.pipeline import Analysis, ScanConfig
from logparse.read import blocks, sources
from logparse.read.blocks import blocks_in_process, iter_blocks, reader_process_possible
from logparse.read.prefilter import Prefilter
from logparse.read.sources import InputStats, TruncatedGzip, gunzip_chunks, open_input, plain_chunks
from patterns import load_builtin_catalog
from reports import FORMATS, render
from tests.conftest import FIXTURES, SAMPLES

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from generate_log import generate

CATALOG = load_builtin_catalog()
ROOT = Path(__file__).resolve().parents[3]
LOGS = sorted(SAMPLES.glob("*.log")) + sorted(p for p in FIXTURES.rglob("*.log") if p.is_file())
# (kind, caught_every, bars): every shape benchmarks/ generates
SHAPES = [
    ("realistic", None, "ray"),
    ("dense", 0, "ray"),
    ("dense", None, "ray"),
    ("mix", None, "ray"),
    ("dense", 0, "bare"),
    ("mix", None, "bare"),
]
SMALL_CHUNK = 16 << 10  # blocks of about this size: many of them, so that the processes take turns
needs_fork = pytest.mark.skipif(not reader_process_possible(), reason="readers need fork (Linux)")
pytestmark = needs_fork


def outputs(path: Path, tmp: Path, all_metrics: bool = False, **config) -> dict[str, str]:
    """Every report format of a scan of `path` and, with `all_metrics`, its metrics CSV."""
    scanner = Analysis(CATALOG, ScanConfig(all_metrics=all_metrics, **config))
    scanner.feed_inputs([str(path)])
    report = scanner.report()
    out = {fmt: render(report, fmt) for fmt in FORMATS}
    if all_metrics:
        csv = tmp / "metrics.csv"
        scanner.metrics.to_csv(csv)
        out["csv"] = csv.read_text()
    return out


def assert_same_with_workers(path: Path, tmp: Path, workers: list[int], all_metrics: bool = False) -> None:
    one = outputs(path, tmp, all_metrics, reader_process_bytes=None, workers=1)
    for n in workers:
        assert outputs(path, tmp, all_metrics, reader_process_bytes=1, workers=n) == one, n


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "CHUNK_BYTES", SMALL_CHUNK)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_samples_and_fixtures_report_the_same_with_any_number_of_workers(
    path: Path, tmp_path: Path, small_chunks: None
) -> None:
    assert_same_with_workers(path, tmp_path, [2, 3])


@pytest.mark.parametrize("kind,caught,bars", SHAPES, ids=lambda v: str(v))
def test_benchmark_shapes_report_the_same_with_any_number_of_workers(
    kind: str, caught: int | None, bars: str, tmp_path: Path, small_chunks: None
) -> None:
    log = tmp_path / "bench.log"
    generate(str(log), 1.0, kind=kind, caught_every=caught, bars=bars)
    assert_same_with_workers(log, tmp_path, [2, 4, 8], all_metrics=kind == "dense")


@pytest.fixture(params=["never", "always"])
def read_apart(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Readers leave every block's candidate lines to the scanner, or read them all apart
    (logparse.read.pre_records), whether they waited for work or not: the forked readers inherit
    the setting."""
    monkeypatch.setattr(blocks, "READ_APART", request.param)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_samples_and_fixtures_report_the_same_whoever_reads_their_lines(
    path: Path, tmp_path: Path, small_chunks: None, read_apart: None
) -> None:
    assert_same_with_workers(path, tmp_path, [2])


@pytest.mark.parametrize("kind,caught,bars", SHAPES, ids=lambda v: str(v))
def test_benchmark_shapes_report_the_same_whoever_reads_their_lines(
    kind: str, caught: int | None, bars: str, tmp_path: Path, small_chunks: None, read_apart: None
) -> None:
    log = tmp_path / "bench.log"
    generate(str(log), 1.0, kind=kind, caught_every=caught, bars=bars)
    assert_same_with_workers(log, tmp_path, [3], all_metrics=kind == "dense")


def test_readers_read_the_candidates_apart_and_the_scanner_takes_their_rows(
    tmp_path: Path, small_chunks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(blocks, "READ_APART", "always")
    log = tmp_path / "realistic.log"
    generate(str(log), 1.0, kind="realistic")
    scanner = Analysis(CATALOG, ScanConfig(reader_process_bytes=1, workers=2))
    seen = []
    take = scanner.reader._block

    def block_seen(block, *args):
        seen.append(
            (block.worker, block.pre is not None and any(map(block.pre.has, range(len(block.starts)))))
        )
        return take(block, *args)

    scanner.reader._block = block_seen
    scanner.feed_inputs([str(log)])
    assert any(worker and rows for worker, rows in seen)  # a reader's block, with rows
    assert not any(rows for worker, rows in seen if worker == 0)  # the scanner's own: read as before


def test_a_gzip_and_a_truncated_gzip_report_the_same_with_workers(tmp_path: Path, small_chunks: None) -> None:
    log = tmp_path / "job.log"
    generate(str(log), 1.0, kind="mix")
    data = gzip.compress(log.read_bytes(), 1)
    whole, cut = tmp_path / "whole.log.gz", tmp_path / "cut.log.gz"
    whole.write_bytes(data)
    cut.write_bytes(data[: len(data) // 2])
    for path in (whole, cut):
        assert_same_with_workers(path, tmp_path, [4])
    stats = InputStats("x")
    fh = open_input(str(cut))
    blocks = []
    with pytest.raises(TruncatedGzip):
        for block in blocks_in_process(
            lambda st: gunzip_chunks(fh, st), stats, Prefilter(["step:"]), workers=4
        ):
            blocks.append(block.base + block.lines)
    assert blocks  # the blocks before the damage came first
    assert not multiprocessing.active_children()


def test_the_blocks_are_those_of_one_process_and_every_process_makes_some(
    tmp_path: Path, small_chunks: None
) -> None:
    log = tmp_path / "dense.log"
    generate(str(log), 2.0, kind="dense", caught_every=0)
    pf = Prefilter(["step:", "Training Progress", "NCCL", "Traceback (most recent call last)"])
    inline = [
        (b.base, b.lines, b.starts, b.numbers, b.keywords, b.cut, b.data)
        for b in iter_blocks(plain_chunks(open_input(str(log)), InputStats("x")), pf)
    ]
    stats = InputStats("x")
    fh = open_input(str(log))
    shared = []
    makers = set()
    for b in blocks_in_process(lambda st: plain_chunks(fh, st), stats, pf, workers=4):
        shared.append((b.base, b.lines, b.starts, b.numbers, b.keywords, b.cut, b.load()))
        makers.add(b.worker)
    assert len(inline) > 50 and shared == inline
    assert stats.bytes == log.stat().st_size
    assert len(stats.reader_cpu) == 3 and all(t >= 0 for t in stats.reader_cpu)
    assert len(makers) >= 2  # (which process makes which block is the scheduler's business)
    assert not multiprocessing.active_children()


def test_the_scanner_hands_free_heap_pages_back_every_few_blocks(
    tmp_path: Path, small_chunks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert blocks.heap_trimmer() is not blocks._no_trim  # (glibc, as where the tests run)
    trims: list[int] = []
    monkeypatch.setattr(blocks, "heap_trimmer", lambda: trims.append)
    log = tmp_path / "job.log"
    generate(str(log), 2.0, kind="dense")
    with open_input(str(log)) as fh:
        made = sum(
            1
            for _ in blocks_in_process(lambda st: plain_chunks(fh, st), InputStats("x"), Prefilter(["step:"]))
        )
    assert made > 2 * blocks.TRIM_BLOCKS
    assert trims == [0] * (made // blocks.TRIM_BLOCKS)


def test_stopping_early_stops_every_reader(tmp_path: Path, small_chunks: None) -> None:
    log = tmp_path / "job.log"
    generate(str(log), 1.0, kind="dense")
    fh = open_input(str(log))
    gen = blocks_in_process(lambda st: plain_chunks(fh, st), InputStats("x"), Prefilter(["step:"]), workers=5)
    next(gen)
    assert len(multiprocessing.active_children()) == 4
    gen.close()
    assert not multiprocessing.active_children()


@pytest.mark.slow  # 3-4 s: starts a scan with reader processes, kills it, waits for every reader to end
def test_every_reader_ends_when_the_scan_is_killed(tmp_path: Path) -> None:
    """kill -9 of the scan: the first reader's send or receive fails, the others see that their
    parent is gone while they wait for a block, and all end."""
    code = (
        "import multiprocessing, sys, time\n"
        "from logparse.pipeline import Analysis, ScanConfig\n"
        "from patterns import load_builtin_catalog\n"
        "s = Analysis(load_builtin_catalog(), ScanConfig(reader_process_bytes=1, workers=4))\n"
        "records = s.reader.records(sys.argv[1])\n"
        "next(records)\n"
        "print(' '.join(str(p.pid) for p in multiprocessing.active_children()), flush=True)\n"
        "time.sleep(60)\n"
    )
    log = tmp_path / "long.log"  # more blocks than there are slots: the first reader waits for one
    generate(str(log), 40.0, kind="realistic")
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(log)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    readers = [int(p) for p in proc.stdout.readline().split()]
    assert len(readers) == 3
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 20
    alive = readers
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _running(p)]
        time.sleep(0.05)
    for p in alive:
        os.kill(p, signal.SIGKILL)
    assert not alive


def _running(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    try:
        return "State:\tZ" not in status.read_text()
    except OSError:
        return False


@pytest.mark.slow  # 9 s: the CLI as a process, scanning with 1, 2 and 4 reader processes
def test_workers_from_the_command_line(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    generate(str(log), 1.0, kind="dense")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VERL_LOGSCAN_READER_MB": "0.5", "NO_COLOR": "1"}
    runs = {
        n: subprocess.run(
            [sys.executable, "-m", "logparse", "scan", "--format", "json", "--workers", str(n), str(log)],
            capture_output=True,
            env=env,
            cwd=ROOT,
        )
        for n in (1, 3)
    }
    assert runs[1].returncode == runs[3].returncode == 1
    assert runs[1].stdout == runs[3].stdout
    bad = subprocess.run(
        [sys.executable, "-m", "logparse", "scan", "--workers", "0", str(log)],
        capture_output=True,
        env=env,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and b"--workers" in bad.stderr


def test_the_default_is_the_cpus_available_at_most_four(monkeypatch: pytest.MonkeyPatch) -> None:
    # (past 4 the scanner's own work bounds the scan, and each further reader costs memory:
    # docs/usage.md); more are asked for by --workers or VERL_LOGSCAN_WORKERS, up to MAX_WORKERS
    from logparse import pipeline

    monkeypatch.delenv("VERL_LOGSCAN_WORKERS", raising=False)
    for cpus, workers in ((1, 1), (2, 2), (3, 3), (4, 4), (16, 4), (128, 4)):
        monkeypatch.setattr(pipeline, "available_cpus", lambda cpus=cpus: cpus)
        assert ScanConfig().workers == workers
    for asked, workers in (("3", 3), ("8", 8), ("1000", blocks.MAX_WORKERS)):
        monkeypatch.setenv("VERL_LOGSCAN_WORKERS", asked)
        assert ScanConfig().workers == workers
