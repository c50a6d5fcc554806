"""Inference knowledge as data (patterns/inference.yaml)."""

from __future__ import annotations

import functools
import importlib.resources
from dataclasses import dataclass

from patterns.cache import cached, source_of
from patterns.vocabulary import CATEGORIES, vocabulary_key


@dataclass(frozen=True)
class InferenceRules:
    unknown_exception_explains: frozenset[str]
    chronology_tolerance_s: float
    priority_bands: tuple[int, ...]
    observer_categories: frozenset[str] = frozenset()
    early_collective_seq: int = 2
    cite_config: tuple[tuple[str, tuple[str, ...]], ...] = ()  # category -> config leaf keys

    def config_leaves(self, category: str) -> tuple[str, ...]:
        return next((keys for cat, keys in self.cite_config if cat == category), ())

    def band(self, priority: int) -> int:
        """Higher band = more specific; bands are the thresholds in priority_bands."""
        return sum(1 for threshold in self.priority_bands if priority >= threshold)


@functools.lru_cache(maxsize=1)
def inference_rules() -> InferenceRules:
    """patterns/inference.yaml, parsed, or as an earlier run parsed the same file (patterns.cache)."""
    text = importlib.resources.files("patterns").joinpath("inference.yaml").read_text(encoding="utf-8")
    return cached(
        "inference",
        [text.encode(), *source_of("patterns.inference"), *vocabulary_key()],
        lambda: _parse(text),
        (InferenceRules,),
        lambda value: isinstance(value, InferenceRules),
    )


def _parse(text: str) -> InferenceRules:
    import yaml  # here: with the start-up cache warm, no YAML is parsed

    data = yaml.safe_load(text) or {}
    explains = frozenset(data.get("unknown_exception_explains") or ())
    bad = explains - set(CATEGORIES)
    if bad:
        raise ValueError(f"patterns/inference.yaml: unknown categories {sorted(bad)}")
    return InferenceRules(
        unknown_exception_explains=explains,
        chronology_tolerance_s=float(data.get("chronology_tolerance_s", 5.0)),
        priority_bands=tuple(sorted(int(x) for x in data.get("priority_bands", (75, 50, 25)))),
        observer_categories=frozenset(data.get("observer_categories") or ()),
        early_collective_seq=int(data.get("early_collective_seq", 2)),
        cite_config=tuple(
            (str(cat), tuple(str(k) for k in keys)) for cat, keys in (data.get("cite_config") or {}).items()
        ),
    )
