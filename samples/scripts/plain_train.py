"""An ordinary training script (not verl's): used to capture the shapes of issue 38 for real.

Launched by capture.sh with torchrun (gloo on CPU). Rank 0 prints its versions and its config in
the shape chosen, then every rank trains a small MLP, logging through Python `logging`
(`2026-01-02 10:11:12,345 INFO step 7 loss 2.3104 lr 1e-3`).

--config-shape   how rank 0 prints its config: dict (print(dict)), yaml (yaml.safe_dump), omegaconf
                 (OmegaConf.to_yaml), namespace (print(argparse.Namespace)), json (json.dumps with an
                 indent), overrides (the command line's key=value overrides, as `Overrides: ...`), hydra
                 (Hydra's compose API, then OmegaConf.to_yaml, as a Hydra app prints cfg)
--version-shape  how rank 0 prints its versions: eq (`name==x.y.z`), space (`name x.y.z`), colon
                 (`name: x.y.z`), word (`name version x.y.z`), dunder (`torch.__version__ = ...`),
                 pip-list (`pip list`), collect-env (`python -m torch.utils.collect_env`)
--step-shape     how the step lines look: logging (`... INFO step 7 loss 2.3104 lr 0.001`, the default),
                 bar (`Step 7/100 | loss=2.3104 | lr=0.001`), iter (`iter 7: loss 2.3104, lr 0.001`), epoch
                 (`epoch 1 step 7 loss: 2.3104`), json (`{"step": 7, "loss": 2.3104, "lr": 0.001}`); all
                 but logging are print()ed
--case           healthy; crash (at --fail-step rank --odd-rank raises a RuntimeError); np-float (at
                 --fail-step every rank computes with `np.float_`, which NumPy
                 2 removed); hang-broadcast (at --fail-step the last rank waits in a broadcast while
                 the others wait in all_reduce; every rank prints `rank N pid M` first and arms
                 faulthandler.dump_traceback_later into the shared stderr); barrier-timeout (at
                 --fail-step rank --odd-rank loads a shard for --hang-s while the others wait in
                 dist.barrier(); the process group's timeout is --timeout seconds)
Extra arguments of the form key=value are config overrides (dotted keys).
"""

import argparse
import faulthandler
import json
import logging
import os
import subprocess
import sys
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

log = logging.getLogger("train")


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--case", default="healthy")
    p.add_argument("--config-shape", default="dict")
    p.add_argument("--version-shape", default="eq")
    p.add_argument("--step-shape", default="logging")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--fail-step", type=int, default=4)
    p.add_argument("--step-s", type=float, default=0.1)
    p.add_argument("--hang-s", type=float, default=60)
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--odd-rank", type=int, default=1)
    p.add_argument("--faulthandler", type=float, default=0)
    p.add_argument("--log-all-ranks", action="store_true", help="every rank logs its step lines")
    args, rest = p.parse_known_args()
    return args, [r for r in rest if "=" in r]


def nested(overrides):
    cfg = {
        "data": {"batch_size": 8, "seq_len": 32, "path": "/workspace/job/data/train.jsonl"},
        "model": {"hidden_size": 64, "layers": 2, "dropout": 0.1},
        "optim": {"lr": 0.001, "weight_decay": 0.0, "betas": [0.9, 0.999]},
        "trainer": {"max_steps": 8, "seed": 1234, "log_every": 1},
    }
    for item in overrides:
        key, value = item.split("=", 1)
        *parents, leaf = key.split(".")
        node = cfg
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = type(node.get(leaf, value))(value) if not isinstance(node.get(leaf), list) else value
    return cfg


def flat(cfg, prefix=""):
    out = {}
    for k, v in cfg.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def print_config(shape, cfg, overrides):
    if shape == "dict":
        print(cfg, flush=True)
    elif shape == "yaml":
        import yaml

        print(yaml.safe_dump(cfg, sort_keys=False), flush=True)
    elif shape == "omegaconf":
        from omegaconf import OmegaConf

        print(OmegaConf.to_yaml(OmegaConf.create(cfg)), flush=True)
    elif shape == "namespace":
        print(argparse.Namespace(**{k.replace(".", "_"): v for k, v in flat(cfg).items()}), flush=True)
    elif shape == "json":
        print(json.dumps(cfg, indent=2), flush=True)
    elif shape == "overrides":
        log.info("Overrides: %s", " ".join(overrides))
    elif shape == "hydra":
        from hydra import compose, initialize_config_dir
        from omegaconf import OmegaConf

        conf_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plain_conf")
        with initialize_config_dir(config_dir=conf_dir, version_base=None):
            print(OmegaConf.to_yaml(compose(config_name="train", overrides=overrides)), flush=True)


def print_versions(shape):
    import omegaconf
    import yaml

    pkgs = [
        ("torch", torch.__version__),
        ("numpy", np.__version__),
        ("omegaconf", omegaconf.__version__),
        ("PyYAML", yaml.__version__),
    ]
    if shape == "pip-list":
        subprocess.run([sys.executable, "-m", "pip", "list"], check=False)
    elif shape == "collect-env":
        subprocess.run([sys.executable, "-m", "torch.utils.collect_env"], check=False)
    elif shape == "dunder":
        print(f"torch.__version__ = {torch.__version__}")
        print(f"numpy.__version__ = {np.__version__}")
    else:
        fmt = {"eq": "{}=={}", "space": "{} {}", "colon": "{}: {}", "word": "{} version {}"}[shape]
        for name, ver in pkgs:
            print(fmt.format(name, ver))
    sys.stdout.flush()


def log_step(shape, step, total, loss, lr):
    """One step line in the shape chosen (--step-shape)."""
    if shape == "logging":
        log.info("step %d loss %.4f lr %g", step, loss, lr)
    elif shape == "bar":
        print(f"Step {step}/{total} | loss={loss:.4f} | lr={lr:g}", flush=True)
    elif shape == "iter":
        print(f"iter {step}: loss {loss:.4f}, lr {lr:g}", flush=True)
    elif shape == "epoch":
        print(f"epoch {1 + (step - 1) // 4} step {step} loss: {loss:.4f}", flush=True)
    elif shape == "json":
        print(json.dumps({"step": step, "loss": loss, "lr": lr}), flush=True)


def step_loss(args, rank, step, x, w):
    if args.case == "crash" and step == args.fail_step and rank == args.odd_rank:
        raise RuntimeError(f"shard {step} of rank {rank} is corrupt: expected 32 columns, got 31")
    if args.case == "np-float" and step == args.fail_step:
        scale = np.float_(1.0)  # removed in NumPy 2.0
        x = x * float(scale)
    if args.case == "hang-broadcast" and step == args.fail_step:
        t = torch.zeros(4)
        if rank == dist.get_world_size() - 1:
            dist.broadcast(t, src=0)
        else:
            dist.all_reduce(t)
    if args.case == "barrier-timeout" and step == args.fail_step:
        if rank == args.odd_rank:
            log.info("rank %d loading shard %d", rank, step)
            time.sleep(args.hang_s)
        dist.barrier()
    w.requires_grad_(True)
    loss = ((x @ w - 1.0) ** 2).mean()
    (grad,) = torch.autograd.grad(loss, w)
    w.requires_grad_(False)
    dist.all_reduce(grad)
    return loss.detach(), grad / dist.get_world_size()


def main():
    args, overrides = parse()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))
    rank = dist.get_rank()
    if args.case == "hang-broadcast":
        print(f"rank {rank} pid {os.getpid()}", flush=True)
        faulthandler.dump_traceback_later(args.faulthandler + 0.7 * rank, exit=False)
    cfg = nested(overrides)
    if rank == 0:
        print_versions(args.version_shape)
        print_config(args.config_shape, cfg, overrides)
    torch.manual_seed(cfg["trainer"]["seed"] + rank)
    hidden = int(cfg["model"]["hidden_size"])
    w = torch.randn(hidden, 1) * (8 / hidden) ** 0.5
    lr = float(cfg["optim"]["lr"])
    for step in range(1, args.steps + 1):
        x = torch.randn(int(cfg["data"]["batch_size"]), hidden)
        loss, grad = step_loss(args, rank, step, x, w)
        w -= lr * grad  # (a rate far too large makes the loss overflow to inf, then NaN)
        if rank == 0 or args.log_all_ranks:
            log_step(args.step_shape, step, args.steps, loss.item(), lr)
        time.sleep(args.step_s)
    if rank == 0:
        log.info("training finished: %d steps", args.steps)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
