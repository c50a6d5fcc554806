"""The fallback rules (patterns/fallback.yaml): how a failure no catalog entry names still gets a
category, from its exception type, its frames, its wording, or the nearest known entry; which lines
are bare failure candidates; and the generic remediation per category.

This module validates the file's schema when it is loaded (every problem at once, with file:line,
like the catalog loader). Whether each rule's examples fire through the real normaliser and
traceback assembler is checked in `logparse.catalog_check.check_fallback_examples` (this package imports
no other), run by `verl-logscan catalog check` and the tests.
"""

from __future__ import annotations

import functools
import importlib.resources
from dataclasses import dataclass
from typing import Any

import regex

from patterns.cache import cached, source_of
from patterns.schema import REGEX_TIMEOUT_S, Example, Examples, LazyPattern, Remediation
from patterns.validation import (
    ID_RE,
    CatalogError,
    FieldBuilder,
    Problem,
    _short,
    _suggest,
)
from patterns.vocabulary import CATEGORIES, vocabulary_key

FALLBACK_FILE = "fallback.yaml"
FALLBACK_LABEL = "patterns/fallback.yaml"
TOP_FIELDS = ("phrases", "types", "frames", "bare_lines", "nearest", "remediation")
PHRASE_FIELDS = {
    "id": True,
    "category": True,
    "keywords": True,
    "patterns": True,
    "examples": True,
    "weak": False,
    "failure": False,
    "fix": False,
}
TYPE_FIELDS = {"id": True, "category": True, "type": True, "message": False, "examples": True, "weak": False}
FRAME_FIELDS = {
    "id": True,
    "category": True,
    "function": False,
    "file": False,
    "code": False,
    "examples": True,
    "weak": False,
}
BARE_FIELDS = ("keywords", "exception", "prefix", "levels", "benign", "structured", "markers", "examples")
MARKER_FIELDS = {
    "id": True,
    "pattern": True,
    "message": True,
    "category": True,
    "sections": False,
    "lines": False,
    "why": True,
}
DEFAULT_MARKER_LINES = 24  # raw lines of its stream a message marker's text may start back
MAX_MARKER_LINES = 64  # (the raw lines a scan reads back: scan.LOOKBACK_LINES)
NEAREST_FIELDS = ("scorer", "threshold", "margin", "min_tokens")
SCORERS = ("token_set_ratio", "token_sort_ratio", "ratio", "partial_ratio", "WRatio", "QRatio")
MAX_FIELD = 2000  # characters of a message or a frame field that a rule's regex sees
# a text up to this long is searched without regex's timeout, which costs about 2 us a search (every
# error line of a log dense in them goes through several); the built-in rules pass the timing probe
# on short adversarial inputs (tests/patterns/test_fallback_rules.py), as the stage markers do
RULE_TIMEOUT_FROM_CHARS = (
    512  # (catalog entries and stage markers: patterns.stages.TIMEOUT_FROM_CHARS, 2,000)
)


def search_timeout(text: str) -> float | None:
    """The timeout for a rule's search of `text`: none for a short one."""
    return REGEX_TIMEOUT_S if len(text) > RULE_TIMEOUT_FROM_CHARS else None


def _search(pattern: regex.Pattern, text: str) -> bool:
    """A bounded search: a long or hostile text cannot make a rule hang a scan."""
    text = text[:MAX_FIELD]
    try:
        return pattern.search(text, timeout=search_timeout(text)) is not None
    except TimeoutError:
        return False


@dataclass(frozen=True)
class PhraseRule:
    """A failure phrase (patterns/fallback.yaml `phrases`): its keywords and regexes name a category."""

    id: str
    category: str
    keywords: tuple[str, ...]
    patterns: tuple[regex.Pattern, ...]
    examples: Examples
    weak: bool = False
    failure: bool = False  # a line with this phrase is a failure candidate by itself
    line: int = 0
    fix: tuple[str, ...] = ()  # steps of its own, before its category's (remediation)

    def fires(self, message: str) -> bool:
        return any(k in message for k in self.keywords) and any(_search(p, message) for p in self.patterns)


@dataclass(frozen=True)
class TypeRule:
    """An exception type (and optionally its message) that names a category (`types`)."""

    id: str
    category: str
    type: regex.Pattern
    examples: Examples
    message: regex.Pattern | None = None
    weak: bool = False
    line: int = 0

    def fires_on_type(self, exc_type: str) -> bool:
        """`exc_type` qualified (`torch.OutOfMemoryError`) or not: both the whole name and its last
        dotted part are tried."""
        short = exc_type.rsplit(".", 1)[-1]
        for name in dict.fromkeys((exc_type, short)):
            try:
                if self.type.fullmatch(name[:MAX_FIELD], timeout=search_timeout(name[:MAX_FIELD])):
                    return True
            except TimeoutError:
                continue
        return False

    def fires(self, exc_type: str, message: str) -> bool:
        return self.fires_on_type(exc_type) and (self.message is None or _search(self.message, message))


@dataclass(frozen=True)
class FrameCategoryRule:
    """A frame (function, file, code) that names a category (`frames`)."""

    id: str
    category: str
    examples: Examples
    function: regex.Pattern | None = None
    file: regex.Pattern | None = None
    code: regex.Pattern | None = None
    weak: bool = False
    line: int = 0

    def fires(self, file: str, function: str, code: str | None) -> bool:
        """Every field the rule gives must match the same frame."""
        if self.function is not None and not _search(self.function, function or ""):
            return False
        if self.file is not None and not _search(self.file, file or ""):
            return False
        return self.code is None or bool(code and _search(self.code, code))


@dataclass(frozen=True)
class BareLineRules:
    """What makes a line outside a traceback a bare failure line, and what never does (`bare_lines`)."""

    keywords: tuple[str, ...]
    exception: regex.Pattern
    prefix: regex.Pattern
    levels: frozenset[str]
    benign: tuple[regex.Pattern, ...]
    examples: Examples
    structured: tuple[regex.Pattern, ...] = ()  # data lines: only a failure phrase makes them candidates
    markers: tuple[regex.Pattern, ...] = ()  # lines that show a process failed without naming an error
    # markers after which a program prints nothing of its own: the failure's text is before them
    message_markers: tuple[MessageMarker, ...] = ()

    def message_marker(self, text: str) -> MessageMarker | None:
        """The message marker (a `markers` mapping) that `text` is, or None."""
        return next((m for m in self.message_markers if _search(m.pattern, text)), None)


@dataclass(frozen=True)
class MessageMarker:
    """A failure marker whose failure is the text printed just before it (Hydra's epilogue follows
    an error's bare text): that text, not the marker, is the failure line; `category` names it when
    no phrase in it does."""

    id: str
    pattern: regex.Pattern
    category: str
    why: str
    sections: tuple[regex.Pattern, ...] = ()  # paragraphs that continue the text before them
    lines: int = DEFAULT_MARKER_LINES  # how far back (raw lines of the stream) the text may start
    line: int = 0


@dataclass(frozen=True)
class NearestConfig:
    """How a failure no rule names is compared with the catalog's examples (`nearest`)."""

    scorer: str = "token_set_ratio"
    threshold: float = 72.0
    margin: float = 3.0
    min_tokens: int = 3


@dataclass(frozen=True)
class FallbackRules:
    """patterns/fallback.yaml: the rules that name the category of a failure no entry names."""

    phrases: tuple[PhraseRule, ...]
    types: tuple[TypeRule, ...]
    frames: tuple[FrameCategoryRule, ...]
    bare: BareLineRules
    nearest: NearestConfig
    remediation: tuple[tuple[str, Remediation], ...]  # category -> what to do

    def fix_for(self, category: str) -> Remediation | None:
        return next((r for c, r in self.remediation if c == category), None)

    def phrase_fix(self, rule_id: str) -> tuple[str, ...]:
        """The steps of phrase rule `rule_id`'s own `fix` (none for another rule)."""
        return next((p.fix for p in self.phrases if p.id == rule_id), ())

    def type_category(self, exc_type: str, include_weak: bool = True) -> str | None:
        """The category an exception type alone says (rules without a message condition; the weak
        ones too unless `include_weak` is False), or None. Wrappers that carry an exception class
        (`RayTaskError(X)`, a C++ `terminate ... 'X'`) use it."""
        for weak in (False, True) if include_weak else (False,):
            for rule in self.types:
                if rule.weak == weak and rule.message is None and rule.fires_on_type(exc_type):
                    return rule.category
        return None

    def class_category(self, exc_type: str) -> str | None:
        """What a wrapper's exception class says (`RayTaskError(X)`'s X): the strong type rules
        only (a catalog entry's `category_from` with `types: true`)."""
        return self.type_category(exc_type, include_weak=False)

    def keywords(self) -> tuple[str, ...]:
        """Literals the prefilter must pass for bare failure lines to be seen: bare_lines' own and
        those of the `failure: true` phrases. (The other phrases only read lines a scan already
        looks at: an exception's message, a bare line's, the lines before them.)"""
        seen: dict[str, None] = dict.fromkeys(self.bare.keywords)
        for rule in self.phrases:
            if rule.failure:
                seen.update(dict.fromkeys(rule.keywords))
        return tuple(seen)


class _RuleBuilder(FieldBuilder):
    """One rule of fallback.yaml, validated with the catalog loader's checks (regex risk, compile,
    examples with a `why` for each no_match)."""

    noun = "rule"

    def fields(self, known: dict[str, bool]) -> None:
        for key in self.raw:
            if key not in known:
                self.fail(
                    key, f"unknown field '{key}'", _suggest(key, known) or f"known fields: {', '.join(known)}"
                )

    def head(self) -> tuple[str | None, str | None, bool]:
        rule_id = self.text("id")
        if rule_id is not None and not ID_RE.match(rule_id):
            self.fail("id", f"id '{rule_id}' is not kebab-case", "use lower-case words joined by '-'")
        category = self.text("category")
        if category is not None and (category not in CATEGORIES or category == "unknown"):
            self.fail(
                "category",
                f"'{category}' is not a category a rule can name",
                _suggest(category, CATEGORIES) or "see TAXONOMY.md for the category ids",
            )
        return rule_id, category, self.flag("weak")

    def flag(self, key: str) -> bool:
        value = self.raw.get(key, False)
        if not isinstance(value, bool):
            self.fail(key, f"'{key}' must be true or false, got {_short(value)}")
            return False
        return value

    def regex_list(self, key: str) -> tuple[regex.Pattern, ...]:
        """The optional list of regexes under `key`, each compiled and risk-checked."""
        out = []
        values = self.raw.get(key) or ()
        if not isinstance(values, list):
            self.fail(key, f"'{key}' must be a list of regexes")
            return ()
        for i, p in enumerate(values):
            if not isinstance(p, str) or not p:
                self.fail(key, f"{key} #{i + 1} must be a regex string")
                continue
            c = self.regex(key, f"{key} #{i + 1}", p, self.item_line(key, values, i))
            if c is not None:
                out.append(c)
        return tuple(out)

    def one_regex(self, key: str, required: bool) -> regex.Pattern | None:
        value = self.raw.get(key)
        if value is None:
            if required:
                self.fail(key, f"missing required field '{key}'", "a regex in single quotes")
            return None
        if not isinstance(value, str) or not value:
            self.fail(key, f"'{key}' must be a non-empty regex string, got {_short(value)}")
            return None
        return self.regex(key, key, value, self.line_of(key))

    def phrase(self) -> PhraseRule | None:
        self.fields(PHRASE_FIELDS)
        rule_id, category, weak = self.head()
        keywords = self.text_list("keywords", self.raw.get("keywords"))
        patterns = self._patterns()
        failure = self.flag("failure")
        fix = self.text_list("fix", self.raw.get("fix"), required=False)
        examples = self._examples()
        if not self.ok:
            return None
        return PhraseRule(
            rule_id, category, keywords, tuple(patterns), examples, weak, failure, self.line_of(), fix
        )

    def exception_type(self) -> TypeRule | None:
        self.fields(TYPE_FIELDS)
        rule_id, category, weak = self.head()
        type_re = self.one_regex("type", required=True)
        message = self.one_regex("message", required=False)
        examples = self._examples()
        if not self.ok:
            return None
        return TypeRule(rule_id, category, type_re, examples, message, weak, self.line_of())

    def frame(self) -> FrameCategoryRule | None:
        self.fields(FRAME_FIELDS)
        rule_id, category, weak = self.head()
        fields = {k: self.one_regex(k, required=False) for k in ("function", "file", "code")}
        if all(v is None for v in fields.values()) and self.ok:
            self.fail(None, "a frame rule needs at least one of function, file, code")
        examples = self._examples()
        if examples is not None and not all(x.block for x in (*examples.match, *examples.no_match)):
            self.fail("examples", "frame rule examples are blocks (a traceback): 'block: |' then its lines")
        if not self.ok:
            return None
        return FrameCategoryRule(rule_id, category, examples, weak=weak, line=self.line_of(), **fields)


def _rules(data: dict, key: str, label: str, problems: list[Problem], make: str, lazy: bool) -> tuple:
    raw_list = data.get(key)
    if raw_list is None:
        return ()
    if not isinstance(raw_list, list):
        problems.append(Problem(label, data.key_lines.get(key, 0), f"'{key}' must be a list of rules"))
        return ()
    out = []
    seen: dict[str, int] = {}
    for raw in raw_list:
        if not isinstance(raw, dict):
            problems.append(Problem(label, data.key_lines.get(key, 0), f"{key}: each rule is a mapping"))
            continue
        built = getattr(_RuleBuilder(raw, label, problems, lazy=lazy), make)()
        if built is None:
            continue
        if built.id in seen:
            problems.append(
                Problem(label, built.line, f"duplicate rule id '{built.id}' (also at line {seen[built.id]})")
            )
            continue
        seen[built.id] = built.line
        out.append(built)
    return tuple(out)


def _bare(data: dict, label: str, problems: list[Problem], lazy: bool) -> BareLineRules | None:
    raw = data.get("bare_lines")
    line = data.key_lines.get("bare_lines", 0)
    if not isinstance(raw, dict):
        problems.append(
            Problem(label, line, "missing 'bare_lines' (a mapping: " + ", ".join(BARE_FIELDS) + ")")
        )
        return None
    b = _RuleBuilder(raw, label, problems, lazy=lazy)
    for key in raw:
        if key not in BARE_FIELDS:
            b.fail(key, f"bare_lines: unknown field '{key}'", _suggest(key, BARE_FIELDS))
    keywords = b.text_list("keywords", raw.get("keywords"))
    exception = b.one_regex("exception", required=True)
    prefix = b.one_regex("prefix", required=True)
    levels = b.text_list("levels", raw.get("levels"))
    benign, structured = b.regex_list("benign"), b.regex_list("structured")
    markers, message_markers = _markers(b, raw.get("markers") or [], label, problems, lazy)
    examples = b._examples()
    if exception is not None and not lazy and "type" not in exception.groupindex:
        b.fail("exception", "the exception regex needs a named group 'type'")
    if not b.ok:
        return None
    return BareLineRules(
        keywords, exception, prefix, frozenset(levels), benign, examples, structured, markers, message_markers
    )


def _markers(
    b: _RuleBuilder, values, label: str, problems: list[Problem], lazy: bool
) -> tuple[tuple[regex.Pattern, ...], tuple[MessageMarker, ...]]:
    """bare_lines.markers: each a regex, or a mapping (MARKER_FIELDS) for a marker whose failure is
    the text before it (`message: before`)."""
    if not isinstance(values, list):
        b.fail("markers", "bare_lines.markers must be a list (of regexes, or mappings with a pattern)")
        return (), ()
    patterns: list[regex.Pattern] = []
    messages: list[MessageMarker] = []
    for i, value in enumerate(values):
        at = b.item_line("markers", values, i)
        if isinstance(value, str) and value:
            c = b.regex("markers", f"markers #{i + 1}", value, at)
            if c is not None:
                patterns.append(c)
            continue
        if not isinstance(value, dict):
            b.fail("markers", f"markers #{i + 1} must be a regex string or a mapping", line=at)
            continue
        m = _RuleBuilder(value, label, problems, lazy=lazy)
        m.fields(MARKER_FIELDS)
        marker_id, category, _ = m.head()
        pattern = m.one_regex("pattern", required=True)
        if value.get("message") != "before":
            m.fail("message", "'message' must be 'before' (the failure is the text printed before it)")
        why = m.text("why")
        sections = m.regex_list("sections")
        lines = value.get("lines", DEFAULT_MARKER_LINES)
        if not isinstance(lines, int) or isinstance(lines, bool) or not 1 <= lines <= MAX_MARKER_LINES:
            m.fail("lines", f"'lines' must be a whole number 1-{MAX_MARKER_LINES}, got {_short(lines)}")
        if not m.ok:
            b.ok = False
            continue
        patterns.append(pattern)
        messages.append(MessageMarker(marker_id, pattern, category, why, sections, lines, m.line_of()))
    return tuple(patterns), tuple(messages)


def _nearest(data: dict, label: str, problems: list[Problem]) -> NearestConfig:
    raw = data.get("nearest") or {}
    line = data.key_lines.get("nearest", 0)
    if not isinstance(raw, dict):
        problems.append(Problem(label, line, "'nearest' must be a mapping: " + ", ".join(NEAREST_FIELDS)))
        return NearestConfig()
    for key in raw:
        if key not in NEAREST_FIELDS:
            problems.append(
                Problem(
                    label,
                    raw.key_lines.get(key, line),
                    f"nearest: unknown field '{key}'",
                    _suggest(key, NEAREST_FIELDS),
                )
            )
    scorer = raw.get("scorer", NearestConfig.scorer)
    if scorer not in SCORERS:
        problems.append(
            Problem(label, line, f"nearest.scorer must be one of {', '.join(SCORERS)}, got {_short(scorer)}")
        )
        scorer = NearestConfig.scorer
    numbers = {}
    for key, low, high in (("threshold", 0, 100), ("margin", 0, 100), ("min_tokens", 1, 50)):
        value = raw.get(key, getattr(NearestConfig, key))
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            problems.append(
                Problem(label, line, f"nearest.{key} must be a number {low}-{high}, got {_short(value)}")
            )
            value = getattr(NearestConfig, key)
        numbers[key] = value
    return NearestConfig(
        scorer, float(numbers["threshold"]), float(numbers["margin"]), int(numbers["min_tokens"])
    )


def _remediation(data: dict, label: str, problems: list[Problem]) -> tuple[tuple[str, Remediation], ...]:
    raw = data.get("remediation") or {}
    out = []
    for category, value in raw.items():
        line = raw.key_lines.get(category, 0) if hasattr(raw, "key_lines") else 0
        if category not in CATEGORIES or category == "unknown":
            problems.append(
                Problem(
                    label, line, f"remediation: unknown category '{category}'", _suggest(category, CATEGORIES)
                )
            )
            continue
        holder = _LineDictLike({"remediation": value}, line)
        b = _RuleBuilder(holder, label, problems)
        r = b._remediation()
        if r is not None and b.ok:
            out.append((category, r))
    missing = sorted(set(CATEGORIES) - {"unknown"} - {c for c, _ in out})
    if missing and not problems:
        problems.append(
            Problem(
                label,
                data.key_lines.get("remediation", 0),
                f"remediation: no fix for {', '.join(missing)}",
                "every category needs one",
            )
        )
    return tuple(out)


class _LineDictLike(dict):
    def __init__(self, value: dict, line: int):
        super().__init__(value)
        self.line = line
        self.key_lines = {"remediation": line}


def _read_builtin() -> str:
    return importlib.resources.files("patterns").joinpath(FALLBACK_FILE).read_text(encoding="utf-8")


def load_fallback_rules(
    text: str | None = None, label: str = FALLBACK_LABEL, lazy: bool = False
) -> FallbackRules:
    """Parse and validate fallback.yaml (the built-in one when `text` is None); CatalogError lists
    every problem."""
    import yaml  # here: with the start-up cache warm, no YAML is parsed

    from patterns.yamlfile import LineLoader

    problems: list[Problem] = []
    try:
        data = yaml.load(
            _read_builtin() if text is None else text, Loader=LineLoader
        )  # safe: no tags, no code
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise CatalogError(
            [Problem(label, mark.line + 1 if mark else 0, f"invalid YAML: {getattr(exc, 'problem', exc)}")]
        ) from None
    if not isinstance(data, dict):
        raise CatalogError([Problem(label, 1, "fallback.yaml holds a mapping: " + ", ".join(TOP_FIELDS))])
    for key in data:
        if key not in TOP_FIELDS:
            problems.append(
                Problem(
                    label,
                    data.key_lines.get(key, 0),
                    f"unknown top-level field '{key}'",
                    _suggest(key, TOP_FIELDS) or f"known fields: {', '.join(TOP_FIELDS)}",
                )
            )
    phrases = _rules(data, "phrases", label, problems, "phrase", lazy)
    types = _rules(data, "types", label, problems, "exception_type", lazy)
    frames = _rules(data, "frames", label, problems, "frame", lazy)
    bare = _bare(data, label, problems, lazy)
    ids: dict[str, int] = {}
    for rule in (*phrases, *types, *frames, *(bare.message_markers if bare is not None else ())):
        if rule.id in ids:
            problems.append(
                Problem(label, rule.line, f"duplicate rule id '{rule.id}' (also at line {ids[rule.id]})")
            )
        ids[rule.id] = rule.line
    nearest = _nearest(data, label, problems)
    remediation = _remediation(data, label, problems)
    if problems:
        raise CatalogError(problems)
    return FallbackRules(phrases, types, frames, bare, nearest, remediation)


@functools.lru_cache(maxsize=1)
def fallback_rules() -> FallbackRules:
    """The built-in rules (regexes compile on first use; the tests compile, risk-check and probe them),
    parsed, or as an earlier run parsed the same file (patterns.cache)."""
    text = _read_builtin()
    classes = (
        FallbackRules,
        PhraseRule,
        TypeRule,
        FrameCategoryRule,
        BareLineRules,
        MessageMarker,
        NearestConfig,
        Examples,
        Example,
        Remediation,
        LazyPattern,
    )
    return cached(
        "fallback",
        [
            text.encode(),
            *source_of(
                "patterns.fallback",
                "patterns.validation",
                "patterns.yamlfile",
                "patterns.schema",
            ),
            *vocabulary_key(),
        ],
        lambda: load_fallback_rules(text, lazy=True),
        classes,
        lambda value: isinstance(value, FallbackRules),
    )


def rule_ids(rules: FallbackRules) -> dict[str, Any]:
    return {r.id: r for r in (*rules.phrases, *rules.types, *rules.frames)}
