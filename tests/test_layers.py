"""The layers import in one direction only (docs: ../shared/STYLE.md, "Layers"): `patterns` imports none
of the others; in `logparse` the reading modules import no observer or decision and the observers no
decision; `reports` imports `logparse.model` only (and `patterns` for wording); and no module of the
three packages imports, directly or through others, itself.

The imports are read from the source (ast), all of them: at the top, inside functions (the lazy ones
that keep start-up short) and under `TYPE_CHECKING`, since each is a dependency all the same.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGES = ("logparse", "patterns", "reports")
# the modules that render, each a front end over the same commands: the CLI and the Python API
FRONT_ENDS = ("logparse.cli", "logparse.cli_terminal", "logparse.api")
MAX_CYCLES = 200  # cycles listed at most (a tangle of modules has many; the first ones show where)

# Cycles known not to be gone yet, each as its modules in import order (an import of the last one
# brings in the first again), with the reason.


@cache
def modules() -> dict[str, Path]:
    """Dotted name -> file of every module of the three packages (a package is its __init__.py)."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imported(name: str) -> set[str]:
    """The project modules `name` imports: `from a.b import c` is a.b.c when that is a module, else a.b."""
    known = modules()
    path = known[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, one level up per extra dot
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                out.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {m for m in out if m.split(".")[0] in PACKAGES}


@cache
def graph() -> dict[str, frozenset[str]]:
    return {name: frozenset(imported(name)) for name in modules()}


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _of(package: str) -> list[str]:
    return [m for m in modules() if _in(m, package)]


def _reachable(edges: dict[str, frozenset[str]], name: str) -> set[str]:
    seen: set[str] = set()
    todo = [name]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def cycles(edges: dict[str, frozenset[str]], limit: int = MAX_CYCLES) -> list[tuple[str, ...]]:
    """The elementary cycles of the graph, each once, starting at its smallest module (at most `limit`)."""
    reach = {name: _reachable(edges, name) for name in edges}
    found: list[tuple[str, ...]] = []

    def walk(start: str, path: list[str], on_path: set[str]) -> Iterator[tuple[str, ...]]:
        for nxt in sorted(edges.get(path[-1], ())):
            if nxt == start:
                yield tuple(path)
            elif nxt > start and nxt not in on_path and start in reach.get(nxt, ()):
                path.append(nxt)
                on_path.add(nxt)
                yield from walk(start, path, on_path)
                on_path.discard(path.pop())

    for start in sorted(edges):
        for cycle in walk(start, [start], {start}):
            found.append(cycle)
            if len(found) >= limit:
                return found
    return found


def _show(cycle: tuple[str, ...]) -> str:
    return " -> ".join((*cycle, cycle[0]))


def test_the_import_reader_sees_lazy_and_type_checking_imports() -> None:
    assert "reports.html" in graph()["reports.render"]  # inside render(): HTML only when asked for
    assert "patterns.yamlfile" in graph()["patterns.loader"]  # under TYPE_CHECKING and in a function
    assert "logparse.model" in graph()["reports.jsonreport"]
    assert cycles({"a": frozenset("b"), "b": frozenset("ac"), "c": frozenset("a")}) == [
        ("a", "b"),
        ("a", "b", "c"),
    ]


@pytest.mark.parametrize("module", _of("reports"))
def test_reports_import_no_logparse_module_but_the_model(module: str) -> None:
    wrong = sorted(m for m in graph()[module] if _in(m, "logparse") and m != "logparse.model")
    assert not wrong, f"{module} imports {wrong}: a report renders a finished logparse.model.Report"


@pytest.mark.parametrize("module", _of("patterns"))
def test_patterns_import_neither_logparse_nor_reports(module: str) -> None:
    wrong = sorted(m for m in graph()[module] if _in(m, "logparse") or _in(m, "reports"))
    assert not wrong, f"{module} imports {wrong}: the knowledge builds on nothing else"


@pytest.mark.parametrize("module", _of("logparse.read"))
def test_the_reading_modules_import_no_observer_or_decision(module: str) -> None:
    wrong = sorted(m for m in graph()[module] if _in(m, "logparse.observe") or _in(m, "logparse.decide"))
    assert not wrong, f"{module} imports {wrong}: reading knows formats, never the analysis"


@pytest.mark.parametrize("module", _of("logparse.observe"))
def test_the_observers_import_no_decision(module: str) -> None:
    wrong = sorted(m for m in graph()[module] if _in(m, "logparse.decide"))
    assert not wrong, f"{module} imports {wrong}: an observation decides no verdict"


def test_the_imports_form_no_cycle() -> None:
    found = cycles(graph())
    assert not found, "import cycles:\n" + "\n".join(_show(c) for c in found)


def reports_importers(edges: dict[str, frozenset[str]]) -> list[str]:
    """The logparse modules but the front ends (the CLI, the Python API) that import reports (lazily
    too): the library never renders."""
    return sorted(
        m
        for m in edges
        if _in(m, "logparse") and m not in FRONT_ENDS and any(_in(i, "reports") for i in edges[m])
    )


def test_only_the_cli_imports_reports() -> None:
    found = reports_importers(graph())
    assert not found, (
        f"{found} import reports: only the front ends (logparse/cli.py, logparse/api.py) render (STYLE.md, Layers)"
    )


def test_a_lazy_import_of_reports_in_the_library_is_caught() -> None:
    """The evasion issue 37 named: `from reports import ...` inside a function of logparse/fleet.py."""
    source = "def rows(report):\n    from reports import render\n    return render(report, 'md')\n"
    tree = ast.parse(source)
    lazy = {f"{node.module}" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    edges = {**graph(), "logparse.fleet": frozenset(graph()["logparse.fleet"] | lazy)}
    assert reports_importers(edges) == ["logparse.fleet"]
