"""Progress lines applied without a record give the reports every line as a record gives: on every
sample and fixture, on the benchmark generators' logs, and on random logs made of the lines that could
tell them apart (prefixes with a clock, a level, a rank or a dedup count, escapes, CR segments, model
text, open tracebacks and config dumps, new actors and hosts, restarts, huge step numbers), read in
one process and by a reader process, with every value kept (--metrics-csv) and without."""

from __future__ import annotations

import gc
import math
import random
import re
import sys
from pathlib import Path

import pytest

from logparse.observe.metrics import MetricsConfig
from logparse.observe.progress import StageTrackerConfig
from logparse.pipeline import Analysis, ScanConfig, _collector_paused
from logparse.read.blocks import reader_process_possible
from logparse.read.progress_lines import ProgressLineParser
from patterns import load_builtin_catalog
from reports import FORMATS, render
from tests.conftest import FIXTURES, SAMPLES

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from generate_log import chatter, generate, step_line, worker

CATALOG = load_builtin_catalog()
LOGS = (
    sorted(SAMPLES.glob("*.log"))
    + sorted(FIXTURES.rglob("*.log"))
    + [
        FIXTURES / "ray" / "session_logs",
        FIXTURES / "torchrun" / "logdir",
        FIXTURES / "torchrun" / "record-error.json",
    ]
)


def outputs(path: Path, tmp: Path, small_bounds: bool = False, **config) -> dict[str, str]:
    """Every report format of a scan, and its metrics CSV when every value is kept. `small_bounds`: the
    stage tracker keeps few marks and the metrics few rows (what a long log does to them)."""
    scanner = Analysis(CATALOG, ScanConfig(**config))
    if small_bounds:
        scanner.stages.config = StageTrackerConfig(max_marks=700, max_transitions=50)
        scanner.metrics.config = MetricsConfig(max_rows=300)
    scanner.feed_inputs([str(p) for p in sorted(path.iterdir())] if path.is_dir() else [str(path)])
    report = scanner.report()
    out = {fmt: render(report, fmt) for fmt in FORMATS}
    if config.get("all_metrics"):
        csv = tmp / "metrics.csv"
        scanner.metrics.to_csv(csv)
        out["csv"] = csv.read_text()
    return out


def assert_same_reports(path: Path, tmp: Path, all_metrics: bool = False, small_bounds: bool = False) -> None:
    reference = outputs(
        path, tmp, small_bounds, progress_lines=False, reader_process_bytes=None, all_metrics=all_metrics
    )
    assert outputs(path, tmp, small_bounds, reader_process_bytes=None, all_metrics=all_metrics) == reference
    if reader_process_possible() and path.is_file():
        assert outputs(path, tmp, small_bounds, reader_process_bytes=1, all_metrics=all_metrics) == reference


@pytest.mark.slow
@pytest.mark.parametrize("path", LOGS, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_samples_and_fixtures(path: Path, tmp_path: Path) -> None:
    assert_same_reports(path, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind,caught,bars",
    [
        ("realistic", None, "ray"),
        ("dense", None, "ray"),
        ("dense", 0, "ray"),
        ("mix", None, "ray"),
        ("dense", 0, "bare"),
        ("mix", None, "bare"),
    ],
)
def test_benchmark_logs(kind: str, caught: int | None, bars: str, tmp_path: Path) -> None:
    log = tmp_path / f"{kind}.log"
    generate(str(log), 1.5, kind=kind, caught_every=caught, bars=bars)
    assert_same_reports(log, tmp_path, all_metrics=kind == "dense")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_step_lines_left_to_the_scanner(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader process that runs behind leaves the step lines' metrics and timing to the scanner
    (DEFERRED): the reports are the same (here every block is parsed so)."""
    parse = ProgressLineParser.parse

    def behind(self: ProgressLineParser, data: bytes, found: list, ends: list | None = None) -> object:
        self.rows_here = False
        return parse(self, data, found, ends)

    log = tmp_path / "log.log"
    if seed == 0:
        _few_processes(log)  # (runs of lines)
    elif seed == 1:
        generate(str(log), 1.0, kind="dense", caught_every=0)  # (a new process on most lines: one by one)
    else:
        rnd = random.Random(seed)
        lines = [_line(rnd, step // 3 + 1, 6) for step in range(3000)]
        log.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")
    reference = outputs(log, tmp_path, progress_lines=False, reader_process_bytes=None, all_metrics=seed == 2)
    monkeypatch.setattr(ProgressLineParser, "parse", behind)
    assert outputs(log, tmp_path, reader_process_bytes=None, all_metrics=seed == 2) == reference


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_plain_step_lines_read_from_their_bytes_as_any_line(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The columns of step lines read straight from their bytes (_plain_step) are those the way of any
    line gives them, whether the rows are parsed there or left to the scanner."""
    from logparse.read.blocks import iter_blocks
    from logparse.read.sources import InputStats, plain_chunks
    from logparse.read.steps import StepParser

    rnd = random.Random(seed)
    log = tmp_path / "log.log"
    lines = [_line(rnd, step // 3 + 1, 6) for step in range(3000)]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")

    def columns(rows_here: bool) -> list:
        scanner = Analysis(CATALOG, ScanConfig())
        parser = ProgressLineParser(
            scanner.progress_words, scanner.stages.syntax, StepParser(), scanner.env.ignores
        )
        parser.rows_here = rows_here
        out = []
        with open(log, "rb") as fh:
            chunks = plain_chunks(fh, InputStats(str(log)))
            for block in iter_blocks(chunks, scanner.reader.prefilter, progress=parser):
                c = block.progress
                out.append(
                    None
                    if c is None
                    else (
                        c.ints.tobytes(),
                        c.floats.tobytes(),
                        c.values.tobytes(),
                        c.new_processes,
                        c.new_shapes,
                    )
                )
        return out

    for rows_here in (True, False):
        fast = columns(rows_here)
        with monkeypatch.context() as m:
            m.setattr(ProgressLineParser, "_plain_step", lambda *_: None)
            assert fast == columns(rows_here)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_step_lines_of_a_repeated_shape_read_by_their_bytes_as_by_their_text(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Step lines whose keys come back line after line, so that their shape is compiled over the
    bytes (StepParser.parse_bytes): the columns are those the text gives (parse_bytes off), whatever
    the values hold (spaces, colons, escapes, a CR, non-ASCII, a dedup suffix, a bar's words) and
    whether a key holds the bar's keyword."""
    from logparse.read.blocks import iter_blocks
    from logparse.read.sources import InputStats, plain_chunks
    from logparse.read.steps import StepParser

    rnd = random.Random(seed)
    keys = ["actor/pg_loss", "timing_s/reward", "foo/bar", "timing_s/step", "critic/score/mean"]
    if seed == 2:
        keys.insert(2, "val Training Progress x")
    values = ["0.5", "np.float64(0.25)", "np.float64(nan)", "7", "1e-06", "-inf", "np.float64(3)"]
    odd = [
        "x",
        "",
        "np.float64(0.1))",
        "1:2",
        "a b",
        "\x1b[0m",
        "\r",
        "é",
        "x[repeated",
        "np.float64(1",
        "Training",
    ]
    lines = []
    for step in range(1500):
        parts = [f"{k}:{rnd.choice(values if rnd.random() < 0.97 else odd)}" for k in keys]
        tail = rnd.choice(["", "", "", "", "", "", "", "", " [repeated 3x across cluster]", "\r", " é"])
        prefix = rnd.choice([f"{CYAN}(TaskRunner pid={rnd.randrange(9)}){RESET} ", "", _prefix(rnd, 6)])
        lines.append(f"{prefix}step:{step} - {' - '.join(parts)}{tail}")
    log = tmp_path / "log.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")

    def columns() -> list:
        scanner = Analysis(CATALOG, ScanConfig())
        parser = ProgressLineParser(
            scanner.progress_words, scanner.stages.syntax, StepParser(), scanner.env.ignores
        )
        out = []
        with open(log, "rb") as fh:
            chunks = plain_chunks(fh, InputStats(str(log)))
            for block in iter_blocks(chunks, scanner.reader.prefilter, progress=parser):
                c = block.progress
                out.append(None if c is None else (c.ints.tobytes(), c.floats.tobytes(), c.values.tobytes()))
        return out

    read = StepParser.parse_bytes
    taken = []
    monkeypatch.setattr(
        StepParser, "parse_bytes", lambda self, line: taken.append(read(self, line)) or taken[-1]
    )
    fast = columns()
    assert sum(got is not None for got in taken) > (0 if seed == 2 else 100)  # (the bytes were read)
    monkeypatch.setattr(StepParser, "parse_bytes", lambda self, line: None)
    assert fast == columns()


def _bar_lines(rnd: random.Random, step: int) -> str:
    """A `Training Progress` bar behind one of _line's prefixes, or none, in the forms the bars' fast
    path reads (with and without `\\r`, the CR tqdm ends a redraw with) and forms it must leave alone."""
    p = rnd.choice([_prefix(rnd, 6), "", "", "\r"])
    rate = rnd.choice(["64.47s/it", "1.52it/s", "?it/s", "0.00it/s", ""])
    total = rnd.choice([435, 100_000, 10**25])
    body = rnd.choice(["███       ", "██▍       ", "#####     ", "", "▉▉▉▉▉▉▉▉▉▉"])
    bar = f"Training Progress: {step % 100:3d}%|{body}| {step}/{total} [1:10:40<6:31:06, {rate}]"
    return rnd.choice(
        [
            f"{p}{bar}",
            f"{p}\r{bar}",
            f"{p}{bar}\r",
            f"{p}\r{bar}\r",
            f"{p}\r\r{bar}",
            f"{p}{bar}\rTraining Progress: 9%|",
            f"{p} {bar}",
            f"{p}\t{bar}",
            f"{p}{bar} step:{step} - a:1",
            f"{p}{bar}é",
            f"{p}Training Progress: {step}%|x| 1/2 [00:01]",
        ]
    )


# seed 0 in the quick run; the other two (3-7 s each on 2 cores) with the slow tests
@pytest.mark.parametrize("seed", [0, *(pytest.param(s, marks=pytest.mark.slow) for s in (1, 2))])
def test_bars_read_from_their_bytes_as_any_line(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The columns of bars read straight from their bytes (RAY_BAR behind a Ray prefix, BARE_BAR with no
    prefix) are those the way of any line gives them, and so are the reports."""
    from logparse.read import progress_lines

    rnd = random.Random(seed)
    log = tmp_path / "bars.log"
    lines = [
        _bar_lines(rnd, step // 3 + 1) if step % 4 else _line(rnd, step // 3 + 1, 6) for step in range(3000)
    ]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")
    fast = _columns(log)
    never = re.compile(rb"(?!)")
    with monkeypatch.context() as m:
        m.setattr(progress_lines, "RAY_BAR", never)
        m.setattr(progress_lines, "BARE_BAR", never)
        assert fast == _columns(log)
    assert_same_reports(log, tmp_path)


def _columns(log: Path, rows_here: bool = True) -> list:
    """Each block's ProgressColumns of `log`, as bytes and lists."""
    from logparse.read.blocks import iter_blocks
    from logparse.read.sources import InputStats, plain_chunks
    from logparse.read.steps import StepParser

    scanner = Analysis(CATALOG, ScanConfig())
    parser = ProgressLineParser(
        scanner.progress_words, scanner.stages.syntax, StepParser(), scanner.env.ignores
    )
    parser.rows_here = rows_here
    out = []
    with open(log, "rb") as fh:
        for block in iter_blocks(
            plain_chunks(fh, InputStats(str(log))), scanner.reader.prefilter, progress=parser
        ):
            c = block.progress
            out.append(
                None
                if c is None
                else (c.ints.tobytes(), c.floats.tobytes(), c.values.tobytes(), c.new_processes, c.new_shapes)
            )
    return out


def _few_processes(log: Path) -> None:
    """A dense log of a few processes: long runs of step lines and bars (from the eight ranks of the
    realistic log, and the driver), now and then a line that needs its record."""
    rnd = random.Random(3)
    lines = []
    for step in range(1, 800):
        lines.append(step_line(step, rnd))
        for _ in range(rnd.randrange(3)):
            lines.append(
                f"{worker(rnd.randrange(8))}\rTraining Progress:  {step % 100:2d}%|███       | "
                f"{step}/5000 [1:10:40<6:31:06, {rnd.random() * 9 + 1:.2f}s/it]"
            )
        if step % 97 == 0:
            lines.extend(chatter(rnd, step))
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_bounded_marks_and_rows(tmp_path: Path) -> None:
    """Past the stage tracker's bound on marks and the metrics' bound on rows (progress lines applied a
    run at a time drop what line by line drops)."""
    log = tmp_path / "dense.log"
    _few_processes(log)
    assert_same_reports(log, tmp_path, all_metrics=True, small_bounds=True)


# -- random logs of the lines that could tell the two ways apart ----------------------------------------
CYAN, RESET = "\x1b[36m", "\x1b[0m"


def _prefix(rnd: random.Random, hosts: int) -> str:
    pid = rnd.choice([7, 8, 9, rnd.randrange(10, 10**6)])
    actor = rnd.choice(["TaskRunner", "WorkerDict", f"Actor{rnd.randrange(90)}"])
    ip = f", ip=10.0.0.{rnd.randrange(hosts)}" if rnd.random() < 0.5 else ""
    return rnd.choice(
        [
            f"{CYAN}({actor} pid={pid}{ip}){RESET} ",
            f"({actor} pid={pid}{ip}) ",
            f"({actor} pid={pid})",
            "",
            f"[rank{rnd.randrange(4)}]: ",
            f"[default{rnd.randrange(4)}]:",
            f"(A pid=1) ({actor} pid={pid}) ",
            "INFO 05-07 21:12:03 [metrics.py:455] ",
            "INFO:2025-08-22 23:08:02,898:",
            "2025-13-45 10:00:00 ",
            "\x1b]0;title\x07",
            f"{CYAN}({actor} pid={pid}){RESET}\x1b[1m ",
            "W0731 10:50:07.575000 3247964 api.py:897] ",
            f"node-{rnd.randrange(hosts)}:{pid}:{pid + 1} [0] ",
            "\x1b[31",
            "(raylet) ",
        ]
    )


def _value(rnd: random.Random) -> str:
    return rnd.choice(
        [
            "0.5",
            f"np.float64({rnd.random()!r})",
            "nan",
            "inf",
            "np.int64(3)",
            " 2",
            "x",
            "",
            "1e-06",
            "np.float64( 4)",
            "é",
            "[1, 2]",
            "1_0",
            "-0.0",
            f"{rnd.random() * 1e6:.3f}",
        ]
    )


def _line(rnd: random.Random, step: int, hosts: int) -> str:
    p = _prefix(rnd, hosts)
    kind = rnd.random()
    keys = [
        "actor/pg_loss",
        "actor/grad_norm",
        "critic/score/mean",
        "timing_s/step",
        "response_length/mean",
        "training/global_step",
        "foo/bar",
        "timing_s/reward",
        "actor/entropy",
    ]
    if kind < 0.3:
        n = rnd.choice([step, step, step, 10**30 + step, 0])
        parts = " - ".join(f"{k}:{_value(rnd)}" for k in rnd.sample(keys, rnd.randrange(1, len(keys))))
        tail = rnd.choice(
            [
                "",
                "",
                " [repeated 3x across cluster]",
                "\r",
                "\x1b[0m",
                " é",
                f" Training Progress: {step % 100:3d}%|#  | {step}/435 [00:01<00:02, 1.5s/it]",
            ]
        )
        return f"{p}step:{n} - {parts}{tail}"
    if kind < 0.55:
        rate = rnd.choice(["64.47s/it", "1.52it/s", "?it/s", "0.00it/s"])
        bar = f"Training Progress: {step % 100:3d}%|███       | {step}/{rnd.choice([435, 10**25])} [1:10:40<6:31:06, {rate}]"
        return rnd.choice(
            [
                f"{p}\r{bar}",
                f"{p}{bar}",
                f"{p}\r{bar}\r",
                f"{p}\rfoo\r{bar}",
                f"{p}\r[Rank 3] {bar}",
                f"{p}\r{bar} step:{step} - a:1",
                f"{p}\r{bar}{RESET}",
                f"{p}\rTraining Progress: soon",
                f"{p}\r{bar} step:x actor/pg_loss timing_s/reward",
                f"{p}\r{bar} version 2 ip=172.16.{step}.1",
                f"{p}\r{bar} NVIDIA A100-SXM4-80GB",
            ]
        )
    if kind < 0.62:
        return p + rnd.choice(
            [
                "[prompt] what is 2+2?",
                "[response] 4 Training Progress: 5%|",
                "[score] 1.0",
                "[ground_truth] 4",
            ]
        )
    if kind < 0.7:
        return p + rnd.choice(
            [
                "Traceback (most recent call last):",
                '  File "/w/x.py", line 3, in f',
                "    y = g()",
                "ValueError: bad value",
                "",
                "RuntimeError: CUDA out of memory.",
            ]
        )
    if kind < 0.74:
        return p + rnd.choice(
            [
                "{'actor_rollout_ref': {'actor': {'strategy': 'fsdp',",
                "  'rollout': {'n': 4}},",
                " 'trainer': {'nnodes': 2}}",
            ]
        )
    if kind < 0.78:
        return p + rnd.choice(
            [
                "ray init kwargs: {'num_cpus': None}",
                "Final validation metrics: {'a': 1}",
                "Total training steps: 435",
                "Training from scratch",
                "Setting global step to 40",
                f"[rank-0]: Saving model to /ckpt/global_step_{step + rnd.choice([0, 1, 5])}/actor/m.pt",
                f"local_global_step_folder: checkpoints/x/global_step_{step + 1}",
            ]
        )
    if kind < 0.82:
        return p + rnd.choice(
            [
                "ERROR: something failed",
                "KeyError: 'x'",
                "torch 2.4.0",
                "vllm 0.6.3",
                "NCCL version 2.21.5+cuda12.4",
                "host node-3 ip=10.9.9.9 version 3",
            ]
        )
    return p + rnd.choice(
        [
            "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
            "loading weights",
            "WARNING: low disk",
            "  continuation line",
            "",
        ]
    )


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_random_logs(seed: int, tmp_path: Path) -> None:
    rnd = random.Random(seed)
    hosts = 200 if seed % 4 == 3 else 6  # (past 64 hosts the environment notes no more)
    lines = [_line(rnd, step // 3 + 1, hosts) for step in range(3000)]
    log = tmp_path / "random.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")
    assert_same_reports(log, tmp_path, all_metrics=seed % 2 == 0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_random_logs_of_stage_marker_lines(seed: int, tmp_path: Path) -> None:
    """Lines that only a stage marker's keywords mark (the examples of patterns/stages.yaml, those
    that match and those that must not, behind the prefixes of _line, a HF Trainer's loss dict with
    and without a NaN) among step lines, bars, tracebacks and the rest: applied without a record where
    they qualify, the reports are those of records."""
    from patterns.stages import builtin_stage_markers

    markers = builtin_stage_markers().markers
    examples = [e.line for m in markers for e in (*m.examples.match, *m.examples.no_match) if not e.block]
    examples += [
        "{'loss': 0.6857, 'grad_norm': 1.0303, 'learning_rate': 1e-05, 'epoch': 0.13}",
        "{'loss': 0.6931, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.03}",
    ]
    rnd = random.Random(seed)
    lines = []
    for step in range(3000):
        if rnd.random() < 0.4:
            lines.append(_prefix(rnd, 6) + rnd.choice(examples))
        else:
            lines.append(_line(rnd, step // 3 + 1, 6))
    log = tmp_path / "markers.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")
    assert_same_reports(log, tmp_path, small_bounds=seed == 3)


def test_progress_lines_make_no_records(tmp_path: Path) -> None:
    """On a dense log nearly every step line and bar is applied without a record."""
    log = tmp_path / "dense.log"
    generate(str(log), 2.0, kind="dense", caught_every=0)
    scanner = Analysis(CATALOG, ScanConfig(reader_process_bytes=None))
    fed = 0
    feed = scanner.feed_record

    def counting(rec) -> None:
        nonlocal fed
        fed += 1
        feed(rec)

    scanner.feed_record = counting
    scanner.feed_inputs([str(log)])
    assert scanner.seq > 900 and fed < scanner.seq / 20


def test_the_collector_is_paused_while_feeding_and_restored() -> None:
    assert gc.isenabled()
    with _collector_paused():
        assert not gc.isenabled() and gc.get_freeze_count() > 0
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.disable()
    try:
        with _collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_bar_markers_by_plan_are_those_of_the_marker_search() -> None:
    """What _add_bar finds with a bar's plan (_short_marker) is what _marker finds: bars of odd widths,
    without a rate, with non-ASCII blocks, and long ones (past TIMEOUT_FROM_CHARS _marker is used);
    a marker that starts an attempt or carries a group gives None."""
    from logparse.read.progress_lines import _short_marker
    from logparse.read.steps import StepParser
    from patterns.stages import TIMEOUT_FROM_CHARS

    scanner = Analysis(CATALOG, ScanConfig())
    parser = ProgressLineParser(
        scanner.progress_words, scanner.stages.syntax, StepParser(), scanner.env.ignores
    )
    words = ("Training Progress", "Training Progress:")
    plan = parser._bar_plan(words)
    assert plan is not None and parser._bar_plans[words] is plan
    bars = [
        f"Training Progress: {p:3d}%|{body}| {n}/{total} [1:10:40<6:31:06, {rate}]"
        for p, body, n, total, rate in [
            (0, "", 1, 435, "64.47s/it"),
            (16, "███▍      ", 71, 435, "1.52it/s"),
            (100, "#" * 7, 10**20, 10**25, "?it/s"),
            (3, "▉" * 3000, 3, 100_000, ""),
        ]
    ]
    assert len(bars[-1]) > TIMEOUT_FROM_CHARS  # (such a bar is searched by _marker, with the timeout)
    for message in bars[:-1]:
        assert _short_marker(message, plan) == parser._marker(message, words, parser._bar_candidates(words))
    attempt = ((((re.compile("Training"), False),), None),)
    named = ((((re.compile("(?P<x>Training)"), True),), 3),)
    unnamed = ((((re.compile("nothing"), False),), 1), (((re.compile("Progress"), False),), 2))
    assert _short_marker(bars[0], attempt) is None
    assert _short_marker(bars[0], named) is None
    assert _short_marker(bars[0], unnamed) == 2
    assert _short_marker("x", unnamed) == -1


def test_rows_become_the_arrays_an_extend_makes() -> None:
    """_int64s / _doubles make the arrays array.extend would, bit for bit (NaN, -0.0, inf), and refuse
    what it refuses."""
    import struct
    from array import array

    from logparse.read.progress_lines import INT64_MAX, _doubles, _int64s

    ints = [0, -1, -2, 7, INT64_MAX, -INT64_MAX - 1]
    floats = [math.nan, -0.0, math.inf, -math.inf, 1e-308, 0.1, float("-nan")]
    assert _int64s(ints).tobytes() == array("q", ints).tobytes()
    assert _doubles(floats).tobytes() == array("d", floats).tobytes()
    assert _int64s([]) == array("q") and _doubles([]) == array("d")
    with pytest.raises(struct.error):
        _int64s([INT64_MAX + 1])


def test_a_bracket_rate_is_past_its_last_comma() -> None:
    """bar_seconds of a BAR_TEXT bracket's tail past its last comma is that of the whole bracket (what
    _add_bar searches with the shipped rate regex): random brackets of the bar's characters, with and
    without a unit."""
    from logparse.read.progress_lines import BARE_BAR, RATE_PAST_COMMA
    from logparse.read.progress_syntax import bar_seconds

    assert RATE_PAST_COMMA
    rnd = random.Random(7)
    fixed = [
        "1:10:40<6:31:06, 46.04s/it",
        "00:03<00:03, ?it/s",
        "1,2.5s/it",
        ",3 s/it",
        "1.5.5it/s",
        "",
        "0.00it/s",
    ]
    brackets = fixed + [
        "".join(rnd.choice("0123456789:<>,.? ") for _ in range(rnd.randrange(30)))
        + rnd.choice(["", "s/it", "it/s"])
        for _ in range(3000)
    ]
    for bracket in brackets:
        line = f"Training Progress:  5%|#   | 1/2 [{bracket}]".encode()
        assert BARE_BAR.fullmatch(line).group(4).decode() == bracket
        assert bar_seconds(bracket[bracket.rfind(",") + 1 :]) == bar_seconds(bracket), bracket


def test_no_process_number_left_leaves_bars_and_step_lines_to_the_usual_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no process number left (MAX_PROCESSES), a bar with no prefix, one behind a Ray prefix and a
    step line get no columns (the scanner makes records of them)."""
    from logparse.read import progress_lines
    from logparse.read.steps import StepParser

    scanner = Analysis(CATALOG, ScanConfig())
    data = (
        "Training Progress:  16%|███▍      | 71/435 [1:10:40<6:31:06, 64.47s/it]\n"
        "\x1b[36m(WorkerDict pid=7, ip=10.0.0.1)\x1b[0m \rTraining Progress:  16%|###   | 71/435 [00:01<00:02, 2.00it/s]\n"
        "\x1b[36m(TaskRunner pid=9)\x1b[0m step:71 - actor/pg_loss:np.float64(0.25) - timing_s/step:3.5\n"
    ).encode()
    found, ends = scanner.reader.prefilter.lines_and_ends(data)

    def parse() -> progress_lines.ProgressColumns | None:
        parser = ProgressLineParser(
            scanner.progress_words, scanner.stages.syntax, StepParser(), scanner.env.ignores
        )
        return parser.parse(data, found, ends)

    assert len(parse()) == 3
    monkeypatch.setattr(progress_lines, "MAX_PROCESSES", 0)
    columns = parse()
    assert columns is None or len(columns) == 0


@pytest.mark.parametrize(
    "line",
    [
        b"\x1b[36m(TaskRunner pid=7)\x1b[0m step:1 - actor/pg_loss:0.5",
        b"(WorkerDict pid=9, ip=10.0.0.2) step:5 - x:2",
        b"[default3]:step:2 - a:1",
        b"[rank1]: step:6 - a:1",
        b"INFO:2025-01-01 00:00:00,000:step:3 - a:1",
        b"2025-01-01 00:00:00,000 INFO trainer.py:12 -- step:8 - a:1",
        b"node-1:12:34 [0] step:7 - b: 2",
        b"step:4 - a:1",
        b"[Rank 2] step:9 - a:1",
    ],
)
def test_a_step_lines_stream_is_that_of_its_prefix(line: bytes) -> None:
    """RecordReader.stream_of reads a step line's stream off its prefix followed by `step:` (and
    remembers it per prefix): the stream a whole normalised line has, with or without a default origin."""
    from logparse.read.blocks import BlockMaker
    from logparse.read.normalize import Origin

    analysis = Analysis(load_builtin_catalog(), ScanConfig())
    reader = analysis.reader
    data = line + b"\n" + line.replace(b"step:", b"step:1", 1) + b"\n"
    block = BlockMaker(reader.prefilter).make(data, 0)
    assert len(block.starts) == 2
    for idx, start in enumerate(block.starts):
        at = data.index(b"step:", start) - start
        for default in (None, Origin(actor="TaskRunner", pid=3), Origin(local_rank=1)):
            whole = reader.stream_of(block, idx, "job.log", idx + 1, default)
            assert reader.stream_of(block, idx, "job.log", idx + 1, default, at) == whole
            assert reader.stream_of(block, idx, "job.log", idx + 1, default, at) == whole  # (remembered)


def test_the_streams_of_ray_bars_and_step_lines_of_many_processes_are_those_of_their_lines() -> None:
    """RecordReader.stream_of of Ray bars and step lines, remembered per Ray prefix without its pid and
    ip (_prefix_stream): the stream the whole normalised line has, line after line, whatever the pid
    (leading zeros too), the ip (or none) and the default origin."""
    from logparse.read.blocks import BlockMaker
    from logparse.read.normalize import Origin
    from logparse.read.sources import Line, decode_line

    rnd = random.Random(5)
    reader = Analysis(load_builtin_catalog(), ScanConfig()).reader
    lines = []
    for _ in range(300):
        actor = rnd.choice(["WorkerDict", "TaskRunner", "A.b_1"])
        pid = rnd.choice(["7", "0012", str(rnd.randrange(10**7))])
        ip = rnd.choice(
            ["", ", ip=10.0.0.1", f", ip=10.0.{rnd.randrange(9)}.{rnd.randrange(300)}", ", ip=node_1:x"]
        )
        prefix = rnd.choice(
            [
                f"{CYAN}({actor} pid={pid}{ip}){RESET} ",
                f"({actor} pid={pid}{ip}) ",
                f"({actor} pid={pid}{ip})",
            ]
        )
        bar = f"Training Progress:  12%|█▏        | {rnd.randrange(99)}/435 [00:01<00:02, 1.5s/it]"
        lines.append(
            rnd.choice([f"{prefix}\r{bar}", f"{prefix}{bar}", f"{prefix}{bar}\r", f"{prefix}step:3 - a:1"])
        )
    data = "\n".join(lines).encode() + b"\n"
    block = BlockMaker(reader.prefilter).make(data, 0)
    assert len(block.starts) == len(lines)
    for default in (None, Origin(actor="TaskRunner", pid=3, node="n-2"), Origin(local_rank=1)):
        for idx, (start, text) in enumerate(zip(block.starts, lines, strict=True)):
            line = Line("job.log", idx + 1, decode_line(text.encode()))
            want = reader.lookback_normalizer.normalize(line, 0, default).stream
            at = data.find(b"step:", start, start + len(text.encode()))
            assert (
                reader.stream_of(block, idx, "job.log", idx + 1, default, at - start if at >= 0 else -1)
                == want
            )


def test_a_markers_lines_that_keep_taking_the_usual_way_are_no_longer_tried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stage marker's lines that qualify are applied; after MAX_MISSES of them in a row take the usual
    way (here a logging prefix with a clock), lines with those keywords are no longer tried; one that
    qualifies in between starts the count again."""
    from logparse.read import progress_lines
    from logparse.read.blocks import BlockMaker
    from logparse.read.steps import StepParser

    scanner = Analysis(CATALOG, ScanConfig())
    parser = ProgressLineParser(
        scanner.progress_words, scanner.stages.syntax, StepParser(), scanner.env.ignores
    )
    tried = []
    add_line = ProgressLineParser._add_line
    monkeypatch.setattr(
        ProgressLineParser, "_add_line", lambda self, *a: tried.append(1) or add_line(self, *a)
    )
    plain = "Training from scratch"
    clocked = "INFO:2025-08-22 23:08:02,898:Training from scratch"
    n = progress_lines.MAX_MISSES

    def applied(lines: list[str]) -> int:
        data = ("\n".join(lines) + "\n").encode()
        block = BlockMaker(scanner.reader.prefilter, progress=parser).make(data, 0)
        return 0 if block.progress is None else len(block.progress)

    assert applied([plain] * 3) == 3
    assert applied([clocked] * (n - 1) + [plain]) == 1  # (a miss short of the bound, then one applied)
    assert applied([clocked] * (n - 1)) == 0
    tried.clear()
    assert applied([clocked, plain, plain]) == 0  # (the bound reached: none tried from there on)
    assert len(tried) == 1
