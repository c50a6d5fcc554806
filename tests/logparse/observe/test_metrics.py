"""MetricsTracker: step lines of every verl era into rows, a DataFrame / CSV, and stated anomaly thresholds."""

from __future__ import annotations

import itertools
import math
import random
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logparse.observe.metrics import AnomalyKind, MetricsConfig, MetricsTracker, _spike_scan, _spikes
from logparse.read.normalize import Normalizer, Record
from logparse.read.progress_syntax import ProgressSyntax
from logparse.read.sources import InputStats, Line, read_input, strip_ansi
from logparse.read.steps import (
    STEP_TIME_KEY,
    StepParser,
    parse_step_line,
    parse_value,
    picker,
    split_step_line,
)
from patterns.progress import key_family, wanted_key
from tests.conftest import SAMPLES

V03_LINE = (
    "(TaskRunner pid=1888103) step:1 - global_seqlen/min:85236.000 - actor/entropy_loss:0.436 - "
    "critic/vf_loss:7.455 - critic/grad_norm:462.344 - actor/pg_loss:0.018 - actor/grad_norm:0.779 - "
    "training/global_step:1.000 - critic/score/mean:0.004 - timing_s/step:61.209"
)
V05_LINE = (
    "\x1b[36m(TaskRunner pid=3165)\x1b[0m step:71 - global_seqlen/min:69484 - actor/entropy:0.1194450631737709 - "
    "critic/vf_loss:np.float64(0.007003280876688223) - critic/lr:np.float64(1e-05) - "
    "actor/pg_loss:np.float64(-0.0006611689302644663) - training/global_step:71 - training/epoch:2 - "
    "val-core/openai/gsm8k/reward/mean@1:0.4988627748294162 - response_length/mean:167.265625 - "
    "perf/total_num_tokens:np.int64(69484) - timing_s/step:56.93468872085214"
)


def take(tracker: MetricsTracker, rec: Record, syntax: ProgressSyntax) -> None:
    """What a scan tells the tracker of a record: the rows of what `syntax` reads in it."""
    run = syntax.read(rec)
    if run is not None:
        tracker.take(run)


def feed(lines: list[str], tracker: MetricsTracker | None = None) -> MetricsTracker:
    """Every value kept (as for --metrics-csv): the frame then holds every numeric key."""
    tracker = tracker or MetricsTracker()
    norm = Normalizer()
    syntax = ProgressSyntax(all_keys=True)
    for i, text in enumerate(lines, 1):
        take(tracker, norm.normalize(Line("job.log", i, strip_ansi(text)), i), syntax)
    return tracker


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("0.123", 0.123),
        ("np.float64(0.1)", 0.1),
        ("np.int64(3)", 3.0),
        ("1e-06", 1e-06),
        ("7", 7.0),
        ("-0.5", -0.5),
        (" 61.209", 61.209),
        ("np.float32(2.5)", 2.5),
    ],
)
def test_parse_value_numbers(raw: str, value: float) -> None:
    assert parse_value(raw) == value


@pytest.mark.parametrize("raw", ["nan", "np.float64(nan)", "inf", "-inf", "np.float64(-inf)"])
def test_parse_value_non_finite(raw: str) -> None:
    v = parse_value(raw)
    assert v is not None and not math.isfinite(v)


@pytest.mark.parametrize("raw", ["True", "['a', 'b']", "tensor(1.)", "", "abc", "None"])
def test_parse_value_drops_non_numbers(raw: str) -> None:
    assert parse_value(raw) is None


def test_three_decimal_era_line() -> None:
    step, values = parse_step_line(V03_LINE.split(") ", 1)[1])
    assert step == 1
    assert values["critic/grad_norm"] == 462.344 and values["training/global_step"] == 1.0
    assert len(values) == 9


def test_full_repr_era_line_and_keys_with_slashes_and_at() -> None:
    t = feed([V05_LINE])
    row = t.frame().loc[71]
    assert row["critic/lr"] == 1e-05 and row["perf/total_num_tokens"] == 69484
    assert row["val-core/openai/gsm8k/reward/mean@1"] == pytest.approx(0.49886, abs=1e-5)
    assert row["training/global_step"] == 71


def test_split_on_last_colon_and_drop_non_numbers() -> None:
    step, values = parse_step_line(
        "step:5 - val/test_score/custom:ds:0.5 - note:hello - list:[1, 2] - loss:nan"
    )
    assert step == 5
    assert values["val/test_score/custom:ds"] == 0.5
    assert "note" not in values and "list" not in values
    assert math.isnan(values["loss"])


def _reference_parse(message: str) -> tuple[int, dict[str, float]] | None:
    """The definition StepParser implements faster: split_step_line's (key, raw value) pairs, each
    value through parse_value, a later key winning."""
    split = split_step_line(message)
    if split is None:
        return None
    values = {}
    for key, raw in split[1]:
        value = parse_value(raw)
        if value is not None:
            values[key] = value
    return split[0], values


def _same(a: dict[str, float], b: dict[str, float]) -> bool:
    return a.keys() == b.keys() and all(
        x == y or (math.isnan(x) and math.isnan(y)) for x, y in ((a[k], b[k]) for k in a)
    )


PART = st.one_of(
    st.sampled_from(
        [
            "loss:0.5",
            "a/b:np.float64(1e-05)",
            "x:np.int64(3)",
            "k: nan ",
            "k:-inf",
            "k:1:2",
            "k:[1, 2]",
            "k:tensor(0.5)",
            "k:np.bool_(True)",
            " k :7",
            ":5",
            "k:",
            "k:np.float64(0.1))",
            "k:0.5,",
            "custom:ds:0.5",
            "k:np.float32( 2.5 )",
            "k:True",
            "k:1e3",
            "k:.5",
            "k:+1",
        ]
    ),
    st.text(alphabet="ak:/ .-()np0123456789ef", max_size=14),
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.lists(
            PART
            | st.sampled_from(
                [
                    "actor/pg_loss:0.25",
                    "critic/score/mean:np.float64(3)",
                    " grad_norm : 7",
                    "loss:np.float64(nan)",
                    "actor/pg_loss:x",
                ]
            ),
            max_size=6,
        ),
        min_size=1,
        max_size=4,
    )
)
@pytest.mark.slow
def test_step_parser_keeps_the_wanted_values_of_the_reference(lines: list[list[str]]) -> None:
    """Line after line (the parser reuses a line's shape): the wanted keys' values (every key's for a
    CSV) are the reference's, and the names are every key of the line."""
    for all_keys in (False, True):
        _keeps_the_values_of_the_reference(StepParser(all_keys), lines)


VALUE = st.one_of(
    st.sampled_from(
        [
            "0.5",
            "np.float64(1e-05)",
            "np.float64(0.1))",
            "np.float64()",
            "np.float64(nan)",
            "np.int64(3)",
            " nan ",
            "-inf",
            "1_0",
            "",
            "1:2",
            "[1, 2]",
            "np.float64(1",
            "\t7",
            ".5",
        ]
    ),
    st.text(alphabet="k:/ .-()np0123456789ef\t", max_size=10),
)
KEY = st.sampled_from(["actor/pg_loss", "critic/score/mean", "timing_s/step", "loss", "a/b", " k ", "x-y"])


@pytest.mark.slow  # 4-5 s: 300 generated shapes, each parsed both ways
@settings(max_examples=300, deadline=None)
@given(st.lists(KEY, min_size=1, max_size=5, unique=True), st.lists(st.lists(VALUE, min_size=5, max_size=5)))
def test_step_parser_on_lines_of_one_shape_keeps_the_values_of_the_reference(
    keys: list[str], rows: list[list[str]]
) -> None:
    """Lines of the same keys one after another, whose shape the parser compiles as one expression
    after a few of them (steps._whole_pattern): the values are still the reference's, whatever the
    values hold (spaces, colons, a bracket too many, no number)."""
    plain = [["0.25"] * 5] * 3  # (lines that let the shape be compiled, before the drawn ones)
    for all_keys in (False, True):
        parser = StepParser(all_keys)
        _keeps_the_values_of_the_reference(
            parser, [[f"{k}:{v}" for k, v in zip(keys, values, strict=False)] for values in plain + rows]
        )


@pytest.mark.slow  # 2-4 s: 300 generated shapes, each read from bytes and from text
@settings(max_examples=300, deadline=None)
@given(st.lists(KEY, min_size=1, max_size=5, unique=True), st.lists(st.lists(VALUE, min_size=5, max_size=5)))
def test_step_parser_reads_a_compiled_shape_from_bytes_as_from_text(
    keys: list[str], rows: list[list[str]]
) -> None:
    """parse_bytes of an ASCII step line is parse of its text, with where the step time's keyword is
    first (-1: nowhere), or None; lines of one shape after a few that let it be compiled."""
    plain = [["0.25"] * 5] * 3
    for all_keys in (False, True):
        text, raw = StepParser(all_keys), StepParser(all_keys)
        for values in plain + rows:
            message = "step:3 - " + " - ".join(f"{k}:{v}" for k, v in zip(keys, values, strict=False))
            want = text.parse(message)
            got = raw.parse_bytes(message.encode()) if message.isascii() and "\n" not in message else None
            if got is None:
                assert raw.parse(message) is not None or want is None
                continue
            assert got[:2] == want[:2] and got[3] == want[3], message
            assert _same(dict(zip(got[1], got[2], strict=True)), dict(zip(want[1], want[2], strict=True)))
            assert got[4] == message.find(STEP_TIME_KEY)


def test_step_parser_compiles_a_repeated_shape_and_drops_it_when_the_keys_change() -> None:
    parser = StepParser()
    lines = [f"step:{i} - actor/pg_loss:np.float64({i}.5) - loss:{i} - timing_s/step:2" for i in range(4)]
    for line in lines:
        parser.parse(line)
    assert parser._whole is not None
    assert parser.parse("step:9 - actor/pg_loss:0.5 - other:1")[1:3] == (("actor/pg_loss",), [0.5])
    assert parser._whole is None


def _keeps_the_values_of_the_reference(parser: StepParser, lines: list[list[str]]) -> None:
    for parts in lines:
        message = "step:3 - " + " - ".join(parts)
        step, keys, values, names = parser.parse(message)
        _, ref = _reference_parse(message)
        want = {k: v for k, v in ref.items() if parser.all_keys or wanted_key(k)}
        assert step == 3 and _same(dict(zip(keys, values, strict=True)), want), (message, keys, values, want)
        assert set(want) <= set(names)
        assert list(names) == list(dict.fromkeys(k for k, _ in split_step_line(message)[1]))


def test_selective_tracker_keeps_chart_and_anomaly_keys_and_names_the_rest() -> None:
    t = MetricsTracker()
    norm = Normalizer()
    syntax = ProgressSyntax()  # (a scan without --metrics-csv)
    for i, text in enumerate([V05_LINE, V05_LINE.replace("step:71", "step:72")], 1):
        take(t, norm.normalize(Line("job.log", i, strip_ansi(text)), i), syntax)
    assert "critic/lr" in t.keys and "perf/total_num_tokens" in t.keys  # named
    assert t.series("critic/lr") == []  # not kept: no chart or rule uses it
    assert t.series("actor/pg_loss") == [(71, -0.0006611689302644663), (72, -0.0006611689302644663)]
    assert t.series("critic/vf_loss")[0] == (71, 0.007003280876688223)
    assert "timing_s/step" in t.valued_keys and "critic/lr" not in t.valued_keys


def test_step_parser_equals_the_reference_on_real_lines() -> None:
    for line in (V03_LINE, strip_ansi(V05_LINE)):
        step, keys, values, _names = StepParser(all_keys=True).parse(line)
        ref = _reference_parse(line)
        assert step == ref[0] and _same(dict(zip(keys, values, strict=True)), ref[1]) and len(keys) >= 9
        assert parse_step_line(line) == ref


def test_step_line_after_a_progress_bar() -> None:
    t = feed(
        ["[default0]:Training Progress:  67%|██████▋   | 2/3 [00:04<00:02,  2.01s/it]step:2 - train/loss:2.1"]
    )
    assert t.steps == [2] and t.frame().loc[2, "train/loss"] == 2.1


def test_not_step_lines() -> None:
    t = feed(["(TaskRunner pid=7) training/global_step:7 - training/epoch:0", "no step here", "step:x - a:1"])
    assert t.steps == []


def test_later_line_for_the_same_step_merges() -> None:
    t = feed(
        [
            "step:0 - val-core/gsm8k/reward/mean@1:0.2",
            "step:1 - loss:3.0",
            "step:0 - loss:4.0",
            "step:1 - loss:2.5",
        ]
    )
    df = t.frame()
    assert list(df.index) == [0, 1] and df.index.name == "step"
    assert df.loc[0, "loss"] == 4.0 and df.loc[0, "val-core/gsm8k/reward/mean@1"] == 0.2
    assert df.loc[1, "loss"] == 2.5


def test_frame_is_sorted_and_csv_round_trips(tmp_path: Path) -> None:
    t = feed(["step:3 - loss:1.0", "step:1 - loss:3.0", "step:2 - loss:2.0 - grad_norm:0.5"])
    df = t.frame()
    assert list(df.index) == [1, 2, 3]
    assert math.isnan(df.loc[1, "grad_norm"])
    path = tmp_path / "m.csv"
    t.to_csv(path)
    # (every loss value is a whole number: written as one, as `training/global_step` is)
    assert path.read_text().splitlines()[:3] == ["step,loss,grad_norm", "1,3,", "2,2,0.5"]


def test_empty_frame() -> None:
    df = MetricsTracker().frame()
    assert df.empty and df.index.name == "step"


def test_bounds_on_rows_and_keys() -> None:
    t = MetricsTracker(MetricsConfig(max_rows=3, max_keys_per_row=2))
    for step in range(1, 6):
        t.add(step, {"a": 1.0, "b": 2.0, "c": 3.0})
    assert t.steps == [3, 4, 5]
    assert t.dropped_rows == 2 and t.dropped_keys == 5
    assert len(t.notes) == 2 and "limit 3 steps" in t.notes[0]


@pytest.mark.parametrize(
    ("key", "family"),
    [
        ("actor/pg_loss", "loss"),
        ("critic/vf_loss", "loss"),
        ("actor/kl_loss", "loss"),
        ("loss", "loss"),
        ("train/loss", "loss"),
        ("actor/grad_norm", "grad-norm"),
        ("grad_norm", "grad-norm"),
        ("critic/score/mean", "watched"),
        ("actor/entropy_loss", "watched"),
        ("actor/ppo_kl", "watched"),
        ("critic/values/mean", None),
        ("critic/vf_explained_var", None),
        ("perf/throughput", None),
    ],
)
def test_key_families(key: str, family: str | None) -> None:
    assert key_family(key) == family


def series(key: str, values: list[float], extra: dict[str, float] | None = None) -> MetricsTracker:
    t = MetricsTracker()
    for step, v in enumerate(values, 1):
        t.add(step, {key: v, **(extra or {})})
    return t


def test_nan_in_loss_is_fatal_when_the_job_failed() -> None:
    t = series("actor/pg_loss", [0.1, 0.2, float("nan"), 0.1])
    (a,) = t.anomalies(failed=True)
    assert (a.kind, a.step, a.key, a.fatal) == (AnomalyKind.NAN_INF, 3, "actor/pg_loss", True)
    assert "actor/pg_loss is nan at step 3" in a.detail and "0.2 at step 2" in a.detail
    (healthy,) = t.anomalies(failed=False)
    assert healthy.fatal is False and "finite again" in healthy.detail


def test_nan_that_stays_is_fatal_even_without_a_failure() -> None:
    (a,) = series("critic/grad_norm", [1.0, float("inf"), float("nan")]).anomalies(failed=False)
    assert (a.step, a.fatal) == (2, True)
    assert "still nan at step 3" in a.detail


def test_nan_in_watched_keys_is_not_fatal_and_harmless_keys_are_ignored() -> None:
    t = series(
        "actor/entropy",
        [0.5, float("nan")],
        {"critic/values/mean": float("nan"), "critic/vf_explained_var": float("nan")},
    )
    (a,) = t.anomalies(failed=True)
    assert (a.key, a.fatal) == ("actor/entropy", False)


GRAD = [1.0, 1.2, 0.9, 1.1, 1.0]  # median 1.0


def test_grad_norm_spike_threshold() -> None:
    assert series("actor/grad_norm", GRAD + [9.9]).anomalies(False) == []
    (a,) = series("actor/grad_norm", GRAD + [10.5, 1.0, 12.0]).anomalies(False)
    assert (a.kind, a.step, a.value) == (AnomalyKind.GRAD_NORM_SPIKE, 6, 10.5)
    assert "10.5x the median 1 of the previous 5 steps (2 such spikes in all)" in a.detail
    assert series("actor/grad_norm", GRAD[:4] + [50.0]).anomalies(False) == []  # fewer than 5 before it


def test_response_length_collapse_threshold() -> None:
    lengths = [400.0, 500.0, 450.0, 480.0, 470.0]
    assert series("response_length/mean", lengths + [101.0]).anomalies(False) == []  # 20.2% of 500
    (a,) = series("response_length/mean", lengths + [99.0]).anomalies(False)
    assert (a.kind, a.step) == (AnomalyKind.RESPONSE_LENGTH_COLLAPSE, 6)
    assert "below 20% of its running max 500 (step 2)" in a.detail
    assert series("response_length/mean", [500.0, 450.0, 480.0, 470.0, 20.0]).anomalies(False) == []


def test_clip_ratio_blowup_threshold() -> None:
    (a,) = series("response_length/clip_ratio", [0.1, 0.3, 0.95]).anomalies(False)
    assert (a.kind, a.step) == (AnomalyKind.CLIP_RATIO_BLOWUP, 3)
    assert series("response_length/clip_ratio", [0.1, 0.3, 0.9]).anomalies(False) == []
    assert series("response_length/clip_ratio", [0.95, 0.97, 0.99]).anomalies(False) == []  # never below 0.5


def test_reward_collapse_sustained_drop() -> None:
    rising = [0.10, 0.20, 0.30, 0.40, 0.50, 0.60, 0.62]
    (a,) = series("critic/score/mean", rising + [0.12, 0.11, 0.10]).anomalies(False)
    assert (a.kind, a.step, a.key) == (AnomalyKind.REWARD_COLLAPSE, 8, "critic/score/mean")
    assert "fell to 0.12 at step 8 from 0.62" in a.detail


def test_reward_dip_that_recovers_or_noise_is_no_collapse() -> None:
    rising = [0.10, 0.20, 0.30, 0.40, 0.50, 0.60, 0.62]
    assert series("critic/rewards/mean", rising + [0.15, 0.60, 0.62]).anomalies(False) == []
    noisy = [0.10, 0.13, 0.11, 0.13, 0.12, 0.08, 0.12, 0.11]
    assert series("critic/score/mean", noisy).anomalies(False) == []
    assert series("critic/score/mean", [0.5] * 8 + [0.1]).anomalies(False) == []  # no range yet


def test_anomalies_sorted_by_step_fatal_first() -> None:
    t = MetricsTracker()
    for step, (loss, grad) in enumerate([(0.1, 1.0)] * 5 + [(0.1, 20.0), (float("nan"), float("nan"))], 1):
        t.add(step, {"actor/pg_loss": loss, "actor/grad_norm": grad})
    kinds = [(a.step, a.kind, a.fatal) for a in t.anomalies(failed=True)]
    assert kinds == [(6, "grad-norm-spike", False), (7, "nan-inf", True), (7, "nan-inf", True)]


def run_sample(name: str, all_keys: bool = True) -> MetricsTracker:
    path = str(SAMPLES / name)
    norm = Normalizer()
    t = MetricsTracker()
    syntax = ProgressSyntax(all_keys=all_keys)
    for seq, line in enumerate(read_input(path, InputStats(path)), 1):
        take(t, norm.normalize(line, seq), syntax)
    return t


def test_sample_ray_healthy_rows() -> None:
    t = run_sample("ray-healthy.log")
    df = t.frame()
    assert list(df.index) == [1, 2, 3, 4, 5]
    assert {"actor/pg_loss", "actor/grad_norm", "critic/score/mean", "timing_s/step"} <= set(df.columns)
    assert df.loc[5, "training/global_step"] == 5
    assert t.anomalies(failed=False) == []
    selective = run_sample("ray-healthy.log", all_keys=False)  # a scan without --metrics-csv
    assert selective.keys == t.keys and selective.steps == t.steps
    assert selective.series("actor/pg_loss") == t.series("actor/pg_loss")
    assert selective.anomalies(failed=True) == t.anomalies(failed=True)


def test_sample_torchrun_rank_exception_rows() -> None:
    t = run_sample("torchrun-rank-exception.log")
    assert t.steps == [1, 2, 3, 4]
    assert list(t.frame().columns) == t.keys == ["loss", "grad_norm", "lr"]
    assert t.anomalies(failed=True) == []


def test_a_later_line_for_a_step_wins_and_rows_keep_their_keys() -> None:
    t = MetricsTracker()
    t.add(1, {"a": 1.0, "b": 2.0})
    t.add(2, {"a": 3.0})
    t.add(1, {"b": 5.0, "c": 6.0})  # a restart printing step 1 again
    assert t.steps == [1, 2] and t.keys == ["a", "b", "c"]
    assert (
        t.series("a") == [(1, 1.0), (2, 3.0)] and t.series("b") == [(1, 5.0)] and t.series("c") == [(1, 6.0)]
    )
    df = t.frame()
    assert math.isnan(df.loc[2, "b"]) and df.loc[1, "b"] == 5.0


def test_a_bound_of_one_row_keeps_the_last() -> None:
    t = MetricsTracker(MetricsConfig(max_rows=1))
    for step in range(1, 4):
        t.add(step, {"a": float(step)})
    assert t.steps == [3] and t.series("a") == [(3, 3.0)] and t.dropped_rows == 2


def _columns(series: list[tuple[int, float]]) -> tuple[list[int], list[float]]:
    """A series as the rules take it: its steps and its values."""
    return [s for s, _ in series], [v for _, v in series]


def _reference_spike(series: list[tuple[int, float]]):
    """The grad-norm rule as stated: the median of the previous SPIKE_WINDOW finite values."""
    import statistics
    from collections import deque

    from patterns.progress import SPIKE_FACTOR, SPIKE_MIN_HISTORY, SPIKE_WINDOW

    history: deque = deque(maxlen=SPIKE_WINDOW)
    found = []
    for step, value in series:
        if not math.isfinite(value):
            continue
        if len(history) >= SPIKE_MIN_HISTORY:
            median = statistics.median(history)
            if median > 0 and value > SPIKE_FACTOR * median:
                found.append((step, value, median, len(history)))
        history.append(value)
    return found


@pytest.mark.slow  # a property test over many generated series: about 3 s
@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.floats(0, 5), st.floats(40, 500), st.just(float("nan"))), max_size=80))
def test_grad_norm_spike_equals_the_stated_rule(values: list[float]) -> None:
    series = list(enumerate(values, 1))
    got = MetricsTracker._grad_norm_spike("actor/grad_norm", *_columns(series))
    want = _reference_spike(series)
    assert bool(got) == bool(want)
    if want:
        step, value, median, n = want[0]
        assert (got[0].step, got[0].value) == (step, value)
        assert f"the median {median:.4g} of the previous {n} steps" in got[0].detail
        assert (f"({len(want)} such spikes in all)" in got[0].detail) == (len(want) > 1)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(st.floats(0.5, 2), st.floats(-1, 1), st.just(0.0), st.just(-0.0), st.floats(15, 500)),
        min_size=0,
        max_size=600,
    )
)
def test_the_spike_shortcut_finds_every_spike_the_full_scan_does(values: list[float]) -> None:
    """_spikes passes over a block whose highest value cannot be a spike; every spike, its median and
    its count of values before it are those of the scan of every value."""
    assert _spikes(values) == _spike_scan(values, 0, len(values))


def _reference_reward_collapse(series: list[tuple[int, float]]):
    """The reward-collapse rule as stated, with the changes' median taken at every step."""
    import statistics

    from patterns.progress import (
        REWARD_DROP_FRACTION,
        REWARD_DROP_WITHIN,
        REWARD_MIN_HISTORY,
        REWARD_NOISE_FACTOR,
        REWARD_STAY_STEPS,
    )

    points = [(s, v) for s, v in series if math.isfinite(v)]
    values = [v for _, v in points]
    changes = [abs(b - a) for a, b in pairwise(values)]
    for i in range(REWARD_MIN_HISTORY, len(points)):
        hi, lo = max(values[:i]), min(values[:i])
        spread = hi - lo
        if spread <= 0:
            continue
        drop = max(values[max(0, i - REWARD_DROP_WITHIN) : i]) - values[i]
        # (the median of the changes before step i, taken only where the drop is large for the range)
        if drop > REWARD_DROP_FRACTION * spread and drop > REWARD_NOISE_FACTOR * statistics.median(
            changes[: i - 1]
        ):
            held = values[i : i + REWARD_STAY_STEPS]
            if sum(held) / len(held) < hi - REWARD_DROP_FRACTION * spread:
                return points[i]
    return None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.floats(0, 1), st.floats(0.9, 1.0), st.just(float("nan"))), max_size=40))
def test_reward_collapse_equals_the_stated_rule(values: list[float]) -> None:
    series = list(enumerate(values, 1))
    got = MetricsTracker._reward_collapse("critic/score/mean", *_columns(series))
    want = _reference_reward_collapse(series)
    assert (got[0].step, got[0].value) == want if want else got == []


def _long_reward_series(seed: int) -> list[float]:
    """A long reward series: uniform noise, Gaussian noise, a random walk, a slow rise with noise or a
    few values repeated, each with a collapse (a drop that stays) somewhere or none."""
    rnd = random.Random(seed)
    n = rnd.choice([60, 400, 1500, 3000])
    kind = seed % 5
    if kind == 0:
        values = [rnd.random() for _ in range(n)]
    elif kind == 1:
        values = [rnd.gauss(0.5, 0.1) for _ in range(n)]
    elif kind == 2:
        values = list(itertools.accumulate(rnd.gauss(0, 0.01) for _ in range(n)))
    elif kind == 3:
        values = [i / n + rnd.gauss(0, 0.02) for i in range(n)]
    else:
        values = [rnd.choice([0.25, 0.5, 0.75]) for _ in range(n)]
    if rnd.random() < 0.6:
        at = rnd.randrange(5, n)
        depth = rnd.choice([0.05, 0.5, 2.0, 20.0])
        values[at:] = [v - depth for v in values[at:]]
    return values


@pytest.mark.parametrize("seed", range(40))
def test_reward_collapse_on_long_series_equals_the_stated_rule(seed: int) -> None:
    """Past their first few hundred steps the loops skip the changes' median where a lower bound of it
    already rules the step out (_Noise.floor): on long series of every kind, with a collapse or none,
    the loop and the arrays give the step the rule states."""
    import numpy as np

    from logparse.observe.metrics import _array_reward

    values = _long_reward_series(seed)
    steps = list(range(1, len(values) + 1))
    want = _reference_reward_collapse(list(enumerate(values, 1)))
    got = MetricsTracker._reward_collapse("critic/score/mean", steps, values)
    arrays = _array_reward("critic/score/mean", steps, np.arange(len(values)), np.array(values))
    assert [(a.step, a.value) for a in got] == ([] if want is None else [want])
    assert _seen(arrays) == _seen(got)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(st.floats(0, 1), st.floats(-1e308, 1e308), st.just(0.0), st.just(0.5)),
        min_size=3,
        max_size=300,
    ),
    st.lists(st.integers(2, 300), min_size=1, max_size=6),
)
def test_the_noise_floor_is_at_most_every_median_it_covers(values: list[float], asks: list[int]) -> None:
    """_Noise.floor(i) is at most the median of the changes before each step it covers (i up to
    floor_to), and median(i) is that median, as the stated rule takes it."""
    import statistics

    from logparse.observe.metrics import _Noise

    changes = [abs(b - a) for a, b in pairwise(values)]
    noise = _Noise(values)
    for i in sorted({min(a, len(values)) for a in asks}):
        floor = noise.floor(i)
        for j in range(i, min(noise.floor_to, len(values) + 1)):
            assert floor <= statistics.median(changes[: j - 1])
        assert noise.median(i) == statistics.median(changes[: i - 1])


@pytest.mark.parametrize("start", [6, 40, 129, 1001])
def test_the_noise_floor_is_tight_where_the_stretch_is_flat(start: int) -> None:
    """Changes 1, 2, ..., start - 2 before the stretch and none in it (the values stay put): the median
    before its last step is the floor itself (or half a change above it), so a floor any higher would be
    above a median it covers."""
    import statistics

    from logparse.observe.metrics import _Noise

    rnd = random.Random(start)
    changes = list(range(1, start - 1))
    rnd.shuffle(changes)
    values = list(itertools.accumulate([0.0] + [rnd.choice([1, -1]) * c for c in changes]))
    values += [values[-1]] * 2000
    noise = _Noise(values)
    floor = noise.floor(start)
    every = [abs(b - a) for a, b in pairwise(values)]
    lowest = min(statistics.median(every[: j - 1]) for j in range(start, noise.floor_to))
    assert floor <= lowest <= floor + 0.5


def test_the_noise_floor_spares_most_medians_on_a_noisy_series(monkeypatch) -> None:
    """On 5,000 uniform random rewards a quarter of the steps drop by half the range, and none beats five
    times the changes' median: the floor rules out nearly all of them without feeding the heaps (they
    were fed at each such step before, to the series' end)."""
    from logparse.observe import metrics

    asked = []
    median = metrics._Noise.median
    monkeypatch.setattr(metrics._Noise, "median", lambda self, i: asked.append(i) or median(self, i))
    rnd = random.Random(7)
    values = [rnd.random() for _ in range(5000)]
    assert MetricsTracker._reward_collapse("critic/score/mean", list(range(5000)), values) == []
    assert _reference_reward_collapse(list(enumerate(values))) is None
    # (the floor is about the 3/8 quantile of the changes: early steps whose drop nears the whole range
    # still need the median: 38 of the 1,376 candidates, the heaps fed to step 1,153 of 5,000)
    assert len(asked) < 100 and max(asked, default=0) < 1500


TRICKY_VALUES = [
    "1.5",
    " 2",
    "np.float64(3.25)",
    "np.float64( 4)",
    "np.float64(5 )",
    "nan",
    "inf",
    "-inf",
    "1e-06",
    "np.int64(7)",
    "x",
    "",
    "True",
    "np.float64()",
    "np.float64(nan)",
    "1_0",
    "١٢",
    " nan ",
    "np.float64(1)x",
    "[1, 2]",
    "Infinity",
    "+.5",
    ".",
    "-",
    "np.float64(np.int64(3))",
    "np.float32(2)",
    "np.float64(\u2003 1)",
    "1\u2003",
    "np.float64(1)\u2003",
    "\x0b1",
    "1\x1c",
    "np.float64(\x1f2)",
    "np.float64(1)\t",
    "-inf",
    "+1e3",
    "0x10",
    "1e",
    "np.float64(inf)",
    "np.float64(1\n)",
]


@pytest.mark.parametrize("all_keys", [False, True])
def test_step_parser_reads_the_values_of_a_repeated_shape_as_parse_value_does(all_keys: bool) -> None:
    """Lines of one shape (the same keys, read without splitting every part) with every kind of value
    at the wanted keys (all of them for a CSV): the values are parse_value's."""
    rnd = random.Random(1)
    keys = [
        "actor/pg_loss",
        "actor/grad_norm",
        "critic/score/mean",
        "timing_s/step",
        "response_length/mean",
        "foo",
        "bar/baz",
    ]
    for _ in range(3000):
        parser = StepParser(all_keys)
        for _ in range(3):
            line = f"step:{rnd.randrange(100)} - " + " - ".join(
                f"{k}:{rnd.choice(TRICKY_VALUES)}" for k in keys
            )
            step, kept, values, _ = parser.parse(line)
            want_step, want = _reference_parse(line)
            assert step == want_step
            want = {k: v for k, v in want.items() if all_keys or wanted_key(k)}
            assert _same(dict(zip(kept, values, strict=True)), want), line


@pytest.mark.parametrize("seed", range(30))
def test_add_rows_equals_add_row_in_turn(seed: int) -> None:
    """Rows added a shape at a time (add_rows) leave the tracker as add_row of each in turn does, past
    the bounds on rows and keys too; and its series and steps, read in arrival order while the steps
    rise, are those of the dict-and-sort way."""
    from array import array

    rnd = random.Random(seed)
    config = MetricsConfig(max_rows=rnd.choice([2, 7, 100_000]), max_keys_per_row=rnd.choice([2, 5, 512]))
    one, many = MetricsTracker(config), MetricsTracker(config)
    shapes = [(("a", "b"), ("a", "b", "x")), (("b", "c", "d"), ("b", "c", "d")), (("e",), ("e", "f"))]
    step = 0
    for _ in range(rnd.randrange(1, 15)):
        keys, names = rnd.choice(shapes)
        if rnd.random() < 0.3:
            names = tuple(names)  # an equal tuple, not the same object
        rows = rnd.randrange(1, 12)
        steps = []
        for i in range(rows):
            if seed % 3 == 2:  # rising but for a repeat where a shape's rows begin
                step += 0 if i == 0 and rnd.random() < 0.1 else 1
            else:
                step += rnd.choice([1, 1, 1, 2]) if seed % 2 or rnd.random() < 0.9 else -rnd.randrange(3)
            steps.append(step)
        values = array("d", [rnd.random() for _ in range(rows * len(keys))])
        for i, s in enumerate(steps):
            one.add_row(s, keys, values[i * len(keys) : (i + 1) * len(keys)], names)
        many.add_rows(steps, keys, values, names)
    for t in (one, many):
        assert (t.steps, t.keys, t.valued_keys, t.notes, t._rows) == (
            one.steps,
            one.keys,
            one.valued_keys,
            one.notes,
            one._rows,
        )
        assert [t.series(k) for k in "abcdef"] == [one.series(k) for k in "abcdef"]
    assert many._ordered == one._ordered
    one._ordered = False  # (the dict-and-sort way)
    assert [many.series(k) for k in "abcdef"] == [one.series(k) for k in "abcdef"] and many.steps == one.steps


WATCHED = [
    "actor/pg_loss",
    "actor/grad_norm",
    "critic/grad_norm",
    "actor/entropy",
    "response_length/mean",
    "response_length/clip_ratio",
    "critic/score/mean",
    "critic/rewards/mean",
]
ODD_VALUES = [0.0, -0.0, 1.0, 0.5, 0.95, float("nan"), float("inf"), float("-inf"), 100.0, 1e-300]


def _rows(rnd: random.Random, n: int, ordered: bool) -> MetricsTracker:
    """A tracker of n rows of the watched keys (some rows without some keys), values from a few
    regimes at once: noise, plateaus, spikes, collapses, ties of +0.0 and -0.0, NaN and Inf."""
    t = MetricsTracker()
    level = {k: rnd.choice([0.0, 1.0, 100.0]) for k in WATCHED}
    steps = list(range(1, n + 1)) if ordered else [rnd.randrange(1, n + 1) for _ in range(n)]
    for step in steps:
        row = {}
        for key in WATCHED:
            r = rnd.random()
            if r < 0.05:
                continue
            if r < 0.1:
                level[key] = rnd.choice([0.0, 0.01, 1.0, 50.0, 1000.0])
            v = rnd.choice(ODD_VALUES) if r < 0.15 else level[key] * (1 + rnd.choice([0, 0.1, -0.1, 0.5]))
            row[key] = v
        t.add(step, row)
    return t


def _seen(anomalies: list) -> list[tuple]:
    """What a report shows of each anomaly (a NaN value as its repr: NaN equals nothing)."""
    return [(a.kind, a.step, a.key, repr(a.value), a.detail, a.fatal) for a in anomalies]


@pytest.mark.parametrize("seed", range(60))
def test_the_rules_on_arrays_find_the_same_anomalies_as_the_loops(seed: int) -> None:
    rnd = random.Random(seed)
    t = _rows(rnd, rnd.choice([3, 8, 25, 200, 3000]), ordered=seed % 5 != 4)
    for failed in (False, True):
        assert _seen(t.anomalies(failed, arrays=True)) == _seen(t.anomalies(failed, arrays=False))


@pytest.mark.parametrize("seed", range(12))
def test_the_spike_medians_taken_a_few_windows_at_a_time_are_the_same(seed: int, monkeypatch) -> None:
    """_array_spike takes the medians SPIKE_ROWS windows at a time (so that numpy's copy of them stays
    small): cut into pieces of 7, the anomalies are still the loops'."""
    from logparse.observe import metrics

    monkeypatch.setattr(metrics, "SPIKE_ROWS", 7)
    rnd = random.Random(100 + seed)
    t = _rows(rnd, rnd.choice([25, 200, 3000]), ordered=True)
    for failed in (False, True):
        assert _seen(t.anomalies(failed, arrays=True)) == _seen(t.anomalies(failed, arrays=False))


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(WATCHED),
    st.lists(st.one_of(st.floats(-1, 1), st.floats(0, 500), st.sampled_from(ODD_VALUES)), max_size=60),
)
def test_each_rule_on_arrays_equals_its_loop(key: str, values: list[float]) -> None:
    t = series(key, values)
    for failed in (False, True):
        assert _seen(t.anomalies(failed, arrays=True)) == _seen(t.anomalies(failed, arrays=False))


def test_the_rules_run_on_arrays_when_the_rows_are_many() -> None:
    from logparse.observe import metrics

    few, many = (
        series("actor/grad_norm", [1.0] * 10),
        series("actor/grad_norm", [1.0] * metrics.ARRAY_MIN_ROWS),
    )
    assert not few._arrays_pay() and many._arrays_pay()


def test_picker_takes_the_items_at_positions_as_a_tuple() -> None:
    items = ["a", "b", "c", "d"]
    assert picker([])(items) == ()
    assert picker([2])(items) == ("c",)
    assert picker([0, 3, 1])(items) == ("a", "d", "b")


STEP_TAILS = [
    "loss:0.5 - actor/pg_loss:np.float64(0.25) - critic/score/mean:7",
    "loss:0.75 - actor/pg_loss:np.float64(nan) - critic/score/mean:inf",
    "loss:-inf - actor/pg_loss:np.float64(1e-05) - critic/score/mean:np.int64(3)",
    "loss:tensor(0.5) - actor/pg_loss:np.float64(0.1)) - critic/score/mean: 7 ",
    "loss:0.5 - actor/pg_loss:np.float64( 2.5 ) - critic/score/mean:1:2",
    "loss:0.5 - actor/pg_loss:np.float64(0.25 - critic/score/mean:7",
    "loss:0.5 - actor/pg_loss:é - critic/score/mean:7",
    "loss:0.5 - actor/pg_loss:0.25 -  - critic/score/mean:7",
    "loss:0.5 - - actor/pg_loss:0.25 - critic/score/mean:7",
    "loss:0.5 - actor/pg_loss:np.float64() - critic/score/mean:",
    "loss:0.5 - actor/pg_loss:0.25 - critic/score/mean:7 - extra:1",
    "loss:0.5 - actor/pg_loss:0.25 - critic/score/mean:7",
]


def test_parse_tail_is_parse_of_the_message() -> None:
    """parse_tail(step, the message past `step:N - `, message) is parse(message), line after line (the
    shape of one line is reused for the next): NaN, inf, np.float64(...), tensor(...), colons and
    ` - ` inside values, non-ASCII, a key more."""
    for all_keys in (False, True):
        whole, tail = StepParser(all_keys), StepParser(all_keys)
        for text in STEP_TAILS * 2:
            message = "step:12 - " + text
            got = tail.parse_tail(12, text, message)
            want = whole.parse(message)
            assert got[0] == want[0] and got[1] == want[1] and got[3] == want[3], message
            assert _same(dict(zip(got[1], got[2], strict=True)), dict(zip(want[1], want[2], strict=True)))
