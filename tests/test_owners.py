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
STEP_FIELDS = {"last_step", "failure_step", "_last_step", "last_step_line"}


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


# -- what a module writes: keywords, positional arguments, `**{...}`, setattr, attribute assignment --------
def _dataclass_fields(modules: dict[str, ast.Module]) -> dict[str, list[str]]:
    """class name -> its fields in order, for every dataclass of the project (a positional argument of
    its constructor writes the field at its place)."""
    out = {}
    for tree in modules.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                "dataclass" in ast.unparse(d) for d in node.decorator_list
            ):
                out[node.name] = [
                    b.target.id
                    for b in node.body
                    if isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name) and b.value is not _NO
                ]
    return out


_NO = object()


def _called(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def writes(tree: ast.AST, fields: dict[str, list[str]]) -> list[tuple[int, str, str, ast.AST | None]]:
    """Every field a module writes: (line, how, field, the value's expression or None when unknown).
    `how`: `replace`, a dataclass's name (its constructor), `setattr`, `assign`, or `replace **` (a mapping
    that is not written out: its fields cannot be read)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            out += _call_writes(node, fields)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [
                (node.lineno, "assign", t.attr, node.value) for t in targets if isinstance(t, ast.Attribute)
            ]
    return out


def _call_writes(node: ast.Call, fields: dict[str, list[str]]) -> list[tuple[int, str, str, ast.AST | None]]:
    name = _called(node)
    if name in ("setattr", "__setattr__") and len(node.args) >= 3:
        key = node.args[1]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return [(node.lineno, "setattr", key.value, node.args[2])]
        return []
    if name != "replace" and name not in fields:
        return []
    out = [
        (node.lineno, name, field, arg) for field, arg in zip(fields.get(name, ()), node.args, strict=False)
    ]
    for k in node.keywords:
        if k.arg is not None:
            out.append((node.lineno, name, k.arg, k.value))
        elif isinstance(k.value, ast.Dict):
            out += [
                (node.lineno, name, key.value, value)
                for key, value in zip(k.value.keys, k.value.values, strict=True)
                if isinstance(key, ast.Constant) and isinstance(key.value, str)
            ]
        elif name == "replace":
            out.append((node.lineno, "replace **", "*", None))
    return out


DATACLASS_FIELDS = _dataclass_fields(MODULES)
# who may write a stage at all (the stage's decider, the one place a RootCause is built from it, and the
# progression's own stages), and the modules whose `replace(x, **changes)` writes every field alike (each string of a finished report
# redacted, or escaped for a format: they decide nothing)
STAGE_OWNERS = {
    "logparse/decide/stage.py",
    "logparse/decide/verdict.py",
    "logparse/observe/progress.py",  # (the stages the markers show, as it records them)
    "logparse/observe/progression.py",  # (the Progress it builds from them)
}
GENERIC_REPLACE = {"logparse/redact.py", "reports/escape.py"}


def _stage_functions(modules: dict[str, ast.Module]) -> set[str]:
    """The functions decide/stage.py defines (a stage value computed by one is decide/stage's), and the
    progression's own questions of where it was (`stage_at`, a report's `stage_at_line`)."""
    owner = modules.get("logparse/decide/stage.py")
    names = {n.name for n in ast.walk(owner) if isinstance(n, ast.FunctionDef)} if owner else set()
    return names | {"stage_at", "stage_at_line"}


def patched(modules: dict[str, ast.Module]) -> list[str]:
    """The places that patch where, at which stage or how far after the decision: a `replace` or a
    setattr of such a field (or a `replace` whose fields cannot be read). None may: the progression
    builds its Progress once, the deciders their values once."""
    found = []
    for module, tree in modules.items():
        for line, how, field, _ in writes(tree, DATACLASS_FIELDS):
            if how == "replace **" and module not in GENERIC_REPLACE:
                found.append(f"{module}:{line} replaces fields it does not name")
            elif how in ("replace", "setattr") and field in PLACE_FIELDS | STAGE_FIELDS | STEP_FIELDS:
                found.append(f"{module}:{line} {how} {field}")
    return found


def second_stage_deciders(modules: dict[str, ast.Module]) -> list[str]:
    """In logparse/ (but the stage's owners), every stage written into a dataclass must be decide/stage's
    answer: a call of one of its functions, a name bound to one in the same function, None, or (after
    the decision: diff, fleet) a copy of a report's decided stage (`x.stage`). A stage worked out anywhere
    else is a second decider."""
    allowed_calls = _stage_functions(modules)
    found = []
    for module, tree in modules.items():
        if not module.startswith("logparse/") or module in STAGE_OWNERS:
            continue
        for func in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            bound = {
                t.id
                for n in ast.walk(func)
                if isinstance(n, ast.Assign)
                and isinstance(n.value, ast.Call)
                and _called(n.value) in allowed_calls
                for t in n.targets
                if isinstance(t, ast.Name)
            }
            for line, how, field, value in writes(func, DATACLASS_FIELDS):
                if field not in STAGE_FIELDS or how == "assign":
                    continue
                # (in decide/ and observe/ even a copy of another object's stage is a second reading of
                # it: the tracker's stage is the progression's, the report's is decide/stage's)
                copies = not module.startswith(("logparse/decide/", "logparse/observe/"))
                if not _decided(value, allowed_calls, bound, copies):
                    found.append(f"{module}:{line} writes {field} = {ast.unparse(value)}")
    return sorted(set(found))


def _decided(value: ast.AST | None, calls: set[str], bound: set[str], copies: bool) -> bool:
    """Is a written stage decide/stage's answer (see second_stage_deciders)? `copies`: a copy of another
    object's decided stage (`x.stage`) counts too."""
    if value is None or (isinstance(value, ast.Constant) and value.value is None):
        return True
    if isinstance(value, ast.IfExp):
        return _decided(value.body, calls, bound, copies) and _decided(value.orelse, calls, bound, copies)
    return (
        (isinstance(value, ast.Call) and _called(value) in calls)
        or (isinstance(value, ast.Name) and value.id in bound)
        or (copies and isinstance(value, ast.Attribute) and value.attr in STAGE_FIELDS)
    )


def test_nothing_patches_a_verdict_after_the_choice() -> None:
    """No `dataclasses.replace` or setattr sets where, at which stage or how far (written out, in a
    `**{...}`, or hidden in a mapping): the deciders build the values once."""
    found = patched(MODULES)
    assert not found, found


def test_no_stage_is_worked_out_outside_decide_stage() -> None:
    found = second_stage_deciders(MODULES)
    assert not found, found


# Each evasion issue 37 named, as a module of its own: the checks above must catch it.
EVASIONS = {
    "a stage decider of its own in decide/stall.py": (
        "logparse/decide/stall.py",
        "def _where(p):\n    return 'rollout' if p else None\n\n"
        "def judge(p):\n    return Stall(stage=_where(p), step=None)\n",
        "second",
    ),
    "decide/stall.py reading the tracker's stage": (
        "logparse/decide/stall.py",
        "def judge(progress):\n    p = progress.progress(None)\n    return Stall(stage=p.stage_reached, step=None)\n",
        "second",
    ),
    "replace(rc, **{'stage': ...})": (
        "logparse/decide/verdict.py",
        "def f(rc):\n    return replace(rc, **{'stage': 'rollout'})\n",
        "patched",
    ),
    "setattr(rc, 'stage', ...)": (
        "logparse/decide/choose.py",
        "def f(rc, s):\n    setattr(rc, 'stage', s)\n",
        "patched",
    ),
    "replace(rc, **changes)": (
        "logparse/fleet.py",
        "def f(rc, changes):\n    return replace(rc, **changes)\n",
        "patched",
    ),
}


@pytest.mark.parametrize("evasion", EVASIONS, ids=list(EVASIONS))
def test_each_evasion_of_the_ownership_checks_is_caught(evasion: str) -> None:
    module, source, check = EVASIONS[evasion]
    fixture = {**MODULES, module: ast.parse(source)}
    found = second_stage_deciders(fixture) if check == "second" else patched(fixture)
    assert any(f.startswith(module) for f in found), found


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
