"""At which stage the job failed: the only place that answers it.

One ordered chain of stage sources (`STAGE_CHAIN`), each a small named strategy that reads the
evidence of the chosen failure (`StageEvidence`) and names a stage of ../shared/TAXONOMY.md, or passes.
The first that names one wins, and its name is the report's `stage_source`. When none does, the stage
is null: the log does not show it. The knowledge the strategies use is patterns/stages.yaml (Ray task
names, frame rules, the tasks named in messages, actor and category stages).

In order of trust:

1. ray-task: the Ray task of the failure's own traceback (`ray::WorkerDict.actor_rollout_update_actor()`);
2. setup: before the training loop, a failure of the distributed set-up itself (its category:
   setup_categories), whichever init step ran into it;
3. frames: the frames of its own traceback (frame_stages; a backward, a loss or an optimizer step is
   the update of the role its frames show, else `training`; an init frame such as a dataset's
   `__getitem__` counts only before the training loop began);
4. message: its message says where such an error is raised (message_stages: vLLM's check of a prompt
   against the maximum model length runs at generation time);
5. entry: the catalog entry's stage hint (an init stage only before the training loop began);
6. traceback: the task or frames of the first traceback reported after it (the wrapper that carried it);
7. memory-monitor: a Ray task named in its message (Ray's memory monitor names the task it killed);
8. collective (early): a collective that timed out among the first of its group, before any
   training step, was part of the group's set-up: distributed-init;
9. actor: the Ray actor that printed it, when all that actor does is one stage (actor_stages);
10. progress: once the training loop had begun in its attempt (a step line, a progress bar, an
   `iteration N/M`, an `Epoch N` summary, a Trainer log dict: logparse.observe.progress), the loop stage
   the last marker shows, else `training`;
11. marker: before the loop, the last stage marker before it;
12. collective (late): a collective that timed out past the first few of its process group (its
   sequence number above inference.yaml's `early_collective_seq`) ran inside the loop: `training`;
13. category: before the training loop began, the init stage its category implies (category_stages).

Outside the chain, a hang that is a failure (a wait for resources no node has) takes the stage its
wait is in (`stage_of_wait`, source `stall`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

import regex

from logparse.observe.collectives import CollectiveReport
from logparse.observe.progression import Progression
from logparse.observe.tracebacks import Traceback
from patterns import Entry
from patterns.inference import inference_rules
from patterns.schema import REGEX_TIMEOUT_S
from patterns.stages import (
    MAX_FRAME_FIELD,
    FrameRule,
    actor_stages,
    category_stages,
    frame_rules,
    loop_roles,
    message_stages,
    message_task_patterns,
    setup_categories,
    task_stages,
    task_word_min_length,
)
from patterns.vocabulary import STAGES

MAX_STAGE_MESSAGE_LINES = 20  # continuation lines of an error searched for task names (Ray's OOM table)
_WORD = regex.compile(r"\w+")
TRAINING = "training"
# the training loop's stages (TAXONOMY: `training` through `checkpoint`), and the run's end
LOOP_STAGES = frozenset(STAGES[STAGES.index(TRAINING) : STAGES.index("shutdown")])
AFTER_INIT = LOOP_STAGES | {"shutdown"}


class StageSource(str, Enum):
    """Where a failure's stage came from (the report's `stage_source`)."""

    RAY_TASK = "ray-task"
    SETUP = "setup"
    FRAMES = "frames"
    MESSAGE = "message"
    ENTRY = "entry"
    TRACEBACK = "traceback"
    MEMORY_MONITOR = "memory-monitor"
    COLLECTIVE = "collective"
    ACTOR = "actor"
    PROGRESS = "progress"
    MARKER = "marker"
    CATEGORY = "category"
    STALL = "stall"  # a hang that is a failure: the stage of its wait (decide.verdict.wait_failure)


@dataclass(frozen=True)
class StageEvidence:
    """What the stage sources read of the chosen failure and of the job around it."""

    seq: int  # where the failure's line is in the scan
    category: str
    entry: Entry | None  # the catalog entry that named it, if any
    traceback: Traceback | None  # its own traceback, if any
    messages: tuple[str, ...]  # its error line and continuation lines
    actor: str | None  # the Ray actor it is attributed to
    tracebacks: Sequence[Traceback]  # every traceback of the attempt
    collective: CollectiveReport | None  # the timed-out collective, if any
    progress: Progression  # the job's progression


def _own_frames(tb: Traceback | None) -> list[tuple[str, str, str | None]] | None:
    # (a ChildFailedError's frames are the launcher's, not those of the rank that failed)
    if tb is None or tb.torchrun_failures:
        return None
    return [(f.file, f.function, f.code) for f in tb.frames]


def from_ray_task(ev: StageEvidence) -> str | None:
    tb = ev.traceback
    return stage_of_task(tb.task) if tb is not None and not tb.torchrun_failures else None


def _in_loop(ev: StageEvidence) -> bool:
    return ev.progress.loop_began_before(ev.seq)


def from_setup_category(ev: StageEvidence) -> str | None:
    """Before the training loop, a failure of the distributed set-up itself (an NCCL communicator, the
    rendezvous, Ray's resources and actors: patterns/stages.yaml `setup_categories`) is at that stage,
    whichever init step ran the first collective or created the first actor (a dataset's barrier, a
    trainer's init_workers)."""
    if _in_loop(ev):
        return None
    return setup_categories().get(ev.category)


def from_frames(ev: StageEvidence) -> str | None:
    frames = _own_frames(ev.traceback)
    return stage_of_frames(frames, _in_loop(ev)) if frames is not None else None


def from_message(ev: StageEvidence) -> str | None:
    for text in ev.messages[:1]:
        for pattern, stage in message_stages():
            try:
                if pattern.search(text[: MAX_FRAME_FIELD * 4], timeout=REGEX_TIMEOUT_S):
                    return stage
            except TimeoutError:
                continue
    return None


def from_entry(ev: StageEvidence) -> str | None:
    stage = ev.entry.stage if ev.entry is not None and ev.entry.stage else None
    if stage is not None and stage not in AFTER_INIT and _in_loop(ev):
        return None  # where such an error usually happens; the progress says where this one did
    return stage


def from_later_traceback(ev: StageEvidence) -> str | None:
    """The first traceback reported after the failure carried it: its task or frames tell where."""
    in_loop = None
    for other in ev.tracebacks:
        if other.start.seq >= ev.seq and not other.torchrun_failures:
            if in_loop is None:
                in_loop = _in_loop(ev)
            stage = stage_of_task(other.task) or stage_of_frames(
                [(f.file, f.function, f.code) for f in other.frames], in_loop
            )
            if stage:
                return stage
    return None


def from_memory_monitor(ev: StageEvidence) -> str | None:
    return stage_of_message(ev.messages)


def _observed_collective(ev: StageEvidence) -> bool:
    return ev.collective is not None and ev.category in inference_rules().observer_categories


def from_early_collective(ev: StageEvidence) -> str | None:
    if (
        _observed_collective(ev)
        and not ev.progress.training_started_before(ev.seq)
        and ev.collective.seq <= inference_rules().early_collective_seq
    ):
        return "distributed-init"
    return None


def from_actor(ev: StageEvidence) -> str | None:
    stage = actor_stages().get(ev.actor) if ev.actor else None
    if stage is not None and (
        ev.progress.training_started_before(ev.seq) or ev.category not in category_stages()
    ):
        return stage
    return None


def from_progress(ev: StageEvidence) -> str | None:
    """Inside the training loop (its attempt showed a step, a bar or a loop marker before the
    failure): the loop stage the last marker shows, else `training`."""
    if not _in_loop(ev):
        return None
    stage = ev.progress.stage_at(ev.seq)
    return stage if stage in AFTER_INIT else TRAINING


def from_marker(ev: StageEvidence) -> str | None:
    return ev.progress.stage_at(ev.seq)


def from_late_collective(ev: StageEvidence) -> str | None:
    if _observed_collective(ev) and ev.collective.seq > inference_rules().early_collective_seq:
        return "training"  # thousands of collectives in: inside the loop
    return None


def from_category(ev: StageEvidence) -> str | None:
    if not _in_loop(ev):
        return category_stages().get(ev.category)
    return None


# The chain, most trusted first (the module docstring says why each is where it is).
STAGE_CHAIN: tuple[tuple[StageSource, Callable[[StageEvidence], str | None]], ...] = (
    (StageSource.RAY_TASK, from_ray_task),
    (StageSource.SETUP, from_setup_category),
    (StageSource.FRAMES, from_frames),
    (StageSource.MESSAGE, from_message),
    (StageSource.ENTRY, from_entry),
    (StageSource.TRACEBACK, from_later_traceback),
    (StageSource.MEMORY_MONITOR, from_memory_monitor),
    (StageSource.COLLECTIVE, from_early_collective),
    (StageSource.ACTOR, from_actor),
    (StageSource.PROGRESS, from_progress),
    (StageSource.MARKER, from_marker),
    (StageSource.COLLECTIVE, from_late_collective),
    (StageSource.CATEGORY, from_category),
)


def stage_of(ev: StageEvidence) -> tuple[str | None, StageSource | None]:
    """The stage of the chosen failure and the source that named it (None, None: not shown)."""
    for source, strategy in STAGE_CHAIN:
        stage = strategy(ev)
        if stage:
            return stage, source
    return None, None


def stage_of_wait(cause_stage: str | None, last_stage: str | None) -> tuple[str | None, StageSource | None]:
    """The stage of a hang that is a failure (a wait for resources no node has): the stage its cause
    says such a wait is in (patterns/stalls.yaml `causes`), else the last stage the log showed."""
    stage = cause_stage or last_stage
    return stage, (StageSource.STALL if stage else None)


def stage_reached(progress: Progression, failure_stage: str | None) -> str | None:
    """The last stage the job reached: the failure's own stage when it has one (the failure is the last
    thing the log shows: its stage was reached), else the last the progression shows."""
    return failure_stage or progress.stage_at(progress.last_seq)


def step_failed_in(progress: Progression, seq: int) -> int | None:
    """The training step the failure at record `seq` happened in. A training loop prints a step's line
    (verl's `step:N - ...`, a script's metrics) and moves its progress bar when the step is done (verl
    validates and saves a step's checkpoint before it), so a failure after step N's line and before the
    run's end is in step N + 1; a failure on step N's own line (`step:2 - loss:nan`) is in step N. None
    when the loop had not begun, had ended (its total reached, or a completion marker), or the log shows
    no step."""
    p = progress.progress(seq, failed=True)
    if p.last_step is None or p.completed or not progress.training_started_before(seq):
        return None
    if progress.is_step_line(seq):
        return p.last_step  # the step's own line shows the failure (`step:2 - loss:nan`): that step
    if p.total_steps is not None and p.last_step >= p.total_steps:
        return None
    return p.last_step + 1


def task_called_after(tracebacks: Sequence[Traceback], seq: int) -> str | None:
    """The Ray task or actor method the caller was waiting on when the failure at `seq` reached it:
    the first traceback reported after it names it in its header (`ray::WorkerDict.update_actor()`) or
    in a frame's call (`ray.get([w.actor_rollout_generate_sequences.remote(step) ...])`). None: none."""
    for tb in tracebacks:
        if tb.start.seq < seq or tb.torchrun_failures:
            continue
        if stage_of_task(tb.task):
            return tb.task.rsplit(".", 1)[-1]
        for frame in reversed(tb.frames):
            for word in _WORD.findall((frame.code or "")[:MAX_FRAME_FIELD]):
                if _task_word_stage(word):
                    return word
        return None
    return None


def messages_of(message: str, after: Sequence) -> tuple[str, ...]:
    """An error line's message and its continuation lines' (as many as the task search reads)."""
    return (message, *(r.message for r in list(after)[:MAX_STAGE_MESSAGE_LINES]))


# -- the stage knowledge of patterns/stages.yaml, applied ---------------------------------------------
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


def stage_of_message(messages: Sequence[str]) -> str | None:
    """The stage of the first Ray task named in an error's message lines (message_tasks)."""
    for text in messages:
        for pattern in message_task_patterns():
            try:
                for m in pattern.finditer(text[: MAX_FRAME_FIELD * 4], timeout=REGEX_TIMEOUT_S):
                    stage = stage_of_task(m.group("task").rsplit(".", 1)[-1])
                    if stage:
                        return stage
            except TimeoutError:
                continue
    return None


def stage_of_frames(frames: list[tuple[str, str, str | None]], in_loop: bool = False) -> str | None:
    """frames: (file, function, code) from outermost to innermost. The innermost frame that a
    function/code rule or a Ray task method name matches wins; else the innermost a file rule matches.
    `in_loop`: the training loop had begun, so rules that hold only before it (`before_loop`) are not
    tried. A `refine` rule's stage is made precise by the frames' roles (loop_roles)."""
    rules = [r for r in frame_rules() if not (in_loop and r.before_loop)]
    cap = MAX_FRAME_FIELD  # a cut or garbled line can make a frame's function a megabyte long
    frames = [
        (file[:cap], (function or "")[:cap], code[:cap] if code else code) for file, function, code in frames
    ]
    deferred = None
    for _file, function, code in reversed(frames):
        stage, rule = _strong_frame_stage(function, code, rules)
        if stage and rule is not None and rule.defer:
            deferred = deferred or stage  # an outer frame's work, if one names it, else this
        elif stage:
            return _refined(stage, rule, frames)
    if deferred:
        return deferred
    for weak in (False, True):
        for file, function, code in reversed(frames):
            rule = _file_frame_rule(file, function, code, rules, weak)
            if rule is not None:
                return _refined(rule.stage, rule, frames)
    return None


def _refined(stage: str, rule: FrameRule | None, frames: list[tuple[str, str, str | None]]) -> str:
    """A generic loop frame's stage (`refine`): the role the frames show (innermost first), else its own."""
    if rule is None or not rule.refine:
        return stage
    for file, function, _code in reversed(frames):
        for role in loop_roles():
            if (role.function is not None and role.function.search(function)) or (
                role.file is not None and role.file.search(file)
            ):
                return role.stage
    return stage


def _task_word_stage(word: str) -> str | None:
    """The stage of a Ray task method named in a frame's source line: exactly
    (`self.actor_rollout_wg.compute_log_prob(batch)`) or with its role prefix
    (`w.actor_rollout_generate_sequences.remote(step)`)."""
    tasks = task_stages()
    shortest = task_word_min_length()  # (a shorter name is a common word of code: `time.sleep`)
    if word in tasks:
        return tasks[word] if len(word) >= shortest else None
    if "_" in word:
        best = None
        for name, stage in tasks.items():
            if (
                len(name) >= shortest
                and word.endswith("_" + name)
                and (best is None or len(name) > len(best[0]))
            ):
                best = (name, stage)
        return best[1] if best else None
    return None


def _strong_frame_stage(
    function: str, code: str | None, rules: Sequence[FrameRule]
) -> tuple[str | None, FrameRule | None]:
    tasks = task_stages()
    if function in tasks:
        return tasks[function], None
    if code:
        # `self.actor_rollout_wg.compute_log_prob(batch)` inside fit(): the call names the sub-stage
        for word in _WORD.findall(code):
            stage = _task_word_stage(word)
            if stage:
                return stage, None
    for rule in rules:
        if rule.weak:
            continue
        if rule.function is not None and rule.function.search(function):
            return rule.stage, rule
        if rule.code is not None and code and rule.code.search(code):
            return rule.stage, rule
    return None, None


def _file_frame_rule(
    file: str, function: str, code: str | None, rules: Sequence[FrameRule], weak: bool
) -> FrameRule | None:
    for rule in rules:
        if rule.weak != weak:
            continue
        if rule.file is not None and rule.file.search(file):
            return rule
        if weak and rule.function is not None and rule.function.search(function):
            return rule
        if weak and rule.code is not None and code and rule.code.search(code):
            return rule
    return None
