"""Every catalog entry's examples through the same code as `verl-logscan catalog check`."""

from __future__ import annotations

from itertools import pairwise

import pytest

from logparse.catalog_check import check_examples
from patterns import CATEGORIES, Role, load_builtin_catalog

CATALOG = load_builtin_catalog()
IDS = [e.id for e in CATALOG.entries]


@pytest.mark.parametrize("entry_id", IDS)
def test_entry_examples(entry_id: str) -> None:
    count, failures = check_examples(CATALOG, {entry_id})
    assert count >= 2
    assert not failures, "\n".join(str(f) for f in failures)


@pytest.mark.parametrize("entry_id", IDS)
def test_entry_is_complete(entry_id: str) -> None:
    e = CATALOG.get(entry_id)
    assert e.category in CATEGORIES
    assert e.examples.match and e.examples.no_match
    assert all(x.why.strip() for x in e.examples.no_match)
    assert e.remediation.summary and e.remediation.why and e.remediation.fix
    # every match example carries a keyword, or the prefilter would never let the entry see it
    assert e.keywords


def test_catalog_size_and_required_failures() -> None:
    assert len(CATALOG.entries) >= 20
    categories = {e.category for e in CATALOG.entries if e.role == Role.CAUSE}
    for needed in (
        "cuda-oom",
        "import-error",
        "nccl-error",
        "collective-timeout",
        "rendezvous-failure",
        "host-oom",
        "shm-exhausted",
        "tokenizer-error",
        "reward-error",
        "timeout",
    ):
        assert needed in categories, needed
    roles = {e.role for e in CATALOG.entries}
    assert Role.WRAPPER in roles and Role.SYMPTOM in roles


@pytest.mark.parametrize("entry_id", IDS)
def test_explain_has_no_empty_section(entry_id: str) -> None:
    from tests.conftest import run_cli

    out = run_cli(["explain", entry_id]).stdout
    sections = ("What it is", "Why it happens", "Example", "Fix")
    for name in sections:
        assert f"\n{name}\n" in out, name
    body = out.split("\nWhat it is\n", 1)[1]
    for name, nxt in pairwise(sections):
        text = (
            body.split(f"\n{nxt}\n", 1)[0]
            if name == "What it is"
            else out.split(f"\n{name}\n", 1)[1].split(f"\n{nxt}\n", 1)[0]
        )
        assert text.strip(), f"section {name!r} is empty"
