"""patterns/fallback.yaml: the rules load strictly, every regex is safe, every example behaves, and a
broken file is refused with every problem and its line."""

from __future__ import annotations

import pytest

from logparse.catalog_check import check_fallback_examples
from patterns import CATEGORIES, CatalogError
from patterns.fallback import fallback_rules, load_fallback_rules, rule_ids
from patterns.loader import regex_risk, slow_probe


def all_patterns(rules):
    for rule in rules.phrases:
        yield rule.id, list(rule.patterns)
    for rule in rules.types:
        yield rule.id, [p for p in (rule.type, rule.message) if p is not None]
    for rule in rules.frames:
        yield rule.id, [p for p in (rule.function, rule.file, rule.code) if p is not None]
    bare = rules.bare
    yield "bare_lines", [bare.exception, bare.prefix, *bare.benign, *bare.structured, *bare.markers]
    for marker in bare.message_markers:
        yield marker.id, list(marker.sections)


def test_builtin_rules_load_strictly() -> None:
    # lazy=False compiles and risk-checks every regex (the scan's copy compiles on first use)
    strict = load_fallback_rules(lazy=False)
    lazy = fallback_rules()
    assert rule_ids(strict).keys() == rule_ids(lazy).keys()
    assert len(strict.phrases) >= 20 and len(strict.types) >= 15 and len(strict.frames) >= 10


def test_every_regex_is_safe_and_fast() -> None:
    for rule_id, patterns in all_patterns(load_fallback_rules(lazy=False)):
        for p in patterns:
            assert regex_risk(p.pattern) is None, (rule_id, p.pattern)
            assert slow_probe(p) is None, (rule_id, p.pattern)


def test_every_example_behaves() -> None:
    count, failures = check_fallback_examples()
    assert not failures, "\n".join(str(f) for f in failures)
    assert count >= 200


def test_every_rule_has_positive_and_negative_examples() -> None:
    for rule in rule_ids(fallback_rules()).values():
        assert rule.examples.match, rule.id
        assert rule.examples.no_match, rule.id
        assert all(x.why for x in rule.examples.no_match), rule.id


def test_every_category_has_a_fix() -> None:
    rules = fallback_rules()
    for category in CATEGORIES:
        if category == "unknown":
            continue
        fix = rules.fix_for(category)
        assert fix is not None and fix.summary and fix.why and fix.fix, category


@pytest.mark.slow
def test_a_wrong_example_is_caught() -> None:
    text = fallback_text().replace(
        '        - "RuntimeError: loss is nan at step 12"\n',
        '        - "RuntimeError: loss is fine at step 12"\n',
    )
    _count, failures = check_fallback_examples(load_fallback_rules(text))
    assert [(f.rule, f.kind) for f in failures] == [("phrase-nan-loss", "match")]


def fallback_text() -> str:
    import importlib.resources

    return importlib.resources.files("patterns").joinpath("fallback.yaml").read_text(encoding="utf-8")


BROKEN = """\
phrases:
  - id: Bad_Id
    category: not-a-category
    keywords: ['x']
    patterns: ['(a+)+$']
    colour: red
    examples:
      match: ['x']
      no_match: ['y']
types:
  - id: type-one
    category: timeout
    type: 'TimeoutError'
    examples: {match: ['TimeoutError: x'], no_match: [{line: 'a', why: b}]}
  - id: type-one
    category: timeout
    type: 'Timeout'
    examples: {match: ['TimeoutError: x'], no_match: [{line: 'a', why: b}]}
  - id: type-two
    category: timeout
    type: '('
    examples: {match: ['TimeoutError: x'], no_match: [{line: 'a', why: b}]}
frames:
  - id: frame-empty
    category: data-error
    examples: {match: ['not a block'], no_match: [{line: 'a', why: b}]}
bare_lines:
  keywords: ['Error:']
  exception: '^(?P<type>\\w+Error): (?P<message>.*)'
  prefix: '^Error: (?P<message>.*)'
  levels: [ERROR]
  markers:
    - '^Aborted$'
    - id: marker-one
      pattern: '^the end$'
      message: after
      category: config-error
      lines: 1000
      why: a test
    - id: type-one
      pattern: '^the end again$'
      message: before
      category: config-error
      colour: blue
      why: a test
    - 42
  examples: {match: ['KeyError: x'], no_match: [{line: 'ok', why: fine}]}
nearest: {scorer: cosine, threshold: 500}
remediation: {}
surprise: 1
"""


def test_broken_file_lists_every_problem_with_its_line() -> None:
    with pytest.raises(CatalogError) as info:
        load_fallback_rules(BROKEN, label="my-fallback.yaml")
    text = str(info.value)
    expected = [
        "my-fallback.yaml:2: rule 'Bad_Id': id 'Bad_Id' is not kebab-case",
        "my-fallback.yaml:3: rule 'Bad_Id': 'not-a-category' is not a category a rule can name",
        "nests unbounded quantifiers",
        "unknown field 'colour'",
        "examples.no_match items need 'line' and 'why'",
        "rule 'type-two': type does not compile",
        "duplicate rule id 'type-one'",
        "a frame rule needs at least one of function, file, code",
        "frame rule examples are blocks",
        "rule 'marker-one': 'message' must be 'before'",
        "rule 'marker-one': 'lines' must be a whole number 1-64, got 1000",
        "rule 'type-one': unknown field 'colour'",
        "markers #4 must be a regex string or a mapping",
        "nearest.scorer must be one of",
        "nearest.threshold must be a number 0-100",
        "unknown top-level field 'surprise'",
    ]
    for piece in expected:
        assert piece in text, piece


def test_wrapper_type_map_reads_the_type_rules() -> None:
    rules = fallback_rules()
    assert rules.type_category("ModuleNotFoundError") == "import-error"
    assert rules.type_category("torch.OutOfMemoryError") == "cuda-oom"
    assert rules.type_category("ray.exceptions.OutOfMemoryError") == "host-oom"
    assert rules.type_category("GetTimeoutError") == "timeout"
    assert rules.type_category("RendezvousTimeoutError") == "rendezvous-failure"
    # (AssertionError's rule needs a message: a bare assert says no category; the type alone is no hint)
    assert rules.type_category("AssertionError") is None
    for says_nothing in ("RuntimeError", "ValueError", "Exception", "KeyError", "TypeError"):
        assert rules.type_category(says_nothing) is None, says_nothing
