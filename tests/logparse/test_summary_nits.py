"""The small things a first-time user tripped over (issue 39, point 12), each through the real command:
plurals, a metric key said once, the labels in one column, one note for the error files torchrun
wrote, and `--stall-after 20 minutes`."""

from __future__ import annotations

import json
import re
from pathlib import Path

from logparse.process import EXIT_ERROR, EXIT_FAILURE_FOUND
from tests.conftest import FIXTURES, SAMPLES, run_cli

TORCHRUN_LOGDIR = FIXTURES / "torchrun" / "logdir"  # three ranks wrote an error.json


def test_summary_labels_share_one_column() -> None:
    text = run_cli(["scan", str(SAMPLES / "torchrun-sigkill.log")]).stdout
    fields = [line for line in text.splitlines() if line.startswith("  ") and not line.startswith("   ")]
    labelled = fields[1:]  # (the first is the root cause's sentence)
    assert {line[:11].split()[0] for line in labelled} == {"at", "stage", "error", "fix", "symptoms", "more"}
    # every value starts in column 11: `  symptoms ` is as wide as `  at       `
    assert all(line[10] == " " and line[11] != " " for line in labelled), labelled


def test_one_rank_is_rank_not_ranks(tmp_path: Path) -> None:
    """The rank-exception sample with rank 3's echo removed: rank 1 alone lost its peer."""
    lines = (SAMPLES / "torchrun-rank-exception.log").read_text().splitlines(keepends=True)
    log = tmp_path / "job.log"
    log.write_text("".join(line for line in lines if not line.startswith("[rank3]")))
    text = run_cli(["scan", str(log)]).stdout
    [symptoms] = [line for line in text.splitlines() if line.startswith("  symptoms")]
    assert "gloo-peer-connection-lost x1 (rank 1, step 5)" in symptoms, symptoms
    full = run_cli(["scan", str(SAMPLES / "torchrun-rank-exception.log")]).stdout
    assert "(ranks 1, 3, step 5)" in full


def test_the_anomaly_line_names_its_key_and_step_once(tmp_path: Path) -> None:
    log = tmp_path / "spike.log"
    log.write_text(
        "".join(
            f"(TaskRunner pid=1) step:{i} - actor/pg_loss:0.1 - actor/grad_norm:{100.0 if i == 11 else 1.0}"
            f" - timing_s/step:1.5\n"
            for i in range(1, 13)
        )
    )
    text = run_cli(["scan", str(log)]).stdout
    [line] = [line for line in text.splitlines() if line.startswith("  metrics")]
    assert line.count("actor/grad_norm") == 1 and line.count("step 11") == 1, line
    assert "grad-norm-spike: actor/grad_norm jumped to 100 at step 11" in line


def test_error_files_of_several_ranks_are_one_note() -> None:
    result = run_cli(["scan", str(TORCHRUN_LOGDIR), "--format", "json"])

    notes = [n for n in json.loads(result.stdout)["notes"] if "torchrun error file" in n]
    assert len(notes) == 1 and notes[0].startswith("3 inputs: read as a torchrun error file")
    text = run_cli(["scan", str(TORCHRUN_LOGDIR)]).stdout
    assert text.count("torchrun error file") == 1


def test_one_entry_is_entry_not_entries(tmp_path: Path) -> None:
    issue = FIXTURES / "known_issues"
    files = sorted(issue.glob("*.yaml")) if issue.is_dir() else []
    result = run_cli(["catalog", "list"])
    assert re.fullmatch(r"\d+ entries\n", result.stderr)  # (many: entries)
    if files:
        out = run_cli(["catalog", "check", "--known-issues", str(files[0])]).output
        assert "1 entries" not in out


def test_stall_after_in_words() -> None:
    result = run_cli(["scan", "--stall-after", "20", "minutes"])
    assert result.exit_code == EXIT_ERROR
    assert result.output.strip() == (
        "verl-logscan: error: --stall-after 20 minutes: the unit was read as a file to scan; write the "
        "duration as one word, --stall-after 20m"
    )
    log = (SAMPLES / "ray-actor-exception.log").read_text()
    quoted = run_cli(["scan", "--stall-after", "20 minutes", "-"], input=log)
    assert quoted.exit_code == EXIT_FAILURE_FOUND, quoted.output
    bad = run_cli(["scan", "--stall-after", "20 parsecs", "-"], input=log)
    assert bad.exit_code == EXIT_ERROR and "not a duration (such as 90s, 30m" in bad.output
