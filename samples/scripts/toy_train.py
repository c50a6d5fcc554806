"""Tiny distributed "training loop" used to capture real torchrun / gloo failure logs.

Launched by capture.sh with torchrun; every case is a real run on CPU (gloo backend).
The model is a single nn.Linear wrapped in DDP, trained on synthetic regression data.

Cases (--case):
  healthy       train --steps steps and exit 0
  nan-guard     rank 2's batch carries NaNs at step 5; the user-code loss guard raises
                RuntimeError while the other ranks wait in DDP's backward all_reduce
  sigkill       rank 1 SIGKILLs itself at step 4 (what the host OOM killer does)
  hang          the last rank (--hang-rank, default world_size - 1) stalls before step --fail-step's
                collectives; the others hit the gloo timeout
  monitored-barrier  the last rank stalls before step --fail-step; every rank then calls
                dist.monitored_barrier (gloo), so rank 0 names the rank that never arrived
  interleaved   ranks 1, 2 and 3 meet at a barrier, then all raise at the same moment
                from a few frames deep (rank 0 waits in an all_reduce)
  record        rank 1 fails to open its next data shard (FileNotFoundError) at --fail-step;
                main() is wrapped in @record so torchrun writes error.json files
  missing-key   before the process group starts, every rank waits for the others (a barrier of
                files in --data-dir), then collates a first batch of records that lack the
                `input_ids_j` field (KeyError) at the same moment. No process group, so no
                `[rankN]:` excepthook: the ranks share torchrun's stderr, and CPython writes an
                exception line's type, `: ` and message separately, so those lines interleave
  loader-worker-exit  rank 1 reads its batches through a DataLoader with 2 worker processes; reading
                one row ends the worker process (os._exit(1), as a crashing decoder in a C
                extension does) about when step --fail-step begins, so the DataLoader raises in rank 1
  stall-loader  (a hang) the model is not DDP-wrapped: each rank averages its gradients with
                dist.all_reduce. At step --fail-step rank --odd-rank reads its batch through a
                DataLoader whose data set blocks in __getitem__ for --hang-s (a stuck read), so the
                other ranks wait in all_reduce; nothing fails until the process-group timeout
  stall-sleep   (a hang) the same, but rank --odd-rank sleeps in a shard-lock wait before the step
  survive       every step, rank 0 scores a few "samples": one sample's answer does not parse
                (ValueError, logged with its traceback by logger.exception and scored 0), a reward
                server on a closed local port refuses the connection (a real ConnectionRefusedError,
                logged as a WARNING `(Exception: ...)`, retried, then scored locally); the run completes
  survive-then-crash  the same, and at --fail-step rank 2 indexes past the end of its batch
                (IndexError, uncaught): the job dies of that, not of the errors it survived
  final-save    the run completes, then rank 0 saves its final weights into a folder that does not
                exist (torch.save raises RuntimeError after `Training finished`)
  abort         faulthandler is enabled on every rank; at --fail-step rank 1 calls os.abort() (as a
                native library does on a fatal error): `Fatal Python error: Aborted` and its stacks

--faulthandler S arms faulthandler.dump_traceback_later(S) at the start of every step (a rank stuck
for S seconds prints its stack: `Timeout (0:00:S)!`); --log-time puts `YYYY-MM-DD HH:MM:SS,mmm INFO`
before the script's own lines (Python logging's default time format).
"""

import argparse
import faulthandler
import logging
import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP

_LOGGER = None


def log(msg):
    if _LOGGER is not None:
        _LOGGER.info(msg)
        return
    print(msg, flush=True)


def use_log_time():
    global _LOGGER
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    _LOGGER = logging.getLogger("toy_train")
    _LOGGER.addHandler(handler)
    _LOGGER.setLevel(logging.INFO)
    _LOGGER.propagate = False


class SlowLineWriter:
    """Wraps sys.stderr so that text goes out one line at a time with a pause after each line.

    Used only for the interleaving fixture: it stands in for a rank that is starved of CPU or writes
    to a slow filesystem, so that torchrun's tailer (which polls each rank's log file every 0.1 s)
    picks up the ranks' tracebacks line by line instead of one whole traceback at a time.
    The text itself is untouched.
    """

    def __init__(self, stream, delay_s):
        self._stream = stream
        self._delay_s = delay_s

    def write(self, text):
        for line in text.splitlines(keepends=True):
            self._stream.write(line)
            self._stream.flush()
            time.sleep(self._delay_s)
        return len(text)

    def flush(self):
        self._stream.flush()

    def __getattr__(self, name):
        return getattr(self._stream, name)


class SyntheticShard:
    """A rank's shard of a synthetic regression data set."""

    def __init__(self, rank, dim=16, batch_size=32, poison_step=None):
        self.rank = rank
        self.dim = dim
        self.batch_size = batch_size
        self.poison_step = poison_step
        self.gen = torch.Generator().manual_seed(1234 + rank)
        self.w_true = torch.randn(dim, 1, generator=torch.Generator().manual_seed(7))

    def batch(self, step):
        x = torch.randn(self.batch_size, self.dim, generator=self.gen)
        y = x @ self.w_true + 0.1 * torch.randn(self.batch_size, 1, generator=self.gen)
        if self.poison_step is not None and step == self.poison_step:
            # a corrupt record: a few labels are NaN
            y[3:6] = float("nan")
        return x, y


class ExitingDataset(torch.utils.data.Dataset):
    """Rows for a DataLoader; reading row `bad` ends the worker process that reads it."""

    def __init__(self, bad, dim=16):
        self.bad = bad
        self.dim = dim

    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        if i == self.bad:
            os._exit(1)
        return torch.randn(self.dim), torch.randn(1)


class StuckDataset(torch.utils.data.Dataset):
    """Rows whose read blocks for `hang_s` seconds (a read from a stuck network filesystem)."""

    def __init__(self, hang_s, dim=16):
        self.hang_s = hang_s
        self.dim = dim

    def __len__(self):
        return 1_000

    def __getitem__(self, i):
        time.sleep(self.hang_s)
        return torch.randn(self.dim), torch.randn(1)


def wait_for_shard_lock(hang_s):
    # a lock file held by a process that went away
    time.sleep(hang_s)


def average_gradients(model, world):
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= world


def parse_answer(text):
    # the answer a "model" wrote after `####`, as a GSM8K-style reward function reads it
    return float(text.rsplit("####", 1)[1].strip())


def score_samples(step):
    """Score a few generated answers; one of them every step does not parse and is scored 0 (the
    error is logged with its traceback, as a reward manager that must not lose the batch does)."""
    answers = [f"so the total is #### {step * 3}", "I cannot tell #### about seven", f"#### {step}"]
    scores = []
    for i, text in enumerate(answers):
        try:
            scores.append(parse_answer(text))
        except ValueError:
            logging.getLogger("toy_train.reward").exception(
                "reward function failed on sample %d of step %d; scoring it 0", i, step
            )
            scores.append(0.0)
    return scores


def remote_reward(step, port=1, attempts=2):
    """Ask a reward server on this host for a score; the port is closed, so the connection is refused
    (a real ConnectionRefusedError); after `attempts` tries the score is computed locally."""
    import socket

    for attempt in range(1, attempts + 1):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return 1.0
        except OSError as e:
            logging.getLogger("toy_train.reward").warning(
                "reward server attempt %d/%d failed, retrying (Exception: %s)", attempt, attempts, e
            )
    logging.getLogger("toy_train.reward").warning(
        "reward server unreachable at step %d: scored locally", step
    )
    return 0.5


def gather_response_tokens(step, rank, batch_size):
    # rank 2's batch at the failing step is one row short (a packing bug): indexing its last row fails
    rows = torch.arange(batch_size - (1 if rank == 2 else 0))
    return rows[batch_size - 1]


def check_loss(loss, step, rank):
    if not torch.isfinite(loss):
        raise RuntimeError(
            f"Loss is {loss.item()} at step {step} (rank {rank}); "
            "aborting to avoid writing a corrupt checkpoint"
        )


def validate_batch(x, step):
    # deliberately a few frames deep, for the interleaving fixture
    if x.shape[1] != 17:
        raise ValueError(
            f"expected features of width 17 from the tokenizer cache, got {x.shape[1]} at step {step}"
        )


def collate_pairs(features):
    # a pairwise reward-model collator reading fields the data set was meant to carry
    return {
        "input_ids": [f["input_ids_j"] for f in features],
        "input_ids_k": [f["input_ids_k"] for f in features],
    }


def prepare_batch(shard, step):
    x, y = shard.batch(step)
    validate_batch(x, step)
    return x, y


def train_step(model, opt, shard, step, args, rank):
    if args.case == "interleaved" and step == args.fail_step and rank != 0:
        dist.barrier(group=args.side_group)  # ranks 1-3 line up, then all fail together
        x, y = prepare_batch(shard, step)
    elif args.case == "loader-worker-exit" and rank == 1:
        if step == 1:
            # 2 workers prefetch 2 batches each: the worker reads the bad row about when step
            # --fail-step begins
            args.loader = iter(
                torch.utils.data.DataLoader(
                    ExitingDataset(bad=(args.fail_step + 3) * shard.batch_size),
                    batch_size=shard.batch_size,
                    num_workers=2,
                )
            )
        x, y = next(args.loader)
    elif args.case == "stall-loader" and rank == args.odd_rank and step == args.fail_step:
        loader = torch.utils.data.DataLoader(StuckDataset(args.hang_s), batch_size=shard.batch_size)
        x, y = next(iter(loader))
    else:
        x, y = shard.batch(step)
    loss = F.mse_loss(model(x), y)
    if args.case == "nan-guard":
        check_loss(loss, step, rank)
    opt.zero_grad()
    loss.backward()
    if args.case.startswith("stall-"):
        average_gradients(model, dist.get_world_size())
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    opt.step()
    return loss.detach(), grad_norm


def load_next_shard(data_dir, rank):
    path = os.path.join(data_dir, f"shard-{rank:05d}.parquet")
    with open(path, "rb") as f:
        return f.read()


def file_barrier(data_dir, rank, world):
    """Wait until every rank has touched its file (the ranks reach the bad batch together)."""
    os.makedirs(data_dir, exist_ok=True)
    open(os.path.join(data_dir, f"ready-{rank}"), "w").close()
    while len([n for n in os.listdir(data_dir) if n.startswith("ready-")]) < world:
        time.sleep(0.001)


def before_step(args, rank, step):
    if args.case in ("survive", "survive-then-crash") and rank == 0:
        score_samples(step)
        remote_reward(step)
    if args.case == "survive-then-crash" and step == args.fail_step:
        gather_response_tokens(step, rank, args.batch_size)
    if args.case == "abort" and rank == 1 and step == args.fail_step:
        os.abort()
    if args.faulthandler:
        faulthandler.dump_traceback_later(args.faulthandler)  # re-armed: S seconds for this step
    if args.case == "stall-sleep" and rank == args.odd_rank and step == args.fail_step:
        wait_for_shard_lock(args.hang_s)


def fault_before_step(args, rank, world, step):
    """The failure cases that strike before a step's work: a kill, a hang, a missing shard."""
    if args.case == "sigkill" and rank == 1 and step == args.fail_step:
        # what the kernel OOM killer does to a process: no Python exception, no output
        os.kill(os.getpid(), signal.SIGKILL)
    hang_rank = world - 1 if args.hang_rank is None else args.hang_rank
    if args.case in ("hang", "monitored-barrier") and rank == hang_rank and step == args.fail_step:
        time.sleep(args.hang_s)  # a stalled data loader on this rank
    if args.case == "monitored-barrier" and step == args.fail_step:
        # rank 0 waits for every other rank and names the first that does not arrive
        dist.monitored_barrier(timeout=timedelta(seconds=args.timeout))
    if args.case == "record" and rank == 1 and step == args.fail_step:
        load_next_shard(args.data_dir, rank)  # this rank's next shard is missing


def run(args):  # noqa: C901 (as samples/ ran: a refactor means capturing again)
    if args.slow_stderr > 0:
        sys.stderr = SlowLineWriter(sys.stderr, args.slow_stderr)
    if args.case == "abort":
        faulthandler.enable()  # as PYTHONFAULTHANDLER=1 does: a fatal signal prints every thread's stack
    if args.case in ("survive", "survive-then-crash") and not args.log_time:
        logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    if args.case == "missing-key":
        file_barrier(args.data_dir, int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
        collate_pairs([{"input_ids": [1, 2, 3]} for _ in range(4)])
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))
    rank = dist.get_rank()
    world = dist.get_world_size()
    torch.manual_seed(0)

    if args.case == "interleaved":
        # every rank must take part in new_group
        args.side_group = dist.new_group(ranks=list(range(1, world)))

    model = torch.nn.Linear(16, 1)
    if not args.case.startswith("stall-"):
        model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    if args.case == "healthy":
        # a common pattern in scripts written for GPUs; on a CPU-only host it only warns (and only
        # the warning is wanted: the scaler is never used)
        _scaler = torch.cuda.amp.GradScaler()
    poison = args.fail_step if (args.case == "nan-guard" and rank == 2) else None
    shard = SyntheticShard(rank, batch_size=args.batch_size, poison_step=poison)
    if rank == 0:
        print_config(args, world)
        n_params = sum(p.numel() for p in model.parameters())
        log(
            f"world_size={world} backend={dist.get_backend()} model=Linear(16, 1) params={n_params} "
            f"steps={args.steps}"
        )

    t0 = time.time()
    for step in range(1, args.steps + 1):
        before_step(args, rank, step)
        fault_before_step(args, rank, world, step)

        loss, grad_norm = train_step(model, opt, shard, step, args, rank)
        stats = torch.stack([loss, grad_norm.detach()])
        dist.all_reduce(stats)
        stats /= world
        if rank == 0:
            log(f"step:{step} - loss:{stats[0].item():.4f} - grad_norm:{stats[1].item():.4f} - lr:{args.lr}")
        time.sleep(args.step_s)

    if args.faulthandler:
        faulthandler.cancel_dump_traceback_later()
    if rank == 0:
        log(f"Training finished: {args.steps} steps in {time.time() - t0:.1f}s")
    if args.case == "final-save" and rank == 0:
        torch.save(model.state_dict(), os.path.join("checkpoints", "final", "model.pt"))
    if not args.no_destroy:
        dist.destroy_process_group()


def print_config(args, world):
    """What a verl job prints at its start: the packages it runs with, as `pip freeze` writes them, and
    its config as verl's main_ppo does (`pprint(OmegaConf.to_container(config))`)."""
    if not args.print_config:
        return
    from importlib.metadata import PackageNotFoundError, version
    from pprint import pprint

    for pkg in ("torch", "transformers"):
        try:
            print(f"{pkg}=={version(pkg)}", flush=True)
        except PackageNotFoundError:
            pass
    config = {
        "actor_rollout_ref": {"actor": {"optim": {"lr": args.lr}, "strategy": "ddp"}},
        "data": {"train_batch_size": args.batch_size * world},
        "trainer": {"n_gpus_per_node": world, "nnodes": 1, "total_training_steps": args.steps},
    }
    pprint(config)
    sys.stdout.flush()


def parse():
    p = argparse.ArgumentParser()
    p.add_argument(
        "--case",
        default="healthy",
        choices=[
            "healthy",
            "nan-guard",
            "sigkill",
            "hang",
            "interleaved",
            "record",
            "missing-key",
            "loader-worker-exit",
            "monitored-barrier",
            "stall-loader",
            "stall-sleep",
            "survive",
            "survive-then-crash",
            "final-save",
            "abort",
        ],
    )
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--fail-step", type=int, default=5)
    p.add_argument("--timeout", type=int, default=1800, help="process-group timeout, seconds")
    p.add_argument("--hang-s", type=float, default=60.0)
    p.add_argument("--hang-rank", type=int, default=None, help="the rank that stalls (default: the last)")
    p.add_argument("--step-s", type=float, default=0.2)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--batch-size", type=int, default=32, help="rows per rank and step")
    p.add_argument("--print-config", action="store_true", help="print versions and config (diff pairs)")
    p.add_argument("--no-destroy", action="store_true")
    p.add_argument("--odd-rank", type=int, default=3, help="the rank that stalls (stall-* cases)")
    p.add_argument("--faulthandler", type=float, default=0.0, help="dump stacks after S s in one step")
    p.add_argument("--log-time", action="store_true", help="time and level before the script's lines")
    p.add_argument("--data-dir", default="data")
    p.add_argument(
        "--slow-stderr",
        type=float,
        default=0.0,
        help="pause this many seconds after each stderr line (interleaving fixture)",
    )
    return p.parse_args()


@record
def main_recorded(args):
    run(args)


def main(args):
    run(args)


if __name__ == "__main__":
    cli_args = parse()
    if cli_args.log_time:
        use_log_time()
    if cli_args.case == "record":
        main_recorded(cli_args)  # errors are written to $TORCHELASTIC_ERROR_FILE (error.json)
    else:
        main(cli_args)
