"""Blocks: candidate lines and their numbers against a line-by-line reference; the reader process gives
the same blocks and the same reports as reading inline, and stops when the scan stops."""

from __future__ import annotations

import collections
import dataclasses
import gzip
import multiprocessing
import os
import random
import sys
from pathlib import Path

import pytest

from logparse.pipeline import Analysis, ScanConfig, analyse
from logparse.read import blocks as blocks_mod
from logparse.read.blocks import blocks_in_process, iter_blocks, reader_process_possible
from logparse.read.normalize import Normalizer
from logparse.read.prefilter import Prefilter
from logparse.read.sources import (
    InputStats,
    Line,
    TruncatedGzip,
    decode_line,
    gunzip_chunks,
    open_input,
    plain_chunks,
)
from logparse.read.steps import StepParser, parse_step_line
from patterns import load_builtin_catalog
from patterns.progress import wanted_key
from reports.jsonreport import to_dict
from tests.conftest import FIXTURES, SAMPLES

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from generate_log import generate

CATALOG = load_builtin_catalog()
WORDS = ["CUDA out of memory", "step:", "Traceback (most recent call last)", "NCCL"]
needs_fork = pytest.mark.skipif(not reader_process_possible(), reason="the reader process needs fork (Linux)")


def _reference(data: bytes, words: list[str]) -> list[tuple[int, set[str]]]:
    """(line number, keywords in the line) of every line with a keyword, one line at a time."""
    out = []
    for number, line in enumerate(data.split(b"\n"), 1):
        found = {w for w in words if w.encode() in line}
        if found:
            out.append((number, found))
    return out


def _candidates(bl: list, pf: Prefilter) -> list[tuple[int, set[str]]]:
    return [
        (n, {pf.keywords[i] for i in ids}) for b in bl for n, ids in zip(b.numbers, b.keywords, strict=True)
    ]


@pytest.mark.parametrize(
    ("numpy_gap", "piece"), [(1, 7), (40, 16), (1 << 40, 1)], ids=["numpy", "both", "bytes.count"]
)
def test_candidate_line_numbers_match_a_line_by_line_reference(
    numpy_gap: int, piece: int, monkeypatch
) -> None:
    """Line numbers counted by numpy (over stretches cut in pieces of `piece` bytes), by bytes.count,
    or by either as a stretch is long or short, are those of a count line by line."""
    monkeypatch.setattr(blocks_mod, "NUMPY_AFTER_BYTES", 0)
    monkeypatch.setattr(blocks_mod, "NUMPY_GAP", numpy_gap)
    monkeypatch.setattr(blocks_mod, "NUMPY_PIECE", piece)
    rnd = random.Random(7)
    pf = Prefilter(WORDS)
    for _ in range(30):
        lines = [
            " ".join(rnd.choice(WORDS + ["x", "y z", ""]) for _ in range(rnd.randrange(0, 4)))
            for _ in range(rnd.randrange(1, 300))
        ]
        data = "\n".join(lines).encode()
        cuts = sorted(rnd.sample(range(1, len(data) + 1), min(5, len(data))))
        chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True) if b > a]
        bl = list(iter_blocks(chunks, pf))
        assert _candidates(bl, pf) == _reference(data, WORDS)
        assert bl[-1].base + bl[-1].lines == data.count(b"\n") + (not data.endswith(b"\n"))
        assert b"".join(b.data for b in bl).rstrip(b"\n") == data.rstrip(b"\n")


def test_an_over_long_line_is_one_cut_line(monkeypatch) -> None:
    monkeypatch.setattr(blocks_mod, "MAX_LINE_BYTES", 100)
    pf = Prefilter(WORDS)
    data = b"a step: line\n" + b"NCCL" + b"x" * 500 + b"\nTraceback (most recent call last)\n"
    chunks = [data[i : i + 64] for i in range(0, len(data), 64)]
    bl = list(iter_blocks(chunks, pf))
    assert [n for b in bl for n in b.numbers] == [1, 2, 3]
    assert sum(b.cut for b in bl) == 1
    assert bl[-1].base + bl[-1].lines == 3


@pytest.fixture(scope="module")
def big_log(tmp_path_factory) -> Path:
    """A generated multi-rank log of a few blocks (a megabyte each), ending in an OOM cascade."""
    path = tmp_path_factory.mktemp("blocks") / "job.log"
    generate(str(path), 3.5)
    return path


@needs_fork
def test_the_reader_process_gives_the_same_blocks(big_log: Path) -> None:
    pf = Prefilter(WORDS)
    inline = list(iter_blocks(plain_chunks(open_input(str(big_log)), InputStats("x")), pf))
    stats = InputStats("x")
    fh = open_input(str(big_log))
    forked = []
    for b in blocks_in_process(lambda st: plain_chunks(fh, st), stats, pf):
        # a shared block is valid until the next is asked for: read it now, the lazy way and whole
        assert b.data is None and b.tail(100) == b.load()[-100:]
        assert all(b.raw(i)[0] == b.data[s : b.data.index(b"\n", s)] for i, s in enumerate(b.starts))
        forked.append(b)
    assert len(inline) >= 3
    same = [dataclasses.replace(b, steps=None, ends=list(b.ends), ring=None, at=0) for b in forked]
    assert same == inline
    # the step lines, parsed there, are what parse_step_line finds in the message of each
    parsed = 0
    normalizer = Normalizer()
    for b in forked:
        for i, start in enumerate(b.starts):
            end = b.data.find(b"\n", start)
            text = decode_line(b.data[start:end])
            rec = normalizer.normalize(Line("x", b.numbers[i], text))
            want = parse_step_line(rec.message)
            got = b.steps.get(i)
            assert (got is not None) == (want is not None)
            if got is not None:
                assert got.fits(text, rec.message)
                wanted = {k: v for k, v in want[1].items() if wanted_key(k)}
                assert (got.step, dict(zip(got.keys, got.values, strict=True))) == (want[0], wanted)
                assert set(got.names) == set(want[1])
                parsed += 1
    assert parsed >= 50
    assert stats.bytes == big_log.stat().st_size
    assert not multiprocessing.active_children()


@needs_fork
@pytest.mark.parametrize(
    "log", sorted(SAMPLES.glob("*.log")) + sorted((FIXTURES / "cascades").glob("*.log")), ids=lambda p: p.name
)
def test_reports_are_the_same_with_a_reader_process(log: Path) -> None:
    inline = to_dict(analyse([str(log)], CATALOG, ScanConfig(reader_process_bytes=None)))
    forked = to_dict(analyse([str(log)], CATALOG, ScanConfig(reader_process_bytes=1)))
    assert forked == inline


@needs_fork
def test_reports_are_the_same_with_a_reader_process_on_a_large_log_and_its_gzip(big_log: Path) -> None:
    gz = big_log.with_suffix(".log.gz")
    gz.write_bytes(gzip.compress(big_log.read_bytes(), 1))
    for path in (big_log, gz):
        inline = to_dict(analyse([str(path)], CATALOG, ScanConfig(reader_process_bytes=None)))
        forked = to_dict(analyse([str(path)], CATALOG, ScanConfig(reader_process_bytes=1)))
        assert forked == inline
        assert inline["root_cause"]["category"] == "cuda-oom"


@needs_fork
def test_a_truncated_gzip_read_by_the_reader_process(big_log: Path, tmp_path: Path) -> None:
    data = gzip.compress(big_log.read_bytes(), 1)
    gz = tmp_path / "cut.log.gz"
    gz.write_bytes(data[: len(data) // 2])
    inline = to_dict(analyse([str(gz)], CATALOG, ScanConfig(reader_process_bytes=None)))
    forked = to_dict(analyse([str(gz)], CATALOG, ScanConfig(reader_process_bytes=1)))
    assert forked == inline
    assert any("ends early" in n or "damaged" in n for n in forked["notes"])
    stats = InputStats("x")
    fh = open_input(str(gz))
    with pytest.raises(TruncatedGzip):
        list(blocks_in_process(lambda st: gunzip_chunks(fh, st), stats, Prefilter(WORDS)))


@needs_fork
def test_stopping_early_stops_the_reader_process(big_log: Path) -> None:
    fh = open_input(str(big_log))
    gen = blocks_in_process(lambda st: plain_chunks(fh, st), InputStats("x"), Prefilter(WORDS))
    next(gen)
    assert multiprocessing.active_children()
    gen.close()
    assert not multiprocessing.active_children()


@needs_fork
def test_a_scan_interrupted_mid_file_leaves_no_reader_process(big_log: Path) -> None:
    scanner = Analysis(CATALOG, ScanConfig(reader_process_bytes=1))
    records = scanner.reader.records(str(big_log))
    for _ in range(50):
        next(records)
    records.close()
    assert not multiprocessing.active_children()


def test_a_step_line_parsed_from_the_text_is_used_only_for_the_same_message() -> None:
    normalizer = Normalizer()
    for text, fits in [
        ("(TaskRunner pid=7) step:3 - a:1 - b:np.float64(2.5)", True),
        (
            "(TaskRunner pid=7) step:3 - a:1 - b:2 [repeated 2x across cluster]",
            False,
        ),  # message cut at the end
        ("(TaskRunner pid=7) step:3 - a:1\rTraining Progress:  1%|| 3/9 [00:01<00:02, 1.0s/it]", False),
    ]:
        data = text.encode() + b"\n"
        sl = blocks_mod.parse_step_text(data, 0, StepParser(all_keys=True))
        message = normalizer.normalize(Line("x", 1, decode_line(data[:-1]))).message
        assert sl is not None and sl.fits(text, message) is fits
        if fits:
            assert (sl.step, dict(zip(sl.names, sl.values, strict=True))) == parse_step_line(message)


@needs_fork
def test_the_reader_process_ends_when_the_scan_is_killed(big_log: Path, tmp_path: Path) -> None:
    """kill -9 of the scan (no chance to stop its reader): the reader's next send or receive fails
    and it ends, instead of waiting for ever for a slot nobody will hand back."""
    import signal
    import subprocess
    import time

    code = (
        "import multiprocessing, sys, time\n"
        "from logparse.pipeline import Analysis, ScanConfig\n"
        "from patterns import load_builtin_catalog\n"
        "s = Analysis(load_builtin_catalog(), ScanConfig(reader_process_bytes=1))\n"
        "records = s.reader.records(sys.argv[1])\n"
        "next(records)\n"
        "print(multiprocessing.active_children()[0].pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    root = Path(__file__).resolve().parents[3]
    log = tmp_path / "long.log"  # more blocks than the reader has slots: it must wait for one
    log.write_bytes(big_log.read_bytes() * 4)
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(log)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    reader = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 20
    while Path(f"/proc/{reader}").exists() and time.monotonic() < deadline:
        try:
            os.waitpid(reader, os.WNOHANG)  # (not our child: reaped by init; this only polls)
        except ChildProcessError:
            pass
        if (
            Path(f"/proc/{reader}/status").exists()
            and "State:\tZ" in Path(f"/proc/{reader}/status").read_text()
        ):
            break  # a zombie has ended
        time.sleep(0.05)
    alive = (
        Path(f"/proc/{reader}/status").exists()
        and "State:\tZ" not in Path(f"/proc/{reader}/status").read_text()
    )
    if alive:
        os.kill(reader, signal.SIGKILL)
    assert not alive


@needs_fork
def test_a_reader_done_before_it_was_handed_every_slot(monkeypatch) -> None:
    """A short input: the reader sends its one block and ends while the scanner, descheduled on a busy
    machine, is still handing it the other slots. That is no error (it was a BrokenPipeError: exit 2
    on a healthy 3 KB log, now and then)."""
    import multiprocessing.connection
    import time

    send = multiprocessing.connection.Connection.send

    def slow_after_the_first_slot(self, obj) -> None:
        send(self, obj)
        if obj == 0:
            time.sleep(0.05)

    monkeypatch.setattr(multiprocessing.connection.Connection, "send", slow_after_the_first_slot)
    log = SAMPLES / "torchrun-healthy.log"
    fh = open_input(str(log))
    stats = InputStats("x")
    blocks = list(blocks_in_process(lambda st: plain_chunks(fh, st), stats, Prefilter(WORDS)))
    assert len(blocks) == 1 and stats.bytes == log.stat().st_size
    assert not multiprocessing.active_children()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the ring is shared with forked readers")
def test_the_first_reader_keeps_only_the_cut_blocks_no_process_took() -> None:
    """_cut_one keeps the bytes of the blocks it cut (making one of them itself needs no copy out of the
    ring), past KEPT_BLOCKS only those still RAW: a block another process took is dropped, and one
    without its kept bytes is read from the ring, the same bytes."""
    ring = blocks_mod._Ring(multiprocessing.get_context("fork"), 10)
    cut = iter([(f"block {n}\n".encode(), False) for n in range(10)])
    free = collections.deque(range(10))
    kept: dict[int, tuple[int, bytes]] = {}
    stats = InputStats("job.log")
    for n in range(blocks_mod.KEPT_BLOCKS):
        assert blocks_mod._cut_one(cut, ring, free, n, stats, kept) is None
    taken = [ring.claim(), ring.claim()]  # two blocks made by other processes
    assert blocks_mod._cut_one(cut, ring, free, blocks_mod.KEPT_BLOCKS, stats, kept) is None
    assert set(kept) == ring.raw_slots() and not set(taken) & set(kept)
    for slot in taken:
        number, size, _, _ = ring.fields(slot)
        assert ring.bytes_of(slot, size) == f"block {number}\n".encode()
    assert all(data == f"block {number}\n".encode() for number, data in kept.values())
