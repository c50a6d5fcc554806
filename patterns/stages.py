"""Stage knowledge (patterns/stages.yaml): Ray task names to TAXONOMY stages."""

from __future__ import annotations

import functools
import importlib.resources

import yaml

from patterns.taxonomy import STAGES


@functools.lru_cache(maxsize=1)
def task_stages() -> dict[str, str]:
    text = importlib.resources.files("patterns").joinpath("stages.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text) or {}
    table = {str(k): str(v) for k, v in (data.get("task_stages") or {}).items()}
    bad = {k: v for k, v in table.items() if v not in STAGES}
    if bad:
        raise ValueError(f"patterns/stages.yaml: unknown stages {bad}")
    return table


def stage_of_task(task: str | None) -> str | None:
    """`WorkerDict.actor_rollout_update_actor` -> `actor-update` (longest suffix wins)."""
    if not task:
        return None
    method = task.rsplit(".", 1)[-1]
    best = None
    for name, stage in task_stages().items():
        if (method == name or method.endswith("_" + name)) and (best is None or len(name) > len(best[0])):
            best = (name, stage)
    return best[1] if best else None
