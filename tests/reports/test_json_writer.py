"""The JSON report's writer (reports/jsonreport.py `_dumps`) writes a metric series' steps and values
itself, for speed: its text is json.dumps's, byte for byte, for any data."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reports.jsonreport import _dumps

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["nan", "inf", "-inf"]),
    st.text(max_size=8),
)
SERIES = st.fixed_dictionaries(
    {
        "key": st.text(max_size=8),
        "steps": st.lists(st.integers(0, 10**9), max_size=12),
        "values": st.one_of(st.lists(SCALARS, max_size=12), st.lists(st.floats(-1e6, 1e6), max_size=12)),
    }
)
DATA = st.fixed_dictionaries(
    {
        "metrics": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {
                    "series": st.lists(SERIES, max_size=4),
                    "steps": st.integers(0, 100),
                    "keys": st.lists(st.text()),
                }
            ),
        ),
        "notes": st.lists(st.text(max_size=20), max_size=3),
    }
)


def _reference(data: dict) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)


@pytest.mark.slow  # 15 s: 300 generated documents, each written both ways
@settings(max_examples=300, deadline=None)
@given(DATA)
def test_the_writer_writes_what_json_dumps_writes(data: dict) -> None:
    assert _dumps(copy.deepcopy(data)) == _reference(data)


def test_a_non_finite_float_is_refused_as_json_dumps_refuses_it() -> None:
    for value in (float("nan"), float("inf")):
        data = {"metrics": {"series": [{"key": "k", "steps": [1, 2], "values": [1.0, value]}]}}
        with pytest.raises(ValueError):
            _reference(copy.deepcopy(data))
        with pytest.raises(ValueError):
            _dumps(data)
