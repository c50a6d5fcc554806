"""Inputs and settings that hung or ended in a traceback (issue "Safe to paste, round four", point 8):
`--catalog` on a FIFO or /dev/zero, environment variables with values the tool cannot use, commands
whose standard output is full, and catalog text with terminal escapes printed by catalog list / check
and explain. Each is now one line (or the text without the escapes), with exit code 2 where it fails.
(`fleet --engine ray --address` at a gRPC server that is not Ray's: tests/logparse/test_handshake.py; a
second SIGTERM during the report's write: tests/logparse/test_signals.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from logparse.process import EXIT_ERROR
from tests.conftest import ROOT, SAMPLES, run_cli

HANG_GUARD_S = 60  # each case answers in about a second; waiting past this is the old hang


def run(args: list[str], env: dict | None = None, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "logparse", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=full,
        timeout=HANG_GUARD_S,
    )


def assert_one_line(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode == EXIT_ERROR, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and all(w in result.stderr for w in words), result.stderr
    assert len(lines) <= 3, result.stderr  # (a catalog problem: its heading, the problem and its help)


def test_the_loader_refuses_a_fifo_or_a_device_before_reading_it(tmp_path: Path) -> None:
    from patterns import CatalogError, load_catalog

    fifo = tmp_path / "entries.yaml"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        with pytest.raises(CatalogError, match="not a regular file"):
            load_catalog([path])


@pytest.mark.slow
@pytest.mark.parametrize(
    "command", [["scan", str(SAMPLES / "ray-healthy.log")], ["catalog", "check"], ["explain", "x"]]
)
def test_a_catalog_that_is_a_fifo_or_a_device_is_refused(tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "entries.yaml"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        args = (
            ["catalog", "check", path] if command == ["catalog", "check"] else [*command, "--catalog", path]
        )
        assert_one_line(run(args), "not a regular file")


@pytest.mark.slow
def test_a_catalog_file_over_the_size_cap_is_refused(tmp_path: Path) -> None:
    from patterns.loader import MAX_CATALOG_BYTES

    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * MAX_CATALOG_BYTES + b"\n")
    assert_one_line(run(["catalog", "check", str(big)]), "bytes (limit")


@pytest.mark.parametrize(
    "variable,value,words",
    [
        ("VERL_LOGSCAN_READER_MB", "inf", "not a size in MB"),
        ("VERL_LOGSCAN_READER_MB", "nan", "not a size in MB"),
        ("VERL_LOGSCAN_READER_MB", "-3", "not a size in MB"),
        ("VERL_LOGSCAN_ENGINE", "foo", "is no prefilter engine"),
        ("VERL_LOGSCAN_WORKERS", "many", "not a number of processes"),
    ],
)
def test_a_setting_the_tool_cannot_use_is_one_line(
    variable: str, value: str, words: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`VERL_LOGSCAN_READER_MB=inf` and `VERL_LOGSCAN_ENGINE=foo` gave tracebacks."""
    monkeypatch.setenv(variable, value)
    for args in (["scan", str(SAMPLES / "ray-healthy.log")], ["diff", str(SAMPLES / "ray-healthy.log")] * 2):
        result = run_cli(args)
        assert result.exit_code == EXIT_ERROR and result.stdout == ""
        assert result.stderr.count("\n") == 1 and f"{variable}=" in result.stderr and words in result.stderr


@pytest.mark.slow
def test_a_setting_the_tool_cannot_use_is_one_line_in_a_process_and_in_fleet() -> None:
    for args in (["scan", str(SAMPLES / "ray-healthy.log")], ["fleet", str(SAMPLES / "ray-healthy.log")]):
        result = run(args, {"VERL_LOGSCAN_READER_MB": "inf"})
        assert_one_line(result, "VERL_LOGSCAN_READER_MB=", "not a size in MB")
        assert result.stdout == ""


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [["explain", "cuda-oom"], ["catalog", "list"], ["catalog", "check"], ["--help"], ["scan", "--help"]],
)
def test_a_full_standard_output_is_one_line(args: list[str]) -> None:
    """`explain`, `catalog list`, `catalog check` and `--help` into /dev/full gave tracebacks."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:
        result = run(args, stdout=full)
    assert_one_line(result, "cannot write to standard output", "No space left on device")


ESCAPES = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07\x1b[2J"  # a clipboard write, a title set, a clear
IN_YAML = r"\e]52;c;cm0gLXJmIH4=\a\e]0;pwned\a\e[2J"  # the same in a double-quoted YAML scalar


def _entry_with_escapes(folder: Path) -> Path:
    path = folder / f"evil{ESCAPES}.yaml"
    path.write_text(
        f"""\
- id: evil-entry
  title: "Evil {IN_YAML} title"
  category: data-error
  role: cause
  severity: error
  priority: 70
  keywords: ['EvilError']
  patterns: ['EvilError: (?P<what>.+)']
  message: "evil {IN_YAML} message"
  remediation:
    summary: "Summary {IN_YAML}"
    why: "Why {IN_YAML}"
    fix: ["Fix {IN_YAML}"]
  examples:
    match: ['[rank1]: EvilError: bad']
    no_match:
      - line: 'EvilErrorHandler installed'
        why: "not an error {IN_YAML}"
"""
    )
    return path


@pytest.mark.parametrize("command", ["list", "explain", "check", "check-failing", "load-error"])
def test_catalog_text_and_file_names_reach_the_terminal_without_escapes(tmp_path: Path, command: str) -> None:
    """`catalog check`, `explain` and `catalog list` printed a catalog's text and file names with their
    escapes (OSC 52 clipboard writes, title sets) raw; scan drops them from log text."""
    path = _entry_with_escapes(tmp_path)
    if command == "check-failing":
        path.write_text(path.read_text().replace("'[rank1]: EvilError: bad'", f'"no match here {IN_YAML}"'))
    if command == "load-error":
        path.write_text(path.read_text().replace("category: data-error", f'category: "bad{IN_YAML}"'))
    args = {
        "list": ["catalog", "list", "--catalog", str(path)],
        "explain": ["explain", "evil-entry", "--catalog", str(path)],
        "check": ["catalog", "check", str(path)],
        "check-failing": ["catalog", "check", str(path)],
        "load-error": ["catalog", "check", str(path)],
    }[command]
    result = run_cli(args)
    out = result.stdout + result.stderr
    assert "\x1b" not in out and "\x07" not in out, repr(out[-400:])
    if command in ("list", "explain"):
        assert "Evil" in out and result.exit_code == 0
    elif command == "check":
        assert result.exit_code == 0 and "catalog ok" in out
    else:  # (the failure names the file and quotes the text)
        assert result.exit_code == EXIT_ERROR and "evil" in out
