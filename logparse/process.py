"""The process a command runs as: its exit codes, what SIGINT and SIGTERM do to it, and the standard
descriptors it was started without.

`logparse.cli.main` installs the SIGTERM handler and guards the descriptors; nothing here runs on
import, so an in-process caller (a test, a script using the library) keeps its own handlers.
"""

from __future__ import annotations

import errno
import os
import signal
import sys

from logparse.startup import hold_signals

EXIT_HEALTHY = 0
EXIT_FAILURE_FOUND = 1
EXIT_ERROR = 2
EXIT_STALLED = 3  # no failure, but the job stopped making progress (a hang)
EXIT_NO_INPUT = 5  # no log line was read (an empty file or pipe); pytest uses 5 for "nothing collected"
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
EXIT_TERMINATED = 143  # 128 + SIGTERM
# errors of a write that the disk or device refused (ENOSPC: /dev/full, a full disk; EDQUOT: a quota;
# EFBIG: a file size limit; EIO: the device)
WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


class Terminated(BaseException):
    """SIGTERM arrived. A BaseException, like KeyboardInterrupt, so no `except Exception` swallows it."""


_MAIN_PID: int | None = None  # set by install_sigterm_handler()
_STDOUT_WAS_CLOSED = (
    False  # set by guard_standard_descriptors(): the process started with descriptor 1 closed
)


_SWALLOWED: list[BaseException] = []  # interrupts raised inside a finaliser (see keep_swallowed_interrupts)


def install_sigterm_handler() -> None:
    """SIGTERM raises Terminated in this process (a scan then reports what it read); a process forked
    from it (fleet's workers) still dies of it. An interrupt that lands in a finaliser is kept."""
    global _MAIN_PID
    _MAIN_PID = os.getpid()
    signal.signal(signal.SIGTERM, on_sigterm)
    keep_swallowed_interrupts()


def keep_swallowed_interrupts() -> None:
    """A signal whose handler runs inside a finaliser (a `__del__` that the garbage collector calls,
    e.g. the regex module's while the catalog compiles) raises where Python cannot pass the exception
    on: the interpreter printed "Exception ignored in ..." with a traceback and went on as if no
    signal had come (the scan ran to its end, exit 1). Such an interrupt is kept here, silently, and
    `raise_swallowed_interrupt` raises it again where the command can act on it."""
    previous = sys.unraisablehook

    def hook(unraisable: object) -> None:
        exc_type = getattr(unraisable, "exc_type", None)
        if isinstance(exc_type, type) and issubclass(exc_type, (KeyboardInterrupt, Terminated)):
            _SWALLOWED.append(getattr(unraisable, "exc_value", None) or exc_type())
            return
        previous(unraisable)

    if getattr(previous, "keeps_interrupts", False):
        return
    hook.keeps_interrupts = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


def raise_swallowed_interrupt() -> None:
    """Raise the first interrupt a finaliser swallowed since the last call (none: return)."""
    if _SWALLOWED:
        exc = _SWALLOWED[0]
        _SWALLOWED.clear()
        raise exc


def on_sigterm(signum: int, frame: object) -> None:
    if os.getpid() != _MAIN_PID:  # a forked worker (fleet): die as SIGTERM means
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    raise Terminated()


def hold_after_interrupt() -> None:
    """After the first interrupt the report of what was read is built and written: a second SIGINT or
    SIGTERM (a scheduler sends more, 10-20 ms apart) is held until the process ends, instead of ending
    it in the middle of the write (a second one used to lose every report). The exit code stays that
    of the first. A report into a FIFO without a reader still waits (as a shell's `>` does): SIGKILL
    ends that."""
    if os.getpid() == _MAIN_PID:
        hold_signals()


def interrupt_code(exc: BaseException) -> tuple[int, str]:
    """The exit code and signal name of an interrupt (KeyboardInterrupt or Terminated)."""
    return (EXIT_TERMINATED, "SIGTERM") if isinstance(exc, Terminated) else (EXIT_INTERRUPTED, "SIGINT")


def guard_standard_descriptors() -> None:
    """Standard descriptors the process was started without (`>&-`, `2>&-`) get /dev/null: otherwise
    the next file opened (a log, the report's temporary file) would take descriptor 1 or 2, and a
    library's message to stderr would land in it. Without stderr, messages are dropped and the scan
    goes on (the report and the exit code do not depend on them); without stdout, a report meant for
    it is an error (exit 2), one written with -o is not."""
    global _STDOUT_WAS_CLOSED
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        try:
            devnull = os.open(os.devnull, os.O_RDWR)
        except OSError:
            continue
        if devnull != fd:
            os.dup2(devnull, fd)
            os.close(devnull)
        if fd == 1:
            _STDOUT_WAS_CLOSED = True
        elif fd == 2:
            sys.stderr = open(fd, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115


def stdout_closed() -> bool:
    """Was the process started with its standard output closed (`>&-`)? (main() then puts /dev/null
    on the descriptor, so that no file opened later takes it, and Python has no sys.stdout.)"""
    return sys.stdout is None or _STDOUT_WAS_CLOSED


def stdout_to_devnull() -> None:
    """The reader of our standard output went away: later writes (and the flush at exit) go nowhere
    instead of failing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass


def isatty(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError, OSError):  # closed, or no stream at all
        return False
