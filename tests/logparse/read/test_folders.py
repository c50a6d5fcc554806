"""Folders as one job: a torchrun --log-dir layout and a Ray session folder (real captures)."""

from __future__ import annotations

from pathlib import Path

from logparse.pipeline import Analysis
from logparse.read.sources import expand_inputs
from patterns import load_builtin_catalog
from tests.conftest import FIXTURES

CATALOG = load_builtin_catalog()


def scan_folder(folder: Path) -> tuple[Analysis, list, object]:
    scanner = Analysis(CATALOG)
    order = []
    feed = scanner.feed_record

    def spy(rec):
        order.append((rec.line.source, rec.line.number, rec.origin.time, rec.message))
        feed(rec)

    scanner.feed_record = spy
    scanner.feed_inputs(expand_inputs([str(folder)]))
    return scanner, order, scanner.report()


def test_torchrun_log_dir_is_one_job_with_ranks_attributed() -> None:
    folder = FIXTURES / "torchrun" / "logdir"
    scanner, order, report = scan_folder(folder)
    attributed = {
        Path(p).relative_to(folder).as_posix(): o.local_rank for p, o in scanner.reader.attribution.items()
    }
    for rank in range(4):
        for name in ("stdout.log", "stderr.log"):
            assert attributed[f"none_x3hri268/attempt_0/{rank}/{name}"] == rank
    for rank in range(3):
        assert attributed[f"none_x3hri268/attempt_0/{rank}/error.json"] == rank
    assert "console.log" not in attributed  # the launcher's own output belongs to no rank
    rc = report.root_cause
    assert rc.category == "data-error" and rc.local_rank == 1 and rc.rank == 1
    assert "FileNotFoundError" in rc.message
    # ranks 0 and 2 lost their peer: symptoms on those ranks
    lost = next(s for s in report.symptoms if s.id == "gloo-peer-connection-lost")
    assert lost.ranks == (0, 2)
    # merged: the rank's error comes before the launcher's ChildFailedError summary
    seq = [(src, msg) for src, _, _, msg in order]
    err = next(i for i, (src, msg) in enumerate(seq) if "FileNotFoundError" in msg)
    child = next(
        i for i, (src, msg) in enumerate(seq) if "ChildFailedError" in msg and src.endswith("console.log")
    )
    assert err < child


def test_ray_session_folder_is_one_job_merged_by_time() -> None:
    folder = FIXTURES / "ray" / "session_logs"
    scanner, order, report = scan_folder(folder)
    by_name = {Path(p).name: o for p, o in scanner.reader.attribution.items()}
    assert by_name["raylet.out"].actor == "raylet"
    assert by_name["gcs_server.out"].actor == "gcs_server"
    for name, origin in by_name.items():
        if name.startswith(("worker-", "python-core-worker-")):
            pid = (
                int(name.rsplit("-", 1)[-1].split(".")[0])
                if name.startswith("worker-")
                else int(name.rsplit("_", 1)[-1].split(".")[0])
            )
            assert origin.pid == pid, name
    # records that carry a timestamp come out in time order across the files
    times = [t for _, _, t, _ in order if t is not None]
    assert times == sorted(times) and len({src for src, _, t, _ in order if t is not None}) >= 2
    assert report.status == "failed" and report.root_cause.category in ("ray-error", "host-oom")


def test_rank_exception_is_the_cause_and_peers_are_symptoms_with_ranks() -> None:
    from tests.conftest import SAMPLES

    scanner = Analysis(CATALOG)
    scanner.feed_inputs([str(SAMPLES / "torchrun-rank-exception.log")])
    report = scanner.report()
    rc = report.root_cause
    assert rc.rank == 2 and "Loss is nan" in rc.message
    # its own traceback: every evidence line of the traceback is rank 2's
    tb_lines = [e.text for e in rc.evidence if e.text.startswith("[rank")]
    assert tb_lines and all(t.startswith("[rank2]:") for t in tb_lines)
    peers = next(s for s in report.symptoms if s.id == "gloo-peer-connection-lost")
    assert set(peers.ranks) == {1, 3}


def test_interleaved_tracebacks_keep_one_rank_each() -> None:
    scanner = Analysis(CATALOG)
    scanner.feed_inputs([str(FIXTURES / "torchrun" / "tee-interleaved.log")])
    report = scanner.report()
    rc = report.root_cause
    assert rc.traceback is not None and rc.local_rank is not None
    prefix = f"[default{rc.local_rank}]:"
    frames = [e for e in rc.evidence if 'File "' in e.text]
    assert frames and all(e.text.startswith(prefix) for e in frames)
