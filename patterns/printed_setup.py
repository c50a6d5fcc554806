"""Knowledge of what an ordinary script prints about its setup (versions, config dumps), read from
patterns/printed_setup.yaml; logparse/observe/printed_setup.py (PrintedSetup) applies it."""

from __future__ import annotations

import functools
import importlib.resources
import re
from dataclasses import dataclass
from typing import Any

import yaml

SETUP_FILE = "printed_setup.yaml"


@dataclass(frozen=True)
class SetupWordings:
    version_line: re.Pattern[str]
    two_part_names: frozenset[str]
    aliases: dict[str, str]
    not_names: frozenset[str]
    dict_open: str
    namespace_open: str
    yaml_open: re.Pattern[str]
    yaml_line: re.Pattern[str]
    override: re.Pattern[str]
    progress_keys: frozenset[str]
    raw: dict[str, Any]  # the whole file (its examples, for the tests)


def read_setup_text() -> str:
    return importlib.resources.files("patterns").joinpath(SETUP_FILE).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def setup_wordings() -> SetupWordings:
    raw = yaml.safe_load(read_setup_text())
    v, c = raw["versions"], raw["config"]
    return SetupWordings(
        version_line=re.compile(v["line"]),
        two_part_names=frozenset(v["two_part_names"]),
        aliases=dict(v["aliases"]),
        not_names=frozenset(v["not_names"]),
        dict_open=c["dict_open"],
        namespace_open=c["namespace_open"],
        yaml_open=re.compile(c["yaml_open"]),
        yaml_line=re.compile(c["yaml_line"]),
        override=re.compile(c["override"]),
        progress_keys=frozenset(c["progress_keys"]),
        raw=raw,
    )
