"""StallObserver: what it remembers per process stays bounded however many processes a log names."""

from __future__ import annotations

from logparse.observe import stalls as stalls_mod
from logparse.observe.stalls import StallObserver
from logparse.read.normalize import Normalizer
from logparse.read.sources import Line


def test_the_names_of_pids_are_remembered_up_to_max_names(monkeypatch) -> None:
    """A long-lived cluster names a new worker pid every few lines: the first MAX_NAMES are named, the
    rest are not remembered (the memory does not grow with the log)."""
    monkeypatch.setattr(stalls_mod, "MAX_NAMES", 8)
    observer = StallObserver()
    norm = Normalizer()
    for i in range(20):
        observer.feed(
            norm.normalize(Line("job.log", i + 1, f"(WorkerDict pid={1000 + i}, ip=10.0.0.1) hello"), i)
        )
    assert len(observer._names) == 8
    assert observer._names[1000] == "WorkerDict pid=1000"
    assert 1019 not in observer._names
