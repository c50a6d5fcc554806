"""Stage knowledge (patterns/stages.yaml): Ray task names to TAXONOMY stages, and stage markers.

`task_stages` maps a Ray task / actor method name to the stage it runs in. `markers` are lines that
show a job reached a stage (see the comments in stages.yaml for the fields). This module checks the
markers' schema when they are loaded (unknown field or stage, bad id, regex that does not compile or
can backtrack catastrophically, missing examples), reporting every problem at once with file:line
like the catalog loader. Whether each example really matches through the normaliser is checked in
`logparse.catalog_check.check_marker_examples` (this package imports no other), run by the tests.
"""

from __future__ import annotations

import functools
import importlib.resources
from dataclasses import dataclass
from typing import Any

import regex

from patterns.cache import cached, source_of
from patterns.schema import REGEX_TIMEOUT_S, Example, Examples, LazyPattern
from patterns.validation import (
    ID_RE,
    MAX_PATTERN_LENGTH,
    CatalogError,
    Problem,
    _suggest,
    regex_risk,
)
from patterns.vocabulary import CATEGORIES, STAGES, vocabulary_key

STAGES_FILE = "stages.yaml"
STAGES_LABEL = "patterns/stages.yaml"
MARKER_FIELDS = {
    "id": True,
    "stage": True,
    "keywords": True,
    "patterns": True,
    "examples": True,
    "completion": False,
    "attempt_start": False,
    "activity": False,
    "repeat_stage": False,
}
EXAMPLE_FIELDS = ("match", "no_match")
TOP_FIELDS = (
    "task_stages",
    "task_word_min_length",
    "markers",
    "frame_stages",
    "loop_roles",
    "message_stages",
    "message_tasks",
    "actor_stages",
    "category_stages",
    "setup_categories",
)


TIMEOUT_FROM_CHARS = 2000  # messages longer than this are searched with a timeout


@dataclass(frozen=True)
class StageMarker:
    """A line that shows the job reached `stage`, or (`activity`, no stage) that it was still at work."""

    id: str
    stage: str | None
    keywords: tuple[str, ...]
    patterns: tuple[regex.Pattern, ...]
    examples: Examples
    completion: bool = False  # a successful end of the run
    attempt_start: bool = False  # a (re)start of the job
    repeat_stage: str | None = None  # stage of the 2nd and later sightings in one attempt
    activity: bool = False  # the job still at work (a request answered): no stage of its own
    source: str = ""
    line: int = 0

    def search(self, message: str) -> dict[str, str | None] | None:
        """Named groups of the first pattern found in the bare `message`, or None. On a long
        message a search that runs past REGEX_TIMEOUT_S counts as no match (a 1 MB line must not
        hang a scan); a short one is searched without the timeout, which costs 2 us a search, on
        lines that are mostly short (the markers pass the timing probe: tests)."""
        if len(message) <= TIMEOUT_FROM_CHARS:  # (without the keyword: passing it costs 1.5 us a search)
            for pattern in self.patterns:
                m = pattern.search(message)
                if m:
                    return m.groupdict()
            return None
        for pattern in self.patterns:
            try:
                m = pattern.search(message, timeout=REGEX_TIMEOUT_S)
            except TimeoutError:
                continue
            if m:
                return m.groupdict()
        return None


@dataclass(frozen=True)
class StageMarkers:
    markers: tuple[StageMarker, ...]

    def keywords(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for marker in self.markers:
            for kw in marker.keywords:
                seen.setdefault(kw, None)
        return tuple(seen)

    def get(self, marker_id: str) -> StageMarker | None:
        for marker in self.markers:
            if marker.id == marker_id:
                return marker
        return None


def _read_builtin() -> str:
    return importlib.resources.files("patterns").joinpath(STAGES_FILE).read_text(encoding="utf-8")


def _parse(text: str, label: str, problems: list[Problem]) -> dict:
    import yaml  # here: with the start-up cache warm, no YAML is parsed

    from patterns.yamlfile import LineLoader

    try:
        data = yaml.load(text, Loader=LineLoader)  # a SafeLoader subclass: no tags, no code
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problems.append(
            Problem(
                label,
                mark.line + 1 if mark else 0,
                f"invalid YAML: {getattr(exc, 'problem', exc)}",
                "regexes belong in single-quoted scalars: 'like \\d+ this'",
            )
        )
        return {}
    if data is None:
        return {}
    if not isinstance(data, dict):
        problems.append(Problem(label, 1, "stages.yaml holds a mapping with 'task_stages' and 'markers'"))
        return {}
    for key in data:
        if key not in TOP_FIELDS:
            problems.append(
                Problem(
                    label,
                    data.key_lines.get(key, 0),
                    f"unknown top-level field '{key}'",
                    _suggest(key, TOP_FIELDS) or f"known fields: {', '.join(TOP_FIELDS)}",
                )
            )
    return data


def _plain_data(text: str) -> dict:
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}  # a safe loader


@functools.lru_cache(maxsize=1)
def _builtin_data() -> dict:
    """stages.yaml as plain data, parsed once for task_stages and frame_rules (or as an earlier run
    parsed the same file: patterns.cache)."""
    text = _read_builtin()
    return cached(
        "stages-data",
        [text.encode(), *source_of("patterns.stages")],
        lambda: _plain_data(text),
        (),
        lambda value: isinstance(value, dict),
    )


@functools.lru_cache(maxsize=1)
def task_stages() -> dict[str, str]:
    data = _builtin_data()
    table = {str(k): str(v) for k, v in (data.get("task_stages") or {}).items()}
    bad = {k: v for k, v in table.items() if v not in STAGES}
    if bad:
        raise ValueError(f"patterns/stages.yaml: unknown stages {bad}")
    return table


@functools.lru_cache(maxsize=1)
def task_word_min_length() -> int:
    """How long a task name read from a frame's source line must be to count (stages.yaml says why)."""
    value = _builtin_data().get("task_word_min_length")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"patterns/stages.yaml: task_word_min_length must be a positive number, not {value!r}"
        )
    return value


class _MarkerBuilder:
    """Validates one raw marker mapping; collects problems instead of stopping at the first."""

    def __init__(self, raw: Any, label: str, problems: list[Problem], lazy: bool = False):
        self.raw = raw
        self.label = label
        self.problems = problems
        self.lazy = lazy
        self.ok = True

    def line_of(self, key: str | None = None) -> int:
        lines = getattr(self.raw, "key_lines", {})
        if key is not None and key in lines:
            return lines[key]
        return getattr(self.raw, "line", 0)

    def fail(self, key: str | None, reason: str, help: str = "") -> None:
        ident = self.raw.get("id") if isinstance(self.raw.get("id"), str) else None
        prefix = f"marker '{ident}': " if ident else "marker: "
        self.problems.append(Problem(self.label, self.line_of(key), prefix + reason, help))
        self.ok = False

    def _stage(self, key: str, required: bool) -> str | None:
        value = self.raw.get(key)
        if value is None:
            if required:
                self.fail(key, f"missing required field '{key}'", "a stage id of TAXONOMY.md")
            return None
        if value not in STAGES:
            self.fail(
                key,
                f"unknown stage '{value}'",
                _suggest(str(value), STAGES) or f"stages: {', '.join(STAGES)}",
            )
            return None
        return value

    def _flag(self, key: str) -> bool:
        value = self.raw.get(key, False)
        if not isinstance(value, bool):
            self.fail(key, f"'{key}' must be true or false, got {value!r}")
            return False
        return value

    def _strings(self, key: str) -> tuple[str, ...]:
        value = self.raw.get(key)
        if value is None:
            self.fail(
                key, f"missing required field '{key}'", f"add '{key}:' with a non-empty list of strings"
            )
            return ()
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            self.fail(key, f"'{key}' must be a non-empty list of non-empty strings")
            return ()
        return tuple(value)

    def _patterns(self) -> tuple[regex.Pattern, ...]:
        compiled = []
        for i, p in enumerate(self._strings("patterns")):
            where = f"pattern #{i + 1}"
            if self.lazy:
                compiled.append(LazyPattern(p))
            elif len(p) > MAX_PATTERN_LENGTH:
                self.fail("patterns", f"{where} is {len(p)} characters long (limit {MAX_PATTERN_LENGTH})")
            elif (risk := regex_risk(p)) is not None:
                self.fail(
                    "patterns",
                    f"{where} {risk}: {p!r}",
                    "rewrite without a quantified group that itself ends in + or *",
                )
            else:
                try:
                    compiled.append(regex.compile(p))
                except regex.error as exc:
                    self.fail("patterns", f"{where} does not compile: {exc}", f"pattern: {p!r}")
        return tuple(compiled)

    def _examples(self) -> Examples | None:
        value = self.raw.get("examples")
        if not isinstance(value, dict):
            self.fail("examples", "missing or invalid 'examples'", "a mapping with match and no_match lists")
            return None
        for key in value:
            if key not in EXAMPLE_FIELDS:
                self.fail("examples", f"unknown examples field '{key}'", _suggest(key, EXAMPLE_FIELDS))
        match = value.get("match")
        if not isinstance(match, list) or not match or not all(isinstance(x, str) and x for x in match):
            self.fail("examples", "examples.match must be a non-empty list of log lines")
            match = []
        no_match = value.get("no_match")
        negatives = []
        if not isinstance(no_match, list) or not no_match:
            self.fail("examples", "examples.no_match must be a non-empty list of {line, why}")
            no_match = []
        for item in no_match:
            if (
                isinstance(item, dict)
                and isinstance(item.get("line"), str)
                and isinstance(item.get("why"), str)
                and item["why"].strip()
            ):
                negatives.append(Example(item["line"], item["why"].strip()))
            else:
                self.fail("examples", "examples.no_match items need 'line' and 'why' (why it must not match)")
        return Examples(tuple(Example(x) for x in match), tuple(negatives))

    def build(self) -> StageMarker | None:
        if not isinstance(self.raw, dict):
            self.problems.append(
                Problem(self.label, getattr(self.raw, "line", 0), "each marker must be a mapping")
            )
            return None
        for key in self.raw:
            if key not in MARKER_FIELDS:
                self.fail(
                    key,
                    f"unknown field '{key}'",
                    _suggest(key, MARKER_FIELDS) or f"known fields: {', '.join(MARKER_FIELDS)}",
                )
        marker_id = self.raw.get("id")
        if not isinstance(marker_id, str) or not ID_RE.match(marker_id):
            self.fail(
                "id", f"id {marker_id!r} is missing or not kebab-case", "use lower-case words joined by '-'"
            )
        activity = self._flag("activity")
        stage = self._stage("stage", required=not activity)
        repeat_stage = self._stage("repeat_stage", required=False)
        completion = self._flag("completion")
        attempt_start = self._flag("attempt_start")
        if completion and attempt_start:
            self.fail("completion", "a marker cannot be both a completion and an attempt start")
        if activity and (stage or repeat_stage or completion or attempt_start):
            self.fail(
                "activity",
                "an activity marker has no stage, completion or attempt start",
                "drop `activity: true` for a marker that moves the stage",
            )
        keywords = self._strings("keywords")
        patterns = self._patterns()
        examples = self._examples()
        if not self.ok:
            return None
        return StageMarker(
            id=marker_id,
            stage=stage,
            keywords=keywords,
            patterns=patterns,
            examples=examples,
            completion=completion,
            attempt_start=attempt_start,
            repeat_stage=repeat_stage,
            activity=activity,
            source=self.label,
            line=self.line_of(),
        )


def load_stage_markers(
    text: str | None = None, label: str = STAGES_LABEL, lazy: bool = False
) -> StageMarkers:
    """The markers of stages.yaml (or of `text`); raises CatalogError listing every problem.
    `lazy`: the regexes compile on first use, unchecked here (the built-in file's are checked by its
    tests, as the built-in catalog's)."""
    problems: list[Problem] = []
    data = _parse(_read_builtin() if text is None else text, label, problems)
    raw_markers = data.get("markers") if data else None
    markers: list[StageMarker] = []
    if raw_markers is None and problems:
        pass  # the file did not parse: that problem says it all
    elif raw_markers is None:
        problems.append(Problem(label, 0, "no 'markers:' list", "add 'markers:' with the stage markers"))
    elif not isinstance(raw_markers, list):
        problems.append(Problem(label, data.key_lines.get("markers", 0), "'markers' must be a list"))
    else:
        seen: dict[str, int] = {}
        for raw in raw_markers:
            marker = _MarkerBuilder(raw, label, problems, lazy).build()
            if marker is None:
                continue
            if marker.id in seen:
                problems.append(
                    Problem(
                        label,
                        marker.line,
                        f"duplicate marker id '{marker.id}' (first at line {seen[marker.id]})",
                        "marker ids are unique",
                    )
                )
                continue
            seen[marker.id] = marker.line
            markers.append(marker)
    if problems:
        raise CatalogError(problems)
    return StageMarkers(tuple(markers))


@functools.lru_cache(maxsize=1)
def builtin_stage_markers() -> StageMarkers:
    """The markers of the built-in stages.yaml, parsed, or as an earlier run parsed the same file
    (patterns.cache)."""
    text = _read_builtin()
    return cached(
        "stage-markers",
        [
            text.encode(),
            *source_of(
                "patterns.stages",
                "patterns.validation",
                "patterns.yamlfile",
                "patterns.schema",
            ),
            *vocabulary_key(),
        ],
        lambda: load_stage_markers(text, lazy=True),
        (StageMarkers, StageMarker, Example, Examples, LazyPattern),
        lambda value: (
            isinstance(value, StageMarkers) and all(isinstance(m, StageMarker) for m in value.markers)
        ),
    )


@dataclass(frozen=True)
class FrameRule:
    """A traceback frame -> stage rule of stages.yaml `frame_stages` (one of function/code/file).
    A `weak` rule is tried only when no other rule matches any frame; a `before_loop` rule only for a
    failure before the training loop began; a `refine` rule names a generic loop frame (a backward, a
    loss, an optimizer step) whose stage the frames' roles (`loop_roles`) make precise; a `defer` rule
    a generic call (a barrier) whose stage is that of an outer frame's work, when one names it."""

    stage: str
    function: regex.Pattern | None = None
    code: regex.Pattern | None = None
    file: regex.Pattern | None = None
    weak: bool = False
    before_loop: bool = False
    refine: bool = False
    defer: bool = False


def _frame_rule(raw: Any, table: str, i: int, flags: tuple[str, ...]) -> FrameRule:
    if not isinstance(raw, dict) or raw.get("stage") not in STAGES:
        raise ValueError(f"patterns/stages.yaml: {table} #{i + 1}: needs a known 'stage'")
    fields = {k: regex.compile(raw[k]) for k in ("function", "code", "file") if raw.get(k)}
    if len(fields) != 1:
        raise ValueError(f"patterns/stages.yaml: {table} #{i + 1}: exactly one of function, code, file")
    unknown = set(raw) - {"stage", "function", "code", "file", *flags}
    if unknown:
        raise ValueError(f"patterns/stages.yaml: {table} #{i + 1}: unknown field(s) {sorted(unknown)}")
    return FrameRule(raw["stage"], **fields, **{f: bool(raw.get(f, False)) for f in flags})


@functools.lru_cache(maxsize=1)
def frame_rules() -> tuple[FrameRule, ...]:
    rules = _builtin_data().get("frame_stages") or ()
    return tuple(
        _frame_rule(raw, "frame_stages", i, ("weak", "before_loop", "refine", "defer"))
        for i, raw in enumerate(rules)
    )


@functools.lru_cache(maxsize=1)
def setup_categories() -> dict[str, str]:
    """stages.yaml `setup_categories`: categories whose failure, before the training loop, is that of the
    job's distributed set-up itself (category -> its stage)."""
    table = {str(k): str(v) for k, v in (_builtin_data().get("setup_categories") or {}).items()}
    bad = {k: v for k, v in table.items() if v not in STAGES or k not in CATEGORIES}
    if bad:
        raise ValueError(f"patterns/stages.yaml: setup_categories: unknown category or stage {bad}")
    return table


@functools.lru_cache(maxsize=1)
def loop_roles() -> tuple[FrameRule, ...]:
    """stages.yaml `loop_roles`: frames that say whose loop work a generic loop frame is part of
    (an actor's update, a critic's, an evaluation)."""
    rules = _builtin_data().get("loop_roles") or ()
    return tuple(_frame_rule(raw, "loop_roles", i, ()) for i, raw in enumerate(rules))


@functools.lru_cache(maxsize=1)
def message_stages() -> tuple[tuple[regex.Pattern, str], ...]:
    """stages.yaml `message_stages`: an error message that names where it is raised (vLLM's check of a
    prompt against the maximum model length runs when a request is generated)."""
    out = []
    for i, raw in enumerate(_builtin_data().get("message_stages") or ()):
        if not isinstance(raw, dict) or raw.get("stage") not in STAGES or not raw.get("pattern"):
            raise ValueError(
                f"patterns/stages.yaml: message_stages #{i + 1}: needs 'pattern' and a known 'stage'"
            )
        out.append((regex.compile(raw["pattern"]), raw["stage"]))
    return tuple(out)


@functools.lru_cache(maxsize=1)
def message_task_patterns() -> tuple[regex.Pattern, ...]:
    """stages.yaml `message_tasks`: regexes whose `task` group names a Ray task inside an error's
    message (Ray's memory monitor: `name=WorkerDict.actor_rollout_compute_log_prob`, the
    `Top 10 memory users` table: `ray::WorkerDict.actor_rollout_generate_sequences`)."""
    out = []
    for i, p in enumerate(_builtin_data().get("message_tasks") or ()):
        compiled = regex.compile(p)
        if "task" not in compiled.groupindex:
            raise ValueError(f"patterns/stages.yaml: message_tasks #{i + 1}: needs a named group 'task'")
        out.append(compiled)
    return tuple(out)


@functools.lru_cache(maxsize=1)
def actor_stages() -> dict[str, str]:
    """stages.yaml `actor_stages`: Ray actor class -> the one stage all its work runs in."""
    raw = _builtin_data().get("actor_stages") or {}
    for actor, stage in raw.items():
        if stage not in STAGES:
            raise ValueError(f"patterns/stages.yaml: actor_stages: {actor}: unknown stage {stage!r}")
    return {str(k): str(v) for k, v in raw.items()}


@functools.lru_cache(maxsize=1)
def category_stages() -> dict[str, str]:
    """stages.yaml `category_stages`: the init stage a failure's category implies when the failure
    came before the training loop began and nothing else tells the stage."""
    raw = _builtin_data().get("category_stages") or {}
    for category, stage in raw.items():
        if stage not in STAGES:
            raise ValueError(f"patterns/stages.yaml: category_stages: {category}: unknown stage {stage!r}")
    return dict(raw)


MAX_FRAME_FIELD = (
    2000  # characters of a frame's file, function and code that frame rules and `frames` regexes see
)
