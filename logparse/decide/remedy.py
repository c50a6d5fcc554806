"""What to do about the chosen failure: the fix steps of its catalog entry, or of its category
(patterns/fallback.yaml) for a failure no entry names, and the job's own settings that the fix concerns,
quoted from the log (patterns/inference.yaml `cite_config`). The only place that answers it."""

from __future__ import annotations

from logparse.decide.candidates import Choice
from logparse.model import CitedValue, Fix
from patterns import Entry
from patterns.fallback import fallback_rules
from patterns.inference import inference_rules

MAX_CITED = 8  # settings quoted at most


UNKNOWN_FIX = Fix(
    summary="No catalog entry recognises this error; its line and traceback are shown as evidence.",
    why="verl-logscan names the exception that ended the first failing process when it knows no better.",
    fix=(
        "Read the error line and its traceback, when it has one: the innermost frame in your code or in verl "
        "is where to start.",
        (
            "If this failure is a known kind, add a catalog entry (see README, 'Adding an entry') "
            "so the next scan names it."
        ),
    ),
    references=("https://github.com/verl-project/verl/issues",),
)


def fix_of(entry: Entry, cited: tuple[CitedValue, ...] = ()) -> Fix:
    r = entry.remediation
    return Fix(r.summary, r.why, r.fix, r.references, cited)


def fix_for_category(choice: Choice) -> Fix:
    """The remediation of a failure no entry names: its category's (patterns/fallback.yaml), else
    the generic one; a nearest entry is named for its own fix."""
    rules = fallback_rules()
    r = rules.fix_for(choice.category) if choice.category != "unknown" else None
    if r is None:
        return UNKNOWN_FIX
    c = choice.classification
    # a phrase that says more than its category (a DataLoader worker's exit) gives its own steps first
    steps = [
        *(rules.phrase_fix(c.rule) if c is not None and c.basis in ("phrase", "weak-phrase") else ()),
        *r.fix,
    ]
    if c is not None and c.basis == "nearest":
        steps.append(
            f"This error resembles catalog entry `{c.rule}`: "
            f"`verl-logscan explain {c.rule}` tells how that one is fixed."
        )
    return Fix(r.summary, r.why, tuple(steps), r.references)


def remedy(choice: Choice, environment: dict) -> Fix:
    """The fix of the chosen failure: its entry's, or its category's when the fallback rules named its
    category (or no entry named it), with the job's own settings for that category quoted."""
    cited = cite_job_values(choice.category, environment)
    if choice.hit is not None and choice.classification is None:
        return fix_of(choice.hit.entry, cited)
    fix = fix_for_category(choice)
    return Fix(fix.summary, fix.why, fix.fix, fix.references, cited)


def cite_job_values(category: str, environment: dict) -> tuple[CitedValue, ...]:
    """The job's own settings (config values the log shows) whose leaf key patterns/inference.yaml
    `cite_config` lists for `category`, at most MAX_CITED, in the order the log showed them."""
    leaves = inference_rules().config_leaves(category)
    cited = [
        CitedValue(key[len("config.") :], str(value))
        for key, value in environment.items()
        if key.startswith("config.") and key.rsplit(".", 1)[-1] in leaves
    ]
    return tuple(cited[:MAX_CITED])
