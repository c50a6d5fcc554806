"""Typed, frozen shapes of catalog entries. The loader builds them; nothing else mutates them."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

import regex

REGEX_TIMEOUT_S = 0.05  # per search of a catalog, marker or frame regex: past it, no match instead of a hang


class LazyPattern:
    """A regex compiled on its first use. The built-in catalog's patterns are checked by its tests
    (they compile, pass the risk check and the timing probe), and a scan uses few of them: compiling
    all 300 at every start cost a tenth of a second. A user catalog's are checked at load, then kept
    as their text too: a compiled pattern that has been searched holds about 4 KB, which for a catalog
    of 10,000 entries was 45 MB, and a scan uses few of them. Behaves as the compiled pattern."""

    __slots__ = ("_compiled", "_groups", "pattern", "search")

    def __init__(self, pattern: str, groups: set[str] | None = None):
        self.pattern = pattern
        self._groups = groups  # the compiled pattern's named groups, when the loader compiled it once
        self._compiled: regex.Pattern | None = None
        self.search = self._first_search  # then the compiled pattern's own search (no call in between)

    def compiled(self) -> regex.Pattern:
        c = self._compiled
        if c is None:
            c = self._compiled = regex.compile(self.pattern)
            self.search = c.search
        return c

    def _first_search(self, *args, **kwargs):
        return self.compiled().search(*args, **kwargs)

    @property
    def group_names(self) -> set[str]:
        """The named groups, as the loader found them compiling it, else read from the pattern's text
        (without compiling it)."""
        if self._groups is not None:
            return set(self._groups)
        return set(_GROUP_NAME.findall(self.pattern))

    def __getattr__(self, name: str):  # only for names not in __slots__ (groupindex, match, ...)
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __reduce__(self):  # pickled as its text (a fleet worker may receive the catalog)
        return (LazyPattern, (self.pattern,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LazyPattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r})"


class LazyRe:
    """A regex compiled on its first use, for one that many runs never need (a log format other than
    this log's, the secret kinds a report gives no hint of, the host names only --redact-hosts looks
    for): compiling every module's regexes cost each start-up some 20 ms. `engine`: "re" (the standard
    library) or "regex". Behaves as the compiled pattern: its first call compiles it, and from then on
    `search`, `match`, `fullmatch`, `finditer`, `findall`, `sub` and `split` are the compiled
    pattern's own methods (instance attributes over the class's, no call in between); anything else
    goes through the compiled pattern. Pickled as its text, flags and engine."""

    def __init__(self, pattern: str, flags: int = 0, engine: str = "re"):
        self.pattern = pattern
        self.flags = flags
        self.engine = engine
        self._compiled = None

    def compiled(self):
        c = self._compiled
        if c is None:
            c = self._compiled = (regex if self.engine == "regex" else re).compile(self.pattern, self.flags)
            for name in _PATTERN_CALLS:
                setattr(self, name, getattr(c, name))
        return c

    # the first call of each: compile, then call the compiled pattern's method
    def search(self, *args, **kwargs):
        return self.compiled().search(*args, **kwargs)

    def match(self, *args, **kwargs):
        return self.compiled().match(*args, **kwargs)

    def fullmatch(self, *args, **kwargs):
        return self.compiled().fullmatch(*args, **kwargs)

    def finditer(self, *args, **kwargs):
        return self.compiled().finditer(*args, **kwargs)

    def findall(self, *args, **kwargs):
        return self.compiled().findall(*args, **kwargs)

    def sub(self, *args, **kwargs):
        return self.compiled().sub(*args, **kwargs)

    def split(self, *args, **kwargs):
        return self.compiled().split(*args, **kwargs)

    def __getattr__(self, name: str):  # only for names not defined here (groupindex, groups, ...)
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __reduce__(self):
        return (LazyRe, (self.pattern, self.flags, self.engine))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LazyRe) and (other.pattern, other.flags, other.engine) == (
            self.pattern,
            self.flags,
            self.engine,
        )

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"LazyRe({self.pattern!r}, {self.flags!r}, {self.engine!r})"


_PATTERN_CALLS = ("search", "match", "fullmatch", "finditer", "findall", "sub", "split")
_GROUP_NAME = LazyRe(r"(?<!\\)\(\?P?<([A-Za-z_][A-Za-z0-9_]*)>", engine="regex")


def group_names(pattern) -> set[str]:
    """Named groups of a compiled regex or a LazyPattern."""
    return pattern.group_names if isinstance(pattern, LazyPattern) else set(pattern.groupindex)


class Role(str, Enum):
    """What a finding means for the verdict."""

    CAUSE = "cause"  # can be the root cause
    SYMPTOM = "symptom"  # an echo of a failure elsewhere (watchdog on other ranks, SIGTERM, ...)
    WRAPPER = "wrapper"  # re-raises something else (RayTaskError, ChildFailedError, Hydra)
    CONTEXT = "context"  # informative only; never a failure by itself


class Severity(str, Enum):
    FATAL = "fatal"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


# The jobs a fix step can be written for (`applies_to`), told apart by decide/remedy from the environment
# evidence: verl with a vLLM or SGLang rollout, verl itself, Megatron (verl's megatron strategy),
# DeepSpeed, a plain torchrun script (no verl evidence), or any job.
JOB_KINDS = ("verl-vllm", "verl-sglang", "verl", "megatron", "deepspeed", "torchrun", "any")


@dataclass(frozen=True)
class Remediation:
    """What to do about a failure: summary, why, the fix steps (each for some jobs) and references."""

    summary: str
    why: str
    fix: tuple[str, ...]
    references: tuple[str, ...]
    # per fix step, the jobs it applies to (JOB_KINDS; () = any job): a step written as
    # `{step: ..., applies_to: [verl-vllm, verl-sglang]}` in YAML
    applies_to: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class Example:
    """An example log line (or block) of an entry or rule, with why it must not match when it must not."""

    line: str  # one log line; for a block example, the whole block
    why: str = ""
    block: bool = False  # several lines, scanned as a log (for entries that need a traceback)
    at: int = 0  # its line in the file that defines it (0: not known), where a failing example points


@dataclass(frozen=True)
class Examples:
    """An entry's or rule's examples: lines it must match, must not match, and known misses."""

    match: tuple[Example, ...]
    no_match: tuple[Example, ...]
    todo_match: tuple[Example, ...] = ()


TypeCategory = Callable[[str], "str | None"]  # an exception class name -> its category, or None


@dataclass(frozen=True)
class CategoryFrom:
    """Derive the category from a named group (e.g. a torchrun exit code, a RayTaskError class).
    `types`: the group names an exception class, and the exception-type rules of
    patterns/fallback.yaml (the one table of what a class says) decide where `map` does not."""

    group: str
    map: tuple[tuple[str, str], ...]
    default: str
    types: bool = False

    def resolve(self, value: str | None, type_category: TypeCategory | None = None) -> str:
        """The category `value` maps to; with `types`, `type_category(value)` (the exception-type
        rules of fallback.yaml, which build on this module and so are handed in) where `map` does not
        say, else the default."""
        for key, category in self.map:
            if value == key:
                return category
        if self.types and value and type_category is not None:
            category = type_category(value)
            if category is not None:
                return category
        return self.default


@dataclass(frozen=True)
class Entry:
    """A catalog entry: a known failure's wordings, its category and role, and what to do about it."""

    id: str
    title: str
    category: str
    role: Role
    severity: Severity
    priority: int
    keywords: tuple[str, ...]
    patterns: tuple[regex.Pattern, ...]
    message: str
    remediation: Remediation
    examples: Examples
    stage: str | None = None
    explains: tuple[str, ...] = ()
    category_from: CategoryFrom | None = None
    frames: tuple[
        regex.Pattern, ...
    ] = ()  # if set: fires only on an exception whose traceback has a matching frame
    source: str = ""
    line: int = 0
    builtin: bool = False  # from the built-in catalog (its regexes are checked by its tests, not at load)

    def render_message(self, groups: dict[str, str | None]) -> str:
        """Fill `{name}` placeholders from regex groups by plain substitution (never str.format)."""
        return fill_placeholders(self.message, groups)

    def frames_match(self, frame_texts: list[str], timeout: float | None = None) -> bool:
        """Does a `frames` regex match one of the frame texts? A search that runs past `timeout`
        seconds counts as no match (a catalog regex must not hang a scan)."""
        for p in self.frames:
            for t in frame_texts:
                try:
                    if p.search(t, timeout=timeout):
                        return True
                except TimeoutError:
                    continue
        return False

    def category_for(self, groups: dict[str, str | None], type_category: TypeCategory | None = None) -> str:
        """The category of a hit with these groups; `type_category`: what an exception class says
        (patterns.fallback.FallbackRules.class_category), for an entry whose `category_from` names one."""
        if self.category_from is None:
            return self.category
        return self.category_from.resolve(groups.get(self.category_from.group), type_category)


_PLACEHOLDER = regex.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def placeholders(text: str) -> list[str]:
    return _PLACEHOLDER.findall(text)


# `{? of {total}}`: a part of a message kept only when the line gave every group in it (innermost first)
_OPTIONAL = regex.compile(r"\{\?((?:[^{}]|\{[A-Za-z_][A-Za-z0-9_]*\})*)\}")


def fill_placeholders(text: str, groups: dict[str, str | None]) -> str:
    """`text` with each `{name}` filled from `groups`; an optional part `{? ...}` is left out when the
    line did not give one of its groups (`GPU{? {gpu}} ran out of memory`: `GPU ran out of memory`,
    not `GPU ? ran out`); a `{name}` outside one that the line did not give is `?`."""

    def keep(m: regex.Match) -> str:
        inner = m.group(1)
        return inner if all(groups.get(n) is not None for n in placeholders(inner)) else ""

    while True:
        resolved = _OPTIONAL.sub(keep, text)
        if resolved == text:
            break
        text = resolved

    def sub(m: regex.Match) -> str:
        value = groups.get(m.group(1))
        return value if value is not None else "?"

    return _PLACEHOLDER.sub(sub, text)


@dataclass(frozen=True)
class Catalog:
    """The entries a scan matches, built-in and from --catalog, and the sources they came from."""

    entries: tuple[Entry, ...]
    sources: tuple[str, ...] = field(default=())

    def by_id(self) -> dict[str, Entry]:
        return {e.id: e for e in self.entries}

    def get(self, entry_id: str) -> Entry | None:
        return self.by_id().get(entry_id)

    def without(self, ids: set[str] | frozenset[str]) -> Catalog:
        """The catalog minus the entries whose id is in `ids` (`scan --disable`)."""
        return Catalog(tuple(e for e in self.entries if e.id not in ids), self.sources)


# what a parsed catalog is made of (patterns.cache reads back no other class)
CATALOG_CLASSES = (Catalog, Entry, Example, Examples, Remediation, CategoryFrom, LazyPattern, Role, Severity)
