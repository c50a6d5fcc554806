"""How error-like a line is, as data (patterns/diff.yaml): the words of a message and the levels of a
prefix, each with its weight, that `verl-logscan diff` orders the failed run's new lines by
(logparse.diff.error_score). Data only: this module imports none of logparse."""

from __future__ import annotations

import functools
import importlib.resources

from patterns.cache import source_of
from patterns.wordings import FieldSpec, SectionSpec, Wordings, builtin_wordings

DIFF_FILE = "diff.yaml"
DIFF_LABEL = "patterns/diff.yaml"
_WEIGHT = FieldSpec(
    "a positive number", lambda v: not isinstance(v, bool) and isinstance(v, int) and v > 0, required=True
)
SECTIONS = {
    "error_words": SectionSpec(("literals",), {"weight": _WEIGHT}),
    "levels": SectionSpec(("literals",), {"weight": _WEIGHT}),
}


def read_diff_text() -> str:
    return importlib.resources.files("patterns").joinpath(DIFF_FILE).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def diff_wordings() -> Wordings:
    """diff.yaml's values, parsed and checked, or read back from the start-up cache."""
    return builtin_wordings(
        "diff",
        read_diff_text(),
        DIFF_LABEL,
        SECTIONS,
        source_of("patterns.diff_words", "patterns.wordings", "patterns.validation", "patterns.yamlfile"),
    )


def load_diff_words(text: str | None = None, label: str = DIFF_LABEL) -> Wordings:
    """diff.yaml (or `text`) with its examples (the catalog check); CatalogError lists every problem."""
    from patterns.wordings import load_wordings

    return load_wordings(read_diff_text() if text is None else text, label, SECTIONS)


def _weights(section: str) -> tuple[tuple[str, int], ...]:
    return tuple(
        (word, item.field("weight")) for item in diff_wordings().section(section) for word in item.value
    )


@functools.lru_cache(maxsize=1)
def error_words() -> tuple[tuple[str, int], ...]:
    """(word, weight) of every error word, in file order (lower case: a message is lower-cased)."""
    return _weights("error_words")


@functools.lru_cache(maxsize=1)
def level_scores() -> dict[str, int]:
    """A level (upper case) -> its weight."""
    return dict(_weights("levels"))
