"""The table of secret kinds (patterns/secrets.yaml): what a report masks, as data.

Each kind has regexes whose group `v` is the value to mask, optional hints (literals that gate the
regexes), token prefixes (for a line cut inside a token), an optional multi-line block (PEM keys) and
examples. The loader checks the schema and the examples against the regexes (every `match` example's
secret inside some pattern's `v`, no `no_match` example hit, each match example holding a hint), and
reports every problem at once with file:line, like the catalog loader. How the kinds apply together
(in file order, on every string of a report) is logparse/redact.py's business, tested there.

The built-in table is parsed and checked once (then kept by patterns.cache), and its regexes compile
on first use: a report rarely holds text that a kind's hints let through, and parsing, checking and
compiling the whole table cost every scan about 12 ms.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import re
from dataclasses import dataclass
from typing import Any

from patterns.cache import cached, source_of
from patterns.schema import LazyRe
from patterns.validation import ID_RE, CatalogError, Problem, regex_risk

SECRETS_FILE = "secrets.yaml"
SECRETS_LABEL = "patterns/secrets.yaml"
FIELDS = {
    "id": True,
    "title": True,
    "patterns": True,
    "hints": False,
    "prefixes": False,
    "block": False,
    "wraps": False,
    "examples": True,
}
MAX_SECRET_PATTERN = 2000  # characters of one regex
# The launcher prefixes of a line (`(WorkerDict pid=1, ip=...)`, `[rank3]:`): a line a token wraps onto
# goes on after them (logparse.redact keeps them on a masked line too)
LINE_PREFIX_PATTERN = r"^\s*(?:\([^()\n]{0,200}\)\s*|\[[^\[\]\n]{0,60}\]:?\s*){0,3}"
_LINE_PREFIX = re.compile(LINE_PREFIX_PATTERN)
# A token complete at the end of its line is continued by the next line only by this many token
# characters or more (a JWT's signature wrapped; not a word such as `File` that starts the next line)
MIN_CONTINUATION = 16


@dataclass(frozen=True)
class SecretExample:
    """An example of a secret kind: a line, and the part to mask or why it stays."""

    line: str
    secret: str = ""  # match: the distinctive part that must be masked
    why: str = ""  # no_match: why the line must stay as it is


@dataclass(frozen=True)
class SecretKind:
    """A kind of secret (patterns/secrets.yaml): its regexes, the hints that gate them, its examples."""

    id: str
    title: str
    patterns: tuple[re.Pattern[str] | LazyRe, ...]
    hints: tuple[str, ...]  # lower-case literals; empty: the patterns run on every text
    prefixes: tuple[str, ...]  # literal token starts, for a text cut inside a token
    block: (
        tuple[re.Pattern[str] | LazyRe, re.Pattern[str] | LazyRe] | None
    )  # (begin, end) of a secret spanning lines
    match: tuple[SecretExample, ...]
    no_match: tuple[SecretExample, ...]
    line: int = 0
    wraps: bool = False  # a token a log wrapped onto the next line is found across the line end

    def wrapped(self, head: str, tail: str) -> tuple[int, int, int] | None:
        """A token of this kind that the line `head` ends and the next line `tail` continues (after
        its launcher prefix and indent): (where it starts in `head`, where the tail's text starts,
        where the token ends in `tail`); None when there is none."""
        body = _LINE_PREFIX.match(tail).end()
        joined = head + tail[body:]
        cut = len(head)
        for pattern in self.patterns:
            for m in pattern.finditer(joined):
                start, end = m.span("v")
                if start < cut < end and (end - cut >= MIN_CONTINUATION or not self._ends(head)):
                    return start, body, body + end - cut
        return None

    def _ends(self, text: str) -> bool:
        """Does a token of this kind end where `text` ends (complete as it is)?"""
        return any(m.end("v") == len(text) for p in self.patterns for m in p.finditer(text))

    def hinted(self, lowered: str) -> bool:
        """May this kind occur in a text (given lower-cased)?"""
        return not self.hints or any(h in lowered for h in self.hints)

    def values(self, text: str) -> list[tuple[int, int]]:
        """The (start, end) spans of the values this kind's patterns find in `text` (unordered,
        possibly overlapping across patterns); hints are not consulted."""
        spans = []
        for pattern in self.patterns:
            for m in pattern.finditer(text):
                if m.end("v") > m.start("v"):
                    spans.append(m.span("v"))
        return spans


class _Builder:
    def __init__(self, raw: Any, label: str, problems: list[Problem]):
        self.raw = raw
        self.label = label
        self.problems = problems
        self.ok = True

    def line_of(self, key: str | None = None) -> int:
        lines = getattr(self.raw, "key_lines", {})
        return lines.get(key, getattr(self.raw, "line", 0)) if key else getattr(self.raw, "line", 0)

    def fail(self, key: str | None, reason: str, help: str = "") -> None:
        ident = (
            self.raw.get("id") if isinstance(self.raw, dict) and isinstance(self.raw.get("id"), str) else None
        )
        prefix = f"secret kind '{ident}': " if ident else "secret kind: "
        self.problems.append(Problem(self.label, self.line_of(key), prefix + reason, help))
        self.ok = False

    def strings(self, key: str, required: bool) -> tuple[str, ...]:
        value = self.raw.get(key)
        if value is None:
            if required:
                self.fail(key, f"missing required field '{key}'", f"add '{key}:' with a list of strings")
            return ()
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            self.fail(key, f"'{key}' must be a non-empty list of strings")
            return ()
        return tuple(value)

    def regex(self, key: str, text: str, needs_v: bool) -> re.Pattern[str] | None:
        if len(text) > MAX_SECRET_PATTERN:
            self.fail(key, f"a pattern of {len(text)} characters (limit {MAX_SECRET_PATTERN})")
            return None
        risk = regex_risk(text)
        if risk:
            self.fail(key, f"pattern {text!r}: {risk}", "bound the repetition or drop the nesting")
            return None
        try:
            compiled = re.compile(text)
        except re.error as exc:
            self.fail(key, f"pattern {text!r} does not compile: {exc}")
            return None
        if needs_v and "v" not in compiled.groupindex:
            self.fail(key, f"pattern {text!r} has no group (?P<v>...) for the value to mask")
            return None
        return compiled

    def examples(self) -> tuple[tuple[SecretExample, ...], tuple[SecretExample, ...]]:
        raw = self.raw.get("examples")
        if not isinstance(raw, dict) or not raw.get("match") or not raw.get("no_match"):
            self.fail(
                "examples",
                "'examples' needs 'match' and 'no_match' lists",
                "match: [{line, secret}], no_match: [{line, why}]",
            )
            return (), ()
        out: dict[str, list[SecretExample]] = {"match": [], "no_match": []}
        for side, need in (("match", "secret"), ("no_match", "why")):
            items = raw.get(side)
            if not isinstance(items, list):
                self.fail("examples", f"'{side}' must be a list")
                continue
            for item in items:
                if (
                    not isinstance(item, dict)
                    or not isinstance(item.get("line"), str)
                    or not isinstance(item.get(need), str)
                    or not item.get(need)
                    or set(item) - {"line", need}
                ):
                    self.fail("examples", f"each '{side}' example is {{line, {need}}}, got {item!r}")
                    continue
                out[side].append(SecretExample(item["line"], **{need: item[need]}))
        return tuple(out["match"]), tuple(out["no_match"])

    def build(self) -> SecretKind | None:
        if not isinstance(self.raw, dict):
            self.fail(None, "each secret kind is a mapping")
            return None
        for key in self.raw:
            if key not in FIELDS:
                self.fail(key, f"unknown field '{key}'", f"fields: {', '.join(FIELDS)}")
        ident = self.raw.get("id")
        if not isinstance(ident, str) or not ID_RE.fullmatch(ident):
            self.fail("id", f"'id' must be kebab-case, got {ident!r}")
        title = self.raw.get("title")
        if not isinstance(title, str) or not title.strip():
            self.fail("title", "missing 'title'")
        patterns = tuple(
            p for p in (self.regex("patterns", t, True) for t in self.strings("patterns", True)) if p
        )
        hints = self.strings("hints", False)
        if any(h != h.lower() for h in hints):
            self.fail("hints", "hints are matched in lower-cased text: write them in lower case")
        prefixes = self.strings("prefixes", False)
        block = self._block()
        wraps = self.raw.get("wraps", False)
        if not isinstance(wraps, bool):
            self.fail("wraps", "'wraps' is true or false")
        match, no_match = self.examples()
        if not self.ok:
            return None
        kind = SecretKind(
            ident, title, patterns, hints, prefixes, block, match, no_match, self.line_of(), wraps
        )
        self._check_examples(kind, match, no_match)
        return kind if self.ok else None

    def _block(self) -> tuple | None:
        """`block: {begin, end}`: a secret printed over several lines between two regexes."""
        raw_block = self.raw.get("block")
        if raw_block is None:
            return None
        if not isinstance(raw_block, dict) or set(raw_block) != {"begin", "end"}:
            self.fail("block", "'block' is {begin, end}: two regexes")
            return None
        begin = self.regex("block", str(raw_block["begin"]), False)
        end = self.regex("block", str(raw_block["end"]), False)
        return (begin, end) if begin and end else None

    def _check_examples(self, kind: SecretKind, match, no_match) -> None:
        """Every match example masked where its secret is (and hinted, so its patterns run), every
        look-alike left alone."""
        for ex in match:
            if ex.secret not in ex.line:
                self.fail("examples", f"the secret {ex.secret!r} is not in its line {ex.line!r}")
                continue
            if "\n" in ex.line:  # a token wrapped onto the next line
                self._check_wrapped(kind, ex)
                continue
            at = ex.line.index(ex.secret)
            if not any(s <= at and at + len(ex.secret) <= e for s, e in kind.values(ex.line)):
                self.fail("examples", f"no pattern masks {ex.secret!r} in {ex.line!r}")
            if not kind.hinted(ex.line.lower()):
                self.fail("hints", f"no hint occurs in {ex.line!r}, so the patterns would not run on it")
        for ex in no_match:
            if kind.values(ex.line):
                self.fail("examples", f"a no_match line is masked: {ex.line!r} ({ex.why})")

    def _check_wrapped(self, kind: SecretKind, ex: SecretExample) -> None:
        """A match example of two lines: the token the first ends and the second continues covers the
        secret (in either line)."""
        head, tail = ex.line.split("\n", 1)
        span = kind.wrapped(head, tail) if kind.wraps else None
        if span is None:
            self.fail("examples", f"no token of a kind with 'wraps: true' spans the lines of {ex.line!r}")
            return
        start, body, end = span
        if ex.secret not in head[start:] and ex.secret not in tail[body:end]:
            self.fail("examples", f"the wrapped token masks no {ex.secret!r} in {ex.line!r}")


def parse_secret_kinds(text: str, label: str = SECRETS_LABEL) -> tuple[SecretKind, ...]:
    """The kinds of a secrets table (YAML text), in order; CatalogError with every problem."""
    import yaml  # here: with the start-up cache warm, no YAML is parsed

    from patterns.yamlfile import LineLoader

    problems: list[Problem] = []
    try:
        data = yaml.load(text, Loader=LineLoader)  # a SafeLoader subclass: no tags, no code
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise CatalogError(
            [
                Problem(
                    label,
                    mark.line + 1 if mark else 0,
                    f"invalid YAML: {getattr(exc, 'problem', exc)}",
                    "regexes belong in single-quoted scalars",
                )
            ]
        ) from None
    if not isinstance(data, list) or not data:
        raise CatalogError([Problem(label, 1, "the secrets table is a non-empty list of kinds")])
    kinds: list[SecretKind] = []
    seen: dict[str, int] = {}
    for raw in data:
        kind = _Builder(raw, label, problems).build()
        if kind is None:
            continue
        if kind.id in seen:
            problems.append(
                Problem(
                    label,
                    kind.line,
                    f"secret kind '{kind.id}' is defined twice (first at line {seen[kind.id]})",
                )
            )
            continue
        seen[kind.id] = kind.line
        kinds.append(kind)
    if problems:
        raise CatalogError(problems)
    return tuple(kinds)


def _lazy(kind: SecretKind) -> SecretKind:
    """`kind` with its (checked) regexes as LazyRe."""
    block = (LazyRe(kind.block[0].pattern), LazyRe(kind.block[1].pattern)) if kind.block else None
    return dataclasses.replace(kind, patterns=tuple(LazyRe(p.pattern) for p in kind.patterns), block=block)


def _lazy_shape(value: Any) -> bool:
    """Is a table read back from the cache what _lazy makes (stdlib regexes given as text, no flags)?"""
    return (
        isinstance(value, tuple)
        and bool(value)
        and all(
            isinstance(k, SecretKind)
            and all(
                isinstance(p, LazyRe) and isinstance(p.pattern, str) and p.flags == 0 and p.engine == "re"
                for p in (*k.patterns, *(k.block or ()))
            )
            for k in value
        )
    )


@functools.lru_cache(maxsize=1)
def secret_kinds() -> tuple[SecretKind, ...]:
    """The built-in table, loaded once (or as an earlier run loaded the same file: patterns.cache);
    its regexes compile on first use."""
    text = importlib.resources.files("patterns").joinpath(SECRETS_FILE).read_text(encoding="utf-8")
    return cached(
        "secrets",
        [
            text.encode(),
            *source_of("patterns.secrets", "patterns.validation", "patterns.yamlfile", "patterns.schema"),
        ],
        lambda: tuple(_lazy(k) for k in parse_secret_kinds(text)),
        (SecretKind, SecretExample, LazyRe),
        _lazy_shape,
    )
