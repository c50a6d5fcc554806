"""NCCL reasoning from text: which ranks were behind in, or never entered, a timed-out collective.

Reads ProcessGroupNCCL's watchdog lines (both the torch-2.4 and the 2025+ wordings):
  [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=6463, OpType=ALLREDUCE,
      NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800017 milliseconds before timing out.
  [PG 0 (default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at work: 6463,
      last enqueued NCCL work: 6463, last completed NCCL work: 6462.
  [PG ID 0 PG GUID 0(default_pg) Rank 368]  failure detected by watchdog at work sequence id: 5
      PG status: last enqueued work: 5, last completed work: 4
A rank that timed out at SeqNum S was waiting inside collective S; a rank whose last enqueued work is
below S never reached it; a rank seen elsewhere in the job but with no watchdog report at all is the
usual suspect (it hung or died before the collective). Bounded: at most MAX_RANKS ranks are tracked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from logparse.model import compact_ranks
from logparse.read.normalize import Record
from patterns.formats import formats
from patterns.numbers import log_int
from patterns.schema import LazyRe

MAX_RANKS = 4096

# The watchdog's wordings are patterns/formats.yaml's (`collectives`); (LazyRe: compiled when a log
# first shows a collective timeout)
_F = formats()
COLLECTIVE_WORDS = _F.literals("collective-lines")  # a line with none of them says nothing of a collective
# (the two tested one by one: a job's every line with a rank prefix comes here)
_WORK_WORD, _STATUS_WORD = COLLECTIVE_WORDS
TIMEOUT_WORDS = _F.literals("timeout-reports")
WORK_RE = LazyRe(_F.regex("work-nccl"), engine="regex")
STATUS_OLD_RE = LazyRe(_F.regex("status-torch-2-4"), engine="regex")
STATUS_NEW_RE = LazyRe(_F.regex("status-torch-2-5"), engine="regex")
RANK_IN_MSG = LazyRe(_F.regex("rank-in-message"), engine="regex")


@dataclass
class RankState:
    rank: int
    timed_out_seq: int | None = None
    op: str | None = None
    timeout_ms: int | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None


@dataclass
class CollectiveReport:
    seq: int
    op: str | None
    timeout_ms: int | None
    waiting: tuple[int, ...]  # ranks that timed out inside collective `seq`
    behind: tuple[tuple[int, int], ...]  # (rank, last enqueued) for ranks below `seq`
    silent: tuple[int, ...]  # ranks seen in the job with no watchdog report
    sentences: tuple[str, ...]


@dataclass
class CollectiveAnalyzer:
    ranks: dict[int, RankState] = field(default_factory=dict)
    seen_ranks: set[int] = field(default_factory=set)

    def feed(self, rec: Record) -> None:
        o = rec.origin
        if o.rank is not None and len(self.seen_ranks) < MAX_RANKS:
            self.seen_ranks.add(o.rank)
        msg = rec.message
        if _WORK_WORD not in msg and _STATUS_WORD not in msg:
            return
        rank = o.rank
        if rank is None:
            m = RANK_IN_MSG.search(msg)
            if not m:
                return
            rank = log_int(m.group("rank"))
        if rank not in self.ranks:
            if len(self.ranks) >= MAX_RANKS:
                return
            self.ranks[rank] = RankState(rank)
        st = self.ranks[rank]
        if any(w in msg for w in TIMEOUT_WORDS):
            m = WORK_RE.search(msg)
            if m and st.timed_out_seq is None:
                st.timed_out_seq = log_int(m.group("seq"))
                st.op = m.group("op")
                st.timeout_ms = log_int(m.group("timeout"))
        m = STATUS_NEW_RE.search(msg) or STATUS_OLD_RE.search(msg)
        if m:
            st.last_enqueued = log_int(m.group("enq"))
            st.last_completed = log_int(m.group("done"))

    def report(self) -> CollectiveReport | None:
        timed = [s for s in self.ranks.values() if s.timed_out_seq is not None]
        if not timed:
            return None
        seq = max(s.timed_out_seq for s in timed)
        first = next(s for s in timed if s.timed_out_seq == seq)
        waiting = tuple(sorted(s.rank for s in timed if s.timed_out_seq == seq))
        behind = tuple(
            sorted(
                (s.rank, s.last_enqueued)
                for s in self.ranks.values()
                if s.last_enqueued is not None and s.last_enqueued < seq
            )
        )
        reported = set(self.ranks)
        silent = tuple(sorted(self.seen_ranks - reported))
        sentences = [
            (
                f"{len(waiting)} rank(s) timed out waiting in collective SeqNum {seq} "
                f"({first.op}, timeout {first.timeout_ms} ms): ranks {compact_ranks(waiting)}."
            )
        ]
        for rank, enq in behind:
            sentences.append(f"rank {rank} never reached SeqNum {seq} (its last enqueued work was {enq}).")
        if silent:
            sentences.append(
                f"rank(s) {compact_ranks(silent)} printed no watchdog report: the likely laggard(s) "
                f"that never entered SeqNum {seq}, or died before it."
            )
        return CollectiveReport(seq, first.op, first.timeout_ms, waiting, behind, silent, tuple(sentences))
