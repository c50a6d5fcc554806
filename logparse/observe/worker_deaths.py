"""Who a Ray worker death took: the dead worker's pid, node, actor class, actor name and exit type, as
Ray reports them in several processes (reference §4.3, §4.4): the raylet's `A worker died or was
killed ...` line (`Worker IP address: ... Worker PID: N Worker exit type: T`), and the caller's
`ActorDiedError` with its tab-indented block (`class_name:`, `pid:`, `name:`, `ip:`) and `The actor is
dead because its worker process has died. Worker exit type: T`. The wordings are patterns/formats.yaml's
(`worker_deaths`). The catalog's entries (ray-worker-died, ray-actor-died) say that a worker died; this
reads who, from a report's line and its continuation lines, and joins the reports of one pid.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from patterns.formats import formats
from patterns.numbers import log_int
from patterns.schema import LazyRe

_F = formats()
RAYLET_DEATH_RE = LazyRe(_F.regex("raylet-worker-death"), engine="regex")
ACTOR_FIELD_RE = LazyRe(_F.regex("actor-died-field"), engine="regex")
ACTOR_EXIT_RE = LazyRe(_F.regex("actor-exit-type"), engine="regex")
ACTOR_NAME_RE = LazyRe(_F.regex("verl-actor-name"), engine="regex")
MAX_DEATH_LINES = 12  # continuation lines of one report read for its fields
RAYLET_WORD = "Worker PID:"  # a line without it is no raylet death report
ACTOR_WORD = "The actor died"  # the head of ActorDiedError, whose block names the dead actor
MAX_FIELD = 300  # characters of a line searched


@dataclass(frozen=True)
class DeadWorker:
    """A Ray worker that died, as one or more reports tell it."""

    pid: int | None = None
    node: str | None = None
    actor: str | None = None  # its actor class (WorkerDict), when a report names it
    name: str | None = None  # the actor's name (verl: `<prefix>WorkerDict_<group>:<rank>`)
    exit_type: str | None = None

    @property
    def local_rank(self) -> int | None:
        """The worker's rank in its placement group, from a verl actor name."""
        m = ACTOR_NAME_RE.search(self.name) if self.name else None
        return log_int(m.group("local")) if m else None

    @property
    def rank(self) -> int | None:
        """The global rank: in verl's first placement group, the rank in it."""
        m = ACTOR_NAME_RE.search(self.name) if self.name else None
        return log_int(m.group("local")) if m and m.group("group") == "0" else None

    def joined(self, other: DeadWorker) -> DeadWorker:
        """This report completed by another of the same worker."""
        return DeadWorker(
            self.pid if self.pid is not None else other.pid,
            self.node or other.node,
            self.actor or other.actor,
            self.name or other.name,
            self.exit_type or other.exit_type,
        )


def dead_worker(lines: Sequence[str]) -> DeadWorker | None:
    """The worker a death report names: `lines` are its line's message and its continuation lines.
    None when they name no pid."""
    if not lines:
        return None
    fields: dict[str, str] = {}
    actor_block = ACTOR_WORD in lines[0]
    for i, text in enumerate(lines[: MAX_DEATH_LINES + 1]):
        text = text[: MAX_FIELD * 8] if i == 0 else text[:MAX_FIELD]
        m = RAYLET_DEATH_RE.search(text) if RAYLET_WORD in text else None
        if m:
            fields.update(pid=m.group("pid"), ip=m.group("node"), exit_type=m.group("exit_type"))
            continue
        m = ACTOR_EXIT_RE.search(text)
        if m:
            fields.setdefault("exit_type", m.group("exit_type"))
            continue
        m = ACTOR_FIELD_RE.search(text) if i > 0 and actor_block else None
        if m:
            fields.setdefault(m.group("key"), m.group("value"))
    pid = fields.get("pid", "")
    if not pid.isdecimal():
        return None
    actor = fields.get("class_name")
    return DeadWorker(
        log_int(pid),
        fields.get("ip"),
        actor.rsplit(".", 1)[-1] if actor else None,
        fields.get("name"),
        fields.get("exit_type"),
    )


def join_deaths(deaths: Iterable[DeadWorker]) -> dict[int, DeadWorker]:
    """The reports of each pid, joined into one."""
    out: dict[int, DeadWorker] = {}
    for d in deaths:
        if d.pid is None:
            continue
        out[d.pid] = out[d.pid].joined(d) if d.pid in out else d
    return out


def report_lines(message: str, after: Sequence[str], traceback, seq: int) -> list[str]:
    """A death report's lines: its message, then its continuation lines, or, for a line inside a
    traceback (an ActorDiedError's block is the end of the traceback that raised it), the traceback's
    lines after it. `after`: their messages; `traceback`: its Traceback (logparse.observe.tracebacks)."""
    lines = [message]
    if after:
        lines += list(after)[:MAX_DEATH_LINES]
    elif traceback is not None:
        lines += [r.message for r in traceback.all_records() if r.seq > seq][:MAX_DEATH_LINES]
    return lines


def death_reports(hits: Iterable) -> dict[int, DeadWorker]:
    """Every worker death the job's catalog hits report (a raylet line, an ActorDiedError and its block:
    `hits` are logparse.observe.hits.Hit), joined per pid."""
    reports = []
    for hit in hits:
        first = hit.record.message
        if RAYLET_WORD in first or ACTOR_WORD in first:
            after = [r.message for r in hit.after[:MAX_DEATH_LINES]]
            death = dead_worker(report_lines(first, after, hit.traceback, hit.seq))
            if death is not None:
                reports.append(death)
    return join_deaths(reports)
