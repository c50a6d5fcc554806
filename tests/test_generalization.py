"""Failures the catalog has never seen are still named from their evidence (patterns/fallback.yaml),
a log whose process died of an error is never healthy, and healthy runs full of error-looking bait
stay healthy. End to end through the CLI; the logs follow the real formats of
../shared/reference/verl-log-formats.md (hand-written here, not copied from any log)."""

from __future__ import annotations

import json
import random

import pytest
import yaml

from tests.conftest import FIXTURES, SAMPLES, run_cli

D = "\x1b[36m(TaskRunner pid=3165)\x1b[0m "
W = "\x1b[36m(WorkerDict pid=3588, ip=10.0.0.2)\x1b[0m "


def scan(text: str, *args: str) -> tuple[dict, int]:
    result = run_cli(["scan", "--format", "json", *args], input=text.encode())
    return json.loads(result.stdout), result.exit_code


# -- bare failure lines ------------------------------------------------------------------------------

TORCHRUN_HEAD = (
    "W1003 18:05:01.120000 4100 torch/distributed/run.py:874] *****************************************\n"
    "[rank0]: step:1 - loss:2.104 - grad_norm:1.93\n"
)


def test_an_error_line_without_a_traceback_is_a_failure() -> None:
    report, code = scan(
        TORCHRUN_HEAD + "[rank1]: AssertionError: ppo_mini_batch_size (6) must be divisible by "
        "the number of GPUs (4)\n"
    )
    assert code == 1 and report["status"] == "failed"
    rc = report["root_cause"]
    assert rc["category"] == "config-error" and rc["id"] == "unknown"
    assert rc["basis"] == {"kind": "phrase", "rule": "phrase-divisibility", "detail": rc["basis"]["detail"]}
    assert rc["rank"] == 1
    assert any("phrase-divisibility" in line for line in rc["explanation"])
    assert rc["remediation"]["fix"] and "batch" in " ".join(rc["remediation"]["fix"])


def test_an_error_line_that_training_outlived_is_not_the_verdict() -> None:
    text = (
        TORCHRUN_HEAD
        + "[rank1]: ValueError: sample 17 skipped: empty answer\n"
        + "".join(f"[rank0]: step:{i} - loss:2.0 - grad_norm:1.0\n" for i in range(2, 6))
    )
    report, code = scan(text)
    assert (report["status"], code) == ("healthy", 0)


def test_a_failure_phrase_line_alone_is_a_failure() -> None:
    report, code = scan(
        "bash: line 1:  4127 Segmentation fault      (core dumped) python3 -m verl.trainer.main_ppo\n"
    )
    assert code == 1 and report["root_cause"]["category"] == "segfault"


def test_a_traceback_cut_before_its_exception_is_a_failure() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/bin/torchrun", line 8, in <module>\n'
        "    sys.exit(main())\n"
        '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/elastic/agent/server/api.py", '
        "line 528, in _rendezvous\n"
        "    rdzv_info = spec.rdzv_handler.next_rendezvous()\n"
    )
    report, code = scan(text)
    assert code == 1
    rc = report["root_cause"]
    assert rc["category"] == "rendezvous-failure"
    assert rc["basis"] == {"kind": "frame", "rule": "frame-rendezvous", "detail": rc["basis"]["detail"]}
    assert "its exception line is missing" in rc["title"]


def test_hydras_epilogue_carries_the_message_before_it() -> None:
    text = (
        "Could not override 'actor_rollout_ref.rollout.temprature'.\n"
        "To append to your config use +actor_rollout_ref.rollout.temprature=0.7\n"
        "Key 'temprature' is not in struct\n"
        "    full_key: actor_rollout_ref.rollout.temprature\n"
        "    object_type=dict\n"
        "\n"
        "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
    )
    report, code = scan(
        text, "--disable", "hydra-override-key-missing", "--disable", "omegaconf-key-not-in-struct"
    )
    assert code == 1 and report["root_cause"]["category"] == "config-error"


# -- exceptions no entry names --------------------------------------------------------------------------

RAY_REWARD = (
    D + "step:3 - actor/pg_loss:np.float64(0.01) - timing_s/step:56.9\n"
    "Traceback (most recent call last):\n"
    '  File "/workspace/job/main_ppo.py", line 64, in main\n'
    "    run_ppo(config)\n"
    '  File "/opt/venv/lib/python3.10/site-packages/ray/_private/worker.py", line 2771, in get\n'
    "    raise value.as_instanceof_cause()\n"
    "ray.exceptions.RayTaskError(KeyError): ray::TaskRunner.run() (pid=3165, ip=10.0.0.1, "
    "actor_id=4ad3a1f9d2e54c0f8f6b0e3a01000000, repr=<main_ppo.TaskRunner object at 0x7f2c9c1e6a10>)\n"
    '  File "/workspace/job/main_ppo.py", line 190, in run\n'
    "    trainer.fit()\n"
    '  File "/opt/venv/lib/python3.10/site-packages/verl/trainer/ppo/ray_trainer.py", line 1010, in fit\n'
    "    reward_tensor = self.reward_fn(batch)\n"
    '  File "/workspace/job/rewards/geometry.py", line 41, in compute_score\n'
    '    answer = parsed["boxed"]\n'
    "KeyError: 'boxed'\n"
)


def test_a_wrapped_exception_is_named_by_its_frames() -> None:
    report, code = scan(RAY_REWARD, "--disable", "exception-in-reward-function")
    rc = report["root_cause"]
    assert code == 1
    assert rc["category"] == "reward-error"
    assert rc["basis"]["kind"] == "frame" and rc["basis"]["rule"].startswith("frame-reward")
    assert rc["stage"] == "reward" and rc["stage_source"] == "frames"


def test_disable_names_an_unknown_id() -> None:
    result = run_cli(["scan", "--disable", "cuda-om", "-"], input=b"x\n")
    assert result.exit_code == 2
    assert "--disable cuda-om" in result.output and "did you mean 'cuda-oom'" in result.output


def test_disable_is_repeatable_and_removes_the_entries() -> None:
    text = (SAMPLES / "ray-actor-exception.log").read_text()
    full, _ = scan(text)
    assert full["root_cause"]["id"] == "cuda-oom"
    without, code = scan(text, "--disable", "cuda-oom", "--disable", "ray-task-error")
    assert code == 1
    assert all(f["id"] not in ("cuda-oom", "ray-task-error") for f in without["findings"])
    assert without["root_cause"]["category"] == "cuda-oom"  # from the exception's type
    assert without["root_cause"]["basis"]["kind"] in ("phrase", "type")


# -- stage and rank ----------------------------------------------------------------------------------


def test_stage_from_the_task_rays_memory_monitor_names() -> None:
    line = (
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory. Memory on the "
        "node (IP: 10.0.0.1, ID: 90ef31c2) where the task (task ID: a675b3e1, "
        "name=WorkerDict.actor_rollout_compute_log_prob, pid=91085, memory used=24.99GB) was running was "
        "32.62GB / 33.28GB (0.980175), which exceeds the memory usage threshold of 0.96.\n"
    )
    report, _code = scan(D + "step:3 - actor/pg_loss:0.01\n" + line)
    rc = report["root_cause"]
    assert rc["category"] == "host-oom"
    assert (rc["stage"], rc["stage_source"]) == ("old-log-prob", "memory-monitor")


def test_stage_from_the_category_before_the_first_step() -> None:
    report, _ = scan("ModuleNotFoundError: No module named 'flash_attn'\n", "--disable", "module-not-found")
    rc = report["root_cause"]
    assert (rc["category"], rc["stage"], rc["stage_source"]) == ("import-error", "import", "category")


def test_stage_from_the_actor_whose_work_is_all_in_one_stage() -> None:
    """verl's sandbox ExecutionWorker runs tool calls during multi-turn rollout: its failure is in
    rollout, also where the last marker only says the loop runs; not for an init failure before the loop."""
    x = "(ExecutionWorker pid=52231) "
    timeout = (
        x + "ERROR:2026-09-15 15:36:24,702:Case 0: API error occurred: API Call Failed: API Request Error: "
        "HTTPConnectionPool(host='10.0.0.9', port=8080): Read timed out. (read timeout=30)\n"
    )
    bar = D + "Training Progress:  16%|███▋      | 71/435 [1:10:40<6:31:06, 64.47s/it]\n"
    for text in (timeout, bar + timeout):
        rc = scan(text)[0]["root_cause"]
        assert (rc["category"], rc["stage"], rc["stage_source"], rc["actor"]) == (
            "timeout",
            "rollout",
            "actor",
            "ExecutionWorker",
        ), text
    rc = scan(x + "ModuleNotFoundError: No module named 'sandbox_fusion'\n", "--disable", "module-not-found")[
        0
    ]["root_cause"]
    assert (rc["stage"], rc["stage_source"]) == ("import", "category")
    rc = scan(
        D + "step:3 - actor/pg_loss:0.01\n" + W + "requests.exceptions.ReadTimeout: HTTPConnectionPool"
        "(host='10.0.0.9', port=8080): Read timed out. (read timeout=30)\n"
    )[0]["root_cause"]
    assert rc["stage_source"] != "actor"  # WorkerDict also loads models and syncs weights: no one stage


def test_stage_sources_of_the_samples_are_recorded() -> None:
    for path in sorted(SAMPLES.glob("*.log")):
        report, _ = scan(path.read_text())
        rc = report["root_cause"]
        if rc is not None and rc["stage"] is not None:
            assert rc["stage_source"] in (
                "ray-task",
                "frames",
                "message",
                "entry",
                "traceback",
                "memory-monitor",
                "collective",
                "actor",
                "progress",
                "marker",
                "category",
            ), path.name
            assert rc["basis"]["kind"] == "entry"


def test_the_launcher_names_the_rank_of_an_unprefixed_failure() -> None:
    report, code = scan((FIXTURES / "torchrun" / "unprefixed-rank-failure.log").read_text())
    rc = report["root_cause"]
    assert code == 1 and rc["category"] == "numerical-instability"
    assert (rc["rank"], rc["local_rank"]) == (2, 2)


def test_real_torchrun_failures_of_a_data_worker_and_of_a_launcher_flag() -> None:
    """Captured with torchrun (tests/fixtures/torchrun/README.md): no entry names either wording."""
    report, code = scan((FIXTURES / "torchrun" / "dataloader-worker-exit.log").read_text())
    rc = report["root_cause"]
    # the worker died fetching step 5's batch, after four steps: inside the training loop, not while the
    # data was loaded (issue 22, point 1)
    assert code == 1 and (rc["category"], rc["rank"], rc["stage"]) == ("data-error", 1, "training")
    assert rc["basis"]["rule"] == "phrase-dataloader-worker"  # (not a Ray worker that died: ray-error)
    # the phrase's own advice comes before the data-error category's
    fix = rc["remediation"]["fix"]
    assert fix[0].startswith("Rerun with the DataLoader in the main process") and "data.train_files" in fix[2]
    report, code = scan((FIXTURES / "torchrun" / "bad-master-port.log").read_text())
    rc = report["root_cause"]
    assert code == 1 and (rc["category"], rc["stage"], rc["basis"]["rule"]) == (
        "rendezvous-failure",
        "launch",
        "phrase-rendezvous",
    )


# verl 0.5.0 from PyPI, run for real (tests/fixtures/verl/README.md): what each report must say
REAL_VERL_RUNS = {
    "hydra-unknown-key.log": {
        "category": "config-error",
        "id": "hydra-override-key-missing",
        "stage": "config",
    },
    # (an ImportError by its type: import-error; two packages that do not go together)
    "numpy-pyarrow-conflict.log": {
        "category": "version-mismatch",
        "message": "ImportError: pyarrow requires NumPy 2.0 or newer, found 1.26.4",
    },
    "model-path-missing.log": {
        "category": "model-load-error",
        "stage": "model-load",
        "actor": "TaskRunner",
        "pid": 24460,
    },
    "data-file-missing.log": {
        "category": "data-error",
        "id": "dataset-file-not-found",
        "stage": "data-load",
        "actor": "TaskRunner",
    },
    "wrong-prompt-key.log": {"category": "data-error", "stage": "data-load", "message": "KeyError: 'prompt'"},
    # the config check ran inside RayPPOTrainer.__init__: config (a frame rule), not model-load (its __init__)
    "micro-batch-unset.log": {"category": "config-error", "stage": "config", "stage_source": "frames"},
    "no-gpus.log": {"category": "ray-error", "id": "ray-insufficient-gpus", "stage": "distributed-init"},
    "worker-sees-no-gpu.log": {
        "category": "cuda-error",
        "id": "cuda-no-device",
        "stage": "distributed-init",
        "actor": "WorkerDict",
        "pid": 1417,
    },
}


@pytest.mark.parametrize("name", sorted(REAL_VERL_RUNS))
def test_real_verl_runs(name: str) -> None:
    report, code = scan((FIXTURES / "verl" / name).read_text())
    rc = report["root_cause"]
    want = REAL_VERL_RUNS[name]
    assert code == 1 and {k: rc[k] for k in want} == want
    if name == "model-path-missing.log":
        assert "model-not-here" in rc["message"]


def test_every_real_verl_fixture_has_its_verdict() -> None:
    assert sorted(p.name for p in (FIXTURES / "verl").glob("*.log")) == sorted(REAL_VERL_RUNS)


# Real Hydra runs (tests/fixtures/hydra, samples/scripts/capture.sh ONLY=hydra): the verdict with the
# full catalog, and without the catalog's Hydra entries, where the epilogue's marker finds the error's
# text before it (a config error Hydra printed bare) and a traceback before it stays the failure.
HYDRA_ENTRIES = (
    "hydra-config-not-found",
    "hydra-override-parse-error",
    "hydra-override-key-missing",
    "hydra-error-executing-job",
)
REAL_HYDRA_RUNS = {
    "config-group-option-missing.log": (
        {"id": "hydra-config-not-found"},
        {"message": "In 'ppo_trainer': Could not find 'rollout/vllm_v2'"},
    ),
    "primary-config-missing.log": (
        {"id": "hydra-config-not-found"},
        {
            "message": "Cannot find primary config 'ppo_trainer_v2'. Check that it's in "
            "your config search path."
        },
    ),
    "override-parse-error.log": (
        {"id": "hydra-override-parse-error"},
        {"message": "Error parsing override 'data.max_prompt_length=1,2]'"},
    ),
    "app-raises.log": (
        {"id": "unknown", "message": "ValueError: data.train_batch_size (7) must be divisible by 2"},
        {
            "message": "ValueError: data.train_batch_size (7) must be divisible by 2",
            "basis": "phrase-divisibility",
        },
    ),
}


@pytest.mark.parametrize("name", sorted(REAL_HYDRA_RUNS))
def test_real_hydra_runs(name: str) -> None:
    text = (FIXTURES / "hydra" / name).read_text()
    full, without = REAL_HYDRA_RUNS[name]
    report, code = scan(text)
    rc = report["root_cause"]
    assert code == 1 and (rc["category"], rc["stage"]) == ("config-error", "config")
    assert {k: rc[k] for k in full} == full
    disabled = [a for e in HYDRA_ENTRIES for a in ("--disable", e)]
    report, code = scan(text, *disabled)
    rc = report["root_cause"]
    assert code == 1 and (rc["id"], rc["category"], rc["stage"]) == ("unknown", "config-error", "config")
    assert rc["message"] == without["message"]
    assert rc["basis"]["rule"] == without.get("basis", "marker-hydra-epilogue")
    # the failure line is the error's first line, with the rest of its text as evidence
    first = text.splitlines().index(without["message"]) + 1
    assert rc["error_line"]["line"] == first
    if rc["basis"]["kind"] == "marker":
        assert all(e["line"] >= first for e in rc["evidence"]) and len(rc["evidence"]) > 1


def test_every_real_hydra_fixture_has_its_verdict() -> None:
    assert sorted(p.name for p in (FIXTURES / "hydra").glob("*.log")) == sorted(REAL_HYDRA_RUNS)


def test_hydra_marker_takes_no_text_from_another_record() -> None:
    # a timestamped record just before the epilogue is no bare Hydra message: the marker stays the line
    text = (
        "2026-10-07 10:00:01,000 INFO worker.py:2038 -- Started a local Ray instance.\n\n"
        "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
    )
    report, code = scan(text)
    rc = report["root_cause"]
    assert code == 1 and rc["error_line"]["line"] == 3 and rc["basis"]["kind"] != "marker"


# -- healthy runs stay healthy -----------------------------------------------------------------------

BAIT = [
    W + "WARNING 05-22 14:41:15 [config.py:1402] errors in chat template are reported as warnings",
    D
    + "2026-10-07 10:00:01,000 ERROR http.py:40 -- reward server request failed (attempt 1 of 5), retrying in 2 s",
    D + "INFO: loaded dataset ErrorFreeMath-7k (12000 rows)",
    W
    + "/opt/venv/lib/python3.10/site-packages/torch/cuda/amp.py:12: FutureWarning: `torch.cuda.amp.autocast(args...)` "
    "is deprecated. Please use `torch.amp.autocast('cuda', args...)` instead.",
    D + "Error: transient glitch while logging to console, ignored",
    # verl's reward manager prints validation samples in four parts; model text is never evidence
    "\n".join(
        [
            D + "[prompt] What is 3 + 4? Explain any Error: you find.",
            D + "[response] The model answers: ValueError: it is not 7, it is 8",
            D + "[ground_truth] 7",
            D + "[score] 0.0",
        ]
    ),
    W + "[rank1]: 0 errors in 1024 samples",
]
HANDLED = [
    D + "Traceback (most recent call last):",
    D + '  File "/workspace/job/rewards/judge.py", line 30, in score',
    D + "    return float(reply)",
    D + "ValueError: could not convert string to float: 'seven'",
]


def healthy_bait_run(steps: int, seed: int = 5) -> str:
    """A verl run of `steps` steps (a step line and a progress bar each, from random pids), with
    error-looking bait and a handled traceback every few hundred steps, ending in the final
    validation metrics (verl's completion marker)."""
    rnd = random.Random(seed)
    out = [
        "2026-10-07 09:59:01,000\tINFO worker.py:2038 -- Started a local Ray instance.",
        D + "TaskRunner hostname: node-1, PID: 3165",
        D + "[validate_config] All configuration checks passed successfully!",
    ]
    for step in range(1, steps + 1):
        pid = rnd.randrange(3000, 9000)
        out.append(
            f"\x1b[36m(TaskRunner pid={pid})\x1b[0m step:{step} - actor/pg_loss:np.float64({rnd.random():.4f}) - "
            f"actor/grad_norm:{rnd.random() * 3:.3f} - critic/values/mean:nan - val/ErrorRate:0.1 - "
            f"timing_s/step:{50 + rnd.random():.2f}"
        )
        pct = 100 * step // steps
        out.append(f"Training Progress: {pct:3d}%|          | {step}/{steps} [01:00<01:00, 56.00s/it]")
        if step % 97 == 0:
            out.append(rnd.choice(BAIT))
        if step % 991 == 0:
            out.extend(HANDLED)
    out.append(D + "Final validation metrics: {'val-core/openai/gsm8k/reward/mean@1': 0.7}")
    out.append(W + "ERROR 10-07 11:00:00 [core.py:400] EngineCore shutting down after the run")
    return "\n".join(out) + "\n"


@pytest.mark.slow
def test_a_long_healthy_run_with_bait_stays_healthy() -> None:
    report, code = scan(healthy_bait_run(5000))
    assert (report["status"], code) == ("healthy", 0), report["root_cause"]
    assert report["progress"]["last_step"] == 5000 and report["progress"]["completed"]


@pytest.mark.parametrize(
    "path",
    sorted((FIXTURES / "benign").glob("*.log"))
    + [SAMPLES / "ray-healthy.log", SAMPLES / "torchrun-healthy.log"],
    ids=lambda p: p.name,
)
def test_benign_fixtures_stay_healthy(path) -> None:
    report, code = scan(path.read_text(encoding="utf-8", errors="replace"))
    assert (report["status"], code) == ("healthy", 0), report["root_cause"]


# -- leave one entry out: samples and fixtures keep their verdict ------------------------------------

# known misses (as semgrep's todo_match): the evidence left once the entry is gone does not name the
# category; they must still miss, so that a fix moves them out of this set
KNOWN_MISSES: dict[
    str, str
] = {}  # (shm-nccl.log left it when NCCL's `/dev/shm` failure wording got a fallback phrase)


def loeo_cases() -> list[tuple[str, str, object]]:
    out = []
    for folder in (SAMPLES, FIXTURES / "cascades"):
        for e in yaml.safe_load((folder / "expected.yaml").read_text()):
            if e.get("category"):
                out.append((e["file"], e["category"], folder / e["file"]))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name, category, path", loeo_cases(), ids=[c[0] for c in loeo_cases()])
def test_verdict_without_the_entries_that_name_it(name: str, category: str, path) -> None:
    text = path.read_text()
    full, _ = scan(text)
    disabled = {f["id"] for f in full["findings"] if f["category"] == category}
    if full["root_cause"]["id"] != "unknown":
        disabled.add(full["root_cause"]["id"])
    args = [a for d in sorted(disabled) for a in ("--disable", d)]
    report, code = scan(text, *args)
    assert code == 1 and report["status"] == "failed"
    if name in KNOWN_MISSES:
        assert report["root_cause"]["category"] != category, "now kept: remove it from KNOWN_MISSES"
    else:
        assert report["root_cause"]["category"] == category
