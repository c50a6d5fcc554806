"""A Ray task's name read from a frame's source line names the stage the failure ran in, unless it is
shorter than stages.yaml's task_word_min_length (a common word of code: `time.sleep`)."""

from __future__ import annotations

import pytest

from logparse.decide.stage import _task_word_stage
from patterns.stages import task_stages, task_word_min_length


@pytest.mark.parametrize(
    ("word", "stage"),
    [
        ("update_actor", "actor-update"),
        ("actor_rollout_generate_sequences", "rollout"),  # with its role prefix
        ("sleep", None),  # `time.sleep(5)` in a frame: no weight-sync
        ("rollout_sleep", None),
        ("wake_up", "weight-sync"),
    ],
)
def test_a_task_word_names_its_stage_when_long_enough(word: str, stage: str | None) -> None:
    assert _task_word_stage(word) == stage


def test_only_the_short_generic_names_are_left_out() -> None:
    short = {name for name in task_stages() if len(name) < task_word_min_length()}
    assert short == {"sleep"}
