"""Hits (one catalog match on one line) and findings (hits grouped by entry and masked message).

Bounds: at most MAX_GROUPS groups (later distinct messages are counted, not kept); a group keeps
its first hit and the first hit of at most MAX_STREAMS_PER_GROUP streams.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import regex

from logparse.normalize import Record
from logparse.tracebacks import Traceback
from patterns import Entry, Role

MAX_GROUPS = 2000
MAX_STREAMS_PER_GROUP = 256

# numbers, hex, IPs, paths and timestamps are masked so the same error on many ranks groups together
MASK_RE = regex.compile(
    r"(?:/[\w.@+-]+)+/?|0x[0-9a-fA-F]+|\b[0-9a-f]{12,}\b|\d+(?:[.:]\d+)*|[\w.-]+@[\w.-]+"
)


def mask(message: str) -> str:
    return MASK_RE.sub("<*>", message)


@dataclass
class Hit:
    entry: Entry
    record: Record
    groups: dict[str, str | None]
    seq: int
    traceback: Traceback | None
    context: list[Record]

    @property
    def category(self) -> str:
        return self.entry.category_for(self.groups)

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
    stream_firsts: dict[tuple, Hit] = field(default_factory=dict)

    def add(self, hit: Hit) -> None:
        self.count += hit.record.origin.repeat
        o = hit.record.origin
        if o.rank is not None:
            self.ranks.add(o.rank)
        if o.node:
            self.nodes.add(o.node)
        stream = hit.record.stream
        if stream not in self.stream_firsts and len(self.stream_firsts) < MAX_STREAMS_PER_GROUP:
            self.stream_firsts[stream] = hit


class FindingCollector:
    def __init__(self) -> None:
        self.groups: dict[tuple[str, str], FindingGroup] = {}
        self.overflow = 0
        self.hit_seqs: set[int] = set()  # record sequence numbers that had any catalog hit

    def add(self, hit: Hit) -> None:
        self.hit_seqs.add(hit.seq)
        key = (hit.entry.id, mask(hit.record.message))
        group = self.groups.get(key)
        if group is None:
            if len(self.groups) >= MAX_GROUPS:
                self.overflow += 1
                return
            group = self.groups[key] = FindingGroup(hit.entry, key[1], hit)
        group.add(hit)

    def by_role(self, role: Role) -> list[FindingGroup]:
        return [g for g in self.groups.values() if g.entry.role == role]
