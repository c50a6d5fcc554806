"""Run every catalog entry's examples, and the stage markers' own, through the same normaliser and
matcher as a real scan."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import regex

from logparse.decide.classify import messages_of, phrase_text
from logparse.model import RootCause
from logparse.observe.bare_lines import BareLineDetector
from logparse.observe.evidence import FailureEvidence, evidence_of_traceback
from logparse.observe.matcher import Matcher
from logparse.read.normalize import Normalizer
from logparse.read.progress_syntax import MarkerMatcher
from logparse.read.sources import Line, strip_ansi
from patterns import Catalog, Entry
from patterns.fallback import FallbackRules, fallback_rules
from patterns.schema import Role
from patterns.stages import StageMarker, StageMarkers, builtin_stage_markers
from patterns.upstream_issues import KnownIssue, KnownIssues
from patterns.validation import regex_risk


@dataclass(frozen=True)
class ExampleFailure:
    entry: Entry
    kind: str  # match | no_match | todo_match
    line: str
    reason: str

    at: int = 0  # the example's own line in the entry's file (0: not known: the entry's first line)

    def __str__(self) -> str:
        return (
            f"{self.entry.source}:{self.at or self.entry.line}: entry '{self.entry.id}': "
            f"{self.kind} example {self.reason}\n"
            f"    line: {self.line}"
        )


def block_matches(catalog: Catalog, entry: Entry, text: str) -> bool:
    """Does `entry` fire anywhere when this block is scanned as a whole log?"""
    from logparse.pipeline import start_analysis  # the real analysis: tracebacks, frames and all

    analysis = start_analysis(catalog)
    for i, line in enumerate(text.splitlines(), 1):
        analysis.feed_line(Line("<example>", i, strip_ansi(line)))
    analysis.finish()
    return any(g.entry.id == entry.id for g in analysis.hits.collector.groups.values())


@dataclass(frozen=True)
class Shadowed:
    """A custom entry's `match` example on which a scan names another entry, a built-in one, as the
    root cause: the entry fires, and loses (its priority, or the choice's other reasons)."""

    entry: Entry
    winner: Entry
    at: int  # the example's line in the entry's file (0: not known)

    def __str__(self) -> str:
        return (
            f"{self.entry.source}:{self.at or self.entry.line}: warning: entry '{self.entry.id}' "
            f"(priority {self.entry.priority}) fires on this example, but the built-in entry "
            f"'{self.winner.id}' (priority {self.winner.priority}, {self.winner.category}) is the root "
            f"cause a scan reports; raise '{self.entry.id}''s priority above {self.winner.priority}, "
            f"or disable the built-in one with --disable {self.winner.id}"
        )


def _root_cause_of(catalog: Catalog, text: str) -> tuple[str | None, set[str]]:
    """(the root cause's entry id, the ids of the entries that fired) when `text` is scanned as a log."""
    from logparse.pipeline import start_analysis

    analysis = start_analysis(catalog)
    for i, line in enumerate(text.splitlines(), 1):
        analysis.feed_line(Line("<example>", i, strip_ansi(line)))
    report = analysis.report()
    fired = {g.entry.id for g in analysis.hits.collector.groups.values()}
    return (report.root_cause.id if report.root_cause is not None else None), fired


def shadowed_examples(catalog: Catalog, only: set[str]) -> list[Shadowed]:
    """Each `match` example of the entries in `only` (a custom catalog's, all `cause` entries) on which
    a built-in entry, not one of `only`, is the root cause a scan reports."""
    by_id = {e.id: e for e in catalog.entries}
    out = []
    for entry in catalog.entries:
        if entry.id not in only or entry.role != Role.CAUSE:
            continue
        for ex in entry.examples.match:
            root, fired = _root_cause_of(catalog, ex.line)
            if entry.id in fired and root is not None and root not in only and root in by_id:
                out.append(Shadowed(entry, by_id[root], ex.at))
    return out


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
    from logparse.pipeline import UNMATCHED_ROLES

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
            failure = _match_failure(catalog, matcher, entry, ex)
            if failure is not None:
                failures.append(replace(failure, at=ex.at))
        for ex in entry.examples.no_match:
            count += 1
            if fires(ex):
                failures.append(
                    ExampleFailure(entry, "no_match", ex.line, f"matches but must not ({ex.why})", ex.at)
                )
        for ex in entry.examples.todo_match:
            count += 1
            if fires(ex):
                failures.append(
                    ExampleFailure(
                        entry, "todo_match", ex.line, "now matches: move it from todo_match to match", ex.at
                    )
                )
    return count, failures


def _match_failure(catalog: Catalog, matcher: Matcher, entry, ex) -> ExampleFailure | None:
    """Why a `match` example fails its entry, or None: a block that does not fire it, a line that does
    not match, or one that matches but that a scan reads as part of a traceback."""
    if ex.block:
        if not block_matches(catalog, entry, ex.line):
            return ExampleFailure(entry, "match", ex.line, "(a block) does not fire the entry")
        return None
    ok, bare = example_matches(matcher, entry, ex.line)
    if not ok:
        hint = (
            "contains none of the keywords" if not matcher.keyword_hit(entry, bare) else "matches no pattern"
        )
        return ExampleFailure(entry, "match", ex.line, f"does not match ({hint}; bare message: {bare!r})")
    if (role := unmatched_role(ex.line)) is not None:
        return ExampleFailure(
            entry,
            "match",
            ex.line,
            f"matches, but a scan reads the line as a "
            f"traceback's {role} line and tries no entry on it: make it a "
            f"`block:` example and match the traceback's exception "
            f"(`frames:` see its header as `header: ...`)",
        )
    return None


def check_catalog(catalog: Catalog, only: set[str] | None, builtin: bool) -> tuple[int, list, str]:
    """(examples run, failures, a summary) of `verl-logscan catalog check`: the entries' examples (of
    those whose id is in `only`, when given), and with `builtin` the fallback rules' too."""
    count, failures = check_examples(catalog, only)
    checked = len(only) if only is not None else len(catalog.entries)
    summary = (
        f"{checked} {'entry' if checked == 1 else 'entries'}, {count} example{'' if count == 1 else 's'}"
    )
    if builtin:  # the built-in fallback rules (patterns/fallback.yaml) run their examples too
        rules = fallback_rules()
        n_examples, fallback_failures = check_fallback_examples(rules)
        failures = [*failures, *fallback_failures]
        count += n_examples
        n_rules = len(rules.phrases) + len(rules.types) + len(rules.frames)
        summary += f"; fallback rules: {n_rules} rules, {n_examples} examples"
        # ... and the wordings files (formats, environment, progress), through the code that reads them
        from logparse.wording_check import check_builtin_wordings

        files, wording_failures = check_builtin_wordings()
        failures = [*failures, *wording_failures]
        count += sum(n for _, _, n in files)
        for label, n_wordings, n_wording_examples in files:
            summary += f"; {label.rsplit('/', 1)[-1]}: {n_wordings} wordings, {n_wording_examples} examples"
    return count, failures, summary


# -- the stage markers' own examples, through the real normaliser ----------------------------------------
@dataclass(frozen=True)
class MarkerExampleFailure:
    marker: StageMarker
    kind: str  # match | no_match | pattern
    line: str
    reason: str

    def __str__(self) -> str:
        return (
            f"{self.marker.source}:{self.marker.line}: marker '{self.marker.id}': {self.kind} example "
            f"{self.reason}\n    line: {self.line}"
        )


def bare_message(text: str) -> str:
    """The bare message a scan would match for this raw log line."""
    return Normalizer().normalize(Line("<example>", 1, strip_ansi(text))).message


def check_marker_examples(markers: StageMarkers | None = None) -> tuple[int, list[MarkerExampleFailure]]:
    """(examples run, failures): each match example must fire its marker and be claimed by a marker
    of the same stage (markers are tried in file order); each no_match example must not fire it;
    each pattern must be hit by some match example."""
    markers = markers or builtin_stage_markers()
    matcher = MarkerMatcher(markers)
    failures: list[MarkerExampleFailure] = []
    count = 0
    for marker in markers.markers:
        used: set[int] = set()
        for ex in marker.examples.match:
            count += 1
            bare = bare_message(ex.line)
            if not MarkerMatcher.fires(marker, bare):
                hint = (
                    "matches no pattern"
                    if any(kw in bare for kw in marker.keywords)
                    else "contains none of the keywords"
                )
                failures.append(
                    MarkerExampleFailure(
                        marker, "match", ex.line, f"does not match ({hint}; bare message: {bare!r})"
                    )
                )
                continue
            used.update(i for i, p in enumerate(marker.patterns) if p.search(bare))
            winner = matcher.match(bare)
            if winner is not None and winner.marker.stage != marker.stage:
                failures.append(
                    MarkerExampleFailure(
                        marker,
                        "match",
                        ex.line,
                        f"is claimed first by marker '{winner.marker.id}' "
                        f"(stage {winner.marker.stage}); move this marker above it or narrow that one",
                    )
                )
        for ex in marker.examples.no_match:
            count += 1
            if MarkerMatcher.fires(marker, bare_message(ex.line)):
                failures.append(
                    MarkerExampleFailure(marker, "no_match", ex.line, f"matches but must not ({ex.why})")
                )
        for i, pattern in enumerate(marker.patterns):
            if i not in used:
                failures.append(
                    MarkerExampleFailure(
                        marker, "pattern", pattern.pattern, f"pattern #{i + 1} is hit by no match example"
                    )
                )
    return count, failures


# -- the fallback rules' own examples (patterns/fallback.yaml) -------------------------------------------
@dataclass(frozen=True)
class FallbackExampleFailure:
    rule: str
    kind: str  # match | no_match
    text: str
    reason: str

    def __str__(self) -> str:
        return (
            f"patterns/fallback.yaml: rule '{self.rule}': {self.kind} example {self.reason}\n"
            f"    line: {self.text}"
        )


def example_evidence(text: str, block: bool) -> FailureEvidence | None:
    """The evidence a scan would take from an example: a block is assembled as a traceback, a line
    is read as a bare failure line (an exception line gives its type)."""
    from logparse.observe.tracebacks import TracebackAssembler

    normalizer = Normalizer()
    if block:
        assembler = TracebackAssembler()
        for i, raw in enumerate(text.splitlines(), 1):
            rec = normalizer.normalize(Line("<example>", i, strip_ansi(raw)))
            rec.seq = i
            assembler.feed(rec)
        assembler.close_all()
        tbs = [tb for tb in assembler.kept() if tb.final is not None]
        return evidence_of_traceback(tbs[-1]) if tbs else None
    rec = normalizer.normalize(Line("<example>", 1, strip_ansi(text)))
    detector = BareLineDetector()
    found = detector.detect(rec)
    if found is None:
        return FailureEvidence(None, rec.message.strip())
    _kind, exc_type, message = found
    return FailureEvidence(exc_type, message)


def _rule_fires(rule, evidence: FailureEvidence) -> bool:
    from patterns.fallback import FrameCategoryRule, PhraseRule

    if isinstance(rule, PhraseRule):
        return any(rule.fires(phrase_text(t, m)) for t, m in messages_of(evidence) if m or t)
    if isinstance(rule, FrameCategoryRule):
        return any(rule.fires(*f) for f in evidence.frames)
    return any(t and rule.fires(t, m or "") for t, m in messages_of(evidence))


def check_fallback_examples(rules: FallbackRules | None = None) -> tuple[int, list[FallbackExampleFailure]]:
    """Run every rule's examples (and the bare-line examples) the way a scan reads them."""
    rules = rules or fallback_rules()
    failures: list[FallbackExampleFailure] = []
    count = 0
    for rule in itertools.chain(rules.phrases, rules.types, rules.frames):
        for ex in rule.examples.match:
            count += 1
            ev = example_evidence(ex.line, ex.block)
            if ev is None or not _rule_fires(rule, ev):
                failures.append(FallbackExampleFailure(rule.id, "match", ex.line, "does not fire the rule"))
        for ex in rule.examples.no_match:
            count += 1
            ev = example_evidence(ex.line, ex.block)
            if ev is not None and _rule_fires(rule, ev):
                failures.append(
                    FallbackExampleFailure(rule.id, "no_match", ex.line, f"fires but must not ({ex.why})")
                )
    detector = BareLineDetector(rules)
    normalizer = Normalizer()
    for kind, examples in (("match", rules.bare.examples.match), ("no_match", rules.bare.examples.no_match)):
        for ex in examples:
            count += 1
            found = detector.detect(normalizer.normalize(Line("<example>", 1, strip_ansi(ex.line))))
            if (found is None) == (kind == "match"):
                reason = (
                    "is not read as a failure line"
                    if kind == "match"
                    else f"is read as a failure line ({ex.why})"
                )
                failures.append(FallbackExampleFailure("bare_lines", kind, ex.line, reason))
    return count, failures


# -- the known upstream issues' own examples (patterns/known_issues, a team's files) -------------------
@dataclass(frozen=True)
class KnownIssueExampleFailure:
    issue: KnownIssue
    kind: str  # match | no_match | symptom | pattern
    line: str
    reason: str

    def __str__(self) -> str:
        return (
            f"{self.issue.source}:{self.issue.line}: known issue '{self.issue.id}': {self.kind} "
            f"{'example ' if self.kind in ('match', 'no_match') else ''}{self.reason}\n"
            f"    line: {self.line.splitlines()[-1] if self.line else ''}"
        )


def scanned_root(catalog: Catalog, text: str) -> RootCause | None:
    """The root cause a scan of `text` (a line or a block, read as a whole log) reports, unredacted."""
    from logparse.pipeline import start_analysis  # the real analysis: prefixes, tracebacks, the verdict

    analysis = start_analysis(catalog, known_issues=KnownIssues(()))
    for i, line in enumerate(text.splitlines(), 1):
        analysis.feed_line(Line("<example>", i, strip_ansi(line)))
    return analysis.report().root_cause


def _pattern_problems(issue: KnownIssue) -> list[str]:
    """Why a symptom regex of a built-in entry (compiled lazily, so not checked at load) is refused."""
    out = []
    for kind, patterns in (("patterns", issue.symptom.patterns), ("frames", issue.symptom.frames)):
        for p in patterns:
            risk = regex_risk(p.pattern)
            if risk is not None:
                out.append(f"symptom.{kind} {p.pattern!r} is refused: {risk}")
                continue
            try:
                regex.compile(p.pattern)
            except regex.error as exc:
                out.append(f"symptom.{kind} {p.pattern!r} does not compile: {exc}")
    return out


def check_known_issues(
    catalog: Catalog, known: KnownIssues, only: set[str] | None = None
) -> tuple[int, list[KnownIssueExampleFailure]]:
    """(examples run, failures): every entry's symptom names catalog entries that exist; each `match`
    example, scanned as a log, gives a root cause that its symptom matches; each `no_match` example
    gives none, or one the symptom does not match."""
    from logparse.decide.known_issues import symptom_matches, texts_of

    ids = {e.id for e in catalog.entries}
    failures: list[KnownIssueExampleFailure] = []
    count = 0
    for issue in known.entries:
        if only is not None and issue.id not in only:
            continue
        for entry_id in issue.symptom.entries:
            if entry_id not in ids:
                hint = _did_you_mean(entry_id, ids)
                failures.append(
                    KnownIssueExampleFailure(
                        issue, "symptom", "", f"names catalog entry '{entry_id}', which does not exist{hint}"
                    )
                )
        for problem in _pattern_problems(issue):
            failures.append(KnownIssueExampleFailure(issue, "pattern", "", problem))
        for ex in issue.examples.match:
            count += 1
            root = scanned_root(catalog, ex.line)
            if root is None:
                failures.append(
                    KnownIssueExampleFailure(issue, "match", ex.line, "gives no root cause in a scan")
                )
            elif symptom_matches(issue, texts_of(root)) is None:
                failures.append(
                    KnownIssueExampleFailure(
                        issue,
                        "match",
                        ex.line,
                        f"gives root cause {root.id} ({root.category}), which the symptom does not match",
                    )
                )
        for ex in issue.examples.no_match:
            count += 1
            root = scanned_root(catalog, ex.line)
            if root is not None and symptom_matches(issue, texts_of(root)) is not None:
                failures.append(
                    KnownIssueExampleFailure(issue, "no_match", ex.line, f"matches but must not ({ex.why})")
                )
    return count, failures


def _did_you_mean(word: str, choices: set[str]) -> str:
    from rapidfuzz import process

    best = process.extractOne(word, sorted(choices), score_cutoff=60)
    return f" (did you mean '{best[0]}'?)" if best else ""
