"""Run the examples of the wordings files (patterns/formats.yaml, environment.yaml, progress.yaml)
through the code that uses them: a prefix example through the Normalizer, a traceback through the
TracebackAssembler, a frame's path through frame_kind, a folder path through file_origin, a watchdog
line through the CollectiveAnalyzer, ... (each section's reader below).

An example passes when the wording hits it (a match example) or does not (a no_match example), the
regex's named groups hold what the example states (`groups`), and what the code makes of it equals what
the example states (`expect`). A wording hits a text when its regex matches at the start (the `prefixes`
section, or a message field read `at: message-start`) or anywhere, in the raw line or in its bare
message (a path also in each of its folder names); when its literal is in the text; when one word of
its list is.
Blocks are judged by their `expect` (a no_match block needs one): a block holds lines the wording is
meant to be near.
"""

from __future__ import annotations

import datetime
import functools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import regex

from logparse.read.normalize import Normalizer, Record
from logparse.read.sources import Line, strip_ansi
from patterns.validation import CatalogError, Problem
from patterns.wordings import Wording, WordingExample, Wordings

ANCHORED_SECTIONS = frozenset({"prefixes"})


@dataclass(frozen=True)
class WordingFailure:
    file: str
    line: int  # the example's line (the item's, for a problem of the item itself)
    wording: str
    kind: str  # match | no_match
    text: str
    reason: str

    def __str__(self) -> str:
        return (
            f"{self.file}:{self.line}: wording '{self.wording}': {self.kind} example {self.reason}\n"
            f"    text: {self.text}"
        )


# -- what the code makes of an example, per section -------------------------------------------------------
def _records(text: str, block: bool) -> list[Record]:
    """The example's lines, each normalised the way a scan does (one Normalizer for all of them)."""
    normalizer = Normalizer()
    out = []
    for i, raw in enumerate(text.splitlines() if block else [text], 1):
        rec = normalizer.normalize(Line("<example>", i, strip_ansi(raw)), seq=i)
        out.append(rec)
    return out


def _stamp(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def origin_facts(example: WordingExample) -> dict[str, Any]:
    """The Normalizer's record of a line: its bare message and what its prefixes say."""
    rec = _records(example.text, False)[0]
    o = rec.origin
    return {
        "message": rec.message,
        "rank": o.rank,
        "local_rank": o.local_rank,
        "pid": o.pid,
        "node": o.node,
        "actor": o.actor,
        "level": o.level,
        "repeat": o.repeat,
        "time": _stamp(o.time),
    }


def traceback_facts(example: WordingExample) -> dict[str, Any]:
    """The TracebackAssembler over the example's lines: the last line's role and the last traceback."""
    from logparse.observe.tracebacks import TracebackAssembler

    assembler = TracebackAssembler()
    role = None
    for rec in _records(example.text, example.source == "block"):
        role = assembler.feed(rec)
    assembler.close_all()
    kept = assembler.kept()
    tb = kept[-1] if kept else None
    final = tb.final if tb is not None else None
    return {
        "role": role.value if role is not None else None,
        "tracebacks": len(kept),
        "type": final.type if final is not None else None,
        "message": final.message if final is not None else None,
        "task": tb.task if tb is not None else None,
        "task_pid": tb.task_pid if tb is not None else None,
        "task_node": tb.task_node if tb is not None else None,
        "frames": len(tb.frames) if tb is not None else 0,
        "function": tb.frames[-1].function if tb is not None and tb.frames else None,
        "chained": tb is not None and tb.chained_from is not None,
        "_kept": kept,
    }


def torchrun_facts(example: WordingExample) -> dict[str, Any]:
    """torchrun's failure summary as a scan reads it: from the ChildFailedError traceback that carries
    it, or (a bare summary) parse_child_failed over the lines."""
    from logparse.observe.tracebacks import parse_child_failed

    facts = traceback_facts(example)
    kept = facts.pop("_kept")
    if kept:
        failures = [f for tb in kept for f in tb.torchrun_failures]
    else:
        failures = parse_child_failed(_records(example.text, example.source == "block"))
    first = failures[0] if failures else None
    facts["torchrun_failures"] = len(failures)
    for name in ("section", "index", "time", "host", "rank", "local_rank", "exitcode", "pid", "signal"):
        facts[name] = getattr(first, name) if first is not None else None
    facts["error_file"] = first.error_file if first is not None else None
    facts["traceback"] = first.traceback if first is not None else None
    return facts


def frame_facts(example: WordingExample) -> dict[str, Any]:
    from logparse.observe.tracebacks import frame_kind

    return {"kind": frame_kind(example.text).value}


def layout_facts(example: WordingExample) -> dict[str, Any]:
    """A path: what file_origin says of it and the job jobs_in_folder puts it in (the folder being
    its first component); a name: name_family's family."""
    from logparse.read.layout import file_origin, jobs_in_folder, name_family

    if example.source == "name":
        return {"family": name_family(example.text)}
    o = file_origin(example.text)
    parts = PurePath(example.text).parts
    groups = jobs_in_folder(parts[0], [example.text]) if len(parts) > 1 else []
    return {
        "layout": o.layout,
        "local_rank": o.local_rank,
        "attempt": o.attempt,
        "pid": o.pid,
        "actor": o.actor,
        "error_file": o.error_file,
        "job": groups[0].label if len(groups) == 1 else None,
    }


def collective_facts(example: WordingExample) -> dict[str, Any]:
    """The CollectiveAnalyzer fed the example: the state of the one rank it is about (none: all None)."""
    from logparse.observe.collectives import CollectiveAnalyzer

    analyzer = CollectiveAnalyzer()
    for rec in _records(example.text, example.source == "block"):
        analyzer.feed(rec)
    states = list(analyzer.ranks.values())
    st = states[0] if len(states) == 1 else None
    names = ("rank", "timed_out_seq", "op", "timeout_ms", "last_enqueued", "last_completed")
    return {name: getattr(st, name) if st is not None else None for name in names}


def worker_death_facts(example: WordingExample) -> dict[str, Any]:
    """The dead worker that dead_worker reads in the example (its lines' bare messages; none: all None)."""
    from logparse.observe.worker_deaths import dead_worker

    death = dead_worker([r.message for r in _records(example.text, example.source == "block")])
    names = ("pid", "node", "actor", "name", "rank", "local_rank", "exit_type")
    return {name: getattr(death, name) if death is not None else None for name in names}


def progress_facts(example: WordingExample) -> dict[str, Any]:
    """A line: the progress fact its record is read into, as a scan reads it (ProgressSyntax.read: step,
    step time, bar) and the values of its step line (parse_step_line); a key: the number parse_value
    reads in it."""
    from logparse.read.steps import parse_step_line, parse_value

    if example.source == "key":
        return {"value": parse_value(example.text)}
    rec = _records(example.text, False)[0]
    run = _progress_syntax().read(rec)
    parsed = parse_step_line(rec.message)
    if run is None:
        step = seconds = n = total = rate = None
    else:
        step = run.steps[0] if run.steps[0] >= 0 else None
        n, total = (run.bar_n[0], run.bar_total[0]) if run.bar_n[0] >= 0 else (None, None)
        seconds, rate = (None if math.isnan(x) else x for x in (run.seconds[0], run.bar_rate[0]))
    return {
        "step": step,
        "seconds": seconds,
        "bar_n": n,
        "bar_total": total,
        "bar_seconds": rate,
        "values": tuple(parsed[1].items()) if parsed is not None else None,
    }


def counter_facts(example: WordingExample) -> dict[str, Any]:
    """Lines read in order as a scan reads them (one fresh ProgressSyntax: a shape counts once it comes
    back with a higher counter): the last line's step, and the values parse_counter_line reads in it."""
    from logparse.read.progress_syntax import ProgressSyntax
    from logparse.read.steps import parse_counter_line

    syntax = ProgressSyntax()
    run = None
    records = _records(example.text, example.source == "block")
    for rec in records:
        run = syntax.read(rec)
    step = run.steps[0] if run is not None and run.steps[0] >= 0 else None
    parsed = parse_counter_line(records[-1].message)
    return {"step": step, "values": parsed.pairs if parsed is not None else None}


@functools.lru_cache(maxsize=1)
def _progress_syntax():
    from logparse.read.progress_syntax import ProgressSyntax

    return ProgressSyntax()


def sample_text_facts(example: WordingExample) -> dict[str, Any]:
    """Does the scan's model-text filter (logparse.pipeline) take the line's bare message as the start
    of decoded model text, or as its end?"""
    from logparse.pipeline import SAMPLE_TEXT_END, SAMPLE_TEXT_START

    message = _records(example.text, False)[0].message
    return {"opens": message.startswith(SAMPLE_TEXT_START), "closes": message.startswith(SAMPLE_TEXT_END)}


def diff_score_facts(example: WordingExample) -> dict[str, Any]:
    """The score `verl-logscan diff` gives the line (logparse.diff.error_score of its record)."""
    from logparse.diff import error_score

    rec = _records(example.text, False)[0]
    return {"score": error_score(rec.message, rec.origin.level)}


def metric_key_facts(example: WordingExample) -> dict[str, Any]:
    from patterns.progress import CHART_KEYS, key_family, wanted_key

    return {
        "family": key_family(example.text),
        "wanted": wanted_key(example.text),
        "charted": example.text in CHART_KEYS,
    }


def environment_facts(example: WordingExample) -> dict[str, Any]:
    """A fresh EnvironmentTracker fed the example's lines: its fingerprint (a fact it lacks is None)."""
    from logparse.observe.environment import EnvironmentTracker

    tracker = EnvironmentTracker()
    for rec in _records(example.text, example.source == "block"):
        tracker.feed(rec)
    return {"_open": True, **tracker.fingerprint()}


def keyword_facts(example: WordingExample) -> dict[str, Any]:
    """Is the key one of the EnvironmentTracker's keywords, and one a skipping scanner looks for?"""
    from logparse.observe.environment import EnvironmentTracker

    tracker = EnvironmentTracker()
    return {
        "keyword": example.text in tracker.keywords,
        "scan_keyword": example.text in tracker.scan_keywords,
    }


@dataclass(frozen=True)
class SectionReader:
    """How a section's examples are read: by which code, given as which kinds of text."""

    facts: Callable[[WordingExample], dict[str, Any]]
    sources: tuple[str, ...]
    hits: bool = True  # False: an example is judged by its `expect` alone (each must state one)
    texts: Callable[[WordingExample], list[str]] | None = None  # what the wording is tried on (_texts)


READERS: dict[str, SectionReader] = {
    "prefixes": SectionReader(origin_facts, ("line",)),
    "message_fields": SectionReader(origin_facts, ("line",)),
    "tracebacks": SectionReader(traceback_facts, ("line", "block")),
    "torchrun_summary": SectionReader(torchrun_facts, ("line", "block")),
    "frame_kinds": SectionReader(frame_facts, ("path",)),
    "layouts": SectionReader(layout_facts, ("path", "name")),
    "collectives": SectionReader(collective_facts, ("line",)),
    "worker_deaths": SectionReader(worker_death_facts, ("line", "block")),
    "sample_text": SectionReader(sample_text_facts, ("line",)),
    "step_lines": SectionReader(progress_facts, ("line", "key")),
    "progress_bars": SectionReader(progress_facts, ("line",)),
    "counter_lines": SectionReader(counter_facts, ("line", "block")),
    # (a key is judged by what key_family and wanted_key say of it: whether a word applies as the
    # whole key, its start or its end is theirs to tell)
    "metric_keys": SectionReader(metric_key_facts, ("key",), hits=False),
    "thresholds": SectionReader(lambda example: {}, ()),  # numbers: no examples
    "versions": SectionReader(environment_facts, ("line", "block")),
    "hardware": SectionReader(environment_facts, ("line", "block")),
    "hosts": SectionReader(environment_facts, ("line", "block")),
    "config": SectionReader(environment_facts, ("line", "block")),
    "era": SectionReader(environment_facts, ("line", "block")),
    "step_values": SectionReader(environment_facts, ("line",), texts=lambda ex: _step_values(ex)),
    "styles": SectionReader(environment_facts, ("line", "block")),
    "dispatch": SectionReader(keyword_facts, ("key",), hits=False),
    # (diff.yaml: a line is judged by the score diff gives it, its words lower-cased, its level read)
    "error_words": SectionReader(diff_score_facts, ("line",), hits=False),
    "levels": SectionReader(diff_score_facts, ("line",), hits=False),
}


# -- does the wording itself hit an example -------------------------------------------------------------
@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> regex.Pattern:
    return regex.compile(pattern)


def _texts(example: WordingExample) -> list[str]:
    """What a wording is tried on: the raw line and its bare message (each line of a block), a path and
    each of its parts, a name or key as it is."""
    if example.source in ("line", "block"):
        out = []
        for rec in _records(example.text, example.source == "block"):
            out += [rec.line.text, rec.message]
        return out
    if example.source == "path":
        return [example.text, *PurePath(example.text).parts]
    return [example.text]


def _step_values(example: WordingExample) -> list[str]:
    """The values of the example's step line, as the EnvironmentTracker reads them."""
    from logparse.read.steps import split_step_line

    split = split_step_line(_records(example.text, False)[0].message)
    return [raw.strip() for _, raw in split[1]] if split is not None else []


def _hit(item: Wording, text: str) -> regex.Match | bool:
    if item.kind == "regex":
        pattern = _compiled(item.value)
        anchored = item.section in ANCHORED_SECTIONS or item.field("at") == "message-start"
        return (pattern.match(text) if anchored else pattern.search(text)) or False
    if item.kind == "literal":
        return item.value in text
    if item.kind == "literals":
        return any(w in text for w in item.value)
    if item.kind == "table":
        return any(k in text for k, _ in item.value)
    return False


# -- the check ------------------------------------------------------------------------------------------
def _check_example(
    item: Wording, ex: WordingExample, kind: str, reader: SectionReader, label: str
) -> Iterable[WordingFailure]:
    def failure(reason: str) -> WordingFailure:
        return WordingFailure(label, ex.line, item.id, kind, ex.text, reason)

    if ex.source not in reader.sources:
        yield failure(f"is a {ex.source}; a {item.section} example is a {' or a '.join(reader.sources)}")
        return
    by_expect = ex.source == "block" or not reader.hits
    hits = [h for h in (_hit(item, t) for t in (reader.texts or _texts)(ex)) if h]
    if by_expect and not ex.expect and (kind == "no_match" or not reader.hits):
        yield failure(f"is judged by what the code makes of it: it needs `expect` ({ex.source})")
    elif kind == "match" and not hits and reader.hits:
        yield failure(f"is not hit by the wording's {item.kind}")
    elif kind == "no_match" and hits and not by_expect:
        yield failure(f"is hit by the wording's {item.kind} but must not be ({ex.why})")
    for reason in _group_reasons(ex, hits):
        yield failure(reason)
    if ex.expect:
        for reason in _expect_reasons(item, ex, reader.facts(ex)):
            yield failure(reason)


def _group_reasons(ex: WordingExample, hits: list) -> Iterator[str]:
    """Why the example's stated groups differ from what the wording's regex captured."""
    found = next((h for h in hits if isinstance(h, regex.Match)), None)
    for name, stated in ex.groups:
        actual = found.group(name) if found is not None else None
        if actual != (None if stated is None else str(stated)):
            yield f"group '{name}' holds {actual!r}, the example states {stated!r}"


def _expect_reasons(item: Wording, ex: WordingExample, facts: dict) -> Iterator[str]:
    """Why the example's stated facts (`expect`) differ from what the section's reader tells."""
    for name, stated in ex.expect:
        if name.startswith("_") or (name not in facts and not facts.get("_open")):
            known = ", ".join(k for k in facts if not k.startswith("_"))
            yield f"states '{name}', which the {item.section} reader does not tell (it tells {known})"
            continue
        actual = facts.get(name)
        if isinstance(actual, list):
            actual = tuple(actual)
        if actual != stated or (type(actual) is bool) != (type(stated) is bool):
            yield f"gives {name} = {actual!r} where the example states {stated!r}"


def check_wordings(
    wordings: Wordings, readers: dict[str, SectionReader] | None = None
) -> tuple[int, list[WordingFailure]]:
    """(examples run, failures) for every item of a wordings file loaded with its examples."""
    readers = READERS if readers is None else readers
    failures: list[WordingFailure] = []
    count = 0
    for item in wordings.items:
        reader = readers.get(item.section)
        if reader is None:
            failures.append(
                WordingFailure(
                    wordings.label,
                    item.line,
                    item.id,
                    "wording",
                    "",
                    f"no reader for section '{item.section}'",
                )
            )
            continue
        for kind, examples in (("match", item.match), ("no_match", item.no_match)):
            for ex in examples:
                count += 1
                failures.extend(_check_example(item, ex, kind, reader, wordings.label))
    return count, failures


def builtin_wording_files() -> list[Callable[[], Wordings]]:
    """The loaders (with examples) of the wordings files: the built-in ones, then a team's own formats."""
    from patterns.diff_words import load_diff_words
    from patterns.environment import load_environment
    from patterns.formats import extra_format_files, load_formats
    from patterns.progress import load_progress

    # (and a team's own formats files, $VERL_LOGSCAN_FORMATS: their examples run through the reader too)
    return [load_formats, load_environment, load_progress, load_diff_words, *extra_format_files()]


def check_builtin_wordings() -> tuple[list[tuple[str, int, int]], list[WordingFailure | Problem]]:
    """((file, wordings, examples run) per built-in wordings file, failures): a file that does not load
    gives its problems (file:line, reason) as its failures."""
    summary: list[tuple[str, int, int]] = []
    failures: list[WordingFailure | Problem] = []
    for load in builtin_wording_files():
        try:
            wordings = load()
        except CatalogError as exc:
            failures.extend(exc.problems)
            continue
        count, found = check_wordings(wordings)
        summary.append((wordings.label, len(wordings.items), count))
        failures.extend(found)
    return summary, failures
