"""What a failure left, as the classifying rules read it: its exception (type and message), its frames,
the exceptions earlier in its chain and the lines of its process just before it. Built from an
assembled traceback (logparse.observe.tracebacks) or a bare failure line (logparse.observe.bare_lines)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from logparse.read.normalize import Record

MAX_MESSAGE_LINES = 40  # continuation lines of a message that the rules read (a launcher summary is ~20)


@dataclass(frozen=True)
class FailureEvidence:
    """What a failure left: its exception (type and message), frames (outermost first), and the
    exceptions earlier in its chain (most recent first)."""

    exc_type: str | None
    message: str
    frames: tuple[tuple[str, str, str | None], ...] = ()  # (file, function, code)
    chain: tuple[tuple[str, str], ...] = ()  # (type, message)
    context: tuple[str, ...] = ()  # the lines of its process just before it (least trusted)


def context_messages(context: Sequence[Record]) -> tuple[str, ...]:
    """The bare messages of the lines before a failure, nearest first."""
    return tuple(r.message.strip() for r in reversed(list(context)) if r.message.strip())


ACTOR_FRAME = "<ray actor>"  # the process a failure came from, as an outermost frame (fallback frame rules)


TASK_FRAME = "<ray task>"


def origin_frames(actor: str | None, task: str | None = None) -> tuple[tuple[str, str, None], ...]:
    """The Ray actor and task a failure came from, as outermost pseudo-frames: `RewardLoopWorker`,
    `vLLMHttpServer` or a task method such as `compute_rm_score` say where it failed when the real
    frames do not."""
    out = []
    if actor:
        out.append((ACTOR_FRAME, actor, None))
    if task:
        out.append((TASK_FRAME, task.rsplit(".", 1)[-1], None))
    return tuple(out)


def evidence_of_traceback(tb) -> FailureEvidence:
    """FailureEvidence of an assembled traceback (logparse.observe.tracebacks.Traceback)."""
    exc = tb.final
    extra = exc.extra[:MAX_MESSAGE_LINES] if exc is not None else []
    message = "\n".join([exc.message, *extra]) if exc is not None else ""
    chain = []
    prev = tb.chained_from
    while prev is not None and len(chain) < 5:
        if prev.final is not None:
            chain.append((prev.final.type, prev.final.message))
        prev = prev.chained_from
    for other in reversed(tb.exceptions[:-1]):  # Ray's nested form: the wrappers above the final exception
        chain.append((other.type, other.message))
    frames = origin_frames(tb.start.origin.actor, tb.task) + tuple(
        (f.file, f.function, f.code) for f in tb.frames
    )
    return FailureEvidence(
        exc.type if exc is not None else None, message, frames, tuple(chain[:8]), context_messages(tb.context)
    )
