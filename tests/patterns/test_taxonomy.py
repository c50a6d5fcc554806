"""patterns/taxonomy.yaml is ../shared/TAXONOMY.md's vocabulary: the same category ids in the same
order, the same stages (TAXONOMY.md's in its order, with `training` among them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from patterns import CATEGORIES, STAGES, CatalogError
from patterns.vocabulary import load_taxonomy
from tests.conftest import ROOT

TAXONOMY_MD = ROOT.parent / "shared" / "TAXONOMY.md"
KEBAB = re.compile(r"^[a-z]+(?:-[a-z]+)*$")


def _taxonomy_md() -> str:
    if not TAXONOMY_MD.is_file():
        pytest.skip(f"{TAXONOMY_MD} is not beside this checkout")
    return TAXONOMY_MD.read_text(encoding="utf-8")


def _md_categories(text: str) -> list[str]:
    """The ids of the first table whose header is `| id | meaning |`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"^\|\s*id\s*\|\s*meaning\s*\|", line))
    ids = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        ids.append(line.split("|")[1].strip())
    return ids


def _md_stages(text: str) -> list[str]:
    """The backquoted ids of the `## Stages` section's paragraphs before the one on Ray task names (in
    their order of first mention)."""
    section = text.split("## Stages", 1)[1]
    prose = section.split("Ray task names map to stages", 1)[0]
    found: dict[str, None] = {}
    for word in re.findall(r"`([^`]+)`", prose):
        if KEBAB.match(word):
            found.setdefault(word, None)
    return list(found)


def test_the_categories_are_taxonomy_md_s_in_its_order() -> None:
    md = _md_categories(_taxonomy_md())
    assert len(md) == 21 and md[-1] == "unknown"
    assert list(CATEGORIES) == md


def test_the_stages_are_taxonomy_md_s_in_its_order() -> None:
    md = _md_stages(_taxonomy_md())
    assert "training" in md and "launch" in md and "shutdown" in md
    assert set(STAGES) == set(md)
    assert [s for s in STAGES if s != "training"] == [s for s in md if s != "training"]


def test_every_category_has_a_one_line_description() -> None:
    for description in CATEGORIES.values():
        assert description.strip() and "\n" not in description


def test_a_broken_taxonomy_is_refused_with_each_problem_and_its_line() -> None:
    text = (
        "categories:\n"
        "  - id: cuda-oom\n"
        "    description: GPU memory exhausted\n"
        "  - id: Cuda_OOM\n"
        "    description: again\n"
        "  - id: cuda-oom\n"
        "    description: twice\n"
        "stages: [launch, launch]\n"
        "stagez: []\n"
    )
    with pytest.raises(CatalogError) as info:
        load_taxonomy(text, "t.yaml")
    text_of = str(info.value)
    assert "t.yaml:4: category 'Cuda_OOM' is not a kebab-case id" in text_of
    assert "t.yaml:6: duplicate category 'cuda-oom'" in text_of
    assert "duplicate stage 'launch'" in text_of
    assert "t.yaml:9: unknown top-level field 'stagez'" in text_of
    assert "the category 'unknown' is missing" in text_of


def test_the_taxonomy_file_ships_as_package_data() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"*.yaml"' in pyproject and (ROOT / "patterns" / "taxonomy.yaml").is_file()
    assert not Path(ROOT / "patterns" / "taxonomy.py").exists()
