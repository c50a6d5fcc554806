"""Find the lines worth a look in a chunk of raw bytes, without visiting the others in Python.

A line is a candidate when it contains one of the keywords: the catalog's, the stage markers', the
environment tracker's, and the structural ones the traceback assembler and trackers need. The
fast engine is Hyperscan (one literal database, scanned over megabyte chunks at hundreds of MB/s);
without it, the same keywords as one trie-factored `re` alternation give the same candidate lines,
more slowly. Matching is on the raw bytes of a line (before ANSI codes are removed), so a keyword
must appear contiguously in the raw line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

try:  # an optional, faster engine; results are identical without it
    import hyperscan as _hs
except ImportError:  # pragma: no cover - exercised by forcing engine="re"
    _hs = None

# What the traceback assembler, the trackers and the scanner itself look for, beyond the catalog.
STRUCTURAL_KEYWORDS = (
    "Traceback (most recent call last)", 'File "', "The above exception was the direct cause",
    "During handling of the above exception", "ray::", "Fatal Python error", "hit an exception",
    "step:", "Training Progress", ":actor_name:", "[prompt]", "[response]", "[ground_truth]", "[score]",
    "WorkNCCL(", "last enqueued", "Root Cause", "exitcode", "ChildFailedError",
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
        if engine == "hyperscan":
            self._db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
            exprs = [re.escape(k.encode("utf-8")) for k in self.keywords]
            self._db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs),
                             flags=[0] * len(exprs))
            self._scratch = _hs.Scratch(self._db)
        else:
            self._re = compile_keywords(self.keywords, as_bytes=True)
        self._encoded = [k.encode("utf-8") for k in self.keywords]

    def lines(self, block: bytes) -> list[tuple[int, frozenset[int]]]:
        """(line start, ids of the keywords in that line) for every line of `block` with a keyword;
        ids index `self.keywords`."""
        out: list[tuple[int, frozenset[int]]] = []
        if self.engine == "hyperscan":
            ids: set[int] = set()
            line_end = -1
            start = -1

            def on_match(kw: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
                nonlocal line_end, start, ids
                if to > line_end:
                    if start >= 0:
                        out.append((start, frozenset(ids)))
                    start = block.rfind(b"\n", 0, to) + 1
                    end = block.find(b"\n", to)
                    line_end = end if end >= 0 else len(block)
                    ids = set()
                ids.add(kw)

            self._db.scan(block, match_event_handler=on_match, scratch=self._scratch)
            if start >= 0:
                out.append((start, frozenset(ids)))
            return out
        pos = 0
        search = self._re.search
        find, rfind = block.find, block.rfind
        encoded = self._encoded
        while True:
            m = search(block, pos)
            if m is None:
                return out
            start = rfind(b"\n", 0, m.start()) + 1
            end = find(b"\n", m.end())
            line = block[start:end if end >= 0 else len(block)]
            out.append((start, frozenset(i for i, k in enumerate(encoded) if k in line)))
            if end < 0:
                return out
            pos = end + 1
