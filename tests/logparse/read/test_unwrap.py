"""Rows that a terminal or `fold` cut at a fixed width are joined back before anything reads them
(logparse.read.unwrap): a wrapped log gets the verdict of the log it was, with line numbers of the
wrapped file; a log that is not wrapped is never changed."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from logparse.pipeline import Analysis, ScanConfig
from logparse.read import sources, unwrap
from logparse.read.blocks import reader_process_possible
from logparse.read.sources import InputStats, strip_ansi
from logparse.read.unwrap import (
    JOINED,
    MIN_CONTINUED,
    RowJoiner,
    Wrap,
    WrapDetector,
    parse_unwrap,
    unwrap_chunks,
    widths,
)
from patterns import load_builtin_catalog
from reports import FORMATS, render
from tests.conftest import FIXTURES, SAMPLES, run_cli

CATALOG = load_builtin_catalog()
WRAPPED = FIXTURES / "wrapped"
# every log of the project that is not wrapped (the wrapped fixtures and their source apart)
UNWRAPPED = sorted(SAMPLES.glob("*.log")) + sorted(
    p
    for p in FIXTURES.rglob("*")
    if p.is_file() and p.suffix in (".log", ".txt") and WRAPPED not in p.parents
)


def fold(data: bytes, width: int) -> bytes:
    """What GNU `fold -w WIDTH` writes (coreutils 9, no -b or -s): a column for each byte (a UTF-8
    character is cut in two, an escape's bytes count), a tab to the next multiple of 8, a CR back to
    column 0, a backspace one back; a row ends before the byte that would pass WIDTH."""
    out = bytearray()
    row = bytearray()
    col = 0
    for c in data:
        if c == 10:
            out += row + b"\n"
            row.clear()
            col = 0
            continue
        while True:
            if c == 8:
                new = max(col - 1, 0)
            elif c == 13:
                new = 0
            elif c == 9:
                new = col + 8 - col % 8
            else:
                new = col + 1
            if new <= width or not row:
                break
            out += row + b"\n"
            row.clear()
            col = 0
        col = new
        row.append(c)
    return bytes(out + row)


def first_rows(data: bytes, width: int) -> dict[int, int]:
    """Line number in `data` -> the number of its first row in fold(data, width)."""
    rows: dict[int, int] = {}
    row = 1
    for number, line in enumerate(data.split(b"\n")[:-1], 1):
        rows[number] = row
        row += fold(line + b"\n", width).count(b"\n")
    return rows


def joined(data: bytes, setting: str | int = "auto", live: bool = False, chunk: int = 4096) -> bytes:
    pieces = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    return b"".join(unwrap_chunks(pieces, InputStats("x"), setting, live))


def lines_of(data: bytes) -> list[bytes]:
    """The lines a reader reads (the JOINED ones skipped)."""
    return [line for line in data.split(b"\n") if line != JOINED]


@functools.cache
def scan(path: Path, *options: str) -> dict:
    return json.loads(run_cli(["scan", "--format", "json", *options, str(path)]).stdout)


def verdict(report: dict, rows: dict[int, int] | None = None) -> tuple:
    """What a report concludes, its evidence's line numbers mapped through `rows`."""
    rc = report["root_cause"]
    if rc is None:
        return (report["status"],)
    line = rc["error_line"]
    where = (lambda n: rows[n]) if rows else (lambda n: n)
    return (
        report["status"],
        rc["category"],
        rc["id"],
        rc["stage"],
        rc["rank"],
        rc["message"],
        line["text"],
        where(line["line"]),
        [(where(e["line"]), e["text"]) for e in rc["evidence"]],
    )


# -- widths ----------------------------------------------------------------------------------------


def test_fold_here_is_gnu_fold_on_every_sample() -> None:
    if shutil.which("fold") is None:
        pytest.skip("no fold(1) here")
    for path in sorted(SAMPLES.glob("*.log")):
        data = path.read_bytes()
        for width in (37, 80, 120, 200):
            real = subprocess.run(["fold", "-w", str(width)], input=data, capture_output=True, check=True)
            assert fold(data, width) == real.stdout, (path.name, width)


@pytest.mark.parametrize(
    "row,expect",
    [
        (b"plain ascii", (11, 11, 11)),
        # ANSI escapes take no column on a terminal; fold counts their bytes
        (b"\x1b[36m(TaskRunner pid=1)\x1b[0m hi", (21, 30, 21)),
        # CJK: 2 columns each on a terminal, 3 bytes each for fold
        ("中文ab".encode(), (6, 8, 6)),
        ("ｱＡ".encode(), (3, 6, 3)),  # a half-width katakana is 1 column, a full-width letter 2
        ("e\u0301x".encode(), (2, 4, 2)),  # a combining accent takes none
        ("😀".encode(), (2, 4, 2)),
        (b"a\tb", (9, 9, 9)),  # a tab to the next multiple of 8
        (b"\tx\ty", (17, 17, 17)),
        (b"abcdef\rxy", (2, 2, 6)),  # a CR: back to column 0; the row reached column 6
        ("中文".encode()[:4], (3, 4, 3)),  # fold cut a character in two: U+FFFD, 1 column
    ],
)
def test_a_rows_width_is_counted_as_a_terminal_and_as_fold_count_it(row: bytes, expect: tuple) -> None:
    assert widths(row) == expect


# -- the rule: when an input is wrapped ----------------------------------------------------------------


def detect(data: bytes) -> Wrap | None:
    detector = WrapDetector()
    found = None
    for row in data.split(b"\n")[:-1]:
        found = detector.feed(row)
    return found


@pytest.mark.parametrize("width", [80, 120, 200])
def test_a_folded_sample_is_found_wrapped_at_its_width(width: int) -> None:
    data = (SAMPLES / "ray-actor-exception.log").read_bytes()
    assert detect(data) is None
    assert detect(fold(data, width)) == Wrap(width)


@pytest.mark.parametrize("path", UNWRAPPED, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_no_log_of_the_project_is_taken_for_wrapped_or_changed(path: Path) -> None:
    data = path.read_bytes().replace(b"\x00", b"")  # (the reader drops NUL bytes before)
    assert detect(data) is None
    assert joined(data) == data
    assert joined(data, live=True) == data


def test_equal_lines_of_one_kind_are_records_not_rows() -> None:
    """A log whose longest lines all have one length (a table of step lines, each a record): the rows
    after them start alike (the same first word), or carry a launcher prefix, so none is a continuation."""
    table = b"".join(
        b"Epoch:[1/1](%05d/39695), loss: %.4f, logits_loss: %.4f, aux_loss: 0.0000, lr: 0.00043314\n"
        % (10 * i, 2 + i / 1000, 2 + i / 1000)
        for i in range(1000, 1400)
    )
    assert len(set(map(len, table.split(b"\n")[:-1]))) == 1
    assert detect(table) is None and joined(table) == table
    prefixed = b"".join(
        b"[rank%d]:[W1205 03:41:%02d.000000000 ProcessGroupNCCL.cpp:1234] Warning: unexpected state %04d\n"
        % (i % 8, i % 60, i)
        for i in range(400)
    )
    assert detect(prefixed) is None and joined(prefixed) == prefixed


def test_a_repeated_longest_line_is_one_row_however_often() -> None:
    """The same warning (numbers apart) as the longest line, each time followed by the same text."""
    log = b"".join(
        b"2025-09-23 09:%02d:06,089 - train - INFO - prompt: A conversation between User and Assistant.\n"
        b"User: what is 2 + 2?\nstep:%d - loss:0.1\n" % (i, i)
        for i in range(40)
    )
    assert detect(log) is None


def test_a_few_lines_of_the_longest_length_are_not_enough() -> None:
    base = (SAMPLES / "torchrun-gloo-timeout.log").read_bytes()
    wrapped = fold(base, 200)  # one line of the sample is longer than 200 bytes
    assert wrapped != base
    assert detect(wrapped) is None
    assert scan_bytes(wrapped, "auto") == scan_bytes(wrapped, "off")


def test_rows_narrower_than_a_terminal_are_not_joined() -> None:
    data = (SAMPLES / "torchrun-rank-exception.log").read_bytes()
    assert detect(fold(data, 39)) is None  # (MIN_WIDTH)
    assert MIN_CONTINUED >= 3


# -- joining ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.log")), ids=lambda p: p.name)
@pytest.mark.parametrize("width", [80, 120, 200])
def test_a_folded_sample_is_joined_back_into_the_sample(path: Path, width: int) -> None:
    data = path.read_bytes()
    wrapped = fold(data, width)
    out = joined(wrapped, width if width == 200 else "auto")
    assert out.count(b"\n") == wrapped.count(b"\n")  # every line keeps its number
    assert lines_of(out) == lines_of(data)
    # a live stream joins from the row where the rule holds, or from the first with a width given
    assert joined(wrapped, width, live=True) == out


def test_a_terminal_capture_is_joined_back_with_the_spaces_it_dropped() -> None:
    """tmux drops a row's trailing spaces: a line cut just after a space leaves a row one column
    short, joined back with the space (the capture is real: samples/scripts/capture_wrapped.sh)."""
    capture = (WRAPPED / "torchrun-gloo-timeout.tmux80.log").read_bytes()
    assert detect(capture) == Wrap(80, trimmed=True)
    source = [line.rstrip(b" ") for line in lines_of((SAMPLES / "torchrun-gloo-timeout.log").read_bytes())]
    assert lines_of(joined(capture)) == source


def rendered(line: bytes) -> str:
    """A line as a terminal shows it: escapes gone, a CR's overwrite applied, tabs expanded."""
    cells: list[str] = []
    col = 0
    for ch in strip_ansi(line.decode()).expandtabs(8):
        if ch == "\r":
            col = 0
            continue
        cells[col : col + 1] = [ch]
        col += 1
    return "".join(cells).rstrip()


@pytest.mark.parametrize(
    "capture,source",
    [
        ("ray-actor-exception.tmux97.log", SAMPLES / "ray-actor-exception.log"),
        ("cjk-validation.tmux80.log", WRAPPED / "cjk-validation.log"),
    ],
)
def test_a_pane_of_any_width_with_colours_and_wide_characters_is_joined_back(
    capture: str, source: Path
) -> None:
    """A Ray log in a 97-column pane (colours and the CR of its bars rendered by the terminal), and
    Chinese text in an 80-column one: a wide character that does not fit the last column starts the
    next row, leaving the row 79 columns wide."""
    data = (WRAPPED / capture).read_bytes()
    out = joined(data)
    assert out.count(b"\n") == data.count(b"\n")
    assert [rendered(line) for line in lines_of(out)] == [
        rendered(line) for line in lines_of(source.read_bytes())
    ]


def test_a_script_typescript_is_not_wrapped() -> None:
    """`script` records what the program wrote, before the terminal wraps it: nothing to join."""
    data = (WRAPPED / "torchrun-rank-exception.script80.log").read_bytes()
    assert detect(data) is None and joined(data) == data


def test_a_cut_character_is_whole_again() -> None:
    """fold counts bytes and cuts a UTF-8 character in two; joined in the bytes, it is whole again."""
    line = "(TaskRunner pid=7) [response] " + "每天苹果净减少两个，所以第六天结束时苹果全部吃完。" * 6
    data = "\n".join([line] * 4 + ["(TaskRunner pid=7) step:1 - loss:0.5"]).encode() + b"\n"
    wrapped = fold(data, 80)
    assert b"\xef\xbf\xbd" not in wrapped and any(
        row.decode("utf-8", "replace").count("\ufffd") for row in wrapped.split(b"\n")
    )
    assert lines_of(joined(wrapped)) == lines_of(data)


def test_a_joiner_keeps_line_count_and_stops_at_a_wider_row() -> None:
    joiner = RowJoiner(Wrap(10))
    out = joiner.feed(b"0123456789\nabc\nshort\n0123456789\nxyz")
    out += joiner.feed(b"\n0123456789012 wider\n0123456789\nnot joined\n")
    out += joiner.finish()
    assert out == (
        b"0123456789abc\n" + JOINED + b"\nshort\n0123456789xyz\n" + JOINED + b"\n"
        b"0123456789012 wider\n0123456789\nnot joined\n"
    )


def test_a_last_row_without_a_newline_keeps_the_count() -> None:
    joiner = RowJoiner(Wrap(10))
    out = joiner.feed(b"0123456789\nend") + joiner.finish()
    assert out == b"0123456789end\n" + JOINED


@pytest.mark.parametrize(
    "after",
    [
        b"(WorkerDict pid=1, ip=10.0.0.2) the next record",  # a launcher prefix
        b"[rank3]: the next record",
        b"2025-04-30 21:40:02,115 INFO worker.py:1 -- the next record",
        b"Traceback (most recent call last):",  # traceback structure
        b'  File "/workspace/job/train.py", line 12, in <module>',
        b"RuntimeError: an exception line is a record of its own",
        b"          ^^^^^^^^^^^^^^^^",  # the carets under a source line
        b"",
        b"(TaskRunner pid=7) step:2 - the same first word as the row before",
    ],
)
def test_a_row_that_starts_a_record_is_not_joined(after: bytes) -> None:
    row = b"(TaskRunner pid=7) step:1 - a record exactly as wide as the width.."
    data = row + b"\n" + after + b"\n"
    assert RowJoiner(Wrap(len(row))).feed(data) == data


def test_a_prefix_that_the_cut_left_unfinished_starts_a_record() -> None:
    """`W1205 ... api.py:1` then `028] Sending ...`: the row after a full one begins a torch log prefix
    that its own cut left unfinished; it starts a record (and is joined with its own rest)."""
    row = b"W1205 03:41:07.123456 1234 torch/distributed/elastic/multiprocessing/api.py:1"
    before = b"x" * len(row)
    data = before + b"\n" + row + b"\n028] Sending process 1 closing signal SIGTERM\n"
    out = RowJoiner(Wrap(len(row))).feed(data)
    assert lines_of(out) == [before, row + b"028] Sending process 1 closing signal SIGTERM", b""]


def test_the_source_line_under_a_whole_frame_line_is_not_joined() -> None:
    frame = b'  File "/opt/venv/lib/python3.11/site-packages/ray/_private/worker.py", line 1053, in get'
    data = frame + b"\n    raise value.as_instanceof_cause()\n"
    assert RowJoiner(Wrap(len(frame))).feed(data) == data
    cut = frame[:-3] + b"\nget_objects\n"  # a frame line cut inside its function's name is
    assert lines_of(RowJoiner(Wrap(len(frame) - 3)).feed(cut))[0] == frame[:-3] + b"get_objects"


def test_a_forced_width_joins_from_the_first_row_and_off_joins_nothing() -> None:
    data = fold((SAMPLES / "torchrun-gloo-timeout.log").read_bytes(), 200)
    assert joined(data, "off") == data
    assert joined(data, 200) != data
    assert parse_unwrap("80") == 80 and parse_unwrap(" OFF ") == "off" and parse_unwrap("auto") == "auto"
    for bad in ("0", "eighty", "-3"):
        with pytest.raises(ValueError):
            parse_unwrap(bad)


def test_an_over_long_row_is_passed_on_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unwrap, "MAX_LINE_BYTES", 64)
    joiner = RowJoiner(Wrap(10))
    long = b"x" * 100
    out = joiner.feed(b"0123456789\n" + long[:70]) + joiner.feed(long[70:] + b"\nabc\n") + joiner.finish()
    assert out == b"0123456789\n" + long + b"\nabc\n"


# -- what a user sees --------------------------------------------------------------------------------


def scan_bytes(data: bytes, setting: str) -> dict:
    result = run_cli(["scan", "--format", "json", "--unwrap", setting, "-"], input=data)
    report = json.loads(result.stdout)
    report.pop("inputs", None)
    return report


@pytest.mark.parametrize("name", sorted(p.name for p in SAMPLES.glob("*.log")))
@pytest.mark.parametrize("width", [80, 120, 200])
def test_a_folded_sample_gets_the_samples_verdict_at_its_first_rows(
    name: str, width: int, tmp_path: Path
) -> None:
    data = (SAMPLES / name).read_bytes()
    path = tmp_path / f"{name}.w{width}"
    path.write_bytes(fold(data, width))
    options = ("--unwrap", str(width)) if width == 200 else ()  # (some have too few rows cut at 200)
    report = scan(path, *options)
    assert verdict(report) == verdict(scan(SAMPLES / name), first_rows(data, width))
    assert any("joined back" in note for note in report["notes"])


@pytest.mark.parametrize(
    "capture,source",
    [
        ("torchrun-gloo-timeout.tmux80.log", SAMPLES / "torchrun-gloo-timeout.log"),
        ("ray-actor-exception.tmux97.log", SAMPLES / "ray-actor-exception.log"),
        ("cjk-validation.tmux80.log", WRAPPED / "cjk-validation.log"),
    ],
)
def test_a_terminal_capture_gets_the_verdict_of_its_log(capture: str, source: Path) -> None:
    """A `Watchdog caught collective operation timeout` cut in two by an 80-column pane is found; the
    root line is the line joined, numbered by its first row in the capture."""
    report = scan(WRAPPED / capture)
    want = scan(source)
    assert report["status"] == want["status"] == "failed"
    rc, want_rc = report["root_cause"], want["root_cause"]
    for key in ("category", "id", "stage", "rank", "message"):
        assert rc[key] == want_rc[key], key
    assert rendered(rc["error_line"]["text"].encode()) == rendered(want_rc["error_line"]["text"].encode())
    rows = (WRAPPED / capture).read_bytes().split(b"\n")
    first = rendered(rc["error_line"]["text"].encode())
    assert first.startswith(rendered(rows[rc["error_line"]["line"] - 1]))
    assert scan(WRAPPED / capture, "--unwrap", "off")["root_cause"] != rc


def test_the_wrapped_watchdog_line_is_found_in_the_pane() -> None:
    rows = (WRAPPED / "cjk-validation.tmux80.log").read_text().splitlines()
    assert not any("Watchdog caught collective operation timeout" in row for row in rows)
    first = next(n for n, row in enumerate(rows, 1) if row.startswith("(WorkerDict"))
    rc = scan(WRAPPED / "cjk-validation.tmux80.log")["root_cause"]
    assert rc["id"] == "nccl-watchdog-timeout" and rc["error_line"]["line"] == first
    assert "Watchdog caught collective operation timeout" in rc["error_line"]["text"]


def test_a_script_typescript_gets_the_verdict_of_its_log() -> None:
    report = scan(WRAPPED / "torchrun-rank-exception.script80.log")
    want = scan(SAMPLES / "torchrun-rank-exception.log")
    assert report["root_cause"]["category"] == want["root_cause"]["category"]
    assert not any("joined back" in note for note in report["notes"])


def test_a_pipe_is_joined_from_the_row_where_the_rule_holds(tmp_path: Path) -> None:
    """stdin (a pipe) is read as it comes: its first rows are passed on before the rule holds, so
    only the context of its first lines may differ from the file's; the root cause is the same."""
    data = fold((SAMPLES / "ray-actor-exception.log").read_bytes(), 80)
    path = tmp_path / "wrapped.log"
    path.write_bytes(data)
    from_stdin = json.loads(run_cli(["scan", "--format", "json", "-"], input=data).stdout)
    assert verdict(from_stdin)[:8] == verdict(scan(path))[:8]
    forced = json.loads(run_cli(["scan", "--format", "json", "--unwrap", "80", "-"], input=data).stdout)
    assert verdict(forced) == verdict(scan(path))


@pytest.mark.slow
@pytest.mark.skipif(not reader_process_possible(), reason="readers need fork (Linux)")
def test_a_wrapped_log_reports_the_same_with_any_number_of_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows are joined where the input is read (the first reader, with --workers): every process
    makes its blocks of joined lines."""
    monkeypatch.setattr(sources, "CHUNK_BYTES", 16 << 10)  # many blocks
    path = tmp_path / "wrapped.log"
    path.write_bytes(b"".join(fold(p.read_bytes(), 80) for p in sorted(SAMPLES.glob("*.log"))))

    def outputs(**config) -> dict[str, str]:
        analysis = Analysis(CATALOG, ScanConfig(**config))
        analysis.feed_inputs([str(path)])
        report = analysis.report()
        return {fmt: render(report, fmt) for fmt in FORMATS}

    one = outputs(reader_process_bytes=None, workers=1)
    assert "joined back" in one["text"] or "joined back" in one["json"]
    for n in (2, 3):
        assert outputs(reader_process_bytes=1, workers=n) == one, n


def test_a_named_fifo_is_read_as_it_comes_not_held_for_a_window(tmp_path: Path) -> None:
    """A FIFO named on the command line is a stream like stdin: its rows reach the scan while the
    writer still holds it open (an interrupt then reports them), not after WINDOW_BYTES or its end."""
    fifo = tmp_path / "live.log"
    os.mkfifo(fifo)
    had_them = threading.Event()

    def write() -> None:
        fd = os.open(fifo, os.O_WRONLY)
        try:
            os.write(fd, b"RuntimeError: first\nRuntimeError: second\n")
            had_them.wait(10)  # held open until the reader has had both rows
        finally:
            os.close(fd)

    writer = threading.Thread(target=write)
    writer.start()
    texts = []
    analysis = Analysis(CATALOG, ScanConfig())
    for record in analysis.reader.records(str(fifo)):
        texts.append(record.line.text)
        if len(texts) == 2:
            assert writer.is_alive()  # read before the writer let go
            had_them.set()
    writer.join(10)
    assert texts == ["RuntimeError: first", "RuntimeError: second"]
