"""Catalog hits: the catalog's entries matched against the records routed to them; a hit (one match on
one line) is counted in a finding (hits grouped by entry and masked message).

`CatalogHits.match` tries the entries a line's keywords call for (logparse.observe.routes), with a
cache of recent results; `CatalogHits.record` counts the hits, except those of entries that need the
failure's traceback (`frames`), which wait until their traceback is complete (`decide_deferred`).

Bounds: at most `max_groups` groups by message; once that many exist, a hit with a new message joins
its entry's one overflow group (so every hit is still counted, under its entry, with its rank and
node: at most one overflow group per catalog entry). A group keeps its first and its latest hit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import regex
from rapidfuzz import fuzz

from logparse.observe.matcher import ENTRY_BUDGET_S, MATCH_TIMEOUT_S, Match, Matcher
from logparse.observe.tracebacks import TB_START, Traceback
from logparse.read.normalize import Record
from patterns import Catalog, Entry, Role, Severity
from patterns.fallback import fallback_rules
from patterns.stages import MAX_FRAME_FIELD

MAX_GROUPS = 2000
MAX_DEFERRED = 10_000  # catalog hits waiting for their traceback to be complete (entries with `frames`)
DECIDE_DEFERRED_AT = 64  # waiting hits that make the scan decide those whose traceback is complete
MATCH_CACHE_SIZE = 4096  # distinct (keywords, message) pairs whose matches are remembered
MATCH_CACHE_CHARS = 2000  # longer messages are matched every time (hashing them costs as much)
OVERFLOW_KEY = "<further distinct messages>"  # the masked-message key of an entry's overflow group

# numbers, hex, IPs, paths and timestamps are masked so the same error on many ranks groups together
MASK_RE = regex.compile(r"(?:/[\w.@+-]+)+/?|0x[0-9a-fA-F]+|\b[0-9a-f]{12,}\b|\d+(?:[.:]\d+)*|[\w.-]+@[\w.-]+")


# the same without its e-mail branch: `[\w.-]+@` retries at every start of a word, and a message
# without an `@` (nearly all) cannot match it; `re` behind a look-ahead for a branch's first characters
MASK_NO_MAIL_RE = re.compile(
    r"(?=[/0-9a-f])(?:(?:/[\w.@+-]+)+/?|0x[0-9a-fA-F]+|\b[0-9a-f]{12,}\b|\d+(?:[.:]\d+)*)"
)
MASK_CHARS = 2000  # grouping looks at the head of a message; a 1 MB line of one token stays linear
MASK_CACHE = 4096  # a log dense in errors repeats a few messages on many lines and ranks
_masked: dict[str, str] = {}


def mask(message: str) -> str:
    head = message[:MASK_CHARS]
    out = _masked.get(head)
    if out is None:
        out = (MASK_RE if "@" in head else MASK_NO_MAIL_RE).sub("<*>", head)
        if len(_masked) >= MASK_CACHE:
            _masked.clear()
        _masked[head] = out
    return out


def _class_category(exc_type: str) -> str | None:
    """The category an exception class says (fallback.yaml's type rules), asked only for an entry
    whose category comes from one (`category_from: {types: true}`)."""
    return fallback_rules().class_category(exc_type)


@dataclass
class Hit:
    entry: Entry
    record: Record
    groups: dict[str, str | None]
    seq: int
    traceback: Traceback | None
    context: list[Record]
    time: float | None = None  # the line's own timestamp (a stream's earlier stamp is only a lower bound)
    step: int | None = None  # the last training step seen in the job when this line arrived
    after: list[Record] = field(default_factory=list)  # continuation lines of a multi-line message

    @property
    def category(self) -> str:
        return self.entry.category_for(self.groups, _class_category)

    @property
    def role(self) -> Role:
        return self.entry.role


@dataclass
class FindingGroup:
    entry: Entry
    key: str
    first: Hit
    count: int = 0
    ranks: set[int] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)
    last: Hit | None = None  # the latest hit (a finding that recurs to the end did not "pass")

    def add(self, hit: Hit) -> None:
        self.count += hit.record.origin.repeat
        if self.last is None or hit.seq >= self.last.seq:
            self.last = hit
        o = hit.record.origin
        if o.rank is not None:
            self.ranks.add(o.rank)
        if o.node:
            self.nodes.add(o.node)


class FindingCollector:
    def __init__(self, max_groups: int = MAX_GROUPS) -> None:
        self.max_groups = max_groups
        self.groups: dict[tuple[str, str], FindingGroup] = {}
        self.overflow = (
            0  # hits whose message found no group of its own (counted in their entry's overflow group)
        )
        # record sequence numbers of the hits inside a traceback (a traceback whose exception line an
        # entry recognises is not an unknown cause); those outside one need no record, and a log dense
        # in errors has millions
        self.hit_seqs: set[int] = set()

    def add(self, hit: Hit) -> bool:
        """Count `hit` in its group; True when it starts a new group (its first hit: the one a report
        can show, with its context)."""
        if hit.traceback is not None:
            self.hit_seqs.add(hit.seq)
        masked = hit.record.masked  # (masked in a reader process: logparse.read.pre_records)
        key = (hit.entry.id, mask(hit.record.message) if masked is None else masked)
        group = self.groups.get(key)
        new = group is None
        if new:
            if len(self.groups) >= self.max_groups:
                # no room for another message: count the hit under its entry, never drop it (a symptom
                # seen 20,000 times with varying text must not read as 2,000)
                self.overflow += 1
                key = (hit.entry.id, OVERFLOW_KEY)
                group = self.groups.get(key)
                if group is None:
                    group = self.groups[key] = FindingGroup(hit.entry, OVERFLOW_KEY, hit)
                    group.add(hit)
                    return True
                group.add(hit)
                return False
            group = self.groups[key] = FindingGroup(hit.entry, key[1], hit)
        group.add(hit)
        return new


# Near-identical masked messages of one entry are one finding. 90 (of 100, rapidfuzz ratio): after
# masking, what differs between copies of one failure is a word or two (`send`/`recv`, a tensor name);
# distinct failures of one family differ in more than a tenth of their text.
SIMILARITY_THRESHOLD = 90
MAX_FUZZY_GROUPS = 400  # beyond this many groups, only exact (masked) grouping is done


def merge_similar(groups: list[FindingGroup]) -> list[FindingGroup]:
    """Fold groups of the same entry whose masked messages are near-identical (first one kept)."""
    if len(groups) > MAX_FUZZY_GROUPS:
        return groups
    kept: list[FindingGroup] = []
    for g in groups:
        target = next(
            (
                k
                for k in kept
                if k.entry.id == g.entry.id and fuzz.ratio(k.key, g.key) >= SIMILARITY_THRESHOLD
            ),
            None,
        )
        if target is None:
            kept.append(g)
            continue
        target.count += g.count
        if g.last is not None and (target.last is None or g.last.seq > target.last.seq):
            target.last = g.last
        target.ranks |= g.ranks
        target.nodes |= g.nodes
        if g.first.seq < target.first.seq:
            target.first = g.first
    return kept


class CatalogHits:
    """The catalog's findings in one attempt of a job, with the bookkeeping of the matcher's budget."""

    def __init__(
        self,
        catalog: Catalog,
        max_groups: int = MAX_GROUPS,
        on_fatal: Callable[[Hit], None] | None = None,
    ):
        self.matcher = Matcher(catalog)
        self.max_groups = max_groups
        self.collector = FindingCollector(max_groups)
        self.on_fatal = on_fatal  # told of each hit of a fatal cause entry as it is counted
        self.deferred: list[tuple] = []  # (match, record, traceback, step) for entries with `frames`
        self._decide_at = DECIDE_DEFERRED_AT
        # (prefilter keyword ids, message) -> its matches: a log dense in errors repeats its messages
        self._match_cache: dict[tuple, Sequence[Match]] = {}
        self._disabled_at: dict[str, str] = {}  # entry id -> the line where it went past its budget

    def match(
        self, rec: Record, ids: frozenset[int] | None, entries: tuple | None, traced: bool
    ) -> Sequence[Match]:
        """The matches on `rec`'s message of `entries` (None: every entry; those a line's keywords
        call for, all in order), remembered for the same keywords and message."""
        msg = rec.message
        key = (ids, traced, msg) if entries and len(msg) <= MATCH_CACHE_CHARS else None
        matches = self._match_cache.get(key) if key is not None else None
        if matches is not None:
            return matches
        matcher = self.matcher
        timeouts = matcher.timeouts
        if entries is None:
            matches = matcher.match(msg)
        elif entries:
            matches = matcher.match_entries(entries, msg, ordered=True)
        else:
            matches = ()
        if len(matcher.disabled) != len(self._disabled_at):
            for entry_id in matcher.disabled:
                self._disabled_at.setdefault(entry_id, f"{rec.line.source}:{rec.line.number}")
        if matcher.timeouts == timeouts and key is not None:
            # (a result that a timeout decided is not one to repeat)
            if len(self._match_cache) >= MATCH_CACHE_SIZE:
                self._match_cache.clear()
            self._match_cache[key] = matches
        return matches

    def record(
        self,
        rec: Record,
        matches: Sequence[Match],
        tb: Traceback | None,
        step: int | None,
        context_of: Callable[[Record], Sequence[Record]],
    ) -> list[Hit]:
        """Count the hits of `matches` on `rec` (`tb`: the traceback it belongs to; `step`: the last
        training step seen). Those of entries that need a traceback wait for it (or cannot fire
        without one); the hits counted now are returned. `context_of(rec)`: the lines before it, read
        for a finding's first hit outside a traceback only."""
        if matches[0].entry.frames if len(matches) == 1 else any(m.entry.frames for m in matches):
            # entries that need a traceback context are decided when the traceback is complete
            for m in matches:
                if m.entry.frames and tb is not None:
                    self._defer(m, rec, tb, step)
            matches = [m for m in matches if not m.entry.frames]
            if not matches:
                return []
        hits = [Hit(m.entry, rec, m.groups, rec.seq, tb, (), rec.origin.time, step) for m in matches]
        context = None
        for hit in hits:
            if self.collector.add(hit) and tb is None:
                # only a finding's first hit can be shown with its context: read it back now, while its
                # block is at hand (for every hit, a log dense in errors read 64 lines back per line)
                if context is None:
                    context = context_of(rec)
                hit.context = context
            if (
                self.on_fatal is not None
                and hit.entry.role == Role.CAUSE
                and hit.entry.severity == Severity.FATAL
            ):
                self.on_fatal(hit)
        return hits

    def _defer(self, m: Match, rec: Record, tb: Traceback, step: int | None) -> None:
        if len(self.deferred) >= self._decide_at:
            self.decide_deferred(closed_only=True)
            # (twice what still waits: many tracebacks open at once cost no sweep per hit)
            self._decide_at = max(DECIDE_DEFERRED_AT, 2 * len(self.deferred))
        if len(self.deferred) < MAX_DEFERRED:
            self.deferred.append((m, rec, tb, step))

    def decide_deferred(self, closed_only: bool = False) -> None:
        """Decide the hits that waited for their traceback (`closed_only`: those whose traceback is
        complete; the others wait on). Deciding them as they complete, not all at the end, keeps a log
        of 20,000 tracebacks from holding 10,000 of them (and their context) until then."""
        waiting = []
        for item in self.deferred:
            m, rec, tb, step = item
            if closed_only and not tb.closed:
                waiting.append(item)
            elif m.entry.frames_match(frame_texts(tb), MATCH_TIMEOUT_S):
                self.collector.add(Hit(m.entry, rec, m.groups, rec.seq, tb, [], rec.origin.time, step))
        self.deferred = waiting

    def new_attempt(self) -> None:
        """The findings so far belong to an attempt set aside: count afresh (the matcher's budget and
        its cache go on)."""
        self.collector = FindingCollector(self.max_groups)

    def notes(self) -> list[str]:
        """What the report must say about how the matching went: overflowing groups, timeouts."""
        notes = []
        if self.collector.overflow:
            notes.append(
                f"more than {self.max_groups} distinct messages: {self.collector.overflow} hit(s) "
                f"with further messages are counted in their entry's row, not listed one by one"
            )
        if self.matcher.timeouts:
            notes.append(f"{self.matcher.timeouts} pattern search(es) hit the match timeout and were skipped")
        return notes

    def disabled_notes(self) -> list[str]:
        """A note for each entry disabled for its slow searches."""
        notes = []
        matcher = self.matcher
        for entry_id, entry in matcher.disabled.items():
            notes.append(
                f"catalog entry '{entry_id}' ({entry.source}:{entry.line}) was disabled at "
                f"{self._disabled_at.get(entry_id, 'the end')}: its slow pattern searches took "
                f"{matcher.spent.get(entry_id, 0.0):.1f} s ({matcher.entry_timeouts.get(entry_id, 0)} "
                f"timed out; budget {ENTRY_BUDGET_S:g} s a scan), so later lines were not matched against it"
            )
        return notes


def frame_texts(tb: Traceback) -> list[str]:
    """What `frames` regexes of catalog entries see: each frame as `file:line in function: code`, the
    Ray task of the traceback, and what its header line said before `Traceback (most recent call
    last):` (`header: Scheduler hit an exception:`, SGLang's), if anything."""
    cap = MAX_FRAME_FIELD  # a fuzzed or cut line can make a "function" a megabyte long
    out = [
        f"{f.file[:cap]}:{f.line} in {(f.function or '')[:cap]}: {(f.code or '')[:cap]}" for f in tb.frames
    ]
    if tb.task:
        out.append(f"ray::{tb.task}")
    head = tb.start.message.strip()
    if head.endswith(TB_START) and len(head) > len(TB_START):
        out.append(f"header: {head[: -len(TB_START)].strip()[:cap]}")
    return out
