"""Gzip read as gzip reads it (members, padding, garbage, truncation) in one process
and in the reader process; data that is NUL or control bytes on and on (/dev/zero, a gzip bomb) stops
with a note; holes of a sparse file are skipped, not read. Each case: the report, its notes, the exit
code, no traceback."""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

import pytest

from logparse.read import sources as reader
from logparse.read.sources import InputStats, iter_lines
from tests.conftest import SAMPLES
from tests.logparse.test_robustness import OOM, root_id, scan_json

SAMPLE = SAMPLES / "ray-actor-exception.log"
SAMPLE_LINES = SAMPLE.read_bytes().count(b"\n")
# the reader process for any input at all (it starts at 32 MB by default)
READER_ON = {"VERL_LOGSCAN_READER_MB": "0.0001"}
READER_OFF = {"VERL_LOGSCAN_READER_MB": "off"}


def gz_variants() -> dict[str, tuple[bytes, int, str | None]]:
    """name -> (the .gz bytes, the lines a scan must read, the note it must carry or None)."""
    one = gzip.compress(SAMPLE.read_bytes())
    filler = gzip.compress(b"".join(f"INFO worker heartbeat {i}\n".encode() for i in range(20000)))
    return {
        "valid": (one, SAMPLE_LINES, None),
        "two-members": (one + one, 2 * SAMPLE_LINES, None),
        "zero-padding": (one + b"\x00" * 1024, SAMPLE_LINES, None),  # tape blocks: gzip skips them
        "padding-between-members": (one + b"\x00" * 512 + one, 2 * SAMPLE_LINES, None),
        "trailing-garbage": (one + b"garbage after the data\n", SAMPLE_LINES, "are not gzip; ignored"),
        "second-member-cut": (one + filler[: len(filler) // 2], None, "compressed data ends early"),
    }


@pytest.mark.slow
@pytest.mark.parametrize("process", ["inline", "reader-process"])
@pytest.mark.parametrize("case", sorted(gz_variants()))
def test_gzip_members_padding_garbage_and_truncation(
    tmp_path: Path, case: str, process: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, lines, note = gz_variants()[case]
    (tmp_path / "s.log.gz").write_bytes(data)
    env = READER_ON if process == "reader-process" else READER_OFF
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    run = scan_json(tmp_path, "s.log.gz")
    assert run.rc == 1, run.stderr
    run.check_clean()
    report = run.json()
    assert root_id(report) == "cuda-oom"
    notes = report["notes"]
    assert not any("ends early" in n for n in notes) or note == "compressed data ends early", notes
    if note is None:
        assert not any("gzip" in n or "ends early" in n for n in notes), notes
    else:
        assert any(note in n for n in notes), notes
    if lines is not None:
        assert report["inputs"][0]["lines"] == lines
    else:  # the first member and the part of the second before the cut
        assert SAMPLE_LINES < report["inputs"][0]["lines"] < SAMPLE_LINES + 20000


def test_a_cut_gzip_header_is_truncated_data(tmp_path: Path) -> None:
    one = gzip.compress(SAMPLE.read_bytes())
    (tmp_path / "s.log.gz").write_bytes(one + one[:5])  # a second member's header, cut
    run = scan_json(tmp_path, "s.log.gz")
    assert run.rc == 1
    run.check_clean()
    report = run.json()
    assert report["inputs"][0]["lines"] == SAMPLE_LINES
    assert any("ends early" in n for n in report["notes"])


def test_dev_zero_stops_with_a_note(tmp_path: Path) -> None:
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    run = scan_json(tmp_path, "/dev/zero")  # (the hang guard of run_process bounds it, were it to hang)
    assert run.rc == 5  # no log line read (EXIT_NO_INPUT)
    run.check_clean()
    report = run.json()
    assert report["status"] == "empty"
    assert report["inputs"][0]["lines"] == 0
    assert report["inputs"][0]["bytes"] == reader.MAX_BINARY_RUN_BYTES
    assert any(
        "NUL or control bytes in a row with no text" in n and "stopped reading" in n for n in report["notes"]
    ), report["notes"]
    assert not any("NUL byte(s) dropped" in n for n in report["notes"])  # one note, not two


@pytest.mark.slow
def test_gzip_bomb_of_zeros_stops_after_the_cap(tmp_path: Path) -> None:
    """A .gz of 300 MB of zeros after an OOM line (300 KB on disk): the line is read, the zeros stop
    at MAX_BINARY_RUN_BYTES of decompressed data."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = b"\x00" * (4 << 20)
    with open(tmp_path / "bomb.log.gz", "wb") as fh:
        fh.write(z.compress(OOM.encode() + b"\n"))
        for _ in range(75):
            fh.write(z.compress(zeros))
        fh.write(z.compress(b"\nINFO after the zeros\n"))
        fh.write(z.flush())
    assert (tmp_path / "bomb.log.gz").stat().st_size < 1 << 20
    run = scan_json(tmp_path, "bomb.log.gz")
    assert run.rc == 1
    run.check_clean()
    report = run.json()
    assert root_id(report) == "cuda-oom"
    assert any("NUL or control bytes in a row" in n for n in report["notes"]), report["notes"]


def test_control_bytes_without_line_ends_stop_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "MAX_BINARY_RUN_BYTES", 4 << 20)
    data = b"INFO a line\n" + b"\x01\x02\x03\x04" * (3 << 20) + b"\nINFO never reached\n"
    stats = InputStats("ctl.log")
    import io

    lines = list(iter_lines(io.BytesIO(data), "ctl.log", stats))
    assert lines[0].text == "INFO a line"
    assert not any("never reached" in line.text for line in lines)
    assert any("stopped reading there" in n for n in stats.notes)


def test_a_hole_of_nuls_in_text_is_still_read_through(monkeypatch: pytest.MonkeyPatch) -> None:
    # below the cap, NUL bytes are dropped and the text after them is read (a copy-truncated log)
    monkeypatch.setattr(reader, "MAX_BINARY_RUN_BYTES", 8 << 20)
    import io

    data = b"INFO start\n" + b"\x00" * (5 << 20) + b"\n" + OOM.encode() + b"\n"
    stats = InputStats("hole.log")
    lines = list(iter_lines(io.BytesIO(data), "hole.log", stats))
    assert lines[-1].text == OOM
    assert any("NUL byte(s) dropped" in n for n in stats.notes)


def test_a_sparse_hole_is_skipped_not_read(tmp_path: Path) -> None:
    """A log copy-truncated while its writer kept its offset: 3 GB of hole, then the error. The hole is
    never read (SEEK_DATA), so it neither stops the input nor takes long; the report says so."""
    path = tmp_path / "sparse.log"
    with open(path, "wb") as fh:
        fh.write(b"INFO start\n")
        fh.truncate(3 << 30)
        fh.seek(3 << 30)
        fh.write(OOM.encode() + b"\n")
    if os.stat(path).st_blocks * 512 > 64 << 20:
        pytest.skip("this file system does not make sparse files")
    run = scan_json(tmp_path, "sparse.log")
    assert run.rc == 1
    run.check_clean()
    report = run.json()
    assert root_id(report) == "cuda-oom"
    assert report["inputs"][0]["bytes"] == path.stat().st_size
    assert any("skipped" in n and "holes" in n for n in report["notes"]), report["notes"]
    assert not any("stopped reading" in n for n in report["notes"])
