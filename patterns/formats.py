"""Log formats as data (patterns/formats.yaml): launcher prefixes, what a message says of its origin,
traceback structure, torchrun's failure summary, whose code a frame is, log-folder layouts and the
NCCL watchdog's wordings. The reading code keeps its control flow and takes each regex or list from
here by id (`formats().regex("frame-line")`); patterns/wordings.py has the file's schema.

Launcher prefixes and message fields are formats in lnav's sense: each declares its regex, the
origin fields its named groups give and their kinds (`fields`), and its sample lines; one generic
reader (logparse.read.normalize) applies any of them by id, so a new prefix is a YAML edit. They are
built here into `LineFormat`s (`line_formats()`): the built-in ones, then a team's own, from the files
$VERL_LOGSCAN_FORMATS names, tried after the built-in ones.
"""

from __future__ import annotations

import functools
import importlib.resources
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex

from patterns.cache import cached, source_of
from patterns.validation import CatalogError, Problem, _short, _suggest, regex_risk, slow_probe
from patterns.wordings import FieldSpec, SectionSpec, Wording, Wordings, builtin_wordings, is_text, is_texts

FORMATS_FILE = "formats.yaml"
FORMATS_LABEL = "patterns/formats.yaml"
FRAME_KINDS = ("user", "library", "launcher")
FORMATS_ENV = "VERL_LOGSCAN_FORMATS"  # a team's own formats files, separated like PATH (os.pathsep)
MAX_FORMATS_BYTES = 1 << 20  # a formats file of one's own is a few KB
MAX_EXTRA_FORMATS = 64

# The origin fields a format can give a line, and the kinds of value each is read as:
#   int              a run of decimal digits (patterns.numbers.log_int)
#   str              the text as it is
#   count            copies folded into the line: the field is 1 + the number
#   date-time        a full date (`date`: YYYY-MM-DD) and a time of day (`clock`: HH:MM:SS); it also
#                    gives the year to the year-less stamps after it
#   month-day-time   a month, a day (`month`, `day`: numbers) and a time of day (`clock`), no year: the
#                    year of the last full date the log gave
ORIGIN_FIELDS: dict[str, tuple[str, ...]] = {
    "rank": ("int",),
    "local_rank": ("int",),
    "pid": ("int",),
    "node": ("str",),
    "actor": ("str",),
    "level": ("str",),
    "time": ("date-time", "month-day-time"),
    "repeat": ("count",),
}
TIME_PARTS = {"date-time": ("date", "clock"), "month-day-time": ("month", "day", "clock")}
FIELD_KEYS = ("group", "kind", "keep_earlier", "date", "month", "day", "clock")
# where a message field is read: searched in the line and cut off it before the prefixes are read
# (Ray's `[repeated 3x across cluster]`), or matched at the start of the bare message and left in it
MESSAGE_PLACES = ("line-end", "message-start")
# What no launcher prefix may read (each a verl message a fast path of logparse/read/progress_lines.py
# takes for the line's message without running the prefixes over it): a step line, a progress bar.
NOT_PREFIXES = ("step:1 - actor/pg_loss:0.1", "Training Progress:   2%|", "\rTraining Progress:   2%|")


def _is_mapping(value: Any) -> bool:
    return isinstance(value, dict) and bool(value)


_FIELDS = FieldSpec("a mapping of origin fields to what gives them (see the head of the file)", _is_mapping)
_CACHE_UNTIL = FieldSpec("one character", lambda v: isinstance(v, str) and len(v) == 1)
SECTIONS = {
    "prefixes": SectionSpec(("regex",), {"fields": _FIELDS, "cache_until": _CACHE_UNTIL}),
    "message_fields": SectionSpec(
        ("regex",),
        {
            "keywords": FieldSpec("a list of literals (one is in every line the regex can hit)", is_texts),
            "fields": _FIELDS,
            "at": FieldSpec(f"one of {', '.join(MESSAGE_PLACES)}", lambda v: v in MESSAGE_PLACES),
        },
    ),
    "tracebacks": SectionSpec(("regex", "literal", "literals")),
    "torchrun_summary": SectionSpec(("regex", "literal", "literals")),
    "frame_kinds": SectionSpec(
        ("regex", "literals"),
        {"kind": FieldSpec(f"one of {', '.join(FRAME_KINDS)}", lambda v: v in FRAME_KINDS, required=True)},
    ),
    "layouts": SectionSpec(("regex", "literal", "literals")),
    "collectives": SectionSpec(("regex", "literals")),
    "worker_deaths": SectionSpec(("regex",)),
    "sample_text": SectionSpec(("literals",)),
}
EXTRA_SECTIONS = {"prefixes": SECTIONS["prefixes"]}  # what a formats file of one's own holds


@dataclass(frozen=True)
class FieldRead:
    """One origin field a format's match gives: from which named groups, read as which kind."""

    field: str  # one of ORIGIN_FIELDS
    kind: str  # one of ORIGIN_FIELDS[field]
    groups: tuple[str, ...]  # the group; a time's parts in TIME_PARTS order
    keep_earlier: bool = False  # a value an earlier prefix of the line gave is kept


@dataclass(frozen=True)
class LineFormat:
    """A launcher prefix or a message field, ready for the generic reader (logparse.read.normalize)."""

    id: str
    section: str  # prefixes | message_fields
    regex: str
    fields: tuple[FieldRead, ...]
    engine: str  # "re" or "regex" (engine_of)
    # the ASCII characters a match can start with, found by trying the regex on each (a partial
    # match); a line is offered to the formats its next character allows
    starts: str
    cache_until: str | None = None  # a match ends at most one character past the first of these
    at: str = "prefix"  # prefix, or one of MESSAGE_PLACES
    keywords: tuple[str, ...] = ()  # a line-end field is searched for only in a line holding one
    label: str = FORMATS_LABEL
    line: int = 0
    # (first character, the ASCII characters a match can go on with after it), of each of `starts`:
    # worked out here, once, so that a scan tries no regex to choose among the formats
    follows: tuple[tuple[str, str], ...] = ()


# `re` matches a short prefix in about half the time `regex` takes; it is used for a regex that needs
# nothing the two engines read differently: no escape but \d and escaped punctuation (\s, \w, \b follow
# str.isspace / str.isalnum in `re`, the Unicode properties in `regex`), no possessive quantifier or
# atomic group (Python 3.10's `re` has none), no group syntax but (?: (?P< (?= (?! (?<= (?<!, no
# nested set. tests/logparse/read/test_normalize.py checks both engines read the built-in ones alike.
_REGEX_ONLY = re.compile(r"\\[A-Za-ce-z]|[*+?}]\+|\(\?(?![:=!]|<[=!]|P<)|\[\[|\[:")


def engine_of(pattern: str) -> str:
    if _REGEX_ONLY.search(pattern):
        return "regex"
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError):
        return "regex"
    return "re"


def could_start(compiled: regex.Pattern, text: str) -> bool:
    """Can a match of `compiled` start with `text` (the text cut short, a partial match)?"""
    return compiled.match(text, partial=True) is not None


def starts_of(compiled: regex.Pattern) -> str:
    return "".join(c for c in map(chr, range(128)) if could_start(compiled, c))


def follows_of(compiled: regex.Pattern, starts: str) -> tuple[tuple[str, str], ...]:
    """For each character a match can start with, the ASCII characters it can go on with."""
    return tuple(
        (c, "".join(d for d in map(chr, range(128)) if could_start(compiled, c + d))) for c in starts
    )


def read_formats_text() -> str:
    return importlib.resources.files("patterns").joinpath(FORMATS_FILE).read_text(encoding="utf-8")


def _field_read(item: Wording, name: str, spec: Any, groups: set[str], fail) -> FieldRead | None:
    """One entry of a format's `fields`, checked (fail(reason, help) for each problem)."""
    kinds = ORIGIN_FIELDS.get(name)
    if kinds is None:
        fail(
            f"'{name}' is no origin field",
            _suggest(name, tuple(ORIGIN_FIELDS)) or f"one of {', '.join(ORIGIN_FIELDS)}",
        )
        return None
    if not isinstance(spec, dict):
        fail(
            f"field '{name}' must be a mapping (group, kind), got {_short(spec)}",
            f"e.g. {name}: {{group: {name}, kind: {kinds[0]}}}",
        )
        return None
    unknown = [k for k in spec if k not in FIELD_KEYS]
    kind = spec.get("kind")
    if unknown:
        fail(
            f"field '{name}': unknown key(s) {', '.join(map(str, unknown))}", f"keys: {', '.join(FIELD_KEYS)}"
        )
    if kind not in kinds:
        fail(f"field '{name}' is read as {' or '.join(kinds)}, not {_short(kind)}", f"kind: {kinds[0]}")
        return None
    parts = TIME_PARTS.get(kind, ("group",))
    names = []
    for part in parts:
        group = spec.get(part)
        if not is_text(group) or group not in groups:
            fail(
                f"field '{name}': '{part}' names {_short(group)}, which is no named group of the regex",
                f"named groups: {', '.join(sorted(groups)) or 'none'}",
            )
            return None
        names.append(group)
    for part in set(FIELD_KEYS[3:]) - set(parts):
        if part in spec:
            fail(
                f"field '{name}': '{part}' is a part of a time only",
                f"a {kind} field has: {', '.join(parts)}",
            )
    keep = spec.get("keep_earlier", False)
    if not isinstance(keep, bool):
        fail(f"field '{name}': keep_earlier must be true or false, got {_short(keep)}")
    return FieldRead(name, kind, tuple(names), keep is True)


def _as_dict(value: Any) -> Any:
    """A mapping the wordings loader keeps as pairs, as a dict again (anything else as it is)."""
    if isinstance(value, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        return dict(value)
    return value


def _hits(compiled: regex.Pattern, item: Wording, text: str) -> bool:
    """Does the format read `text` (a match example's line): a prefix at its start; a message field
    anywhere in it (the bare message it is read at the start of is the normaliser's to find)."""
    if item.section == "message_fields":
        return compiled.search(text) is not None
    return compiled.match(text) is not None


def _regex_problems(item: Wording, compiled: regex.Pattern, user: bool, fail: Callable[..., None]) -> None:
    """What is wrong with a format's regex as a reader uses it: one of one's own is risk-checked and
    timed (it runs on every line), any must take a character and no verl message may start a match."""
    if user:
        risk = regex_risk(item.value)
        if risk is not None:
            fail(
                f"its regex is refused: {risk}", "rewrite without a quantified group that itself holds + or *"
            )
        elif slow_probe(compiled) is not None:
            fail(
                "its regex backtracks catastrophically on a short input",
                "make the alternatives of a group unable to match the same text",
            )
    if compiled.match("") is not None:
        fail("its regex can match no text at all", "a prefix takes at least one character")
    if item.field("at") != "line-end":
        for text in NOT_PREFIXES:
            if compiled.match(text) is not None:
                fail(
                    f"its regex reads the start of a verl message ({text.strip()!r})",
                    "a launcher prefix is never verl's own message",
                )
    elif not item.field("keywords"):
        fail("a line-end field needs keywords", "keywords: a literal every line it reads holds")


def _example_problems(item: Wording, compiled: regex.Pattern, fail: Callable[..., None]) -> None:
    """A format's regex must hit one of its match examples (and, with cache_until, read each as it
    says: no further than one character past the first such character)."""
    if item.match and not any(_hits(compiled, item, ex.text) for ex in item.match):
        fail(
            "its regex hits none of its match examples",
            "a match example is a real line that starts with the prefix (a line-end field: holds it); "
            "fix the regex or the example",
        )
    until = item.field("cache_until")
    for ex in item.match if until is not None else ():
        close = ex.text.find(until)
        whole = compiled.match(ex.text)
        cut = compiled.match(ex.text[: close + 2]) if close >= 0 else None
        if whole is not None and (cut is None or cut.span() != whole.span()):
            fail(
                f"cache_until {until!r}: its match of {ex.text[:60]!r} ends past the first {until!r}",
                "cache_until says a match ends at most one character past the first such character",
            )
            return


def _line_format(item: Wording, label: str, problems: list[Problem], user: bool) -> LineFormat | None:
    """The LineFormat of one prefix or message field, with every problem of it added to `problems`."""
    found: list[Problem] = []

    def fail(reason: str, help: str = "") -> None:
        found.append(Problem(label, item.line, f"format '{item.id}': {reason}", help))

    try:
        compiled = regex.compile(item.value)
    except (regex.error, OverflowError, RecursionError, MemoryError):
        return None  # (the wordings loader has said why)
    _regex_problems(item, compiled, user, fail)
    groups = set(compiled.groupindex)
    fields = []
    for name, value in item.field("fields") or ():
        read = _field_read(item, name, _as_dict(value), groups, fail)
        if read is not None:
            fields.append(read)
    if not fields:
        fail("gives no origin field", "add fields: {rank: {group: rank, kind: int}} (or node, pid, ...)")
    _example_problems(item, compiled, fail)
    problems.extend(found)
    if found:
        return None
    starts = starts_of(compiled)
    return LineFormat(
        item.id,
        item.section,
        item.value,
        tuple(fields),
        engine_of(item.value),
        starts,
        item.field("cache_until"),
        item.field("at", "prefix"),
        tuple(item.field("keywords") or ()),
        label,
        item.line,
        follows_of(compiled, starts),
    )


def line_formats_of(wordings: Wordings, user: bool = False) -> tuple[LineFormat, ...]:
    """The prefixes and message fields of a formats file (loaded with its examples) as LineFormats;
    CatalogError lists every problem (file:line, reason, help)."""
    problems: list[Problem] = []
    out = []
    for section in ("prefixes", "message_fields"):
        for item in wordings.section(section):
            built = _line_format(item, wordings.label, problems, user)
            if built is not None:
                out.append(built)
    if problems:
        raise CatalogError(problems)
    return tuple(out)


def check_formats(wordings: Wordings) -> None:
    """formats.yaml's own cross-checks (the line formats' fields, examples and regexes)."""
    line_formats_of(wordings)


@functools.lru_cache(maxsize=1)
def formats() -> Wordings:
    """The built-in formats (values only), parsed and checked, or read back from the start-up cache."""
    return builtin_wordings(
        "formats",
        read_formats_text(),
        FORMATS_LABEL,
        SECTIONS,
        source_of("patterns.formats", "patterns.wordings", "patterns.validation", "patterns.yamlfile"),
        check_formats,
    )


def load_formats(text: str | None = None, label: str = FORMATS_LABEL) -> Wordings:
    """formats.yaml (or `text`) with its examples, for the catalog check; CatalogError lists every problem."""
    from patterns.wordings import load_wordings

    wordings = load_wordings(read_formats_text() if text is None else text, label, SECTIONS)
    check_formats(wordings)
    return wordings


@functools.lru_cache(maxsize=1)
def builtin_line_formats() -> tuple[LineFormat, ...]:
    """The built-in prefixes and message fields, or what an earlier run built of them (patterns.cache)."""
    text = read_formats_text()

    def build() -> tuple[LineFormat, ...]:
        from patterns.wordings import load_wordings

        return line_formats_of(load_wordings(text, FORMATS_LABEL, SECTIONS))

    return cached(
        "line-formats",
        [text.encode(), *source_of("patterns.formats", "patterns.wordings", "patterns.validation")],
        build,
        (LineFormat, FieldRead),
        lambda v: isinstance(v, tuple) and all(isinstance(f, LineFormat) for f in v),
    )


# -- a team's own formats ----------------------------------------------------------------------------------
def load_extra_formats(path: str | Path) -> Wordings:
    """A formats file of one's own (a `prefixes:` list, as in formats.yaml) with its examples; CatalogError
    lists every problem. Its prefixes may not take a built-in id."""
    from patterns.wordings import load_wordings
    from patterns.yamlfile import AliasBomb, LineLoader, check_expansion

    label = str(path)
    try:
        raw = Path(path).read_bytes()[: MAX_FORMATS_BYTES + 1]
    except OSError as exc:
        raise CatalogError(
            [Problem(label, 0, f"cannot read the formats file: {exc.strerror or exc}")]
        ) from None
    if len(raw) > MAX_FORMATS_BYTES:
        raise CatalogError([Problem(label, 0, f"a formats file is at most {MAX_FORMATS_BYTES >> 10} KB")])
    text = raw.decode("utf-8", errors="replace")
    import yaml

    try:
        node = yaml.compose(text, Loader=LineLoader)
        if node is not None:
            check_expansion(node)
    except AliasBomb as exc:
        raise CatalogError([Problem(label, exc.line, exc.reason)]) from None
    except (yaml.YAMLError, RecursionError):
        pass  # (load_wordings says where the YAML is invalid)
    wordings = load_wordings(text, label, EXTRA_SECTIONS)
    problems = []
    builtin = {f.id for f in builtin_line_formats()}
    for item in wordings.items:
        if item.id in builtin:
            problems.append(
                Problem(
                    label,
                    item.line,
                    f"format '{item.id}': a built-in format has this id",
                    "give yours an id of its own",
                )
            )
    if len(wordings.items) > MAX_EXTRA_FORMATS:
        problems.append(Problem(label, 0, f"at most {MAX_EXTRA_FORMATS} formats in a file"))
    if problems:
        raise CatalogError(problems)
    return wordings


def format_files_from_env(value: str | None) -> list[str]:
    """The files $VERL_LOGSCAN_FORMATS names (separated as PATH is), empty parts left out."""
    return [part for part in (value or "").split(os.pathsep) if part.strip()]


_active: dict[str, tuple[LineFormat, ...]] = {}  # the env's value -> the formats


def _extra(files: Sequence[str]) -> tuple[LineFormat, ...]:
    problems: list[Problem] = []
    out: list[LineFormat] = []
    seen: set[str] = set()
    for path in files:
        try:
            for fmt in line_formats_of(load_extra_formats(path), user=True):
                if fmt.id in seen:
                    problems.append(
                        Problem(fmt.label, fmt.line, f"format '{fmt.id}': another formats file has this id")
                    )
                seen.add(fmt.id)
                out.append(fmt)
        except CatalogError as exc:
            problems.extend(exc.problems)
    if problems:
        raise CatalogError(problems)
    return tuple(out)


def line_formats() -> tuple[LineFormat, ...]:
    """The formats a line's prefixes are read with: the built-in ones, then those of the files
    $VERL_LOGSCAN_FORMATS names (an environment variable, so that the reader processes a scan starts
    read with them too). CatalogError lists every problem of a file of one's own. (The same tuple
    while the variable does not change.)"""
    key = os.environ.get(FORMATS_ENV) or ""
    found = _active.get(key)
    if found is None:
        found = builtin_line_formats()
        files = format_files_from_env(key)
        if files:
            found = found + _extra(files)
        _active.clear()
        _active[key] = found
    return found


def extra_format_files() -> list[Callable[[], Wordings]]:
    """The loaders (with examples, checked as line formats) of the files $VERL_LOGSCAN_FORMATS names,
    for `catalog check`."""

    def loader(path: str) -> Callable[[], Wordings]:
        def load() -> Wordings:
            wordings = load_extra_formats(path)
            line_formats_of(wordings, user=True)
            return wordings

        return load

    return [loader(p) for p in format_files_from_env(os.environ.get(FORMATS_ENV))]
