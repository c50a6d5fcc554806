"""What a hang looks like, as data (patterns/stalls.yaml): stack-dump wordings, signs that progress
stopped, interrupt wordings, what a stack waits in, and the likely causes of a stall with their fixes.
Every wording's examples are checked when the file is read: a regex that misses a `match` example or
hits a `no_match` one is refused, with the file and the line."""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from patterns.cache import cached, source_of
from patterns.schema import LazyRe
from patterns.validation import CatalogError, Problem
from patterns.vocabulary import CATEGORIES, STAGES

STALLS_FILE = "stalls.yaml"
STALLS_LABEL = "patterns/stalls.yaml"
TOP_FIELDS = (
    "dumps",
    "signs",
    "interrupts",
    "interrupt_exceptions",
    "exception_signals",
    "outside_signals",
    "signal_names",
    "waits",
    "idle_threads",
    "idle_functions",
    "causes",
    "silence_steps",
    "min_silence_s",
    "follow_steps",
    "quiet_first_s",
)
DUMP_KINDS = ("timeout", "thread", "frame", "process", "crash", "rank-pid")
WHEN_FIELDS = ("odd", "all", "any_wait", "sign")


@dataclass(frozen=True)
class Wording:
    """A wording of patterns/stalls.yaml: a stack dump's line, a sign of a hang or an interrupt."""

    id: str
    regex: re.Pattern | LazyRe  # (the built-in rules': compiled on first use)
    keywords: tuple[str, ...] = ()
    kind: str = ""  # dumps: timeout | thread | frame | process | crash | rank-pid
    tool: str = ""  # dumps: faulthandler | py-spy
    title: str = ""  # signs
    wait: str | None = None  # signs: the wait kind the sign stands for (a cause's `any_wait`)
    repeats: int = 1  # signs: how often it must be seen
    min_after: float | None = None  # signs: a line counts once its `after` says this many seconds
    before_training: bool = False  # signs: counts before training began too (a bring-up wait)
    catalog: tuple[str, ...] = ()  # signs: catalog entries that name the same line (a wait, no failure)
    signal: str = ""  # interrupts: the signal a wording without a `signal` group stands for


@dataclass(frozen=True)
class WaitRule:
    """What a stack waits in, from its innermost frames or its process (`waits`)."""

    kind: str
    title: str
    functions: frozenset[str] = frozenset()
    files: tuple[str, ...] = ()
    anywhere: bool = False
    depth: int = 3
    process: tuple[str, ...] = ()
    others: bool = False  # waiting here is waiting for another process


@dataclass(frozen=True)
class CauseRule:
    """A likely cause of a stall, the conditions it holds under, and its fix (`causes`)."""

    id: str
    title: str
    summary: str
    fix: tuple[str, ...]
    when: tuple[tuple[str, str], ...]  # (condition, value)
    cite: tuple[str, ...] = ()
    # a hang of this cause is a failure of this category, at this stage (a wait for resources no node
    # has is `ray-error`: TAXONOMY), not a stall
    category: str | None = None
    stage: str | None = None
    # steps shown only when some process was not dumped (asking to dump "the ranks not shown here"
    # is wrong when every rank's stack is in the log)
    fix_if_missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class StallRules:
    """patterns/stalls.yaml: what a hang looks like and what likely caused it."""

    dumps: tuple[Wording, ...]
    signs: tuple[Wording, ...]
    interrupts: tuple[Wording, ...]
    interrupt_exceptions: frozenset[str]
    signal_names: tuple[tuple[int, str], ...]
    waits: tuple[WaitRule, ...]
    idle_threads: tuple[str, ...]
    causes: tuple[CauseRule, ...]
    idle_functions: frozenset[str] = frozenset()
    exception_signals: tuple[tuple[str, str], ...] = ()
    outside_signals: frozenset[str] = frozenset()
    silence_steps: float = 10.0
    min_silence_s: float = 300.0
    follow_steps: float = 5.0
    quiet_first_s: float = 30.0

    def dump(self, kind: str) -> tuple[Wording, ...]:
        return tuple(w for w in self.dumps if w.kind == kind)

    def wait_of(self, frames: Sequence[tuple[str, str]], process: str | None = None) -> WaitRule | None:
        """The first wait rule that a stack (`(function, file)` pairs, innermost first) is in."""
        for rule in self.waits:
            if rule.process and process and any(p in process for p in rule.process):
                return rule
            if not rule.functions:
                continue
            for function, file in frames if rule.anywhere else frames[: rule.depth]:
                name = function.rsplit(".", 1)[-1]
                if name in rule.functions and (not rule.files or any(f in file for f in rule.files)):
                    return rule
        return None

    def signal_name(self, number: int) -> str:
        return dict(self.signal_names).get(number, f"signal {number}")

    def signal_of(self, text: str | None, fixed: str = "") -> str:
        """The signal an interrupt wording names: its `signal` group (a number or a name), else the
        wording's own `signal`."""
        if not text:
            return fixed or "a signal"
        return self.signal_name(int(text)) if text.isdecimal() and len(text) < 4 else text

    def exception_signal(self, exc_type: str) -> str:
        """The signal an interrupt exception with no number in its message stands for."""
        return dict(self.exception_signals).get(exc_type, "a signal")

    @property
    def keywords(self) -> tuple[str, ...]:
        """The literals that make a line worth a look to the stall observer (the prefilter's)."""
        words: list[str] = []
        for w in (*self.dumps, *self.signs, *self.interrupts):
            words.extend(k for k in w.keywords if k not in words)
        return tuple(words)


def _read_builtin() -> str:
    return importlib.resources.files("patterns").joinpath(STALLS_FILE).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def stall_rules() -> StallRules:
    """The built-in rules: stalls.yaml parsed and checked once (each wording against its examples, each
    cause's citations against environment.yaml's tracked keys), then read back from the start-up cache
    (patterns.cache) with their regexes as text, compiled on first use: rebuilding and checking them
    at every start took 2.5 ms, and most scans use none of them."""
    from patterns.environment import tracked_config_keys

    text = _read_builtin()
    return cached(
        "stalls",
        [
            text.encode(),
            "\n".join(sorted(tracked_config_keys())).encode(),
            *source_of("patterns.stalls", "patterns.yamlfile", "patterns.validation", "patterns.schema"),
        ],
        lambda: _lazy(load_stall_rules(text, STALLS_LABEL)),
        (StallRules, Wording, WaitRule, CauseRule, LazyRe),
        _lazy_shape,
    )


def _lazy(rules: StallRules) -> StallRules:
    """`rules` with the (checked) regexes of their wordings as LazyRe."""

    def lazy(wordings: tuple[Wording, ...]) -> tuple[Wording, ...]:
        return tuple(dataclasses.replace(w, regex=LazyRe(w.regex.pattern)) for w in wordings)

    return dataclasses.replace(
        rules, dumps=lazy(rules.dumps), signs=lazy(rules.signs), interrupts=lazy(rules.interrupts)
    )


def _lazy_shape(value: Any) -> bool:
    """Are rules read back from the cache what _lazy makes (each wording's regex a LazyRe of text)?"""
    return isinstance(value, StallRules) and all(
        isinstance(w, Wording)
        and isinstance(w.regex, LazyRe)
        and isinstance(w.regex.pattern, str)
        and w.regex.flags == 0
        for w in (*value.dumps, *value.signs, *value.interrupts)
    )


def _examples(item: dict, regex: re.Pattern, label: str, line: int, problems: list[Problem]) -> None:
    examples = item.get("examples") or {}
    matches = list(examples.get("match") or ())
    if not matches:
        problems.append(Problem(label, line, f"{item.get('id')}: no `match` example"))
    for ex in matches:
        text = ex if isinstance(ex, str) else ex.get("line", "")
        if not regex.search(text):
            problems.append(Problem(label, line, f"{item.get('id')}: the regex misses its example {text!r}"))
    for ex in examples.get("no_match") or ():
        text = ex.get("line", "") if isinstance(ex, dict) else str(ex)
        if not isinstance(ex, dict) or not ex.get("why"):
            problems.append(Problem(label, line, f"{item.get('id')}: a no_match example without `why`"))
        if regex.search(text):
            problems.append(Problem(label, line, f"{item.get('id')}: the regex hits its no_match {text!r}"))


def _wordings(items: list, label: str, problems: list[Problem], section: str) -> tuple[Wording, ...]:
    out = []
    for i, item in enumerate(items or ()):
        at = (getattr(items, "item_lines", None) or [0] * (i + 1))[i] if items else 0
        try:
            regex = re.compile(item["regex"])
        except (KeyError, re.error, TypeError) as exc:
            problems.append(Problem(label, at, f"{section}: {item.get('id')}: no valid regex ({exc})"))
            continue
        if section == "dumps" and item.get("kind") not in DUMP_KINDS:
            problems.append(Problem(label, at, f"dumps: {item.get('id')}: kind must be one of {DUMP_KINDS}"))
        _examples(item, regex, label, at, problems)
        if item.get("min_after") is not None and "after" not in regex.groupindex:
            problems.append(
                Problem(label, at, f"{section}: {item.get('id')}: min_after needs an `after` group")
            )
        out.append(
            Wording(
                id=str(item["id"]),
                regex=regex,
                keywords=tuple(item.get("keywords") or ()),
                kind=str(item.get("kind", "")),
                tool=str(item.get("tool", "")),
                title=str(item.get("title", "")),
                wait=item.get("wait"),
                repeats=int(item.get("repeats", 1)),
                min_after=float(item["min_after"]) if item.get("min_after") is not None else None,
                before_training=bool(item.get("before_training", False)),
                catalog=tuple(item.get("catalog") or ()),
                signal=str(item.get("signal", "")),
            )
        )
    return tuple(out)


def _waits(items: list) -> tuple[WaitRule, ...]:
    return tuple(
        WaitRule(
            kind=str(w["kind"]),
            title=str(w.get("title", w["kind"])),
            functions=frozenset(w.get("functions") or ()),
            files=tuple(w.get("files") or ()),
            anywhere=bool(w.get("anywhere", False)),
            depth=int(w.get("depth", 3)),
            process=tuple(w.get("process") or ()),
            others=bool(w.get("others", False)),
        )
        for w in items or ()
    )


def _causes(items: list, kinds: set[str], label: str, problems: list[Problem]) -> tuple[CauseRule, ...]:
    from patterns.environment import tracked_config_keys

    tracked = tracked_config_keys()
    out = []
    for item in items or ():
        when = item.get("when") or {}
        for key, value in when.items():
            if key not in WHEN_FIELDS:
                problems.append(Problem(label, 0, f"causes: {item.get('id')}: unknown condition '{key}'"))
            elif key != "sign" and value != "any" and value not in kinds:
                problems.append(Problem(label, 0, f"causes: {item.get('id')}: unknown wait kind '{value}'"))
        for key in item.get("cite") or ():
            if key not in tracked:
                problems.append(
                    Problem(
                        label,
                        0,
                        f"causes: {item.get('id')}: '{key}' is no config key environment.yaml tracks",
                    )
                )
        out.append(
            CauseRule(
                id=str(item["id"]),
                title=str(item["title"]),
                summary=str(item["summary"]),
                fix=tuple(str(f) for f in item.get("fix") or ()),
                fix_if_missing=tuple(str(f) for f in item.get("fix_if_missing") or ()),
                when=tuple((str(k), str(v)) for k, v in when.items()),
                cite=tuple(item.get("cite") or ()),
                category=item.get("category"),
                stage=item.get("stage"),
            )
        )
        if item.get("category") is not None and item["category"] not in CATEGORIES:
            problems.append(
                Problem(label, 0, f"causes: {item.get('id')}: unknown category {item['category']!r}")
            )
        if item.get("stage") is not None and item["stage"] not in STAGES:
            problems.append(Problem(label, 0, f"causes: {item.get('id')}: unknown stage {item['stage']!r}"))
    if out and out[-1].when:
        problems.append(Problem(label, 0, "causes: the last cause must have no condition (the default)"))
    return tuple(out)


def load_stall_rules(text: str, label: str = STALLS_LABEL) -> StallRules:
    """The rules of a stalls file; CatalogError lists every problem at once."""
    return _rules(_parse(text, label), label)


def _parse(text: str, label: str) -> dict:
    from patterns.yamlfile import knowledge_mapping  # (PyYAML: only when a file is parsed)

    problems: list[Problem] = []
    data = knowledge_mapping(text, label, problems, TOP_FIELDS)
    if problems:
        raise CatalogError(problems)
    return data


def _rules(data: dict, label: str) -> StallRules:
    """The rules of a stalls file's parsed data, each wording checked against its examples."""
    problems: list[Problem] = []
    dumps = _wordings(data.get("dumps"), label, problems, "dumps")
    signs = _wordings(data.get("signs"), label, problems, "signs")
    interrupts = _wordings(data.get("interrupts"), label, problems, "interrupts")
    for w in interrupts:
        if "signal" not in w.regex.groupindex and not w.signal:
            problems.append(
                Problem(
                    label, 0, f"interrupts: {w.id}: needs a `signal` group in its regex or a `signal:` name"
                )
            )
    waits = _waits(data.get("waits"))
    causes = _causes(data.get("causes"), {w.kind for w in waits}, label, problems)
    if problems:
        raise CatalogError(problems)
    return StallRules(
        dumps=dumps,
        signs=signs,
        interrupts=interrupts,
        interrupt_exceptions=frozenset(data.get("interrupt_exceptions") or ()),
        exception_signals=tuple((str(k), str(v)) for k, v in (data.get("exception_signals") or {}).items()),
        outside_signals=frozenset(data.get("outside_signals") or ()),
        signal_names=tuple((int(k), str(v)) for k, v in (data.get("signal_names") or {}).items()),
        waits=waits,
        idle_threads=tuple(data.get("idle_threads") or ()),
        causes=causes,
        idle_functions=frozenset(data.get("idle_functions") or ()),
        silence_steps=float(data.get("silence_steps", 10)),
        min_silence_s=float(data.get("min_silence_s", 300)),
        follow_steps=float(data.get("follow_steps", 5)),
        quiet_first_s=float(data.get("quiet_first_s", 30)),
    )
