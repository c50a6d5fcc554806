"""What a new user meets first: -o picks the format from the extension (several at once), empty input
has its own exit code, `explain unknown` works and is suggested only where it works, NO_COLOR and
FORCE_COLOR."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from logparse.explain import ENTRY_SKELETON
from logparse.process import EXIT_ERROR, EXIT_FAILURE_FOUND, EXIT_HEALTHY, EXIT_NO_INPUT
from tests.conftest import FIXTURES, ROOT, SAMPLES, run_cli

SCHEMA = json.loads((ROOT / "reports" / "schema.json").read_text())
SAMPLE = SAMPLES / "ray-actor-exception.log"
UNKNOWN = FIXTURES / "cascades" / "unknown-exception.log"


# -- 1. -o infers the format; several outputs in one run ------------------------------------------------
def test_each_output_takes_the_format_of_its_extension(tmp_path: Path) -> None:
    outs = {name: tmp_path / name for name in ("r.md", "r.html", "r.json", "r.txt", "r.markdown", "r.htm")}
    args = ["scan", str(SAMPLE)]
    for path in outs.values():
        args += ["-o", str(path)]
    r = run_cli(args)
    assert r.exit_code == EXIT_FAILURE_FOUND, r.output
    assert r.stdout == ""  # every report went to a file
    assert outs["r.md"].read_text().startswith("## verl-logscan: job failed: `cuda-oom`")
    assert outs["r.markdown"].read_text() == outs["r.md"].read_text()
    assert outs["r.html"].read_text().startswith("<!DOCTYPE html>")
    assert outs["r.htm"].read_text() == outs["r.html"].read_text()
    report = json.loads(outs["r.json"].read_text())
    jsonschema.validate(report, SCHEMA)
    assert report["root_cause"]["id"] == "cuda-oom"
    assert outs["r.txt"].read_text().startswith("FAILED  cuda-oom")
    # the terminal gets the short summary, naming every file written
    assert "FAILED" in r.stderr and all(str(p) in r.stderr for p in outs.values())


def test_one_output_by_extension_matches_the_explicit_format(tmp_path: Path) -> None:
    inferred, explicit = tmp_path / "a.md", tmp_path / "b.md"
    run_cli(["scan", str(SAMPLE), "-o", str(inferred)])
    run_cli(["scan", str(SAMPLE), "--format", "md", "-o", str(explicit)])
    assert inferred.read_text() == explicit.read_text()


def test_format_applies_to_a_name_without_a_known_extension(tmp_path: Path) -> None:
    out = tmp_path / "report.out"
    r = run_cli(["scan", str(SAMPLE), "--format", "json", "-o", str(out)])
    assert r.exit_code == EXIT_FAILURE_FOUND
    assert json.loads(out.read_text())["status"] == "failed"
    plain = tmp_path / "report"
    run_cli(["scan", str(SAMPLE), "-o", str(plain)])
    assert plain.read_text().startswith("FAILED")  # no extension, no --format: the text summary


def test_report_to_stdout_and_files_together(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    r = run_cli(["scan", str(SAMPLE), "-o", "-", "-o", str(out)])
    assert r.exit_code == EXIT_FAILURE_FOUND
    assert r.stdout.startswith("FAILED  cuda-oom") and out.read_text().startswith("<!DOCTYPE html>")
    assert f"also written to {out}" in r.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--format", "md", "-o", "{d}/x.json"], "--format md contradicts -o {d}/x.json"),
        (["-o", "{d}/x.md", "-o", "{d}/./x.md"], "is given more than once"),
        (["-o", "-", "-o", "-"], "standard output) is given more than once"),
        (["--tee", "-o", "{d}/x.md", "-o", "-"], "--tee passes the log through to stdout"),
    ],
)
def test_contradictory_outputs_are_one_line_usage_errors(
    tmp_path: Path, args: list[str], message: str
) -> None:
    r = run_cli(["scan", str(SAMPLE), *[a.format(d=tmp_path) for a in args]])
    assert r.exit_code == EXIT_ERROR
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("verl-logscan: error: ")
    assert message.format(d=tmp_path) in r.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_no_output_may_overwrite_an_input(tmp_path: Path) -> None:
    log = tmp_path / "job.md"
    log.write_text(SAMPLE.read_text())
    r = run_cli(["scan", str(log), "-o", str(tmp_path / "r.json"), "-o", str(log)])
    assert r.exit_code == EXIT_ERROR and "is one of the inputs" in r.stderr
    assert log.read_text() == SAMPLE.read_text() and not (tmp_path / "r.json").exists()


# -- 3. empty input -----------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["text", "json", "md", "html"])
def test_empty_file_is_not_healthy(tmp_path: Path, fmt: str) -> None:
    empty = tmp_path / "job.log"
    empty.write_bytes(b"")
    r = run_cli(["scan", str(empty), "--format", fmt])
    assert r.exit_code == EXIT_NO_INPUT
    assert "no log lines read" in r.stdout
    assert "HEALTHY" not in r.stdout and "no failure found" not in r.stdout
    if fmt == "json":
        report = json.loads(r.stdout)
        jsonschema.validate(report, SCHEMA)
        assert report["status"] == "empty" and report["root_cause"] is None
        assert report["progress"]["note"] is None  # not "stopped before the first training step"
    if fmt != "text":
        assert r.stderr == "verl-logscan: no log lines read\n"


def test_empty_pipe_has_the_empty_exit_code() -> None:
    r = run_cli(["scan", "-"], input=b"")
    assert r.exit_code == EXIT_NO_INPUT
    assert r.stdout.startswith("EMPTY  no log lines read")


def test_blank_lines_are_lines() -> None:
    r = run_cli(["scan", "-"], input=b"\n\n")
    assert r.exit_code == EXIT_HEALTHY and "HEALTHY" in r.stdout


def test_empty_report_file_and_stderr_line(tmp_path: Path) -> None:
    empty = tmp_path / "job.log"
    empty.write_bytes(b"")
    out = tmp_path / "r.txt"
    r = run_cli(["scan", str(empty), "-o", str(out)])
    assert r.exit_code == EXIT_NO_INPUT
    assert r.stderr == f"verl-logscan: no log lines read; report written to {out}\n"


# the unknown-exception fixture's error, known to a user's own catalog
SHARD_ENTRY = """\
- id: shard-checksum-mismatch
  title: A data shard failed its checksum
  category: data-error
  role: cause
  severity: fatal
  priority: 70
  keywords: ['ShardChecksumError']
  patterns: ['ShardChecksumError: shard (?P<shard>\\d+) checksum mismatch']
  message: 'shard {shard} is corrupt'
  remediation:
    summary: A shard of the dataset is corrupt.
    why: Its bytes do not match the recorded checksum.
    fix: ['Copy the shard again.']
    references: []
  examples:
    match: ['[rank1]: shards.ShardChecksumError: shard 17 checksum mismatch: 9f1c2e != 77aa01']
    no_match:
      - line: 'shard 17 checksum ok'
        why: no error
"""


# -- 4. explain unknown, and the hint that works ----------------------------------------------------------
def test_explain_unknown_says_what_it_means_and_how_to_add_an_entry(tmp_path: Path) -> None:
    r = run_cli(["explain", "unknown"])
    assert r.exit_code == 0, r.output
    for section in ("What it is", "Why it happens", "Fix", "Adding an entry"):
        assert f"\n{section}\n" in r.stdout
    assert "verl-logscan catalog check my-entries.yaml" in r.stdout
    # the skeleton it prints is a valid entry whose examples behave
    entry = tmp_path / "my-entries.yaml"
    entry.write_text(ENTRY_SKELETON)
    check = run_cli(["catalog", "check", str(entry)])
    assert check.exit_code == 0, check.output
    # and what it prints is that skeleton, indented
    assert "     - id: my-dataset-key-error" in r.stdout


def test_summary_suggests_explain_unknown_and_it_works() -> None:
    r = run_cli(["scan", str(UNKNOWN)])
    assert r.exit_code == EXIT_FAILURE_FOUND and "unknown" in r.stdout.splitlines()[0]
    (hint,) = [line for line in r.stdout.splitlines() if "verl-logscan explain" in line]
    command = hint.split("; ", 1)[1].split()
    assert command == ["verl-logscan", "explain", "unknown"]
    assert run_cli(command[1:]).exit_code == 0


def test_summary_suggests_the_fallback_rule_that_named_the_failure_and_explain_shows_it() -> None:
    """No entry names a DataLoader worker's exit; the fallback phrase that does is what `explain` shows:
    what it looks for, an example, its own fix steps before its category's, and where it is defined."""
    r = run_cli(["scan", str(FIXTURES / "torchrun" / "dataloader-worker-exit.log")])
    assert r.exit_code == EXIT_FAILURE_FOUND
    (hint,) = [line for line in r.stdout.splitlines() if "verl-logscan explain" in line]
    command = hint.split("; ", 1)[1].split()
    assert command == ["verl-logscan", "explain", "phrase-dataloader-worker"]
    shown = run_cli(command[1:])
    assert shown.exit_code == 0
    out = shown.stdout
    for part in (
        "a fallback phrase rule",
        "category data-error",
        "What it looks for",
        "Example",
        "Fix",
        "1. Rerun with the DataLoader in the main process",
        "Defined in patterns/fallback.yaml:",
    ):
        assert part in out, part
    assert out.index("num_workers=0") < out.index("data.train_files")  # its own step first
    frame = run_cli(["explain", "frame-dataset"])
    assert frame.exit_code == 0 and "a traceback frame whose function matches" in frame.stdout


def test_summary_suggests_the_marker_that_named_a_bare_hydra_error_and_explain_shows_it() -> None:
    """Without the catalog's entry, Hydra's bare config error is named by the epilogue after it: the
    summary points to that marker, and `explain` shows it."""
    log = str(FIXTURES / "hydra" / "primary-config-missing.log")
    r = run_cli(["scan", log, "--disable", "hydra-config-not-found"])
    assert r.exit_code == EXIT_FAILURE_FOUND and "config-error" in r.stdout.splitlines()[0]
    (hint,) = [line for line in r.stdout.splitlines() if "verl-logscan explain" in line]
    command = hint.split("; ", 1)[1].split()
    assert command == ["verl-logscan", "explain", "marker-hydra-epilogue"]
    as_json = run_cli(["scan", "--format", "json", log, "--disable", "hydra-config-not-found"])
    report = json.loads(as_json.stdout)
    jsonschema.validate(report, SCHEMA)
    assert report["root_cause"]["basis"]["kind"] == "marker"
    for fmt in ("md", "html"):
        page = run_cli(["scan", "--format", fmt, log, "--disable", "hydra-config-not-found"])
        assert page.exit_code == EXIT_FAILURE_FOUND and "marker-hydra-epilogue" in page.stdout, fmt
    shown = run_cli(command[1:])
    assert shown.exit_code == 0
    for part in (
        "a failure marker whose failure is the text printed before it",
        "category config-error",
        "HYDRA_FULL_ERROR=1",
        "CompactHydraException",
        "Fix",
        "Defined in patterns/fallback.yaml:",
    ):
        assert part in shown.stdout, part


def test_summary_suggests_the_catalog_a_user_entry_needs(tmp_path: Path) -> None:
    entries = tmp_path / "mine.yaml"
    entries.write_text(SHARD_ENTRY)
    r = run_cli(["scan", str(UNKNOWN), "--catalog", str(entries)])
    assert r.exit_code == EXIT_FAILURE_FOUND, r.output
    (hint,) = [line for line in r.stdout.splitlines() if "verl-logscan explain" in line]
    command = hint.split("; ", 1)[1].split()
    assert command == ["verl-logscan", "explain", "shard-checksum-mismatch", "--catalog", str(entries)]
    assert run_cli(command[1:]).exit_code == 0
    assert run_cli(command[1:3]).exit_code == EXIT_ERROR  # without the catalog it would not work


# -- 2. colour: NO_COLOR, FORCE_COLOR, the flags ------------------------------------------------------------
@pytest.mark.parametrize(
    "env, flag, coloured",
    [
        ({}, None, False),  # CliRunner's stdout is not a terminal
        ({"FORCE_COLOR": "1"}, None, True),
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, None, False),
        ({"NO_COLOR": "1"}, "--color", True),  # an explicit flag beats the environment
        ({"FORCE_COLOR": "1"}, "--no-color", False),
    ],
)
def test_colour_follows_no_color_and_force_color(
    monkeypatch: pytest.MonkeyPatch, env: dict, flag: str | None, coloured: bool
) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    r = run_cli(["scan", str(SAMPLE), *([flag] if flag else [])])
    assert ("\x1b[" in r.stdout) is coloured
