"""patterns/ is the knowledge: it imports no other package of the project, and its modules import
each other one way only (no circle, counting the imports inside functions too)."""

from __future__ import annotations

import ast
from pathlib import Path

import patterns

PACKAGE = Path(patterns.__file__).resolve().parent


def _imports(path: Path) -> set[str]:
    """Every module an import statement of `path` names, wherever it sits (top level, a function,
    an `if TYPE_CHECKING:` block)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    modules = {f"patterns.{p.stem}": p for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    return {name: {m for m in _imports(path) if m in modules} - {name} for name, path in modules.items()}


def test_patterns_imports_no_other_package_of_the_project() -> None:
    for path in sorted(PACKAGE.rglob("*.py")):
        bad = sorted(m for m in _imports(path) if m.split(".")[0] in ("logparse", "reports"))
        assert not bad, f"{path.relative_to(PACKAGE.parent)} imports {bad}"


def test_the_modules_of_patterns_import_each_other_one_way() -> None:
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for dep in sorted(graph[name]):
            if state.get(dep) == 1:
                cycle = path[path.index(dep) :] + [dep] if dep in path else [name, dep]
                raise AssertionError("import circle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep, [*path, dep])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def test_the_shared_building_blocks_import_only_the_schema() -> None:
    assert _graph()["patterns.validation"] <= {"patterns.schema"}
    assert _graph()["patterns.schema"] == set()
