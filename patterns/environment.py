"""Knowledge of a job's environment, read from patterns/environment.yaml: the version, GPU, world-size
and host wordings, the verl-era markers, the torch / Ray / rollout-engine style markers and the config
keys worth reporting. logparse.observe.environment (EnvironmentTracker) compiles the regexes and keeps
the control flow; patterns/wordings.py has the file's schema.
"""

from __future__ import annotations

import functools
import importlib.resources

from patterns.cache import source_of
from patterns.validation import CatalogError, Problem
from patterns.wordings import FieldSpec, SectionSpec, Wordings, builtin_wordings, is_minor, is_text, is_texts

ENVIRONMENT_FILE = "environment.yaml"
ENVIRONMENT_LABEL = "patterns/environment.yaml"
_KEYWORDS = FieldSpec("a list of literals (one is in every message the tracker reads with it)", is_texts)
_ERA = {
    "since": FieldSpec("a verl minor version (0.N) or null", is_minor),
    "until": FieldSpec("a verl minor version (0.N) or null", is_minor),
    "step_key": FieldSpec("true or false (a step line's key)", lambda v: isinstance(v, bool)),
    "actor": FieldSpec("a Ray actor's name", is_text),
    "label": FieldSpec("the evidence's words in a report", is_text),
    "keywords": _KEYWORDS,
    "starts": FieldSpec("a list of literals a value starts with", is_texts),
}
SECTIONS = {
    "versions": SectionSpec(
        ("regex", "table", "literal", "literals"),
        {
            "keywords": _KEYWORDS,
            "facts": FieldSpec(
                "a mapping of a field's name to the fact it gives",
                lambda v: isinstance(v, dict) and all(is_text(x) for x in v.values()),
            ),
        },
    ),
    "hardware": SectionSpec(("regex",), {"keywords": _KEYWORDS}),
    "hosts": SectionSpec(("regex",), {"keywords": _KEYWORDS}),
    "config": SectionSpec(("regex", "literal", "literals", "table"), {"keywords": _KEYWORDS}),
    "era": SectionSpec(("literal", "literals"), _ERA),
    "step_values": SectionSpec(("regex",), _ERA),
    "styles": SectionSpec(
        ("literal", "literals"),
        {
            "fact": FieldSpec("torch, ray or launcher", lambda v: v in ("torch", "ray", "launcher")),
            "style": FieldSpec("the version range it implies, as a report says it", is_text),
        },
    ),
    "dispatch": SectionSpec(("literals",)),
}


def read_environment_text() -> str:
    return importlib.resources.files("patterns").joinpath(ENVIRONMENT_FILE).read_text(encoding="utf-8")


def check_environment(wordings: Wordings) -> None:
    """The file's own cross-checks: every common keyword is some wording's keyword, every era marker
    says what it implies. CatalogError lists every problem."""
    problems: list[Problem] = []
    keywords = {k for w in wordings.items for k in (w.field("keywords") or ())}
    common = wordings.item("common-keywords")
    for word in common.value:
        if word not in keywords:
            problems.append(
                Problem(wordings.label, common.line, f"common keyword {word!r} is the keyword of no wording")
            )
    for w in (*wordings.section("era"), *wordings.section("step_values")):
        if w.kind != "literals" and w.field("since") is None and w.field("until") is None:
            problems.append(Problem(wordings.label, w.line, f"era marker '{w.id}' needs since or until"))
    if problems:
        raise CatalogError(problems)


@functools.lru_cache(maxsize=1)
def environment_wordings() -> Wordings:
    """environment.yaml's values, parsed and checked, or read back from the start-up cache."""
    return builtin_wordings(
        "environment",
        read_environment_text(),
        ENVIRONMENT_LABEL,
        SECTIONS,
        source_of("patterns.environment", "patterns.wordings", "patterns.validation", "patterns.yamlfile"),
        check_environment,
    )


def load_environment(text: str | None = None, label: str = ENVIRONMENT_LABEL) -> Wordings:
    """environment.yaml (or `text`) with its examples (the catalog check); CatalogError lists every
    problem."""
    from patterns.wordings import load_wordings

    wordings = load_wordings(read_environment_text() if text is None else text, label, SECTIONS)
    check_environment(wordings)
    return wordings


def tracked_config_keys() -> frozenset[str]:
    """The config leaves whose values the tracker records (environment.yaml `tracked-keys`)."""
    return frozenset(environment_wordings().literals("tracked-keys"))
