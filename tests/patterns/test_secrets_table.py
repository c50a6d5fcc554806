"""The table of secret kinds (patterns/secrets.yaml): its loader rejects what would mask nothing or
the wrong thing, and every example holds through the whole redactor, not only its own regexes."""

from __future__ import annotations

from pathlib import Path

import pytest

from logparse.redact import Redactor
from patterns import CatalogError
from patterns.secrets import parse_secret_kinds, secret_kinds

KINDS = secret_kinds()


def test_the_table_loads_with_every_kind_the_issue_lists() -> None:
    ids = {k.id for k in KINDS}
    assert {
        "gitlab-token",
        "slack-token",
        "google-api-key",
        "azure-account-key",
        "azure-sas-signature",
        "jwt",
        "authorization-header",
        "bearer-token",
        "private-key",
        "cli-secret-flag",
        "config-secret",
        "env-secret",
        "wandb-api-key",
        "aws-access-key-id",
        "aws-secret-access-key",
        "aws-session-token",
        "url-password",
        "hf-token",
        "openai-api-key",
        "anthropic-api-key",
        "github-token",
        "email",
    } <= ids
    assert all(k.match and k.no_match for k in KINDS)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.id)
def test_each_match_example_is_masked_as_its_kind_by_the_whole_redactor(kind) -> None:
    for ex in kind.match:
        r = Redactor()
        out = r.text(ex.line)
        assert ex.secret not in out, out
        assert f"[redacted:{kind.id}]" in out, out
        assert set(r.counts()) == {kind.id}, (ex.line, r.counts())  # an earlier kind did not take it


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.id)
def test_each_no_match_example_stays_through_the_whole_redactor(kind) -> None:
    for ex in kind.no_match:
        r = Redactor()
        assert r.text(ex.line) == ex.line, ex.why
        assert r.counts() == {}


GOOD = """\
- id: demo-token
  title: a demo token
  hints: ['dt_']
  patterns:
    - '(?P<v>dt_[a-z]{8})'
  examples:
    match:
      - line: 'use dt_abcdefgh now'
        secret: 'abcdefgh'
    no_match:
      - line: 'dt_short'
        why: too short
"""


def test_a_good_table_parses() -> None:
    (kind,) = parse_secret_kinds(GOOD, "demo.yaml")
    assert kind.id == "demo-token" and kind.values("x dt_abcdefgh") == [(2, 13)]


@pytest.mark.parametrize(
    "change,reason",
    [
        (("'(?P<v>dt_[a-z]{8})'", "'dt_[a-z]{8}'"), "no group (?P<v>"),
        (("'(?P<v>dt_[a-z]{8})'", "'(?P<v>(dt_[a-z]+)+)'"), "nests unbounded quantifiers"),
        (("'(?P<v>dt_[a-z]{8})'", "'(?P<v>dt_[a-z'"), "does not compile"),
        (("secret: 'abcdefgh'", "secret: 'zzz'"), "is not in its line"),
        (("line: 'dt_short'", "line: 'dt_abcdefgh'"), "a no_match line is masked"),
        (("hints: ['dt_']", "hints: ['xx_']"), "no hint occurs"),
        (("hints: ['dt_']", "hints: ['DT_']"), "lower case"),
        (("  title: a demo token\n", "  title: a demo token\n  colour: red\n"), "unknown field 'colour'"),
        (("- id: demo-token", "- id: Demo Token"), "kebab-case"),
    ],
)
def test_a_bad_table_is_refused_with_file_and_line(change: tuple[str, str], reason: str) -> None:
    text = GOOD.replace(*change)
    with pytest.raises(CatalogError) as exc:
        parse_secret_kinds(text, "demo.yaml")
    message = str(exc.value)
    assert reason in message and "demo.yaml:" in message


def test_duplicate_ids_and_every_problem_at_once() -> None:
    text = GOOD + GOOD.replace("'(?P<v>dt_[a-z]{8})'", "'dt_'")
    with pytest.raises(CatalogError) as exc:
        parse_secret_kinds(text + GOOD, "demo.yaml")
    reasons = [p.reason for p in exc.value.problems]
    assert any("no group" in r for r in reasons) and any("defined twice" in r for r in reasons)


def test_the_docs_table_lists_every_kind_and_the_readme_counts_them() -> None:
    root = Path(__file__).resolve().parents[2]
    table = (root / "docs" / "redaction.md").read_text()
    section = table[table.index("## Secrets") : table.index("## `--redact-hosts`")]
    for kind in KINDS:
        assert f"| `{kind.id}` |" in section, kind.id
    assert f"({len(KINDS)} kinds" in (root / "README.md").read_text()


def test_the_loaded_table_is_the_parsed_one_with_regexes_compiled_on_first_use() -> None:
    import importlib.resources
    import pickle

    from patterns.schema import LazyRe

    text = importlib.resources.files("patterns").joinpath("secrets.yaml").read_text(encoding="utf-8")
    parsed = parse_secret_kinds(text)

    def shape(kind):
        block = tuple(p.pattern for p in kind.block) if kind.block else None
        return (
            kind.id,
            kind.title,
            tuple(p.pattern for p in kind.patterns),
            kind.hints,
            kind.prefixes,
            block,
            kind.match,
            kind.no_match,
            kind.line,
        )

    assert [shape(k) for k in KINDS] == [shape(k) for k in parsed]
    lazy = LazyRe(r"token=(?P<v>\w+)")
    for p in (lazy, pickle.loads(pickle.dumps(lazy))):
        assert p.search("a token=abc").group("v") == "abc" and p.groupindex == {"v": 1}
