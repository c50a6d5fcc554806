"""One road for progress lines: a line read fast from its bytes and the same line read from its Record
become the same ProgressRun fact (logparse.read.progress_syntax), which the observers take through
one way in each (StageTracker.apply, MetricsTracker.take); what the fast path is made of stays inside
logparse.read. (That the reports are the same either way: test_progress_lines.py.)"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from logparse.observe.progress import MIN_BULK_LINES, StageTracker
from logparse.pipeline import Analysis, ScanConfig
from logparse.read.normalize import Record
from logparse.read.progress_syntax import ProgressRun
from logparse.read.records import ReaderHooks, RecordReader
from patterns import load_builtin_catalog
from tests.logparse.read.test_progress_lines import _few_processes, _line
from tests.test_layers import graph, modules

CATALOG = load_builtin_catalog()
# what the fast path is made of: reading progress lines and prefixes where the blocks are made
FAST_PATH = ("logparse.read.progress_lines", "logparse.read.pre_records")
# how blocks and records are read: no observer reads a block, a column or the reader
READING = ("logparse.read.blocks", "logparse.read.records")


def _facts(run: ProgressRun) -> list[tuple]:
    """Each line of `run` on its own: (its line number, everything the run says of it)."""
    rows = [(row.steps[i], row.keys, row.values[i * len(row.keys) : (i + 1) * len(row.keys)], row.names)
            for row in run.rows for i in range(len(row.steps))]  # fmt: skip
    out = []
    for j, number in enumerate(run.numbers):
        row = rows.pop(0) if run.steps[j] >= 0 else None
        named = {k: v for k, v in (run.groups or {}).items() if v is not None}
        out.append(
            (
                number,
                run.steps[j],
                repr(run.seconds[j]),  # (NaN: none)
                run.markers[j],
                run.bar_n[j],
                run.bar_total[j],
                repr(run.bar_rate[j]),
                run.processes[j],
                None if row is None else (row[0], row[1], row[2].tobytes(), row[3]),
                run.time,
                run.repeat,
                named,
            )
        )
    assert not rows  # (a row for each step line, no more)
    return out


def _read_fast(analysis: Analysis, log: Path) -> tuple[dict[int, tuple], list[ProgressRun]]:
    """The facts the fast path hands on for `log` (every one taken), by line number; and the runs."""
    runs: list[ProgressRun] = []

    def take(run: ProgressRun, region: bool, stream: object) -> int:
        runs.append(run)
        return len(run.numbers)

    hooks = ReaderHooks(
        lambda source, number: False,
        lambda source, pid: True,
        analysis.progress_words,
        analysis.premask,
        take,
    )
    reader = RecordReader(analysis.reader.prefilter, analysis.syntax, analysis.env.ignores, hooks)
    for _ in reader.job([str(log)]):
        pass
    return {fact[0]: fact for run in runs for fact in _facts(run)}, runs


def _read_records(log: Path) -> dict[int, tuple]:
    """What ProgressSyntax.read makes of each record of `log` read the usual way, by line number (with
    the stage keywords the prefilter found in its raw line, as the analysis reads it)."""
    analysis = Analysis(CATALOG, ScanConfig(progress_lines=False, reader_process_bytes=None))
    out = {}
    for rec in analysis.reader.job([str(log)]):
        words = analysis.routes.route(rec.keywords).stage_words
        run = analysis.syntax.read(rec, words) if words else None
        if run is not None:
            assert len(run.numbers) == 1
            out[rec.line.number] = _facts(run)[0]
    return out


@pytest.mark.parametrize("seed", range(4))
def test_a_line_read_from_its_bytes_is_the_fact_its_record_is_read_into(seed: int, tmp_path: Path) -> None:
    """Step lines (of several shapes, with and without a step time, values of every kind), bars with
    and without a Ray prefix, stage markers and the lines that look like them, behind every kind of
    prefix: each line the fast path reads is the fact its record is read into, line for line."""
    log = tmp_path / "job.log"
    if seed == 0:
        _few_processes(log)
    else:
        rnd = random.Random(seed)
        lines = [_line(rnd, step // 3 + 1, 6) for step in range(2500)]
        log.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")
    fast, runs = _read_fast(Analysis(CATALOG, ScanConfig(reader_process_bytes=None)), log)
    usual = _read_records(log)
    assert fast and len(fast) > len(usual) / (2 if seed == 0 else 6)  # (the fast path read most)
    assert any(len(run.numbers) >= (MIN_BULK_LINES if seed == 0 else 2) for run in runs)
    for number, fact in fast.items():
        assert usual.get(number) == fact, number


def test_the_head_of_a_run_is_the_run_of_its_first_lines(tmp_path: Path) -> None:
    """ProgressRun.head(n), what the analysis applies of a run it takes in part, holds the first n
    lines' facts and their rows, and no other."""
    log = tmp_path / "job.log"
    rnd = random.Random(5)
    lines = []
    for step in range(1, 40):  # step lines of two shapes, and bars between them
        keys = ["actor/pg_loss", "timing_s/step"] if step % 7 else ["actor/pg_loss", "critic/score/mean"]
        lines.append(f"(TaskRunner pid=7) step:{step} - " + " - ".join(f"{k}:{rnd.random()}" for k in keys))
        lines += [f"(TaskRunner pid=7) \rTraining Progress:  1%|| {step}/40 [00:01<00:02, 1.5s/it]"] * (
            step % 3
        )
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _, runs = _read_fast(Analysis(CATALOG, ScanConfig(reader_process_bytes=None)), log)
    run = max(runs, key=lambda r: len(r.numbers))
    assert len(run.numbers) > 20 and len(run.rows) > 1
    whole = _facts(run)
    for n in range(1, len(whole) + 1):
        assert _facts(run.head(n)) == whole[:n]


def test_the_stage_tracker_has_one_way_in_and_applies_a_long_plain_run_at_once() -> None:
    """`apply(seq, run)` is the only way facts change the tracker (`feed` reads a record into a run of
    one and applies it); a run of plain lines goes a column at a time."""
    assert [name for name in vars(StageTracker) if name.startswith("apply")] == ["apply"]
    tracker = StageTracker()
    bulk = []
    tracker._apply_bulk = lambda seq, run: bulk.append(len(run.numbers))
    n = MIN_BULK_LINES + 3
    nan = float("nan")
    tracker.apply(1, ProgressRun("a.log", range(1, n + 1), [-1] * n, [nan] * n, [-1] * n,
                                 list(range(n)), [50] * n, [nan] * n, [(None, None)] * n))  # fmt: skip
    assert bulk == [n]


def test_the_reader_is_handed_functions_not_the_analysis() -> None:
    analysis = Analysis(CATALOG, ScanConfig())
    reader = analysis.reader
    assert isinstance(reader.hooks, ReaderHooks)
    assert all(value is not analysis for value in vars(reader).values())


def test_a_record_is_read_into_a_run_of_one() -> None:
    from logparse.read.normalize import Normalizer
    from logparse.read.sources import Line

    analysis = Analysis(CATALOG, ScanConfig())
    text = "(TaskRunner pid=7, ip=10.0.0.1) step:3 - actor/pg_loss:0.5 - timing_s/step:2.5"
    rec: Record = Normalizer().normalize(Line("a.log", 9, text), 1)
    run = analysis.syntax.read(rec)
    assert run is not None and run.numbers == (9,) and run.steps == (3,) and run.seconds == (2.5,)
    assert run.processes == (("TaskRunner", "10.0.0.1"),) and run.rows[0].keys == (
        "actor/pg_loss",
        "timing_s/step",
    )
    assert analysis.syntax.read(Normalizer().normalize(Line("a.log", 10, "nothing here"), 2)) is None


@pytest.mark.parametrize("module", [m for m in modules() if not m.startswith("logparse.read")])
def test_nothing_but_the_reading_modules_imports_the_fast_path(module: str) -> None:
    """A fast path is an implementation detail of read/ (STYLE.md, "One road per kind of fact"): no
    observer, decision or command imports how progress lines are read from bytes, and no observer
    how blocks and records are read."""
    wrong = sorted(m for m in graph()[module] if m in FAST_PATH)
    assert not wrong, f"{module} imports {wrong}: the fast path hands ProgressRun facts on, nothing else"
    if module.startswith("logparse.observe"):
        wrong = sorted(m for m in graph()[module] if m in READING)
        assert not wrong, f"{module} imports {wrong}: an observer is told facts, it reads no block"


def test_what_a_message_says_stays_in_read() -> None:
    """ProgressLine is read/'s own step towards a ProgressRun: no module outside read/ names it."""
    for name, path in modules().items():
        if not name.startswith("logparse.read"):
            assert "ProgressLine" not in path.read_text(encoding="utf-8"), name
