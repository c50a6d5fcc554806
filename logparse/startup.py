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

That clean-up frees every object one by one (the catalog, a scan's metrics, its tracebacks): 30 ms
after a 100 MB scan, about 4% of its time. `exit_now` ends the process as the clean-up would (the
`atexit` functions run, stdout and stderr are flushed, a failed flush exits 120 as the interpreter's
does) without freeing what the operating system takes back anyway.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading

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


def exit_now(code: object) -> None:
    """End the process with `sys.exit(code)`'s status at once, skipping the interpreter's freeing of
    every object; returns (the caller raises its SystemExit) when that freeing may be needed: a
    tracer or profiler is on (coverage, cProfile write their results after the run), a thread that
    is no daemon still runs (the interpreter waits for it), or `code` is no int or None (the
    interpreter prints it)."""
    if code is None:
        code = 0
    if type(code) is not int or sys.gettrace() is not None or sys.getprofile() is not None:
        return
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if run_exitfuncs is None:
        return
    me = threading.current_thread()
    if any(t is not me and not t.daemon for t in threading.enumerate()):
        return
    run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # (a closed pipe or file: the interpreter's own exit says 120)
            code = 120
    os._exit(code & 0xFF)
