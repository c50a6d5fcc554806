"""Load and validate YAML catalogs: every problem at once, each with file, line, reason and help.

YAML is read with a SafeLoader subclass only (no tags, no code: patterns/yamlfile.py, imported only
when a file is parsed); no field is ever evaluated as code or as a template. Regexes are compiled with
the `regex` module; matching runs with a timeout (see logparse.observe.matcher), so a pathological pattern
cannot hang a scan.
"""

from __future__ import annotations

import importlib.resources
import reprlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import regex
from rapidfuzz import process as fuzz_process

from patterns.cache import cached, source_of
from patterns.schema import (
    CATALOG_CLASSES,
    Catalog,
    CategoryFrom,
    Entry,
    Example,
    Examples,
    LazyPattern,
    LazyRe,
    Remediation,
    Role,
    Severity,
    group_names,
    placeholders,
)
from patterns.taxonomy import CATEGORIES, STAGES

if TYPE_CHECKING:
    from patterns.yamlfile import LineDict

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
REMEDIATION_FIELDS = {"summary": True, "why": True, "fix": True, "references": False}
EXAMPLE_FIELDS = {"match": True, "no_match": True, "todo_match": False}
ID_RE = LazyRe(r"^[a-z0-9]+(?:-[a-z0-9]+)*$", engine="regex")
MAX_PATTERN_LENGTH = 2000
MAX_CATALOG_BYTES = 8 << 20  # one catalog file; the built-in files are a few tens of KiB
# A nested unbounded quantifier such as (a+)+ or (a*)* can backtrack exponentially.
MAX_REPEAT_PRODUCT = 10_000  # nested counted repeats multiply: (?:a{999}){999} compiles for seconds
# A pattern is tried on these at load time (a run of one character, then a character that fails the
# match); one that takes longer than PROBE_TIMEOUT_S backtracks catastrophically and is rejected.
PROBE_LENGTH = 40
PROBE_TIMEOUT_S = 0.05
PROBE_CHARS = "a0 x_.-:/\t"
MAX_ALIAS_EXPANSION = 100_000  # values that YAML aliases may add to what a user catalog file writes


class _BoundedRepr(reprlib.Repr):
    def repr1(self, x: Any, level: int) -> str:
        # reprlib dispatches on the type's name: the line-keeping list / dict subclasses need this
        if isinstance(x, list):
            return self.repr_list(x, level)
        if isinstance(x, dict):
            return self.repr_dict(x, level)
        return super().repr1(x, level)


_REPR = _BoundedRepr()
_REPR.maxstring = _REPR.maxother = 60
_REPR.maxlist = _REPR.maxdict = 4
_REPR.maxlevel = 2


def _kind(value: Any) -> str:
    """The YAML name of a value's type, for a message."""
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, list):
        return "list"
    return {str: "string", bool: "boolean", int: "integer", float: "number"}.get(
        type(value), type(value).__name__
    )


def _short(value: Any) -> str:
    """A bounded repr of a YAML value for a message: aliases can nest a small file into a huge value."""
    return _REPR.repr(value)


def regex_risk(pattern: str) -> str | None:
    """Why `pattern` may backtrack catastrophically or compile huge, or None: a quantified group whose
    body (at any depth) holds an unbounded quantifier, like (a+)+ or (?:(?:a|b)+)*; a counted repeat of
    1000 or more; nested counted repeats whose product exceeds MAX_REPEAT_PRODUCT."""
    stack: list[list] = []  # per open group: [an unbounded quantifier inside, largest repeat product inside]
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "(":
            if pattern.startswith("(?#", i):  # a comment
                end = pattern.find(")", i)
                i = n if end < 0 else end + 1
                continue
            stack.append([False, 1])
            i += 1
            continue
        if c == "|":
            i += 1
            continue
        group = c == ")"
        unbounded, product = False, 1  # of the atom read now: a group just closed, an escape, a class, a char
        if group:
            if stack:
                unbounded, product = stack.pop()
            i += 1
        elif c == "\\":
            i += 2
        elif c == "[":  # a class: ( + * are literal inside it
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
        quantified_unbounded = False
        count = None
        if i < n and pattern[i] in "*+":
            quantified_unbounded = True
            i += 1
        elif i < n and pattern[i] == "?":
            i += 1
        elif i < n and pattern[i] == "{":
            m = _COUNT_RE.match(pattern, i)
            if m and (m.group(1) or m.group(3)):
                low = int(m.group(1) or 0)
                if m.group(2) and not m.group(3):
                    quantified_unbounded = True
                else:
                    count = max(low, int(m.group(3) or low))
                i = m.end()
        if i < n and pattern[i] in "?+":  # a lazy or possessive marker
            i += 1
        if quantified_unbounded and unbounded and group:
            return (
                "it nests unbounded quantifiers (a group quantified with + or * whose body holds + or *, "
                "like (a+)+), which can backtrack catastrophically"
            )
        if count is not None:
            if count >= 1000:
                return f"a repetition count of {count} (limit 999)"
            product *= max(count, 1)
            if product > MAX_REPEAT_PRODUCT:
                return f"nested repetition counts multiply to {product} (limit {MAX_REPEAT_PRODUCT})"
        if stack:
            stack[-1][0] = stack[-1][0] or unbounded or quantified_unbounded
            stack[-1][1] = max(stack[-1][1], product)
    return None


_COUNT_RE = LazyRe(r"\{(\d*)(,)?(\d*)\}", engine="regex")


def slow_probe(compiled: regex.Pattern) -> str | None:
    """A short input on which `compiled` takes longer than PROBE_TIMEOUT_S, or None."""
    chars = set(PROBE_CHARS)
    chars.update(ch for ch in compiled.pattern if ch.isalnum() and ch.isascii())
    for ch in sorted(chars)[:40]:
        for tail in ("\x00", "!"):
            probe = ch * PROBE_LENGTH + tail
            try:
                compiled.search(probe, timeout=PROBE_TIMEOUT_S)
            except TimeoutError:
                return probe
    return None


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    reason: str
    help: str = ""

    def __str__(self) -> str:
        text = f"{self.file}:{self.line}: {self.reason}"
        return text + (f"\n    help: {self.help}" if self.help else "")


class CatalogError(Exception):
    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def _suggest(word: str, choices: list[str] | tuple[str, ...] | set[str]) -> str:
    best = fuzz_process.extractOne(word, list(choices), score_cutoff=60)
    return f"did you mean '{best[0]}'?" if best else ""


class _EntryBuilder:
    """Validates one raw mapping; collects problems instead of stopping at the first."""

    def __init__(
        self, raw: LineDict, file: str, problems: list[Problem], probe: bool = False, lazy: bool = False
    ):
        self.raw = raw
        self.file = file
        self.problems = problems
        self.probe = probe  # time each regex on short adversarial inputs (user catalogs)
        self.lazy = lazy  # the built-in catalog: regexes compile on first use (checked by its tests)
        self.ok = True

    def item_line(self, key: str, value: Any, index: int) -> int | None:
        lines = getattr(value, "item_lines", None)
        return lines[index] if lines and index < len(lines) else None

    def line_of(self, key: str | None = None) -> int:
        if key is not None and key in getattr(self.raw, "key_lines", {}):
            return self.raw.key_lines[key]
        return getattr(self.raw, "line", 0)

    def fail(self, key: str | None, reason: str, help: str = "", line: int | None = None) -> None:
        ident = self.raw.get("id") if isinstance(self.raw.get("id"), str) else None
        prefix = f"entry '{ident}': " if ident else "entry: "
        self.problems.append(Problem(self.file, line or self.line_of(key), prefix + reason, help))
        self.ok = False

    def regex(self, key: str, what: str, p: str, line: int | None) -> regex.Pattern | None:
        """Compile one catalog regex, or fail with why it is refused."""
        if self.lazy:
            return LazyPattern(p)
        risk = regex_risk(p)
        if risk is not None:
            self.fail(
                key,
                f"{what} is refused: {risk}: {p!r}",
                "rewrite without a quantified group that itself holds + or * (e.g. (?:a+)+ -> a+), "
                "and with repetition counts below 1000",
                line,
            )
            return None
        try:
            compiled = regex.compile(p)
        except (regex.error, OverflowError, RecursionError, MemoryError) as exc:
            self.fail(key, f"{what} does not compile: {exc}", f"regex: {p!r}", line)
            return None
        if self.probe:
            slow = slow_probe(compiled)
            if slow is not None:
                self.fail(
                    key,
                    f"{what} is refused: it takes over {PROBE_TIMEOUT_S:g}s on the {len(slow)}-character "
                    f"input {slow!r} (catastrophic backtracking): {p!r}",
                    "make the alternatives or repeats of a group unable to match the same text",
                    line,
                )
                return None
            # checked: kept as its text, compiled again on first use (the probed object holds memory)
            return LazyPattern(p, set(compiled.groupindex))
        return compiled

    def text(self, key: str, required: bool = True) -> str | None:
        value = self.raw.get(key)
        if value is None:
            if required:
                self.fail(key, f"missing required field '{key}'", f"add '{key}: ...' to the entry")
            return None
        if not isinstance(value, str) or not value.strip():
            self.fail(key, f"'{key}' must be a non-empty string, got {_kind(value)} {_short(value)}")
            return None
        return value

    def text_list(self, key: str, value: Any, required: bool = True) -> tuple[str, ...]:
        if value is None:
            if required:
                self.fail(key, f"missing required field '{key}'", f"add '{key}:' with a list of strings")
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.fail(key, f"'{key}' must be a list of non-empty strings, got {_short(value)}")
            return ()
        if required and not value:
            self.fail(key, f"'{key}' must not be empty")
        return tuple(value)

    def build(self) -> Entry | None:
        raw = self.raw
        for key in raw:
            if key not in ENTRY_FIELDS:
                self.fail(
                    key,
                    f"unknown field '{key}'",
                    _suggest(key, ENTRY_FIELDS) or f"known fields: {', '.join(ENTRY_FIELDS)}",
                )
        entry_id = self.text("id")
        if entry_id is not None and not ID_RE.match(entry_id):
            self.fail("id", f"id '{entry_id}' is not kebab-case", "use lower-case words joined by '-'")
        title = self.text("title")
        category = self.text("category")
        if category is not None and category not in CATEGORIES:
            self.fail(
                "category",
                f"unknown category '{category}'",
                _suggest(category, CATEGORIES) or "see TAXONOMY.md for the category ids",
            )
        role = self._enum("role", Role)
        severity = self._enum("severity", Severity)
        priority = raw.get("priority")
        if priority is None:
            self.fail("priority", "missing required field 'priority'", "an integer 0-100; higher wins")
        elif not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= 100:
            self.fail("priority", f"'priority' must be an integer 0-100, got {_short(priority)}")
        keywords = self.text_list("keywords", raw.get("keywords"))
        compiled = self._patterns()
        message = self.text("message")
        groups: set[str] = set()
        for p in compiled:
            groups.update(group_names(p))
        if message is not None:
            for name in placeholders(message):
                if name not in groups:
                    self.fail(
                        "message",
                        f"placeholder '{{{name}}}' names no group of the patterns",
                        f"named groups: {', '.join(sorted(groups)) or 'none'}",
                    )
        stage = raw.get("stage")
        if stage is not None and not isinstance(stage, str):
            self.fail("stage", f"'stage' must be a stage id (a string) or null, got {_short(stage)}")
            stage = None
        elif stage is not None and stage not in STAGES:
            self.fail("stage", f"unknown stage '{stage}'", _suggest(stage, STAGES) or "see TAXONOMY.md")
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

    def _patterns(self) -> list[regex.Pattern]:
        value = self.raw.get("patterns")
        if value is None:
            self.fail("patterns", "missing required field 'patterns'", "a list of regexes (single-quoted)")
            return []
        if not isinstance(value, list) or not value:
            self.fail("patterns", "'patterns' must be a non-empty list of regexes")
            return []
        compiled = []
        for i, p in enumerate(value):
            line = self.item_line("patterns", value, i)
            if not isinstance(p, str) or not p:
                self.fail(
                    "patterns",
                    f"pattern #{i + 1} must be a non-empty string (a regex in single quotes), "
                    f"got {_kind(p)} {_short(p)}",
                    line=line,
                )
                continue
            if len(p) > MAX_PATTERN_LENGTH:
                self.fail(
                    "patterns",
                    f"pattern #{i + 1} is {len(p)} characters long (limit {MAX_PATTERN_LENGTH})",
                    line=line,
                )
                continue
            c = self.regex("patterns", f"pattern #{i + 1}", p, line)
            if c is not None:
                compiled.append(c)
        return compiled

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

    def _remediation(self) -> Remediation | None:
        value = self.raw.get("remediation")
        if not isinstance(value, dict):
            self.fail(
                "remediation",
                "missing or invalid 'remediation'",
                "a mapping with summary, why, fix, references",
            )
            return None
        lines = getattr(value, "key_lines", {})
        for key in value:
            if key not in REMEDIATION_FIELDS:
                self.fail(
                    "remediation",
                    f"unknown remediation field '{key}'",
                    _suggest(key, REMEDIATION_FIELDS),
                    line=lines.get(key),
                )
        summary, why = value.get("summary"), value.get("why")
        for key, v in (("summary", summary), ("why", why)):
            if not isinstance(v, str) or not v.strip():
                self.fail(
                    "remediation",
                    f"remediation.{key} must be a non-empty string, got {_short(v)}",
                    line=lines.get(key),
                )
        fix = self.text_list("remediation", value.get("fix"))
        refs = self.text_list("remediation", value.get("references", []), required=False)
        return Remediation(
            summary.strip() if isinstance(summary, str) else "",
            why.strip() if isinstance(why, str) else "",
            fix,
            refs,
        )

    def _examples(self) -> Examples | None:
        value = self.raw.get("examples")
        if not isinstance(value, dict):
            self.fail("examples", "missing or invalid 'examples'", "a mapping with match and no_match lists")
            return None
        for key in value:
            if key not in EXAMPLE_FIELDS:
                self.fail("examples", f"unknown examples field '{key}'", _suggest(key, EXAMPLE_FIELDS))

        def items(key: str, need_why: bool) -> tuple[Example, ...]:
            raw_list = value.get(key)
            if raw_list is None:
                if EXAMPLE_FIELDS[key]:
                    self.fail("examples", f"examples.{key} is required and must not be empty")
                return ()
            if not isinstance(raw_list, list) or (EXAMPLE_FIELDS[key] and not raw_list):
                self.fail("examples", f"examples.{key} must be a non-empty list")
                return ()
            out = []
            for item in raw_list:
                if isinstance(item, str):
                    if need_why:
                        self.fail(
                            "examples", f"examples.{key} items need 'line' and 'why' (why it must not match)"
                        )
                    out.append(Example(item))
                elif isinstance(item, dict) and (
                    isinstance(item.get("line"), str) or isinstance(item.get("block"), str)
                ):
                    text = item.get("line") if isinstance(item.get("line"), str) else item["block"]
                    why = item.get("why", "")
                    if need_why and not (isinstance(why, str) and why.strip()):
                        self.fail("examples", f"examples.{key} item lacks 'why': {text[:60]!r}")
                    out.append(Example(text, why if isinstance(why, str) else "", block="block" in item))
                else:
                    self.fail(
                        "examples",
                        f"examples.{key} items must be strings, {{line, why}} or {{block, why}} mappings",
                    )
            return tuple(out)

        return Examples(items("match", False), items("no_match", True), items("todo_match", False))


def _load_file(
    path: Path, label: str, problems: list[Problem], probe: bool = False, lazy: bool = False
) -> list[Entry]:
    try:
        size = path.stat().st_size
        if size > MAX_CATALOG_BYTES:
            problems.append(
                Problem(
                    label,
                    0,
                    f"catalog file is {size} bytes (limit {MAX_CATALOG_BYTES})",
                    "split it into several files in a folder",
                )
            )
            return []
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem(label, 0, f"cannot read catalog file: {exc}"))
        return []
    entries: list[Entry] = []
    seen: dict[str, int] = {}

    def add(raw: Any) -> None:
        if not isinstance(raw, dict):
            problems.append(Problem(label, getattr(raw, "line", 0), "each catalog entry must be a mapping"))
            return
        entry = _EntryBuilder(raw, label, problems, probe, lazy).build()
        if entry is None:
            return
        if entry.id in seen:
            problems.append(
                Problem(
                    label,
                    entry.line,
                    f"duplicate id '{entry.id}' (first at line {seen[entry.id]})",
                    "ids are unique within a catalog source",
                )
            )
            return
        seen[entry.id] = entry.line
        entries.append(entry)

    import yaml  # here: with the start-up cache warm, a scan parses no YAML

    from patterns.yamlfile import AliasBomb, LineLoader, user_documents

    try:
        if lazy:  # the built-in catalog: composed whole by libyaml, the quickest start
            data = yaml.load(text, Loader=LineLoader)
            documents: Iterator[tuple[bool, Any]] = iter(() if data is None else ((False, data),))
        else:  # a user's: one entry at a time, aliases bounded
            documents = user_documents(text)
        for streamed, data in documents:
            if streamed:
                add(data)
                continue
            if data is None:
                continue
            if isinstance(data, dict):
                data = [data]
            if not isinstance(data, list):
                problems.append(
                    Problem(label, 1, "a catalog file holds a list of entries (or one entry mapping)")
                )
                return []
            for raw in data:
                add(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 0
        problem = str(getattr(exc, "problem", None) or exc)
        if "could not determine a constructor for the tag" in problem:
            tag = problem.rsplit("tag", 1)[-1].strip(" '")
            problems.append(
                Problem(
                    label,
                    line,
                    f"YAML tag {tag!r} is not allowed: a catalog is plain data "
                    "(read with a safe loader; nothing in it is run)",
                    "remove the tag; write the value as a plain string, list or mapping",
                )
            )
        else:
            problems.append(
                Problem(
                    label,
                    line,
                    f"invalid YAML: {problem}",
                    "regexes belong in single-quoted scalars: 'like \\d+ this'",
                )
            )
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
    return entries


def _catalog_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    return [path]


def _load_source(
    path: Path, display: str, problems: list[Problem], probe: bool = False, lazy: bool = False
) -> list[Entry]:
    """One source (a file or a folder): ids must be unique across it."""
    try:
        if not path.exists():
            problems.append(Problem(display, 0, "catalog path does not exist"))
            return []
        files = _catalog_files(path)
    except OSError as exc:  # a name too long for the file system, a loop of links, ...
        problems.append(Problem(display, 0, f"cannot read catalog path: {exc.strerror or exc}"))
        return []
    entries: list[Entry] = []
    first: dict[str, Entry] = {}
    for f in files:
        label = display if f == path else str(Path(display) / f.relative_to(path))
        for entry in _load_file(f, label, problems, probe, lazy):
            if entry.id in first:
                other = first[entry.id]
                problems.append(
                    Problem(
                        label,
                        entry.line,
                        f"duplicate id '{entry.id}' (also at {other.source}:{other.line})",
                        "ids are unique within a catalog source",
                    )
                )
                continue
            first[entry.id] = entry
            entries.append(entry)
    return entries


def _builtin_dir() -> Path:
    return Path(str(importlib.resources.files("patterns").joinpath("catalog")))


def _builtin_entries(problems: list[Problem]) -> list[Entry]:
    """The built-in entries (patterns/catalog), parsed, or as an earlier run parsed the same files
    (patterns.cache)."""
    folder = _builtin_dir()
    files = _catalog_files(folder)
    parts = [str(f.relative_to(folder)).encode() + b"\0" + f.read_bytes() for f in files]
    parts += source_of("patterns.loader", "patterns.yamlfile", "patterns.schema", "patterns.taxonomy")

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
