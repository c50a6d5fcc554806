"""The commands without click (logparse.commands, scan_command, fleet_command): they return the exit code
and write only through the Terminal they are given; a usage problem is a CommandError, never an exit."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from logparse import commands, scan_command
from logparse.commands import CommandError
from logparse.process import EXIT_FAILURE_FOUND, EXIT_HEALTHY
from reports import FORMATS, render
from reports.escape import csv_safe_frame, terminal_text
from tests.conftest import SAMPLES


class FakeTerminal:
    """What a command wrote, by stream."""

    render = staticmethod(render)
    clean = staticmethod(terminal_text)
    csv_safe_frame = staticmethod(csv_safe_frame)

    def __init__(self) -> None:
        self.out, self.err, self.stdin = io.StringIO(), io.StringIO(), io.StringIO()
        self.reports: list[str] = []

    def echo(self, text: str, nl: bool = True) -> None:
        self.out.write(text + ("\n" if nl else ""))

    def say(self, text: str, nl: bool = True, color: bool | None = None) -> None:
        self.err.write(text + ("\n" if nl else ""))

    def report(self, text: str) -> None:
        self.reports.append(text)


def _scan_options(*paths: str, **changes) -> scan_command.ScanOptions:
    fields = dict(
        paths=paths, fmt=None, outputs=(), catalogs=(), color=False, redact_hosts=False, no_redact=False,
        follow=False, tee=False, metrics_csv=None, disabled=(), workers=None, stall_after=None,
        known_issue_files=(), unwrap="auto",
    )  # fmt: skip
    return scan_command.ScanOptions(**{**fields, **changes})


def test_a_scan_writes_its_report_through_the_terminal_only(capsys: pytest.CaptureFixture) -> None:
    terminal = FakeTerminal()
    code = scan_command.scan(
        _scan_options(str(SAMPLES / "ray-actor-exception.log"), fmt="json"), FORMATS, terminal
    )
    assert code == EXIT_FAILURE_FOUND
    assert len(terminal.reports) == 1 and '"cuda-oom"' in terminal.reports[0]
    assert capsys.readouterr() == ("", "")  # nothing printed behind the terminal's back


def test_a_contradiction_among_options_is_a_command_error_before_any_read(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="--follow reads one file"):
        scan_command.scan(_scan_options("a.log", "b.log", follow=True), FORMATS, FakeTerminal())
    with pytest.raises(CommandError, match="contradict each other"):
        scan_command.scan(_scan_options("a.log", no_redact=True, redact_hosts=True), FORMATS, FakeTerminal())


def test_a_bad_catalog_is_a_command_error_with_every_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("- id: Not Kebab\n")
    with pytest.raises(CommandError) as caught:
        commands.load([str(bad)])
    assert caught.value.message.startswith("catalog error (") and caught.value.problems


def test_explain_suggests_the_nearest_name() -> None:
    with pytest.raises(CommandError, match="did you mean 'cuda-oom'"):
        commands.explain("cuda-om", (), False, (), FakeTerminal())
    terminal = FakeTerminal()
    assert commands.explain("cuda-oom", (), False, (), terminal) == EXIT_HEALTHY
    assert "CUDA" in terminal.out.getvalue()


@pytest.mark.parametrize(
    "value,seconds", [("90", 90.0), ("90s", 90.0), ("30m", 1800.0), ("2h", 7200.0), ("1h30m", 5400.0)]
)
def test_stall_after_reads_durations(value: str, seconds: float) -> None:
    assert scan_command.stall_after(value, live=True) == seconds


def test_stall_after_needs_a_live_scan_and_a_duration() -> None:
    assert scan_command.stall_after(None, live=False) is None
    assert scan_command.stall_after("auto", live=True) == "auto"
    with pytest.raises(CommandError, match="watches a live log"):
        scan_command.stall_after("auto", live=False)
    with pytest.raises(CommandError, match="not a duration"):
        scan_command.stall_after("soon", live=True)
