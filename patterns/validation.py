"""The building blocks every loader of patterns/ shares: a problem with its file and line, the error
that carries them all, bounded reprs and suggestions for messages, the regex risk check and timing
probe, and the builder of one raw YAML mapping (text, lists, regexes, remediation, examples), which the
catalog, fallback-rule and wording loaders extend.

Imports nothing of patterns but its schema: every other module of the package builds on this one, so
imports go one way.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass, replace
from typing import Any

import regex
from rapidfuzz import process as fuzz_process

from patterns.numbers import log_int
from patterns.schema import JOB_KINDS, Example, Examples, LazyPattern, LazyRe, Remediation

REMEDIATION_FIELDS = {"summary": True, "why": True, "fix": True, "references": False}
EXAMPLE_FIELDS = {"match": True, "no_match": True, "todo_match": False}
ID_RE = LazyRe(r"^[a-z0-9]+(?:-[a-z0-9]+)*$", engine="regex")
MAX_PATTERN_LENGTH = 2000
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


def _class_end(pattern: str, i: int) -> int:
    """Where the character class that opens at `i` ends (past its `]`): ( + * are literal inside it."""
    n = len(pattern)
    j = i + 1
    if j < n and pattern[j] == "^":
        j += 1
    if j < n and pattern[j] == "]":
        j += 1
    while j < n and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1


def _quantifier(pattern: str, i: int) -> tuple[int, bool, int | None]:
    """The quantifier at `i`, if any: (where it ends, whether it is unbounded, its count when it is a
    bounded `{m,n}`), a lazy or possessive marker after it included."""
    n = len(pattern)
    unbounded, count = False, None
    if i < n and pattern[i] in "*+":
        unbounded = True
        i += 1
    elif i < n and pattern[i] == "?":
        i += 1
    elif i < n and pattern[i] == "{":
        m = _COUNT_RE.match(pattern, i)
        if m and (m.group(1) or m.group(3)):
            low = log_int(m.group(1)) if m.group(1) else 0
            if m.group(2) and not m.group(3):
                unbounded = True
            else:
                count = max(low, log_int(m.group(3))) if m.group(3) else low
            i = m.end()
    if i < n and pattern[i] in "?+":  # a lazy or possessive marker
        i += 1
    return i, unbounded, count


def _count_risk(count: int, product: int) -> tuple[int, str | None]:
    """The repeat product with a counted repeat of `count` applied, and why it is refused, if it is."""
    if count >= 1000:
        return product, f"a repetition count of {count} (limit 999)"
    product *= max(count, 1)
    if product > MAX_REPEAT_PRODUCT:
        return product, f"nested repetition counts multiply to {product} (limit {MAX_REPEAT_PRODUCT})"
    return product, None


NESTED_UNBOUNDED = (
    "it nests unbounded quantifiers (a group quantified with + or * whose body holds + or *, "
    "like (a+)+), which can backtrack catastrophically"
)


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
        if group and stack:
            unbounded, product = stack.pop()
        if c == "[":
            i = _class_end(pattern, i)
        else:
            i += 2 if c == "\\" else 1
        i, quantified_unbounded, count = _quantifier(pattern, i)
        if quantified_unbounded and unbounded and group:
            return NESTED_UNBOUNDED
        if count is not None:
            product, risk = _count_risk(count, product)
            if risk is not None:
                return risk
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
    """A problem in a knowledge file: where (file, line), what is wrong, and how to fix it."""

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


class FieldBuilder:
    """Validates one raw mapping field by field; collects problems instead of stopping at the first.
    `noun` names what the mapping is in a message (an entry, a rule, a wording)."""

    noun = "entry"

    def __init__(self, raw: Any, file: str, problems: list[Problem], probe: bool = False, lazy: bool = False):
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
        prefix = f"{self.noun} '{ident}': " if ident else f"{self.noun}: "
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
        fix, applies_to = self.fix_steps(value.get("fix"), lines.get("fix"))
        refs = self.text_list("remediation", value.get("references", []), required=False)
        return Remediation(
            summary.strip() if isinstance(summary, str) else "",
            why.strip() if isinstance(why, str) else "",
            fix,
            refs,
            applies_to if any(applies_to) else (),
        )

    def fix_steps(self, value: Any, line: int | None) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
        """remediation.fix: strings (any job), or `{step: text, applies_to: [kind, ...]}` mappings."""
        if not isinstance(value, list) or not value:
            self.fail(
                "remediation", f"'fix' must be a non-empty list of steps, got {_short(value)}", line=line
            )
            return (), ()
        steps, kinds = [], []
        for item in value:
            if isinstance(item, dict) and set(item) <= {"step", "applies_to"} and "step" in item:
                text, raw = item.get("step"), item.get("applies_to") or []
            else:
                text, raw = item, []
            bad = [k for k in raw if k not in JOB_KINDS] if isinstance(raw, list) else [raw]
            if not isinstance(text, str) or not text or bad:
                self.fail(
                    "remediation",
                    f"a fix step is a string or {{step: text, applies_to: [...]}}, got {_short(item)}",
                    f"applies_to names jobs among: {', '.join(JOB_KINDS)}",
                    line=line,
                )
                continue
            steps.append(text)
            kinds.append(tuple(raw))
        return tuple(steps), tuple(kinds)

    def _examples(self) -> Examples | None:
        value = self.raw.get("examples")
        if not isinstance(value, dict):
            self.fail("examples", "missing or invalid 'examples'", "a mapping with match and no_match lists")
            return None
        for key in value:
            if key not in EXAMPLE_FIELDS:
                self.fail("examples", f"unknown examples field '{key}'", _suggest(key, EXAMPLE_FIELDS))

        def examples(key: str, need_why: bool) -> tuple[Example, ...]:
            raw_list = value.get(key)
            if raw_list is None:
                if EXAMPLE_FIELDS[key]:
                    self.fail("examples", f"examples.{key} is required and must not be empty")
                return ()
            if not isinstance(raw_list, list) or (EXAMPLE_FIELDS[key] and not raw_list):
                self.fail("examples", f"examples.{key} must be a non-empty list")
                return ()
            items = (self._example(key, item, need_why) for item in raw_list)
            at = [self.item_line(key, raw_list, i) or 0 for i in range(len(raw_list))]
            return tuple(replace(x, at=n) for x, n in zip(items, at, strict=True) if x is not None)

        return Examples(examples("match", False), examples("no_match", True), examples("todo_match", False))

    def _example(self, key: str, item: object, need_why: bool) -> Example | None:
        """One item of examples.`key`: a line, or a {line, why} or {block, why} mapping (`need_why`:
        the why is required); None (a problem noted) when it is neither."""
        if isinstance(item, str):
            if need_why:
                self.fail("examples", f"examples.{key} items need 'line' and 'why' (why it must not match)")
            return Example(item)
        if isinstance(item, dict) and (
            isinstance(item.get("line"), str) or isinstance(item.get("block"), str)
        ):
            text = item.get("line") if isinstance(item.get("line"), str) else item["block"]
            why = item.get("why", "")
            if need_why and not (isinstance(why, str) and why.strip()):
                self.fail("examples", f"examples.{key} item lacks 'why': {text[:60]!r}")
            return Example(text, why if isinstance(why, str) else "", block="block" in item)
        self.fail(
            "examples", f"examples.{key} items must be strings, {{line, why}} or {{block, why}} mappings"
        )
        return None
