"""Write a verl log of a given size, for benchmarks. Three kinds (`--kind`):

* `realistic` (the default): what a long PPO run prints: the TaskRunner's step lines (about 60
  metric keys), tqdm bars whose `\\r` follows the Ray prefix, WorkerDict chatter from 8 ranks on 2
  nodes with NCCL_DEBUG=INFO, vLLM warnings, Python warnings, Ray dedup lines and checkpoint messages;
  1 line in 70 is a step line or a bar.
* `dense`: a run that logs every step from many processes: a quarter of the lines are step lines and
  tqdm bars, every line from a random pid (tens of thousands of processes), and one caught traceback
  (a retried upload, from a pid that prints nothing more) every 2,000 lines. What made the scanner's
  per-stream state grow with the log and its traceback expiry quadratic (issue 14). `--caught-every
  0` leaves the tracebacks out (the plain dense log).
* `mix`: the realistic body with dense stretches (a validation pass's and a rollout's bars from a
  few hundred processes, step lines every 40 lines) and a caught traceback every 20,000 lines.

`--bars bare` (the `dense+bars` and `mix+bars` shapes of the benchmarks): the `Training Progress` bars
carry no Ray prefix, as the driver's own tqdm writes them when the trainer runs in the driver process
(a copied log, an SFT run under torchrun without --tee): `Training Progress:  16%|...| 71/435 [...]`,
some with tqdm's `\r` before them; beside them vLLM's `Processed prompts` bars and a Hugging Face
Trainer's bar and loss dict, none of which any keyword marks. `--bars ray` (the default) is the shape
earlier figures were measured on.

Each ends with an OOM cascade: rank 3's CUDA OOM inside `update_actor`, NCCL watchdog timeouts on the
other ranks, and the driver's RayTaskError. Deterministic for a given size, kind and seed.

    python benchmarks/generate_log.py OUT.log --mb 200 [--kind realistic|dense|mix] [--bars ray|bare]
"""

from __future__ import annotations

import argparse
import random

CYAN, RESET = "\x1b[36m", "\x1b[0m"
DRIVER = f"{CYAN}(TaskRunner pid=1888103){RESET} "
KEYS = (
    ["global_seqlen/min", "global_seqlen/max", "global_seqlen/minmax_diff", "global_seqlen/mean"]
    + [
        f"actor/{k}"
        for k in ("entropy", "pg_loss", "pg_clipfrac", "ppo_kl", "pg_clipfrac_lower", "grad_norm", "lr")
    ]
    + [f"critic/{k}" for k in ("vf_loss", "vf_clipfrac", "vpred_mean", "grad_norm", "lr")]
    + [
        f"critic/{a}/{b}"
        for a in ("score", "rewards", "advantages", "returns", "values")
        for b in ("mean", "max", "min")
    ]
    + [f"response_length/{k}" for k in ("mean", "max", "min", "clip_ratio")]
    + [f"prompt_length/{k}" for k in ("mean", "max", "min", "clip_ratio")]
    + [
        f"timing_s/{k}"
        for k in ("gen", "reward", "old_log_prob", "values", "adv", "update_critic", "update_actor", "step")
    ]
    + [f"timing_per_token_ms/{k}" for k in ("gen", "values", "adv", "update_critic", "update_actor")]
    + [
        "perf/mfu/actor",
        "perf/max_memory_allocated_gb",
        "perf/max_memory_reserved_gb",
        "perf/cpu_memory_used_gb",
        "perf/total_num_tokens",
        "perf/time_per_step",
        "perf/throughput",
        "training/global_step",
        "training/epoch",
    ]
)


def worker(rank: int) -> str:
    node = "10.0.0.1" if rank < 4 else "10.0.0.2"
    return f"{CYAN}(WorkerDict pid={400000 + rank}, ip={node}){RESET} "


def step_line(step: int, rnd: random.Random) -> str:
    parts = [f"step:{step}"]
    for k in KEYS:
        v = rnd.random() * 10
        parts.append(f"{k}:np.float64({v!r})" if rnd.random() < 0.7 else f"{k}:{v!r}")
    return DRIVER + " - ".join(parts)


def chatter(rnd: random.Random, step: int) -> list[str]:
    """One worker's line(s) between two step lines, in roughly the proportions of a real run with
    NCCL_DEBUG=INFO: mostly NCCL channel/transport INFO, vLLM warnings, Python warnings, dedup lines."""
    r = rnd.randrange(8)
    w = worker(r)
    host = "node-1" if r < 4 else "node-2"
    pid = 400000 + r
    choice = rnd.random()
    if choice < 0.55:
        return [
            f"{w}{host}:{pid}:{pid + 17} [{r % 4}] NCCL INFO Channel {rnd.randrange(32):02d}/0 : "
            f"{r}[{r % 4}] -> {(r + 1) % 8}[{(r + 1) % 4}] via P2P/IPC/read"
        ]
    if choice < 0.62:
        return [f"{w}{host}:{pid}:{pid + 17} [{r % 4}] NCCL INFO Connected all rings, use ring PXN 0 GDR 1"]
    if choice < 0.74:
        return [
            f"{w}WARNING 05-07 21:12:03 [scheduler.py:1754] Sequence group {rnd.randrange(999)} "
            f"is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. "
            f"This can affect the end-to-end performance. Increase gpu_memory_utilization or "
            f"tensor_parallel_size to provide more KV cache memory. "
            f"total_num_cumulative_preemption={rnd.randrange(99)}"
        ]
    if choice < 0.84:
        return [
            f"{w}/opt/venv/lib/python3.10/site-packages/torch/distributed/fsdp/"
            f"fully_sharded_data_parallel.py:690: "
            f"FutureWarning: FSDP.state_dict_type() and FSDP.set_state_dict_type() are being deprecated.",
            f"{w}  warnings.warn(",
        ]
    if choice < 0.94:
        return [
            f"{w}Setting `pad_token_id` to `eos_token_id`:151643 for open-end generation. "
            f"[repeated {rnd.randrange(2, 8)}x across cluster]"
        ]
    return [
        f"{w}INFO {rnd.randrange(1, 13):02d}-{rnd.randrange(10, 29)} 12:00:{rnd.randrange(60):02d} "
        f"[metrics.py:455] Avg prompt throughput: {rnd.random() * 900:.1f} tokens/s, "
        f"Avg generation throughput: {rnd.random() * 3000:.1f} tokens/s, Running: {rnd.randrange(64)} reqs"
    ]


def step_block(step: int, rnd: random.Random) -> list[str]:
    lines = [
        step_line(step, rnd),
        f"{DRIVER}\rTraining Progress:  {step % 100:2d}%|███       | {step}/435 [1:10:40<6:31:06, 64.47s/it]",
    ]
    if step % 10 == 0:  # a checkpoint every 10 steps: each rank saves model, optimizer and extra state
        for r in range(8):
            for what in ("model", "optim", "extra_state"):
                lines.append(
                    f"{worker(r)}INFO:2025-08-22 23:08:{rnd.randrange(60):02d},898:[Rank {r}] "
                    f"Saved {what} to /workspace/job/checkpoints/global_step_{step}/actor/"
                    f"{what}_world_size_8_rank_{r}.pt"
                )
    return lines


CASCADE = (
    "{w3}Traceback (most recent call last):\n"
    '{w3}  File "/opt/venv/lib/python3.10/site-packages/verl/workers/fsdp_workers.py", line 466, '
    "in update_actor\n"
    "{w3}    metrics = self.actor.update_policy(data=data)\n"
    "{w3}torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.56 GiB. GPU 3 has a total "
    "capacity of 79.33 GiB of which 2.10 GiB is free. Including non-PyTorch memory, this process "
    "has 77.21 GiB memory in use.\n"
    "{w0}[rank0]:[E1003 18:37:01.833011111 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=6463, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=1800000) ran for 1800021 milliseconds before timing out.\n"
    "{w1}[rank1]:[E1003 18:37:01.832146912 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=6463, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=1800000) ran for 1800017 milliseconds before timing out.\n"
    "Error executing job with overrides: ['algorithm.adv_estimator=grpo', "
    "'data.train_batch_size=256']\n"
    "Traceback (most recent call last):\n"
    '  File "/opt/venv/lib/python3.10/site-packages/verl/trainer/main_ppo.py", line 64, in main\n'
    "    run_ppo(config)\n"
    "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_update_actor() "
    "(pid=400003, ip=10.0.0.1, actor_id=87523c02ec964b128fbc710001000000, "
    "repr=<verl.single_controller.ray.base.WorkerDict object at 0x7edde69d7850>)\n"
    '  File "/opt/venv/lib/python3.10/site-packages/verl/workers/fsdp_workers.py", line 466, '
    "in update_actor\n"
    "    metrics = self.actor.update_policy(data=data)\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.56 GiB. GPU 3 has a total "
    "capacity of 79.33 GiB of which 2.10 GiB is free.\n"
    "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
)


CAUGHT = """\
{w}ERROR:2025-08-22 23:08:{sec:02d},111:upload of the step's rollout samples failed; retrying in 5 s
{w}Traceback (most recent call last):
{w}  File "/opt/venv/lib/python3.10/site-packages/urllib3/connectionpool.py", line 793, in urlopen
{w}    response = self._make_request(
{w}  File "/opt/venv/lib/python3.10/site-packages/urllib3/connectionpool.py", line 537, in _make_request
{w}    response = conn.getresponse()
{w}ConnectionResetError: [Errno 104] Connection reset by peer
"""


def random_worker(rnd: random.Random) -> str:
    """A process of a run with tens of thousands of them (Ray restarts workers, rollouts fork)."""
    return (
        f"{CYAN}(WorkerDict pid={rnd.randrange(10_000, 4_000_000)}, "
        f"ip=10.0.{rnd.randrange(4)}.{rnd.randrange(1, 255)}){RESET} "
    )


def dense_block(step: int, rnd: random.Random, bars: str = "ray") -> list[str]:
    """Eight lines: a step line and a tqdm bar, each from a random pid, and six lines of chatter
    (`bars` "bare": three redraws of the bar without a prefix, and two other bars without one, in place
    of five lines of chatter)."""
    driver = f"{CYAN}(TaskRunner pid={rnd.randrange(10_000, 4_000_000)}){RESET} "
    step_text = driver + step_line(step, rnd)[len(DRIVER) :]
    if bars == "bare":  # (the bar redrawn three times a step: as often as the Ray bars of the issue's log)
        lines = [step_text, *(bare_bar(step, 100_000, rnd) for _ in range(3))]
        lines += [other_bar(step, rnd), other_bar(step, rnd)]
    else:
        bar = (
            f"{random_worker(rnd)}\rTraining Progress:  {step % 100:2d}%|███       | {step}/100000 "
            f"[1:10:40<6:31:06, {rnd.random() * 9 + 1:.2f}s/it]"
        )
        lines = [step_text, bar]
    while len(lines) < 8:
        lines.extend(_from(random_worker(rnd), chatter(rnd, step)))
    return lines[:8]


BLOCKS = " ▏▎▍▌▋▊▉█"  # tqdm's partial blocks


def _bar_body(n: int, total: int) -> str:
    """tqdm's `NN%|####▌     | n/total` for n of total (a 10-character bar)."""
    frac = min(n / total, 1.0) if total else 0.0
    full, part = divmod(int(frac * 80), 8)
    bar = "█" * full + (BLOCKS[part] if full < 10 else "")
    return f"{int(frac * 100):3d}%|{bar:<10}| {n}/{total}"


def bare_bar(step: int, total: int, rnd: random.Random) -> str:
    """verl's `Training Progress` bar as the driver's own tqdm writes it: no prefix, some with the `\r`
    each redraw starts with."""
    head = "\r" if rnd.random() < 0.5 else ""
    return (
        f"{head}Training Progress: {_bar_body(step % total, total)} "
        f"[1:10:40<6:31:06, {rnd.random() * 90 + 10:.2f}s/it]"
    )


def other_bar(step: int, rnd: random.Random) -> str:
    """A bar that says nothing of verl's progress, without a prefix: vLLM's `Processed prompts` (with
    its token rates), a Hugging Face Trainer's bar, or the Trainer's loss dict."""
    choice = rnd.random()
    if choice < 0.5:
        n = rnd.randrange(257)
        return (
            f"\rProcessed prompts: {_bar_body(n, 256)} [00:{n % 60:02d}<00:06, {rnd.random() * 30:.2f}it/s, "
            f"est. speed input: {rnd.random() * 5000:.2f} toks/s, output: {rnd.random() * 3000:.2f} toks/s]"
        )
    if choice < 0.85:
        return f"{_bar_body(step % 1000, 1000)} [00:30<09:30,  {rnd.random() * 3:.2f}it/s]"
    return (
        f"{{'loss': {rnd.random():.4f}, 'grad_norm': {rnd.random() * 3:.4f}, "
        f"'learning_rate': 1e-05, 'epoch': {step / 1000:.2f}}}"
    )


def _from(w: str, lines: list[str]) -> list[str]:
    """Chatter lines as printed by the process `w` (a Ray prefix) instead of their rank's."""
    return [w + line.split(f"{RESET} ", 1)[1] for line in lines]


def mix_block(step: int, rnd: random.Random, pool: list[str], bars: str = "ray") -> list[str]:
    """The realistic body's step, or (one step in 8) a dense stretch: a rollout's and a validation
    pass's bars from a few hundred processes, with a step line every 40 lines (`bars` "bare": the
    bars without a prefix, and other bars among the chatter)."""
    if step % 8:
        lines = step_block(step, rnd)
        for _ in range(rnd.randrange(150, 400)):
            lines.extend(chatter(rnd, step))
        return lines
    lines = []
    for i in range(rnd.randrange(600, 1200)):
        w = rnd.choice(pool)
        if i % 40 == 0:
            lines.append(step_line(step, rnd))
        elif i % 3 == 0:
            if bars == "bare":
                lines.append(bare_bar(step, 435, rnd))
            else:
                lines.append(
                    f"{w}\rTraining Progress:  {step % 100:2d}%|███       | {step}/435 "
                    "[1:10:40<6:31:06, 64.47s/it]"
                )
        elif bars == "bare" and i % 3 == 1:
            lines.append(other_bar(step, rnd))
        else:
            lines.extend(_from(w, chatter(rnd, step)))
    return lines


def generate(
    path: str,
    mb: float,
    seed: int = 7,
    kind: str = "realistic",
    caught_every: int | None = None,
    bars: str = "ray",
) -> None:
    """Write a log of about `mb` MB of the given kind (see the module docstring); `caught_every`: a
    caught traceback every that many lines (0: none; default: the kind's); `bars`: "ray" or "bare"
    (the dense and mix kinds' bars without a prefix)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")
    if bars not in BARS:
        raise ValueError(f"unknown bars {bars!r} (one of {', '.join(BARS)})")
    every = CAUGHT_EVERY[kind] if caught_every is None else caught_every
    rnd = random.Random(seed)
    target = int(mb * 1_000_000)
    written = 0
    step = 0
    lines_out = 0
    next_caught = every or None
    # (drawn only for `mix`: the realistic log stays the one earlier figures were measured on)
    pool = [random_worker(rnd) for _ in range(300)] if kind == "mix" else []
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        head = [
            "2025-04-30 20:59:12,200\tINFO worker.py:1832 -- Started a local Ray instance. "
            "View the dashboard at 127.0.0.1:8265",
            DRIVER + "{'actor_rollout_ref': {'actor': {'ppo_micro_batch_size_per_gpu': 8,",
            DRIVER + "                                 'strategy': 'fsdp'},",
            DRIVER + "                       'rollout': {'gpu_memory_utilization': 0.6, 'name': 'vllm'}},",
            DRIVER + " 'trainer': {'n_gpus_per_node': 4, 'nnodes': 2}}",
            DRIVER + "[validate_config] All configuration checks passed successfully!",
            DRIVER + "Total training steps: 435",
            worker(0) + "NCCL version 2.21.5+cuda12.4",
            DRIVER + "Training from scratch",
        ]
        for line in head:
            fh.write(line + "\n")
            written += len(line) + 1
        tail = CASCADE.format(w0=worker(0), w1=worker(1), w3=worker(3))
        while written < target - len(tail):
            step += 1
            if kind == "dense":
                lines = dense_block(step, rnd, bars)
            elif kind == "mix":
                lines = mix_block(step, rnd, pool, bars)
            else:
                lines = step_block(step, rnd)
                for _ in range(rnd.randrange(150, 400)):
                    lines.extend(chatter(rnd, step))
            if next_caught is not None and lines_out + len(lines) >= next_caught:
                # a caught error: logged with its traceback by a process that then prints nothing more
                w = random_worker(rnd) if kind == "dense" else rnd.choice(pool)
                lines.extend(CAUGHT.format(w=w, sec=rnd.randrange(60)).splitlines())
                next_caught += every
            lines_out += len(lines)
            block = "\n".join(lines) + "\n"
            fh.write(block)
            written += len(block)
        fh.write(tail)


KINDS = ("realistic", "dense", "mix")
BARS = ("ray", "bare")
CAUGHT_EVERY = {"realistic": 0, "dense": 2_000, "mix": 20_000}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--mb", type=float, default=200.0, help="approximate size in MB")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--kind", choices=KINDS, default="realistic")
    ap.add_argument(
        "--caught-every", type=int, help="a caught traceback every N lines (0: none; default: the kind's)"
    )
    ap.add_argument("--bars", choices=BARS, default="ray", help="the bars of dense and mix: Ray's or bare")
    a = ap.parse_args()
    generate(a.out, a.mb, a.seed, a.kind, a.caught_every, a.bars)


if __name__ == "__main__":
    main()
