"""Run every catalog entry's examples through the same normaliser and matcher as a real scan."""

from __future__ import annotations

from dataclasses import dataclass

from logparse.observe.matcher import Matcher
from logparse.read.normalize import Normalizer
from logparse.read.sources import Line, strip_ansi
from patterns import Catalog, Entry


@dataclass(frozen=True)
class ExampleFailure:
    entry: Entry
    kind: str  # match | no_match | todo_match
    line: str
    reason: str

    def __str__(self) -> str:
        return (
            f"{self.entry.source}:{self.entry.line}: entry '{self.entry.id}': "
            f"{self.kind} example {self.reason}\n"
            f"    line: {self.line}"
        )


def block_matches(catalog: Catalog, entry: Entry, text: str) -> bool:
    """Does `entry` fire anywhere when this block is scanned as a whole log?"""
    from logparse.scan import Scanner  # the real scanner: tracebacks, frames and all

    scanner = Scanner(catalog)
    for i, line in enumerate(text.splitlines(), 1):
        scanner.feed_line(Line("<example>", i, strip_ansi(line)))
    scanner.finish()
    return any(g.entry.id == entry.id for g in scanner.collector.groups.values())


def example_matches(matcher: Matcher, entry: Entry, text: str) -> tuple[bool, str]:
    """Does `entry` fire on this raw log line in a real scan? Returns (matched, bare message)."""
    if entry.frames:
        return False, text  # needs a traceback: only block examples can show it
    rec = Normalizer().normalize(Line("<example>", 1, strip_ansi(text)))
    if entry not in matcher.candidates(rec.message):
        return False, rec.message
    return matcher.match_entry(entry, rec.message) is not None, rec.message


def unmatched_role(text: str) -> str | None:
    """The role of a raw log line that a scan tries no entry on (a traceback's header, frame or
    source line), or None."""
    from logparse.observe.tracebacks import TracebackAssembler
    from logparse.scan import UNMATCHED_ROLES

    role = TracebackAssembler().feed(Normalizer().normalize(Line("<example>", 1, strip_ansi(text))))
    return role.name.lower() if role in UNMATCHED_ROLES else None


def check_examples(catalog: Catalog, only: set[str] | None = None) -> tuple[int, list[ExampleFailure]]:
    """(number of examples run, failures) for the entries of `catalog` (or those whose id is in `only`)."""
    matcher = Matcher(catalog)
    failures: list[ExampleFailure] = []
    count = 0
    for entry in catalog.entries:
        if only is not None and entry.id not in only:
            continue

        def fires(ex, entry=entry) -> bool:
            return (
                block_matches(catalog, entry, ex.line)
                if ex.block
                else example_matches(matcher, entry, ex.line)[0]
            )

        for ex in entry.examples.match:
            count += 1
            if ex.block:
                if not block_matches(catalog, entry, ex.line):
                    failures.append(
                        ExampleFailure(entry, "match", ex.line, "(a block) does not fire the entry")
                    )
                continue
            ok, bare = example_matches(matcher, entry, ex.line)
            if not ok:
                hint = (
                    "contains none of the keywords"
                    if not matcher.keyword_hit(entry, bare)
                    else "matches no pattern"
                )
                failures.append(
                    ExampleFailure(
                        entry, "match", ex.line, f"does not match ({hint}; bare message: {bare!r})"
                    )
                )
            elif (role := unmatched_role(ex.line)) is not None:
                failures.append(
                    ExampleFailure(
                        entry,
                        "match",
                        ex.line,
                        f"matches, but a scan reads the line as a "
                        f"traceback's {role} line and tries no entry on it: make it a "
                        f"`block:` example and match the traceback's exception "
                        f"(`frames:` see its header as `header: ...`)",
                    )
                )
        for ex in entry.examples.no_match:
            count += 1
            if fires(ex):
                failures.append(
                    ExampleFailure(entry, "no_match", ex.line, f"matches but must not ({ex.why})")
                )
        for ex in entry.examples.todo_match:
            count += 1
            if fires(ex):
                failures.append(
                    ExampleFailure(
                        entry, "todo_match", ex.line, "now matches: move it from todo_match to match"
                    )
                )
    return count, failures
