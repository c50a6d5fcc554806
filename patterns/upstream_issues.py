"""Known upstream issues as data (patterns/known_issues/*.yaml, one file per upstream project, and a
team's own files): the thread (URL, title), the symptom (catalog entry ids, message regexes, frame
regexes, with `match` / `no_match` examples), the affected versions per package as PEP 440 specifiers
(or "not stated" where the thread gives none), the fix (versions, a PR, a sentence), the workaround
and a short quote of where the thread states the fix or the range.

Loaded like a catalog: every problem at once, each with file, line, reason and help
(patterns.validation.Problem); regexes pass the same risk check and, for a user's file, the same
timing probe; version ranges and fix versions are parsed with `packaging` (PEP 440), so a range that
pip would not understand is refused here, not silently mis-compared in a report.

Which question an entry answers for a job (matches, may match, fixed in your version) is
logparse/decide/known_issues.py's; this module only knows the data.
"""

from __future__ import annotations

import functools
import importlib.resources
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex

from patterns.cache import cached, source_of
from patterns.schema import Example, Examples, LazyPattern
from patterns.validation import (
    ID_RE,
    MAX_PATTERN_LENGTH,
    CatalogError,
    FieldBuilder,
    Problem,
    _short,
    _suggest,
)

KNOWN_ISSUES_DIR = "known_issues"
BUILTIN_LABEL = "patterns/known_issues"
NOT_STATED = "not stated"  # what an entry says where its thread gives no version
MAX_QUOTE_CHARS = 400  # a source_quote is a sentence or two, not a copy of the thread
MAX_TEXT_CHARS = 600  # fixed_in.text and workaround: one or two sentences
ENV_VAR = "VERL_LOGSCAN_KNOWN_ISSUES"  # a team's own files, separated like PATH (os.pathsep)

ENTRY_FIELDS = {
    "id": True,
    "project": True,
    "url": True,
    "title": True,
    "symptom": True,
    "affected": True,
    "fixed_in": True,
    "workaround": True,
    "source_quote": True,
    "examples": True,
    "see_also": False,
}
SYMPTOM_FIELDS = ("entries", "patterns", "frames")
FIXED_FIELDS = ("versions", "pr", "text")
URL_RE = regex.compile(r"https?://[^\s\"'<>`]+")


@dataclass(frozen=True)
class Package:
    """A package an entry can name: where the job's version is in the environment the report has
    (logparse/observe/environment.py's key, None when the log never tells it), and how a user finds
    the version where the log does not show it."""

    name: str
    env_key: str | None
    check: str


# The packages an entry may name (the PEP 503 name, as `pip show` takes it), and the environment key
# each is read from. A package the log never prints (numpy, tensordict) can still be named: its
# entries are then at most "may match", with the command that tells.
PACKAGES: dict[str, Package] = {
    p.name: p
    for p in (
        Package("verl", "verl", "pip show verl"),
        Package("vllm", "vllm", "pip show vllm"),
        Package("sglang", "sglang", "pip show sglang"),
        Package("torch", "torch", "pip show torch"),
        Package("transformers", "transformers", "pip show transformers"),
        Package("ray", "ray", "pip show ray"),
        Package("flash-attn", "flash_attn", "pip show flash-attn"),
        Package("nccl", "nccl", "python -c 'import torch; print(torch.cuda.nccl.version())'"),
        Package("cuda", "cuda", "python -c 'import torch; print(torch.version.cuda)'"),
        Package("nvidia-driver", "nvidia_driver", "nvidia-smi (its header: Driver Version)"),
        Package("python", "python", "python --version"),
        Package("numpy", None, "pip show numpy"),
        Package("tensordict", None, "pip show tensordict"),
        Package("megatron-core", None, "pip show megatron-core"),
    )
}


@dataclass(frozen=True)
class Symptom:
    """What the root cause must show: one of these catalog entry ids, a message one of `patterns`
    finds, a traceback frame (`file:line in function`) one of `frames` finds. Every kind given must
    hold; at least one kind is given."""

    entries: tuple[str, ...] = ()
    patterns: tuple[Any, ...] = ()  # regex.Pattern | LazyPattern
    frames: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Affected:
    """One package's affected range: a PEP 440 specifier set as the thread states it, or None where
    the thread states no range ("not stated")."""

    package: str
    specifier: str | None


@dataclass(frozen=True)
class FixedIn:
    """Where the fix is: the first release of each package that has it (as the thread states it),
    the PR, and a sentence."""

    versions: tuple[tuple[str, str], ...]  # (package, version)
    pr: str | None
    text: str

    def version_of(self, package: str) -> str | None:
        return dict(self.versions).get(package)


@dataclass(frozen=True)
class KnownIssue:
    """A known upstream issue: its thread, its symptom, the versions it affects, its fix."""

    id: str
    project: str
    url: str
    title: str
    symptom: Symptom
    affected: tuple[Affected, ...]  # () when the thread states no affected version at all
    fixed_in: FixedIn
    workaround: str
    source_quote: str
    examples: Examples
    see_also: tuple[str, ...] = ()
    source: str = ""
    line: int = 0

    def specifier_of(self, package: str) -> str | None:
        for a in self.affected:
            if a.package == package:
                return a.specifier
        return None

    @property
    def packages(self) -> tuple[str, ...]:
        """Every package the entry names (in its affected ranges or its fix), in order."""
        out = [a.package for a in self.affected]
        out += [p for p, _ in self.fixed_in.versions if p not in out]
        return tuple(out)


@dataclass(frozen=True)
class KnownIssues:
    """The known issues a scan matches a root cause against, built-in and a team's own files."""

    entries: tuple[KnownIssue, ...]
    sources: tuple[str, ...] = ()

    def for_entry(self, entry_id: str) -> tuple[KnownIssue, ...]:
        """The known issues whose symptom names catalog entry `entry_id`."""
        return tuple(k for k in self.entries if entry_id in k.symptom.entries)


# what a parsed file is made of (patterns.cache reads back no other class)
KNOWN_ISSUE_CLASSES = (
    KnownIssues,
    KnownIssue,
    Symptom,
    Affected,
    FixedIn,
    Examples,
    Example,
    LazyPattern,
)


def parse_specifier(text: str):
    """The PEP 440 specifier set of `text` (packaging.specifiers.SpecifierSet); InvalidSpecifier when
    it is none. Pre-releases are included: `>=0.8.0` takes 0.8.5rc1, as a range in a thread means."""
    from packaging.specifiers import SpecifierSet

    spec = SpecifierSet(text)
    spec.prereleases = True
    return spec


def parse_version(text: str):
    """packaging.version.Version of `text`; InvalidVersion when it is none."""
    from packaging.version import Version

    return Version(text)


class _IssueBuilder(FieldBuilder):
    noun = "known issue"

    def build(self) -> KnownIssue | None:
        raw = self.raw
        for key in raw:
            if key not in ENTRY_FIELDS:
                self.fail(key, f"unknown field '{key}'", _suggest(key, ENTRY_FIELDS) or "")
        issue_id = self.text("id")
        if issue_id is not None and not ID_RE.match(issue_id):
            self.fail("id", f"id '{issue_id}' is not kebab-case", "use lower-case words joined by '-'")
        project = self.text("project")
        url = self._url("url", raw.get("url"))
        title = self.text("title")
        symptom = self._symptom()
        affected = self._affected()
        fixed = self._fixed(affected)
        workaround = self._sentence("workaround", MAX_TEXT_CHARS)
        quote = self._sentence("source_quote", MAX_QUOTE_CHARS)
        see_also = tuple(
            u
            for i, u in enumerate(self.text_list("see_also", raw.get("see_also"), required=False))
            if self._url("see_also", u, i) is not None
        )
        examples = self._examples()
        frames = symptom is not None and bool(symptom.frames)
        if frames and examples is not None and not any(x.block for x in examples.match):
            self.fail(
                "examples",
                "a symptom with 'frames' needs at least one 'block' match example",
                "a block is a traceback: 'block: |' followed by its lines",
            )
        if not self.ok:
            return None
        return KnownIssue(
            id=issue_id,
            project=project,
            url=url,
            title=title,
            symptom=symptom,
            affected=affected,
            fixed_in=fixed,
            workaround=workaround,
            source_quote=quote,
            examples=examples,
            see_also=see_also,
            source=self.file,
            line=self.line_of(),
        )

    def _url(self, key: str, value: Any, index: int | None = None) -> str | None:
        if not isinstance(value, str) or not URL_RE.fullmatch(value):
            self.fail(
                key,
                f"'{key}' must be an http(s) URL without spaces, quotes or angle brackets, "
                f"got {_short(value)}",
                "the thread's address: an upstream issue, PR or release page, or your own tracker",
            )
            return None
        return value

    def _sentence(self, key: str, limit: int) -> str | None:
        value = self.text(key)
        if value is not None and len(value) > limit:
            self.fail(key, f"'{key}' is {len(value)} characters long (limit {limit})", "a sentence or two")
            return None
        return value.strip() if value is not None else None

    def _regexes(self, key: str, value: Any) -> tuple:
        if value is None:
            return ()
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            self.fail("symptom", f"symptom.{key} must be a non-empty list of regexes, got {_short(value)}")
            return ()
        out = []
        for i, p in enumerate(value):
            if len(p) > MAX_PATTERN_LENGTH:
                self.fail(
                    "symptom", f"symptom.{key} #{i + 1} is {len(p)} characters (limit {MAX_PATTERN_LENGTH})"
                )
                continue
            compiled = self.regex("symptom", f"symptom.{key} #{i + 1}", p, self.item_line(key, value, i))
            if compiled is not None:
                out.append(compiled)
        return tuple(out)

    def _symptom(self) -> Symptom | None:
        value = self.raw.get("symptom")
        if not isinstance(value, dict):
            self.fail(
                "symptom",
                "missing or invalid 'symptom'",
                "a mapping with entries (catalog ids), patterns (message regexes) and/or frames",
            )
            return None
        for key in value:
            if key not in SYMPTOM_FIELDS:
                self.fail("symptom", f"unknown symptom field '{key}'", _suggest(key, SYMPTOM_FIELDS) or "")
        entries = self.text_list("symptom", value.get("entries"), required=False)
        patterns = self._regexes("patterns", value.get("patterns"))
        frames = self._regexes("frames", value.get("frames"))
        if not (entries or patterns or frames) and all(value.get(k) is None for k in SYMPTOM_FIELDS):
            self.fail("symptom", "the symptom names nothing", "give entries, patterns or frames")
            return None
        return Symptom(entries, patterns, frames)

    def _package(self, key: str, name: Any) -> str | None:
        if not isinstance(name, str) or name not in PACKAGES:
            self.fail(
                key,
                f"unknown package {_short(name)}",
                _suggest(name, PACKAGES) if isinstance(name, str) else f"one of: {', '.join(PACKAGES)}",
            )
            return None
        return name

    def _affected(self) -> tuple[Affected, ...]:
        value = self.raw.get("affected")
        if value == NOT_STATED:
            return ()
        if not isinstance(value, dict) or not value:
            self.fail(
                "affected",
                f"'affected' must be a mapping of package: PEP 440 range, or '{NOT_STATED}', "
                f"got {_short(value)}",
                "e.g. affected: {vllm: '>=0.8.0,<0.8.3', torch: 'not stated'}",
            )
            return ()
        out = []
        for name, spec in value.items():
            package = self._package("affected", name)
            if package is None:
                continue
            if spec == NOT_STATED:
                out.append(Affected(package, None))
                continue
            if not isinstance(spec, str) or not spec.strip():
                self.fail("affected", f"affected.{package} must be a PEP 440 range or '{NOT_STATED}'")
                continue
            try:
                parse_specifier(spec)
            except ValueError as exc:  # packaging's InvalidSpecifier is a ValueError
                self.fail(
                    "affected",
                    f"affected.{package}: {spec!r} is not a PEP 440 version range ({exc})",
                    "write it as pip does: '>=0.8.0,<0.8.3', '==4.57.*', '<=0.6.3'",
                )
                continue
            out.append(Affected(package, spec.strip()))
        return tuple(out)

    def _fixed(self, affected: tuple[Affected, ...]) -> FixedIn | None:
        value = self.raw.get("fixed_in")
        if not isinstance(value, dict):
            self.fail(
                "fixed_in",
                "'fixed_in' must be a mapping with 'text' (and optional 'versions', 'pr')",
                "where the thread gives no fix, say so in text: 'not stated in the thread'",
            )
            return None
        for key in value:
            if key not in FIXED_FIELDS:
                self.fail("fixed_in", f"unknown fixed_in field '{key}'", _suggest(key, FIXED_FIELDS) or "")
        text = value.get("text")
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT_CHARS:
            self.fail(
                "fixed_in",
                f"fixed_in.text must be one or two sentences (at most {MAX_TEXT_CHARS} characters)",
            )
            text = ""
        pr = value.get("pr")
        if pr is not None:
            pr = self._url("fixed_in", pr)
        ranges = {a.package: a.specifier for a in affected}
        versions = []
        raw_versions = value.get("versions") or {}
        if not isinstance(raw_versions, dict):
            self.fail("fixed_in", "fixed_in.versions must be a mapping of package: version")
            raw_versions = {}
        for name, version in raw_versions.items():
            package = self._package("fixed_in", name)
            if package is None:
                continue
            try:
                parsed = parse_version(str(version))
            except ValueError:
                self.fail(
                    "fixed_in", f"fixed_in.versions.{package}: {_short(version)} is not a PEP 440 version"
                )
                continue
            spec = ranges.get(package)
            if spec is not None and parse_specifier(spec).contains(parsed):
                self.fail(
                    "fixed_in",
                    f"fixed_in.versions.{package} {version} lies inside its affected range {spec!r}",
                    "the first fixed release is outside the range it fixes",
                )
                continue
            versions.append((package, str(version)))
        return FixedIn(tuple(versions), pr, text.strip())


def _load_file(path: Path, label: str, problems: list[Problem], probe: bool, lazy: bool) -> list[KnownIssue]:
    from patterns.loader import load_items

    def build(raw: dict) -> KnownIssue | None:
        return _IssueBuilder(raw, label, problems, probe, lazy).build()

    return load_items(path, label, problems, lazy, build, "known issue")


def _load_source(
    path: Path, display: str, problems: list[Problem], probe: bool, lazy: bool
) -> list[KnownIssue]:
    from patterns.loader import load_source_items

    def load_file(f: Path, label: str) -> list[KnownIssue]:
        return _load_file(f, label, problems, probe, lazy)

    return load_source_items(path, display, problems, load_file, "known-issues")


def _builtin_dir() -> Path:
    return Path(str(importlib.resources.files("patterns").joinpath(KNOWN_ISSUES_DIR)))


@functools.lru_cache(maxsize=1)
def _builtin_issues() -> tuple[tuple[KnownIssue, ...], tuple[Problem, ...]]:
    """The built-in known issues, parsed, or as an earlier run parsed the same files (patterns.cache)."""
    from patterns.loader import yaml_files

    folder = _builtin_dir()
    files = yaml_files(folder)
    parts = [str(f.relative_to(folder)).encode() + b"\0" + f.read_bytes() for f in files]
    parts += source_of(
        "patterns.upstream_issues", "patterns.loader", "patterns.schema", "patterns.validation"
    )

    def build() -> tuple[tuple[KnownIssue, ...], tuple[Problem, ...]]:
        found: list[Problem] = []
        return tuple(_load_source(folder, BUILTIN_LABEL, found, False, True)), tuple(found)

    def check(value: Any) -> bool:
        return (
            isinstance(value, tuple)
            and len(value) == 2
            and value[1] == ()
            and all(isinstance(k, KnownIssue) for k in value[0])
        )

    return cached(
        "known-issues", parts, build, (*KNOWN_ISSUE_CLASSES, Problem), check, keep=lambda v: not v[1]
    )


def load_known_issues(extra: list[str] | tuple[str, ...] = (), builtin: bool = True) -> KnownIssues:
    """The built-in known issues, then each extra file or folder in order (a later one replaces an
    entry of the same id); CatalogError lists every problem at once."""
    problems: list[Problem] = []
    merged: dict[str, KnownIssue] = {}
    sources: list[str] = []
    if builtin:
        issues, found = _builtin_issues()
        problems.extend(found)
        merged.update((k.id, k) for k in issues)
        sources.append("built-in")
    for path in extra:
        for issue in _load_source(Path(path), str(path), problems, probe=True, lazy=False):
            merged[issue.id] = issue
        sources.append(str(path))
    if problems:
        raise CatalogError(problems)
    return KnownIssues(tuple(merged.values()), tuple(sources))


def known_issue_files_from_env(value: str | None) -> list[str]:
    """The files ENV_VAR names (separated as PATH is: os.pathsep), empty parts left out."""
    import os

    if not value:
        return []
    return [part for part in value.split(os.pathsep) if part.strip()]
