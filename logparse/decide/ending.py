"""How the run ended, and what a failure line is once the run's story is known: the only module that
answers "was the job stopped from outside?" and "is this line the run's end, or what came after it?".

A run ends one of three ways (../shared/TAXONOMY.md, "The run's story"): it completes (a completion
marker: what follows is teardown), it is stopped from outside (a signal the launcher, Slurm or Ray
reports: SIGINT, SIGTERM or SIGHUP; what follows is how it ended), or it fails. The interruption is the
first of the stop signals patterns/stalls.yaml words (`interrupts`) and of the exceptions a signal
raises in every process it reaches (`interrupt_exceptions`: torchrun's `SignalException`,
`KeyboardInterrupt`). A signal that is not a stop (SIGKILL: the OOM killer) ends nothing here: the
catalog names it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from logparse.model import Evidence, Progress
from logparse.observe.stalls import StallFacts
from logparse.observe.tracebacks import Traceback
from patterns.numbers import log_int
from patterns.stalls import StallRules, stall_rules

_SIGNAL_NUMBER = re.compile(r"got signal: (\d+)")


@dataclass(frozen=True)
class Interruption:
    """The job was stopped from outside: by which signal, where the log first says so."""

    signal: str  # SIGINT, SIGTERM, SIGHUP
    seq: int
    first: Evidence


def interruption(
    facts: StallFacts | None, tracebacks: Sequence[Traceback], rules: StallRules | None = None
) -> Interruption | None:
    """Where the job was first stopped from outside (a launcher's signal line, an interrupt exception),
    or None. Only the signals patterns/stalls.yaml calls a stop (`outside_signals`) count."""
    rules = rules or stall_rules()
    best: Interruption | None = None
    if facts is not None and facts.interrupt is not None:
        i = facts.interrupt
        best = Interruption(i.signal, i.seq, i.first)
    for tb in tracebacks:
        exc = tb.final
        if exc is None or exc.short_type not in rules.interrupt_exceptions:
            continue
        rec = exc.record
        if best is not None and rec.seq >= best.seq:
            continue
        m = _SIGNAL_NUMBER.search(exc.message)
        signal = rules.signal_name(log_int(m.group(1))) if m else rules.exception_signal(exc.short_type)
        best = Interruption(signal, rec.seq, Evidence(rec.line.source, rec.line.number, rec.line.text))
    if best is None or best.signal not in rules.outside_signals:
        return None
    return best


def is_interrupt_exception(tb: Traceback, rules: StallRules | None = None) -> bool:
    """Did a signal raise this traceback's exception (how the job ended, never why)?"""
    rules = rules or stall_rules()
    return tb.final is not None and tb.final.short_type in rules.interrupt_exceptions


def stopped_sentence(stop: Interruption, progress: Progress) -> str:
    """The note of a healthy job stopped from outside: the signal, where, and how far it had got."""
    if progress.last_step is not None:
        total = f" of {progress.total_steps}" if progress.total_steps else ""
        at = f"at step {progress.last_step}{total}"
    else:
        at = "before the first training step"
    where = f" in {progress.stage_reached}" if progress.stage_reached else ""
    return (
        f"stopped from outside by {stop.signal} ({stop.first.source}:{stop.first.line}) {at}{where}, with "
        f"no failure before it: the job did not complete, and nothing in the log says it failed"
    )
