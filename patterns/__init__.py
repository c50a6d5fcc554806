"""The knowledge of verl-logscan: the YAML catalog of known failures, its schema and its loader.

This package imports none of the others (`logparse` and `reports` build on it).
"""

from patterns.loader import CatalogError, Problem, load_builtin_catalog, load_catalog
from patterns.schema import Catalog, Entry, Example, Remediation, Role, Severity
from patterns.vocabulary import CATEGORIES, STAGES

__all__ = [
    "CATEGORIES",
    "STAGES",
    "Catalog",
    "CatalogError",
    "Entry",
    "Example",
    "Problem",
    "Remediation",
    "Role",
    "Severity",
    "load_builtin_catalog",
    "load_catalog",
]
