"""Finding counts are true counts: the bound on distinct messages never caps how often a finding was seen."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest

from logparse.observe.hits import OVERFLOW_KEY, FindingCollector, Hit
from logparse.read.normalize import Normalizer
from logparse.read.sources import Line
from patterns import load_catalog
from tests.conftest import run_cli

OOM = (
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.11 GiB of which 1.00 GiB is free.\n"
)
# a watchdog line whose op name varies in letters (masking keeps letters), so every line is a new message
WATCHDOG = (
    "[rank{rank}]:[E1003 18:37:01.832146912 ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum={n}, OpType=ALLREDUCE_{word}, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\n"
)


def _varied_watchdog_log(path: Path, hits: int) -> None:
    rnd = random.Random(7)
    with path.open("w") as fh:
        fh.write(OOM)
        for n in range(hits):
            word = "".join(rnd.choice(string.ascii_lowercase) for _ in range(8))
            fh.write(WATCHDOG.format(rank=n % 8, n=n, word=word))


@pytest.mark.slow
def test_symptom_count_is_the_true_count_past_the_group_limit(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    _varied_watchdog_log(log, 6_000)
    report = json.loads(run_cli(["scan", str(log), "--format", "json"]).stdout)
    (symptom,) = report["symptoms"]
    assert symptom["id"] == "nccl-watchdog-timeout"
    assert symptom["count"] == 6_000 and symptom["ranks"] == list(range(8))
    assert sum(f["count"] for f in report["findings"] if f["id"] == "nccl-watchdog-timeout") == 6_000
    assert any("counted in their entry's row" in n for n in report["notes"])
    text = run_cli(["scan", str(log)]).stdout
    assert "nccl-watchdog-timeout x6000 (ranks 0-7)" in text


def test_collector_overflow_group_per_entry_is_bounded() -> None:
    catalog = load_catalog([])
    entry = catalog.get("nccl-watchdog-timeout")
    collector = FindingCollector(max_groups=3)
    norm = Normalizer()
    for n in range(50):
        rec = norm.normalize(
            Line("job.log", n + 1, WATCHDOG.format(rank=n % 4, n=n, word="x" * (n + 1)).strip())
        )
        collector.add(Hit(entry, rec, {}, n, None, []))
    assert len(collector.groups) == 4  # three messages and one overflow group for the entry
    overflow = collector.groups[(entry.id, OVERFLOW_KEY)]
    assert overflow.count == 47 and collector.overflow == 47
    assert overflow.ranks == {0, 1, 2, 3}
    assert sum(g.count for g in collector.groups.values()) == 50
