"""Candidate lines read apart (logparse.read.pre_records) give the records the scanner's normaliser
gives, line by line, on every line of every sample and fixture, with and without a default origin, in
order (a full date read apart sets the scanner's year; a year-less timestamp is never read apart)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from logparse.observe.hits import mask
from logparse.read.normalize import Normalizer, Origin
from logparse.read.pre_records import AT, FIELDS, PreReader
from logparse.read.sources import MAX_LINE_BYTES, Line, decode_line
from tests.conftest import FIXTURES, SAMPLES

LOGS = sorted(SAMPLES.glob("*.log")) + sorted(p for p in FIXTURES.rglob("*.log") if p.is_file())
DEFAULT = Origin(rank=3, local_rank=1, pid=77, node="node-9", actor="WorkerDict")


def line_ends(data: bytes, starts: list[int]) -> list[int]:
    """Where each line at `starts` ends (its newline, or the end of `data`), as the prefilter says."""
    return [e if (e := data.find(b"\n", s)) >= 0 else len(data) for s in starts]


def records_both_ways(data: bytes, default: Origin | None) -> tuple[list, list, int]:
    """The records of every line of `data`: normalised in order by one normaliser, and built from the
    rows read apart (each line without one normalised by the same in-order normaliser); and how many
    rows there were."""
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 10 and i + 1 < len(data)]
    columns = PreReader().read(data, starts, line_ends(data, starts), ())
    plain, apart = Normalizer(), Normalizer()
    want, got = [], []
    rows = 0
    for i, start in enumerate(starts):
        end = data.find(b"\n", start)
        line = Line(
            "job.log", i + 1, decode_line(data[start : end if end >= 0 else len(data)][:MAX_LINE_BYTES])
        )
        want.append(plain.normalize(line, 0, default))
        if columns.has(i):
            rows += 1
            got.append(columns.record(i, line, default, apart))
        else:
            got.append(apart.normalize(line, 0, default))
        assert apart.year == plain.year
    return want, got, rows


@pytest.mark.parametrize("path", LOGS, ids=lambda p: str(p.relative_to(p.parents[1])))
@pytest.mark.parametrize("default", [None, DEFAULT], ids=["alone", "in-a-folder"])
def test_every_line_read_apart_is_the_record_the_normaliser_gives(path: Path, default: Origin | None) -> None:
    data = path.read_bytes()
    if not data.endswith(b"\n"):
        data += b"\n"
    want, got, _ = records_both_ways(data, default)
    assert [(r.origin, r.message, r.line.text) for r in got] == [
        (r.origin, r.message, r.line.text) for r in want
    ]


def test_which_lines_are_read_apart() -> None:
    lines = [
        # Ray prefix, Python logging's full date, a rank in the message: read apart, its year set
        b"\x1b[36m(WorkerDict pid=400000, ip=10.0.0.1)\x1b[0m INFO:2025-08-22 23:08:02,898:[Rank 0] Saved model",
        # glog's timestamp has no year: it takes the scanner's
        b"[rank1]:[E1003 18:37:01.833011111 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective",
        # carriage returns: the message is not a plain piece of the line
        b"step 1\rstep 2\rRuntimeError: boom",
        # Ray's repeat note: read apart, the message without it
        b"(raylet) Some worker died [repeated 7x across cluster]",
        b"plain text with no prefix",
    ]
    data = b"\n".join(lines) + b"\n"
    want, got, rows = records_both_ways(data, None)
    assert got == want and rows == 3
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 10 and i + 1 < len(data)]
    # the last one is a progress line: no row
    columns = PreReader().read(data, starts, line_ends(data, starts), {4})
    assert [columns.has(i) for i in range(5)] == [True, False, False, True, False]
    assert columns.ints[AT] > 0 and columns.ints[FIELDS * 3 + AT] == len("(raylet) ")
    assert math.isnan(columns.times[3]) and columns.times[0] > 0
    assert want[0].origin.rank == 0 and want[0].origin.node == "10.0.0.1"
    assert want[3].origin.repeat == 8 and want[3].message == "Some worker died"


def test_a_possible_hit_is_masked_where_it_is_read_apart() -> None:
    data = (
        b"(WorkerDict pid=12, ip=10.0.0.1) torch.OutOfMemoryError: CUDA out of memory. Tried 3.56 GiB\n"
        b"[rank1]:[E1003 18:37:01.833011111 ProcessGroupNCCL.cpp:607] Watchdog caught collective\n"
        b"INFO:2025-08-22 23:08:02,898:[Rank 0] Saved model to /ckpt/global_step_10/actor/model.pt\n"
    )
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 10 and i + 1 < len(data)]
    hit, saved = frozenset({1}), frozenset({2})
    asked = []

    def masker(ids: frozenset[int], message: str) -> str | None:
        asked.append(message)
        return mask(message) if ids == hit else None

    columns = PreReader(masker).read(data, starts, line_ends(data, starts), (), [hit, hit, saved])
    assert columns.masks == ["torch.OutOfMemoryError: CUDA out of memory. Tried <*> GiB", None, None]
    assert len(asked) == 2  # the glog line has no row (its timestamp has no year): not asked
    line = Line("job.log", 1, decode_line(data[: data.index(b"\n")]))
    rec = columns.record(0, line, None, Normalizer())
    assert rec.masked == mask(rec.message) and rec == Normalizer().normalize(line)
