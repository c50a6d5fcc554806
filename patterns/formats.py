"""Log formats as data (patterns/formats.yaml): launcher prefixes, what a message says of its origin,
traceback structure, torchrun's failure summary, whose code a frame is, log-folder layouts and the
NCCL watchdog's wordings. The reading code keeps its control flow and takes each regex or list from
here by id (`formats().regex("ray-actor")`); patterns/wordings.py has the file's schema.
"""

from __future__ import annotations

import functools
import importlib.resources

from patterns.cache import source_of
from patterns.wordings import FieldSpec, SectionSpec, Wordings, builtin_wordings, is_texts

FORMATS_FILE = "formats.yaml"
FORMATS_LABEL = "patterns/formats.yaml"
FRAME_KINDS = ("user", "library", "launcher")

SECTIONS = {
    "prefixes": SectionSpec(("regex",)),
    "message_fields": SectionSpec(
        ("regex",),
        {
            "keywords": FieldSpec("a list of literals (one is in every line the regex can hit)", is_texts),
            "anchored": FieldSpec(
                "true or false (matched at the start of the message)", lambda v: isinstance(v, bool)
            ),
        },
    ),
    "tracebacks": SectionSpec(("regex", "literal", "literals")),
    "torchrun_summary": SectionSpec(("regex", "literal", "literals")),
    "frame_kinds": SectionSpec(
        ("regex", "literals"),
        {"kind": FieldSpec(f"one of {', '.join(FRAME_KINDS)}", lambda v: v in FRAME_KINDS, required=True)},
    ),
    "layouts": SectionSpec(("regex", "literal", "literals")),
    "collectives": SectionSpec(("regex", "literals")),
    "worker_deaths": SectionSpec(("regex",)),
}


def read_formats_text() -> str:
    return importlib.resources.files("patterns").joinpath(FORMATS_FILE).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def formats() -> Wordings:
    """The built-in formats (values only), parsed and checked, or read back from the start-up cache."""
    return builtin_wordings(
        "formats",
        read_formats_text(),
        FORMATS_LABEL,
        SECTIONS,
        source_of("patterns.formats", "patterns.wordings", "patterns.validation", "patterns.yamlfile"),
    )


def load_formats(text: str | None = None, label: str = FORMATS_LABEL) -> Wordings:
    """formats.yaml (or `text`) with its examples, for the catalog check; CatalogError lists every problem."""
    from patterns.wordings import load_wordings

    return load_wordings(read_formats_text() if text is None else text, label, SECTIONS)
