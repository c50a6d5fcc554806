"""Numbers read from a log line's digits (a pid, a rank, a step, a line number, a count).

A pattern's `\\d+` matches a run of any length (up to a 1 MB line), and Python refuses to read one of
more digits than `sys.get_int_max_str_digits()` (4,300 by default) with a ValueError, a guard against
the quadratic time such a conversion takes. `log_int` reads such a run as TOO_BIG instead: past any
int64, so every check of a number that is too large for its column or for reason treats it as it
treats a 20-digit one, and a hostile line cannot end the scan."""

from __future__ import annotations

import sys

INT64_MAX = (1 << 63) - 1  # the largest number an int64 column holds
TOO_BIG = 1 << 64  # what a run of more digits than Python reads is read as
_LIMIT = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0


def log_int(digits: str | bytes) -> int:
    """int(digits) of a run of digits a pattern matched in a log line; TOO_BIG when it has more digits
    than Python reads (see the module docstring)."""
    if _LIMIT and len(digits) > _LIMIT:
        return TOO_BIG
    return int(digits)
