"""Where the chosen failure happened: rank, local rank, pid, Ray actor, node. The only place that
answers it.

In order:

1. the failure line's own prefixes, else its traceback's first line, else another line of the same
   traceback with a `[rankN]` prefix;
2. a line of torchrun's ChildFailedError summary: the block names the failed rank, pid and host;
3. a Ray task error: the worker named in its header (`ray::WorkerDict.update_actor() (pid=N, ip=...)`),
   wherever the error was printed;
4. a collective timeout is printed by the ranks that waited, not by the one at fault: the rank its
   own line blames (`Rank N failed to pass monitoredBarrier`: an entry's `blame_rank` group), else the
   single laggard the collective analysis finds (logparse.observe.collectives), else the one rank that
   reported a timeout when only one did (a 2-rank job: the rank that timed out first), else the one
   rank of the job that did not report it when several did (gloo names no peer: the rank whose timer
   fired only waited; the one that never arrived printed no timeout, its last line is before the
   collective), else none;
5. a Ray worker death (the raylet's `A worker died ...` line, an `ActorDiedError`): the dead worker, as
   every report of its pid tells it (logparse.observe.worker_deaths): its pid, actor class, node, and
   its rank from verl's actor name (`...WorkerDict_0:1`: rank 1 of the first placement group);
6. a process with no prefix of its own: the one rank the launcher reports as failed (torchrun's
   ChildFailedError summary, else its `failed (exitcode: N) local_rank: N` lines);
7. a local rank (a torchrun --log-dir folder) is mapped to its global rank by torchrun's summary.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from logparse.observe.collectives import CollectiveReport
from logparse.observe.hits import FindingGroup
from logparse.observe.stalls import StreamLast
from logparse.observe.tracebacks import Traceback
from logparse.observe.worker_deaths import DeadWorker, dead_worker, report_lines
from logparse.read.normalize import Record
from patterns import Role
from patterns.inference import inference_rules
from patterns.numbers import log_int


@dataclass(frozen=True)
class Place:
    """Where a failure happened: rank, local rank, pid, Ray actor, node."""

    rank: int | None = None
    local_rank: int | None = None
    pid: int | None = None
    actor: str | None = None
    node: str | None = None

    def unknown(self) -> bool:
        return self.rank is None and self.local_rank is None and self.pid is None and self.actor is None


def laggard(collective: CollectiveReport | None) -> int | None:
    """The one rank the collective analysis blames (silent, or behind the others), else None."""
    if collective is None:
        return None
    suspects = set(collective.silent) | {r for r, _ in collective.behind}
    return suspects.pop() if len(suspects) == 1 else None


def blamed_rank(hit_groups: Mapping[str, str | None] | None) -> int | None:
    """The one rank an error line names as the one at fault (a catalog entry's `blame_rank`, or a
    `blame_ranks` list of one), else None."""
    if not hit_groups:
        return None
    named = hit_groups.get("blame_rank") or hit_groups.get("blame_ranks") or ""
    ranks = {log_int(r) for r in named.replace(",", " ").split() if r.isdecimal()}
    return ranks.pop() if len(ranks) == 1 else None


def lone_timeout_rank(groups: Iterable[FindingGroup], observer: Iterable[str]) -> int | None:
    """The rank that reported a collective timeout when it is the only one that did (in a 2-rank job,
    the rank that timed out first; the other never got that far). None when several did: they all
    waited, and the one at fault is not among them."""
    ranks: set[int] = set()
    for g in groups:
        if g.entry.role == Role.CAUSE and g.entry.category in observer:
            ranks |= g.ranks
    return ranks.pop() if len(ranks) == 1 else None


def absent_rank(
    groups: Iterable[FindingGroup], observer: Iterable[str], streams: Sequence[StreamLast]
) -> StreamLast | None:
    """The one rank (a stream named `rank N`, or `local rank N` where no stream is `rank N`) that
    printed no collective timeout while two or more ranks did; its stream's last line says why."""
    reported: set[int] = set()
    for g in groups:
        if g.entry.role == Role.CAUSE and g.entry.category in observer:
            reported |= g.ranks
    if len(reported) < 2:
        return None
    by_rank: dict[int, StreamLast] = {}
    for s in streams:
        head, _, tail = s.who.rpartition(" ")
        if head in ("rank", "local rank") and tail.isdecimal():
            rank = log_int(tail)
            if head == "rank" or rank not in by_rank:
                by_rank[rank] = s
    absent = [s for rank, s in by_rank.items() if rank not in reported]
    return absent[0] if len(absent) == 1 else None


def absent_rank_sentence(rank: int, last: StreamLast) -> str:
    return (
        f"rank {rank} never arrived: it printed no timeout while the other ranks timed out waiting for it; "
        f"its last line ({last.last.source}:{last.last.line}) is before the collective: "
        f"{last.last.text.strip()[:200]}"
    )


def locate(
    rec: Record,
    tb: Traceback | None,
    category: str,
    entry_category: str | None,
    tracebacks: Sequence[Traceback],
    groups: Iterable[FindingGroup],
    collective: CollectiveReport | None,
    hit_groups: Mapping[str, str | None] | None = None,
    messages: Sequence[str] = (),
    deaths: Mapping[int, DeadWorker] | None = None,
    streams: Sequence[StreamLast] = (),
) -> Place:
    """Where the failure of `rec` (its traceback `tb`) happened (see the module docstring).
    `entry_category`: the category of the catalog entry that named it (None: no entry); a collective
    timeout named by an entry is placed on the rank it blames, else its laggard. `hit_groups`: the
    named groups of the entry's match; `messages`: its line's message and continuation lines;
    `deaths`: the job's worker deaths by pid (logparse.observe.worker_deaths.death_reports)."""
    place = _from_lines(rec, tb)
    death = dead_worker_of(_death_lines(rec, tb, messages), deaths or {})
    if death is not None:
        # a worker death is reported by the raylet or the caller: the place is the dead worker's
        place = Place(
            death.rank, death.local_rank, death.pid, death.actor or place.actor, death.node or place.node
        )
    observer = inference_rules().observer_categories
    if entry_category is not None and entry_category in observer:
        # the rank that printed a collective timeout only waited for the one at fault
        groups = list(groups)
        rank = blamed_rank(hit_groups)
        if rank is None:
            rank = laggard(collective)
        if rank is None:
            rank = lone_timeout_rank(groups, observer)
        if rank is None:
            absent = absent_rank(groups, observer, streams)
            rank = log_int(absent.who.rpartition(" ")[2]) if absent is not None else None
        place = Place(rank, None, None, None, place.node)
    if place.unknown() and category not in observer:
        # a process with no prefix of its own: the launcher's report names the rank that failed
        launcher = launcher_failed_rank(tracebacks, groups)
        if launcher is not None:
            place = Place(launcher[0], launcher[1], place.pid, place.actor, place.node)
    if place.rank is None and place.local_rank is not None:
        # torchrun's summary maps a local rank (a --log-dir folder) to its global rank
        rank = global_rank(place.local_rank, tracebacks, groups)
        if rank is not None:
            place = Place(rank, place.local_rank, place.pid, place.actor, place.node)
    return place


def _from_lines(rec: Record, tb: Traceback | None) -> Place:
    """What the failure's own lines say (points 1-3 of the module docstring)."""
    o = rec.origin
    start = tb.start.origin if tb is not None else o
    rank = o.rank if o.rank is not None else start.rank
    if rank is None and tb is not None:
        # the header lacks a `[rankN]` prefix but another line of the same traceback has one
        rank = next((r.origin.rank for r in tb.all_records() if r.origin.rank is not None), None)
    local_rank = o.local_rank if o.local_rank is not None else start.local_rank
    pid = o.pid if o.pid is not None else start.pid
    actor = o.actor or start.actor
    node = o.node or start.node
    failure = tb.torchrun_failure_at(rec.seq) if tb is not None else None
    if failure is not None:
        # a line of torchrun's ChildFailedError summary: the block names the failed rank
        rank, local_rank, pid, node, actor = (
            failure.rank,
            failure.local_rank,
            failure.pid,
            failure.host or node,
            None,
        )
    if tb is not None and tb.task and tb.task_pid is not None:
        # the error was raised in the Ray worker named in the header, wherever it was printed
        pid, actor, node = tb.task_pid, tb.task.split(".", 1)[0], tb.task_node or node
    return Place(rank, local_rank, pid, actor, node)


def _death_lines(rec: Record, tb: Traceback | None, messages: Sequence[str]) -> list[str]:
    """The lines that may report a worker death for the failure of `rec`: its own message and
    continuation lines (or the rest of its traceback), else its traceback's final exception and what
    follows it (an ActorDiedError's block, when the failure is a line after it)."""
    own = report_lines(messages[0], messages[1:], tb, rec.seq) if messages else []
    if dead_worker(own) is None and tb is not None and tb.final is not None and tb.final.record is not rec:
        final = tb.final.record
        return report_lines(final.message, [], tb, final.seq)
    return own


def dead_worker_of(messages: Sequence[str], deaths: Mapping[int, DeadWorker]) -> DeadWorker | None:
    """The worker a death report (its message and continuation lines) names, completed by the other
    reports of the same pid; None when `messages` report no death."""
    own = dead_worker(messages) if messages else None
    if own is None or own.pid is None:
        return None
    other = deaths.get(own.pid)
    return own.joined(other) if other is not None else own


def launcher_failed_rank(
    tracebacks: Sequence[Traceback], groups: Iterable[FindingGroup]
) -> tuple[int | None, int | None] | None:
    """(rank, local_rank) of the one process a launcher reports as failed: torchrun's
    ChildFailedError summary (its root-cause block, else its only failure), else the local ranks of
    the agent's `failed (exitcode: N) local_rank: N` lines (a `local_rank` group of a catalog entry).
    None when it names none or several."""
    for tb in tracebacks:
        root = tb.torchrun_root_failure()
        failures = [root] if root is not None else tb.torchrun_failures
        if len(failures) == 1 and (failures[0].rank is not None or failures[0].local_rank is not None):
            return failures[0].rank, failures[0].local_rank
    local = {g.first.groups.get("local_rank") for g in groups if g.first.groups.get("local_rank") is not None}
    if len(local) == 1:
        value = local.pop()
        return (None, log_int(value)) if value.isdecimal() else None
    return None


def global_rank(
    local_rank: int, tracebacks: Sequence[Traceback], groups: Iterable[FindingGroup] = ()
) -> int | None:
    """The global rank torchrun's ChildFailedError summary gives a local rank, else the DeepSpeed
    launcher's placement of its node (`node_rank` x `num_local_procs` + the local rank: the groups of
    a catalog entry that reads it), when the log shows one node's placement only."""
    for tb in tracebacks:
        f = next(
            (f for f in tb.torchrun_failures if f.local_rank == local_rank and f.rank is not None),
            None,
        )
        if f is not None:
            return f.rank
    placements = {
        (log_int(g.first.groups["node_rank"]), log_int(g.first.groups["num_local_procs"]))
        for g in groups
        if (g.first.groups.get("node_rank") or "").isdecimal()
        and (g.first.groups.get("num_local_procs") or "").isdecimal()
    }
    if len(placements) == 1:
        node_rank, procs = placements.pop()
        return node_rank * procs + local_rank if local_rank < procs else None
    return None
