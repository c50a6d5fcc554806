"""Match bare messages against the catalog: a literal prefilter, then the precise regexes.

The prefilter is one alternation of every entry's keywords, compiled with the standard `re` engine
(a C loop over the message); only messages it accepts are tried with the entries whose keywords
they contain, using the `regex` module with a per-search timeout.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from logparse.prefilter import trie_regex
from patterns import Catalog, Entry
from patterns.schema import REGEX_TIMEOUT_S

MATCH_TIMEOUT_S = REGEX_TIMEOUT_S  # per pattern search; a pathological user pattern gives up instead of hanging


@dataclass(frozen=True)
class Match:
    entry: Entry
    groups: dict[str, str | None]


class Matcher:
    def __init__(self, catalog: Catalog):
        self.entries = catalog.entries
        self._order = {e.id: i for i, e in enumerate(catalog.entries)}
        self._by_keyword: dict[str, list[Entry]] = {}
        for entry in self.entries:
            for kw in entry.keywords:
                self._by_keyword.setdefault(kw, []).append(entry)
        self._keywords = sorted(self._by_keyword, key=len, reverse=True)
        self.timeouts = 0

    @functools.cached_property
    def _prefilter(self) -> re.Pattern[str] | None:
        """One alternation factored as a trie: at each position only the branch of its first character
        is tried (a flat alternation of a few hundred keywords is ~20x slower on long lines). Compiled
        on first use (25 ms): a scan that prefilters raw blocks never needs it."""
        return re.compile(trie_regex(self._keywords)) if self._keywords else None

    def candidates(self, message: str) -> list[Entry]:
        if self._prefilter is None or not self._prefilter.search(message):
            return []
        seen: dict[str, Entry] = {}
        for kw in self._keywords:
            if kw in message:
                for entry in self._by_keyword[kw]:
                    seen.setdefault(entry.id, entry)
        return sorted(seen.values(), key=lambda e: self._order[e.id])

    def entries_with_keyword(self, keyword: str) -> list[Entry]:
        return self._by_keyword.get(keyword, [])

    def match_entries(self, entries, message: str) -> list[Match]:
        """Try these entries (found by a prefilter elsewhere) on the message, in catalog order."""
        out = []
        for entry in sorted(entries, key=lambda e: self._order[e.id]):
            m = self.match_entry(entry, message)
            if m is not None:
                out.append(m)
        return out

    def match(self, message: str) -> list[Match]:
        out = []
        for entry in self.candidates(message):
            m = self.match_entry(entry, message)
            if m is not None:
                out.append(m)
        return out

    def match_entry(self, entry: Entry, message: str) -> Match | None:
        """The first pattern of `entry` that matches, with its named groups."""
        for pattern in entry.patterns:
            try:
                m = pattern.search(message, timeout=MATCH_TIMEOUT_S)
            except TimeoutError:
                self.timeouts += 1
                continue
            if m:
                return Match(entry, {k: v for k, v in m.groupdict().items()})
        return None

    def keyword_hit(self, entry: Entry, message: str) -> bool:
        return any(kw in message for kw in entry.keywords)
