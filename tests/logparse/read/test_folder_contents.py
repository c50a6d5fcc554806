"""What `scan FOLDER` reads, and what it says it left out: rotated logs (`train.log.1`) and `.stdout` /
`.stderr` names are read (they were ignored: HEALTHY, no file named); a file not named as a log, a
symbolic link out of the folder (one to /etc/hostname was read) and a FIFO or device (skipped without a
word) are each left out with a note; a `.zst` log is read; a compressed file without its suffix is named."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
import zstandard

from logparse.process import EXIT_ERROR, EXIT_FAILURE_FOUND, EXIT_NO_INPUT
from logparse.read.sources import expand, expand_inputs
from tests.conftest import run_cli

OOM = "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
START = "2025-01-01 12:00:00 INFO start\n"


def scan(folder: Path) -> tuple[int, dict]:
    result = run_cli(["scan", str(folder), "--format", "json"])
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}


@pytest.mark.parametrize(
    "name", ["train.log.1", "worker.stderr", "driver.stdout", "train.log.2.gz", "stdout.3"]
)
def test_rotated_and_stdout_stderr_names_are_read(tmp_path: Path, name: str) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "train.log").write_text(START)
    data = (START + OOM).encode()
    (logs / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    code, report = scan(logs)
    assert code == EXIT_FAILURE_FOUND and report["root_cause"]["id"] == "cuda-oom"
    assert report["root_cause"]["evidence"][-1]["source"].endswith(name)


def test_rotated_parts_are_read_oldest_first() -> None:
    from logparse.read.sources import _read_order

    names = ["train.log", "train.log.1", "train.log.10", "train.log.2", "a.log", "train.log.2025-01-02"]
    assert sorted(names, key=_read_order) == [
        "a.log",
        "train.log.10",
        "train.log.2",
        "train.log.1",
        "train.log.2025-01-02",
        "train.log",
    ]


def test_files_left_out_are_named_in_a_note(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "sub").mkdir(parents=True)
    (logs / "job.log").write_text(START + OOM)
    for name in ("model.safetensors", "sub/plot.png", "notes.md"):
        (logs / name).write_bytes(b"x")
    outside = tmp_path / "secret.log"
    outside.write_text("INFO a file outside the folder\n")
    (logs / "escape.log").symlink_to(outside)
    (logs / "hostname.log").symlink_to("/etc/hostname")
    (logs / "inside.log").symlink_to(logs / "job.log")  # a link to a file listed anyway: read once
    os.mkfifo(logs / "pipe.log")
    (logs / "zero.log").symlink_to("/dev/zero")
    got = expand([str(logs)])
    assert [Path(f).name for f in got.files] == ["job.log"]
    notes = " | ".join(got.notes)
    assert "3 file(s) not named as a log skipped" in notes and "sub/plot.png" in notes
    assert "3 symbolic link(s) leading out of the folder skipped: escape.log, hostname.log, zero.log" in notes
    assert "1 entr(y/ies) that are no regular file skipped (a FIFO, device or socket): pipe.log" in notes
    code, report = scan(logs)  # (the FIFO is never opened: this would wait forever)
    assert code == EXIT_FAILURE_FOUND
    assert any("not named as a log" in n for n in report["notes"])
    assert (
        report["inputs"] == [{"bytes": len(START + OOM), "lines": 2, "path": str(logs / "job.log")}]
        or len(report["inputs"]) == 1
    )


def test_a_folder_of_no_log_says_what_it_holds(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "model.safetensors").write_bytes(b"x")
    result = run_cli(["scan", str(logs), "--format", "json"])
    assert result.exit_code == EXIT_ERROR
    assert "folder has no log files" in result.stderr and "model.safetensors" in result.stderr
    with pytest.raises(Exception, match="no log files"):
        expand_inputs([str(logs)])


@pytest.mark.parametrize("frames", [1, 3])
def test_a_zst_log_is_read(tmp_path: Path, frames: int) -> None:
    """A `.zst` log gave "binary data"."""
    data = (START * 500 + OOM).encode()
    third = len(data) // frames
    parts = [data[i * third : (i + 1) * third if i < frames - 1 else len(data)] for i in range(frames)]
    (tmp_path / "job.log.zst").write_bytes(b"".join(zstandard.ZstdCompressor().compress(p) for p in parts))
    code, report = scan(tmp_path / "job.log.zst")
    assert code == EXIT_FAILURE_FOUND and report["root_cause"]["id"] == "cuda-oom"
    assert report["root_cause"]["evidence"][-1]["line"] == 501


def test_a_truncated_or_mislabelled_zst(tmp_path: Path) -> None:
    data = (START * 20_000 + OOM).encode()
    blob = zstandard.ZstdCompressor().compress(data)
    (tmp_path / "cut.log.zst").write_bytes(blob[: len(blob) // 2])
    code, report = scan(tmp_path / "cut.log.zst")
    assert code == 0 and any("compressed data ends early" in n for n in report["notes"])
    (tmp_path / "fake.log.zst").write_text(START)
    result = run_cli(["scan", str(tmp_path / "fake.log.zst")])
    assert result.exit_code == EXIT_ERROR and "has a .zst name but is not zstd data" in result.stderr


@pytest.mark.parametrize(
    "blob,named",
    [
        (
            zstandard.ZstdCompressor().compress((START + OOM).encode()),
            "zstd-compressed data without a .zst name",
        ),
        (gzip.compress((START + OOM).encode()), "gzip-compressed data without a .gz name"),
    ],
)
def test_compressed_data_under_a_plain_name_is_named(tmp_path: Path, blob: bytes, named: str) -> None:
    (tmp_path / "job.log").write_bytes(blob)
    code, report = scan(tmp_path / "job.log")
    assert code == EXIT_NO_INPUT
    assert any(named in n for n in report["notes"]), report["notes"]
