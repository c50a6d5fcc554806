"""The run's story (issue 36): what ended a run is its failure; what it survived, its teardown after
completion and how a stop from outside ended it are not. Real torchrun captures and logs written to
documented formats (tests/fixtures/stories/README.md), each with its expectation in expected.yaml."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from tests.conftest import FIXTURES, run_cli

STORIES = FIXTURES / "stories"
EXPECTED = yaml.safe_load((STORIES / "expected.yaml").read_text())


def scan_json(path: Path | None = None, text: str | None = None) -> tuple[int, dict]:
    args = ["scan", "--format", "json", str(path) if path is not None else "-"]
    r = run_cli(args, input=text)
    return r.exit_code, json.loads(r.stdout)


@pytest.mark.parametrize("case", EXPECTED, ids=lambda c: c["file"])
def test_story(case: dict) -> None:
    code, report = scan_json(STORIES / case["file"])
    assert report["status"] == case["status"], report["root_cause"]
    assert code == (1 if case["status"] == "failed" else 0)
    rc = report["root_cause"]
    if case["status"] == "failed":
        if "category" in case:
            assert rc["category"] == case["category"], rc["explanation"]
        if "root_line" in case:
            assert any(case["root_line"] in t for t in [rc["message"]] + [e["text"] for e in rc["evidence"]])
        for key in ("rank", "stage", "step"):
            if key in case:
                assert rc[key] == case[key], (key, rc[key])
    else:
        assert rc is None
    if "completed" in case:
        assert report["progress"]["completed"] is case["completed"]
    if "note" in case:
        assert any(n.startswith(case["note"]) for n in report["notes"]), report["notes"]
    for want in case.get("set_aside", []):
        rows = [s for s in report["symptoms"] if s["title"].startswith(want["title"])]
        assert rows, [s["title"] for s in report["symptoms"]]
        assert all(r["set_aside_kind"] in want["kind"] and r["set_aside"] for r in rows), rows


def test_survived_errors_are_counted_with_their_steps() -> None:
    """An error the run survived is one symptom row: how often, the steps it came in, and why it is no
    failure (not a note per occurrence)."""
    _, report = scan_json(STORIES / "torchrun-survives-sample-errors.log")
    (row,) = [s for s in report["symptoms"] if s["title"].startswith("ValueError")]
    assert row["count"] == 8 and row["id"] == "unknown"
    # (the first came before the first step line: no step is shown for it)
    assert (row["first_step"], row["last_step"]) == (None, 8)
    assert not any("was not taken as the cause" in n for n in report["notes"])


def test_the_stop_note_names_the_signal_the_line_and_the_step() -> None:
    _, report = scan_json(STORIES / "torchrun-sigterm-mid-run.log")
    (note,) = [n for n in report["notes"] if n.startswith("stopped from outside")]
    step = report["progress"]["last_step"]
    assert f"at step {step} in training" in note and "torchrun-sigterm-mid-run.log:" in note
    assert report["progress"]["note"] is None  # (not also "still running, or stopped from outside")


def test_a_server_that_stopped_says_what_it_served_not_a_training_step() -> None:
    _, report = scan_json(STORIES / "vllm-server-rejects-requests.log")
    note = report["progress"]["note"]
    assert note.startswith("a job with no training loop that answered ") and "training step" not in note


def test_a_failure_before_the_stop_is_still_the_failure() -> None:
    """The stop is how the job ended; a failure before it is why."""
    crash = (STORIES / "torchrun-sample-errors-then-crash.log").read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(crash) if "closing signal SIGTERM" in line)
    stop = (STORIES / "torchrun-sigterm-mid-run.log").read_text().splitlines(keepends=True)
    death = next(i for i, line in enumerate(stop) if "death signal" in line)
    code, report = scan_json(text="".join(crash[:cut] + stop[death:]))
    assert (code, report["root_cause"]["category"]) == (1, "unknown")
    assert "IndexError" in report["root_cause"]["message"]


def test_a_catalogued_error_that_recurs_all_run_long_never_beats_the_exception_that_ended_it() -> None:
    """Every step, a reward client logs the requests library's refused connection (a catalog cause of
    a higher band than an exception no entry names); at step 6 rank 2 dies of an IndexError. What
    recurred while the job went on is set aside; what ended the run is the root cause."""
    refused = (
        "[default0]:2026-12-05 03:14:15,510 WARNING toy_train.reward: reward server down: "
        "requests.exceptions.ConnectionError: HTTPConnectionPool(host='127.0.0.1', port=8000): Max retries "
        "exceeded with url: /get_reward (Caused by NewConnectionError('<urllib3.connection.HTTPConnection "
        "object at 0x7f2b>: Failed to establish a new connection: [Errno 111] Connection refused'))\n"
    )
    lines = []
    for line in (STORIES / "torchrun-sample-errors-then-crash.log").read_text().splitlines(keepends=True):
        lines.append(line)
        if "scored locally" in line:
            lines.append(refused)
    code, report = scan_json(text="".join(lines))
    rc = report["root_cause"]
    assert code == 1 and "IndexError" in rc["message"], rc["message"]
    (row,) = [s for s in report["symptoms"] if s["id"] == "server-connection-refused"]
    assert row["set_aside_kind"] == "recurring" and row["count"] >= 5


def test_a_failure_after_completion_that_is_the_runs_own_work_is_a_failure() -> None:
    """Teardown after completion is echo; the final save failing there is not."""
    _, report = scan_json(STORIES / "torchrun-final-save-fails.log")
    assert report["progress"]["completed"] is True
    assert report["root_cause"]["stage"] == "checkpoint"


def test_the_abort_stacks_are_a_crash_never_a_stall() -> None:
    """`Fatal Python error: Aborted` and the stacks faulthandler prints with it are a crash's: with the
    launcher's report cut away, the log is still no stall."""
    lines = (STORIES / "torchrun-abort-faulthandler.log").read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "Extension modules:" in line)
    _, report = scan_json(text="".join(lines[:cut]))
    assert report["status"] != "stalled"
    assert report.get("stall") is None


HEALTHY = [c["file"] for c in EXPECTED if c["status"] == "healthy"]


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_runs_cut_at_random_lines_stay_healthy(name: str) -> None:
    """A healthy run read before its end (the job still running, a log copied mid-run) is healthy at
    every cut."""
    lines = (STORIES / name).read_text().splitlines(keepends=True)
    rnd = random.Random(name)
    for cut in sorted(rnd.sample(range(1, len(lines)), min(12, len(lines) - 1))):
        code, report = scan_json(text="".join(lines[:cut]))
        assert (report["status"], code) == ("healthy", 0), (cut, report["root_cause"])


@pytest.mark.parametrize(
    ("function", "file"),
    [
        ("capture_model", "/opt/venv/lib/python3.10/site-packages/vllm/v1/worker/gpu_model_runner.py"),
        ("load_model", "/opt/venv/lib/python3.10/site-packages/vllm/v1/worker/gpu_model_runner.py"),
        (
            "init_cuda_graphs",
            "/opt/venv/lib/python3.10/site-packages/sglang/srt/model_executor/model_runner.py",
        ),
        (
            "capture_one_batch_size",
            "/opt/venv/lib/python3.10/site-packages/sglang/srt/model_executor/cuda_graph_runner.py",
        ),
    ],
)
def test_a_rollout_engine_failing_while_it_starts_is_model_load(function: str, file: str) -> None:
    """Engine init, KV-cache profiling and CUDA-graph capture come before any request: model-load
    (TAXONOMY), not the rollout that any other vLLM or SGLang frame means."""
    from logparse.decide.stage import stage_of_frames

    frames = [("/workspace/job/serve.py", "main", None), (file, function, None), (file, "_dummy_run", None)]
    assert stage_of_frames(frames) == "model-load"
    assert (
        stage_of_frames([("/workspace/job/serve.py", "main", None), (file, "execute_model", None)])
        == "rollout"
    )
