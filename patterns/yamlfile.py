"""Reading the knowledge's YAML safely, with line numbers: a SafeLoader subclass (no tags, no code)
whose mappings and lists remember the line of each key and item, and a user catalog composed one entry
at a time with its aliases bounded.

Imported only when some YAML is parsed: with the start-up cache (patterns.cache) warm, a scan parses
none, and PyYAML took about 11 ms of its start-up to import.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

from patterns.validation import MAX_ALIAS_EXPANSION, Problem, _short, _suggest


class LineDict(dict):
    """A mapping that remembers the line of itself and of each key (1-based)."""

    line: int = 0
    key_lines: dict[str, int]


# The C loader when libyaml is there (several times faster to start a scan); same safe constructors.
class LineLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    pass


try:  # libyaml's event parser under PyYAML's own composer: a user catalog composed one entry at a time
    from yaml._yaml import CParser as _EventParser

    class EntryLoader(
        _EventParser,
        yaml.composer.Composer,
        yaml.constructor.SafeConstructor,  # type: ignore[misc]
        yaml.resolver.Resolver,
    ):
        """Composes a user catalog's top-level list one item at a time (a whole document's node graph,
        marks and all, took 150 MB for a catalog of 10,000 entries), with the same safe constructors."""

        def __init__(self, text: str):
            _EventParser.__init__(self, text)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
except (
    ImportError
):  # pragma: no cover - PyYAML without libyaml: its pure-Python safe loader composes the same way

    class EntryLoader(yaml.SafeLoader):  # type: ignore[no-redef]
        pass


class LineList(list):
    """A sequence that remembers the line of each item (1-based)."""

    item_lines: list[int]


def _construct_sequence(loader: LineLoader, node: yaml.SequenceNode) -> LineList:
    result = LineList(loader.construct_object(child, deep=True) for child in node.value)
    result.item_lines = [child.start_mark.line + 1 for child in node.value]
    return result


def _construct_mapping(loader: LineLoader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    result = LineDict()
    result.line = node.start_mark.line + 1
    result.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            key = _short(key)
        if key in result:  # PyYAML would keep the last one silently
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key '{key}' (first at line {result.key_lines[key]})",
                key_node.start_mark,
            )
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = key_node.start_mark.line + 1
    return result


for _loader in (LineLoader, EntryLoader):
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


class AliasBomb(Exception):
    """Aliases expand a value past MAX_ALIAS_EXPANSION nodes (or refer to themselves)."""

    def __init__(self, line: int, reason: str):
        super().__init__(reason)
        self.line = line
        self.reason = reason


def check_expansion(root: yaml.Node) -> None:
    """Raise AliasBomb when the value of `root`, with every alias written out, holds more than
    MAX_ALIAS_EXPANSION nodes more than the YAML has (a 'billion laughs': 9 aliases of 9 aliases of ...
    make a few lines into 387 million values), or when an alias is inside the value it names. Each
    node is visited once (its expanded size remembered), without recursion."""
    size: dict[int, int | None] = {}  # id(node) -> expanded size; None while its children are counted
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    distinct = 0
    while stack:
        node, counted = stack.pop()
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        else:
            children = ()
        if not counted:
            if id(node) in size:
                continue
            size[id(node)] = None
            distinct += 1
            stack.append((node, True))
            for child in children:
                known = size.get(id(child), 0)
                if known is None:
                    raise AliasBomb(
                        child.start_mark.line + 1,
                        "an alias refers to a value that holds it (a recursive structure)",
                    )
                if id(child) not in size:
                    stack.append((child, False))
            continue
        total = 1 + sum(size[id(child)] for child in children)
        size[id(node)] = total
        if total - distinct > MAX_ALIAS_EXPANSION:
            raise AliasBomb(
                node.start_mark.line + 1,
                f"YAML aliases expand this value to {total:,} values "
                f"(limit {MAX_ALIAS_EXPANSION:,} more than written: a 'billion laughs')",
            )


def user_documents(text: str) -> Iterator[tuple[bool, Any]]:
    """A user catalog file as (True, item) for each item of its top-level list, composed and constructed
    one at a time, or as (False, document) when it is no plain list (one entry mapping, or something
    that is no catalog); each value checked for alias expansion before it is built. Raises
    yaml.YAMLError, RecursionError, AliasBomb."""
    loader = EntryLoader(text)
    try:
        loader.get_event()  # stream start
        if loader.check_event(yaml.StreamEndEvent):
            return
        loader.get_event()  # document start
        if loader.check_event(yaml.SequenceStartEvent) and not getattr(loader.peek_event(), "anchor", None):
            loader.get_event()
            while not loader.check_event(yaml.SequenceEndEvent):
                node = loader.compose_node(None, None)
                check_expansion(node)
                yield True, loader.construct_document(node)
            loader.get_event()
        else:
            node = loader.compose_node(None, None)
            check_expansion(node)
            yield False, loader.construct_document(node)
        loader.get_event()  # document end
        if not loader.check_event(yaml.StreamEndEvent):
            raise yaml.composer.ComposerError(
                "expected a single document in the stream",
                None,
                "but found another document",
                loader.peek_event().start_mark,
            )
    finally:
        loader.dispose()


def knowledge_mapping(text: str, label: str, problems: list[Problem], fields: tuple[str, ...]) -> LineDict:
    """A built-in knowledge file (taxonomy, formats, environment, progress) as a line-keeping mapping
    whose top-level keys are among `fields`; every problem (invalid YAML, not a mapping, an unknown
    key) is added to `problems`, and an empty mapping comes back for a file that did not parse."""
    empty = LineDict()
    empty.key_lines = {}
    try:
        data = yaml.load(text, Loader=LineLoader)  # a SafeLoader subclass: no tags, no code
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problems.append(
            Problem(
                label,
                mark.line + 1 if mark else 0,
                f"invalid YAML: {getattr(exc, 'problem', None) or exc}",
                "regexes belong in single-quoted scalars: 'like \\d+ this'",
            )
        )
        return empty
    if data is None:
        return empty
    if not isinstance(data, LineDict):
        problems.append(Problem(label, 1, f"{label} holds a mapping: {', '.join(fields)}"))
        return empty
    for key in data:
        if key not in fields:
            problems.append(
                Problem(
                    label,
                    data.key_lines.get(key, 0),
                    f"unknown top-level field '{key}'",
                    _suggest(key, fields) or f"known fields: {', '.join(fields)}",
                )
            )
    return data
