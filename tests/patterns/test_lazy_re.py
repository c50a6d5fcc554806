"""LazyRe: a regex compiled on its first use behaves as the compiled one, with either engine."""

from __future__ import annotations

import pickle
import re

import pytest
import regex

from patterns.schema import LazyRe

TEXT = "[rank3]: host=gpu-7 RANK=3 rank12 ok"
PATTERN = r"rank(?P<n>\d+)"


@pytest.mark.parametrize(("engine", "module"), [("re", re), ("regex", regex)])
def test_it_answers_as_the_compiled_pattern(engine: str, module) -> None:
    compiled = module.compile(PATTERN, module.IGNORECASE)
    lazy = LazyRe(PATTERN, module.IGNORECASE, engine=engine)
    assert lazy._compiled is None  # nothing compiled until it is used
    assert lazy.search(TEXT).span() == compiled.search(TEXT).span()
    assert type(lazy.compiled()) is type(compiled)
    assert lazy.match(TEXT) is None and lazy.match(TEXT, 1).group("n") == "3"
    assert lazy.fullmatch("RANK7").group(0) == "RANK7"
    assert [m.span() for m in lazy.finditer(TEXT)] == [m.span() for m in compiled.finditer(TEXT)]
    assert lazy.findall(TEXT) == compiled.findall(TEXT)
    assert lazy.sub("r", TEXT) == compiled.sub("r", TEXT)
    assert lazy.split(TEXT) == compiled.split(TEXT)
    assert lazy.groupindex == compiled.groupindex and lazy.pattern == PATTERN


def test_after_the_first_call_the_methods_are_the_compiled_patterns_own() -> None:
    lazy = LazyRe(PATTERN, engine="regex")
    lazy.search(TEXT)
    for name in ("search", "match", "fullmatch", "finditer", "findall", "sub", "split"):
        assert getattr(lazy, name).__self__ is lazy.compiled()  # no call in between on a hot path


def test_it_pickles_as_its_text_flags_and_engine() -> None:
    lazy = LazyRe(PATTERN, re.IGNORECASE, engine="regex")
    lazy.search(TEXT)
    back = pickle.loads(pickle.dumps(lazy))
    assert back == lazy and back._compiled is None
    assert back.search(TEXT).group("n") == "3" and isinstance(back.compiled(), regex.Pattern)
