"""Name a failure that no catalog entry names, from its evidence (patterns/fallback.yaml).

`classify` takes what a failure left (exception type, message, frames, chained exceptions) and
tries the rules in the order fallback.yaml states: strong phrases, strong types, frames (innermost
first), weak phrases, weak types, then the nearest known entry (rapidfuzz over the catalog's match
examples). The answer says which rule decided (its basis), for the report's explanation.

Whether a line outside any traceback reads as a failure (an exception printed without its traceback,
an error record, a failure phrase) and is not a benign look-alike is logparse/observe/bare_lines.py's.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

from rapidfuzz import fuzz
from rapidfuzz import process as fuzz_process
from rapidfuzz.utils import default_process

from logparse.observe.evidence import (
    ACTOR_FRAME,
    TASK_FRAME,
    FailureEvidence,
)
from logparse.observe.hits import mask
from logparse.read.normalize import Normalizer
from logparse.read.sources import Line, strip_ansi
from patterns import Catalog, Entry, Role
from patterns.fallback import FallbackRules, fallback_rules
from patterns.schema import REGEX_TIMEOUT_S

MAX_COMPARE_CHARS = 400  # characters of a message compared with the examples


@dataclass(frozen=True)
class Classification:
    category: str
    basis: str  # phrase | type | frame | weak-phrase | weak-type | marker | nearest
    rule: str  # the rule id, or the nearest entry's id
    detail: str  # what in the evidence fired it, for the explanation
    score: float | None = None  # nearest: the similarity 0-100

    @property
    def weak(self) -> bool:
        return self.basis in ("weak-phrase", "weak-type", "nearest")

    def sentence(self) -> str:
        what = {
            "phrase": "its wording",
            "weak-phrase": "its wording (a weak hint)",
            "type": "its exception type",
            "weak-type": "its exception type (a weak hint)",
            "frame": "where it failed (its frames)",
            "nearest": "the nearest known entry",
            "marker": "the line printed after it",
        }[self.basis]
        rule = f"entry {self.rule}" if self.basis == "nearest" else f"rule {self.rule}"
        return f"Category {self.category} from {what}: {self.detail} ({rule} of patterns/fallback.yaml)."


def unwrap_type(exc_type: str | None) -> str | None:
    """`ray.exceptions.RayTaskError(KeyError)` -> `KeyError` (the class the wrapper carries)."""
    if exc_type and exc_type.endswith(")") and "(" in exc_type:
        inner = exc_type[exc_type.rindex("(") + 1 : -1].strip()
        return inner or exc_type
    return exc_type


def messages_of(evidence: FailureEvidence) -> list[tuple[str | None, str]]:
    return [(unwrap_type(evidence.exc_type), _own_message(evidence.exc_type, evidence.message))] + [
        (unwrap_type(t), _own_message(t, m)) for t, m in evidence.chain
    ]


def _own_message(exc_type: str | None, message: str) -> str:
    """The message of the exception a wrapper carries: not the wrapper's own header (`RayTaskError(X):
    ray::Task.method() (pid=..., ip=...)` names where it ran, not what X said)."""
    if unwrap_type(exc_type) != exc_type and message.lstrip().startswith("ray::"):
        return ""
    return message


def phrase_text(exc_type: str | None, message: str) -> str:
    """What a phrase reads: `Type: message` (`ncclUnhandledCudaError: ...` names its category in the type)."""
    return f"{exc_type}: {message}" if exc_type else message


def _quote(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def classify(
    evidence: FailureEvidence, catalog: Catalog | None = None, rules: FallbackRules | None = None
) -> Classification | None:
    """The category the evidence says, and which rule said it; None when nothing does. The rules are
    tried in this order: strong phrases, strong types, frames (innermost first), weak phrases, weak
    types; then the phrases of the lines just before it (Hydra prints the error, then its epilogue; a
    launcher prints the cause, then the exit), strong then weak; then the nearest known entry."""
    rules = rules or fallback_rules()
    messages = messages_of(evidence)
    order = (
        lambda: _phrase(rules, messages, weak=False),
        lambda: _type(rules, messages, weak=False),
        lambda: _frame_category(evidence.frames, rules),
        lambda: _phrase(rules, messages, weak=True),
        lambda: _type(rules, messages, weak=True),
        lambda: _context_phrase(rules, evidence.context, weak=False),
        lambda: _context_phrase(rules, evidence.context, weak=True),
        lambda: _nearest(evidence, catalog, rules),
    )
    for step in order:
        found = step()
        if found is not None:
            return found
    return None


def _phrase(
    rules: FallbackRules, messages: list[tuple[str | None, str]], weak: bool
) -> Classification | None:
    for rule in rules.phrases:
        if rule.weak != weak:
            continue
        for exc_type, msg in messages:
            text = phrase_text(exc_type, msg)
            if text and rule.fires(text):
                basis = "weak-phrase" if weak else "phrase"
                return Classification(rule.category, basis, rule.id, f"the message says `{_quote(text)}`")
    return None


def _type(rules: FallbackRules, messages: list[tuple[str | None, str]], weak: bool) -> Classification | None:
    for rule in rules.types:
        if rule.weak != weak:
            continue
        for exc_type, msg in messages:
            if exc_type and rule.fires(exc_type, msg or ""):
                basis = "weak-type" if weak else "type"
                return Classification(
                    rule.category, basis, rule.id, f"the exception is a `{_quote(exc_type, 60)}`"
                )
    return None


def _context_phrase(rules: FallbackRules, context: Sequence[str], weak: bool) -> Classification | None:
    """The phrases of the lines just before the failure: after everything the failure itself says."""
    for rule in rules.phrases:
        if rule.weak != weak:
            continue
        for msg in context:
            if msg and rule.fires(msg):
                basis = "weak-phrase" if weak else "phrase"
                return Classification(
                    rule.category, basis, rule.id, f"a line just before it says `{_quote(msg)}`"
                )
    return None


def _nearest(
    evidence: FailureEvidence, catalog: Catalog | None, rules: FallbackRules
) -> Classification | None:
    if catalog is None:
        return None
    near = nearest_entries(evidence, catalog, rules)
    if not near or not near[0].decisive:
        return None
    best = near[0]
    return Classification(
        best.category,
        "nearest",
        best.entry_id,
        f"the message is {best.score:.0f}% like entry {best.entry_id}'s examples",
        score=best.score,
    )


def _frame_category(
    frames: Sequence[tuple[str, str, str | None]], rules: FallbackRules
) -> Classification | None:
    for file, function, code in reversed(frames):
        for rule in rules.frames:
            if rule.fires(file, function, code):
                if file == ACTOR_FRAME:
                    detail = f"it came from the Ray actor `{_quote(function, 40)}`"
                elif file == TASK_FRAME:
                    detail = f"it came from the Ray task `{_quote(function, 40)}`"
                else:
                    detail = f"it failed in `{_quote(function or '?', 40)}` in {_quote(file, 60)}"
                return Classification(rule.category, "frame", rule.id, detail)
    return None


# -- the nearest known entry ------------------------------------------------------------------------


@dataclass(frozen=True)
class Nearest:
    entry_id: str
    category: str
    score: float
    decisive: bool = False  # above the threshold and not tied with another category


@dataclass
class _ExampleIndex:
    texts: list[str] = field(default_factory=list)
    owners: list[tuple[str, str]] = field(default_factory=list)  # (entry id, category)
    # entry id -> the entry, for those that need their failure's frames (`frames`)
    framed: dict[str, Entry] = field(default_factory=dict)


_INDEXES: dict[int, tuple[weakref.ref, _ExampleIndex]] = {}  # id(catalog) -> (the catalog, its index)


def _comparable(text: str) -> str:
    """Numbers, paths and hex ids masked, then lower case without punctuation (rapidfuzz's default)."""
    return default_process(mask(text[:MAX_COMPARE_CHARS]).replace("<*>", " "))


def _index(catalog: Catalog) -> _ExampleIndex:
    got = _INDEXES.get(id(catalog))
    if got is not None and got[0]() is catalog:
        return got[1]
    index = _ExampleIndex()
    normalizer = Normalizer()
    for entry in catalog.entries:
        if entry.role != Role.CAUSE or entry.category == "unknown":
            continue
        if entry.frames:
            index.framed[entry.id] = entry
        for ex in entry.examples.match:
            text = _example_message(ex.line, ex.block, normalizer)
            if text:
                index.texts.append(_comparable(text))
                index.owners.append((entry.id, entry.category))
    if len(_INDEXES) > 16:
        _INDEXES.clear()
    _INDEXES[id(catalog)] = (weakref.ref(catalog), index)
    return index


def _raised_elsewhere(evidence: FailureEvidence, index: _ExampleIndex) -> set[str]:
    """The entries that name a failure by where it was raised (`frames`: inside the reward function)
    whose frames the failure's own frames do not show: its message is like theirs, but it was raised
    elsewhere. (A failure without frames cannot say, so none is ruled out.)"""
    if not evidence.frames or not index.framed:
        return set()
    texts = [f"{file}:0 in {function}: {code or ''}" for file, function, code in evidence.frames]
    return {i for i, entry in index.framed.items() if not entry.frames_match(texts, REGEX_TIMEOUT_S)}


def _example_message(text: str, block: bool, normalizer: Normalizer) -> str:
    """The bare message of a one-line example; for a block, its last exception line."""
    lines = text.splitlines() if block else [text]
    for raw in reversed(lines):
        msg = normalizer.normalize(Line("<example>", 1, strip_ansi(raw))).message.strip()
        if msg and (not block or not raw[:1].isspace()):
            return msg
    return ""


def evidence_text(evidence: FailureEvidence) -> str:
    exc_type = unwrap_type(evidence.exc_type)
    head = f"{exc_type}: {evidence.message}" if exc_type else evidence.message
    return head.strip()


def nearest_entries(
    evidence: FailureEvidence | str, catalog: Catalog, rules: FallbackRules | None = None, limit: int = 3
) -> list[Nearest]:
    """The catalog entries whose match examples are most like the failure's message, best first,
    one per entry; the first is `decisive` when it clears the threshold and no entry of another
    category comes within the margin."""
    rules = rules or fallback_rules()
    cfg = rules.nearest
    text = evidence if isinstance(evidence, str) else evidence_text(evidence)
    query = _comparable(text)
    if len(query.split()) < cfg.min_tokens:
        return []
    index = _index(catalog)
    if not index.texts:
        return []
    scorer = getattr(fuzz, cfg.scorer)
    scored = fuzz_process.extract(query, index.texts, scorer=scorer, processor=None, limit=max(24, limit * 8))
    best: dict[str, Nearest] = {}
    elsewhere = _raised_elsewhere(evidence, index) if not isinstance(evidence, str) else set()
    for _, score, i in scored:
        entry_id, category = index.owners[i]
        if entry_id in elsewhere:
            continue
        if entry_id not in best or score > best[entry_id].score:
            best[entry_id] = Nearest(entry_id, category, float(score))
    ranked = sorted(best.values(), key=lambda n: (-n.score, n.entry_id))[:limit]
    if not ranked:
        return []
    top = ranked[0]
    rival = next((n for n in ranked[1:] if n.category != top.category), None)
    decisive = top.score >= cfg.threshold and (rival is None or top.score - rival.score > cfg.margin)
    ranked[0] = Nearest(top.entry_id, top.category, top.score, decisive)
    return ranked
