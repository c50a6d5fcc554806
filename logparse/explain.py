"""`verl-logscan explain NAME`: what a catalog entry, a root-cause category (the word a summary's
`FAILED host-oom` shows), a fallback rule or the `unknown` verdict means, and how to fix it (as ruff's
`ruff rule X`: what it is, why it happens, an example, the fix). Returns the text; the CLI prints it."""

from __future__ import annotations

import shlex
from pathlib import Path

from logparse.decide.remedy import UNKNOWN_FIX
from logparse.model import Report
from patterns import CATEGORIES, Catalog, Entry
from patterns.fallback import FrameCategoryRule, MessageMarker, PhraseRule, fallback_rules
from patterns.upstream_issues import KnownIssue, KnownIssues

UNKNOWN_ID = "unknown"  # the root-cause id of an exception no catalog entry recognises
RULE_BASES = ("phrase", "weak-phrase", "type", "weak-type", "frame", "marker")  # bases that name a rule
BUILTIN_SOURCE = "patterns/catalog"  # how the loader names the source of a built-in entry

# the smallest entry that works, for `explain unknown`; `verl-logscan catalog check` validates a copy of it
# (tests/logparse/test_cli_outputs.py), so the skeleton users start from never rots
ENTRY_SKELETON = """\
- id: my-dataset-key-error
  title: A dataset row lacks the prompt key
  category: data-error
  role: cause
  severity: fatal
  priority: 60
  keywords: ['KeyError']
  patterns:
    - 'KeyError: .(?P<key>prompt|question).'
  message: 'a dataset row has no {key} column'
  remediation:
    summary: The dataset has no column named like the prompt key.
    why: verl reads each row's `data.prompt_key` column.
    fix: ['Set `data.prompt_key` to the column that holds the prompt.']
    references: []
  examples:
    match: ["(TaskRunner pid=42) KeyError: 'prompt'"]
    no_match:
      - line: "KeyError: 'labels'"
        why: another column
"""


def explain_text(
    catalog: Catalog, entry_id: str, category: bool = False, known: KnownIssues | None = None
) -> str | None:
    """The explanation of `entry_id`: an entry of `catalog` (with the known upstream issues whose
    symptom names it, from `known`), else a known issue, a root-cause category, a fallback rule, or
    `unknown` (`category`: the category of that name, even where an entry has it too); None when
    there is no such thing."""
    if category:
        return explain_category(catalog, entry_id) if entry_id in CATEGORIES else None
    entry = catalog.get(entry_id)
    issue = next((k for k in known.entries if k.id == entry_id), None) if known is not None else None
    if entry is None and issue is not None:
        return explain_known_issue(issue)
    if entry is not None:
        text = explain_entry(entry, known.for_entry(entry_id) if known is not None else ())
        if entry_id in CATEGORIES and entry_id != UNKNOWN_ID:  # `cuda-oom` is both
            text += f"\nThe category {entry_id} has more: verl-logscan explain --category {entry_id}\n"
        return text
    if entry_id == UNKNOWN_ID:
        return explain_unknown(catalog)
    if entry_id in CATEGORIES:
        return explain_category(catalog, entry_id)
    return explain_rule(entry_id)


def names(catalog: Catalog) -> list[str]:
    """Every name `explain` takes: entry ids, categories, fallback rules."""
    rules = fallback_rules()
    every = (*rules.phrases, *rules.types, *rules.frames, *rules.bare.message_markers)
    return sorted({*(e.id for e in catalog.entries), *CATEGORIES, *(r.id for r in every)})


def explain_category(catalog: Catalog, category: str) -> str:
    """A root-cause category: what it means, the catalog entries and fallback rules that name it, and
    its fix (the steps a report gives for a failure of it that no entry names)."""
    rules = fallback_rules()
    fix = rules.fix_for(category)
    entries = sorted(
        (e for e in catalog.entries if e.category == category),
        key=lambda e: (e.role.value != "cause", -e.priority, e.id),
    )
    every = (*rules.phrases, *rules.types, *rules.frames, *rules.bare.message_markers)
    named_by = [r.id for r in every if r.category == category]
    out = [f"{category}: a root-cause category", CATEGORIES[category]]
    if fix is not None:
        out += ["\nWhat it is\n  " + fix.summary, "\nWhy it happens\n  " + fix.why]
    out.append(f"\nCatalog entries ({len(entries)})")
    if entries:
        width = max(len(e.id) for e in entries)
        out += [f"  {e.id:{width}}  {e.role.value:7}  {e.title}" for e in entries]
        out.append("  (verl-logscan explain ID shows one of them)")
    else:
        out.append("  none: only the fallback rules below name it")
    if named_by:
        out += ["\nFallback rules (for a failure no entry names)", "  " + ", ".join(named_by)]
    out += ["\nFix", *_numbered(_with_jobs(fix.fix, fix.applies_to) if fix is not None else UNKNOWN_FIX.fix)]
    if fix is not None and fix.references:
        out.append("\nReferences")
        out += [f"  {ref}" for ref in fix.references]
    out.append("\nDefined in patterns/taxonomy.yaml (the categories) and patterns/fallback.yaml (the fix)")
    return "\n".join(out) + "\n"


def _with_jobs(steps: tuple[str, ...], applies_to: tuple[tuple[str, ...], ...]) -> list[str]:
    """Fix steps, each written for some jobs only (`applies_to`) followed by the jobs it is for: a
    scan shows only the steps that fit the job (decide/remedy.py), explain shows them all."""
    jobs = applies_to or ((),) * len(steps)
    return [f"{s} (for {', '.join(j)})" if j else s for s, j in zip(steps, jobs, strict=True)]


def explain_entry(entry: Entry, issues: tuple[KnownIssue, ...] = ()) -> str:
    r = entry.remediation
    out = [
        f"{entry.id}: {entry.title}",
        f"category {entry.category}, role {entry.role.value}, severity {entry.severity.value}, "
        f"priority {entry.priority}" + (f", stage {entry.stage}" if entry.stage else ""),
        "\nWhat it is\n  " + r.summary,
        "\nWhy it happens\n  " + r.why,
        "\nExample\n  " + entry.examples.match[0].line,
        "\nFix",
        *_numbered(_with_jobs(r.fix, r.applies_to)),
    ]
    if r.references:
        out.append("\nReferences")
        out += [f"  {ref}" for ref in r.references]
    if issues:
        out.append("\nKnown upstream issues (a report says which your versions match)")
        for k in issues:
            out.append(f"  {_plain(k.id)}: {_plain(k.title)}")
            out.append(f"    {_plain(k.url)}")
            out.append(f"    affected: {_affected_text(k)}; fixed: {_plain(k.fixed_in.text)}")
        out.append("  (verl-logscan explain ID shows one in full)")
    out.append(f"\nDefined in {entry.source}:{entry.line}")
    return "\n".join(out) + "\n"


def _plain(text: object) -> str:
    """Text of a known-issues file on one line and without control characters (a team's file is
    printed on a terminal as it is)."""
    return "".join(ch if ch.isprintable() else " " for ch in str(text))


def _affected_text(issue: KnownIssue) -> str:
    stated = [f"{a.package} {a.specifier or 'not stated'}" for a in issue.affected]
    return ", ".join(stated) or "not stated in the thread"


def explain_known_issue(issue: KnownIssue) -> str:
    """A known upstream issue in full: the thread, the symptom, the versions, the fix, the workaround."""
    s = issue.symptom
    symptom = [
        *(f"catalog entry {e}" for e in s.entries),
        *(f"message /{p.pattern}/" for p in s.patterns),
        *(f"frame /{p.pattern}/" for p in s.frames),
    ]
    fixed = ", ".join(f"{p} {v}" for p, v in issue.fixed_in.versions)
    out = [
        f"{_plain(issue.id)}: known {_plain(issue.project)} issue",
        f"  {_plain(issue.title)}",
        f"  {_plain(issue.url)}",
        "\nSymptom\n  " + _plain("; ".join(symptom)),
        "\nAffected versions\n  " + _plain(_affected_text(issue)),
        "\nFixed in\n  " + _plain(issue.fixed_in.text) + (f" ({_plain(fixed)})" if fixed else ""),
        "\nWorkaround\n  " + _plain(issue.workaround),
        "\nWhere the thread says so\n  " + _plain(issue.source_quote),
        "\nExample\n  " + _plain(issue.examples.match[0].line.splitlines()[-1]),
        f"\nDefined in {_plain(issue.source)}:{issue.line}",
    ]
    if issue.fixed_in.pr:
        out.insert(6, f"  fix: {_plain(issue.fixed_in.pr)}")
    return "\n".join(out) + "\n"


def explain_rule(rule_id: str) -> str | None:
    """A fallback rule (patterns/fallback.yaml: a phrase, type or frame rule, or a message marker, that
    names a failure no entry names); None when there is none of that id."""
    rules = fallback_rules()
    every = (*rules.phrases, *rules.types, *rules.frames, *rules.bare.message_markers)
    rule = next((r for r in every if r.id == rule_id), None)
    if rule is None:
        return None
    fix = rules.fix_for(rule.category)
    if isinstance(rule, MessageMarker):
        out = [
            f"{rule.id}: a failure marker whose failure is the text printed before it",
            f"category {rule.category}, when no phrase in that text names one",
            f"\nWhat it looks for\n  a line matching {rule.pattern.pattern}",
            "\nWhy\n  " + rule.why,
            "\nFix",
            *_numbered(_with_jobs(fix.fix, fix.applies_to) if fix is not None else UNKNOWN_FIX.fix),
            f"\nDefined in patterns/fallback.yaml:{rule.line}",
        ]
        return "\n".join(out) + "\n"
    kind = (
        "phrase"
        if isinstance(rule, PhraseRule)
        else "frame"
        if isinstance(rule, FrameCategoryRule)
        else "type"
    )
    out = [
        f"{rule.id}: a fallback {kind} rule, for failures that no catalog entry names",
        f"category {rule.category}" + (" (a weak hint: tried after the frame rules)" if rule.weak else ""),
        "\nWhat it looks for",
        *_looks_for(rule),
    ]
    if rule.examples.match:
        out.append("\nExample\n  " + rule.examples.match[0].line.replace("\n", "\n  ").rstrip())
    steps = [
        *getattr(rule, "fix", ()),
        *(_with_jobs(fix.fix, fix.applies_to) if fix is not None else UNKNOWN_FIX.fix),
    ]
    if fix is not None:
        out.append("\nWhat it is\n  " + fix.summary)
    out += ["\nFix", *_numbered(steps), f"\nDefined in patterns/fallback.yaml:{rule.line}"]
    return "\n".join(out) + "\n"


def _looks_for(rule) -> list[str]:
    if isinstance(rule, PhraseRule):
        return [
            "  a message holding " + " or ".join(repr(k) for k in rule.keywords) + ", and matching one of:",
            *(f"    {p.pattern}" for p in rule.patterns),
        ]
    if isinstance(rule, FrameCategoryRule):
        return [
            f"  a traceback frame whose {field} matches {getattr(rule, field).pattern}"
            for field in ("function", "file", "code")
            if getattr(rule, field) is not None
        ]
    return [
        f"  an exception whose type matches {rule.type.pattern}"
        + (f" and whose message matches {rule.message.pattern}" if rule.message is not None else "")
    ]


def explain_unknown(catalog: Catalog) -> str:
    """The verdict for an exception that no catalog entry recognises."""
    r = UNKNOWN_FIX
    out = [
        f"{UNKNOWN_ID}: an error that no catalog entry recognises",
        f"category {UNKNOWN_ID}, not a catalog entry ({len(catalog.entries)} entries are loaded)",
        "\nWhat it is\n  The job failed with an exception that none of the catalog's entries names. "
        "verl-logscan then reports the exception that ended the first failing process as the root "
        "cause, with its error line, traceback and the evidence before it, and lists similar known "
        "entries when one comes close. Its category still comes from its evidence where the fallback "
        "rules (patterns/fallback.yaml) read one: a wording, the exception type, the frames it failed "
        "in, or the nearest known entry; the report's `basis` names the rule. Only when none applies "
        "is the category `unknown` too.",
        "\nWhy it happens\n  " + r.why + " Echoes on other ranks (collective timeouts, lost peers, "
        "launcher summaries) are still counted as its symptoms.",
        "\nFix",
        *_numbered(r.fix),
        "\nAdding an entry",
        "  1. Copy the error line as the log prints it (with its [rank3]: or (WorkerDict pid=...) prefix).",
        "  2. Write an entry in a YAML file of your own, e.g. my-entries.yaml:\n",
        *(f"     {line}" for line in ENTRY_SKELETON.splitlines()),
        "\n  3. Check it: verl-logscan catalog check my-entries.yaml",
        "  4. Use it:   verl-logscan scan job.log --catalog my-entries.yaml",
        "  The README's 'Adding an entry' section describes every field; "
        "'verl-logscan catalog list' shows the entries there are.",
    ]
    if r.references:
        out.append("\nReferences")
        out += [f"  {ref}" for ref in r.references]
    return "\n".join(out) + "\n"


def _numbered(steps) -> list[str]:
    return [f"  {i}. {step}" for i, step in enumerate(steps, 1)]


def explain_hint(report: Report, catalog: Catalog, catalogs: tuple[str, ...]) -> str | None:
    """The `verl-logscan explain ...` command that works for this report's root cause, or None. An
    entry from a user catalog needs that catalog again; a failure no entry names is explained by the
    fallback rule that named its category, else by `explain unknown`."""
    rc = report.root_cause
    if rc is None:
        return None
    if rc.id == UNKNOWN_ID:
        basis = rc.basis
        if basis is not None and basis.rule and basis.kind in RULE_BASES:
            return f"verl-logscan explain {shlex.quote(basis.rule)}"  # the fallback rule that named it
        return f"verl-logscan explain {UNKNOWN_ID}"
    entry = catalog.get(rc.id)
    if entry is None:
        return None
    extra = "".join(f" --catalog {shlex.quote(c)}" for c in catalogs if _defined_in(entry, c))
    if catalogs and not extra and not _defined_in(entry, BUILTIN_SOURCE):
        return None
    return f"verl-logscan explain {shlex.quote(rc.id)}{extra}"


def _defined_in(entry: Entry, path: str) -> bool:
    root = str(Path(path))
    return entry.source == root or entry.source.startswith(root.rstrip("/") + "/")
