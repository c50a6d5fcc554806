"""`python -m logparse` and the `verl-logscan` console script: the CLI imported with SIGINT and SIGTERM
held (logparse.startup), so that an interrupt during the imports ends as one during the run does."""

from logparse.startup import exit_now, hold_signals


def main() -> None:
    hold_signals()
    from logparse.cli import main as cli_main

    try:
        cli_main()
    except SystemExit as exc:
        # the run has ended (its report written, its exit code chosen): a signal now would only turn
        # the interpreter's clean-up into an "Exception ignored" traceback
        hold_signals()
        exit_now(exc.code)
        raise
    finally:  # (any other way out: an exception the CLI did not turn into an exit code)
        hold_signals()


if __name__ == "__main__":
    main()
