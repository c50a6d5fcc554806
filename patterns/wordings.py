"""Wordings as data: the schema and loader of the built-in files that hold log syntax rather than
failures (patterns/formats.yaml, environment.yaml, progress.yaml).

A file is a mapping of sections, each a list of items (the way lnav keeps a format with its sample
lines, and semgrep a rule with its test lines):

  - id: ray-actor                 # kebab-case, unique in the file; the code looks the item up by it
    regex: '\\(...\\) ?'            # exactly one of: regex (single-quoted), literal, literals (a list),
                                  # table (a mapping of words), value (a number)
    groups:                       # a regex's named groups, each with what it holds (all of them)
      pid: the worker's process id
    <fields of the section>       # e.g. `kind` of a frame rule, `keywords` of an environment reader
    examples:
      match:                      # a line (or `block`, `path`, `name`, `key`) the wording must hit
        - line: '(WorkerDict pid=1, ip=10.0.0.2) Traceback (most recent call last):'
          groups: {pid: '1'}      # optional: what the regex's named groups hold in it
          expect: {pid: 1}        # optional: what the code that uses the wording makes of it
      no_match:                   # one it must not hit, each with `why`
        - line: '(WorkerDict) x'
          why: no pid

The loader checks the shape (every problem at once, with file:line); `verl-logscan catalog check`
runs every example through the code that uses the wording (logparse.wording_check). A scan needs the
values only: they come from the start-up cache (patterns.cache) without the examples, and the code
compiles each regex once, at import, the way it compiled its own before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import regex

from patterns.cache import cached
from patterns.validation import ID_RE, CatalogError, FieldBuilder, Problem, _short, _suggest

VALUE_KINDS = ("regex", "literal", "literals", "table", "value")
ITEM_FIELDS = ("id", *VALUE_KINDS, "groups", "examples", "doc")
TEXT_KEYS = ("line", "block", "path", "name", "key")  # what an example's text is
EXAMPLE_KEYS = (*TEXT_KEYS, "why", "groups", "expect")


@dataclass(frozen=True)
class FieldSpec:
    """A field a section's items may (or must) carry beyond the common ones."""

    what: str  # for a message: "a list of strings", "one of user, library, launcher"
    valid: Callable[[Any], bool]
    required: bool = False


@dataclass(frozen=True)
class SectionSpec:
    """What the items of one section may be: their value kinds and their own fields."""

    kinds: tuple[str, ...]
    fields: dict[str, FieldSpec] = field(default_factory=dict)


def is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def is_texts(value: Any) -> bool:
    return isinstance(value, list) and all(is_text(v) for v in value)


def is_minor(value: Any) -> bool:
    """A verl minor version (0.N) or null."""
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 100)


@dataclass(frozen=True)
class WordingExample:
    """An example of a wording: a text, what its named groups hold, what the code reads in it."""

    text: str
    source: str = "line"  # which of TEXT_KEYS it was given as
    why: str = ""
    groups: tuple[tuple[str, Any], ...] = ()  # the regex's named groups as the example states them
    expect: tuple[tuple[str, Any], ...] = ()  # facts of the code that uses the wording, as stated
    line: int = 0  # its line in the file


@dataclass(frozen=True)
class Wording:
    """One wording of a wordings file: its id, section, kind and value (a regex, literals, a table)."""

    id: str
    section: str
    kind: str  # one of VALUE_KINDS
    value: Any  # str (regex, literal), tuple[str, ...] (literals), tuple of pairs (table), a number
    groups: tuple[tuple[str, str], ...] = ()  # named group -> what it holds
    fields: tuple[tuple[str, Any], ...] = ()  # the section's own fields
    match: tuple[WordingExample, ...] = ()
    no_match: tuple[WordingExample, ...] = ()
    line: int = 0

    def field(self, name: str, default: Any = None) -> Any:
        return next((v for k, v in self.fields if k == name), default)


@dataclass(frozen=True)
class Wordings:
    """One file's items, in file order."""

    label: str
    items: tuple[Wording, ...]
    _by_id: dict[str, Wording] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_id.update((w.id, w) for w in self.items)

    def item(self, wording_id: str) -> Wording:
        found = self._by_id.get(wording_id)
        if found is None:
            raise KeyError(f"{self.label}: no wording '{wording_id}'")
        return found

    def _of(self, wording_id: str, kind: str) -> Any:
        item = self.item(wording_id)
        if item.kind != kind:
            raise KeyError(f"{self.label}: wording '{wording_id}' is a {item.kind}, not a {kind}")
        return item.value

    def regex(self, wording_id: str) -> str:
        return self._of(wording_id, "regex")

    def literal(self, wording_id: str) -> str:
        return self._of(wording_id, "literal")

    def literals(self, wording_id: str) -> tuple[str, ...]:
        return self._of(wording_id, "literals")

    def table(self, wording_id: str) -> dict[str, str]:
        return dict(self._of(wording_id, "table"))

    def value(self, wording_id: str) -> Any:
        return self._of(wording_id, "value")

    def section(self, name: str) -> tuple[Wording, ...]:
        return tuple(w for w in self.items if w.section == name)

    def without_examples(self) -> Wordings:
        """What a scan needs: the values (the examples are for the catalog check)."""
        return Wordings(self.label, tuple(dataclasses.replace(w, match=(), no_match=()) for w in self.items))


WORDING_CLASSES = (Wordings, Wording, WordingExample)


def _plain(value: Any) -> Any:
    """A YAML value as hashable plain data (lists as tuples, mappings as tuples of pairs)."""
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return tuple((str(k), _plain(v)) for k, v in value.items())
    return value


class _WordingBuilder(FieldBuilder):
    noun = "wording"

    def __init__(self, raw: Any, section: str, spec: SectionSpec, label: str, problems: list[Problem]):
        super().__init__(raw, label, problems)
        self.section = section
        self.spec = spec

    def build(self) -> Wording | None:
        raw = self.raw
        known = (*ITEM_FIELDS, *self.spec.fields)
        for key in raw:
            if key not in known:
                self.fail(key, f"unknown field '{key}'", _suggest(key, known) or f"known: {', '.join(known)}")
        wording_id = self.text("id")
        if wording_id is not None and not ID_RE.match(wording_id):
            self.fail("id", f"id '{wording_id}' is not kebab-case", "use lower-case words joined by '-'")
        kind, value = self._value()
        groups = self._groups(kind, value)
        fields = self._fields()
        match, no_match = self._examples_of(kind, {name for name, _ in groups})
        if not self.ok:
            return None
        return Wording(wording_id, self.section, kind, value, groups, fields, match, no_match, self.line_of())

    def _value(self) -> tuple[str, Any]:
        given = [k for k in VALUE_KINDS if k in self.raw]
        if len(given) != 1:
            self.fail(
                None,
                f"needs exactly one of {', '.join(self.spec.kinds)}"
                + (f" (has {', '.join(given)})" if given else ""),
            )
            return "", None
        kind = given[0]
        value = self.raw[kind]
        if kind not in self.spec.kinds:
            self.fail(kind, f"a {self.section} item is a {' or '.join(self.spec.kinds)}, not a {kind}")
            return kind, None
        if kind == "regex":
            if not is_text(value):
                self.fail(kind, f"'regex' must be a non-empty string, got {_short(value)}")
                return kind, None
            try:
                regex.compile(value)
            except (regex.error, OverflowError, RecursionError) as exc:
                self.fail(kind, f"regex does not compile: {exc}", f"regex: {value!r}")
            return kind, value
        if kind == "literal" and not is_text(value):
            self.fail(kind, f"'literal' must be a non-empty string, got {_short(value)}")
        elif kind == "literals" and (not is_texts(value) or not value or len(set(value)) != len(value)):
            self.fail(kind, f"'literals' must be a non-empty list of distinct strings, got {_short(value)}")
        elif kind == "table" and (
            not isinstance(value, dict) or not value or not all(is_text(v) for v in value.values())
        ):
            self.fail(kind, f"'table' must be a non-empty mapping of words, got {_short(value)}")
        elif kind == "value" and (isinstance(value, bool) or not isinstance(value, (int, float))):
            self.fail(kind, f"'value' must be a number, got {_short(value)}")
        return kind, _plain(value)

    def _groups(self, kind: str, value: Any) -> tuple[tuple[str, str], ...]:
        doc = self.raw.get("groups")
        if kind != "regex" or not is_text(value):
            if doc is not None:
                self.fail("groups", "only a regex has named groups")
            return ()
        try:
            named = list(regex.compile(value).groupindex)
        except (regex.error, OverflowError, RecursionError):
            return ()
        if doc is None:
            doc = {}
        if not isinstance(doc, dict) or not all(is_text(v) for v in doc.values()):
            self.fail("groups", "'groups' maps each named group to what it holds")
            return ()
        for name in named:
            if name not in doc:
                self.fail("groups", f"named group '{name}' is not described", f"add '{name}: ...' to groups")
        for name in doc:
            if name not in named:
                self.fail("groups", f"'{name}' is no named group of the regex")
        return tuple((str(k), str(v)) for k, v in doc.items())

    def _fields(self) -> tuple[tuple[str, Any], ...]:
        out = []
        for name, spec in self.spec.fields.items():
            if name not in self.raw:
                if spec.required:
                    self.fail(None, f"missing required field '{name}' ({spec.what})")
                continue
            value = self.raw[name]
            if not spec.valid(value):
                self.fail(name, f"'{name}' must be {spec.what}, got {_short(value)}")
                continue
            out.append((name, _plain(value)))
        return tuple(out)

    def _examples_of(
        self, kind: str, groups: set[str]
    ) -> tuple[tuple[WordingExample, ...], tuple[WordingExample, ...]]:
        value = self.raw.get("examples")
        if kind == "value" and value is None:
            return (), ()
        if not isinstance(value, dict):
            self.fail("examples", "missing or invalid 'examples'", "a mapping with match and no_match lists")
            return (), ()
        for key in value:
            if key not in ("match", "no_match"):
                self.fail("examples", f"unknown examples field '{key}'", _suggest(key, ("match", "no_match")))
        out = []
        for key in ("match", "no_match"):
            items = value.get(key)
            if not isinstance(items, list) or not items:
                self.fail("examples", f"examples.{key} must be a non-empty list")
                out.append(())
                continue
            lines = getattr(items, "item_lines", None) or []
            built = [
                self._example(key, item, lines[i] if i < len(lines) else self.line_of("examples"), groups)
                for i, item in enumerate(items)
            ]
            out.append(tuple(x for x in built if x is not None))
        return out[0], out[1]

    def _example(self, key: str, item: Any, line: int, groups: set[str]) -> WordingExample | None:
        if isinstance(item, str) and key == "match":
            return WordingExample(item, line=line)
        if not isinstance(item, dict):
            self.fail(None, f"examples.{key} items are mappings (line or path, why, ...)", line=line)
            return None
        texts = [k for k in TEXT_KEYS if k in item]
        unknown = [k for k in item if k not in EXAMPLE_KEYS]
        if len(texts) != 1 or not isinstance(item[texts[0]], str) or unknown:
            self.fail(
                None,
                f"an example holds one of {', '.join(TEXT_KEYS)} (a string)"
                + (f"; unknown field(s) {', '.join(map(str, unknown))}" if unknown else ""),
                f"fields: {', '.join(EXAMPLE_KEYS)}",
                line=line,
            )
            return None
        why = item.get("why", "")
        if key == "no_match" and not (isinstance(why, str) and why.strip()):
            self.fail(None, f"examples.no_match item lacks 'why': {item[texts[0]][:60]!r}", line=line)
        stated = item.get("groups") or {}
        expect = item.get("expect") or {}
        if not isinstance(stated, dict) or not isinstance(expect, dict):
            self.fail(None, "an example's groups and expect are mappings", line=line)
            return None
        for name in stated:
            if name not in groups:
                self.fail(None, f"example states group '{name}', which the regex does not have", line=line)
        return WordingExample(
            item[texts[0]],
            texts[0],
            why.strip() if isinstance(why, str) else "",
            _plain(stated),
            _plain(expect),
            line,
        )


def load_wordings(text: str, label: str, spec: dict[str, SectionSpec]) -> Wordings:
    """The items of a wordings file, each section checked against `spec`; CatalogError lists every
    problem (ids are unique across the file)."""
    from patterns.yamlfile import knowledge_mapping  # (PyYAML: only when a file is parsed)

    problems: list[Problem] = []
    data = knowledge_mapping(text, label, problems, tuple(spec))
    items: list[Wording] = []
    seen: dict[str, int] = {}
    for section, section_spec in spec.items():
        raw_items = data.get(section)
        line = data.key_lines.get(section, 0)
        if raw_items is None:
            if not problems:
                problems.append(Problem(label, 0, f"no '{section}:' section"))
            continue
        if not isinstance(raw_items, list):
            problems.append(Problem(label, line, f"'{section}' must be a list of wordings"))
            continue
        for raw in raw_items:
            if not isinstance(raw, dict):
                problems.append(
                    Problem(label, getattr(raw, "line", line), f"{section}: each item is a mapping")
                )
                continue
            built = _WordingBuilder(raw, section, section_spec, label, problems).build()
            if built is None:
                continue
            if built.id in seen:
                problems.append(
                    Problem(
                        label,
                        built.line,
                        f"duplicate wording id '{built.id}' (first at line {seen[built.id]})",
                    )
                )
                continue
            seen[built.id] = built.line
            items.append(built)
    if problems:
        raise CatalogError(problems)
    return Wordings(label, tuple(items))


def builtin_wordings(
    kind: str,
    text: str,
    label: str,
    spec: dict[str, SectionSpec],
    parts: list[bytes],
    check: Callable[[Wordings], None] | None = None,
) -> Wordings:
    """A built-in wordings file's values (no examples), parsed and checked, or as an earlier run did it
    for the same text and code (patterns.cache). `check(wordings)`: a file's own cross-checks, raising
    CatalogError."""

    def build() -> Wordings:
        wordings = load_wordings(text, label, spec)
        if check is not None:
            check(wordings)
        return wordings.without_examples()

    return cached(
        kind,
        [text.encode(), *parts],
        build,
        WORDING_CLASSES,
        lambda value: isinstance(value, Wordings) and all(isinstance(w, Wording) for w in value.items),
    )
