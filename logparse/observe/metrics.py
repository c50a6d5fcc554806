"""Per-step metrics from verl's step lines, and the training anomalies they show.

verl prints one line per step (reference §1.3): `step:N - key:value - key:value ...`, the keys in
dict order, values as `0.123` (v0.1-v0.4), the full repr (v0.5+: `np.float64(0.1)`, `np.int64(3)`,
`nan`, `inf`, `1e-06`, plain ints). The lines are read in logparse.read (logparse.read.steps), into the
rows of a ProgressRun (logparse.read.progress_syntax), whether read from a record or fast from their
bytes; the tracker takes a run's rows (`take`).

Bounds: one row per step (a later line for the same step merges into the row); at most
`MetricsConfig.max_keys_per_row` (512) keys in a row and `max_rows` (100,000) rows, the oldest row
dropped first; what was dropped is counted and reported in `notes`.

Anomaly thresholds (all on the rows sorted by step; the constants below):
* nan-inf: the first step at which a watched key is NaN or +-Inf. Watched: loss keys (any key ending
  in `loss`, e.g. `actor/pg_loss`, `critic/vf_loss`, `actor/kl_loss`, `loss`; not `actor/entropy_loss`),
  grad norms (`grad_norm`, `*/grad_norm`) and `critic/score/mean`, `critic/rewards/mean`,
  `actor/ppo_kl`, `actor/entropy`, `actor/entropy_loss`. Never `critic/values/*` or
  `critic/vf_explained_var`, which print `nan` harmlessly when the response mask is empty. `fatal` when
  the key is a loss or grad norm AND the job failed or the key is still non-finite at its last step.
* grad-norm-spike: a grad norm above SPIKE_FACTOR (10) x the median of its previous finite values
  (the last SPIKE_WINDOW = 20, at least SPIKE_MIN_HISTORY = 5 of them).
* response-length-collapse: `response_length/mean` below LENGTH_COLLAPSE_FRACTION (20%) of its running
  max, after at least LENGTH_MIN_HISTORY (5) steps.
* clip-ratio-blowup: `response_length/clip_ratio` above CLIP_RATIO_HIGH (0.9) after an earlier step
  below CLIP_RATIO_LOW (0.5).
* reward-collapse: `critic/score/mean` or `critic/rewards/mean`, after at least REWARD_MIN_HISTORY (5)
  steps, falls from the highest of the previous REWARD_DROP_WITHIN (3) steps by more than
  REWARD_DROP_FRACTION (50%) of its range so far AND by more than REWARD_NOISE_FACTOR (5) x the median
  step-to-step change so far (so noise is no collapse), and stays down: the mean of this and the next
  two steps is still below (max so far - 50% of the range).
Each kind is reported once per key (its first step); a detail sentence gives the step and values.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import operator
import sys
from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from logparse import model
from logparse.model import Anomaly, downsampled
from logparse.read.progress_syntax import ProgressRun
from logparse.read.steps import STEP_KEYWORD
from patterns.progress import (
    CHART_KEYS,
    CLIP_RATIO_HIGH,
    CLIP_RATIO_KEY,
    CLIP_RATIO_LOW,
    LENGTH_COLLAPSE_FRACTION,
    LENGTH_KEY,
    LENGTH_MIN_HISTORY,
    REWARD_DROP_FRACTION,
    REWARD_DROP_WITHIN,
    REWARD_KEYS,
    REWARD_MIN_HISTORY,
    REWARD_NOISE_FACTOR,
    REWARD_STAY_STEPS,
    SPIKE_FACTOR,
    SPIKE_MIN_HISTORY,
    SPIKE_WINDOW,
    key_family,
)

if TYPE_CHECKING:
    import numpy
    import pandas


MAX_CHARTS = 8
MAX_CHART_POINTS = 2000  # beyond this many step rows, each series keeps its extremes per bucket of steps
MAX_METRIC_KEYS = 512  # metric keys named in a report at most
# the anomaly rules run on numpy arrays from this many rows (numpy imported by then: from the smaller)
ARRAY_MIN_ROWS = 30_000
ARRAY_MIN_ROWS_IMPORTED = 1_000


class AnomalyKind(str, Enum):
    NAN_INF = "nan-inf"
    GRAD_NORM_SPIKE = "grad-norm-spike"
    RESPONSE_LENGTH_COLLAPSE = "response-length-collapse"
    CLIP_RATIO_BLOWUP = "clip-ratio-blowup"
    REWARD_COLLAPSE = "reward-collapse"


@dataclass(frozen=True)
class MetricsConfig:
    """The bounds of the metrics kept: step rows, and keys in a row."""

    max_rows: int = 100_000
    max_keys_per_row: int = 512


def _fmt(value: float) -> str:
    return repr(value) if not math.isfinite(value) else f"{value:.4g}"


class _Segment:
    """Consecutive step rows with the same keys: their steps, and their values row after row."""

    __slots__ = ("index", "keys", "source_keys", "steps", "take", "values")

    def __init__(self, source_keys: tuple[str, ...], keys: tuple[str, ...], take: tuple[int, ...] | None):
        self.source_keys = source_keys  # the keys of the step lines
        self.keys = keys  # those kept (all, unless beyond max_keys_per_row)
        self.take = take  # positions of the kept keys in source_keys, None for all
        self.index = {key: i for i, key in enumerate(keys)}
        self.steps: list[int] = []
        self.values = array("d")


class MetricsTracker:
    """Rows of step metrics (bounded), a DataFrame / CSV of them, and the anomalies they show."""

    keywords: tuple[str, ...] = (STEP_KEYWORD,)  # a line without any of these changes nothing

    def __init__(self, config: MetricsConfig | None = None):
        """The rows keep the values their reader kept: with `all_keys` (logparse.read.steps.StepParser,
        for a CSV of them all) every numeric value, else only those of the keys a report uses
        (wanted_key), the other keys only named."""
        self.config = config or MetricsConfig()
        # Rows in arrival order, grouped in segments of consecutive rows with the same keys (a run
        # prints the same keys every step): a row costs one array extend, 8 bytes a value, so
        # 100,000 steps of 60 keys stay near 50 MB. A later row for a step already seen wins.
        self._segments: deque[_Segment] = deque()
        self._rows = 0
        self._known: dict[str, None] = {}  # every key with values kept, in order of first appearance
        self._names: dict[str, None] = {}  # every key of the step lines, in order of first appearance
        self._last_names: tuple[str, ...] | None = None
        self._schemas: dict[tuple[str, ...], tuple[tuple[str, ...], tuple[int, ...] | None]] = {}
        self.dropped_rows = 0
        self.dropped_keys = 0
        # every row so far has a higher step than the one before (as a run prints them): then a key's
        # series is its values in arrival order, without a dict and a sort
        self._ordered = True
        self._top: int | None = None  # the step of the last row, while ordered

    def take(self, run: ProgressRun) -> None:
        """The metric rows of a run's step lines (ProgressRun.rows), in turn."""
        for rows in run.rows:
            if len(rows.steps) == 1:
                self.add_row(rows.steps[0], rows.keys, rows.values, rows.names)
            else:
                self.add_rows(rows.steps, rows.keys, rows.values, rows.names)

    def add(self, step: int, values: dict[str, float]) -> None:
        keys = tuple(values)
        self.add_row(step, keys, array("d", values.values()), keys)

    def add_row(self, step: int, keys: tuple[str, ...], values: array, names: tuple[str, ...]) -> None:
        """One step line's values (distinct keys, values in their order); `names`: all its keys."""
        if self._ordered:
            self._ordered = self._top is None or step > self._top
            self._top = step
        if names is not self._last_names:
            self._last_names = names
            for name in names:
                if name not in self._names and len(self._names) < self.config.max_keys_per_row:
                    self._names[name] = None
        if self._rows >= self.config.max_rows:
            self._drop_oldest(max(1, self._rows // 2))
        last = self._segments[-1] if self._segments else None
        if last is None or keys != last.source_keys:
            last = self._new_segment(keys)
        if last.take is not None:
            self.dropped_keys += len(keys) - len(last.take)
            values = array("d", [values[i] for i in last.take])
        last.steps.append(step)
        last.values.extend(values)
        self._rows += 1

    def add_rows(
        self, steps: Sequence[int], keys: tuple[str, ...], values: array, names: tuple[str, ...]
    ) -> None:
        """add_row of rows that share their keys and names, in turn: row i is step steps[i] with the
        values values[i * len(keys):(i + 1) * len(keys)]. A row costs a part of two extends."""
        if not steps:
            return
        if names is not self._last_names:
            self.add_row(steps[0], keys, values[: len(keys)], names)
            steps, values = steps[1:], values[len(keys) :]
        width = len(keys)
        done, n = 0, len(steps)
        while done < n:
            if self._rows >= self.config.max_rows:
                self._drop_oldest(max(1, self._rows // 2))
            last = self._segments[-1] if self._segments else None
            if last is None or keys != last.source_keys:
                last = self._new_segment(keys)
            if last.take is not None:  # keys past max_keys_per_row: row by row
                for i in range(done, n):
                    self.add_row(steps[i], keys, values[i * width : (i + 1) * width], names)
                return
            end = done + min(n - done, self.config.max_rows - self._rows)
            if self._ordered:
                self._ordered = (self._top is None or steps[done] > self._top) and all(
                    map(operator.lt, steps[done : end - 1], steps[done + 1 : end])
                )
                self._top = steps[end - 1]
            last.steps.extend(steps[done:end])
            last.values.extend(values[done * width : end * width])
            self._rows += end - done
            done = end

    def _new_segment(self, keys: tuple[str, ...]) -> _Segment:
        schema = self._schemas.get(keys)
        if schema is None:  # keys beyond max_keys_per_row distinct ones are dropped (and counted)
            room = self.config.max_keys_per_row - len(self._known)
            take = []
            for i, key in enumerate(keys):
                if key in self._known:
                    take.append(i)
                elif room > 0:
                    self._known[key] = None
                    room -= 1
                    take.append(i)
            kept = tuple(keys[i] for i in take)
            schema = (kept, None if len(take) == len(keys) else tuple(take))
            if len(self._schemas) < 4096:
                self._schemas[keys] = schema
        seg = _Segment(keys, *schema)
        self._segments.append(seg)
        return seg

    def _drop_oldest(self, n: int) -> None:
        """Drop the n rows that arrived first (whole segments, then the head of one)."""
        self.dropped_rows += n
        self._rows -= n
        while n > 0 and self._segments:
            seg = self._segments[0]
            if len(seg.steps) <= n:
                n -= len(seg.steps)
                self._segments.popleft()
            else:
                seg.steps = seg.steps[n:]
                seg.values = seg.values[n * len(seg.keys) :]
                n = 0

    @property
    def steps(self) -> list[int]:
        if self._ordered:
            return list(itertools.chain.from_iterable(seg.steps for seg in self._segments))
        return sorted({step for seg in self._segments for step in seg.steps})

    @property
    def keys(self) -> list[str]:
        """Every key of the step lines, in order of first appearance (at most max_keys_per_row)."""
        return list(self._names)

    @property
    def valued_keys(self) -> list[str]:
        """The keys with values in the rows kept, in order of first appearance."""
        present = {key for seg in self._segments if seg.steps for key in seg.keys}
        return [k for k in self._known if k in present]

    @property
    def notes(self) -> list[str]:
        notes = []
        if self.dropped_rows:
            notes.append(
                f"{self.dropped_rows} oldest step row(s) were dropped (limit {self.config.max_rows} steps)"
            )
        if self.dropped_keys:
            notes.append(
                f"{self.dropped_keys} metric value(s) were dropped beyond {self.config.max_keys_per_row} keys"
            )
        if len(self.steps) > MAX_CHART_POINTS:
            notes.append(
                f"metric series keep at most {MAX_CHART_POINTS} of the {len(self.steps)} steps "
                f"(the lowest and highest value of each stretch of steps, so no spike is lost); "
                f"--metrics-csv writes them all"
            )
        return notes

    def series(self, key: str) -> list[tuple[int, float]]:
        """(step, value) of one key, sorted by step (a later row for a step wins)."""
        if self._ordered:  # (each step once, in order)
            out: list[tuple[int, float]] = []
            for seg in self._segments:
                i = seg.index.get(key)
                if i is not None:
                    out.extend(zip(seg.steps, seg.values[i :: len(seg.keys)], strict=True))
            return out
        by_step: dict[int, float] = {}
        for seg in self._segments:
            i = seg.index.get(key)
            if i is not None:
                by_step.update(zip(seg.steps, seg.values[i :: len(seg.keys)], strict=True))
        return sorted(by_step.items())

    def frame(self) -> pandas.DataFrame:
        """One row per step (index `step`, sorted), one column per key (NaN where a step lacks it)."""
        import pandas as pd  # imported here: a scan that needs no table does not pay for pandas

        steps = self.steps
        nan = float("nan")
        data = {}
        for key in self.valued_keys:
            values = dict(self.series(key))
            data[key] = [values.get(step, nan) for step in steps]
        return pd.DataFrame(data, index=pd.Index(steps, name="step"))

    def to_csv(self, path: str | Path, transform=None) -> None:
        """`transform(frame) -> frame` before writing (the CLI escapes spreadsheet formulas). A key
        whose every value is a whole number (`training/global_step`, `training/epoch`) is written as
        integers (`3`, not `3.0`); an empty cell where a step lacks it."""
        frame = whole_numbers_as_integers(self.frame())
        (transform(frame) if transform is not None else frame).to_csv(path)

    # -- anomalies -------------------------------------------------------------------------------
    def snapshot(self, failed: bool) -> model.Metrics | None:
        """The metrics as a report shows them: the rows counted, the keys seen, a series per charted key
        (at most MAX_CHART_POINTS points each: each bucket of steps keeps its lowest and highest value
        and its first NaN / Inf, so no spike is lost) and the anomalies. `failed`: the job failed."""
        steps = self.steps
        if not steps:
            return None
        valued = set(self.valued_keys)
        chart = [k for k in CHART_KEYS if k in valued][:MAX_CHARTS]
        columns: dict[
            str, tuple[list[int], Sequence[float]]
        ] = {}  # (the charts and the rules read the same keys)
        series = []
        for key in chart:
            key_steps, values = self._column(key, columns)
            if len(key_steps) != len(
                steps
            ):  # (a series holds each of its steps once: equal, it has them all)
                by_step = dict(zip(key_steps, values, strict=True))
                key_steps, values = steps, [by_step.get(st) for st in steps]
            kept = downsampled(values, MAX_CHART_POINTS)
            if len(kept) < len(values):
                key_steps, values = [key_steps[i] for i in kept], [values[i] for i in kept]
            series.append(model.MetricSeries(key, tuple(key_steps), tuple(values)))
        return model.Metrics(
            len(steps),
            tuple(self.keys[:MAX_METRIC_KEYS]),
            tuple(series),
            tuple(self.anomalies(failed, columns=columns)),
        )

    def _column(
        self, key: str, columns: dict[str, tuple[list[int], Sequence[float]]] | None = None
    ) -> tuple[list[int], Sequence[float]]:
        """series(key) as its steps and its values (kept in `columns`, when given, for the next caller).
        The values of rows in step order stay a float array: the charted keys are all kept until the
        report is made, and as a list each value was an object of its own (32 bytes a value, not 8)."""
        found = columns.get(key) if columns is not None else None
        if found is not None:
            return found
        values: Sequence[float]
        if self._ordered:
            steps: list[int] = []
            values = array("d")
            for seg in self._segments:
                i = seg.index.get(key)
                if i is not None:
                    steps.extend(seg.steps)
                    values.extend(seg.values[i :: len(seg.keys)])
        else:
            series = self.series(key)
            steps, values = [st for st, _ in series], [v for _, v in series]
        if columns is not None:
            columns[key] = (steps, values)
        return steps, values

    def anomalies(
        self,
        failed: bool,
        arrays: bool | None = None,
        columns: dict[str, tuple[list[int], Sequence[float]]] | None = None,
    ) -> list[Anomaly]:
        """Anomalies sorted by step (fatal ones first within a step). `failed`: the job failed.
        `arrays`: run the rules on numpy arrays (the same anomalies, tested); None: when the rows are
        many enough to pay for it (_arrays_pay). `columns`: keys' steps and values already read (_column)."""
        if arrays is None:
            arrays = self._arrays_pay()
        found: list[Anomaly] = []
        for key in self.valued_keys:
            family = key_family(key)
            if family is None and key not in (LENGTH_KEY, CLIP_RATIO_KEY):
                continue
            if arrays:
                found.extend(_array_rules(key, family, *self._arrays(key), failed))
                continue
            steps, values = self._column(key, columns)
            if family is not None:
                found.extend(self._nan_inf(key, family, steps, values, failed))
            if family == "grad-norm":
                found.extend(self._grad_norm_spike(key, steps, values))
            if key == LENGTH_KEY:
                found.extend(self._length_collapse(key, steps, values))
            if key == CLIP_RATIO_KEY:
                found.extend(self._clip_ratio_blowup(key, steps, values))
            if key in REWARD_KEYS:
                found.extend(self._reward_collapse(key, steps, values))
        return sorted(found, key=lambda a: (a.step, not a.fatal, a.kind, a.key))

    def _arrays_pay(self) -> bool:
        """Are the rows many enough for the rules to run faster on numpy arrays, counting the import of
        numpy (~0.1 s) when it is not imported yet? (The loops cost ~5 us a row over the watched keys.)"""
        return self._rows >= (ARRAY_MIN_ROWS_IMPORTED if "numpy" in sys.modules else ARRAY_MIN_ROWS)

    def _arrays(self, key: str) -> tuple[list[int], numpy.ndarray]:
        """series(key) as (its steps, a float array of its values)."""
        import numpy as np

        if not self._ordered:
            series = self.series(key)
            return [st for st, _ in series], np.array([v for _, v in series], dtype=np.float64)
        steps: list[int] = []
        parts = []
        for seg in self._segments:
            i = seg.index.get(key)
            if i is not None:
                steps.extend(seg.steps)
                parts.append(np.frombuffer(seg.values, dtype=np.float64)[i :: len(seg.keys)])
        return steps, (np.concatenate(parts) if parts else np.empty(0))

    @staticmethod
    def _nan_inf(key: str, family: str, steps: list[int], values: list[float], failed: bool) -> list[Anomaly]:
        if math.isfinite(sum(values)):  # (a sum is finite only when every value is: the common case at once)
            return []
        last_finite = None
        for step, value in zip(steps, values, strict=True):
            if math.isfinite(value):
                last_finite = (step, value)
                continue
            return [
                _nan_inf_anomaly(key, family, failed, (step, value), last_finite, (steps[-1], values[-1]))
            ]
        return []

    @staticmethod
    def _grad_norm_spike(key: str, steps: list[int], values: list[float]) -> list[Anomaly]:
        steps, values = _finite(steps, values)
        spikes = _spikes(values)
        if not spikes:
            return []
        k, median, n = spikes[0]
        return [_spike_anomaly(key, steps[k], values[k], median, n, len(spikes))]

    @staticmethod
    def _length_collapse(key: str, steps: list[int], values: list[float]) -> list[Anomaly]:
        peak = None
        seen = 0
        for step, value in zip(steps, values, strict=True):
            if not math.isfinite(value):
                continue
            if seen >= LENGTH_MIN_HISTORY and peak is not None and value < LENGTH_COLLAPSE_FRACTION * peak[1]:
                return [_length_anomaly(key, step, value, peak)]
            if peak is None or value > peak[1]:
                peak = (step, value)
            seen += 1
        return []

    @staticmethod
    def _clip_ratio_blowup(key: str, steps: list[int], values: list[float]) -> list[Anomaly]:
        low = None
        for step, value in zip(steps, values, strict=True):
            if not math.isfinite(value):
                continue
            if low is not None and value > CLIP_RATIO_HIGH:
                return [_clip_anomaly(key, step, value, low)]
            if value < CLIP_RATIO_LOW and low is None:
                low = (step, value)
        return []

    @staticmethod
    def _reward_collapse(key: str, steps: list[int], values: list[float]) -> list[Anomaly]:
        """One pass: running max/min and each step's drop from the highest of the REWARD_DROP_WITHIN
        before; at a step whose drop is large for the range, the median of the step-to-step changes
        before it (_Noise, as _array_reward does)."""
        steps, values = _finite(steps, values)
        if len(values) <= REWARD_MIN_HISTORY:
            return []
        hi = max(values[:REWARD_MIN_HISTORY])
        lo = min(values[:REWARD_MIN_HISTORY])
        noise = None  # (made at the first step whose drop is large for the range)
        for i in range(REWARD_MIN_HISTORY, len(values)):
            v = values[i]
            spread = hi - lo
            # (the recent highest is at most the highest so far: most steps are no candidate without it)
            if spread > 0 and hi - v > REWARD_DROP_FRACTION * spread:
                recent = max(values[i - REWARD_DROP_WITHIN : i])  # (REWARD_MIN_HISTORY >= REWARD_DROP_WITHIN)
                drop = recent - v
                if drop > REWARD_DROP_FRACTION * spread:
                    if noise is None:
                        noise = _Noise(values)
                    if noise.beaten(i, drop):
                        held = values[i : i + REWARD_STAY_STEPS]
                        if sum(held) / len(held) < hi - REWARD_DROP_FRACTION * spread:
                            return [_reward_anomaly(key, steps[i], v, recent, lo, hi)]
            if v > hi:  # (max(hi, v) and min(lo, v))
                hi = v
            elif v < lo:
                lo = v
        return []


REWARD_FLOOR_SPAN = 32  # steps a lower bound of the changes' median covers at least (_Noise.floor)


class _Noise:
    """reward-collapse's noise at a step: the median of the step-to-step changes (`changes[j]`:
    |values[j + 1] - values[j]|) before it, and whether a drop beats REWARD_NOISE_FACTOR times it.

    The median: two heaps, fed only up to the step asked for (steps are asked for in order): the lower
    half negated, a max-heap with one more when the count is odd; the upper half.

    Before feeding, a lower bound of it that needs none (`floor`): on a noisy series most steps whose
    drop is large for the range are still small against the noise, and these cost no feeding (without
    the floor, a random-valued series fed the heaps to its end: a quarter of its steps ask).

    The median of the first n changes is at least their ceil(n/2)-th smallest (for an even n it is the
    mean of that one and the next, at least the first). Before each step i of a stretch [a, e) come the
    a - 1 changes before a and i - a more, and the q-th smallest of a set is at least the (q - t)-th
    smallest of a part of it that lacks t of its elements; ceil((i - 1)/2) - (i - a) is least at the
    stretch's last step, so every median in the stretch is at least the k-th smallest of the first
    a - 1 changes, k = ceil((e - 2)/2) - (e - 1 - a). A stretch is a quarter of the changes before it (k
    is then about 3/8 of them), REWARD_FLOOR_SPAN steps at least. A drop at most REWARD_NOISE_FACTOR
    times the floor is at most that times the median (a positive factor; rounding keeps the order), so
    the floor decides only what the median would."""

    def __init__(self, values: list[float], changes: list[float] | None = None) -> None:
        self.values = values
        # the changes worked out so far (all of them when given: numpy's, the same numbers)
        self.changes = [] if changes is None else changes
        self.low: list[float] = []
        self.high: list[float] = []
        self.fed = 0  # changes in the heaps (an odd count: the lower half holds one more)
        self.ordered: list[float] = []  # the first changes, sorted (floor)
        self.floor_to = 0  # the floor holds for the steps before this one
        self.floor_value = 0.0

    def beaten(self, i: int, drop: float) -> bool:
        """Is `drop` more than REWARD_NOISE_FACTOR times the median of the changes before step i?"""
        if REWARD_NOISE_FACTOR > 0 and drop <= REWARD_NOISE_FACTOR * self.floor(i):
            return False
        return drop > REWARD_NOISE_FACTOR * self.median(i)

    def median(self, i: int) -> float:
        """The median of changes[:i - 1] (i at least 2, and at least that of the last call)."""
        low, high = self.low, self.high
        push, pushpop = heapq.heappush, heapq.heappushpop
        fed = self.fed
        self._need(i - 1)
        for x in self.changes[fed : i - 1]:
            if fed % 2:
                push(high, -pushpop(low, -x))
            else:
                push(low, -pushpop(high, x))
            fed += 1
        self.fed = fed
        return -low[0] if fed % 2 else (-low[0] + high[0]) / 2

    def floor(self, i: int) -> float:
        """A lower bound of median(j) for every step j from i to floor_to (worked out again past it)."""
        if i >= self.floor_to:
            n = i - 1
            end = i + max(REWARD_FLOOR_SPAN, n // 4)
            k = (end - 1) // 2 - (end - 1 - i)  # ((end - 1) // 2: ceil((end - 2) / 2))
            ordered = self.ordered
            self._need(n)
            if len(ordered) < n:  # (a sorted run and the new ones: the sort merges them)
                ordered.extend(self.changes[len(ordered) : n])
                ordered.sort()
            self.floor_value = ordered[k - 1] if k >= 1 else 0.0  # (a change is never negative)
            self.floor_to = end
        return self.floor_value

    def _need(self, n: int) -> None:
        """The first n changes worked out (a series whose first candidate decides costs no more)."""
        changes = self.changes
        if len(changes) < n:
            changes.extend([abs(b - a) for a, b in itertools.pairwise(self.values[len(changes) : n + 1])])


def _finite(steps: list[int], values: list[float]) -> tuple[list[int], list[float]]:
    """The steps and values of the finite values."""
    if math.isfinite(sum(values)):  # (every value is)
        return steps, values
    pairs = [(st, v) for st, v in zip(steps, values, strict=True) if math.isfinite(v)]
    return [st for st, _ in pairs], [v for _, v in pairs]


SPIKE_BLOCK = 64  # finite values a block of the grad-norm rule's shortcut (_spikes)
SPIKE_ROWS = 8192  # windows whose median numpy takes at once (_array_spike)


def _spikes(fv: list[float]) -> list[tuple[int, float, int]]:
    """(place, median, values before it) of each grad-norm spike among the finite values `fv`. A block of
    SPIKE_BLOCK values is passed over at once when its highest is no spike over the smallest median any
    of its windows can have: the median of the SPIKE_WINDOW smallest values the windows draw from (the
    j-th smallest of a window is at least the j-th smallest of the values it is taken from)."""
    m = len(fv)
    found = _spike_scan(fv, 0, min(SPIKE_WINDOW, m))
    mid = SPIKE_WINDOW // 2
    for start in range(SPIKE_WINDOW, m, SPIKE_BLOCK):
        end = min(start + SPIKE_BLOCK, m)
        drawn = sorted(fv[start - SPIKE_WINDOW : end - 1])
        least = drawn[mid] if SPIKE_WINDOW % 2 else (drawn[mid - 1] + drawn[mid]) / 2
        if least > 0 and max(fv[start:end]) <= SPIKE_FACTOR * least:
            continue
        found += _spike_scan(fv, start, end)
    return found


def _spike_scan(fv: list[float], start: int, end: int) -> list[tuple[int, float, int]]:
    """_spikes among fv[start:end], each value against the median of the (at most SPIKE_WINDOW) finite
    values before it, kept sorted as they come (the median without a sort at every value)."""
    history = deque(fv[max(0, start - SPIKE_WINDOW) : start])  # the last SPIKE_WINDOW values, in order
    window = sorted(history)  # the same, sorted
    found = []
    for k in range(start, end):
        value = fv[k]
        n = len(window)
        if n >= SPIKE_MIN_HISTORY:
            mid = n // 2
            median = window[mid] if n % 2 else (window[mid - 1] + window[mid]) / 2
            if median > 0 and value > SPIKE_FACTOR * median:
                found.append((k, median, n))
        history.append(value)
        bisect.insort(window, value)
        if n >= SPIKE_WINDOW:
            del window[bisect.bisect_left(window, history.popleft())]
    return found


def _nan_inf_anomaly(
    key: str,
    family: str,
    failed: bool,
    first: tuple[int, float],
    last_finite: tuple[int, float] | None,
    last: tuple[int, float],
) -> Anomaly:
    """The nan-inf anomaly of a key first non-finite at `first`, finite before it at `last_finite`
    (None: never), last logged at `last`."""
    step, value = first
    last_step, last_value = last
    persists = not math.isfinite(last_value)
    fatal = family in ("loss", "grad-norm") and (failed or persists)
    before = (
        f"; the last finite value was {_fmt(last_finite[1])} at step {last_finite[0]}" if last_finite else ""
    )
    if not persists:
        after = f"; finite again at the last logged step, {last_step}"
    elif last_step != step:
        after = f"; still {_fmt(last_value)} at step {last_step}, the last logged"
    else:
        after = " (the last logged step)"
    return Anomaly(
        AnomalyKind.NAN_INF.value,
        step,
        key,
        value,
        f"{key} is {_fmt(value)} at step {step}{before}{after}.",
        fatal,
    )


def _spike_anomaly(key: str, step: int, value: float, median: float, n: int, count: int) -> Anomaly:
    """The grad-norm-spike anomaly of a first spike to `value` at `step` over the `median` of the `n`
    values before it, one of `count`."""
    more = f" ({count} such spikes in all)" if count > 1 else ""
    return Anomaly(
        AnomalyKind.GRAD_NORM_SPIKE.value,
        step,
        key,
        value,
        f"{key} jumped to {_fmt(value)} at step {step}, {value / median:.1f}x the median "
        f"{_fmt(median)} of the previous {n} steps{more}.",
    )


def _length_anomaly(key: str, step: int, value: float, peak: tuple[int, float]) -> Anomaly:
    return Anomaly(
        AnomalyKind.RESPONSE_LENGTH_COLLAPSE.value,
        step,
        key,
        value,
        f"{key} fell to {_fmt(value)} at step {step}, below "
        f"{LENGTH_COLLAPSE_FRACTION:.0%} of its running max {_fmt(peak[1])} "
        f"(step {peak[0]}).",
    )


def _clip_anomaly(key: str, step: int, value: float, low: tuple[int, float]) -> Anomaly:
    return Anomaly(
        AnomalyKind.CLIP_RATIO_BLOWUP.value,
        step,
        key,
        value,
        f"{key} rose to {_fmt(value)} at step {step} (above {CLIP_RATIO_HIGH}) from "
        f"{_fmt(low[1])} at step {low[0]}: most responses hit the length limit.",
    )


def _reward_anomaly(key: str, step: int, value: float, recent: float, lo: float, hi: float) -> Anomaly:
    return Anomaly(
        AnomalyKind.REWARD_COLLAPSE.value,
        step,
        key,
        value,
        f"{key} fell to {_fmt(value)} at step {step} from {_fmt(recent)} within "
        f"{REWARD_DROP_WITHIN} steps, more than {REWARD_DROP_FRACTION:.0%} of its "
        f"range so far ({_fmt(lo)} to {_fmt(hi)}), and stayed low.",
    )


# -- the rules on numpy arrays: the same anomalies as the loops above (tests/logparse/observe/test_metrics.py
# compares them), each found with a few array operations instead of a Python step per row
def _array_rules(
    key: str, family: str | None, steps: list[int], values: numpy.ndarray, failed: bool
) -> list[Anomaly]:
    """The anomalies of one key's series (`steps`, `values` in step order), as `anomalies` finds them."""
    import numpy as np

    found = []
    finite = np.isfinite(values)
    if family is not None and not finite.all():
        i = int(np.argmin(finite))  # the first non-finite value
        before = (steps[i - 1], float(values[i - 1])) if i else None
        last = (steps[-1], float(values[-1]))
        found.append(_nan_inf_anomaly(key, family, failed, (steps[i], float(values[i])), before, last))
    at = np.flatnonzero(finite)  # the finite values' places in the series
    fv = values[at]
    if family == "grad-norm":
        found.extend(_array_spike(key, steps, at, fv))
    if key == LENGTH_KEY:
        found.extend(_array_length(key, steps, at, fv))
    if key == CLIP_RATIO_KEY:
        found.extend(_array_clip(key, steps, at, fv))
    if key in REWARD_KEYS:
        found.extend(_array_reward(key, steps, at, fv))
    return found


def _array_spike(key: str, steps: list[int], at: numpy.ndarray, fv: numpy.ndarray) -> list[Anomaly]:
    """grad-norm-spike: each finite value against the median of the SPIKE_WINDOW finite values before
    it (np.median of a sliding window: of an even count the mean of the middle two, as the loop)."""
    import numpy as np

    m = len(fv)
    if m <= SPIKE_MIN_HISTORY:
        return []
    median = np.full(m, np.nan)
    for i in range(SPIKE_MIN_HISTORY, min(SPIKE_WINDOW, m)):
        median[i] = np.median(fv[:i])
    if m > SPIKE_WINDOW:
        # the window before each value (row j: the values before SPIKE_WINDOW + j), SPIKE_ROWS rows at a
        # time: np.median copies the rows it is given (97,000 rows at once were 26 MB, the peak of a
        # report's memory)
        windows = np.lib.stride_tricks.sliding_window_view(fv, SPIKE_WINDOW)
        for lo in range(SPIKE_WINDOW, m, SPIKE_ROWS):
            hi = min(lo + SPIKE_ROWS, m)
            median[lo:hi] = np.median(windows[lo - SPIKE_WINDOW : hi - SPIKE_WINDOW], axis=1)
    with np.errstate(invalid="ignore"):
        spikes = np.flatnonzero((median > 0) & (fv > SPIKE_FACTOR * median))
    if not spikes.size:
        return []
    k = int(spikes[0])
    return [
        _spike_anomaly(key, steps[at[k]], float(fv[k]), float(median[k]), min(k, SPIKE_WINDOW), len(spikes))
    ]


def _array_length(key: str, steps: list[int], at: numpy.ndarray, fv: numpy.ndarray) -> list[Anomaly]:
    """response-length-collapse: the first value, after LENGTH_MIN_HISTORY, below the fraction of the
    running max before it (the max's first step, as the loop keeps it)."""
    import numpy as np

    h = LENGTH_MIN_HISTORY
    if len(fv) <= h:
        return []
    running = np.maximum.accumulate(fv)
    low = np.flatnonzero(fv[h:] < LENGTH_COLLAPSE_FRACTION * running[h - 1 : -1])
    if not low.size:
        return []
    k = int(low[0]) + h
    p = int(np.argmax(fv[:k]))
    return [_length_anomaly(key, steps[at[k]], float(fv[k]), (steps[at[p]], float(fv[p])))]


def _array_clip(key: str, steps: list[int], at: numpy.ndarray, fv: numpy.ndarray) -> list[Anomaly]:
    """clip-ratio-blowup: the first value above CLIP_RATIO_HIGH after the first below CLIP_RATIO_LOW."""
    import numpy as np

    lows = np.flatnonzero(fv < CLIP_RATIO_LOW)
    if not lows.size:
        return []
    lo = int(lows[0])
    highs = np.flatnonzero(fv[lo + 1 :] > CLIP_RATIO_HIGH)
    if not highs.size:
        return []
    k = lo + 1 + int(highs[0])
    return [_clip_anomaly(key, steps[at[k]], float(fv[k]), (steps[at[lo]], float(fv[lo])))]


def _array_reward(key: str, steps: list[int], at: numpy.ndarray, fv: numpy.ndarray) -> list[Anomaly]:
    """reward-collapse: the steps whose drop from the highest of the REWARD_DROP_WITHIN before exceeds
    REWARD_DROP_FRACTION of the range so far, found at once; at each in turn, the median of the changes
    before it (the loop's two heaps, fed up to there) and whether it stays low."""
    import numpy as np

    h, w = REWARD_MIN_HISTORY, REWARD_DROP_WITHIN
    n = len(fv)
    if n <= h:
        return []
    hi = np.maximum.accumulate(fv)[h - 1 : n - 1]  # the highest and lowest before each step from h on
    lo = np.minimum.accumulate(fv)[h - 1 : n - 1]
    spread = hi - lo
    recent = fv[h - w : n - w]
    for d in range(1, w):
        recent = np.maximum(recent, fv[h - w + d : n - w + d])
    drop = recent - fv[h:]
    candidates = np.flatnonzero((spread > 0) & (drop > REWARD_DROP_FRACTION * spread))
    if not candidates.size:
        return []
    values = fv.tolist()
    noise = _Noise(values, np.abs(np.diff(fv)).tolist())
    drops = drop.tolist()
    for c in candidates.tolist():
        i = c + h
        if noise.beaten(i, drops[c]):
            held = values[i : i + REWARD_STAY_STEPS]
            if sum(held) / len(held) < float(hi[c]) - REWARD_DROP_FRACTION * float(spread[c]):
                # (the highest and lowest as the loop keeps them, the first of equal ones: a -0.0 stays)
                top, bottom = max(values[:i]), min(values[:i])
                return [_reward_anomaly(key, steps[at[i]], values[i], max(values[i - w : i]), bottom, top)]
    return []


INT64_EXACT = 2**53  # a float64 above this is not an exact integer any more: written as the float it is


def whole_numbers_as_integers(frame: pandas.DataFrame) -> pandas.DataFrame:
    """`frame` with each float column whose values (NaN aside) are all whole numbers, within the range a
    float64 holds exactly, as a nullable integer column."""
    for column in frame.columns:
        values = frame[column]
        if values.dtype.kind != "f":
            continue
        present = values.dropna()
        if len(present) and ((present % 1 == 0) & (present.abs() <= INT64_EXACT)).all():
            frame[column] = values.astype("Int64")
    return frame
