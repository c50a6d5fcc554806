"""One owner per question: where a report says a failure happened (rank, local rank, pid, actor, node),
at which stage, and how far the job got (its last step) is decided by one module each, and nothing
after the decision changes it. Read from the code itself (ast), so that a second decider fails here
the day it is written."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("logparse", "patterns", "reports")

PLACE_FIELDS = {"rank", "local_rank", "pid", "actor", "node"}
STAGE_FIELDS = {"stage", "stage_source", "stage_reached"}
STEP_FIELDS = {"last_step", "failure_step", "_last_step"}


def modules() -> dict[str, ast.Module]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            out[str(path.relative_to(ROOT))] = ast.parse(path.read_text(encoding="utf-8"))
    return out


MODULES = modules()


def _calls(tree: ast.AST, name: str):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if called == name:
                yield node


def _defined(tree: ast.AST) -> set[str]:
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def _assigned(tree: ast.Module) -> set[str]:
    """The names a module assigns at its top level."""
    names = set()
    for n in tree.body:
        targets = (
            n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        )
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def test_nothing_patches_a_verdict_after_the_choice() -> None:
    """No `dataclasses.replace` sets where, at which stage or how far: the deciders build the values
    once (the progress tracker fills in the stage reached and the failure's step it is given)."""
    found = []
    for module, tree in MODULES.items():
        for call in _calls(tree, "replace"):
            fields = {k.arg for k in call.keywords} & (PLACE_FIELDS | STAGE_FIELDS | STEP_FIELDS)
            if fields and module != "logparse/observe/progress.py":
                found.append(f"{module}:{call.lineno} replaces {sorted(fields)}")
    assert not found, found


def test_the_root_cause_is_built_in_one_place_from_the_deciders() -> None:
    """RootCause is constructed only by the verdict, its place from decide/locate's Place and its stage
    from decide/stage's chain."""
    built = [(module, call) for module, tree in MODULES.items() for call in _calls(tree, "RootCause")]
    assert [m for m, _ in built] == ["logparse/decide/verdict.py"], [m for m, _ in built]
    call = built[0][1]
    values = {k.arg: ast.unparse(k.value) for k in call.keywords}
    for field in PLACE_FIELDS:
        assert values[field] == f"place.{field}", (field, values[field])
    assert values["stage"] == "stage"
    verdict = MODULES["logparse/decide/verdict.py"]
    assert any(ast.unparse(c.func) == "locate" for c in _calls(verdict, "locate"))
    assert any(ast.unparse(c.func) == "stage_of" for c in _calls(verdict, "stage_of"))


@pytest.mark.parametrize(
    ("owner", "names"),
    [
        (
            "logparse/decide/stage.py",
            {
                "stage_of",
                "stage_of_task",
                "stage_of_frames",
                "stage_of_message",
                "stage_reached",
                "StageSource",
                "STAGE_CHAIN",
            },
        ),
        ("logparse/decide/locate.py", {"locate", "laggard", "launcher_failed_rank", "global_rank", "Place"}),
    ],
)
def test_each_decider_is_defined_once(owner: str, names: set[str]) -> None:
    for module, tree in MODULES.items():
        defined = _defined(tree) | _assigned(tree)
        if module == owner:
            assert names <= defined, names - defined
        else:
            assert not names & defined, (module, names & defined)


def test_the_last_step_has_one_writer() -> None:
    """Only the progress tracker assigns a last step; one step-line regex, in the step line's reader."""
    writers = []
    for module, tree in MODULES.items():
        for node in ast.walk(tree):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, (ast.AugAssign, ast.AnnAssign))
                else []
            )
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr in STEP_FIELDS:
                    writers.append(module)
    assert set(writers) == {"logparse/observe/progress.py"}, writers
    step_regexes = [
        module
        for module, tree in MODULES.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, (str, bytes))
        and any(shape in str(node.value) for shape in ("step:(\\d", "step:([0-9]", "step:(?P"))
    ]
    assert set(step_regexes) == {"logparse/read/steps.py"}, step_regexes
