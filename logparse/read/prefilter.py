"""Find the lines worth a look in a chunk of raw bytes, without visiting the others in Python.

A line is a candidate when it contains one of the keywords: the catalog's, the stage markers', the
environment tracker's, and the structural ones the traceback assembler and trackers need. The
fast engine is Hyperscan (one literal database, scanned over megabyte chunks at hundreds of MB/s);
without it, the same keywords as one trie-factored `re` alternation give the same candidate lines,
more slowly. Matching is on the raw bytes of a line (before ANSI codes are removed), so a keyword
must appear contiguously in the raw line.

Each match calls back into Python, so each keyword's expression takes the rest of its line
(LINE_REST): Hyperscan reports an expression once at an offset, so a line calls back once per keyword
in it, however often the keyword is there (a step line holds `step:` four times), all at the line's
end. The callback only groups them by line; the line's start and keyword set are worked out after
the scan.

A keyword that contains another (`Training Progress:` holds `Training Progress`) could be left out of
the database and searched for in the lines the shorter one marks (MAX_SEARCHED), the keywords found
in a line being the same. It is not: a line calls back once per keyword anyway, and searching a 3 KB
step line for the two keywords holding its `epoch` cost more than the callback of one found in it
(block making on a dense log of step lines and bars: 0.051 -> 0.033 s of prefilter per 20 MB).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence

from logparse.read.keyword_automaton import KeywordAutomaton
from patterns.cache import cached, source_of
from patterns.formats import formats

try:  # an optional, faster engine; results are identical without it
    import hyperscan as _hs
except ImportError:  # pragma: no cover - exercised by forcing engine="re"
    _hs = None

# What the traceback assembler, the trackers and the scanner itself look for, beyond the catalog.
_F = formats()
STRUCTURAL_KEYWORDS = (
    "Traceback (most recent call last)",
    'File "',
    "The above exception was the direct cause",
    "During handling of the above exception",
    "ray::",
    "Fatal Python error",
    "hit an exception",
    "step:",
    "Training Progress",
    ":actor_name:",
    *_F.literals("sample-text-start"),  # decoded model text, skipped (patterns/formats.yaml)
    *_F.literals("sample-text-end"),
    *_F.literals("collective-lines"),  # the NCCL watchdog's reports (observe/collectives.py)
    "Root Cause",
    "exitcode",
    "ChildFailedError",
)


def available_engines() -> list[str]:
    return (["hyperscan"] if _hs is not None else []) + ["re"]


def trie_regex(keywords: Iterable[str]) -> str:
    """One regex alternation that finds any of the literal `keywords`, factored as a trie
    (`a(?:bc|xy)`): at each position only the branch of its first character is tried, several times
    faster than a flat `kw1|kw2|...` for a few hundred keywords. Used for str and (encoded) bytes.
    Built without recursion: a keyword is a path as long as itself (a user's may be thousands)."""
    trie: dict = {}
    for word in keywords:
        if not word:
            continue
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}  # a keyword ends here: whatever follows needs no check
    if not trie:
        return r"(?!)"
    built: dict[int, str] = {}  # id(node) -> its regex, children before parents
    stack: list[tuple[dict, bool]] = [(trie, False)]
    while stack:
        node, children_done = stack.pop()
        if "" in node:
            built[id(node)] = ""
        elif not children_done:
            stack.append((node, True))
            stack.extend((child, False) for child in node.values())
        else:
            branches = [re.escape(ch) + built.pop(id(node[ch])) for ch in sorted(node)]
            built[id(node)] = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return built[id(trie)]


def compile_keywords(keywords: Iterable[str], as_bytes: bool = False) -> re.Pattern:
    """trie_regex(keywords) compiled (for bytes: encoded as UTF-8). Keywords that branch at every
    character nest the trie's groups as deep as they are long, past what `re`'s parser can recurse
    into: then one flat alternation, longest keyword first (the same lines are found, more slowly)."""
    words = sorted({k for k in keywords if k}, key=len, reverse=True)
    try:
        pattern = trie_regex(words)
        return re.compile(pattern.encode("utf-8") if as_bytes else pattern)
    except (RecursionError, OverflowError):
        flat = "|".join(re.escape(k) for k in words) or r"(?!)"
        return re.compile(flat.encode("utf-8") if as_bytes else flat)


def _compiled_shape(value: object) -> bool:
    """Is a cached value (serialized database, containing) shaped as Prefilter._compile makes it?"""
    return (
        isinstance(value, tuple)
        and len(value) == 3
        and isinstance(value[0], bytes)
        and isinstance(value[1], dict)
        and all(
            isinstance(k, int) and isinstance(v, tuple) and all(isinstance(i, int) for i in v)
            for k, v in value[1].items()
        )
        and isinstance(value[2], frozenset)
        and all(isinstance(i, int) for i in value[2])
    )


def containing(keywords: Sequence[str], limit: int) -> dict[int, tuple[int, ...]]:
    """Index of a keyword -> the indices of the other keywords that contain it, for the keywords held in
    at most `limit` others (none with a newline: a match is one line's). Only keywords no other contains
    need to be searched for. Linear in the keywords' length (logparse.read.keyword_automaton): comparing
    every pair took 17 s for 20,000 keywords."""
    plain = [i for i, k in enumerate(keywords) if "\n" not in k]
    found = KeywordAutomaton([keywords[i] for i in plain]).containers(limit)
    return {plain[i]: tuple(plain[j] for j in js) for i, js in found.items()}


# What follows each keyword in its Hyperscan expression: the rest of its line. Hyperscan reports an
# expression once at an offset, so a line calls back once per keyword in it (not once per occurrence: a
# step line holds `step:` four times), each at the line's end.
LINE_REST = rb"[^\n]*(?:\n|\z)"
MAX_SEARCH_SETS = 4096  # the keyword sets whose searches (Prefilter._searches_of) are remembered
# a keyword held in more keywords than this leaves them in the Hyperscan database (0: all are in it)
MAX_SEARCHED = 0
# Hyperscan refuses an expression longer than this ("Pattern length exceeds limit"; hyperscan 0.7-0.9,
# Hyperscan 5.4): a keyword whose escaped form is longer is in the database by its first PREFIX_BYTES
MAX_EXPRESSION = 16_000
PREFIX_BYTES = 4_000  # escaped, at most 8,000 characters
# Past this many keywords (a large user catalog) the database holds the keywords alone, compiled by
# Hyperscan's literal compiler, and a line is that of each match's end (_lines_by_match): with LINE_REST
# after each, compiling 20,000 keywords took 8 s (0.34 s as literals), 80,000 over 30 s. The built-in
# catalog and its structure (about 560 keywords) stay below it, so a scan's hot path is unchanged.
MAX_LINE_REST_KEYWORDS = 2_000


class Prefilter:
    """`lines(block)` -> the lines of `block` that contain a keyword, with the keywords found."""

    def __init__(self, keywords: Iterable[str], engine: str | None = None):
        self.keywords = tuple(sorted({k for k in keywords if k}))
        if engine is None:
            engine = available_engines()[0]
        if engine == "hyperscan" and _hs is None:
            raise ValueError("the hyperscan engine is not installed (pip install hyperscan)")
        if engine not in ("hyperscan", "re"):
            raise ValueError(f"unknown prefilter engine {engine!r}")
        self.engine = engine
        self._encoded = [k.encode("utf-8") for k in self.keywords]
        # each keyword's expression takes the rest of its line (LINE_REST), unless a keyword spans lines
        # or there are too many keywords to compile so quickly (MAX_LINE_REST_KEYWORDS)
        self._literals = len(self._encoded) > MAX_LINE_REST_KEYWORDS
        self._whole_lines = not self._literals and not any(b"\n" in k for k in self._encoded)
        if engine == "hyperscan":
            try:
                self._load_database()
            except _hs.error:  # a limit of Hyperscan's that no keyword passes alone: the same lines, slower
                self.engine = engine = "re"
        if engine == "re":
            self._re = compile_keywords(self.keywords, as_bytes=True)

    def _load_database(self) -> None:
        """The Hyperscan database compiled, or as an earlier run compiled it for the same keywords; with
        which keywords a match is to be searched for (_containing) and which are in it by a prefix
        only (_partial)."""
        parts = [
            b"\0".join(self._encoded),
            b"literals" if self._literals else b"line-rest",
            _hs.__version__.encode(),
            sys.platform.encode(),
            *source_of("logparse.read.prefilter", "logparse.read.keyword_automaton"),
        ]
        serialized, self._containing, self._partial = cached(
            "prefilter", parts, self._compile, (), _compiled_shape
        )
        try:
            self._db = _hs.loadb(serialized, _hs.HS_MODE_BLOCK)
        except Exception:
            serialized, self._containing, self._partial = self._compile()
            self._db = _hs.loadb(serialized, _hs.HS_MODE_BLOCK)
        self._scratch = _hs.Scratch(self._db)
        self._searches: dict[frozenset[int], tuple[tuple[int, bytes], ...] | None] = {}  # _searches_of

    def _compile(self) -> tuple[bytes, dict[int, tuple[int, ...]], frozenset[int]]:
        """The Hyperscan database, serialized; which keywords a line's match of another is to be
        searched for: a keyword held in at most MAX_SEARCHED others is in the database alone, and a
        line it marks is searched for those; the keywords holding one held in more (`Error` is in 34)
        are in the database themselves (a callback each costs less than 34 searches of every line
        with `Error`) -- with MAX_SEARCHED 0 every keyword is in it (see the module's docstring); and
        the keywords too long for Hyperscan (an expression of more than MAX_EXPRESSION characters),
        which are in it by their first PREFIX_BYTES: a line their prefix marks is searched for the
        whole keyword. Each expression is followed by LINE_REST, unless a keyword spans lines."""
        inside = containing(self.keywords, MAX_SEARCHED) if MAX_SEARCHED else {}
        outer = {i for ids in inside.values() for i in ids}
        compiled = [i for i in range(len(self.keywords)) if i not in outer]
        rest = LINE_REST if self._whole_lines else b""
        quote = (
            (lambda k: k) if self._literals else re.escape
        )  # (the literal compiler takes them as they are)
        exprs = [quote(self._encoded[i]) + rest for i in compiled]
        partial = set()
        for n, i in enumerate(compiled):
            if len(exprs[n]) > MAX_EXPRESSION:
                exprs[n] = quote(self._encoded[i][:PREFIX_BYTES]) + rest
                partial.add(i)
        db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
        db.compile(
            expressions=exprs,
            ids=compiled,
            elements=len(exprs),
            flags=[0] * len(exprs),
            literal=self._literals,
        )
        return _hs.dumpb(db), inside, frozenset(partial)

    def lines(self, block: bytes) -> list[tuple[int, frozenset[int]]]:
        """(line start, ids of the keywords in that line) for every line of `block` with a keyword;
        ids index `self.keywords`."""
        return self.lines_and_ends(block)[0]

    def lines_and_ends(self, block: bytes) -> tuple[list[tuple[int, frozenset[int]]], list[int]]:
        """lines(block), and where each of those lines ends (its newline, or the end of `block`)."""
        if self.engine == "hyperscan":
            return self._lines_hyperscan(block)
        out: list[tuple[int, frozenset[int]]] = []
        ends: list[int] = []
        pos = 0
        search = self._re.search
        find, rfind = block.find, block.rfind
        encoded = self._encoded
        while True:
            m = search(block, pos)
            if m is None:
                return out, ends
            start = rfind(b"\n", 0, m.start()) + 1
            end = find(b"\n", m.end())
            line = block[start : end if end >= 0 else len(block)]
            out.append((start, frozenset(i for i, k in enumerate(encoded) if k in line)))
            ends.append(end if end >= 0 else len(block))
            if end < 0:
                return out, ends
            pos = end + 1

    def _lines_hyperscan(self, block: bytes) -> tuple[list[tuple[int, frozenset[int]]], list[int]]:
        # Each match calls back into Python: the callback only groups the keywords by line (a line's
        # come in turn, all at its end: LINE_REST); the rest is done after the scan.
        if not self._whole_lines:
            return self._lines_by_match(block)
        tos: list[int] = []  # where each line's matches end: after its newline, or the end of `block`
        sets: list[set[int]] = []
        ids: set[int] = set()
        line_to = -1

        def on_match(kw: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            nonlocal line_to, ids
            if to == line_to:
                ids.add(kw)
                return
            line_to = to
            ids = {kw}
            tos.append(to)
            sets.append(ids)

        self._db.scan(block, match_event_handler=on_match, scratch=self._scratch)
        searches, rfind, find = self._searches, block.rfind, block.find
        out = []
        ends = []
        size = len(block)
        for to, ids in zip(tos, sets, strict=True):
            end = to - 1 if to < size or block.endswith(b"\n") else to
            start = rfind(b"\n", 0, end) + 1
            found = frozenset(ids)
            search = searches.get(found, False)
            if search is False:
                search = self._searches_of(found)
            if search is None:  # (a keyword in by its prefix)
                found = self._line_keywords(block, start, end, ids)
                if not found:
                    continue
            elif search:
                more = [other for other, word in search if find(word, start, end) >= 0]
                if more:
                    found = found.union(more)
            out.append((start, found))
            ends.append(end)
        return out, ends

    def _searches_of(self, ids: frozenset[int]) -> tuple[tuple[int, bytes], ...] | None:
        """What _line_keywords searches a line for, matched `ids`, when no keyword of them is in the
        database by its prefix only: (id, keyword) of each longer keyword holding one of them; else
        None (then _line_keywords itself tells). Remembered per set, MAX_SEARCH_SETS at most."""
        search = None
        if self._partial.isdisjoint(ids):
            containing, encoded = self._containing, self._encoded
            others = dict.fromkeys(o for kw in sorted(ids) if kw in containing for o in containing[kw])
            search = tuple((other, encoded[other]) for other in others)
        if len(self._searches) < MAX_SEARCH_SETS:
            self._searches[ids] = search
        return search

    def _lines_by_match(self, block: bytes) -> tuple[list[tuple[int, frozenset[int]]], list[int]]:
        """_lines_hyperscan of a database whose expressions are the keywords alone (one spans lines):
        a line is that of the end of a match."""
        out: list[tuple[int, frozenset[int]]] = []
        ends: list[int] = []
        ids: set[int] = set()
        line_end = -1
        start = -1
        keywords_of = self._line_keywords

        def on_match(kw: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            nonlocal line_end, start, ids
            if to > line_end:
                if start >= 0 and (found := keywords_of(block, start, line_end, ids)):
                    out.append((start, found))
                    ends.append(line_end)
                start = block.rfind(b"\n", 0, to) + 1
                end = block.find(b"\n", to)
                line_end = end if end >= 0 else len(block)
                ids = set()
            ids.add(kw)

        self._db.scan(block, match_event_handler=on_match, scratch=self._scratch)
        if start >= 0 and (found := keywords_of(block, start, line_end, ids)):
            out.append((start, found))
            ends.append(line_end)
        return out, ends

    def _line_keywords(self, block: bytes, start: int, end: int, ids: set[int]) -> frozenset[int]:
        """The ids of the keywords of the line at block[start:end] from those the database matched in it
        (`ids`): a keyword matched by its prefix only if it is there whole, and the longer ones holding
        a matched keyword that are there."""
        partial, containing, encoded = self._partial, self._containing, self._encoded
        if partial and not partial.isdisjoint(ids):
            for kw in [kw for kw in ids if kw in partial]:
                if block.find(encoded[kw], start, end) < 0:
                    ids.discard(kw)
        if not containing.keys().isdisjoint(ids):
            for kw in [kw for kw in ids if kw in containing]:
                for other in containing[kw]:
                    if block.find(encoded[other], start, end) >= 0:
                        ids.add(other)
        return frozenset(ids)
