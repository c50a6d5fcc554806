from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logparse.read import sources as reader
from logparse.read.sources import (
    ANSI_RE,
    InputError,
    InputStats,
    expand_inputs,
    iter_lines,
    read_input,
    strip_ansi,
)


def lines_of(data: bytes) -> list[str]:
    stats = InputStats("x")
    out = [line.text for line in iter_lines(io.BytesIO(data), "x", stats)]
    assert stats.lines == len(out)
    assert stats.bytes == len(data)
    return out


def test_crlf_invalid_utf8_and_ansi() -> None:
    data = b"a\r\n\x1b[36m(TaskRunner pid=1)\x1b[0m b\r\nbad \xff\xfe byte\nlast-no-newline"
    assert lines_of(data) == ["a", "(TaskRunner pid=1) b", "bad \ufffd\ufffd byte", "last-no-newline"]


def test_progress_bar_carriage_returns_are_kept_in_text() -> None:
    # the normaliser, not the reader, keeps the last \r segment (after the Ray prefix)
    assert lines_of(b"x \rTraining Progress: 1/4\rTraining Progress: 2/4\n") == [
        "x \rTraining Progress: 1/4\rTraining Progress: 2/4"
    ]


def test_lines_span_chunk_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "CHUNK_BYTES", 7)
    data = b"".join(f"line number {i}\n".encode() for i in range(50))
    assert lines_of(data) == [f"line number {i}" for i in range(50)]


def test_overlong_line_is_cut_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "CHUNK_BYTES", 64)
    monkeypatch.setattr(reader, "MAX_LINE_BYTES", 100)
    stats = InputStats("x")
    data = b"short\n" + b"A" * 1000 + b"\nafter\n"
    got = list(iter_lines(io.BytesIO(data), "x", stats))
    assert [len(g.text) for g in got] == [5, 100, 5]
    assert got[1].truncated and got[2].number == 3
    assert "cut to that length" in stats.notes[0]


def test_gzip_and_truncated_gzip(tmp_path: Path) -> None:
    p = tmp_path / "a.log.gz"
    payload = b"".join(f"row {i}\n".encode() for i in range(20000))
    p.write_bytes(gzip.compress(payload))
    stats = InputStats(str(p))
    assert len(list(read_input(str(p), stats))) == 20000
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2])
    stats = InputStats(str(cut))
    got = list(read_input(str(cut), stats))
    assert 0 < len(got) < 20000
    assert "ends early" in stats.notes[0]


def test_not_gzip_and_missing(tmp_path: Path) -> None:
    fake = tmp_path / "fake.gz"
    fake.write_text("plain text\n")
    with pytest.raises(InputError, match="not gzip"):
        list(read_input(str(fake), InputStats("x")))
    with pytest.raises(InputError, match="no such file"):
        expand_inputs([str(tmp_path / "missing.log")])


def test_folder_expansion_is_recursive_sorted_and_log_like(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "a").mkdir()
    for rel in ("b/2.log", "a/stdout.log", "a/error.json", "z.out", "notes.md", "a/img.png", "c.err"):
        (tmp_path / rel).write_text("x\n")
    got = [Path(p).relative_to(tmp_path).as_posix() for p in expand_inputs([str(tmp_path)])]
    assert got == ["a/error.json", "a/stdout.log", "b/2.log", "c.err", "z.out"]


@settings(max_examples=2000, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["\x1b[36m", "\x1b[0m", "\x1b", "[31m", "\x1b[1;31m", "(TaskRunner pid=7) ", "x", "[", "0m"]
        ),
        max_size=10,
    )
)
@pytest.mark.slow
def test_strip_ansi_fast_path_equals_the_regex(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert strip_ansi(text) == ANSI_RE.sub("", text)
