"""Binary data is found per region, not per file: a log whose text is followed (or interrupted) by
binary data is read up to it, the span is skipped with a note saying where and how much, and the text
after it is read, every line keeping its number in the file. (15 KB of real log and then random bytes
was skipped whole: EMPTY, exit 5, the CUDA OOM missed.) Binary data at the head of a file is a region
too (64 KB of random bytes before a log also gave EMPTY); a file that starts with a binary format's
magic (an ELF core dump, compressed data without its suffix) is still skipped whole
(tests/logparse/test_robustness.py), and a short run of garbage inside text stays text."""

from __future__ import annotations

import gzip
import io
import random
from pathlib import Path

import pytest

from logparse.process import EXIT_FAILURE_FOUND
from logparse.read import sources as reader
from logparse.read.sources import MIN_BINARY_SPAN, InputStats, decode_line, iter_lines, sniff
from tests.conftest import SAMPLES
from tests.logparse.test_robustness import root_id, scan_json

SAMPLE = SAMPLES / "ray-actor-exception.log"  # 15 KB, its CUDA OOM on line 88
OOM_LINE = 88
READER_ON = {"VERL_LOGSCAN_READER_MB": "0.0001"}


def noise(size: int, seed: int = 5) -> bytes:
    return random.Random(seed).randbytes(size)


def read(data: bytes, chunk: int | None = None) -> tuple[list[str], list[str]]:
    """(line texts, notes) of `data` read as a file is, in chunks of `chunk` bytes when given."""
    stats = InputStats("x.log")
    stream = io.BytesIO(data)
    if chunk is not None:
        stream = Trickle(data, chunk)
    return [line.text for line in iter_lines(stream, "x.log", stats)], stats.notes


class Trickle(io.RawIOBase):
    """A stream that gives at most `n` bytes a read (chunk boundaries anywhere)."""

    def __init__(self, data: bytes, n: int):
        self.data, self.n, self.pos = data, n, 0

    def readable(self) -> bool:
        return True

    def read1(self, size: int = -1) -> bytes:
        out = self.data[self.pos : self.pos + self.n]
        self.pos += len(out)
        return out

    read = read1


@pytest.mark.parametrize("process", ["inline", "reader-process"])
def test_a_log_with_a_binary_tail_is_read_up_to_it(
    tmp_path: Path, process: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SAMPLE.read_bytes()
    (tmp_path / "job.log").write_bytes(log + noise(200_000))
    if process == "reader-process":
        for k, v in READER_ON.items():
            monkeypatch.setenv(k, v)
    run = scan_json(tmp_path, "job.log")
    assert run.rc == EXIT_FAILURE_FOUND, run.stderr
    run.check_clean()
    report = run.json()
    assert root_id(report) == "cuda-oom" and report["root_cause"]["error_line"]["line"] == OOM_LINE
    assert (
        f"job.log: 200,000 bytes of binary data skipped from byte {len(log):,} (to the end of the input"
        in (" ".join(report["notes"]))
    )
    assert not any("NUL byte(s) dropped" in n for n in report["notes"])  # those were the span's


def test_text_after_a_binary_span_is_read_with_its_line_numbers(tmp_path: Path) -> None:
    log = SAMPLE.read_bytes()
    head, tail = log[: log.index(b"\n", 2000) + 1], log[log.index(b"\n", 2000) + 1 :]
    garbage = noise(100_000) + b"\n"
    (tmp_path / "job.log").write_bytes(head + garbage + tail)
    run = scan_json(tmp_path, "job.log")
    assert run.rc == EXIT_FAILURE_FOUND, run.stderr
    report = run.json()
    assert root_id(report) == "cuda-oom"
    error = report["root_cause"]["error_line"]
    lines = (head + garbage + tail).split(b"\n")
    assert lines[error["line"] - 1].decode().endswith(error["text"])  # the file's own line number
    assert any(
        f"{len(garbage):,} bytes of binary data skipped from byte {len(head):,} (read on from the text" in n
        for n in report["notes"]
    ), report["notes"]


def test_the_last_line_before_binary_data_without_a_newline_is_kept() -> None:
    log = SAMPLE.read_bytes().split(b"\n")
    data = b"\n".join(log[:OOM_LINE]) + noise(50_000)  # the OOM line runs straight into the binary data
    lines, notes = read(data)
    # (up to the first control byte or bad UTF-8: a few random bytes may look like text and stay)
    kept, expected = lines[OOM_LINE - 1], log[OOM_LINE - 1].decode()
    assert kept.startswith(expected) and len(kept) - len(expected) < 32
    assert len(notes) == 1 and "binary data skipped" in notes[0]


def test_line_numbers_and_the_log_text_do_not_depend_on_chunk_boundaries() -> None:
    """Read in pieces of 1 byte to 64 KB (a pipe), every line of the log is read at its line number.
    (Binary data is looked for from the first chunk with a NUL byte: in small pieces, the few random
    bytes before it may be read as a line of garbage, as before; a file's 1 MB chunks hold one.)"""
    log = SAMPLE.read_bytes()
    data = log + noise(30_000) + b"\n" + log + noise(3_000, seed=9)
    whole, _ = read(data)
    assert len(whole) == data.count(b"\n") + 1
    log_lines = {decode_line(line) for line in log.split(b"\n") if line}
    kept = [i for i, text in enumerate(whole) if text in log_lines]
    assert len(kept) == 2 * len([line for line in log.split(b"\n") if line])
    oom = decode_line(log.split(b"\n")[OOM_LINE - 1])
    assert whole.count(oom) == 2
    for chunk in (1, 7, 100, 4096, 65536):
        lines, notes = read(data, chunk)
        assert len(lines) == len(whole), chunk
        assert [lines[i] for i in kept] == [whole[i] for i in kept], chunk
        assert sum("binary data skipped" in n for n in notes) == 2, (chunk, notes)


def test_a_short_run_of_garbage_inside_text_stays_text() -> None:
    """Less than MIN_BINARY_SPAN bytes of binary lines: read as text (decoded with U+FFFD) as before."""
    garbage = b"\x01\x02\x00\x03\xff\xfe junk\n" * (MIN_BINARY_SPAN // 20)
    data = b"INFO start of the job, before the garbage\n" + garbage + b"INFO the job goes on after it\n"
    lines, notes = read(data)
    assert (
        len(lines) == 2 + MIN_BINARY_SPAN // 20
        and lines[1].endswith("junk")
        and not any("binary data skipped" in n for n in notes)
    )


def test_a_span_is_capped_like_any_run_without_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "MAX_BINARY_RUN_BYTES", 1 << 20)
    data = (
        b"INFO a line of the log before the data\n"
        + noise(3 << 20)
        + b"\nINFO a line never reached by the scan\n"
    )
    lines, notes = read(data)
    assert lines[0].startswith("INFO a line") and not any("never reached" in t for t in lines)
    assert any("stopped reading there" in n for n in notes)


def test_a_gzip_log_with_a_binary_tail(tmp_path: Path) -> None:
    (tmp_path / "job.log.gz").write_bytes(gzip.compress(SAMPLE.read_bytes() + noise(100_000)))
    run = scan_json(tmp_path, "job.log.gz")
    assert run.rc == EXIT_FAILURE_FOUND
    assert root_id(run.json()) == "cuda-oom"


def test_the_first_bytes_decide_only_the_start() -> None:
    """sniff calls an input binary only when it starts so: a first line of text makes it a log."""
    log = SAMPLE.read_bytes()
    assert sniff(log[:15_000] + noise(60_000)) == "utf-8"
    assert sniff(noise(60_000) + log) == "binary"


# -- binary data at the head of a log: a region, as at its tail ------------------------------------------


@pytest.mark.parametrize("process", ["inline", "reader-process"])
@pytest.mark.parametrize(
    "head",
    [noise(64 << 10), b"\x01\x02\x03\x04\x05\x06" * 220, b"\x00" * 100 + noise(4096) + b"\n"],
    ids=["64KB-random", "1.3KB-control", "nul-and-random"],
)
def test_a_binary_head_does_not_skip_the_log_after_it(
    tmp_path: Path, head: bytes, process: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """64 KB of random bytes before a log, or 1.3 KB of control bytes before a short one, gave EMPTY
    (exit 5): the first bytes decided for the whole file."""
    if process == "reader-process":
        for key, value in READER_ON.items():
            monkeypatch.setenv(key, value)
    log = SAMPLE.read_bytes()
    (tmp_path / "job.log").write_bytes(head + log * (1 if len(head) < 8192 else 24))
    run = scan_json(tmp_path, "job.log")
    assert run.rc == EXIT_FAILURE_FOUND, run.stderr
    report = run.json()
    assert root_id(report) == "cuda-oom"
    assert any("binary data skipped from byte 0" in n for n in report["notes"]), report["notes"]


def test_thirty_thousand_binary_spans_are_summed_up_in_one_note() -> None:
    """30,000 spans gave 30,000 notes (a 5 MB JSON and a 5 MB HTML report)."""
    text = b"INFO a clean line of the log that ends a span\n"
    data = (noise(600, seed=3).replace(b"\n", b"\x01") + b"\n" + text) * 30_000
    lines, notes = read(data)
    span_notes = [n for n in notes if "binary data" in n]
    assert len(span_notes) == reader.MAX_SPAN_NOTES + 1, span_notes[-2:]
    assert "29,997 more spans of binary data" in span_notes[-1]
    assert sum(t == text.decode().strip() for t in lines) == 30_000
