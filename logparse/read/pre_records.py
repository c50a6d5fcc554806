"""Candidate lines read apart: their prefixes read where their block is made, not by the scanner.

Reading a line's prefixes (logparse.read.normalize) and masking a hit's message for grouping
(logparse.observe.hits.mask) depend on the line alone, and cost 5-10 us and ~8 us of the ~50 us a
record costs the scanner, the one process of a scan that cannot be shared: on a log whose candidate
lines mostly become records (a checkpoint line of every rank, a log dense in errors) its work is the
scan's critical path while the reader processes wait. So a reader process (logparse.read.blocks) also
reads the prefixes of its block's candidate lines that are not progress lines into `PreColumns`:
arrays, one row a candidate, that cross the pipe with the block's other columns, and the message of a
line whose keywords may make it a catalog hit masked (the analysis' `masker`), when the reader had to
wait for that block (the scanner is behind: blocks.READ_APART). The scanner builds such a line's record
from its row (`record`) instead of normalising it; a block the scanner makes itself has no rows.

A row is only what a normaliser reads in the line alone (Normalizer.read_apart): a line whose reading
takes the scanner's state (a year-less timestamp takes the year of the last full date before it) or
is not a plain piece of its text (carriage returns, several processes' writes run together) has no
row, and the scanner reads it as before; a full date's year is set in the scanner's normaliser when it
takes the row, in the line's turn. What the line's file says of its origin (its place in a log
folder, the actor a Ray worker log names at its top) is the scanner's and joins the row there
(normalize.origin_of, as in Normalizer.normalize). So a record is the same whichever process read its
prefixes (tests/logparse/read/test_pre_records.py; the reports of every sample, fixture and
benchmark shape are compared in tests/logparse/test_progress_lines.py and benchmarks/).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

from logparse.read.normalize import Normalizer, Origin, Record, origin_of
from logparse.read.sources import MAX_LINE_BYTES, Line, decode_line
from patterns.numbers import INT64_MAX

# a row's int fields, in this order (-1: none, for the optional ones)
AT, END, RANK, LOCAL_RANK, PID, NODE, ACTOR, LEVEL, REPEAT, YEAR = range(10)
FIELDS = 10
NONE = -1


@dataclass
class PreColumns:
    """The candidate lines of one block read apart: candidate i's row is ints[i * FIELDS:(i + 1) *
    FIELDS] (AT -1: no row, the scanner normalises the line) and times[i] (NaN: none); NODE, ACTOR
    and LEVEL are indexes in `names`, this block's own table."""

    ints: array = field(default_factory=lambda: array("q"))
    times: array = field(default_factory=lambda: array("d"))
    names: list[str] = field(default_factory=list)
    masks: list[str | None] = field(default_factory=list)  # candidate i's message masked (PreReader's masker)

    def has(self, i: int) -> bool:
        return self.ints[i * FIELDS + AT] >= 0

    def record(self, i: int, line: Line, default: Origin | None, normalizer: Normalizer) -> Record:
        """Candidate i's record (it has a row), as normalizer.normalize(line, 0, default) gives it; the
        year of a full date in it is set in `normalizer`, as normalising it would."""
        ints = self.ints
        at = i * FIELDS
        year = ints[at + YEAR]
        if year:
            normalizer.year = year
        names = self.names
        rank, local_rank, pid = ints[at + RANK], ints[at + LOCAL_RANK], ints[at + PID]
        node, actor, level = ints[at + NODE], ints[at + ACTOR], ints[at + LEVEL]
        time = self.times[i]
        origin = origin_of(
            None if rank < 0 else rank,
            None if local_rank < 0 else local_rank,
            None if pid < 0 else pid,
            None if node < 0 else names[node],
            None if actor < 0 else names[actor],
            None if math.isnan(time) else time,
            None if level < 0 else names[level],
            ints[at + REPEAT],
            default,
        )
        rec = Record(line, origin, line.text[ints[at + AT] : ints[at + END]])
        rec.masked = self.masks[i]
        return rec


_NO_ROW = (NONE,) * FIELDS


class PreReader:
    """Reads the candidate lines of blocks apart (one per process that makes blocks: its normaliser's
    caches are its own)."""

    def __init__(self, masker: Callable[[frozenset[int], str], str | None] | None = None) -> None:
        self.normalizer = Normalizer()
        # (a line's prefilter keyword ids, its message) -> the message masked for grouping, for a line
        # that may be a catalog hit (None: not one); the analysis' (logparse.pipeline)
        self.masker = masker

    def read(
        self,
        data: bytes,
        starts: list[int],
        ends: list[int],
        skip: set[int] | frozenset[int],
        keywords: list[frozenset[int]] | None = None,
    ) -> PreColumns:
        """The rows of the candidate lines at `starts` in `data` (a block of whole lines), each ending at
        its `ends` (Prefilter.lines_and_ends), but those in `skip` (progress lines the scanner applies
        without a record); with each one's prefilter `keywords`, its message masked too where the
        masker says."""
        out = PreColumns()
        ints, times, names, masks = out.ints, out.times, out.names, out.masks
        masker = self.masker if keywords is not None else None
        ids: dict[str, int] = {}
        read_apart = self.normalizer.read_apart
        nan = math.nan
        for i, start in enumerate(starts):
            got = None
            if i not in skip:
                raw = data[start : ends[i]]
                text = decode_line(raw[:MAX_LINE_BYTES])
                got = read_apart(text)
                if got is not None and not _fits(got[0]):
                    got = None  # a number past int64 (a hostile line): the scanner reads it itself
            if got is None:
                ints.extend(_NO_ROW)
                times.append(nan)
                masks.append(None)
                continue
            f, at, stop, year = got
            masks.append(None if masker is None else masker(keywords[i], text[at:stop]))
            node = f.node
            actor = f.actor
            level = f.level
            ints.extend(
                (
                    at,
                    stop,
                    NONE if f.rank is None else f.rank,
                    NONE if f.local_rank is None else f.local_rank,
                    NONE if f.pid is None else f.pid,
                    NONE if node is None else _name(node, ids, names),
                    NONE if actor is None else _name(actor, ids, names),
                    NONE if level is None else _name(level, ids, names),
                    f.repeat,
                    year,
                )
            )
            times.append(nan if f.time is None else f.time)
        return out


def _fits(f) -> bool:
    """Do the prefixes' numbers fit a row's int64 columns?"""
    return all(n is None or -1 <= n <= INT64_MAX for n in (f.rank, f.local_rank, f.pid, f.repeat))


def _name(text: str, ids: dict[str, int], names: list[str]) -> int:
    got = ids.get(text)
    if got is None:
        got = ids[text] = len(names)
        names.append(text)
    return got
