"""The CLI's side of the commands' `Terminal` (logparse.commands): click's echo and the renderers of
reports/, and how a CommandError is shown (exit 2). Part of the CLI front end (logparse.cli): with
it, the only library modules that import click and `reports`."""

from __future__ import annotations

import sys

import click

from logparse.commands import CommandError
from logparse.outputs import encoded
from logparse.process import EXIT_ERROR, stdout_closed
from reports import render
from reports.escape import csv_safe_frame, terminal_text


def fail(message: str) -> None:
    # a message can quote a path or a line: no escape sequence from it reaches the terminal
    click.echo(f"verl-logscan: error: {terminal_text(message)}", err=True)
    sys.exit(EXIT_ERROR)


def show(error: CommandError) -> None:
    """A command's error (exit 2): its message, or its heading and the problems under it."""
    if error.problems is None:
        fail(error.message)
    click.echo(f"verl-logscan: {error.message}:", err=True)
    for p in error.problems:  # (a file name or a catalog's text may hold terminal escapes: dropped)
        click.echo(f"  {terminal_text(str(p))}", err=True)
    sys.exit(EXIT_ERROR)


class ClickTerminal:
    """The commands' Terminal (logparse.commands): click's echo, and the renderers of reports/."""

    render = staticmethod(render)
    clean = staticmethod(terminal_text)
    csv_safe_frame = staticmethod(csv_safe_frame)

    @property
    def out(self):
        return sys.stdout

    @property
    def err(self):
        return sys.stderr

    @property
    def stdin(self):
        return sys.stdin

    def echo(self, text: str, nl: bool = True) -> None:
        click.echo(text, nl=nl)

    def say(self, text: str, nl: bool = True, color: bool | None = None) -> None:
        click.echo(text, err=True, nl=nl, color=color)

    def report(self, text: str) -> None:
        """The report on standard output (bytes: click writes them as they are). A write error is exit
        2; a reader that went away (`| head`) is main()'s to handle."""
        if stdout_closed():
            fail("standard output is closed; write the report with -o FILE")
        try:
            click.echo(encoded(text), nl=False)
        except BrokenPipeError:
            raise
        except OSError as exc:
            fail(f"cannot write the report to standard output: {exc.strerror or exc}")

    def render_fleet(self, summary, fmt: str, width: int | None = None, color: bool = False) -> str:
        from reports.fleet import render_fleet

        return render_fleet(summary, fmt, width=width, color=color)

    def render_diff(self, result, fmt: str, color: bool = False, width: int | None = None) -> str:
        from reports.diff import render_diff

        return render_diff(result, fmt, color=color, width=width)

    def report_file_names(self, jobs: list[str]) -> list[str]:
        from reports.fleet import report_file_names

        return report_file_names(jobs)


TERMINAL = ClickTerminal()
