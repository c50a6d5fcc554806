"""Run every catalog entry's examples through the same normaliser and matcher as a real scan."""

from __future__ import annotations

from dataclasses import dataclass

from logparse.matcher import Matcher
from logparse.normalize import Normalizer
from logparse.reader import Line, strip_ansi
from patterns import Catalog, Entry


@dataclass(frozen=True)
class ExampleFailure:
    entry: Entry
    kind: str  # match | no_match | todo_match
    line: str
    reason: str

    def __str__(self) -> str:
        return f"{self.entry.source}:{self.entry.line}: entry '{self.entry.id}': {self.kind} example {self.reason}\n" \
               f"    line: {self.line}"


def example_matches(matcher: Matcher, entry: Entry, text: str) -> tuple[bool, str]:
    """Does `entry` fire on this raw log line in a real scan? Returns (matched, bare message)."""
    rec = Normalizer().normalize(Line("<example>", 1, strip_ansi(text)))
    if entry not in matcher.candidates(rec.message):
        return False, rec.message
    return matcher.match_entry(entry, rec.message) is not None, rec.message


def check_examples(catalog: Catalog, only: set[str] | None = None) -> tuple[int, list[ExampleFailure]]:
    """(number of examples run, failures) for the entries of `catalog` (or those whose id is in `only`)."""
    matcher = Matcher(catalog)
    failures: list[ExampleFailure] = []
    count = 0
    for entry in catalog.entries:
        if only is not None and entry.id not in only:
            continue
        for ex in entry.examples.match:
            count += 1
            ok, bare = example_matches(matcher, entry, ex.line)
            if not ok:
                hint = "contains none of the keywords" if not matcher.keyword_hit(entry, bare) else \
                    "matches no pattern"
                failures.append(ExampleFailure(entry, "match", ex.line, f"does not match ({hint}; "
                                               f"bare message: {bare!r})"))
        for ex in entry.examples.no_match:
            count += 1
            if example_matches(matcher, entry, ex.line)[0]:
                failures.append(ExampleFailure(entry, "no_match", ex.line, f"matches but must not ({ex.why})"))
        for ex in entry.examples.todo_match:
            count += 1
            if example_matches(matcher, entry, ex.line)[0]:
                failures.append(ExampleFailure(entry, "todo_match", ex.line,
                                               "now matches: move it from todo_match to match"))
    return count, failures
