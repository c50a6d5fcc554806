"""Signals held while `verl-logscan` starts (its console script, `python -m logparse`: logparse.__main__).

Importing the CLI (click, the report templates, the catalog's modules) takes a few hundred
milliseconds. A Ctrl-C or SIGTERM in that time used to end the process with a KeyboardInterrupt
traceback from the middle of an import (or click's "Aborted!" and exit 1, which means "failure
found" here). So SIGINT and SIGTERM are held (blocked, not ignored: one that arrives stays pending)
from the first line until the command starts, inside the CLI's handler of interrupts
(`release_signals`, called by logparse.cli): a signal held until then arrives there and ends the run
with the one-line message and 130 / 143, like one during the catalog load or the scan.

What runs before this module (the interpreter's own start-up and `site`, 20-50 ms) is out of its
reach. Once the run has ended (report written, exit code chosen) the signals are held again for the
interpreter's clean-up. A command that ends before it starts (`--help`, `--version`, a usage error)
keeps them held to its end: it finishes what it was doing, which takes milliseconds.
"""

from __future__ import annotations

import signal

HELD = (signal.SIGINT, signal.SIGTERM)


def hold_signals() -> None:
    """Keep SIGINT and SIGTERM pending until release_signals (where the platform can block signals)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, HELD)


def release_signals() -> None:
    """Deliver what hold_signals kept: a pending SIGINT raises KeyboardInterrupt here (a no-op when
    nothing was held, e.g. for a caller that invokes the CLI in-process)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)
