"""Which observers a line is for, from the prefilter keywords found in its raw bytes.

The reader's prefilter (logparse.read.prefilter) finds, in one pass over the raw bytes, the keywords of
every observer: the stage tracker's, the environment tracker's, the catalog entries', the fallback
rules' and the traceback structure's. A line's set of keyword ids then says which observers need to
see it (`route`), and whether it can be a progress line applied without a record (`progress_words`).
Both answers depend on the set alone and are remembered per set (a log repeats a few sets).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from logparse.observe.matcher import Matcher
from logparse.read.progress_syntax import TQDM_KEYWORD
from logparse.read.steps import STEP_KEYWORD

MAX_SETS = 65536  # keyword sets whose answers are remembered


class Route(NamedTuple):
    stage_words: list[str]  # the stage tracker's keywords in the line
    env_words: list[str]  # the environment tracker's
    entries: tuple  # the catalog entries that have one of its keywords, in match order
    untraced: tuple  # those of them that need no traceback (`entries` itself when that is all)
    bare: bool  # may it be a bare failure line (a keyword of patterns/fallback.yaml)?


class Routes:
    """Per prefilter keyword id, what a line with that keyword is for."""

    def __init__(
        self,
        keywords: Iterable[str],
        matcher: Matcher,
        stage_keywords: Iterable[str],
        env_keywords: Iterable[str],
        bare_keywords: Iterable[str],
        structural: Iterable[str],
    ):
        keywords = list(keywords)
        self.matcher = matcher
        stage_words, env_words, bare_words = set(stage_keywords), set(env_keywords), set(bare_keywords)
        structural = set(structural)
        # prefilter keyword id -> the catalog entries that have that keyword
        self._entries_of_keyword: list[tuple] = [tuple(matcher.entries_with_keyword(k)) for k in keywords]
        # prefilter keyword id -> the keyword, where the stage / environment tracker looks for it
        self._stage_word = [k if k in stage_words else None for k in keywords]
        self._env_word = [k if k in env_words else None for k in keywords]
        self._bare_word = [k in bare_words for k in keywords]
        # keyword id -> a line with it is no progress line: a catalog entry's, a fallback rule's or the
        # traceback structure's keyword (but `step:` and the bar's) ...
        progress_ok = {STEP_KEYWORD, TQDM_KEYWORD}
        self._not_progress = [
            (k in structural and k not in progress_ok)
            or k in bare_words
            or bool(self._entries_of_keyword[i])
            or (k not in stage_words and k not in env_words)
            for i, k in enumerate(keywords)
        ]
        # ... an environment keyword (but `step:`), which only a step line's message may have (the
        # environment tracker reads no keyword of a step line once it knows the format)
        self._env_only = [k in env_words and k != STEP_KEYWORD for k in keywords]
        self.cache: dict[frozenset[int], Route] = {}  # keyword ids -> route(ids)
        self._progress: dict[frozenset[int], tuple | None] = {}

    def route(self, ids: frozenset[int]) -> Route:
        """What the prefilter keywords `ids` of a line call for (cached per set)."""
        routed = self.cache.get(ids)
        if routed is not None:
            return routed
        stage_words = [w for w in map(self._stage_word.__getitem__, ids) if w is not None]
        env_words = [w for w in map(self._env_word.__getitem__, ids) if w is not None]
        entries = self.matcher.in_order({e.id: e for k in ids for e in self._entries_of_keyword[k]}.values())
        untraced = tuple(e for e in entries if not e.frames)
        bare = any(map(self._bare_word.__getitem__, ids))
        routed = Route(
            stage_words, env_words, entries, untraced if len(untraced) < len(entries) else entries, bare
        )
        if len(self.cache) < MAX_SETS:
            self.cache[ids] = routed
        return routed

    def progress_words(self, ids: frozenset[int]) -> tuple[tuple[str, ...], bool] | None:
        """For a line with prefilter keyword ids `ids` that may be a progress line applied without a
        record (logparse.read.progress_lines): (its stage tracker keywords, whether it has an environment
        keyword, which only a step line may have). None when it has no stage tracker keyword (`step:`,
        the bar's, a stage marker's: a line a stage marker alone marks, as a Hugging Face Trainer's
        loss dict, is applied as a bar is), or a keyword that rules it out: a catalog entry's,
        patterns/fallback.yaml's, or the traceback structure's (but `step:` and the bar's). (Cached per
        set; asked where the blocks are made.)"""
        words = self._progress.get(ids, False)
        if words is False:
            words = None
            stage_words = tuple(w for w in map(self._stage_word.__getitem__, ids) if w is not None)
            env = any(map(self._env_only.__getitem__, ids))
            # (an environment keyword rules out any line but a step line: its message starts with `step:`)
            if (
                stage_words
                and not any(map(self._not_progress.__getitem__, ids))
                and (not env or STEP_KEYWORD in stage_words)
            ):
                words = (stage_words, env)
            if len(self._progress) < MAX_SETS:
                self._progress[ids] = words
        return words
