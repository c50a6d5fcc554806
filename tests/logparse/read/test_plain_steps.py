"""Issue 38: an ordinary training script's step lines are progress, learnt by their shape (a step or
iteration counter with numeric key/value pairs; patterns/progress.yaml `counter_lines`). Real captures
of samples/scripts/plain_train.py (capture.sh ONLY=steps and ONLY=shapes-hang) in tests/fixtures/steps/,
tests/fixtures/stalls/ and tests/fixtures/diff/plain-lr-divergence/."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from logparse.diff import diff_runs
from logparse.pipeline import analyse
from logparse.read.normalize import Normalizer
from logparse.read.progress_syntax import ProgressSyntax
from logparse.read.sources import Line
from patterns import load_builtin_catalog
from tests.conftest import FIXTURES
from tests.logparse.test_live import CLI

STEPS = FIXTURES / "steps"
CATALOG = load_builtin_catalog()
HEALTHY = {  # capture -> its last step
    "plain-healthy-logging.log": 20,
    "plain-healthy-bar.log": 12,
    "plain-healthy-iter.log": 12,
    "plain-healthy-epoch.log": 12,
    "plain-healthy-json-all-ranks.log": 12,
}


def _scan(path: Path):
    return analyse([str(path)], CATALOG)


def _steps(*lines: str) -> list[int | None]:
    """What a scan reads of each line, in order: its step, or None."""
    syntax, normalizer = ProgressSyntax(), Normalizer()
    out = []
    for i, text in enumerate(lines, 1):
        run = syntax.read(normalizer.normalize(Line("<t>", i, text), seq=i))
        out.append(run.steps[0] if run is not None and run.steps[0] >= 0 else None)
    return out


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_a_healthy_plain_run_is_healthy_in_training_at_its_last_step(name: str) -> None:
    r = _scan(STEPS / name)
    assert r.status == "healthy"
    assert r.progress.stage_reached == "training" and r.progress.last_step == HEALTHY[name]


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_a_healthy_plain_run_cut_at_random_lines_stays_healthy(name: str, tmp_path: Path) -> None:
    lines = (STEPS / name).read_bytes().splitlines(keepends=True)
    rng = random.Random(38)
    for cut in sorted(rng.sample(range(1, len(lines)), 4)):
        part = tmp_path / f"cut-{cut}.log"
        part.write_bytes(b"".join(lines[:cut]))
        assert _scan(part).status == "healthy", cut


def test_a_failure_in_step_12_is_placed_in_step_12() -> None:
    r = _scan(STEPS / "plain-crash-step12.log")
    assert r.status == "failed" and r.root_cause.rank == 1
    assert r.progress.last_step == 11  # the step lines are printed when a step is done
    assert r.root_cause.step == 12


def test_a_hang_is_stalled_after_its_last_step_with_the_odd_rank_named() -> None:
    r = _scan(STEPS / "plain-hang-iter.log")
    assert r.status == "stalled" and r.progress.last_step == 6
    assert "local rank 3 in broadcast" in r.stall.odd_one_out


def test_the_shared_stderr_hang_is_in_training_and_measured_by_its_timestamps() -> None:
    r = _scan(FIXTURES / "stalls" / "torchrun-shared-stderr-dumps.log")
    assert r.status == "stalled" and r.progress.stage_reached == "training" and r.progress.last_step == 2
    assert r.stall.silence_s is not None and 5 <= r.stall.silence_s <= 20  # the dumps came 10 s in


def test_diff_finds_the_loss_turning_inf_then_nan() -> None:
    folder = FIXTURES / "diff" / "plain-lr-divergence"
    out = diff_runs([str(folder / "good.log")], [str(folder / "bad.log")], CATALOG)
    assert out.divergences and out.divergences[0].key == "loss" and out.divergences[0].step == 2
    assert out.changes and out.changes[0].key == "config.optim.lr"


@pytest.mark.parametrize(
    "lines, expected",
    [
        # each shape counts from its second line (the one that shows the counter increasing)
        (["INFO step 6 loss 2.40 lr 1e-3", "INFO step 7 loss 2.31 lr 1e-3"], [None, 7]),
        (["Step 6/100 | loss=2.40", "Step 7/100 | loss=2.31", "Step 8/100 | loss=2.2"], [None, 7, 8]),
        (['{"step": 6, "loss": 2.4}', '{"step": 7, "loss": 2.31}'], [None, 7]),
        (["iter 6: loss 2.40", "iter 7: loss 2.31"], [None, 7]),
        (["epoch 1 step 6 loss: 2.40", "epoch 1 step 7 loss: 2.31"], [None, 7]),
        # a line that mentions a step once, a config's total, a counter that does not increase
        (["Saving the model after step 7 took 3.2 s"], [None]),
        (["  total_steps: 100", "  total_steps: 200", "  max_step: 300", "  max_step: 400"], [None] * 4),
        (["step 7 loss 2.31", "step 7 loss 2.31", "step 5 loss 2.31"], [None, None, None]),
        (["step 5 of the pipeline", "step 6 of the pipeline"], [None, None]),  # a word is no metric
        # another shape does not confirm this one
        (["step 6 loss 2.40", "step 7 acc 0.9"], [None, None]),
    ],
)
def test_a_shape_counts_once_its_counter_increases(lines: list[str], expected: list) -> None:
    assert _steps(*lines) == expected


def test_each_rank_confirms_its_own_shape() -> None:
    lines = [f"[rank{r}]:step 1 loss 2.0" for r in range(4)] + [
        f"[rank{r}]:step 2 loss 1.9" for r in range(4)
    ]
    assert _steps(*lines) == [None] * 4 + [2] * 4


@pytest.mark.slow  # ~12 s: a real live scan of a run that steps every 1.5 s
def test_follow_gives_no_alert_on_a_healthy_plain_run_stepping_every_second(tmp_path: Path) -> None:
    lines = (STEPS / "plain-healthy-logging.log").read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if " INFO step " in line)
    log = tmp_path / "train.log"
    log.write_text("".join(lines[: first + 1]))
    p = subprocess.Popen(
        CLI + ["scan", "--follow", "--stall-after", "3s", str(log), "-o", str(tmp_path / "r.json")],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        # a step every 1.5 s for 9 s, three times --stall-after: slower than the 1 s after which the watch
        # counts the silence, so step lines not read as steps would have said "before any step"
        with log.open("a") as fh:
            for line in lines[first + 1 : first + 7]:
                time.sleep(1.5)
                fh.write(line)
                fh.flush()
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert "ALERT" not in err
