"""Where and when a job failed: the stage from the failure's own evidence and the job's progress, the
rank in one place, Ray worker deaths as one verdict, and healthy runs said plainly (issue 22).

End to end through the CLI, on real captures (tests/fixtures/*/README.md says how each was made) or on
logs written here to a documented real format (each names its source: ../shared/reference/
verl-log-formats.md, or the framework's own file)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import FIXTURES, SAMPLES, run_cli


def scan_text(text: str) -> tuple[dict, int]:
    result = run_cli(["scan", "--format", "json"], input=text.encode())
    return json.loads(result.stdout), result.exit_code


def scan_file(path: Path) -> tuple[dict, int]:
    result = run_cli(["scan", "--format", "json", str(path)])
    return json.loads(result.stdout), result.exit_code


def root(text: str) -> dict:
    report, code = scan_text(text)
    assert code == 1, report["status"]
    return report["root_cause"]


# -- 1. the stage from evidence -------------------------------------------------------------------------

# torch's own frames of a backward pass (torch 2.13: torch/_tensor.py, torch/autograd/__init__.py)
BACKWARD = (
    "[rank0]: Traceback (most recent call last):\n"
    '[rank0]:   File "/workspace/job/train.py", line 88, in <module>\n'
    "[rank0]:     main()\n"
    '[rank0]:   File "/workspace/job/train.py", line 80, in main\n'
    "[rank0]:     loss.backward()\n"
    '[rank0]:   File "/opt/venv/lib/python3.11/site-packages/torch/_tensor.py", line 623, in backward\n'
    "[rank0]:     torch.autograd.backward(\n"
    '[rank0]:   File "/opt/venv/lib/python3.11/site-packages/torch/autograd/__init__.py", line 395, in backward\n'
    "[rank0]:     _engine_run_backward(\n"
    '[rank0]:   File "/opt/venv/lib/python3.11/site-packages/torch/autograd/graph.py", line 979, in _engine_run_backward\n'
    "[rank0]:     return Variable._execution_engine.run_backward(\n"
)


def test_an_assert_inside_a_backward_kernel_is_in_the_update_of_the_loop() -> None:
    rc = root(BACKWARD + "[rank0]: RuntimeError: CUDA error: device-side assert triggered\n")
    assert (rc["stage"], rc["stage_source"]) == ("training", "frames")


def test_a_backward_inside_the_actor_update_is_the_actor_update() -> None:
    # verl's dp_actor.update_policy (verl/workers/actor/dp_actor.py), reached through the update_actor task
    text = (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.11/site-packages/verl/workers/actor/dp_actor.py", line 402, in update_policy\n'
        "    loss.backward()\n"
        '  File "/opt/venv/lib/python3.11/site-packages/torch/_tensor.py", line 623, in backward\n'
        "    torch.autograd.backward(\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.11 GiB of which 1.02 GiB is free.\n"
    )
    assert root(text)["stage"] == "actor-update"


def test_an_oom_in_log_softmax_of_a_loss_function_is_in_the_update() -> None:
    text = (
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "/workspace/job/sft.py", line 140, in train_one_epoch\n'
        "[rank1]:     loss = compute_loss(model, batch)\n"
        '[rank1]:   File "/workspace/job/sft.py", line 61, in compute_loss\n'
        "[rank1]:     logp = torch.log_softmax(logits.float(), dim=-1)\n"
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.27 GiB. GPU 1 has a total "
        "capacity of 79.11 GiB of which 3.50 GiB is free.\n"
    )
    rc = root(text)
    assert (rc["category"], rc["stage"], rc["rank"]) == ("cuda-oom", "training", 1)


def test_vllm_length_check_at_generation_time_is_in_rollout() -> None:
    # vllm/v1/engine/processor.py _validate_model_input, as printed by a verl rollout server
    rc = root(
        "(vLLMHttpServer pid=4064, ip=10.0.0.2) ValueError: The decoder prompt (length 9000) is longer than "
        "the maximum model length of 8192. Make sure that `max_model_len` is no smaller than the number of "
        "text tokens.\n"
    )
    assert (rc["stage"], rc["stage_source"]) == ("rollout", "message")


def test_a_barrier_right_after_process_group_init_is_distributed_init() -> None:
    # torch/distributed/distributed_c10d.py: barrier(), wrapped by c10d_logger
    text = (
        "[rank3]: Traceback (most recent call last):\n"
        '[rank3]:   File "/workspace/job/train.py", line 40, in <module>\n'
        "[rank3]:     dist.barrier()\n"
        '[rank3]:   File "/opt/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 81, in wrapper\n'
        "[rank3]:     return func(*args, **kwargs)\n"
        '[rank3]:   File "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 4811, in barrier\n'
        "[rank3]:     work.wait()\n"
        "[rank3]: torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving "
        "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: wait "
        "timeout after 600000ms\n"
    )
    assert root(text)["stage"] == "distributed-init"


def test_an_import_error_while_a_model_is_built_is_model_load() -> None:
    # transformers' dynamic_module_utils.check_imports, under from_pretrained (a trust_remote_code model)
    text = (
        "Traceback (most recent call last):\n"
        '  File "/workspace/job/sft.py", line 30, in <module>\n'
        "    model = AutoModelForCausalLM.from_pretrained(args.model, trust_remote_code=True)\n"
        '  File "/opt/venv/lib/python3.11/site-packages/transformers/models/auto/auto_factory.py", line 553, in from_pretrained\n'
        "    model_class = get_class_from_dynamic_module(\n"
        '  File "/opt/venv/lib/python3.11/site-packages/transformers/dynamic_module_utils.py", line 184, in check_imports\n'
        "    raise ImportError(\n"
        "ImportError: This modeling file requires the following packages that were not found in your "
        "environment: flash_attn. Run `pip install flash_attn`\n"
    )
    rc = root(text)
    assert (rc["category"], rc["stage"]) == ("import-error", "model-load")


def test_a_dataloader_worker_that_dies_after_some_steps_is_in_training() -> None:
    report, _ = scan_file(FIXTURES / "torchrun" / "dataloader-worker-exit.log")
    assert report["root_cause"]["stage"] == "training"  # not data-load: four steps had run


MEGATRON_HEAD = (
    "> initializing torch distributed ...\n"
    "> initialized tensor model parallel with size 2\n"
    "building GPT model ...\n"
    "> building train, validation, and test datasets ...\n"
    "training ...\n"
    "[before the start of training step] datetime: 2024-05-14 10:21:41 \n"
)


def megatron_iteration(i: int, total: int = 500) -> str:
    # megatron/training/training.py training_log
    return (
        f" iteration {i:8d}/{total:8d} | consumed samples: {i * 64:12d} | elapsed time per iteration (ms): "
        "1523.4 | learning rate: 1.500E-05 | global batch size:    64 | lm loss: 7.943750E+00 | loss scale: "
        "1.0 | grad norm: 3.120 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
    )


def test_megatron_iterations_put_a_later_failure_in_training_with_its_step() -> None:
    text = MEGATRON_HEAD + megatron_iteration(10) + megatron_iteration(20)
    text += "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    report, code = scan_text(text)
    rc = report["root_cause"]
    assert code == 1 and (rc["stage"], rc["stage_source"], rc["step"]) == ("training", "progress", 21)
    assert (report["progress"]["last_step"], report["progress"]["total_steps"]) == (20, 500)


def test_a_failure_before_megatron_trains_is_in_its_init_stage() -> None:
    text = "> initializing torch distributed ...\nbuilding GPT model ...\n"
    text += "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert root(text)["stage"] == "model-load"


def test_trainer_log_dicts_and_epoch_lines_are_training_progress() -> None:
    # transformers' ProgressCallback.on_log writes str(logs); a plain script prints its epochs
    for progress in (
        "{'loss': 2.1034, 'grad_norm': 1.8427, 'learning_rate': 4.9e-05, 'epoch': 0.02}\n",
        "Epoch [1/10], Step [100/600], Loss: 0.2185\n",
        "[2024-06-01 10:03:11,410] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, "
        "lr=[1.9e-05], mom=[(0.9, 0.95)]\n",
    ):
        rc = root(progress + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n")
        # (cuda-oom's category stage, model-load, holds only before the loop)
        assert (rc["stage"], rc["stage_source"]) == ("training", "progress"), progress


# -- 2. the rank, in one place ----------------------------------------------------------------------------


def test_a_two_rank_gloo_timeout_names_the_rank_that_timed_out() -> None:
    report, _ = scan_file(FIXTURES / "torchrun" / "gloo-timeout-two-ranks.log")
    rc = report["root_cause"]
    assert (rc["category"], rc["rank"], rc["stage"]) == ("collective-timeout", 0, "training")


def test_several_ranks_timing_out_together_name_no_rank() -> None:
    report, _ = scan_file(SAMPLES / "torchrun-gloo-timeout.log")
    assert report["root_cause"]["rank"] is None  # ranks 0-2 all waited; the stalled rank 3 said nothing


def test_monitored_barrier_blames_the_rank_it_names() -> None:
    report, _ = scan_file(FIXTURES / "torchrun" / "monitored-barrier.log")
    rc = report["root_cause"]
    assert (rc["category"], rc["id"], rc["rank"]) == (
        "collective-timeout",
        "monitored-barrier-rank-failed",
        2,
    )
    symptoms = {s["id"] for s in report["symptoms"]}
    assert "monitored-barrier-peer-error" in symptoms  # rank 1 arrived; it only reports rank 0's failure


def test_the_deepspeed_launcher_names_the_local_rank_that_exited() -> None:
    # deepspeed/launcher/launch.py: each rank's command carries `--local_rank=N`; sigkill_handler logs it
    rc = root(
        "[2024-05-01 10:11:10,000] [INFO] [launch.py:256:main] process 4122 spawned with command: "
        "['/usr/bin/python3', '-u', 'train.py', '--local_rank=0', '--deepspeed', 'ds.json']\n"
        "[2024-05-01 10:11:12,345] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', '-u', "
        "'train.py', '--local_rank=3', '--deepspeed', 'ds.json'] exits with return code = -11\n"
    )
    assert (rc["category"], rc["local_rank"], rc["rank"]) == ("segfault", 3, None)  # which node: not shown


def test_the_deepspeed_launchers_node_placement_maps_the_local_rank_to_its_global_rank() -> None:
    # deepspeed/launcher/launch.py main(): `nnodes=N, num_local_procs=P, node_rank=R`
    rc = root(
        "[2024-05-01 10:11:08,000] [INFO] [launch.py:152:main] nnodes=2, num_local_procs=4, node_rank=1\n"
        "[2024-05-01 10:11:12,345] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', '-u', "
        "'train.py', '--local_rank=3', '--deepspeed', 'ds.json'] exits with return code = -11\n"
    )
    assert (rc["local_rank"], rc["rank"]) == (3, 7)


# -- 3. Ray worker deaths as one verdict ------------------------------------------------------------------


def test_a_killed_ray_worker_is_named_with_its_actor_method_node_and_likely_cause() -> None:
    """tests/fixtures/ray/README.md: WorkerDict rank 1 SIGKILLed inside actor_rollout_generate_sequences;
    the raylet, the driver's RayTaskError(ActorDiedError) and its ActorDiedError block each tell part."""
    report, code = scan_file(FIXTURES / "ray" / "ray-actor-sigkill.log")
    rc = report["root_cause"]
    assert code == 1 and (rc["id"], rc["category"]) == ("ray-worker-died", "ray-error")
    assert "A worker died or was killed" in rc["message"]  # the raylet's line, not the wrapper's
    assert (rc["actor"], rc["pid"], rc["rank"], rc["node"]) == ("WorkerDict", 13349, 1, "10.0.0.1")
    assert rc["stage"] == "rollout"
    assert rc["confidence"] >= 0.5  # that a worker died is certain; only why is not
    said = " ".join(rc["explanation"])
    assert "actor_rollout_generate_sequences" in said and "OOM killer" in said
    wrappers = {s["id"] for s in report["symptoms"]}
    assert {"ray-task-error", "ray-actor-died"} <= wrappers


def test_a_ray_session_folder_blames_the_reported_death_not_a_warning_about_a_lookup() -> None:
    report, _ = scan_file(FIXTURES / "ray" / "session_logs")
    rc = report["root_cause"]
    assert rc["id"] == "ray-worker-died" and "Reporting worker exit" in rc["message"]
    assert "Failed to look up actor" not in rc["message"]


def test_an_actor_killed_for_host_memory_is_host_oom_with_the_dead_actor() -> None:
    # ActorDiedError's system-failure form (reference §4.3) with Ray's NODE_OUT_OF_MEMORY exit type
    text = (
        "\x1b[36m(TaskRunner pid=3165)\x1b[0m step:3 - actor/pg_loss:0.01 - timing_s/step:50.0\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.11/site-packages/verl/trainer/ppo/ray_trainer.py", line 1190, in fit\n'
        "    old_log_prob = self.actor_rollout_wg.compute_log_prob(batch)\n"
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
        "\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict\n"
        "\tactor_id: 7a7e28706e933f93da5fe49701000000\n"
        "\tpid: 26103\n"
        "\tname: WQ0HJEWorkerDict_0:2\n"
        "\tnamespace: 00e278ee-52c1-4f18-85b6-8be135bdb1b6\n"
        "\tip: 10.80.8.181\n"
        "The actor is dead because its worker process has died. Worker exit type: NODE_OUT_OF_MEMORY Worker exit "
        "detail: Task was killed due to the node running low on memory.\n"
    )
    rc = root(text)
    assert (rc["category"], rc["actor"], rc["pid"], rc["rank"], rc["node"]) == (
        "host-oom",
        "WorkerDict",
        26103,
        2,
        "10.80.8.181",
    )
    assert rc["stage"] == "old-log-prob"


# -- 4. causes outside tracebacks ---------------------------------------------------------------------


def test_an_error_level_raylet_line_is_a_failure() -> None:
    # Ray's C++ log layout: `[date time,ms L pid tid] (raylet) file.cc:N: message`
    rc = root(
        "[2025-06-01 10:00:01,000 I 13150 13150] (raylet) main.cc:100: Starting raylet\n"
        "[2025-06-01 10:00:05,123 E 13150 13150] (raylet) worker_pool.cc:701: Failed to register worker to "
        "Raylet: IOError: [RayletClient] Unable to register worker with raylet. Failed to read data from the "
        "socket: End of file worker_id=01000000\n"
    )
    assert rc["category"] == "ray-error" and "Failed to register worker to Raylet" in rc["message"]


# vLLM V1 (reference §7.1, §7.3): the engine core process logs its own traceback, then the client in the
# Ray worker raises `Engine core initialization failed. See root cause above.`
ENGINE_CORE = "(EngineCore_0 pid=4300) ERROR 08-27 21:03:26 [core.py:700] "
ENGINE_INIT_FAILED = (
    ENGINE_CORE
    + "EngineCore failed to start.\n"
    + ENGINE_CORE
    + "Traceback (most recent call last):\n"
    + ENGINE_CORE
    + '  File "/opt/venv/lib/python3.11/site-packages/vllm/v1/engine/core.py", line 691, in run_engine_core\n'
    + ENGINE_CORE
    + "    engine_core = EngineCoreProc(*args, **kwargs)\n"
    + ENGINE_CORE
    + '  File "/opt/venv/lib/python3.11/site-packages/vllm/v1/engine/core.py", line 150, in _initialize_kv_caches\n'
    + ENGINE_CORE
    + "    kv_cache_configs = get_kv_cache_config(vllm_config, kv_cache_spec, available_gpu_memory)\n"
    + ENGINE_CORE
    + "{error}\n"
    "Traceback (most recent call last):\n"
    '  File "/opt/venv/lib/python3.11/site-packages/verl/trainer/main_ppo.py", line 42, in main\n'
    "    run_ppo(config)\n"
    "ray.exceptions.RayTaskError(RuntimeError): ray::WorkerDict.actor_rollout_init_model() (pid=4121, ip=10.0.0.2, "
    "actor_id=abc, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f>)\n"
    '  File "/opt/venv/lib/python3.11/site-packages/vllm/v1/engine/utils.py", line 700, in wait_for_engine_startup\n'
    '    raise RuntimeError("Engine core initialization failed. "\n'
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {{}}\n"
)


def test_engine_core_initialization_failed_defers_to_the_engines_own_error_above() -> None:
    rc = root(
        ENGINE_INIT_FAILED.format(error="AttributeError: 'Qwen2Config' object has no attribute 'rope_theta'")
    )
    assert rc["message"].startswith("AttributeError: 'Qwen2Config'") and rc["pid"] == 4300
    assert rc["stage"] == "model-load"  # the engine was starting, not generating
    rc = root(
        ENGINE_INIT_FAILED.format(
            error="ValueError: To serve at least one request with the model's max seq len (32768), (7.00 GiB KV "
            "cache is needed, which is larger than the available KV cache memory (2.15 GiB)."
        )
    )
    assert rc["id"] == "vllm-max-model-len-exceeds-kv-cache" and rc["stage"] == "model-load"


def test_engine_core_initialization_failed_alone_is_a_low_confidence_vllm_error() -> None:
    rc = root(
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"
    )
    assert (rc["category"], rc["stage"]) == ("vllm-error", "model-load") and rc["confidence"] < 0.5


def test_a_traceback_frame_line_is_never_the_root_line() -> None:
    # a traceback cut after its last `File` line (the job was killed while it printed)
    rc = root(
        "step:3 - actor/pg_loss:0.01\n"
        "Traceback (most recent call last):\n"
        '  File "/workspace/job/train.py", line 88, in <module>\n'
        "    main()\n"
        '  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 4600, in barrier\n'
    )
    assert rc["message"].startswith("Traceback (most recent call last)")
    report, _ = scan_text(
        "step:3 - actor/pg_loss:0.01\n"
        '  File "/opt/venv/lib/python3.11/site-packages/verl/workers/reward_manager/error_handler.py", line 88, in f\n'
        "step:4 - actor/pg_loss:0.01\n"
    )
    assert report["status"] == "healthy"


def test_a_placement_group_vllm_cannot_get_is_a_ray_error_not_healthy() -> None:
    # vllm/executor/ray_utils.py: initialize_ray_cluster's warning, then _wait_until_pg_ready's log lines
    rc = root(
        "Started a local Ray instance.\n"
        "WARNING 02-02 19:54:20 ray_utils.py:315] The number of required GPUs exceeds the total number of "
        "available GPUs in the placement group.\n"
        "INFO 02-02 19:54:30 ray_utils.py:212] Waiting for creating a placement group of specs for 10 seconds. "
        "specs=[{'GPU': 1.0, 'node:172.31.42.4': 0.001}, {'GPU': 1.0}]. Check `ray status` to see if you have "
        "enough resources.\n"
    )
    assert (rc["category"], rc["id"]) == ("ray-error", "vllm-placement-group-unschedulable")


def megatron_nan(i: int, loss: str = "NAN", grad: str = "nan") -> str:
    # megatron/training/training.py training_log (Megatron-LM 2023+: a ` [date time]` first); a NaN
    # loss prints `{:.6E}` -> NAN, a NaN grad norm `{:.3f}` -> nan
    return (
        f" [2025-06-01 10:00:0{i}] iteration {i:8d}/{100:8d} | consumed samples: {i * 256:12d} | elapsed time "
        f"per iteration (ms): 1200.5 | learning rate: 1.000000E-05 | global batch size:   256 | lm loss: {loss} | "
        f"loss scale: 1.0 | grad norm: {grad} | number of skipped iterations:   0 | number of nan iterations:   "
        f"{int(loss == 'NAN')} |\n"
    )


def test_nan_on_the_progress_lines_to_the_end_of_the_run_is_numerical_instability_from_its_first_line() -> (
    None
):
    report, code = scan_text(megatron_nan(1, "2.301000E+00", "1.234") + megatron_nan(2) + megatron_nan(3))
    rc = report["root_cause"]
    assert code == 1 and rc["category"] == "numerical-instability"
    assert "iteration        2/" in rc["message"] and rc["stage"] == "training"
    assert report["progress"]["last_step"] == 3


def test_nan_to_the_last_step_is_a_failure_even_when_the_run_prints_its_completion_marker() -> None:
    # a torchrun script's step lines (logging's default `%(asctime)s %(levelname)s`), then its
    # 'Training finished' line (a completion marker): the loop ran to its end, with a loss that left
    # the numbers at step 2 and never came back
    steps = "".join(
        f"2026-12-01 10:00:0{n},100 INFO step:{n} - loss:{'1.2500' if n == 1 else 'nan'} - "
        f"grad_norm:{'3.1' if n == 1 else 'nan'}\n"
        for n in range(1, 6)
    )
    report, code = scan_text(steps + "2026-12-01 10:00:06,000 INFO Training finished: 5 steps in 5.0s\n")
    rc = report["root_cause"]
    assert code == 1 and rc["category"] == "numerical-instability"
    assert rc["message"].startswith("step:2 ") and rc["step"] == 2  # the step whose own line shows it


def test_nan_in_common_shapes_is_numerical_instability() -> None:
    for line in (
        "epoch 0 step 12 grad norm: nan",
        "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.2}",
    ):
        assert root(line + "\n" + line + "\n")["category"] == "numerical-instability", line


def test_one_nan_the_run_recovers_from_is_not_a_failure() -> None:
    text = (
        megatron_nan(1, "2.301000E+00", "1.234") + megatron_nan(2) + megatron_nan(3, "2.100000E+00", "1.100")
    )
    report, code = scan_text(text)
    assert code == 0 and report["status"] == "healthy"


# -- 5. type is the weakest evidence ----------------------------------------------------------------------

# verl 0.4's reward path: RayPPOTrainer.fit -> compute_reward (verl/trainer/ppo/reward.py) -> the reward
# manager's __call__ (verl/workers/reward_manager/naive.py), which reads each row's reward fields
REWARD_PATH = (
    "(TaskRunner pid=3165) step:3 - actor/pg_loss:0.01\n"
    "Traceback (most recent call last):\n"
    '  File "/opt/venv/lib/python3.11/site-packages/verl/trainer/ppo/ray_trainer.py", line 1100, in fit\n'
    "    reward_tensor, reward_extra_infos_dict = compute_reward(batch, self.reward_fn)\n"
    '  File "/opt/venv/lib/python3.11/site-packages/verl/trainer/ppo/reward.py", line 160, in compute_reward\n'
    "    reward_result = reward_fn(data, return_dict=True)\n"
    '  File "/opt/venv/lib/python3.11/site-packages/verl/workers/reward_manager/naive.py", line 75, in __call__\n'
)


def test_a_dataset_column_missing_when_the_reward_manager_reads_a_batch_is_a_data_error() -> None:
    rc = root(
        REWARD_PATH + '    ground_truth = data_item.non_tensor_batch["reward_model"]["ground_truth"]\n'
        "KeyError: 'reward_model'\n"
    )
    assert (rc["id"], rc["category"], rc["stage"]) == ("dataset-missing-column", "data-error", "reward")


def test_a_reward_managers_check_of_the_scores_is_a_reward_error() -> None:
    rc = root(
        REWARD_PATH + "    assert len(scores) == len(data)\nAssertionError: len(scores)=4 != len(data)=8\n"
    )
    assert (rc["category"], rc["stage"]) == ("reward-error", "reward")
    rc = root(REWARD_PATH + '    reward = score["score"]\n' + "KeyError: 'score'\n")
    assert rc["category"] == "reward-error"


# -- 6. fixes that fit the job ----------------------------------------------------------------------------


def test_a_plain_torchrun_oom_is_not_told_to_lower_the_rollout_reservation() -> None:
    report, _ = scan_file(FIXTURES / "cascades" / "torchrun-oom-watchdog.log")
    steps = report["root_cause"]["remediation"]["fix"]
    assert report["root_cause"]["category"] == "cuda-oom"
    assert not any("actor_rollout_ref." in step for step in steps)
    assert "batch size" in steps[0]


def test_a_verl_oom_with_vllm_keeps_the_rollout_fix_first_and_quotes_the_jobs_value() -> None:
    report, _ = scan_file(SAMPLES / "ray-actor-exception.log")
    remediation = report["root_cause"]["remediation"]
    assert "gpu_memory_utilization" in remediation["fix"][0]
    assert not any("gradient_checkpointing_enable()" in step for step in remediation["fix"])
    assert "gpu_memory_utilization=0.6" in remediation["job_values"]


def test_a_gpu_oom_no_entry_names_gets_the_category_fix_that_fits_a_torchrun_job() -> None:
    # ROCm torch's wording (c10/hip: "HIP out of memory"), named cuda-oom by the fallback phrase rules
    report, _ = scan_text(
        "[rank0]:[W1003 18:05:09.100000000 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank 0]  using GPU 0 "
        "to perform barrier as devices used by this process are currently unknown.\n"
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/workspace/job/sft.py", line 71, in main\n'
        "[rank0]:     loss.backward()\n"
        "[rank0]: torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
        "capacity of 63.98 GiB of which 1.00 GiB is free.\n"
    )
    rc = report["root_cause"]
    assert (rc["id"], rc["category"]) == ("unknown", "cuda-oom")
    assert not any("actor_rollout_ref." in step for step in rc["remediation"]["fix"])


def test_explain_shows_every_step_with_the_jobs_it_is_for() -> None:
    said = run_cli(["explain", "cuda-oom"]).stdout
    assert "(for verl-vllm, verl-sglang)" in said and "(for torchrun, deepspeed, megatron)" in said
