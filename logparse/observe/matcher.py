"""Match bare messages against the catalog: a literal prefilter, then the precise regexes.

The prefilter is one alternation of every entry's keywords, compiled with the standard `re` engine
(a C loop over the message); only messages it accepts are tried with the entries whose keywords
they contain, using the `regex` module with a per-search timeout.

Each entry also has a budget for the whole scan (ENTRY_BUDGET_S): a regex that passes the loader's
checks can still take the full timeout on every line of some log. The time of its slow searches
(those of a user entry that took SLOW_SEARCH_S or more, measured; the timeouts of any entry) is added
up, and an entry past its budget is disabled for the rest of the scan (`Matcher.disabled`, which a
report names). Fast searches never count: an entry that matches a million lines is not slow.
"""

from __future__ import annotations

import functools
import re
import time
from typing import NamedTuple

from logparse.read.keyword_automaton import KeywordAutomaton
from logparse.read.prefilter import compile_keywords
from patterns import Catalog, Entry
from patterns.schema import REGEX_TIMEOUT_S
from patterns.stages import TIMEOUT_FROM_CHARS

MATCH_TIMEOUT_S = (
    REGEX_TIMEOUT_S  # per pattern search; a pathological user pattern gives up instead of hanging
)
ENTRY_BUDGET_S = 2.0  # seconds of slow searches one entry may cost a scan (40 timeouts) before it is disabled
SLOW_SEARCH_S = (
    MATCH_TIMEOUT_S / 10
)  # a search that counts against the budget (a normal one takes microseconds)


class Match(NamedTuple):
    """An entry that matched a message, with its pattern's named groups. (A named tuple: one is built
    for every hit, and a frozen dataclass took three times as long to build.)"""

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
        # user entries: every search has the timeout, and a slow one is measured. Built-in entries (checked
        # by the catalog's tests) search a short message without the timeout, which costs 2 us a search
        # (as the stage markers do), and count only their timeouts
        self._measured = {e.id for e in self.entries if not e.builtin}
        self.spent: dict[str, float] = {}  # entry id -> seconds its slow searches cost so far
        self.entry_timeouts: dict[str, int] = {}
        self.disabled: dict[str, Entry] = {}  # entries past ENTRY_BUDGET_S, in the order they were disabled

    @functools.cached_property
    def _prefilter(self) -> re.Pattern[str] | None:
        """One alternation factored as a trie: at each position only the branch of its first character
        is tried (a flat alternation of a few hundred keywords is ~20x slower on long lines). Compiled
        on first use (25 ms): a scan that prefilters raw blocks never needs it."""
        return compile_keywords(self._keywords) if self._keywords else None

    @functools.cached_property
    def _automaton(self) -> KeywordAutomaton:
        """Which keywords a message holds, in one pass over it (asking each keyword was a pass over
        all of them per message: quadratic for a catalog check of a large user catalog)."""
        return KeywordAutomaton(self._keywords)

    def candidates(self, message: str) -> list[Entry]:
        if self._prefilter is None or not self._prefilter.search(message):
            return []
        seen: dict[str, Entry] = {}
        for i in self._automaton.found(message):
            for entry in self._by_keyword[self._keywords[i]]:
                seen.setdefault(entry.id, entry)
        return sorted(seen.values(), key=lambda e: self._order[e.id])

    def entries_with_keyword(self, keyword: str) -> list[Entry]:
        return self._by_keyword.get(keyword, [])

    def in_order(self, entries) -> tuple[Entry, ...]:
        """`entries` in catalog order (the order match_entries tries them in)."""
        return tuple(sorted(entries, key=lambda e: self._order[e.id]))

    def match_entries(self, entries, message: str, ordered: bool = False) -> list[Match]:
        """Try these entries (found by a prefilter elsewhere) on the message, in catalog order
        (`ordered`: they already are, see in_order)."""
        out = []
        for entry in entries if ordered else self.in_order(entries):
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
        """The first pattern of `entry` that matches, with its named groups (None once the entry is
        disabled: past its budget)."""
        if self.disabled and entry.id in self.disabled:
            return None
        measured = entry.id in self._measured
        if not measured and len(message) <= TIMEOUT_FROM_CHARS:
            # the common case, without a clock or a timeout (a line dense in hits makes millions)
            for pattern in entry.patterns:
                m = pattern.search(message)
                if m:
                    return Match(entry, m.groupdict())
            return None
        timeout = MATCH_TIMEOUT_S if measured or len(message) > TIMEOUT_FROM_CHARS else None
        for pattern in entry.patterns:
            start = time.perf_counter() if measured else 0.0
            try:
                m = pattern.search(message, timeout=timeout)
            except TimeoutError:
                self.timeouts += 1
                self.entry_timeouts[entry.id] = self.entry_timeouts.get(entry.id, 0) + 1
                self._spend(
                    entry, max(time.perf_counter() - start, MATCH_TIMEOUT_S) if measured else MATCH_TIMEOUT_S
                )
                if entry.id in self.disabled:
                    return None
                continue
            if measured:
                took = time.perf_counter() - start
                if took >= SLOW_SEARCH_S:
                    self._spend(entry, took)
            if m:
                return Match(entry, m.groupdict())  # (a new dict each time)
        return None

    def _spend(self, entry: Entry, seconds: float) -> None:
        spent = self.spent.get(entry.id, 0.0) + seconds
        self.spent[entry.id] = spent
        if spent > ENTRY_BUDGET_S and entry.id not in self.disabled:
            self.disabled[entry.id] = entry

    def keyword_hit(self, entry: Entry, message: str) -> bool:
        return any(kw in message for kw in entry.keywords)
