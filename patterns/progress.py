"""Knowledge of training progress, read from patterns/progress.yaml: the syntax of verl's step line and
of the `Training Progress` bar (logparse.read.steps and progress_syntax compile them), the metric keys a
report charts and watches, and the thresholds of the anomaly rules (logparse.observe.metrics). Data
only: this package imports none of the others.
"""

from __future__ import annotations

import functools
import importlib.resources

from patterns.cache import source_of
from patterns.wordings import FieldSpec, SectionSpec, Wordings, builtin_wordings, is_texts

PROGRESS_FILE = "progress.yaml"
PROGRESS_LABEL = "patterns/progress.yaml"
SECTIONS = {
    "step_lines": SectionSpec(
        ("regex", "literal"),
        {"keywords": FieldSpec("a list of literals (one is in every text the regex can hit)", is_texts)},
    ),
    "counter_lines": SectionSpec(("regex", "literals")),
    "progress_bars": SectionSpec(("regex", "literal")),
    "metric_keys": SectionSpec(("literal", "literals")),
    "thresholds": SectionSpec(("value",)),
}


def read_progress_text() -> str:
    return importlib.resources.files("patterns").joinpath(PROGRESS_FILE).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def progress_wordings() -> Wordings:
    """progress.yaml's values, parsed and checked, or read back from the start-up cache."""
    return builtin_wordings(
        "progress",
        read_progress_text(),
        PROGRESS_LABEL,
        SECTIONS,
        source_of("patterns.progress", "patterns.wordings", "patterns.validation", "patterns.yamlfile"),
    )


def load_progress(text: str | None = None, label: str = PROGRESS_LABEL) -> Wordings:
    """progress.yaml (or `text`) with its examples (the catalog check); CatalogError lists every problem."""
    from patterns.wordings import load_wordings

    return load_wordings(read_progress_text() if text is None else text, label, SECTIONS)


_P = progress_wordings()

# anomaly thresholds (logparse.observe.metrics documents each rule)
SPIKE_FACTOR = _P.value("spike-factor")
SPIKE_WINDOW = _P.value("spike-window")
SPIKE_MIN_HISTORY = _P.value("spike-min-history")
LENGTH_KEY = _P.literal("length-key")
LENGTH_COLLAPSE_FRACTION = _P.value("length-collapse-fraction")
LENGTH_MIN_HISTORY = _P.value("length-min-history")
CLIP_RATIO_KEY = _P.literal("clip-ratio-key")
CLIP_RATIO_HIGH = _P.value("clip-ratio-high")
CLIP_RATIO_LOW = _P.value("clip-ratio-low")
REWARD_KEYS = _P.literals("reward-keys")
REWARD_MIN_HISTORY = _P.value("reward-min-history")
REWARD_DROP_WITHIN = _P.value("reward-drop-within")
REWARD_DROP_FRACTION = _P.value("reward-drop-fraction")
REWARD_NOISE_FACTOR = _P.value("reward-noise-factor")
REWARD_STAY_STEPS = _P.value("reward-stay-steps")
WATCHED_KEYS = frozenset(_P.literals("watched-keys"))
HARMLESS_NAN_PREFIXES = _P.literals("harmless-nan-prefixes")
HARMLESS_NAN_KEYS = frozenset(_P.literals("harmless-nan-keys"))
GRAD_NORM_KEY = _P.literal("grad-norm-key")
GRAD_NORM_SUFFIX = "/" + GRAD_NORM_KEY
LOSS_SUFFIX = _P.literal("loss-suffix")
# The key training metrics charted in reports, when the log has them (first found first).
CHART_KEYS = _P.literals("chart-keys")


def wanted_key(key: str) -> bool:
    """Does a report use this key's values (a chart or an anomaly rule)? The others are kept only
    when all values are asked for (--metrics-csv)."""
    return (
        key in CHART_KEYS
        or key in (LENGTH_KEY, CLIP_RATIO_KEY)
        or key in REWARD_KEYS
        or key_family(key) is not None
    )


def key_family(key: str) -> str | None:
    """`loss`, `grad-norm`, `watched` (NaN there is worth reporting) or None (not watched)."""
    if key in HARMLESS_NAN_KEYS or key.startswith(HARMLESS_NAN_PREFIXES):
        return None
    if key in WATCHED_KEYS:
        return "watched"
    if key == GRAD_NORM_KEY or key.endswith(GRAD_NORM_SUFFIX):
        return "grad-norm"
    if key.endswith(LOSS_SUFFIX):
        return "loss"
    return None
