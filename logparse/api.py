"""The Python API: what `verl-logscan scan` does, for a training script or a CI job that wants the
report itself (to attach it to its own failure, to gate on it).

    from logparse import analyse

    report = analyse(["logs/"])            # files, folders, .gz; as `verl-logscan scan logs/` reads them
    if report.failed:
        print(report.root_cause.category, report.root_cause.fix[0])
    Path("report.md").write_text(report.to_markdown())

It is the CLI's own path, not a copy of it: the catalog, the known issues and the redaction settings
loaded as the commands load them (logparse.commands), the job analysed by logparse.pipeline.analyse,
and each format rendered by the renderers `scan -o` writes with (reports.render), so a report from here
is the report `scan` writes for the same logs and options. Like the CLI, this module is a front end:
it may import `reports` (tests/test_layers.py); the library below it never renders.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from logparse import model
from logparse.commands import CommandError, load, load_known, redact_config, without
from logparse.explain import explain_hint
from logparse.pipeline import ScanConfig
from logparse.pipeline import analyse as analyse_job
from logparse.read.sources import InputError
from logparse.scan_command import report_exit_code


class AnalysisError(Exception):
    """What `verl-logscan scan` reports as exit 2: a path that cannot be read, a bad catalog or
    known-issues file, contradictory settings. The message is the CLI's."""


class Report:
    """A finished analysis: every field of logparse.model.Report (`root_cause`, `status`, `progress`,
    `stall`, `environment`, `notes`, ...; reports/schema.json describes them) and the report in each
    format `scan -o` writes."""

    def __init__(self, report: model.Report, hint: str | None = None):
        self.report = report  # the data, as logparse.model.Report
        self._hint = hint  # the `verl-logscan explain ...` the text summary suggests

    def __getattr__(self, name: str) -> Any:  # the data's fields, read through
        return getattr(self.report, name)

    def __repr__(self) -> str:
        return f"<verl-logscan Report: {self.summary_line()}>"

    @property
    def exit_code(self) -> int:
        """The exit code `verl-logscan scan` ends with for this report: 0 healthy, 1 failure found,
        3 stalled, 5 no log line read."""
        return report_exit_code(self.report)

    def summary_line(self) -> str:
        """The text summary's last line (`FAILED cuda-oom · rank 3 · stage actor-update`)."""
        return self.to_text().rstrip("\n").rsplit("\n", 1)[-1]

    def to_json(self) -> str:
        """The JSON report (reports/schema.json), as `scan --format json` prints it."""
        return self._render("json")

    def to_markdown(self) -> str:
        return self._render("md")

    def to_html(self) -> str:
        """One self-contained HTML page, as `scan -o report.html` writes it."""
        return self._render("html")

    def to_text(self) -> str:
        """The terminal summary, without colour or wrapping (as `scan` prints into a pipe)."""
        return self._render("text")

    def _render(self, fmt: str) -> str:
        from reports import render

        return render(self.report, fmt, explain=self._hint if fmt == "text" else None)


def analyse(
    paths: str | Sequence[str],
    *,
    catalogs: Sequence[str] = (),
    known_issues: Sequence[str] = (),
    disable: Sequence[str] = (),
    redact: bool = True,
    redact_hosts: bool = False,
    workers: int | None = None,
) -> Report:
    """Analyse one job's logs as `verl-logscan scan PATHS` does, with the options of the same names
    (`--catalog`, `--known-issues`, `--disable`, `--no-redact` as `redact=False`, `--redact-hosts`,
    `--workers`). `paths`: a file, a folder or a .gz, or several read as one job; `-` is standard input.
    Raises AnalysisError where the CLI exits 2."""
    try:
        settings = redact_config(not redact, redact_hosts)
        catalog = without(load(catalogs), disable)
        known = load_known(known_issues)
        config = ScanConfig() if workers is None else dataclasses.replace(ScanConfig(), workers=workers)
        report = analyse_job(
            [paths] if isinstance(paths, str) else list(paths), catalog, config, settings, known
        )
    except CommandError as exc:
        problems = "".join(f"\n  {p}" for p in exc.problems or ())
        raise AnalysisError(exc.message + problems) from None
    except InputError as exc:
        raise AnalysisError(str(exc)) from None
    return Report(report, explain_hint(report, catalog, tuple(catalogs)))
