"""verl's step lines read by shape (logparse.read.steps.StepParser): a compiled shape never backtracks."""

from __future__ import annotations

import re

from logparse.read.steps import WANTED, StepParser, _bytes_shape, _whole_pattern, parse_step_line


def _line(step: int, keys: list[str], wrap: bool) -> str:
    value = "np.float64(0.5)" if wrap else "0.5"
    return f"step:{step} - " + " - ".join(f"{k}:{value}" for k in keys)


def test_a_value_is_read_one_way_only() -> None:
    """A compiled shape reads each wanted value one way only (WANTED's two branches exclude each other,
    and neither class holds the character that ends it), so a line of the same colons but another
    shape fails at once. With an overlap (np.float64(x) read either way) a 60-key line that failed at
    its last key tried 2^60 ways: a real log's --metrics-csv took minutes."""
    wrapped, plain = (re.compile(b) for b in _branches())
    for value in ("np.float64(0.5)", "np.float64(nan)", "0.5", "7", "-inf", "np.float64(1))", "x)"):
        assert not (wrapped.fullmatch(value) and plain.fullmatch(value)), value
    keys = [f"actor/k{i}:" for i in range(60)]
    assert _whole_pattern(keys, range(60)).pattern.count(WANTED) == 60
    shape = _bytes_shape(keys, range(60))
    assert shape is not None and shape.pattern.pattern.count(WANTED.encode()) == 60


def _branches() -> list[str]:
    inner = WANTED[len("(?:") : -1]  # (?:A|B) -> A|B
    head, _, tail = inner.partition("|(?!")
    return [head, "(?!" + tail]


def test_values_in_np_float64_read_as_the_line_parser_reads_them() -> None:
    keys = [f"actor/k{i}" for i in range(60)]
    parser = StepParser(all_keys=True)
    for step in range(1, 8):  # (the shape is compiled once it has come back a few times)
        line = _line(step, keys, wrap=step % 2 == 0)
        got = parser.parse(line)
        want_step, want = parse_step_line(line)
        assert got is not None and got[0] == want_step == step
        assert dict(zip(got[1], got[2], strict=True)) == want
    other = _line(9, keys[:-1] + ["actor/other"], wrap=True)  # the same colons, another last key
    got = parser.parse(other)
    assert got is not None and dict(zip(got[1], got[2], strict=True)) == parse_step_line(other)[1]
