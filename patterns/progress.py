"""Knowledge of training progress: the metric keys a report charts and watches, and the thresholds of
the anomaly rules (logparse.observe.metrics). Data only: this package imports none of the others."""

from __future__ import annotations

# anomaly thresholds (logparse.observe.metrics documents each rule)
SPIKE_FACTOR = 10.0
SPIKE_WINDOW = 20
SPIKE_MIN_HISTORY = 5
LENGTH_KEY = "response_length/mean"
LENGTH_COLLAPSE_FRACTION = 0.2
LENGTH_MIN_HISTORY = 5
CLIP_RATIO_KEY = "response_length/clip_ratio"
CLIP_RATIO_HIGH = 0.9
CLIP_RATIO_LOW = 0.5
REWARD_KEYS = ("critic/score/mean", "critic/rewards/mean")
REWARD_MIN_HISTORY = 5
REWARD_DROP_WITHIN = 3
REWARD_DROP_FRACTION = 0.5
REWARD_NOISE_FACTOR = 5.0
REWARD_STAY_STEPS = 3
WATCHED_KEYS = frozenset(
    {"critic/score/mean", "critic/rewards/mean", "actor/ppo_kl", "actor/entropy", "actor/entropy_loss"}
)
HARMLESS_NAN_PREFIXES = ("critic/values/",)
HARMLESS_NAN_KEYS = frozenset({"critic/vf_explained_var"})
# The key training metrics charted in reports, when the log has them (first found first).
CHART_KEYS = (
    "actor/pg_loss",
    "actor/loss",
    "loss",
    "critic/vf_loss",
    "actor/grad_norm",
    "grad_norm",
    "critic/grad_norm",
    "critic/score/mean",
    "critic/rewards/mean",
    "response_length/mean",
    "actor/entropy",
    "actor/ppo_kl",
    "actor/kl_loss",
    "timing_s/step",
)


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
    if key == "grad_norm" or key.endswith("/grad_norm"):
        return "grad-norm"
    if key.endswith("loss"):
        return "loss"
    return None
