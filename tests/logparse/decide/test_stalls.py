"""A job that stops making progress: `status: stalled` (exit 3) when its own log says so, and never for
a healthy run cut short. The real captures are tests/fixtures/stalls/ (samples/scripts/capture.sh,
ONLY=stall); their pids and times differ per capture, so the tests name ranks, frames and kinds."""

from __future__ import annotations

import json
import random
from pathlib import Path

import jsonschema
import pytest

from logparse.process import EXIT_STALLED
from patterns.stalls import load_stall_rules, stall_rules
from patterns.validation import CatalogError
from tests.conftest import FIXTURES, ROOT, SAMPLES, run_cli

STALLS = FIXTURES / "stalls"
SCHEMA = json.loads((ROOT / "reports" / "schema.json").read_text())


def scan_json(*paths: Path | str, input: bytes | None = None) -> tuple[dict, int]:
    result = run_cli(["scan", "--format", "json", *map(str, paths)], input=input)
    report = json.loads(result.stdout)
    jsonschema.validate(report, SCHEMA)
    return report, result.exit_code


def odd_group(report: dict) -> dict:
    return next(g for g in report["stall"]["waits"] if g["odd"])


def test_a_rank_blocked_before_all_reduce_is_the_odd_one_out_of_a_stall_ended_by_ctrl_c() -> None:
    report, code = scan_json(STALLS / "torchrun-hang-faulthandler-ctrl-c.log")
    assert (report["status"], code) == ("stalled", EXIT_STALLED)
    assert report["root_cause"] is None
    stall = report["stall"]
    odd = odd_group(report)
    assert odd["streams"] == ["rank 3"] and odd["kind"] == "data"
    assert "__getitem__" in odd["waiting_in"]
    others = [g for g in stall["waits"] if not g["odd"]]
    assert [g["streams"] for g in others] == [["rank 0", "rank 1", "rank 2"]]
    assert others[0]["kind"] == "collective" and others[0]["waiting_in"].startswith("all_reduce ")
    assert stall["odd_one_out"].startswith("rank 3 in __getitem__")
    assert stall["cause"]["id"] == "collective-one-rank-elsewhere"
    assert any("TORCH_NCCL_TRACE_BUFFER_SIZE" in f for f in stall["cause"]["fix"])
    # the Ctrl-C is how it ended: noted, and no failure of the signal
    assert "Received 2 death signal" in stall["interrupted"]["text"]
    assert any("interrupted after it stalled" in n for n in report["notes"])
    assert "faulthandler" in stall["reasons"][0]
    assert stall["step"] == 3 and stall["stage"] == "training"
    assert stall["step_time_s"] == pytest.approx(1.0, abs=0.3)


def test_py_spy_dumps_in_the_job_folder_name_the_process_that_sleeps_while_the_others_wait() -> None:
    report, code = scan_json(STALLS / "torchrun-hang-py-spy")
    assert (report["status"], code) == ("stalled", EXIT_STALLED)
    odd = odd_group(report)
    assert len(odd["streams"]) == 1 and odd["streams"][0].startswith("pid ")
    assert "wait_for_shard_lock" in odd["waiting_in"] and odd["source"] == "py-spy"
    others = [g for g in report["stall"]["waits"] if not g["odd"]]
    assert len(others) == 1 and len(others[0]["streams"]) == 3 and others[0]["kind"] == "collective"
    assert report["stall"]["cause"]["id"] == "collective-one-rank-elsewhere"


def test_a_driver_waiting_for_a_placement_group_fails_of_the_resources_it_waits_for() -> None:
    """A wait for resources no node has is ray-error (TAXONOMY), whether the job hung, was killed or
    timed out: the Ctrl-C that ended this one is its echo. The stacks that show the wait are the
    evidence."""
    report, code = scan_json(STALLS / "ray-placement-group-wait")
    assert (report["status"], code) == ("failed", 1)
    rc = report["root_cause"]
    assert (rc["category"], rc["id"], rc["stage"]) == (
        "ray-error",
        "resources-placement-group",
        "distributed-init",
    )
    assert rc["basis"]["kind"] == "stall" and rc["stage_source"] == "stall"
    assert rc["message"].startswith("TaskRunner pid=") and "(placement-group)" in rc["message"]
    assert rc["evidence"][0]["text"].startswith("Process ")  # (the py-spy dump's first line)
    assert "stall" not in report


def test_a_rollout_worker_that_never_returns_is_the_odd_one_out_of_a_ray_job() -> None:
    report, code = scan_json(STALLS / "ray-rollout-hang.log")
    assert (report["status"], code) == ("stalled", EXIT_STALLED)
    odd = odd_group(report)
    assert odd["streams"][0].startswith("WorkerDict pid=") and odd["kind"] == "rollout"
    assert report["stall"]["cause"]["id"] == "rollout-engine-stalled"
    assert report["stall"]["step"] == 2


def _healthy_logs() -> list[Path]:
    return [SAMPLES / "torchrun-healthy.log", SAMPLES / "ray-healthy.log"]


@pytest.mark.slow  # many scans of each cut: about 2 s a log
@pytest.mark.parametrize("log", _healthy_logs(), ids=lambda p: p.name)
def test_a_healthy_run_cut_off_at_a_random_line_is_never_stalled(log: Path) -> None:
    lines = log.read_bytes().splitlines(keepends=True)
    rng = random.Random(23)
    for cut in sorted(rng.sample(range(1, len(lines)), min(12, len(lines) - 1))):
        report, code = scan_json(input=b"".join(lines[:cut]))
        assert report["status"] in ("healthy", "failed"), cut
        assert "stall" not in report and code != EXIT_STALLED, cut


def _timed_steps(steps: int, every_s: float, end_after_s: float) -> bytes:
    """A run's own step lines (the capture toy's `--log-time` format) and one line `end_after_s` after
    the last step."""
    t0 = 1_790_000_000
    out = []
    for i in range(1, steps + 1):
        out.append(f"{_stamp(t0 + i * every_s)} INFO step:{i} - loss:{1.0 / i:.4f} - lr:0.05")
    out.append(f"{_stamp(t0 + steps * every_s + end_after_s)} INFO saving nothing yet")
    return ("\n".join(out) + "\n").encode()


def _stamp(t: float) -> str:
    import datetime

    when = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    return when.strftime("%Y-%m-%d %H:%M:%S,") + f"{int(when.microsecond / 1000):03d}"


def test_a_run_whose_last_step_was_moments_ago_is_not_stalled() -> None:
    report, code = scan_json(input=_timed_steps(12, 50, 30))
    assert report["status"] == "healthy" and code == 0


def test_silence_far_beyond_the_runs_own_step_time_is_a_stall_with_its_length() -> None:
    report, code = scan_json(input=_timed_steps(12, 50, 42 * 60))
    assert (report["status"], code) == ("stalled", EXIT_STALLED)
    stall = report["stall"]
    assert stall["duration"] == "no step for 42 min after step 12; steps took 50 s (median)"
    assert stall["silence_s"] == pytest.approx(42 * 60, abs=1)
    assert stall["cause"]["id"] == "stalled-unknown"


def test_silence_shorter_than_the_floor_is_not_a_stall_even_for_fast_steps() -> None:
    report, _ = scan_json(input=_timed_steps(12, 1, 120))
    assert report["status"] == "healthy"


def test_a_log_that_stops_cleanly_with_no_sign_of_a_hang_stays_healthy_with_todays_note() -> None:
    lines = (STALLS / "torchrun-hang-py-spy" / "train.log").read_bytes().splitlines(keepends=True)
    last_step = max(i for i, line in enumerate(lines) if b"step:" in line)
    report, code = scan_json(input=b"".join(lines[: last_step + 1]))
    assert (report["status"], code) == ("healthy", 0)
    assert "no error and no completion marker" in report["progress"]["note"]


def test_an_interruption_with_no_stall_evidence_before_it_is_not_called_a_stall() -> None:
    """Without the stacks, nothing says the job hung: it was stopped from outside (Ctrl-C) with no
    failure before it, which is healthy and not completed (TAXONOMY), never a stall."""
    text = (STALLS / "torchrun-hang-faulthandler-ctrl-c.log").read_text()
    kept = [line for line in text.splitlines(keepends=True) if "Timeout (" not in line]
    kept = [line for line in kept if "(most recent call first):" not in line]
    kept = [line for line in kept if not (line.startswith("[default") and ']:  File "' in line)]
    report, code = scan_json(input="".join(kept).encode())
    assert (report["status"], code, report["root_cause"]) == ("healthy", 0, None)
    assert report["progress"]["completed"] is False
    assert any(n.startswith("stopped from outside by SIGINT") for n in report["notes"])


def test_every_report_format_shows_the_stall(tmp_path: Path) -> None:
    log = STALLS / "torchrun-hang-faulthandler-ctrl-c.log"
    md = run_cli(["scan", "--format", "md", str(log)]).stdout
    assert "## verl-logscan: job stalled" in md and "**odd one out:** rank 3" in md
    html = run_cli(["scan", "--format", "html", str(log)]).stdout
    assert "STALLED" in html and "odd one out" in html
    text = run_cli(["scan", str(log)]).stdout
    assert text.startswith("STALLED") and "odd one  rank 3 in __getitem__" in text


def test_the_stall_rules_refuse_a_wording_that_misses_its_own_example() -> None:
    text = (ROOT / "patterns" / "stalls.yaml").read_text()
    broken = text.replace("'Timeout (0:00:12)!'", "'Timeout 0:00:12'", 1)
    with pytest.raises(CatalogError, match="misses its example"):
        load_stall_rules(broken)
    assert stall_rules().causes[-1].when == ()


def test_fleet_exits_3_when_a_job_stalled_and_none_failed() -> None:
    stalled = STALLS / "torchrun-hang-faulthandler-ctrl-c.log"
    result = run_cli(["fleet", "--format", "json", str(stalled), str(SAMPLES / "torchrun-healthy.log")])
    assert result.exit_code == EXIT_STALLED
    statuses = [job["status"] for job in json.loads(result.stdout)["jobs"]]
    assert statuses == ["stalled", "healthy"]
    # a failed job outranks a stalled one: the fleet found a failure
    failed = run_cli(["fleet", "--format", "json", str(stalled), str(SAMPLES / "torchrun-sigkill.log")])
    assert failed.exit_code == 1


# -- hang signs written as their programs print them (patterns/stalls.yaml `signs`) ---------------------
# a verl PPO driver's step lines (reference §3.4), then the sign, then nothing
def _verl_steps(first: int, last: int) -> str:
    return "".join(
        f"(TaskRunner pid=5102) step:{i} - actor/pg_loss:np.float64(0.011) - critic/score/mean:0.51 - "
        f"response_length/mean:210.1 - timing_s/step:61.2\n"
        for i in range(first, last + 1)
    )


RAY_AUTOSCALER_WAIT = (
    "(autoscaler +{m}m40s) Warning: The following resource request cannot be scheduled right now: "
    "{{'CPU': 1.0, 'GPU': 1.0}}. This is likely due to all cluster resources being claimed by actors. "
    "Consider creating fewer actors or adding more nodes to this Ray cluster.\n"
)
RAY_LEASE_WAIT = (  # Ray 2.60 raylet (reference §4.5)
    "(raylet) The lease with ID 2c4f1a0b9e8d7c{m:02d} cannot be scheduled right now. You can ignore this "
    "message if this Ray cluster is expected to auto-scale or if you specified a runtime_env for this actor "
    "or lease, which may take time to install.  Otherwise, this is likely due to all cluster resources being "
    "claimed by actors. To resolve the issue, consider creating fewer actors or increasing the resources "
    "available to this Ray cluster.\n"
)
START = "(TaskRunner pid=5102) Training from scratch\n"


def _signs(wording: str, minutes: range) -> str:
    return "".join(wording.format(m=m) for m in minutes)


@pytest.mark.parametrize("wording", [RAY_AUTOSCALER_WAIT, RAY_LEASE_WAIT], ids=["autoscaler", "raylet"])
def test_ray_keeping_a_resource_request_pending_after_training_began_fails_for_resources(
    wording: str,
) -> None:
    report, code = scan_json(input=(START + _verl_steps(1, 3) + _signs(wording, range(10, 14))).encode())
    # a wait for resources no node has is the failure (ray-error, TAXONOMY), named by the catalog's entry
    # for the wait's own line
    assert (report["status"], code) == ("failed", 1)
    assert report["root_cause"]["id"] == "ray-resources-unschedulable"
    assert report["root_cause"]["category"] == "ray-error"
    assert "stall" not in report


@pytest.mark.parametrize("wording", [RAY_AUTOSCALER_WAIT, RAY_LEASE_WAIT], ids=["autoscaler", "raylet"])
def test_a_ray_resource_wait_that_training_got_past_stays_healthy(wording: str) -> None:
    log = START + _verl_steps(1, 3) + _signs(wording, range(10, 14)) + _verl_steps(4, 6)
    report, code = scan_json(input=log.encode())
    assert (report["status"], code) == ("healthy", 0)
    assert "stall" not in report


def test_one_ray_resource_warning_or_warnings_before_training_are_no_stall() -> None:
    once = START + _verl_steps(1, 3) + RAY_AUTOSCALER_WAIT.format(m=10)
    before = _signs(RAY_AUTOSCALER_WAIT, range(1, 4)) + START
    for log in (once, before):
        report, code = scan_json(input=log.encode())
        assert "stall" not in report and code != EXIT_STALLED
        # (what the catalog says of it is unchanged: Ray cannot schedule the request)
        assert report["root_cause"]["id"] == "ray-resources-unschedulable"


# verl v0.4.1 - v0.5.0 worker-group bring-up: every 30 s while the register center does not exist
REGISTER_WAIT = (
    "(TaskRunner pid=4021) WARNING:2025-04-30 21:{m:02d}:21,921:Waiting for register center actor "
    "AmgKHl_register_center to be ready. Elapsed time: {s} seconds out of 300 seconds.\n"
)
BRING_UP = (
    "(TaskRunner pid=4021) colocated worker base class <class 'verl.single_controller.base.worker.Worker'>\n"
)


def _register_waits(upto_s: int) -> str:
    return "".join(REGISTER_WAIT.format(m=s // 60, s=s) for s in range(0, upto_s + 1, 30))


def test_verl_waiting_minutes_for_its_workers_register_center_is_a_stall_before_training() -> None:
    report, code = scan_json(input=(BRING_UP + _register_waits(150)).encode())
    assert (report["status"], code) == ("stalled", EXIT_STALLED)
    stall = report["stall"]
    assert stall["cause"]["id"] == "worker-group-not-up"
    assert stall["step"] is None
    # the lines from 60 s on count (every start prints the 0 s one)
    assert any("register center" in r and "(4 times)" in r for r in stall["reasons"])
    assert any("ray_wait_register_center_timeout" in f for f in stall["cause"]["fix"])


def test_a_register_center_wait_that_only_began_or_ended_is_no_stall() -> None:
    began = BRING_UP + _register_waits(30)
    ended = (
        BRING_UP
        + _register_waits(150)
        + "(WorkerDict pid=4100) Model config after override: Qwen2Config {\n"
        + START
        + _verl_steps(1, 2)
    )
    for log in (began, ended):
        report, code = scan_json(input=log.encode())
        assert (report["status"], code) == ("healthy", 0)


def test_the_nccl_heartbeat_monitor_line_is_a_failure_the_catalog_names_not_a_hang_sign() -> None:
    # torch's heartbeat monitor ends the process after this line: the catalog's failure, never `healthy`
    line = (
        "(WorkerDict pid=3141) [rank0]:[E315 09:12:44.100200300 ProcessGroupNCCL.cpp:1425] [PG ID 0 PG GUID "
        "0(default_pg) Rank 0] ProcessGroupNCCL's watchdog got stuck for 600 seconds without making progress "
        "in monitoring enqueued collectives.\n"
    )
    report, _ = scan_json(input=(START + _verl_steps(1, 3) + line).encode())
    assert report["status"] == "failed"
    assert report["root_cause"]["id"] == "nccl-watchdog-heartbeat-stuck"
    assert all("watchdog got stuck" not in s.regex.pattern for s in stall_rules().signs)


def test_the_stall_rules_refuse_a_min_after_without_a_time_to_read() -> None:
    text = (ROOT / "patterns" / "stalls.yaml").read_text()
    broken = text.replace("Elapsed time: (?P<after>\\d+) seconds", "Elapsed time: \\d+ seconds", 1)
    assert broken != text
    with pytest.raises(CatalogError, match="min_after needs an `after` group"):
        load_stall_rules(broken)


VLLM_SHM_WAIT = (
    "(WorkerDict pid=4021) INFO 09-11 01:{m:02d}:59 [shm_broadcast.py:542] No available shared memory "
    "broadcast block found in 60 seconds. This typically happens when some processes are hanging or doing "
    "some time-consuming work (e.g. compilation, weight/kv cache quantization).\n"
)


def test_vllms_broadcast_wait_stalls_only_when_training_did_not_get_past_it() -> None:
    hung = START + _verl_steps(1, 3) + _signs(VLLM_SHM_WAIT, range(44, 47))
    report, code = scan_json(input=hung.encode())
    assert (report["status"], code) == ("stalled", EXIT_STALLED)
    assert report["stall"]["cause"]["id"] == "rollout-engine-broadcast-wait"
    report, code = scan_json(input=(hung + _verl_steps(4, 5)).encode())
    assert (report["status"], code) == ("healthy", 0)


def test_a_sign_seen_at_start_up_counts_only_its_lines_after_training_began() -> None:
    # the benign start-up warning (tests/fixtures/benign), then the same wait again at the end
    log = (
        RAY_AUTOSCALER_WAIT.format(m=1)
        + START
        + _verl_steps(1, 3)
        + _signs(RAY_AUTOSCALER_WAIT, range(10, 13))
    )
    report, code = scan_json(input=log.encode())
    # the wait at the end is the failure (ray-error), the start-up warning before training is not
    assert (report["status"], code) == ("failed", 1)
    assert report["root_cause"]["category"] == "ray-error"
    assert report["root_cause"]["error_line"]["line"] == 6  # (not the start-up one, line 1)
