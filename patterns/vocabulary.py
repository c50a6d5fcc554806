"""The closed vocabulary of ../shared/TAXONOMY.md, read from patterns/taxonomy.yaml: root-cause
categories (id -> one-line description, in TAXONOMY.md's order) and stages (in order).

Parsed once, or read back as an earlier run parsed the same file (patterns.cache): with the cache warm,
importing the package parses no YAML.
"""

from __future__ import annotations

import importlib.resources
from typing import Any

from patterns.cache import cached, source_of
from patterns.validation import ID_RE, CatalogError, Problem, _short

TAXONOMY_FILE = "taxonomy.yaml"
TAXONOMY_LABEL = "patterns/taxonomy.yaml"
TOP_FIELDS = ("categories", "stages")
CATEGORY_FIELDS = ("id", "description")


def _id(value: Any, what: str, line: int, seen: list[str], label: str, problems: list[Problem]) -> bool:
    """Is `value` a new kebab-case id (added to `seen`)? If not, say why."""
    if not isinstance(value, str) or not ID_RE.match(value):
        problems.append(Problem(label, line, f"{what} {_short(value)} is not a kebab-case id"))
    elif value in seen:
        problems.append(Problem(label, line, f"duplicate {what} '{value}'"))
    else:
        seen.append(value)
        return True
    return False


def load_taxonomy(text: str, label: str = TAXONOMY_LABEL) -> tuple[dict[str, str], tuple[str, ...]]:
    """(categories, stages) of a taxonomy file; CatalogError lists every problem."""
    from patterns.yamlfile import knowledge_mapping  # (PyYAML: only when a file is parsed)

    problems: list[Problem] = []
    data = knowledge_mapping(text, label, problems, TOP_FIELDS)
    categories: dict[str, str] = {}
    raw = data.get("categories")
    if not isinstance(raw, list) or not raw:
        problems.append(Problem(label, data.key_lines.get("categories", 1), "'categories' must be a list"))
        raw = []
    seen: list[str] = []
    for item in raw:
        line = getattr(item, "line", data.key_lines.get("categories", 1))
        if not isinstance(item, dict) or set(item) != set(CATEGORY_FIELDS):
            problems.append(Problem(label, line, "a category is a mapping of exactly: id, description"))
            continue
        description = item["description"]
        if not isinstance(description, str) or not description.strip():
            problems.append(Problem(label, line, f"category {_short(item['id'])}: empty description"))
        elif _id(item["id"], "category", line, seen, label, problems):
            categories[item["id"]] = description.strip()
    stages = data.get("stages")
    if not isinstance(stages, list) or not stages:
        problems.append(Problem(label, data.key_lines.get("stages", 1), "'stages' must be a list of ids"))
        stages = []
    stage_ids: list[str] = []
    lines = getattr(stages, "item_lines", None) or []
    for i, value in enumerate(stages):
        line = lines[i] if i < len(lines) else data.key_lines.get("stages", 1)
        _id(value, "stage", line, stage_ids, label, problems)
    if "unknown" not in categories and categories:
        problems.append(Problem(label, 1, "the category 'unknown' is missing", "a report needs it"))
    if problems:
        raise CatalogError(problems)
    return categories, tuple(stage_ids)


def _read_builtin() -> str:
    return importlib.resources.files("patterns").joinpath(TAXONOMY_FILE).read_text(encoding="utf-8")


def _builtin(text: str) -> tuple[dict[str, str], tuple[str, ...]]:
    return cached(
        "taxonomy",
        [text.encode(), *source_of("patterns.vocabulary", "patterns.validation", "patterns.yamlfile")],
        lambda: load_taxonomy(text),
        (),
        lambda value: (
            isinstance(value, tuple)
            and len(value) == 2
            and isinstance(value[0], dict)
            and isinstance(value[1], tuple)
        ),
    )


_TEXT = _read_builtin()
CATEGORIES, STAGES = _builtin(_TEXT)


def vocabulary_key() -> list[bytes]:
    """What the vocabulary is made of, for the cache key of knowledge checked against it (a file
    parsed with one taxonomy is parsed again under another)."""
    return [_TEXT.encode(), *source_of("patterns.vocabulary")]
