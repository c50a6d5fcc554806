"""Inference knowledge as data (patterns/inference.yaml)."""

from __future__ import annotations

import functools
import importlib.resources
from dataclasses import dataclass

from patterns.cache import cached, source_of
from patterns.validation import CatalogError, Problem, _suggest
from patterns.vocabulary import CATEGORIES, vocabulary_key

INFERENCE_FILE = "inference.yaml"
INFERENCE_LABEL = "patterns/inference.yaml"
TOP_FIELDS = (
    "unknown_exception_explains",
    "echo_roles",
    "chronology_tolerance_s",
    "priority_bands",
    "observer_categories",
    "early_collective_seq",
    "cite_config",
    "teardown_categories",
    "logged_levels",
    "entry_functions",
)


@dataclass(frozen=True)
class InferenceRules:
    """patterns/inference.yaml: which failures explain which, and how close in time."""

    unknown_exception_explains: frozenset[str]
    chronology_tolerance_s: float
    priority_bands: tuple[int, ...]
    observer_categories: frozenset[str] = frozenset()
    early_collective_seq: int = 2
    cite_config: tuple[tuple[str, tuple[str, ...]], ...] = ()  # category -> config leaf keys
    teardown_categories: frozenset[str] = frozenset()  # after completion: the teardown's, not a failure
    logged_levels: frozenset[str] = frozenset()  # a job's logger reporting an exception it caught
    entry_functions: frozenset[str] = frozenset()  # a traceback that starts here reached the program's top

    def config_leaves(self, category: str) -> tuple[str, ...]:
        return next((keys for cat, keys in self.cite_config if cat == category), ())

    def band(self, priority: int) -> int:
        """Higher band = more specific; bands are the thresholds in priority_bands."""
        return sum(1 for threshold in self.priority_bands if priority >= threshold)


def _read_builtin() -> str:
    return importlib.resources.files("patterns").joinpath(INFERENCE_FILE).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def inference_rules() -> InferenceRules:
    """patterns/inference.yaml, parsed, or as an earlier run parsed the same file (patterns.cache). Its
    cite_config is checked against the config keys environment.yaml tracks, so that file is part of
    the key too."""
    from patterns.environment import read_environment_text

    text = _read_builtin()
    return cached(
        "inference",
        [
            text.encode(),
            read_environment_text().encode(),
            *source_of("patterns.inference", "patterns.environment", "patterns.wordings"),
            *vocabulary_key(),
        ],
        lambda: load_inference_rules(text),
        (InferenceRules,),
        lambda value: isinstance(value, InferenceRules),
    )


def load_inference_rules(text: str, label: str = INFERENCE_LABEL) -> InferenceRules:
    """The rules of an inference file; CatalogError lists every problem (an unknown category, a cited
    config key the environment tracker does not record: it could never be quoted)."""
    from patterns.environment import tracked_config_keys
    from patterns.yamlfile import knowledge_mapping  # (PyYAML: only when a file is parsed)

    problems: list[Problem] = []
    data = knowledge_mapping(text, label, problems, TOP_FIELDS)
    explains = frozenset(data.get("unknown_exception_explains") or ())
    for bad in sorted(explains - set(CATEGORIES)):
        problems.append(
            Problem(label, data.key_lines.get("unknown_exception_explains", 0), f"unknown category '{bad}'")
        )
    teardown = frozenset(data.get("teardown_categories") or ())
    for bad in sorted(teardown - set(CATEGORIES)):
        problems.append(
            Problem(label, data.key_lines.get("teardown_categories", 0), f"unknown category '{bad}'")
        )
    raw = data.get("cite_config") or {}
    tracked = tracked_config_keys()
    for category, keys in raw.items():
        line = getattr(raw, "key_lines", {}).get(category, 0)
        if category not in CATEGORIES:
            problems.append(Problem(label, line, f"cite_config: unknown category '{category}'"))
        at = getattr(keys, "item_lines", None) or []
        for i, key in enumerate(keys or ()):
            if key not in tracked:
                problems.append(
                    Problem(
                        label,
                        at[i] if i < len(at) else line,
                        f"cite_config.{category}: '{key}' is no config key patterns/environment.yaml tracks, "
                        "so no job's value of it could be quoted",
                        _suggest(str(key), tracked) or "add it to environment.yaml's tracked-keys",
                    )
                )
    if problems:
        raise CatalogError(problems)
    return InferenceRules(
        unknown_exception_explains=explains,
        chronology_tolerance_s=float(data.get("chronology_tolerance_s", 5.0)),
        priority_bands=tuple(sorted(int(x) for x in data.get("priority_bands", (75, 50, 25)))),
        observer_categories=frozenset(data.get("observer_categories") or ()),
        early_collective_seq=int(data.get("early_collective_seq", 2)),
        cite_config=tuple((str(cat), tuple(str(k) for k in keys)) for cat, keys in raw.items()),
        teardown_categories=teardown,
        logged_levels=frozenset(str(x) for x in data.get("logged_levels") or ()),
        entry_functions=frozenset(str(x) for x in data.get("entry_functions") or ()),
    )
