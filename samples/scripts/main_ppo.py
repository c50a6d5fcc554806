"""A toy with the shape of `python3 -m verl.trainer.main_ppo`, used to capture REAL Ray framing.

Nothing here is verl. It imitates verl's process layout so that the Ray output is the real thing:
  * a Hydra app (`Error executing job with overrides: [...]` when an exception escapes main),
  * `ray.init(...)` on the driver, then a `TaskRunner` actor that runs the "trainer",
  * worker actors of a class named `WorkerDict` (built inside `create_colocated_worker_cls`, as in
    verl) whose methods carry the role prefix, e.g. `actor_rollout_update_actor`.
The TaskRunner and the workers print a few lines in verl's formats (the step line of verl >= 0.5,
etc.); those lines are an imitation. The Ray prefixes, dedup lines, exception framing, raylet
messages and driver tracebacks are produced by Ray itself.

Cases (config `case=`):
  oom           every worker raises torch.OutOfMemoryError at step `fail_step` in update_actor;
                the message follows torch's CUDA allocator template (there is no GPU here: the
                exception is constructed, the Ray framing around it is real)
  sigkill       worker rank 1 SIGKILLs itself during generate_sequences at step `fail_step`
  import-error  init_model imports flash_attn, which is not installed -> ModuleNotFoundError
  healthy       runs total_training_steps steps and exits 0
  pg-wait       (a hang) the TaskRunner asks for a resource pool (a placement group of
                n_gpus_per_node bundles of one CPU) that the 2-CPU cluster cannot give while the
                TaskRunner holds a CPU, and waits for it: `ray.get(pg.ready())` never returns
  rollout-hang  (a hang) worker rank 2 never returns from generate_sequences at step `fail_step`
                (a stuck rollout engine); the TaskRunner waits in ray.get
"""

import numbers
import os
import pprint
import signal
import socket
import time

import hydra
import numpy as np
import ray
import torch
from omegaconf import OmegaConf
from tqdm import tqdm

OOM_TEMPLATE = (
    "CUDA out of memory. Tried to allocate {req}. GPU 0 has a total capacity of 79.11 GiB of which "
    "{free} is free. Including non-PyTorch memory, this process has {used} memory in use. Of the "
    "allocated memory {alloc} is allocated by PyTorch, and {unalloc} is reserved by PyTorch but "
    "unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
    "Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)"
)


def concat_dict_to_str(metrics, step):
    # same format as verl >= 0.5 (verl/utils/logger/aggregate_logger.py)
    output = [f"step:{step}"]
    for k, v in metrics.items():
        if isinstance(v, numbers.Number):
            output.append(f"{k}:{pprint.pformat(v)}")
    return " - ".join(output)


def create_colocated_worker_cls():  # noqa: C901 (as samples/ ran: a refactor means capturing again)
    class WorkerDict:
        def __init__(self, rank, world_size, case, fail_step, total_steps):
            self.rank = rank
            self.total_steps = total_steps
            self.world_size = world_size
            self.case = case
            self.fail_step = fail_step
            self.model = None

        def actor_rollout_init_model(self):
            if self.case == "import-error":
                from flash_attn.bert_padding import pad_input, unpad_input  # noqa: F401
            torch.manual_seed(self.rank)
            self.model = torch.nn.Linear(64, 64)
            self.optim = torch.optim.AdamW(self.model.parameters(), lr=1e-6)
            if self.rank == 0:
                print("Qwen2ForCausalLM contains 3.09B parameters")
                print(
                    "Before Actor FSDP, memory allocated (GB): 0.00, memory reserved (GB): 0.00, "
                    "device memory used/total (GB): 0.53/79.11"
                )
            print("Actor use_remove_padding=True")
            print(f"Total steps: {self.total_steps}, num_warmup_steps: 0")
            return True

        def actor_rollout_generate_sequences(self, step):
            if self.case == "sigkill" and self.rank == 1 and step == self.fail_step:
                os.kill(os.getpid(), signal.SIGKILL)
            if self.case == "rollout-hang" and self.rank == 2 and step == self.fail_step:
                self._wait_for_engine()
            time.sleep(1.0)
            gen = torch.Generator().manual_seed(step * 100 + self.rank)
            lengths = torch.randint(120, 900, (64,), generator=gen).float()
            return {"response_length": lengths.mean().item(), "score": torch.rand(1, generator=gen).item()}

        def _wait_for_engine(self):
            while True:  # a rollout engine that never answers
                time.sleep(1.0)

        def _forward_micro_batch(self, x, step):
            if self.case == "oom" and step == self.fail_step:
                raise torch.OutOfMemoryError(
                    OOM_TEMPLATE.format(
                        req="2.00 GiB",
                        free=f"{1.25 - 0.06 * self.rank:.2f} GiB",
                        used=f"{77.85 + 0.06 * self.rank:.2f} GiB",
                        alloc="74.20 GiB",
                        unalloc="2.13 GiB",
                    )
                )
            return self.model(x)

        def _update_policy(self, step):
            gen = torch.Generator().manual_seed(step * 10 + self.rank)
            x = torch.randn(32, 64, generator=gen)
            out = self._forward_micro_batch(x, step)
            loss = out.pow(2).mean() * 1e-3
            self.optim.zero_grad()
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optim.step()
            time.sleep(0.5)
            return {"pg_loss": -loss.item() / 10, "grad_norm": grad_norm.item(), "ppo_kl": loss.item() / 100}

        def actor_rollout_update_actor(self, step):
            return self._update_policy(step)

    return WorkerDict


@ray.remote(num_cpus=1)
class TaskRunner:
    def run(self, config):
        print(f"TaskRunner hostname: {socket.gethostname()}, PID: {os.getpid()}")
        cfg = OmegaConf.create(config)
        pprint.pprint({k: v for k, v in config.items() if k not in ("case", "fail_step")})
        print("[validate_config] All configuration checks passed successfully!")
        print("Using dataset class: RLHFDataset")
        print("dataset len: 7473")
        print("dataset len: 1319")
        total = cfg.trainer.total_training_steps
        print("Size of train dataloader: 29, Size of val dataloader: 1")
        print(f"Total training steps: {total}")

        WorkerDict = ray.remote(create_colocated_worker_cls())
        n = cfg.trainer.n_gpus_per_node
        if cfg.case == "pg-wait":
            create_resource_pool(n)
        workers = [
            WorkerDict.options(num_cpus=0.25, name=f"Xk3QvbWorkerDict_0:{r}").remote(
                r, n, cfg.case, cfg.fail_step, total
            )
            for r in range(n)
        ]
        ray.get([w.actor_rollout_init_model.remote() for w in workers])

        ckpt = (
            f"/workspace/job/checkpoints/{cfg.trainer.project_name}/{cfg.trainer.experiment_name}/"
            "latest_checkpointed_iteration.txt"
        )
        print(f"Checkpoint tracker file does not exist: {ckpt}")
        print("Training from scratch")
        progress_bar = tqdm(total=total, initial=0, desc="Training Progress")
        for step in range(1, total + 1):
            t0 = time.time()
            gen = ray.get([w.actor_rollout_generate_sequences.remote(step) for w in workers])
            t1 = time.time()
            upd = ray.get([w.actor_rollout_update_actor.remote(step) for w in workers])
            t2 = time.time()
            metrics = {
                "actor/pg_loss": np.mean([u["pg_loss"] for u in upd]),
                "actor/pg_clipfrac": np.float64(0.0),
                "actor/ppo_kl": np.mean([u["ppo_kl"] for u in upd]),
                "actor/pg_clipfrac_lower": np.float64(0.0),
                "actor/grad_norm": np.mean([u["grad_norm"] for u in upd]),
                "perf/max_memory_allocated_gb": np.float64(61.3 + step * 0.9),
                "perf/max_memory_reserved_gb": np.float64(70.1 + step * 1.1),
                "actor/lr": np.float64(1e-06),
                "training/global_step": step,
                "training/epoch": 0,
                "critic/score/mean": float(np.mean([g["score"] for g in gen])),
                "response_length/mean": float(np.mean([g["response_length"] for g in gen])),
                "timing_s/gen": t1 - t0,
                "timing_s/update_actor": t2 - t1,
                "timing_s/step": t2 - t0,
            }
            print(concat_dict_to_str(metrics, step), flush=True)
            progress_bar.update(1)
        progress_bar.close()
        pprint.pprint("Final validation metrics: None")


def create_resource_pool(n):
    from ray.util.placement_group import placement_group

    bundles = [{"CPU": 1} for _ in range(n)]
    pg = placement_group(bundles, strategy="PACK", name="global_pool")
    print(f"Waiting for resource pool global_pool: {n} bundles {bundles[0]}")
    ray.get(pg.ready())


def run_ppo(config):
    if not ray.is_initialized():
        ray_init_kwargs = {
            "num_cpus": 2,
            "include_dashboard": False,
            "runtime_env": {
                "env_vars": {
                    "TOKENIZERS_PARALLELISM": "true",
                    "NCCL_DEBUG": "WARN",
                    "VLLM_LOGGING_LEVEL": "WARN",
                }
            },
        }
        print(f"ray init kwargs: {ray_init_kwargs}")
        ray.init(**ray_init_kwargs)
    runner = TaskRunner.remote()
    ray.get(runner.run.remote(OmegaConf.to_container(config, resolve=True)))


@hydra.main(config_path="config", config_name="ppo_trainer", version_base=None)
def main(config):
    run_ppo(config)


if __name__ == "__main__":
    main()
