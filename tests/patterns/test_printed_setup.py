"""patterns/printed_setup.yaml's examples through logparse.observe.printed_setup (PrintedSetup)."""

from __future__ import annotations

import pytest

from logparse.observe.printed_setup import PrintedSetup
from patterns.printed_setup import setup_wordings

RAW = setup_wordings().raw


def _read(example: dict) -> PrintedSetup:
    setup = PrintedSetup()
    lines = [example["line"]] if "line" in example else example["block"].splitlines()
    for line in lines:
        setup.feed("s", line)
    setup.finish()
    return setup


def _examples(section: str, kind: str) -> list[dict]:
    return RAW[section]["examples"][kind]


@pytest.mark.parametrize("example", _examples("versions", "match"), ids=lambda e: e["line"][:40])
def test_version_lines(example: dict) -> None:
    assert _read(example).versions == {k: str(v) for k, v in example["expect"].items()}


@pytest.mark.parametrize("example", _examples("versions", "no_match"), ids=lambda e: e["line"][:40])
def test_not_version_lines(example: dict) -> None:
    assert example["why"]
    assert _read(example).versions == {}


@pytest.mark.parametrize("example", _examples("config", "match"), ids=lambda e: str(e)[:40])
def test_config_dumps(example: dict) -> None:
    config = _read(example).config
    for key, value in example["expect"].items():
        assert config[key] == value, key


@pytest.mark.parametrize("example", _examples("config", "no_match"), ids=lambda e: e["line"][:40])
def test_not_config_dumps(example: dict) -> None:
    assert example["why"]
    assert _read(example).config == {}


def test_hostile_lines_stay_bounded() -> None:
    setup = PrintedSetup()
    setup.feed("s", "{" * 100_000)
    setup.feed("s", "{'a': " + "[" * 5_000)
    for _ in range(3_000):
        setup.feed("s", "  x: 1")
    setup.feed("t", "data:")
    setup.feed("t", "  lr: " + "9" * 50_000)
    setup.finish()
    assert len(setup.config) <= 1_024
