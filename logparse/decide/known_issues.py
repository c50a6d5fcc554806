"""Is the root cause a known upstream issue, and does the job's version have the fix? The only place
that answers it.

After the verdict, the root cause (its catalog entry, its messages and evidence, its traceback's
frames) is matched against the known issues (patterns/known_issues/*.yaml and a team's own files,
patterns/upstream_issues.py), and the job's versions (the frozen environment fingerprint of
logparse/observe/environment.py) against each matching entry's affected ranges and fix:

* **matches**: every package the entry names has its version in the log, inside the stated range
  (and before the fix); shown first, with the fix and the workaround;
* **may match**: the symptom matches, but a version the entry depends on is not in the log (or only
  approximately: `>=2.5 (log style)`, a verl era), or the thread states no range; the report says
  which version to check and how (`pip show vllm`);
* **fixed in your version**: the job runs a version at or past the fix; shown last, as a sign that
  this is probably something else;
* none: a version the log shows lies outside the stated range (and is not past the fix), or the entry
  is one rollout engine's issue and the job runs the other (its config, or the engine package the
  root cause's traceback runs through). Never shown: no entry is a match for a job whose version the
  thread does not cover.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from logparse.model import Environment, KnownIssueMatch, RootCause, VersionCheck
from patterns.schema import REGEX_TIMEOUT_S
from patterns.upstream_issues import PACKAGES, KnownIssue, KnownIssues, parse_specifier, parse_version

MAX_SHOWN = 8  # known issues a report lists at most (matches first)
MAX_TEXTS = 80  # root-cause texts a symptom's regexes are tried on at most
MAX_TEXT_CHARS = 4_000  # ... each cut to this many characters


class Verdict(str, Enum):
    MATCHES = "matches"
    MAY_MATCH = "may-match"
    FIXED = "fixed-in-your-version"


ORDER = {Verdict.MATCHES: 0, Verdict.MAY_MATCH: 1, Verdict.FIXED: 2}


class State(str, Enum):
    """What the job's version of one package says about one entry."""

    IN_RANGE = "in-range"  # shown, inside the stated range
    OUTSIDE = "outside"  # shown, outside the stated range, not past the fix
    FIXED = "fixed"  # shown, at or past the fix
    NO_RANGE = "no-range"  # shown, but the thread states no range (and it is before the fix)
    UNKNOWN = "unknown"  # not in the log, or only approximately


@dataclass(frozen=True)
class RootTexts:
    """What of the root cause a symptom is matched on: its entry id, its messages, its frames."""

    entry_id: str
    texts: tuple[str, ...]
    frames: tuple[str, ...]


def texts_of(root: RootCause) -> RootTexts:
    """The root cause's entry id; its message, summary, exception, chain and evidence lines; its
    traceback's frames as `file:line in function` (as catalog `frames` regexes read them)."""
    texts: list[str] = [root.message, root.summary]
    frames: list[str] = []
    tb = root.traceback
    if tb is not None:
        texts.append(f"{tb.exception_type}: {tb.exception_message}")
        texts.extend(tb.chain)
        frames = [f"{file}:{line} in {function}" for file, line, function in tb.frames]
    texts.extend(e.text for e in root.evidence)
    bounded = tuple(t[:MAX_TEXT_CHARS] for t in texts[:MAX_TEXTS] if t)
    return RootTexts(root.id, bounded, tuple(f[:MAX_TEXT_CHARS] for f in frames[:MAX_TEXTS]))


def _search(patterns: Iterable, texts: Iterable[str]) -> str | None:
    """The first text one of `patterns` finds (a search past the time budget is no match)."""
    texts = tuple(texts)
    for p in patterns:
        for t in texts:
            try:
                if p.search(t, timeout=REGEX_TIMEOUT_S):
                    return t
            except TimeoutError:
                continue
    return None


def symptom_matches(issue: KnownIssue, root: RootTexts) -> tuple[str, ...] | None:
    """What of the root cause matched the entry's symptom (`entry X`, `message`, `frame ...`), or None
    when a kind it gives does not hold."""
    s = issue.symptom
    on: list[str] = []
    if s.entries:
        if root.entry_id not in s.entries:
            return None
        on.append(f"entry {root.entry_id}")
    if s.patterns:
        if _search(s.patterns, root.texts) is None:
            return None
        on.append("message")
    if s.frames:
        frame = _search(s.frames, root.frames)
        if frame is None:
            return None
        on.append(f"frame {frame}")
    return tuple(on)


ENGINES = ("vllm", "sglang")  # the rollout engines: a job runs one of them


def engine_of(root: RootCause, environment: Environment) -> str | None:
    """The rollout engine the failure happened in: the job's own (its config's rollout name, as the
    environment has it), else the one engine whose package the root cause's traceback runs through
    (`.../site-packages/sglang/...`); None when neither tells."""
    engine = environment.get("rollout_engine")
    if engine in ENGINES:
        return engine
    frames = root.traceback.frames if root.traceback is not None else ()
    seen = {e for file, _, _ in frames for e in ENGINES if f"/{e}/" in file.replace("\\", "/")}
    return next(iter(seen)) if len(seen) == 1 else None


def applies_to_engine(issue: KnownIssue, engine: str | None) -> bool:
    """Does an entry that names a rollout engine (vLLM's or SGLang's issue) apply to a job that runs
    `engine`? An entry naming neither applies to both."""
    named = set(issue.packages) & set(ENGINES)
    return engine is None or not named or engine in named


def job_version(environment: Environment, package: str) -> tuple[str | None, bool]:
    """(the version of `package` the log shows, whether it is exact). An approximate one (`>=2.5
    (log style)`, a verl era `0.4-0.5`) is returned as text, not exact; None when the log shows none."""
    pkg = PACKAGES[package]
    value = environment.get(pkg.env_key) if pkg.env_key else None
    if value is None and package == "verl":
        era = environment.get("verl_era")
        return (f"{era} (verl era markers)", False) if era else (None, False)
    if value is None:
        return None, False
    text = str(value)
    try:
        parse_version(text)
    except ValueError:
        return text, False
    return text, True


def check_package(issue: KnownIssue, package: str, environment: Environment) -> VersionCheck:
    """What the job's version of `package` says about `issue`."""
    spec = issue.specifier_of(package)
    fix = issue.fixed_in.version_of(package)
    shown, exact = job_version(environment, package)
    state = State.UNKNOWN
    if exact:
        version = parse_version(shown)
        if fix is not None and version >= parse_version(fix):
            state = State.FIXED
        elif spec is None:
            state = State.NO_RANGE
        else:
            state = State.IN_RANGE if parse_specifier(spec).contains(version) else State.OUTSIDE
    return VersionCheck(
        package=package,
        affected=spec,
        fixed=fix,
        job=shown,
        exact=exact,
        state=state.value,
        check=None if exact else PACKAGES[package].check,
    )


def verdict_of(issue: KnownIssue, checks: tuple[VersionCheck, ...]) -> Verdict | None:
    """The verdict of an entry whose symptom matched: fixed (a version at or past its fix), none (a
    version outside its range), matches (every version shown and inside a stated range), else may match."""
    states = {c.state for c in checks}
    if State.FIXED.value in states:
        return Verdict.FIXED
    if State.OUTSIDE.value in states:
        return None
    if checks and states == {State.IN_RANGE.value}:
        return Verdict.MATCHES
    return Verdict.MAY_MATCH


def reason_of(verdict: Verdict, checks: tuple[VersionCheck, ...]) -> str:
    """The verdict in a sentence: which versions put the job in range, past the fix, or are to check."""
    if verdict is Verdict.FIXED:
        past = [c for c in checks if c.state == State.FIXED.value]
        return "; ".join(f"your {c.package} {c.job} is at or past the fix ({c.fixed})" for c in past) + (
            ": this is probably something else"
        )
    if verdict is Verdict.MATCHES:
        return "; ".join(f"your {c.package} {c.job} is in the affected range {c.affected}" for c in checks)
    parts = []
    for c in checks:
        if c.state == State.UNKNOWN.value:
            wanted = c.affected or (f"before {c.fixed}" if c.fixed else "")
            seen = f" (the log suggests {c.job})" if c.job else " (not shown in the log)"
            parts.append(
                f"check {c.package}{seen}" + (f": affected {wanted}" if wanted else "") + f"; `{c.check}`"
            )
        elif c.state == State.IN_RANGE.value:
            parts.append(f"your {c.package} {c.job} is in the affected range {c.affected}")
        elif c.state == State.NO_RANGE.value:
            before = f", before the fix in {c.fixed}" if c.fixed else ""
            parts.append(f"your {c.package} is {c.job}{before}; the thread states no affected range")
    if not checks:
        parts.append("the thread states no affected versions: compare your versions with the thread")
    return "; ".join(parts)


def match_known_issues(
    root: RootCause | None, environment: Environment, known: KnownIssues | None
) -> tuple[KnownIssueMatch, ...]:
    """The known issues the root cause may be, matches first, fixed in your version last (at most
    MAX_SHOWN); () without a root cause or known issues."""
    if root is None or known is None or not known.entries:
        return ()
    texts = texts_of(root)
    engine = engine_of(root, environment)
    found: list[tuple[int, int, KnownIssueMatch]] = []
    for index, issue in enumerate(known.entries):
        if not applies_to_engine(issue, engine):
            continue  # a vLLM issue in a job that rolls out with SGLang (or the other way round)
        on = symptom_matches(issue, texts)
        if on is None:
            continue
        checks = tuple(check_package(issue, p, environment) for p in issue.packages)
        verdict = verdict_of(issue, checks)
        if verdict is None:
            continue
        match = KnownIssueMatch(
            id=issue.id,
            project=issue.project,
            url=issue.url,
            title=issue.title,
            verdict=verdict.value,
            reason=reason_of(verdict, checks),
            matched_on=on,
            versions=checks,
            fixed_in=issue.fixed_in.text,
            fix_pr=issue.fixed_in.pr,
            workaround=issue.workaround,
            source_quote=issue.source_quote,
        )
        found.append((ORDER[verdict], index, match))
    found.sort(key=lambda t: (t[0], t[1]))
    return tuple(m for _, _, m in found[:MAX_SHOWN])
