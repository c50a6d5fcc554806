"""verl's step line, `step:N - key:value - key:value ...` (reference §1.3), read into numbers.

The keys come in dict order, the values as `0.123` (v0.1-v0.4) or their full repr (v0.5+:
`np.float64(0.1)`, `np.int64(3)`, `nan`, `inf`, `1e-06`, plain ints). The line is split on ` - ` and
each part on its LAST `:` (data-source names inside keys may hold anything); values that are not
numbers are dropped. The step line may follow a tqdm bar on the same line, so `step:N - ` is
searched, not anchored. Which keys a report uses is patterns.progress.wanted_key.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import NamedTuple

from patterns.numbers import log_int
from patterns.progress import progress_wordings, wanted_key

# The step line's syntax is patterns/progress.yaml's (`step_lines`), compiled here once.
_P = progress_wordings()
STEP_KEYWORD = _P.literal("step-keyword")
# what the step time's regex (`step-time`) needs in a line: found first, the regex is slow on a long line
STEP_TIME_KEY = _P.item("step-time").field("keywords")[0]
# `step:N - ` not preceded by a word character or `/`, so `training/global_step:71 - ` is no step line.
STEP_RE = re.compile(_P.regex("step-line"))
# what STEP_RE finds of a step line at the start of a plain ASCII message, in its bytes (its lookbehind
# holds at the start, and \d is [0-9] in ASCII): the fast path of progress lines
STEP_HEAD = re.compile(rb"step:([0-9]+) - ")
NUMPY_SCALAR_RE = re.compile(_P.regex("numpy-scalar"))

NP_FLOAT64 = _P.literal("numpy-float64")
NP_LENGTH = len(NP_FLOAT64)
NUMBER_FIRST = frozenset("0123456789+-.niNI")  # what a number's text may start with (after stripping)


def parse_value(text: str) -> float | None:
    """`0.123`, `np.float64(0.1)`, `np.int64(3)`, `nan`, `inf`, `-inf`, `1e-06`, `7` -> float; else None."""
    t = text.strip()
    if t.startswith("np."):
        if t.startswith(NP_FLOAT64) and t.endswith(")") and "\n" not in t:
            t = t[len(NP_FLOAT64) : -1].strip()  # what NUMPY_SCALAR_RE takes from the commonest form
        else:
            m = NUMPY_SCALAR_RE.match(t)
            if m:
                t = m.group(1).strip()
    if not t or t[0] not in NUMBER_FIRST:  # fast reject of words, lists, tensors, True/False
        return None
    try:
        return float(t)
    except ValueError:
        return None


def split_step_line(message: str) -> tuple[int, list[tuple[str, str]]] | None:
    """(step, [(key, raw value), ...]) of a step line anywhere in `message`, or None."""
    m = STEP_RE.search(message)
    if not m:
        return None
    pairs = []
    for part in message[m.end() :].split(" - "):
        key, sep, value = part.rpartition(":")
        key = key.strip()
        if sep and key:
            pairs.append((key, value))
    return log_int(m.group(1)), pairs


def parse_step_line(message: str) -> tuple[int, dict[str, float]] | None:
    """(step, {key: value}) with the numeric values of a step line (parse_value over
    split_step_line; a later key wins), or None if there is none."""
    split = split_step_line(message)
    if split is None:
        return None
    step, pairs = split
    values = {}
    for key, raw in pairs:
        value = parse_value(raw)
        if value is not None:
            values[key] = value
    return step, values


WHOLE_AFTER = 2  # a shape's lines in a row before it is compiled as one expression (StepParser._whole)
WHOLE_COMPILES = 64  # shapes compiled so at most, per parser
# a wanted value in a whole shape's expression: the run inside `np.float64(...)` when the run is so
# wrapped, else the whole run of non-spaces (StepParser's shape path: `np.float64(x)` -> x, anything
# else as it is). The two branches exclude each other and neither class holds the character that ends
# it, so a value is read one way only: a line of the same colons but another shape fails at once, where
# an overlap (np.float64(x) read either way) backtracked for minutes on a 60-key line (2^60 ways to
# fail). A value like `np.float64(1))` reads neither way: the line takes the usual path.
WANTED = f"(?:{re.escape(NP_FLOAT64)}([^ )]*)\\)|(?!{re.escape(NP_FLOAT64)})([^ ]*))"


def _whole_pattern(raw_keys: Sequence[str], wanted: Sequence[int]) -> re.Pattern[str]:
    """`key:value - key:value ...` with these raw keys (each with its `:`) in this order, each value a
    run of anything but a space, those at the positions `wanted` captured.

    Where it matches a tail holding just one colon a key (the caller counts them), that tail splits
    on ` - ` into exactly these parts, each `key:value`: a value has no space, so no ` - ` starts in
    it, and a key holds neither a colon nor ` - ` (it was cut at both). Those are the conditions of
    StepParser's shape path. A wanted value is captured as that path converts it (WANTED): what is
    inside `np.float64(...)` when the whole value is so wrapped, else the whole value; the same
    numbers (_whole_values). A single-character class that is not a space runs ~3x faster in `re`
    than one that also excludes the colon, hence the count beside it."""
    want = frozenset(wanted)
    return re.compile(
        " - ".join(re.escape(key) + (WANTED if i in want else "[^ ]*") for i, key in enumerate(raw_keys))
    )


def _whole_values(whole: re.Pattern[str], tail: str) -> list[float] | None:
    """The wanted values of a tail that `whole` (_whole_pattern) matches, as StepParser's shape path
    converts them (`np.float64(x)` or `x`, through float()); None where it does not match or a value
    is no number (the caller then goes the usual way)."""
    m = whole.fullmatch(tail)
    if m is None:
        return None
    try:  # (one group of each wanted value's pair holds it, the other is None)
        return [float(v) for v in m.groups() if v is not None]
    except ValueError:
        return None


class BytesShape(NamedTuple):
    """A compiled shape (StepParser._whole) over the bytes of a whole step line from its `step:`
    (_bytes_shape): its expression (group 1 the step), what picks the wanted values from a match, the
    colons such a line holds (one after `step:` and after each key), and the group (empty) that ends
    the first key holding STEP_TIME_KEY and where that keyword starts from there (0 and 0: none)."""

    pattern: re.Pattern[bytes]
    pick: Callable[[re.Match[bytes]], tuple[bytes, ...]]
    colons: int
    time_group: int
    time_back: int


def _bytes_shape(raw_keys: Sequence[str], wanted: Sequence[int]) -> BytesShape | None:
    """_whole_pattern's shape over a line's ASCII bytes from `step:` (STEP_HEAD, then the keys), a
    wanted value captured as WANTED captures it (two groups, one of them None); None for a key that is
    not ASCII."""
    if not all(map(str.isascii, raw_keys)):
        return None
    want = frozenset(wanted)
    time_key = next((i for i, key in enumerate(raw_keys) if STEP_TIME_KEY in key), -1)
    parts = []
    values = []
    group = 2  # (1: the step)
    time_group = time_back = 0
    for i, key in enumerate(raw_keys):
        part = re.escape(key.encode())
        if i == time_key:
            part += b"()"
            time_group, time_back = group, len(key) - key.index(STEP_TIME_KEY)
            group += 1
        if i in want:
            part += WANTED.encode()  # (two groups: the value inside np.float64(...), or the run)
            values += (group, group + 1)
            group += 2
        else:
            part += b"[^ ]*"
        parts.append(part)
    pattern = re.compile(STEP_HEAD.pattern + b" - ".join(parts))
    if len(values) > 1:
        pick = functools.partial(_groups, tuple(values))
    elif values:
        pick = functools.partial(_group, values[0])
    else:
        pick = _no_groups
    return BytesShape(pattern, pick, 1 + len(raw_keys), time_group, time_back)


def _groups(groups: tuple[int, ...], m: re.Match[bytes]) -> tuple[bytes, ...]:
    return m.group(*groups)


def _group(group: int, m: re.Match[bytes]) -> tuple[bytes, ...]:
    return (m.group(group),)


def _no_groups(m: re.Match[bytes]) -> tuple[bytes, ...]:
    return ()


def picker(positions: Sequence[int]) -> Callable[[list[str]], tuple[str, ...]]:
    """What takes the items at `positions` of a list, in that order, as a tuple (one itemgetter call:
    a step line's wanted parts without a Python loop over them)."""
    if len(positions) > 1:
        return itemgetter(*positions)
    if positions:
        at = positions[0]
        return lambda items: (items[at],)
    return lambda items: ()


class StepParser:
    """Step lines -> (step, keys, values, names): the numeric values of the wanted keys (of all keys
    when `all_keys`), and `names`, every key of the line.

    A run prints the same keys in every step line, so the line's shape (its keys, which of them are
    wanted: all with `all_keys`) is worked out once and reused while the keys stay the same: only the
    wanted values are converted; once the same keys have come back a few times, the shape is one
    compiled expression over the whole tail (_whole_pattern), faster on lines of many keys. The
    result equals parse_step_line's restricted to the wanted keys (tested)."""

    def __init__(self, all_keys: bool = False):
        self.all_keys = all_keys
        self._keys: list[str] | None = None  # the raw keys of the last shape
        # the last shape: (positions of the wanted keys, their names, every name, each raw key + ':',
        # the length of that for the wanted ones, what picks the wanted parts of a split line)
        self._shape: (
            tuple[
                tuple[int, ...],
                tuple[str, ...],
                tuple[str, ...],
                tuple[str, ...],
                tuple[int, ...],
                Callable[[list[str]], tuple[str, ...]],
            ]
            | None
        ) = None
        # the last shape as one expression over a whole tail, once it has come back WHOLE_AFTER times
        # in a row (compiling it costs ~1 ms a 60-key shape: not for every shape of a log whose keys
        # change line after line, and at most WHOLE_COMPILES times a parser)
        self._whole: re.Pattern[str] | None = None
        self._bytes: BytesShape | None = None  # the same shape over a line's bytes (parse_bytes)
        self._repeats = 0
        self._compiles = WHOLE_COMPILES

    def parse(self, message: str) -> tuple[int, tuple[str, ...], list[float], tuple[str, ...]] | None:
        """(step, kept keys, their values, names) or None. `names`: every key of the line (stripped,
        in order), whatever its value; the same tuple object while the shape stays the same."""
        m = STEP_RE.search(message)
        if not m:
            return None
        return self.parse_tail(log_int(m.group(1)), message[m.end() :], message)

    def parse_tail(
        self, step: int, tail: str, message: str
    ) -> tuple[int, tuple[str, ...], list[float], tuple[str, ...]]:
        """parse(message), given what its STEP_RE search finds: `step` (its group) and `tail` (the
        message after the match); for a caller that has matched the step line's head already."""
        shape = self._shape
        whole = self._whole
        if whole is not None and tail.count(":") == len(shape[3]) and "\n" not in tail and tail.isascii():
            values = _whole_values(whole, tail)
            if values is not None:
                return step, shape[1], values, shape[2]
        parts = tail.split(" - ")
        if (
            shape is not None
            and len(parts) == len(shape[3])
            and tail.count(":") == len(parts)
            and all(map(str.startswith, parts, shape[3]))
        ):
            # the last line's keys again, each part holding one colon (the one after its key): what
            # the split below would find, without splitting every part
            if whole is None:
                self._repeated()
            return self._shape_values(step, tail, parts, shape)
        if tail.count(":") != len(parts) or not all(map(str.__contains__, parts, ":" * len(parts))):
            return self._general(message)
        # every part holds exactly one colon: the pieces alternate key, value
        pieces = tail.replace(" - ", ":").split(":")
        keys = pieces[0::2]
        if keys != self._keys:
            names = [k.strip() for k in keys]
            if "" in names or len(set(names)) != len(names):
                self._keys = self._shape = self._whole = self._bytes = None
                return self._general(message)
            take = tuple(i for i, name in enumerate(names) if self.all_keys or wanted_key(name))
            self._keys = keys
            self._whole, self._bytes, self._repeats = None, None, 0
            self._shape = (
                take,
                tuple(names[i] for i in take),
                tuple(names),
                tuple(k + ":" for k in keys),
                tuple(len(keys[i]) + 1 for i in take),
                picker(take),
            )
        take, wanted, names = self._shape[:3]
        kept: list[str] = []
        values: list[float] = []
        for i, key in zip(take, wanted, strict=True):
            value = parse_value(pieces[2 * i + 1])
            if value is not None:
                kept.append(key)
                values.append(value)
        return step, tuple(kept), values, names

    def parse_bytes(
        self, line: bytes
    ) -> tuple[int, tuple[str, ...], list[float], tuple[str, ...], int] | None:
        """parse(message) and where STEP_TIME_KEY is first in it (-1: nowhere), of a step line whose
        message is the ASCII `line` (from its `step:`, no newline), when it is in the last shape and
        that shape is compiled (_repeated); else None (then parse). Its values are each a run of
        non-spaces without a colon: the line has only its keys' colons and the head's, as parse_tail's
        whole path asks, and _bytes_shape's expression then reads what _whole_pattern's does; the
        keyword, which holds a colon, can only be in a key."""
        shape = self._bytes
        if shape is None or len(line) - len(line.replace(b":", b"")) != shape.colons:  # (count is slower)
            return None
        m = shape.pattern.fullmatch(line)
        if m is None:
            return None
        try:
            values = [float(v) for v in shape.pick(m) if v is not None]
        except ValueError:
            return None
        at = m.start(shape.time_group) - shape.time_back if shape.time_group else -1
        return log_int(m.group(1)), self._shape[1], values, self._shape[2], at

    @staticmethod
    def _shape_values(
        step: int, tail: str, parts: list[str], shape: tuple
    ) -> tuple[int, tuple[str, ...], list[float], tuple[str, ...]]:
        """parse_tail of a tail split into `parts` that are the keys of `shape` (the last line's), each
        holding one colon."""
        at, wanted, names, _, cuts, pick = shape
        plain = "\n" not in tail  # (a message never holds one: parse_value's regex would see it)
        if plain and tail.isascii():
            # each wanted value `np.float64(x)` or `x` at once: where float() reads an ASCII x,
            # parse_value reads the same number (what float() accepts starts, past the whitespace
            # both drop, with a character of NUMBER_FIRST, and `np.` is no number)
            try:
                values = [
                    float(
                        part[cut + NP_LENGTH : -1]
                        if part.startswith(NP_FLOAT64, cut) and part[-1] == ")"
                        else part[cut:]
                    )
                    for part, cut in zip(pick(parts), cuts, strict=True)
                ]
            except ValueError:
                pass
            else:
                return step, wanted, values, names
        kept = []
        values = []
        for j, key, cut in zip(at, wanted, cuts, strict=True):
            raw = parts[j][cut:]
            # parse_value, for a value with nothing around it to strip: `np.float64(x)` or `x`
            t = raw[len(NP_FLOAT64) : -1] if raw.startswith(NP_FLOAT64) and raw.endswith(")") else raw
            if plain and t[:1] in NUMBER_FIRST and not t.startswith("np."):
                try:
                    value = float(t)
                except ValueError:  # (also a value ending in whitespace float() keeps and strip() drops)
                    value = parse_value(raw)
            else:
                value = parse_value(raw)
            if value is not None:
                kept.append(key)
                values.append(value)
        return step, tuple(kept), values, names

    def _repeated(self) -> None:
        """The last shape came back: after WHOLE_AFTER times, while compiles are left, compile it as
        one expression (_whole_pattern)."""
        self._repeats += 1
        if self._repeats >= WHOLE_AFTER and self._compiles > 0:
            self._compiles -= 1
            shape = self._shape
            self._whole = _whole_pattern(shape[3], shape[0])
            self._bytes = _bytes_shape(shape[3], shape[0])

    def _general(self, message: str) -> tuple[int, tuple[str, ...], list[float], tuple[str, ...]] | None:
        """parse_step_line's values (of the wanted keys), from one split of the line."""
        split = split_step_line(message)
        if split is None:
            return None
        step, pairs = split
        keep: dict[str, float] = {}
        for key, raw in pairs:
            if self.all_keys or wanted_key(key):
                value = parse_value(raw)
                if value is not None:
                    keep[key] = value
        return step, tuple(keep), list(keep.values()), tuple(dict.fromkeys(k for k, _ in pairs))


# --- an ordinary training script's step line, learnt by its shape (patterns/progress.yaml `counter_lines`):
# a step or iteration counter and numeric key/value pairs, in any order around it
COUNTER_KEYWORDS: tuple[str, ...] = _P.literals("counter-keywords")
COUNTER_RE = re.compile(_P.regex("counter-head"))
COUNTER_PAIR_RE = re.compile(_P.regex("counter-pair"))
MAX_COUNTER_SHAPES = 4096  # (stream, shape) pairs remembered per reader: past it, no new shape is learnt
MAX_COUNTER_PAIRS = 256  # key/value pairs read of one line at most
# words of letters a counter line may hold besides its counter and pairs (a label: `train |`, `[eval]`);
# `reward failed on sample 1 of step 1; scoring it 0` and `Saving the model after step 7 took 3.2 s`
# hold more: sentences about a step, not step lines
MAX_OTHER_WORDS = 2
WORD_RE = re.compile(r"[A-Za-z]{2,}")


class CounterLine(NamedTuple):
    """What parse_counter_line reads in a message: its counter, the counter's word (`step`, `iter`, as
    printed) and the numeric key/value pairs around it, in the line's order."""

    step: int
    word: str
    pairs: tuple[tuple[str, float], ...]


def parse_counter_line(message: str) -> CounterLine | None:
    """The counter and the numeric pairs of a line shaped like a training script's step line (`step 7
    loss 2.31 lr 1e-3`, `{"step": 7, "loss": 2.31}`), or None: no counter, no pair beside it, or more
    than MAX_OTHER_WORDS other words (a sentence that names a step). A
    line of one shape is no progress on its own (CounterLines). verl's `step:N - ` line is not read
    here (STEP_RE is)."""
    m = COUNTER_RE.search(message)
    if m is None:
        return None
    pairs: dict[str, float] = {}
    other = 0  # words outside the counter and the pairs: a sentence about a step is no step line
    for part in (message[: m.start()], message[m.end() :]):
        at = 0
        for p in COUNTER_PAIR_RE.finditer(part):
            if len(pairs) >= MAX_COUNTER_PAIRS:
                break
            other += len(WORD_RE.findall(part, at, p.start()))
            at = p.end()
            key = p.group("key")
            if key not in pairs and key.lower() != m.group("word").lower():
                pairs[key] = float(p.group("value"))
        other += len(WORD_RE.findall(part, at))
        if other > MAX_OTHER_WORDS:
            return None
    if not pairs:
        return None
    return CounterLine(log_int(m.group("step")), m.group("word"), tuple(pairs.items()))


class CounterLines:
    """Counter lines (parse_counter_line) that are progress: a shape (the counter's word and the keys,
    in order) counts in a stream once a line of it follows one with a lower counter there; from then on
    every line of it counts. `take` hands back the step line's values and, for the line that confirms
    its shape, the one before it (its row was held back). `all_keys`: keep every key's value, not only
    those a report uses (as StepParser)."""

    def __init__(self, all_keys: bool = False):
        self.all_keys = all_keys
        # (stream, word, keys) -> None: confirmed; else the last line's (step, values) not yet progress
        self._shapes: dict[tuple, tuple[int, tuple[float, ...]] | None] = {}
        self._kept: dict[tuple[str, ...], tuple[int, ...]] = {}  # names -> the places of the kept keys

    def take(
        self, stream: tuple, message: str
    ) -> tuple[int, tuple[str, ...], list[float], tuple[str, ...], tuple[int, list[float]] | None] | None:
        """(step, kept keys, their values, every key, the held-back earlier row (step, values) or None)
        of a counter line that is progress; None for any other line (remembered when it may start a
        shape)."""
        line = parse_counter_line(message)
        if line is None:
            return None
        names = tuple(k for k, _ in line.pairs)
        shape = (stream, line.word, names)
        values = tuple(v for _, v in line.pairs)
        held = self._shapes.get(shape, False)
        if held is False or (held is not None and line.step <= held[0]):
            if held is not False or len(self._shapes) < MAX_COUNTER_SHAPES:
                self._shapes[shape] = (line.step, values)
            return None
        kept = self._kept.get(names)
        if kept is None:
            kept = tuple(i for i, k in enumerate(names) if self.all_keys or wanted_key(k))
            if len(self._kept) < MAX_COUNTER_SHAPES:
                self._kept[names] = kept
        earlier = None
        if held is not None:  # (this line confirms the shape: the one before it is a step line too)
            self._shapes[shape] = None
            earlier = (held[0], [held[1][i] for i in kept])
        return line.step, tuple(names[i] for i in kept), [values[i] for i in kept], names, earlier
