"""Name a failure that no catalog entry names, from its evidence (patterns/fallback.yaml).

`classify` takes what a failure left (exception type, message, frames, chained exceptions) and
tries the rules in the order fallback.yaml states: strong phrases, strong types, frames (innermost
first), weak phrases, weak types, then the nearest known entry (rapidfuzz over the catalog's match
examples). The answer says which rule decided (its basis), for the report's explanation.

`bare_failure` tells whether a line outside any traceback reads as a failure (an exception printed
without its traceback, an error record, a failure phrase) and is not a benign look-alike.
"""

from __future__ import annotations

import itertools
import re
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import regex
from rapidfuzz import fuzz
from rapidfuzz import process as fuzz_process
from rapidfuzz.utils import default_process

from logparse.observe.hits import mask
from logparse.read.normalize import Normalizer, Record
from logparse.read.prefilter import trie_regex
from logparse.read.sources import Line, strip_ansi
from patterns import Catalog, Role
from patterns.fallback import FallbackRules, MessageMarker, fallback_rules, search_timeout

MAX_MESSAGE_LINES = 40  # continuation lines of a message that the rules read (a launcher summary is ~20)
MAX_COMPARE_CHARS = 400  # characters of a message compared with the examples


@dataclass(frozen=True)
class FailureEvidence:
    """What a failure left: its exception (type and message), frames (outermost first), and the
    exceptions earlier in its chain (most recent first)."""

    exc_type: str | None
    message: str
    frames: tuple[tuple[str, str, str | None], ...] = ()  # (file, function, code)
    chain: tuple[tuple[str, str], ...] = ()  # (type, message)
    context: tuple[str, ...] = ()  # the lines of its process just before it (least trusted)


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


def _messages(evidence: FailureEvidence) -> list[tuple[str | None, str]]:
    return [(unwrap_type(evidence.exc_type), evidence.message)] + [
        (unwrap_type(t), m) for t, m in evidence.chain
    ]


def _phrase_text(exc_type: str | None, message: str) -> str:
    """What a phrase reads: `Type: message` (`ncclUnhandledCudaError: ...` names its category in the type)."""
    return f"{exc_type}: {message}" if exc_type else message


def _quote(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def classify(
    evidence: FailureEvidence, catalog: Catalog | None = None, rules: FallbackRules | None = None
) -> Classification | None:
    """The category the evidence says, and which rule said it; None when nothing does."""
    rules = rules or fallback_rules()
    messages = _messages(evidence)
    for weak in (False, True):
        for rule in rules.phrases:
            if rule.weak != weak:
                continue
            for exc_type, msg in messages:
                text = _phrase_text(exc_type, msg)
                if text and rule.fires(text):
                    return Classification(
                        rule.category,
                        "weak-phrase" if weak else "phrase",
                        rule.id,
                        f"the message says `{_quote(text)}`",
                    )
        for rule in rules.types:
            if rule.weak != weak:
                continue
            for exc_type, msg in messages:
                if exc_type and rule.fires(exc_type, msg or ""):
                    return Classification(
                        rule.category,
                        "weak-type" if weak else "type",
                        rule.id,
                        f"the exception is a `{_quote(exc_type, 60)}`",
                    )
        if not weak:
            hit = _frame_category(evidence.frames, rules)
            if hit is not None:
                return hit
    for weak in (False, True):
        # the lines just before it (Hydra prints the error, then its epilogue; a launcher prints
        # the cause, then the exit): phrases only, after everything the failure itself says
        for rule in rules.phrases:
            if rule.weak != weak:
                continue
            for msg in evidence.context:
                if msg and rule.fires(msg):
                    return Classification(
                        rule.category,
                        "weak-phrase" if weak else "phrase",
                        rule.id,
                        f"a line just before it says `{_quote(msg)}`",
                    )
    if catalog is not None:
        near = nearest_entries(evidence, catalog, rules)
        if near and near[0].decisive:
            best = near[0]
            return Classification(
                best.category,
                "nearest",
                best.entry_id,
                f"the message is {best.score:.0f}% like entry {best.entry_id}'s examples",
                score=best.score,
            )
    return None


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
        for ex in entry.examples.match:
            text = _example_message(ex.line, ex.block, normalizer)
            if text:
                index.texts.append(_comparable(text))
                index.owners.append((entry.id, entry.category))
    if len(_INDEXES) > 16:
        _INDEXES.clear()
    _INDEXES[id(catalog)] = (weakref.ref(catalog), index)
    return index


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
    for _, score, i in scored:
        entry_id, category = index.owners[i]
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


# -- bare failure lines -----------------------------------------------------------------------------


@dataclass
class BareLine:
    """A line outside any traceback that reads as a failure."""

    record: Record
    kind: str  # exception | phrase | marker | error-record | error-prefix | cut-traceback
    exc_type: str | None
    message: str
    step: int | None = None  # the last training step seen when it arrived
    context: Sequence[Record] = ()
    after: list[Record] = field(default_factory=list)  # continuation lines of its message
    traceback: object | None = None  # cut-traceback: the traceback whose exception line is missing
    marker: MessageMarker | None = None  # a message marker's text: the marker that closed it

    @property
    def seq(self) -> int:
        return self.record.seq

    def evidence(self) -> FailureEvidence:
        extra = " ".join(r.message.strip() for r in self.after[:MAX_MESSAGE_LINES])
        message = f"{self.message} {extra}".strip() if extra else self.message
        frames = origin_frames(self.record.origin.actor)
        if self.traceback is not None:
            frames += tuple((f.file, f.function, f.code) for f in self.traceback.frames)
        return FailureEvidence(self.exc_type, message, frames, (), context_messages(self.context))


def context_messages(context: Sequence[Record]) -> tuple[str, ...]:
    """The bare messages of the lines before a failure, nearest first."""
    return tuple(r.message.strip() for r in reversed(list(context)) if r.message.strip())


KIND_RANK = {
    "exception": 0,
    "phrase": 0,
    "cut-traceback": 1,
    "marker": 1,
    "error-prefix": 2,
    "error-record": 3,
}


class BareLineDetector:
    """Decides whether a record is a bare failure line (patterns/fallback.yaml `bare_lines`)."""

    def __init__(self, rules: FallbackRules | None = None):
        self.rules = rules or fallback_rules()
        self.keywords = self.rules.keywords()
        self._failure_phrases = tuple(p for p in self.rules.phrases if p.failure)
        # one search for the failure phrases' keywords and one for the benign look-alikes, instead of a
        # search per rule: every error line of a log dense in them comes here
        words = {k for p in self._failure_phrases for k in p.keywords}
        self._phrase_words = re.compile(trie_regex(words)) if words else None
        self._benign = _union(self.rules.bare.benign)

    def detect(self, rec: Record) -> tuple[str, str | None, str] | None:
        """(kind, exception type, message) when `rec` reads as a failure, else None. In order: a
        benign look-alike is never one; a failure phrase makes any line one (a NaN loss in a metrics
        line too); a data line (metrics, progress bar) is otherwise none; then an exception line, a
        failure marker, an error-level record, an `Error:` prefix."""
        bare = self.rules.bare
        msg = rec.message.strip()
        if not msg:
            return None
        text = msg[:2000]
        if self._benign is not None and _any((self._benign,), text):
            return None
        m = _match(bare.exception, text)
        if (
            self._phrase_words is not None
            and self._phrase_words.search(text)
            and any(p.fires(text) for p in self._failure_phrases)
        ):
            if m is not None:
                return "phrase", m.group("inner") or m.group("type"), (m.group("message") or "").strip()
            return "phrase", None, msg
        if _any(bare.structured, text):
            return None
        if m is not None:
            return "exception", m.group("inner") or m.group("type"), (m.group("message") or "").strip()
        if _any(bare.markers, text):
            return "marker", None, msg
        if rec.origin.level in bare.levels:
            return "error-record", None, msg
        m = _match(bare.prefix, text)
        if m is not None:
            return "error-prefix", None, m.group("message")
        return None


def _union(patterns) -> regex.Pattern | None:
    """One regex that finds what any of `patterns` finds (a leading `(?i)` becomes a scoped flag)."""
    if not patterns:
        return None
    parts = []
    for p in patterns:
        text = p.pattern
        parts.append(f"(?i:{text[4:]})" if text.startswith("(?i)") else f"(?:{text})")
    return regex.compile("|".join(parts))


def _any(patterns, text: str) -> bool:
    timeout = search_timeout(text)
    for p in patterns:
        try:
            if p.search(text, timeout=timeout):
                return True
        except TimeoutError:
            continue
    return False


def _match(pattern, text: str):
    try:
        return pattern.match(text, timeout=search_timeout(text))
    except TimeoutError:
        return None


# -- checking the rules' examples -------------------------------------------------------------------


@dataclass(frozen=True)
class FallbackExampleFailure:
    rule: str
    kind: str  # match | no_match
    text: str
    reason: str

    def __str__(self) -> str:
        return (
            f"patterns/fallback.yaml: rule '{self.rule}': {self.kind} example {self.reason}\n"
            f"    line: {self.text}"
        )


def example_evidence(text: str, block: bool) -> FailureEvidence | None:
    """The evidence a scan would take from an example: a block is assembled as a traceback, a line
    is read as a bare failure line (an exception line gives its type)."""
    from logparse.observe.tracebacks import TracebackAssembler

    normalizer = Normalizer()
    if block:
        assembler = TracebackAssembler()
        for i, raw in enumerate(text.splitlines(), 1):
            rec = normalizer.normalize(Line("<example>", i, strip_ansi(raw)))
            rec.seq = i
            assembler.feed(rec)
        assembler.close_all()
        tbs = [tb for tb in assembler.kept() if tb.final is not None]
        return evidence_of_traceback(tbs[-1]) if tbs else None
    rec = normalizer.normalize(Line("<example>", 1, strip_ansi(text)))
    detector = BareLineDetector()
    found = detector.detect(rec)
    if found is None:
        return FailureEvidence(None, rec.message.strip())
    _kind, exc_type, message = found
    return FailureEvidence(exc_type, message)


ACTOR_FRAME = "<ray actor>"  # the process a failure came from, as an outermost frame (fallback frame rules)
TASK_FRAME = "<ray task>"


def origin_frames(actor: str | None, task: str | None = None) -> tuple[tuple[str, str, None], ...]:
    """The Ray actor and task a failure came from, as outermost pseudo-frames: `RewardLoopWorker`,
    `vLLMHttpServer` or a task method such as `compute_rm_score` say where it failed when the real
    frames do not."""
    out = []
    if actor:
        out.append((ACTOR_FRAME, actor, None))
    if task:
        out.append((TASK_FRAME, task.rsplit(".", 1)[-1], None))
    return tuple(out)


def evidence_of_traceback(tb) -> FailureEvidence:
    """FailureEvidence of an assembled traceback (logparse.observe.tracebacks.Traceback)."""
    exc = tb.final
    extra = exc.extra[:MAX_MESSAGE_LINES] if exc is not None else []
    message = "\n".join([exc.message, *extra]) if exc is not None else ""
    chain = []
    prev = tb.chained_from
    while prev is not None and len(chain) < 5:
        if prev.final is not None:
            chain.append((prev.final.type, prev.final.message))
        prev = prev.chained_from
    for other in reversed(tb.exceptions[:-1]):  # Ray's nested form: the wrappers above the final exception
        chain.append((other.type, other.message))
    frames = origin_frames(tb.start.origin.actor, tb.task) + tuple(
        (f.file, f.function, f.code) for f in tb.frames
    )
    return FailureEvidence(
        exc.type if exc is not None else None, message, frames, tuple(chain[:8]), context_messages(tb.context)
    )


def _rule_fires(rule, evidence: FailureEvidence) -> bool:
    from patterns.fallback import FrameCategoryRule, PhraseRule

    if isinstance(rule, PhraseRule):
        return any(rule.fires(_phrase_text(t, m)) for t, m in _messages(evidence) if m or t)
    if isinstance(rule, FrameCategoryRule):
        return any(rule.fires(*f) for f in evidence.frames)
    return any(t and rule.fires(t, m or "") for t, m in _messages(evidence))


def check_fallback_examples(rules: FallbackRules | None = None) -> tuple[int, list[FallbackExampleFailure]]:
    """Run every rule's examples (and the bare-line examples) the way a scan reads them."""
    rules = rules or fallback_rules()
    failures: list[FallbackExampleFailure] = []
    count = 0
    for rule in itertools.chain(rules.phrases, rules.types, rules.frames):
        for ex in rule.examples.match:
            count += 1
            ev = example_evidence(ex.line, ex.block)
            if ev is None or not _rule_fires(rule, ev):
                failures.append(FallbackExampleFailure(rule.id, "match", ex.line, "does not fire the rule"))
        for ex in rule.examples.no_match:
            count += 1
            ev = example_evidence(ex.line, ex.block)
            if ev is not None and _rule_fires(rule, ev):
                failures.append(
                    FallbackExampleFailure(rule.id, "no_match", ex.line, f"fires but must not ({ex.why})")
                )
    detector = BareLineDetector(rules)
    normalizer = Normalizer()
    for kind, examples in (("match", rules.bare.examples.match), ("no_match", rules.bare.examples.no_match)):
        for ex in examples:
            count += 1
            found = detector.detect(normalizer.normalize(Line("<example>", 1, strip_ansi(ex.line))))
            if (found is None) == (kind == "match"):
                reason = (
                    "is not read as a failure line"
                    if kind == "match"
                    else f"is read as a failure line ({ex.why})"
                )
                failures.append(FallbackExampleFailure("bare_lines", kind, ex.line, reason))
    return count, failures
