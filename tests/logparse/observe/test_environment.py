"""EnvironmentTracker: versions, GPUs, topology, the verl era and config values, from real formats."""

from __future__ import annotations

import pprint

import pytest

from logparse.observe.environment import MAX_HOSTS, EnvironmentTracker
from logparse.read.normalize import Normalizer
from logparse.read.sources import InputStats, Line, read_input, strip_ansi
from tests.conftest import SAMPLES


def fingerprint(lines: list[str]) -> dict:
    return feed(lines).fingerprint()


def config_of(fp: dict) -> dict:
    return {k.removeprefix("config."): v for k, v in fp.items() if k.startswith("config.")}


def feed(lines: list[str]) -> EnvironmentTracker:
    tracker = EnvironmentTracker()
    norm = Normalizer()
    for i, text in enumerate(lines, 1):
        tracker.feed(norm.normalize(Line("job.log", i, strip_ansi(text)), i))
    return tracker


def test_nothing_known_nothing_reported() -> None:
    assert fingerprint(["hello", "Traceback (most recent call last):"]) == {}


def test_nccl_cuda_vllm_transformers_python() -> None:
    fp = fingerprint(
        [
            "(WorkerDict pid=1888709) NCCL version 2.21.5+cuda12.4",
            "node-2:842624:842624 [0] NCCL INFO cudaDriverVersion 12080",
            (
                "(vLLMHttpServer pid=3184909, ip=10.0.0.5) (EngineCore_DP0 pid=4761) INFO 08-27 21:02:50 [core.py:69] "
                "Initializing a V1 LLM engine (v0.8.5) with config: model='Qwen/Qwen2.5-7B-Instruct'"
            ),
            '(WorkerDict pid=1888709)   "transformers_version": "4.51.1",',
            '  File "/usr/local/lib/python3.10/dist-packages/ray/_private/worker.py", line 2661, in get',
            "(TaskRunner pid=1888103) wandb: Tracking run with wandb version 0.19.9",
        ]
    )
    assert fp["nccl"] == "2.21.5" and fp["cuda"] == "12.4" and fp["cuda_driver"] == "12.8"
    assert fp["vllm"] == "0.8.5" and fp["vllm_engine"] == "V1" and fp["rollout_engine"] == "vllm"
    assert fp["transformers"] == "4.51.1" and fp["python"] == "3.10" and fp["wandb"] == "0.19.9"
    assert fp["hosts"] == ["10.0.0.5", "node-2"]
    assert fp["verl_era"] == ">=0.6"  # the outer (vLLMHttpServer pid=...) prefix of a nested line


def test_nccl_version_quoted_by_an_error() -> None:
    fp = fingerprint(
        [
            (
                "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
                "NCCLUtils.hpp:268, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5"
            )
        ]
    )
    assert fp == {"nccl": "2.21.5"}


def test_gpu_memory_and_model() -> None:
    fp = fingerprint(
        [
            "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |",
            "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |",
            (
                "(WorkerDict pid=1) Before critic FSDP, memory allocated (GB): 0.00, memory reserved (GB): 0.00, "
                "device memory used/total (GB): 0.51/79.33"
            ),
            (
                "(WorkerDict pid=1) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                "total capacity of 79.11 GiB of which 1.19 GiB is free."
            ),
        ]
    )
    assert fp["gpu_model"] == "NVIDIA H100 80GB HBM3"
    assert fp["gpu_memory_gib"] == 79.33
    assert (fp["nvidia_driver"], fp["cuda_driver"]) == ("550.54.15", "12.4")


@pytest.mark.parametrize(
    ("line", "model"),
    [
        ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5f3c)", "NVIDIA A100-SXM4-80GB"),
        ("|   1  Tesla V100-SXM2-32GB           On  | 00000000:07:00.0 Off |", "Tesla V100-SXM2-32GB"),
        ("|   0  NVIDIA GeForce RTX 4090        Off |   00000000:01:00.0 Off |", "NVIDIA GeForce RTX 4090"),
        ("|   0  NVIDIA L40S                    On  |", "NVIDIA L40S"),
    ],
)
def test_gpu_models(line: str, model: str) -> None:
    assert fingerprint([line])["gpu_model"] == model


def test_old_oom_wording_gives_memory() -> None:
    fp = fingerprint(
        [
            (
                "RuntimeError: CUDA out of memory. Tried to allocate 1.22 GiB (GPU 0; 15.78 GiB total "
                "capacity; 13.24 GiB already allocated; 1.23 GiB free)"
            )
        ]
    )
    assert fp["gpu_memory_gib"] == 15.78


def test_pip_freeze_pip_list_and_collect_env() -> None:
    fp = fingerprint(
        [
            "torch==2.6.0+cu124",
            "vllm==0.8.5.post1",
            "flash_attn==2.7.4.post1",
            "ray==2.43.0",
            "verl==0.4.1",
            "transformers                      4.51.3",
            "PyTorch version: 2.6.0+cu124",
            ("Python version: 3.11.7 (main, Dec 15 2023, 18:12:31) [GCC 11.2.0] (64-bit runtime)"),
            "Nvidia driver version: 550.54.15",
        ]
    )
    assert fp["torch"] == "2.6.0+cu124" and fp["cuda"] == "12.4"
    assert (fp["vllm"], fp["flash_attn"], fp["ray"], fp["verl"]) == (
        "0.8.5.post1",
        "2.7.4.post1",
        "2.43.0",
        "0.4.1",
    )
    assert fp["transformers"] == "4.51.3" and fp["python"] == "3.11" and fp["nvidia_driver"] == "550.54.15"


def test_requirement_conflicts_are_no_installed_versions() -> None:
    fp = fingerprint(["vllm 0.8.5 requires torch==2.6.0, but you have torch 2.7.0 which is incompatible."])
    assert "torch" not in fp and "vllm" not in fp


def test_torch_and_ray_styles_when_no_version_is_printed() -> None:
    fp = fingerprint(
        [
            (
                "[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 1] Exception (either "
                "an error or timeout) detected by watchdog at work: 6463, last enqueued NCCL work: 6463"
            ),
            (
                "(raylet) A worker died or was killed while executing a task by an unexpected system error. RayTask ID: "
                "ffffffffffffffffd4e261d6f007000a735ae14101000000 Worker ID: e1706af3 Worker exit type: SYSTEM_ERROR"
            ),
        ]
    )
    assert fp["torch"] == "<=2.4 (log style)"
    assert fp["ray"].startswith("<2.55 (log style")
    newer = fingerprint(
        [
            (
                "[rank368]:[E808 04:21:41.161005534 ProcessGroupNCCL.cpp:2299] [PG ID 0 PG GUID "
                "0(default_pg) Rank 368]  failure detected by watchdog at work sequence id: 5"
            ),
            "torch==2.7.1",
        ]
    )
    assert newer["torch"] == "2.7.1"  # an installed version beats the style


def test_world_size_sources() -> None:
    assert fingerprint(["world_size=4 backend=gloo model=Linear(16, 1)"])["world_size"] == 4
    assert (
        fingerprint(
            [
                (
                    "(WorkerDict pid=1) [rank-0]: Saving model to /ckpt/global_step_10/actor/"
                    "model_world_size_8_rank_0.pt"
                )
            ]
        )["world_size"]
        == 8
    )
    assert (
        fingerprint(
            [
                (
                    "node-2:1:1 [0] NCCL INFO ncclCommInitRankConfig comm 0x55d1 rank 0 nranks 16 cudaDev 0 "
                    "nvmlDev 0 busId 7000 commId 0x5a1c - Init START"
                )
            ]
        )["world_size"]
        == 16
    )


def test_hosts_from_prefixes_headers_and_child_failed_error() -> None:
    fp = fingerprint(
        [
            "(WorkerDict pid=26110, ip=10.0.0.7) hello",
            (
                "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_update_actor() "
                "(pid=400862, ip=10.128.0.9, actor_id=87523c02ec964b128fbc710001000000)"
            ),
            "  host      : gpu-node-17",
            "(TaskRunner pid=3) TaskRunner hostname: dsw-1187, PID: 3",
        ]
    )
    assert fp["hosts"] == ["10.0.0.7", "10.128.0.9", "dsw-1187", "gpu-node-17"]


def test_hosts_are_capped() -> None:
    fp = fingerprint([f"(WorkerDict pid={i}, ip=10.0.{i // 250}.{i % 250}) x" for i in range(200)])
    assert len(fp["hosts"]) == MAX_HOSTS


@pytest.mark.parametrize(
    ("lines", "era"),
    [
        # v0.1: main_task driver, `timing/gen` keys, three-decimal values
        (
            ["(main_task pid=2211) step:0 - timing/gen:21.470 - timing/ref:4.360 - critic/lr(1e-4):0.100"],
            "0.1",
        ),
        # v0.9 default trainer
        (["(TaskRunnerV1 pid=9) INFO:2026-08-20 10:02:12,500:all initialize finished, ready to fit"], "0.9"),
        (["ray init kwargs: {}", "(TaskRunner pid=5120) AgentLoopManager: ['10.0.0.1:34567']"], "0.6-0.7"),
        (
            [
                "(TaskRunner pid=1) Checkpoint tracker file does not exist: %s /ckpt/latest_checkpointed_iteration.txt"
            ],
            "0.3",
        ),
        # a main-branch build between v0.3 and v0.4 shows markers of both
        (
            [
                "(TaskRunner pid=1) Checkpoint tracker file does not exist: %s /ckpt/latest_checkpointed_iteration.txt",
                "(TaskRunner pid=1) colocated worker base class <class 'verl.single_controller.base.worker.Worker'>",
                (
                    "(TaskRunner pid=1) step:1 - val-core/openai/gsm8k/reward/mean@1:0.300 - actor/pg_loss:0.018 - "
                    "timing_s/step:61.209"
                ),
            ],
            "between 0.3 and 0.4 (markers of both: a main-branch build between releases)",
        ),
        (["(TaskRunner pid=1) step:1 - actor/pg_loss:np.float64(0.01) - timing_s/step:1.5"], ">=0.5"),
        (
            ["(TaskRunner pid=1) step:1 - actor/pg_loss:0.018 - critic/vf_loss:7.455 - timing_s/step:61.209"],
            "0.3-0.4",
        ),
        (["(WorkerDict pid=1) [rank-0]: Saving model to /ckpt/actor/model_world_size_8_rank_0.pt"], "<=0.3"),
        (
            ["(WorkerDict pid=3) INFO:2025-08-22 23:08:37,898:[Rank 0] Saved model to /ckpt/actor/m.pt"],
            ">=0.4",
        ),
    ],
)
def test_verl_era(lines: list[str], era: str) -> None:
    fp = fingerprint(lines)
    assert fp["verl_era"] == era
    assert fp["verl_era_evidence"]


def test_non_verl_step_lines_say_nothing_about_verl() -> None:
    assert "verl_era" not in fingerprint(["step:1 - loss:12.2228 - grad_norm:7.6738 - lr:0.05"])


CONFIG = {
    "actor_rollout_ref": {
        "actor": {
            "checkpoint": {"contents": ["model", "optimizer", "extra"]},
            "fsdp_config": {"optimizer_offload": False, "param_offload": True},
            "optim": {"lr": 1e-06},
            "ppo_micro_batch_size_per_gpu": 4,
            "ppo_mini_batch_size": 256,
            "strategy": "fsdp",
        },
        "model": {"path": "/models/Qwen2.5-0.5B-Instruct", "use_remove_padding": True},
        "rollout": {
            "gpu_memory_utilization": 0.4,
            "log_prob_micro_batch_size_per_gpu": 8,
            "n": 5,
            "name": "vllm",
            "tensor_model_parallel_size": 1,
        },
    },
    "critic": {"model": {"path": "/models/critic"}, "strategy": "fsdp"},
    "custom_reward_function": {"name": "compute_score", "path": None},
    "data": {"train_batch_size": 1024, "val_files": "~/data/gsm8k/test.parquet"},
    "trainer": {"n_gpus_per_node": 8, "nnodes": 2, "total_epochs": 15},
}


def config_dump(prefix: str = "(TaskRunner pid=1888103) ") -> list[str]:
    """The dump as verl prints it: pprint of the resolved config dict, each line with the Ray prefix."""
    return [prefix + line for line in pprint.pformat(CONFIG).splitlines()]


def test_config_dump_values_with_their_nesting() -> None:
    dump = config_dump()
    assert len(dump) > 10 and dump[0].startswith("(TaskRunner pid=1888103) {'actor_rollout_ref': {'actor':")
    lines = (
        dump[:6]
        + ["(WorkerDict pid=99) NCCL version 2.21.5+cuda12.4"]
        + dump[6:]
        + ["(TaskRunner pid=1888103) [validate_config] All configuration checks passed successfully!"]
    )
    fp = fingerprint(lines)
    config = config_of(fp)
    assert config["actor_rollout_ref.actor.fsdp_config.param_offload"] is True
    assert config["actor_rollout_ref.actor.fsdp_config.optimizer_offload"] is False
    assert config["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] == 4
    assert config["actor_rollout_ref.actor.optim.lr"] == 1e-06
    assert config["actor_rollout_ref.rollout.gpu_memory_utilization"] == 0.4
    assert config["actor_rollout_ref.rollout.name"] == "vllm" and config["actor_rollout_ref.rollout.n"] == 5
    assert config["critic.model.path"] == "/models/critic" and config["critic.strategy"] == "fsdp"
    assert config["data.train_batch_size"] == 1024 and config["trainer.nnodes"] == 2
    assert "custom_reward_function.path" not in config and all(v is not None for v in fp.values())
    assert not any(k.startswith("custom_reward_function") for k in config)  # `name`/`path` only where meant
    assert fp["model_path"] == "/models/Qwen2.5-0.5B-Instruct"
    assert fp["rollout_engine"] == "vllm" and fp["world_size"] == 16
    assert fp["nccl"] == "2.21.5"  # another actor's line inside the dump is still read


def test_dump_without_prefix_and_after_it_ends() -> None:
    t = feed(config_dump(prefix="") + ["Using dataset class: RLHFDataset", "                 'nnodes': 7,"])
    assert t.fingerprint()["config.trainer.nnodes"] == 2  # the stray line after the dump is not read


def test_hydra_overrides_and_command_lines() -> None:
    fp = fingerprint(
        [
            (
                "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size=1024 "
                "actor_rollout_ref.rollout.name=sglang trainer.logger=['console','wandb']"
            ),
            "    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \\",
            (
                "Error executing job with overrides: ['algorithm.adv_estimator=grpo', 'data.train_batch_size=8', "
                "'actor_rollout_ref.rollout.gpu_memory_utilization=0.6', 'actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct', "
                "'trainer.n_gpus_per_node=4', '+trainer.nnodes=1', 'case=oom']"
            ),
        ]
    )
    config = config_of(fp)
    assert (
        config["data.train_batch_size"] == 8
    )  # Hydra's list of what the job ran with beats an earlier command
    assert config["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] == 16
    assert config["actor_rollout_ref.rollout.gpu_memory_utilization"] == 0.6
    assert config["algorithm.adv_estimator"] == "grpo" and "trainer.logger" not in config
    assert fp["model_path"] == "Qwen/Qwen2.5-3B-Instruct"
    assert fp["rollout_engine"] == "sglang" and fp["world_size"] == 4


def test_dump_beats_overrides() -> None:
    lines = ["Error executing job with overrides: ['data.train_batch_size=8']"] + config_dump()
    assert fingerprint(lines)["config.data.train_batch_size"] == 1024


def run_sample(name: str) -> dict:
    path = str(SAMPLES / name)
    norm = Normalizer()
    t = EnvironmentTracker()
    for seq, line in enumerate(read_input(path, InputStats(path)), 1):
        t.feed(norm.normalize(line, seq))
    return t.fingerprint()


def test_sample_ray_healthy() -> None:
    fp = run_sample("ray-healthy.log")
    assert fp["verl_era"] == ">=0.6"
    assert fp["model_path"] == "Qwen/Qwen2.5-3B-Instruct" and fp["rollout_engine"] == "vllm"
    assert fp["world_size"] == 4 and fp["gpu_memory_gib"] == 79.11
    assert fp["config.actor_rollout_ref.rollout.tensor_model_parallel_size"] == 2
    assert fp["config.data.train_batch_size"] == 256


def test_sample_ray_actor_exception_and_torchrun() -> None:
    ray = run_sample("ray-actor-exception.log")
    assert ray["python"] == "3.11" and "10.0.0.1" in ray["hosts"]
    assert ray["config.trainer.n_gpus_per_node"] == 4
    torchrun = run_sample("torchrun-healthy.log")
    assert "verl_era" not in torchrun and torchrun["world_size"] == 4 and torchrun["python"] == "3.11"


def test_each_world_size_regex_starts_with_one_of_its_literals() -> None:
    """_world_size starts each search at the first of its rule's literals in the message: that finds
    what a search from the start finds only if a match cannot start before one, i.e. the regex is
    (a word boundary and) one of its literals first. A catalog edit that breaks this fails here."""
    import re

    from logparse.observe.environment import WORLD_SIZE_RULES

    for _key, needs, regex in WORLD_SIZE_RULES:
        head = regex.pattern.removeprefix(r"\b")
        for spell in (str, re.escape):  # (a literal written as it is, or escaped)
            first = "(?:" + "|".join(spell(k) for k in needs) + ")" if len(needs) > 1 else spell(needs[0])
            if head.startswith(first):
                break
        else:
            raise AssertionError(f"{regex.pattern} does not start with one of {needs}")


@pytest.mark.parametrize(
    ("message", "sizes"),
    [
        ("Saved model to /ckpt/global_step_3/actor/model_world_size_8_rank_5.pt", {"checkpoint": 8}),
        ("WORLD_SIZE=16 then world_size: 4", {"explicit": 16}),
        ("world_size: 4 then WORLD_SIZE=16", {"explicit": 4}),
        ("model_world_size_8_rank_0.pt and world_size = 2", {"explicit": 2, "checkpoint": 8}),
        ("comm 0x1 rank 0 nranks 8 cudaDev 0", {"nranks": 8}),
        ("xworld_size=3 world_size mismatch", {}),
    ],
)
def test_world_size_rules_read_the_first_match_of_each(message: str, sizes: dict[str, int]) -> None:
    t = EnvironmentTracker()
    t._world_size(None, message)
    assert t.world_sizes == sizes


def test_the_config_facts_read_only_keys_that_are_kept() -> None:
    """model_path, rollout_engine and world_size come from the config places patterns/environment.yaml
    lists (config-*); a leaf that tracked-keys does not keep would never be there to read."""
    from logparse.observe import environment as env

    places = (
        env.MODEL_PATH_PLACES,
        env.ROLLOUT_ENGINE_PLACES,
        env.NNODES_PLACES,
        env.GPUS_PER_NODE_PLACES,
    )
    for leaf, parent in (p for group in places for p in group):
        assert leaf in env.CONFIG_LEAVES, leaf
        needed = env.AMBIGUOUS_PARENTS.get(leaf)
        assert needed is None or parent == needed, (leaf, parent)
