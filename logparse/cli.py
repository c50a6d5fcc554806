"""The `verl-logscan` command (click). The only module that imports `reports`; the library below it
never prints or exits."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import click

from logparse.catalog_check import check_examples
from logparse.reader import InputError, expand_inputs
from logparse.scan import Scanner
from patterns import CatalogError, load_catalog
from reports import FORMATS, render

EXIT_HEALTHY = 0
EXIT_FAILURE_FOUND = 1
EXIT_ERROR = 2


def _fail(message: str) -> None:
    click.echo(f"verl-logscan: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def _load(catalog_paths: tuple[str, ...]):
    try:
        return load_catalog(list(catalog_paths))
    except CatalogError as exc:
        click.echo(f"verl-logscan: catalog error ({len(exc.problems)} problem(s)):", err=True)
        for p in exc.problems:
            click.echo(f"  {p}", err=True)
        sys.exit(EXIT_ERROR)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def write_atomically(path: str, text: str) -> None:
    """Write to a temporary file beside `path`, then rename: never a half-written report."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class DefaultToScan(click.Group):
    """`... | verl-logscan` with piped input scans stdin, like `verl-logscan scan -`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        piped = not sys.stdin.isatty()
        if piped and not args:
            args = ["scan", "-"]
        elif piped and args[0].startswith("-") and args[0] not in ("-h", "--help", "--version"):
            args = ["scan", *args]
        return super().parse_args(ctx, args)


@click.group(cls=DefaultToScan, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="verl-logscan", prog_name="verl-logscan")
def cli() -> None:
    """Find the root cause in the logs of a failed verl / torchrun / Ray job.

    \b
    Exit codes: 0 no failure found, 1 failure found, 2 usage, input or catalog error.
    """


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(dir_okay=True, allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="Report format.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True),
              help="Write the report to FILE (atomically) instead of stdout.")
@click.option("--catalog", "catalogs", multiple=True, type=click.Path(exists=False),
              help="Extra catalog file or folder; adds to or overrides built-in entries by id. Repeatable.")
@click.option("--color/--no-color", default=None, help="Colour the text summary (default: on a terminal).")
def scan(paths: tuple[str, ...], fmt: str, output: str | None, catalogs: tuple[str, ...],
         color: bool | None) -> None:
    """Scan log files, folders, .gz files or stdin (no PATH or '-') and report the root cause.

    \b
    Examples:
      verl-logscan scan job.log
      verl-logscan scan logs/ --format md -o report.md
      torchrun ... 2>&1 | verl-logscan scan --format json
    """
    catalog = _load(catalogs)
    try:
        files = expand_inputs(list(paths) or ["-"])
    except InputError as exc:
        _fail(str(exc))
    if output and output != "-":
        for f in files:
            if f != "-" and _same_file(f, output):
                _fail(f"--output {output} is one of the inputs; refusing to overwrite it")
    scanner = Scanner(catalog)
    try:
        scanner.feed_inputs(files)
    except InputError as exc:
        _fail(str(exc))
    report = scanner.report()
    to_stdout = not output or output == "-"
    use_color = (sys.stdout.isatty() if to_stdout else False) if color is None else color
    text = render(report, fmt, color=use_color and fmt == "text")
    if to_stdout:
        click.echo(text, nl=False)
    else:
        try:
            write_atomically(output, text)
        except OSError as exc:
            _fail(f"cannot write {output}: {exc.strerror or exc}")
        verdict = f"failed: {report.root_cause.category}" if report.root_cause else "healthy"
        click.echo(f"verl-logscan: {verdict}; report written to {output}", err=True)
    sys.exit(EXIT_FAILURE_FOUND if report.failed else EXIT_HEALTHY)


@cli.group(name="catalog")
def catalog_group() -> None:
    """List or check the failure catalog."""


@catalog_group.command(name="list")
@click.option("--catalog", "catalogs", multiple=True, type=click.Path(), help="Extra catalog file or folder.")
def catalog_list(catalogs: tuple[str, ...]) -> None:
    """List every catalog entry: id, category, role, priority, title."""
    catalog = _load(catalogs)
    rows = sorted(catalog.entries, key=lambda e: (e.category, -e.priority, e.id))
    width = max((len(e.id) for e in rows), default=2)
    cwidth = max((len(e.category) for e in rows), default=8)
    click.echo(f"{'id':{width}}  {'category':{cwidth}}  {'role':7}  prio  title")
    for e in rows:
        click.echo(f"{e.id:{width}}  {e.category:{cwidth}}  {e.role.value:7}  {e.priority:4}  {e.title}")
    click.echo(f"{len(rows)} entries", err=True)


@catalog_group.command(name="check")
@click.argument("path", required=False, type=click.Path())
def catalog_check(path: str | None) -> None:
    """Validate the catalog (built-in, or PATH on top of it) and run every entry's examples."""
    catalog = _load((path,) if path else ())
    only = None
    if path:
        root = str(Path(path))
        only = {e.id for e in catalog.entries if e.source == root or e.source.startswith(root.rstrip("/") + "/")}
    count, failures = check_examples(catalog, only)
    checked = len(only) if only is not None else len(catalog.entries)
    if failures:
        for f in failures:
            click.echo(str(f), err=True)
        click.echo(f"verl-logscan: catalog check failed: {len(failures)} of {count} examples "
                   f"in {checked} entries", err=True)
        sys.exit(EXIT_ERROR)
    click.echo(f"catalog ok: {checked} entries, {count} examples")


@cli.command()
@click.argument("entry_id")
@click.option("--catalog", "catalogs", multiple=True, type=click.Path(), help="Extra catalog file or folder.")
def explain(entry_id: str, catalogs: tuple[str, ...]) -> None:
    """Show what a catalog entry means and how to fix it."""
    catalog = _load(catalogs)
    entry = catalog.get(entry_id)
    if entry is None:
        from rapidfuzz import process

        best = process.extractOne(entry_id, [e.id for e in catalog.entries])
        hint = f" (did you mean '{best[0]}'?)" if best and best[1] >= 60 else ""
        _fail(f"no catalog entry '{entry_id}'{hint}; see 'verl-logscan catalog list'")
    r = entry.remediation
    click.echo(f"{entry.id}: {entry.title}")
    click.echo(f"category {entry.category}, role {entry.role.value}, severity {entry.severity.value}, "
               f"priority {entry.priority}" + (f", stage {entry.stage}" if entry.stage else ""))
    click.echo("\nWhat it is\n  " + r.summary)
    click.echo("\nWhy it happens\n  " + r.why)
    click.echo("\nExample\n  " + entry.examples.match[0].line)
    click.echo("\nFix")
    for i, step in enumerate(r.fix, 1):
        click.echo(f"  {i}. {step}")
    if r.references:
        click.echo("\nReferences")
        for ref in r.references:
            click.echo(f"  {ref}")
    click.echo(f"\nDefined in {entry.source}:{entry.line}")


def main() -> None:
    try:
        cli.main(prog_name="verl-logscan")
    except BrokenPipeError:
        # the reader of our stdout went away (e.g. `| head`): not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(EXIT_ERROR)


if __name__ == "__main__":
    main()
