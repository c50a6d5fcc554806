"""Render a Report in one of the formats. Templates only format; every decision is in the Report."""

from __future__ import annotations

import functools
import re

import jinja2

from logparse.model import Report
from reports.jsonreport import render_json

FORMATS = ("text", "md", "json")

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#~])")
_BACKTICKS = re.compile(r"`+")
_ANSI = {"red": "\x1b[31m", "green": "\x1b[32m", "yellow": "\x1b[33m", "bold": "\x1b[1m", "dim": "\x1b[2m"}


def md_text(value: object) -> str:
    """Inline Markdown text: log-derived text can't open HTML, links, emphasis or table cells."""
    text = " ".join(str(value).split())
    return _MD_SPECIAL.sub(r"\\\1", text)


def md_code(value: object) -> str:
    """Inline code span that survives backticks inside the text."""
    text = " ".join(str(value).split())
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fence(lines: list[str], info: str = "text") -> str:
    """A fenced code block longer than any backtick run inside it."""
    longest = max((len(m) for line in lines for m in _BACKTICKS.findall(line)), default=0)
    ticks = "`" * max(3, longest + 1)
    body = "\n".join(line.replace("\r", "\\r") for line in lines)
    return f"{ticks}{info}\n{body}\n{ticks}"


def compact_ranks(ranks: tuple[int, ...] | list[int]) -> str:
    """(0, 1, 2, 3, 5, 6, 7) -> '0-3, 5-7'."""
    out = []
    ranks = sorted(set(ranks))
    i = 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        out.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
    return ", ".join(out)


def where(rc) -> str:
    parts = []
    if rc.rank is not None:
        parts.append(f"rank {rc.rank}")
    if rc.local_rank is not None:
        parts.append(f"local rank {rc.local_rank}")
    if rc.actor:
        parts.append(rc.actor)
    if rc.pid is not None:
        parts.append(f"pid {rc.pid}")
    if rc.node:
        parts.append(f"node {rc.node}")
    return ", ".join(parts)


@functools.lru_cache(maxsize=4)
def _env(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=autoescape,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(md_text=md_text, md_code=md_code, compact_ranks=compact_ranks)
    env.globals.update(fence=fence, where=where)
    return env


def _paint(color: bool):
    def paint(text: object, *styles: str) -> str:
        if not color or not styles:
            return str(text)
        return "".join(_ANSI[s] for s in styles) + str(text) + "\x1b[0m"
    return paint


def render(report: Report, fmt: str, color: bool = False) -> str:
    if fmt == "json":
        return render_json(report)
    if fmt == "md":
        return _env(False).get_template("report.md.j2").render(r=report)
    if fmt == "text":
        return _env(False).get_template("summary.txt.j2").render(r=report, paint=_paint(color))
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
