"""Hits (one catalog match on one line) and findings (hits grouped by entry and masked message).

Bounds: at most `max_groups` groups by message; once that many exist, a hit with a new message joins
its entry's one overflow group (so every hit is still counted, under its entry, with its rank and
node: at most one overflow group per catalog entry). A group keeps its first and its latest hit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import regex
from rapidfuzz import fuzz

from logparse.observe.tracebacks import Traceback
from logparse.read.normalize import Record
from patterns import Entry, Role
from patterns.fallback import fallback_rules

MAX_GROUPS = 2000
OVERFLOW_KEY = "<further distinct messages>"  # the masked-message key of an entry's overflow group

# numbers, hex, IPs, paths and timestamps are masked so the same error on many ranks groups together
MASK_RE = regex.compile(r"(?:/[\w.@+-]+)+/?|0x[0-9a-fA-F]+|\b[0-9a-f]{12,}\b|\d+(?:[.:]\d+)*|[\w.-]+@[\w.-]+")


# the same without its e-mail branch: `[\w.-]+@` retries at every start of a word, and a message
# without an `@` (nearly all) cannot match it. With `re`, behind a look-ahead for the first characters
# a branch can start with: 6.1 -> 4.8 us a message (the same output on samples, fixtures and corpus)
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
        key = (hit.entry.id, mask(hit.record.message))
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
