"""Load and validate YAML catalogs: every problem at once, each with file, line, reason and help.

YAML is read with a SafeLoader subclass only (no tags, no code: patterns/yamlfile.py, imported only
when a file is parsed); no field is ever evaluated as code or as a template. Regexes are compiled with
the `regex` module; matching runs with a timeout (see logparse.observe.matcher), so a pathological pattern
cannot hang a scan.
"""

from __future__ import annotations

import importlib.resources
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import regex

from patterns.cache import cached, source_of
from patterns.schema import (
    CATALOG_CLASSES,
    Catalog,
    CategoryFrom,
    Entry,
    Role,
    Severity,
    group_names,
    placeholders,
)
from patterns.validation import (
    EXAMPLE_FIELDS,
    ID_RE,
    MAX_ALIAS_EXPANSION,
    MAX_PATTERN_LENGTH,
    PROBE_TIMEOUT_S,
    REMEDIATION_FIELDS,
    CatalogError,
    FieldBuilder,
    Problem,
    _short,
    _suggest,
    regex_risk,
    slow_probe,
)
from patterns.vocabulary import CATEGORIES, STAGES, vocabulary_key

# (re-exported: the names the catalog's users and tests have always imported from here)
__all__ = [
    "EXAMPLE_FIELDS",
    "ID_RE",
    "MAX_ALIAS_EXPANSION",
    "MAX_PATTERN_LENGTH",
    "PROBE_TIMEOUT_S",
    "REMEDIATION_FIELDS",
    "CatalogError",
    "Problem",
    "load_builtin_catalog",
    "load_catalog",
    "regex_risk",
    "slow_probe",
]

ENTRY_FIELDS = {
    "id": True,
    "title": True,
    "category": True,
    "role": True,
    "severity": True,
    "priority": True,
    "keywords": True,
    "patterns": True,
    "message": True,
    "remediation": True,
    "examples": True,
    "stage": False,
    "explains": False,
    "category_from": False,
    "frames": False,
}
MAX_CATALOG_BYTES = 8 << 20  # one catalog file; the built-in files are a few tens of KiB


class _EntryBuilder(FieldBuilder):
    """Validates one raw catalog entry mapping; collects problems instead of stopping at the first."""

    def build(self) -> Entry | None:
        raw = self.raw
        self._unknown_fields()
        entry_id = self._id()
        title = self.text("title")
        category = self._category()
        role = self._enum("role", Role)
        severity = self._enum("severity", Severity)
        priority = self._priority()
        keywords = self.text_list("keywords", raw.get("keywords"))
        compiled = self._patterns()
        message = self.text("message")
        groups: set[str] = set()
        for p in compiled:
            groups.update(group_names(p))
        self._placeholders(message, groups)
        stage = self._stage()
        explains = self.text_list("explains", raw.get("explains"), required=False)
        category_from = self._category_from(groups)
        frames = self._frames()
        remediation = self._remediation()
        examples = self._examples()
        if frames and examples is not None and not any(x.block for x in examples.match):
            self.fail(
                "examples",
                "an entry with 'frames' needs at least one 'block' match example",
                "a block is a traceback: 'block: |' followed by its lines",
            )
        if not self.ok:
            return None
        return Entry(
            id=entry_id,
            title=title,
            category=category,
            role=role,
            severity=severity,
            priority=priority,
            keywords=keywords,
            patterns=tuple(compiled),
            message=message,
            remediation=remediation,
            examples=examples,
            stage=stage,
            explains=explains,
            category_from=category_from,
            frames=frames,
            source=self.file,
            line=self.line_of(),
            builtin=self.lazy,
        )

    def _unknown_fields(self) -> None:
        for key in self.raw:
            if key not in ENTRY_FIELDS:
                self.fail(
                    key,
                    f"unknown field '{key}'",
                    _suggest(key, ENTRY_FIELDS) or f"known fields: {', '.join(ENTRY_FIELDS)}",
                )

    def _id(self) -> str | None:
        entry_id = self.text("id")
        if entry_id is not None and not ID_RE.match(entry_id):
            self.fail("id", f"id '{entry_id}' is not kebab-case", "use lower-case words joined by '-'")
        return entry_id

    def _category(self) -> str | None:
        category = self.text("category")
        if category is not None and category not in CATEGORIES:
            self.fail(
                "category",
                f"unknown category '{category}'",
                _suggest(category, CATEGORIES) or "see TAXONOMY.md for the category ids",
            )
        return category

    def _priority(self) -> Any:
        priority = self.raw.get("priority")
        if priority is None:
            self.fail("priority", "missing required field 'priority'", "an integer 0-100; higher wins")
        elif not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= 100:
            self.fail("priority", f"'priority' must be an integer 0-100, got {_short(priority)}")
        return priority

    def _placeholders(self, message: str | None, groups: set[str]) -> None:
        """Every `{name}` of the message names a group of the patterns."""
        for name in placeholders(message) if message is not None else ():
            if name not in groups:
                self.fail(
                    "message",
                    f"placeholder '{{{name}}}' names no group of the patterns",
                    f"named groups: {', '.join(sorted(groups)) or 'none'}",
                )

    def _stage(self) -> str | None:
        stage = self.raw.get("stage")
        if stage is not None and not isinstance(stage, str):
            self.fail("stage", f"'stage' must be a stage id (a string) or null, got {_short(stage)}")
            return None
        if stage is not None and stage not in STAGES:
            self.fail("stage", f"unknown stage '{stage}'", _suggest(stage, STAGES) or "see TAXONOMY.md")
        return stage

    def _enum(self, key: str, enum: type) -> Any:
        value = self.raw.get(key)
        names = [m.value for m in enum]
        if value is None:
            self.fail(key, f"missing required field '{key}'", f"one of: {', '.join(names)}")
            return None
        if not isinstance(value, str) or value not in names:
            self.fail(
                key,
                f"'{key}' must be one of {', '.join(names)}, got {_short(value)}",
                _suggest(value, names) if isinstance(value, str) else "",
            )
            return None
        return enum(value)

    def _frames(self) -> tuple[regex.Pattern, ...]:
        value = self.raw.get("frames")
        if value is None:
            return ()
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            self.fail("frames", "'frames' must be a non-empty list of regexes")
            return ()
        out = []
        for i, p in enumerate(value):
            if len(p) > MAX_PATTERN_LENGTH:
                self.fail(
                    "frames",
                    f"frame regex #{i + 1} is {len(p)} characters long (limit {MAX_PATTERN_LENGTH})",
                    line=self.item_line("frames", value, i),
                )
                continue
            c = self.regex("frames", f"frame regex #{i + 1}", p, self.item_line("frames", value, i))
            if c is not None:
                out.append(c)
        return tuple(out)

    def _category_from(self, groups: set[str]) -> CategoryFrom | None:
        value = self.raw.get("category_from")
        if value is None:
            return None
        types = value.get("types", False) if isinstance(value, dict) else False
        if (
            not isinstance(value, dict)
            or not isinstance(value.get("group"), str)
            or not isinstance(value.get("map", {} if types else None), dict)
        ):
            self.fail(
                "category_from",
                "'category_from' needs 'group' (a named group) and 'map' (value: category), "
                "or 'types: true' (the group names an exception class)",
            )
            return None
        if not isinstance(types, bool):
            self.fail("category_from", f"category_from.types must be true or false, got {_short(types)}")
            return None
        for key in value:
            if key not in ("group", "map", "default", "types"):
                self.fail(
                    "category_from",
                    f"unknown category_from field '{key}'",
                    _suggest(key, ("group", "map", "default", "types")),
                )
        if value["group"] not in groups:
            self.fail("category_from", f"group '{value['group']}' is not a named group of the patterns")
        default = value.get("default", "unknown")
        pairs = []
        for k, cat in (value.get("map") or {}).items():
            if not isinstance(cat, str) or cat not in CATEGORIES:
                self.fail(
                    "category_from",
                    f"unknown category {_short(cat)} in category_from.map",
                    _suggest(cat, CATEGORIES) if isinstance(cat, str) else "a category id",
                )
            pairs.append((str(k), cat))
        if not isinstance(default, str) or default not in CATEGORIES:
            self.fail("category_from", f"unknown default category {_short(default)}")
        return CategoryFrom(value["group"], tuple(pairs), default, types)


def _load_file(
    path: Path, label: str, problems: list[Problem], probe: bool = False, lazy: bool = False
) -> list[Entry]:
    return load_items(
        path,
        label,
        problems,
        lazy,
        lambda raw: _EntryBuilder(raw, label, problems, probe, lazy).build(),
        "catalog entry",
    )


def load_items(
    path: Path, label: str, problems: list[Problem], lazy: bool, build: Callable[[dict], Any], noun: str
) -> list:
    """The items of one YAML file of entries (a catalog's, the known issues'), each mapping made by
    `build` (None: its problems are reported) and its id unique in the file; every problem in
    `problems`, and no item at all from a file that is no valid YAML or no list of mappings."""
    text = _read_catalog_text(path, label, problems)
    if text is None:
        return []
    items: list = []
    seen: dict[str, int] = {}

    def add(raw: Any) -> None:
        if not isinstance(raw, dict):
            problems.append(Problem(label, getattr(raw, "line", 0), f"each {noun} must be a mapping"))
            return
        item = build(raw)
        if item is None:
            return
        if item.id in seen:
            problems.append(
                Problem(
                    label,
                    item.line,
                    f"duplicate id '{item.id}' (first at line {seen[item.id]})",
                    "ids are unique within a catalog source",
                )
            )
            return
        seen[item.id] = item.line
        items.append(item)

    import yaml  # here: with the start-up cache warm, a scan parses no YAML

    from patterns.yamlfile import AliasBomb

    try:
        for data in _documents(text, lazy):
            if not _add_document(data, label, problems, add):
                return []
    except yaml.YAMLError as exc:
        problems.append(_yaml_problem(exc, label))
        return []
    except RecursionError:
        problems.append(Problem(label, 0, "invalid YAML: nested too deeply"))
        return []
    except AliasBomb as exc:
        problems.append(
            Problem(
                label,
                exc.line,
                f"refused: {exc.reason}",
                "write the values out instead of aliases of aliases (anchors `&` and aliases `*`)",
            )
        )
        return []
    return items


def _read_catalog_text(path: Path, label: str, problems: list[Problem]) -> str | None:
    """The text of a catalog file: a regular file of at most MAX_CATALOG_BYTES, else a problem. (A FIFO
    as --catalog waited for ever, /dev/zero grew to a MemoryError: neither is opened for reading.)"""
    try:
        # O_NONBLOCK: opening a FIFO does not wait for a writer, so it can be told apart and refused
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                problems.append(
                    Problem(
                        label,
                        0,
                        "catalog path is not a regular file (a FIFO, device or socket)",
                        "give a YAML file, or a folder of them",
                    )
                )
                return None
            data = fh.read(MAX_CATALOG_BYTES + 1)  # (its size may grow while it is read)
        if len(data) > MAX_CATALOG_BYTES:
            problems.append(
                Problem(
                    label,
                    0,
                    f"catalog file is {max(st.st_size, len(data))} bytes (limit {MAX_CATALOG_BYTES})",
                    "split it into several files in a folder",
                )
            )
            return None
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem(label, 0, f"cannot read catalog file: {exc}"))
        return None


def _documents(text: str, lazy: bool) -> Iterator[tuple[bool, Any]]:
    """(streamed, data) of a catalog file: the built-in catalog composed whole by libyaml (the quickest
    start); a user's one entry at a time, aliases bounded (streamed: each an entry)."""
    import yaml

    from patterns.yamlfile import LineLoader, user_documents

    if lazy:
        data = yaml.load(text, Loader=LineLoader)
        return iter(() if data is None else ((False, data),))
    return user_documents(text)


def _add_document(item: tuple[bool, Any], label: str, problems: list[Problem], add) -> bool:
    """Add the entries of one document; False when it is no list of entries (or entry)."""
    streamed, data = item
    if streamed:
        add(data)
        return True
    if data is None:
        return True
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        problems.append(Problem(label, 1, "a catalog file holds a list of entries (or one entry mapping)"))
        return False
    for raw in data:
        add(raw)
    return True


def _yaml_problem(exc: Exception, label: str) -> Problem:
    mark = getattr(exc, "problem_mark", None)
    line = mark.line + 1 if mark else 0
    problem = str(getattr(exc, "problem", None) or exc)
    if "could not determine a constructor for the tag" in problem:
        tag = problem.rsplit("tag", 1)[-1].strip(" '")
        return Problem(
            label,
            line,
            f"YAML tag {tag!r} is not allowed: a catalog is plain data "
            "(read with a safe loader; nothing in it is run)",
            "remove the tag; write the value as a plain string, list or mapping",
        )
    return Problem(
        label, line, f"invalid YAML: {problem}", "regexes belong in single-quoted scalars: 'like \\d+ this'"
    )


def yaml_files(path: Path) -> list[Path]:
    """A source's YAML files: the file itself, or a folder's `.yaml` / `.yml` files, sorted."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    return [path]


def _load_source(
    path: Path, display: str, problems: list[Problem], probe: bool = False, lazy: bool = False
) -> list[Entry]:
    """One source (a file or a folder): ids must be unique across it."""
    return load_source_items(
        path, display, problems, lambda f, label: _load_file(f, label, problems, probe, lazy), "catalog"
    )


def load_source_items(
    path: Path, display: str, problems: list[Problem], load_file: Callable[[Path, str], list], what: str
) -> list:
    """The items of one source (a file or a folder of `what` files), each file's read by
    `load_file(file, label)`; ids must be unique across the source."""
    try:
        if not path.exists():
            problems.append(Problem(display, 0, f"{what} path does not exist"))
            return []
        files = yaml_files(path)
    except OSError as exc:  # a name too long for the file system, a loop of links, ...
        problems.append(Problem(display, 0, f"cannot read {what} path: {exc.strerror or exc}"))
        return []
    items: list = []
    first: dict[str, Any] = {}
    for f in files:
        label = display if f == path else str(Path(display) / f.relative_to(path))
        for item in load_file(f, label):
            if item.id in first:
                other = first[item.id]
                problems.append(
                    Problem(
                        label,
                        item.line,
                        f"duplicate id '{item.id}' (also at {other.source}:{other.line})",
                        "ids are unique within a catalog source",
                    )
                )
                continue
            first[item.id] = item
            items.append(item)
    return items


def _builtin_dir() -> Path:
    return Path(str(importlib.resources.files("patterns").joinpath("catalog")))


def _builtin_entries(problems: list[Problem]) -> list[Entry]:
    """The built-in entries (patterns/catalog), parsed, or as an earlier run parsed the same files
    (patterns.cache)."""
    folder = _builtin_dir()
    files = yaml_files(folder)
    parts = [str(f.relative_to(folder)).encode() + b"\0" + f.read_bytes() for f in files]
    parts += source_of("patterns.loader", "patterns.yamlfile", "patterns.schema", "patterns.validation")
    parts += vocabulary_key()

    def build() -> tuple[list[Entry], list[Problem]]:
        found: list[Problem] = []
        return _load_source(folder, "patterns/catalog", found, lazy=True), found

    def check(value: Any) -> bool:
        return (
            isinstance(value, tuple)
            and len(value) == 2
            and value[1] == []
            and isinstance(value[0], list)
            and all(isinstance(e, Entry) for e in value[0])
        )

    entries, found = cached("catalog", parts, build, CATALOG_CLASSES, check, keep=lambda value: not value[1])
    problems.extend(found)
    return entries


def load_catalog(extra: list[str] | tuple[str, ...] = (), builtin: bool = True) -> Catalog:
    """Built-in entries, then each extra source in order; a later source overrides an id."""
    problems: list[Problem] = []
    merged: dict[str, Entry] = {}
    sources = []
    if builtin:
        for e in _builtin_entries(problems):
            merged[e.id] = e
        sources.append("built-in")
    for path in extra:
        # the built-in catalog's regexes are probed by its tests, a user's at every load
        for e in _load_source(Path(path), str(path), problems, probe=True):
            merged[e.id] = e
        sources.append(str(path))
    for e in merged.values():
        for target in e.explains:
            if target not in merged and target not in CATEGORIES:
                problems.append(
                    Problem(
                        e.source,
                        e.line,
                        f"entry '{e.id}': explains unknown id or category '{target}'",
                        _suggest(target, list(merged)) or "",
                    )
                )
    if problems:
        raise CatalogError(problems)
    return Catalog(tuple(merged.values()), tuple(sources))


def load_builtin_catalog() -> Catalog:
    return load_catalog(())
