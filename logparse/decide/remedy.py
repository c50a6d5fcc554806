"""What to do about the chosen failure: the fix steps of its catalog entry, or of its category
(patterns/fallback.yaml) for a failure no entry names, and the job's own settings that the fix concerns,
quoted from the log (patterns/inference.yaml `cite_config`). The only place that answers it."""

from __future__ import annotations

from logparse.decide.candidates import Choice
from logparse.model import CitedValue, Environment, Fix
from patterns import Entry
from patterns.fallback import fallback_rules
from patterns.inference import inference_rules
from patterns.schema import Remediation

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


def fix_of(entry: Entry, cited: tuple[CitedValue, ...] = (), kinds: frozenset[str] | None = None) -> Fix:
    r = entry.remediation
    return Fix(r.summary, r.why, steps_for(r, kinds), r.references, cited)


def job_kinds(environment: Environment) -> frozenset[str] | None:
    """Which job the log shows, as the fix steps' `applies_to` names them (patterns/schema.py JOB_KINDS):
    verl (its era markers or its config), with its rollout engine (verl-vllm, verl-sglang; both when
    the log does not tell) and its Megatron strategy; else a plain torchrun script when the log shows
    torch (its version or NCCL) or torchrun itself (its launcher's lines, its `[rankN]:` prefixes:
    observe/environment.py `launcher`). None when the log shows neither (every step is kept)."""
    verl = any(k in ("verl", "verl_era") or k.startswith("config.actor_rollout_ref.") for k in environment)
    if verl:
        kinds = {"any", "verl"}
        engine = environment.get("rollout_engine")
        # a verl job rolls out with vLLM or SGLang: when the log does not say which, both steps stay
        kinds |= {f"verl-{engine}"} if engine in ("vllm", "sglang") else {"verl-vllm", "verl-sglang"}
        if "megatron" in (
            environment.get("config.actor_rollout_ref.actor.strategy"),
            environment.get("config.critic.strategy"),
        ):
            kinds.add("megatron")
        return frozenset(kinds)
    if "torch" in environment or "nccl" in environment or environment.get("launcher") == "torchrun":
        return frozenset({"any", "torchrun"})
    return None


def steps_for(r: Remediation, kinds: frozenset[str] | None) -> tuple[str, ...]:
    """The fix steps that apply to the job (`kinds`; None: not known, all of them), in their order."""
    if kinds is None or not r.applies_to:
        return r.fix
    return (
        tuple(
            step
            for step, applies in zip(r.fix, r.applies_to, strict=True)
            if not applies or kinds & set(applies)
        )
        or r.fix
    )


def fix_for_category(choice: Choice, kinds: frozenset[str] | None = None) -> Fix:
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
        *steps_for(r, kinds),
    ]
    if c is not None and c.basis == "nearest":
        steps.append(
            f"This error resembles catalog entry `{c.rule}`: "
            f"`verl-logscan explain {c.rule}` tells how that one is fixed."
        )
    return Fix(r.summary, r.why, tuple(steps), r.references)


def remedy(choice: Choice, environment: Environment) -> Fix:
    """The fix of the chosen failure: its entry's, or its category's when the fallback rules named its
    category (or no entry named it), with the job's own settings for that category quoted."""
    cited = cite_job_values(choice.category, environment)
    if choice.hit is not None and choice.classification is None:
        return fix_of(choice.hit.entry, cited, job_kinds(environment))
    fix = fix_for_category(choice, job_kinds(environment))
    return Fix(fix.summary, fix.why, fix.fix, fix.references, cited)


def cite_job_values(category: str, environment: Environment) -> tuple[CitedValue, ...]:
    """The job's own settings (config values the log shows) whose leaf key patterns/inference.yaml
    `cite_config` lists for `category`, at most MAX_CITED, in the order the log showed them."""
    leaves = inference_rules().config_leaves(category)
    cited = [
        CitedValue(key[len("config.") :], str(value))
        for key, value in environment.items()
        if key.startswith("config.") and key.rsplit(".", 1)[-1] in leaves
    ]
    return tuple(cited[:MAX_CITED])
