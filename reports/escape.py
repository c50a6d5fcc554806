"""Escaping of log-derived text for each place a report puts it: Markdown (text, code, fences, the HTML of
a `<details>` summary), CSV cells, the terminal. Every string that came from a log is hostile: these
helpers make it inert, and the renderers call nothing else to put such a string in a report.

Markdown is meant for a public GitHub issue, where more than CommonMark is live: bare URLs, `www.`
and e-mail addresses become links, `@name` notifies a person and `#123` cross-references an issue.
Log text therefore gets, outside code:

* the Markdown specials backslash-escaped (`\\ ` * _ [ ] < > | # ~ &`): no emphasis, link, image,
  HTML tag, autolink, table cell break, heading or entity;
* a WORD JOINER (U+2060, invisible) after `@` and `#` when a name or number follows, inside `GH-` when a
  number follows, inside `://` and after `www`: no mention, issue reference or autolink. Copying the
  text copies the joiner too;
* all whitespace (newlines included) collapsed to single spaces: one string never starts a block.

Code (spans and fences) is inert on GitHub; a span or fence is delimited by a backtick run longer
than any inside the text, so the text cannot close it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator
from enum import Enum
from typing import TYPE_CHECKING, TypeVar

from patterns.schema import LazyRe

if TYPE_CHECKING:
    import pandas

T = TypeVar("T")

JOINER = "\u2060"  # WORD JOINER: zero width, no line break; breaks GitHub's mention / link / reference rules

# (LazyRe: compiled when Markdown is first rendered)
_MD_SPECIAL = LazyRe(r"([\\`*_\[\]<>|#~&])")
_BACKTICKS = LazyRe(r"`+")
# `@name` (a mention, or an e-mail autolink), `#123` and `owner/repo#123` / `GH-123` (issue references:
# the joiner goes after `#`, and between `GH` and `-` in either case), `scheme://` and
# `www.` (autolinks), `mailto:` / `xmpp:` (GitHub autolinks these schemes without `//`)
_LIVE_TEXT = LazyRe(
    r"(?<=@)(?=\w)|(?<=#)(?=\d)|(?<=:)(?=//)"
    r"|(?i:(?<=\bwww)(?=\.)|(?<=\bmailto)(?=:)|(?<=\bxmpp)(?=:)|(?<=\bgh)(?=-\d))"
)


def code_spans(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, code) of each code span in `text`, in order: a run of n backticks opens a span that
    the next run of exactly n backticks on the same line closes (a run with no such partner is text),
    as `(?<!`)(`+)(?!`)(.+?)(?<!`)\\1(?!`)` finds them. In one pass: that regex looked for each run's
    partner to the end of the line, and runs of many lengths made it superlinear."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text)]
    partner: list[int | None] = [None] * len(runs)
    later: dict[int, int] = {}  # run length -> the next run of that length on the same line
    for i in range(len(runs) - 1, -1, -1):
        if i + 1 < len(runs) and text.find("\n", runs[i][1], runs[i + 1][0]) >= 0:
            later.clear()
        start, end = runs[i]
        partner[i] = later.get(end - start)
        later[end - start] = i
    i = 0
    while i < len(runs):
        j = partner[i]
        if j is None:
            i += 1
            continue
        yield runs[i][0], runs[j][1], text[runs[i][1] : runs[j][0]]
        i = j + 1


def neutralise(text: str) -> str:
    """`text` with mentions, issue references and autolinks broken by an invisible joiner."""
    return _LIVE_TEXT.sub(JOINER, text)


def _escape(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", neutralise(text))


def md_text(value: object) -> str:
    """Inline Markdown text: log-derived text can't open HTML, links, emphasis, table cells, mentions."""
    return _escape(" ".join(str(value).split()))


def md_code(value: object) -> str:
    """Inline code span that survives backticks inside the text (and `|` inside a table cell)."""
    text = " ".join(str(value).split())
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def md_cell_code(value: object) -> str:
    """An inline code span inside a table cell: a `|` would end the cell even inside code."""
    return md_code(value).replace("|", "\\|")


def md_inline(value: object) -> str:
    """Text whose `code` spans are meant as code (the fix line that quotes a job's settings: "This job
    sets `key=value`"), but whose content came from a log: each span becomes a code span the content
    cannot close, the text between spans is escaped like md_text."""
    text = " ".join(str(value).split())
    out: list[str] = []
    last = 0
    for start, end, code in code_spans(text):
        out += [_escape(text[last:start]), md_code(code)]
        last = end
    out.append(_escape(text[last:]))
    return "".join(out)


def md_html(value: object) -> str:
    """Text inside an HTML block of the Markdown (the `<summary>` of a `<details>`), where Markdown
    escapes do not work: HTML-escaped, mentions and links neutralised, on one line."""
    import html  # here: with html.entities, 1.7 ms that a JSON scan need not pay

    text = " ".join(str(value).split())
    return neutralise(html.escape(text, quote=True))


def fence(lines: Iterable[str], info: str = "text") -> str:
    """A fenced code block longer than any backtick run inside it."""
    lines = list(lines)
    longest = max((len(m) for line in lines for m in _BACKTICKS.findall(line)), default=0)
    ticks = "`" * max(3, longest + 1)
    body = "\n".join(line.replace("\r", "\\r") for line in lines)
    return f"{ticks}{info}\n{body}\n{ticks}"


# -- CSV ------------------------------------------------------------------------------------------------
CSV_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # OWASP: what a spreadsheet reads as a formula


def csv_cell(value: object) -> object:
    """A CSV cell that a spreadsheet will not run: a string starting like a formula gets a leading
    `'` (OWASP's CSV-injection rule). Numbers stay numbers (a metric of -0.5 is no formula)."""
    if isinstance(value, str) and value.startswith(CSV_FORMULA_STARTS):
        return "'" + value
    return value


# -- the terminal, and log text in a report file ---------------------------------------------------------
# escape sequences (CSI with its parameters, the private `ESC[>`, `ESC[=`, `ESC[<`, `ESC[?` ones too;
# OSC, DCS, SOS, PM and APC strings up to their terminator, at most 512 characters; two-character ones)
_ESCAPE_SEQUENCES = (
    r"\x1b\[[0-?]*[ -/]*[@-~]?|\x1b[\]PX^_][^\x07\x1b]{0,512}(?:\x07|\x1b\\)?|\x1b[\x20-\x7e]?"
)
# the bidirectional embeddings, overrides and isolates that reorder what is shown (U+202E shows
# `exe.txt` as `txt.exe`)
_BIDI = r"\u202a-\u202e\u2066-\u2069"
# ... and C0 and C1 controls other than tab and newline (backspace, bell, U+009B: the 8-bit CSI), DEL
_TERMINAL_UNSAFE = re.compile(_ESCAPE_SEQUENCES + r"|[\x00-\x08\x0b-\x1f\x7f\x80-\x9f" + _BIDI + "]")
# The same in a report file, but for the carriage return: each format shows it as text (`\r` in a
# Markdown code block, a space in Markdown text, `\r` in JSON), as the reports always did.
_FILE_UNSAFE = re.compile(_ESCAPE_SEQUENCES + r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x9f" + _BIDI + "]")
_PLAIN = frozenset({int, float, bool, type(None)})


def terminal_text(value: object) -> str:
    """`value` without anything a terminal would act on (colour, cursor movement, retitling, carriage
    return, backspace, bell, text direction): log text shows as text."""
    return _TERMINAL_UNSAFE.sub("", str(value))


def without_controls(value: T) -> T:
    """`value` (a Report, or anything in one: dataclasses, tuples, lists, dicts, strings) with what
    terminal_text drops, but the carriage return, taken out of every string: a Markdown, HTML or JSON
    report that is pasted, viewed or printed to a terminal shows log text as text. What holds nothing
    to drop is returned as it is, the same object."""
    if isinstance(value, Enum):  # (a closed vocabulary, not log text: kept as the member it is)
        return value
    if isinstance(value, str):
        return _FILE_UNSAFE.sub("", value)  # type: ignore[return-value]
    if isinstance(value, (tuple, list)):
        if set(map(type, value)) <= _PLAIN:  # (a metric series: thousands of numbers)
            return value
        items = [without_controls(v) for v in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return tuple(items) if isinstance(value, tuple) else items  # type: ignore[return-value]
    if isinstance(value, dict):
        pairs = [(without_controls(k), without_controls(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True)):
            return value
        return dict(pairs)  # type: ignore[return-value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            old = getattr(value, f.name)
            new = without_controls(old)
            if new is not old:
                changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value


def csv_safe_frame(frame: pandas.DataFrame) -> pandas.DataFrame:
    """A copy of `frame` for `to_csv` whose header, index name and string cells are csv_cell'ed;
    numeric columns are left alone."""
    out = frame.rename(columns=lambda c: csv_cell(str(c)))
    if out.index.name is not None:
        out.index = out.index.rename(csv_cell(str(out.index.name)))
    for column in out.columns[out.dtypes.eq(object)]:
        # only the formula-like strings change (a whole-column map would turn ints with gaps into floats)
        risky = [isinstance(v, str) and v.startswith(CSV_FORMULA_STARTS) for v in out[column]]
        if any(risky):
            out.loc[risky, column] = "'" + out.loc[risky, column]
    return out
