"""Which of many literal keywords occur in a text, in one pass over it (Aho-Corasick).

A user catalog can bring tens of thousands of keywords. Asking `kw in text` of each is a pass over
the keywords per text; comparing every keyword with every other (which ones a keyword is inside of)
is quadratic: 20,000 keywords took 17 s to load. The automaton reads a text once, character by
character, and at each position follows the links of the keywords that end there, so the cost is the
text's length plus the keywords found (each is reported once per text: a keyword already found means
the keywords on its link chain were found with it).

`KeywordAutomaton(keywords).found(text)` is the set of keyword indices in `text`; `containers(limit)`
says for each keyword which other keywords contain it, for those held in at most `limit` others (the
prefilter keeps such a keyword alone in its database and searches a line it marks for the others).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

NONE = -1


class KeywordAutomaton:
    """The Aho-Corasick automaton of `keywords` (distinct, non-empty strings; str or bytes alike)."""

    def __init__(self, keywords: Sequence) -> None:
        self.keywords = keywords
        goto: list[dict] = [{}]
        ends = [NONE]  # state -> the keyword that ends there (keywords are distinct: one at most)
        for index, word in enumerate(keywords):
            state = 0
            for ch in word:
                nxt = goto[state].get(ch)
                if nxt is None:
                    nxt = len(goto)
                    goto[state][ch] = nxt
                    goto.append({})
                    ends.append(NONE)
                state = nxt
            ends[state] = index
        fail = [0] * len(goto)
        out = [NONE] * len(goto)  # state -> the nearest state on its fail chain (not itself) with a keyword
        queue = deque(goto[0].values())
        while queue:
            state = queue.popleft()
            for ch, nxt in goto[state].items():
                f = fail[state]
                while f and ch not in goto[f]:
                    f = fail[f]
                target = goto[f].get(ch, 0)
                fail[nxt] = target if target != nxt else 0
                out[nxt] = fail[nxt] if ends[fail[nxt]] != NONE else out[fail[nxt]]
                queue.append(nxt)
        self._goto, self._fail, self._ends, self._out = goto, fail, ends, out

    def found(self, text) -> set[int]:
        """The indices of the keywords that occur in `text`."""
        goto, fail, ends, out = self._goto, self._fail, self._ends, self._out
        hits: set[int] = set()
        state = 0
        for ch in text:
            while state and ch not in goto[state]:
                state = fail[state]
            state = goto[state].get(ch, 0)
            at = state if ends[state] != NONE else out[state]
            while at != NONE and ends[at] not in hits:
                hits.add(ends[at])
                at = out[at]
        return hits

    def containers(self, limit: int) -> dict[int, tuple[int, ...]]:
        """Keyword index -> the indices of the other keywords that contain it, for each keyword held in
        at least one and at most `limit` others. A keyword found in more than `limit` is dropped from
        the walks from then on, so the cost stays linear even when every keyword holds every shorter
        one (`a`, `aa`, `aaa`, ...)."""
        goto, fail, ends = self._goto, self._fail, self._ends
        out = list(self._out)  # shortened below past keywords held in too many others
        held: dict[int, list[int]] = {}
        full: set[int] = set()
        for j, word in enumerate(self.keywords):
            state = 0
            seen: set[int] = set()
            for ch in word:
                while state and ch not in goto[state]:
                    state = fail[state]
                state = goto[state].get(ch, 0)
                at = state if ends[state] != NONE else out[state]
                at = self._skip_full(at, out, full)
                while at != NONE and ends[at] not in seen:
                    i = ends[at]
                    seen.add(i)
                    if i != j:  # (a keyword is in its own text, at its end)
                        holders = held.setdefault(i, [])
                        holders.append(j)
                        if len(holders) > limit:
                            full.add(i)
                    at = self._skip_full(out[at], out, full)
        return {i: tuple(js) for i, js in held.items() if i not in full}

    def _skip_full(self, at: int, out: list[int], full: set[int]) -> int:
        """The first state from `at` on its output chain whose keyword is not in `full`; the links
        walked past are pointed at it (path compression: each full keyword is passed over once)."""
        ends = self._ends
        first = at
        while at != NONE and ends[at] in full:
            at = out[at]
        while first != at:
            nxt = out[first]
            out[first] = at
            first = nxt
        return at
