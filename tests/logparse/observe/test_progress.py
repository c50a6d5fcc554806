"""StageTracker: stages reached, steps, progress bar, attempts, completion (fixtures in real formats)."""

from __future__ import annotations

import random
import statistics

import pytest

from logparse.observe.progress import StageTracker, StageTrackerConfig
from logparse.observe.progression import Progression, stopped_note
from logparse.read.normalize import Normalizer
from logparse.read.progress_syntax import keyword_pattern
from logparse.read.sources import InputStats, Line, read_input, strip_ansi
from tests.conftest import SAMPLES

START = [
    "ray init kwargs: {'num_cpus': None, 'runtime_env': {'env_vars': {'NCCL_DEBUG': 'WARN'}}}",
    "2025-08-22 22:50:01,100\tINFO worker.py:1832 -- Started a local Ray instance.",
    "\x1b[36m(TaskRunner pid=3165)\x1b[0m TaskRunner hostname: node-1, PID: 3165",
    "\x1b[36m(TaskRunner pid=3165)\x1b[0m {'actor_rollout_ref': {'actor': {'ppo_mini_batch_size': 64,",
    "\x1b[36m(TaskRunner pid=3165)\x1b[0m                                  'strategy': 'fsdp'}},",
    "\x1b[36m(TaskRunner pid=3165)\x1b[0m  'trainer': {'total_epochs': 1}}",
    "(TaskRunner pid=3165) [validate_config] All configuration checks passed successfully!",
    "(TaskRunner pid=3165) Using dataset class: RLHFDataset",
    "(TaskRunner pid=3165) dataset len: 7473",
    "(TaskRunner pid=3165) Size of train dataloader: 29, Size of val dataloader: 1",
    "(TaskRunner pid=3165) Total training steps: 4",
    "(TaskRunner pid=3165) colocated worker base class <class 'verl.single_controller.base.worker.Worker'>",
    "(WorkerDict pid=3588) Qwen2ForCausalLM contains 494.03M parameters",
    "(WorkerDict pid=3588) NCCL version 2.21.5+cuda12.4",
    "(WorkerDict pid=3588) kwargs: {'n': 1, 'logprobs': 0, 'max_tokens': 256, 'detokenize': False}",
    "(TaskRunner pid=3165) Training from scratch",
    "(TaskRunner pid=3165) \rTraining Progress:   0%|          | 0/4 [00:00<?, ?it/s]",
    "(TaskRunner pid=3165) step:1 - actor/pg_loss:np.float64(0.01) - timing_s/step:50.0 - training/global_step:1",
    "(TaskRunner pid=3165) \rTraining Progress:  25%|██▌       | 1/4 [00:50<02:30, 50.00s/it]",
    (
        "(TaskRunner pid=3165) step:2 - actor/pg_loss:np.float64(0.02) - timing_s/step:np.float64(60.0) - "
        "training/global_step:2"
    ),
    "(TaskRunner pid=3165) \rTraining Progress:  50%|█████     | 2/4 [01:50<01:50, 55.00s/it]",
    "(TaskRunner pid=3165) local_global_step_folder: checkpoints/demo/global_step_2",
    (
        "(WorkerDict pid=3588) INFO:2025-08-22 23:08:37,898:[Rank 0] Saved model to "
        "/ckpt/global_step_2/actor/model_world_size_1_rank_0.pt"
    ),
]
FINISH = [
    "(TaskRunner pid=3165) step:3 - actor/pg_loss:np.float64(0.03) - timing_s/step:70.0",
    "(TaskRunner pid=3165) \rTraining Progress:  75%|███████▌  | 3/4 [03:00<01:00, 60.00s/it]",
    "(TaskRunner pid=3165) step:4 - actor/pg_loss:np.float64(0.04) - timing_s/step:80.0",
    "(TaskRunner pid=3165) 'Final validation metrics: None'",
    "(TaskRunner pid=3165) \rTraining Progress: 100%|██████████| 4/4 [04:20<00:00, 65.00s/it]",
    "(WorkerDict pid=3590) Qwen2ForCausalLM contains 494.03M parameters\x1b[32m [repeated 3x across cluster]\x1b[0m",
    "(WorkerDict pid=3588) INFO:2025-08-22 23:12:00,000:[Rank 0] Saved model to /ckpt/global_step_4/actor/m.pt",
]


def feed(lines: list[str], tracker: StageTracker | None = None, first_seq: int = 1) -> Progression:
    """The progression of `lines` fed to a tracker (a new one, or `tracker`), frozen as the decision reads it."""
    tracker = tracker or StageTracker()
    norm = Normalizer()
    for i, text in enumerate(lines, first_seq):
        tracker.feed(norm.normalize(Line("job.log", i, strip_ansi(text)), i))
    return tracker.freeze()


def seq_of(lines: list[str], needle: str) -> int:
    return next(i for i, text in enumerate(lines, 1) if needle in text)


def test_timeline_in_order_of_first_appearance() -> None:
    p = feed(START).progress()
    assert [s.stage for s in p.timeline] == [
        "launch",
        "config",
        "data-load",
        "distributed-init",
        "model-load",
        "training",
        "checkpoint",
    ]
    launch = p.timeline[0]
    assert (launch.first_source, launch.first_line, launch.last_line) == ("job.log", 1, 3)
    assert (
        launch.first_time is not None and launch.first_time == launch.last_time
    )  # only Ray's line has a time
    config = p.timeline[1]
    assert (config.first_line, config.last_line) == (4, 7)
    assert p.timeline[-1].last_line == len(START) and p.timeline[-1].last_time is not None


def test_stage_at_is_the_last_stage_seen() -> None:
    t = feed(START)
    assert t.stage_at(0) is None
    assert t.stage_at(seq_of(START, "dataset len")) == "data-load"
    assert t.stage_at(seq_of(START, "contains 494.03M")) == "model-load"
    assert t.stage_at(seq_of(START, "NCCL version")) == "distributed-init"  # the last seen, not the highest
    assert t.stage_at(seq_of(START, "Training from scratch")) == "training"
    assert t.stage_at(10_000) == "checkpoint"


def test_steps_total_and_seconds_per_step() -> None:
    p = feed(START).progress()
    assert (p.stage_reached, p.last_step, p.total_steps, p.completed) == ("checkpoint", 2, 4, False)
    assert p.seconds_per_step == pytest.approx(55.0)  # median of timing_s/step 50 and np.float64(60.0)
    assert p.attempts == 1


def test_progress_as_of_an_earlier_record() -> None:
    t = feed(START)
    p = t.progress(end_seq=seq_of(START, "step:1 - "))
    assert (p.stage_reached, p.last_step, p.seconds_per_step) == ("training", 1, 50.0)
    assert [s.stage for s in p.timeline][-1] == "training"
    early = t.progress(end_seq=seq_of(START, "dataset len"))
    assert (early.stage_reached, early.last_step, early.total_steps) == ("data-load", None, None)


def test_completion_and_late_lines_after_it() -> None:
    lines = START + FINISH
    t = feed(lines)
    p = t.progress()
    assert (p.completed, p.last_step, p.total_steps, p.stage_reached) == (True, 4, 4, "shutdown")
    assert p.note is None
    assert p.seconds_per_step == pytest.approx(65.0)  # median of 50, 60, 70, 80
    shutdown = next(s for s in p.timeline if s.stage == "shutdown")
    assert shutdown.first_line == shutdown.last_line == seq_of(lines, "Final validation")
    # the dedup copy and the late checkpoint flush after the final marker start no stage
    assert t.stage_at(len(lines)) == "shutdown"


def test_stopped_without_error_note() -> None:
    p = feed(START).progress()
    assert p.note == stopped_note(p.last_step, p.total_steps, p.stage_reached)
    assert p.note.startswith("stopped at step 2 of 4 in checkpoint with no error and no completion marker")
    assert "still running, or was stopped from outside" in p.note
    assert feed(START).progress(failed=True).note is None
    early = feed(START[:9]).progress()
    assert early.note.startswith("stopped before the first training step in data-load")


def test_step_line_glued_to_progress_bar() -> None:
    lines = [
        (
            "[default0]:Training Progress:  33%|███▎      | 1/3 [00:02<00:04,  2.01s/it]step:1 - train/loss:2.5 - "
            "train/lr(1e-3):0.001"
        ),
        "[default0]:Training Progress:  67%|██████▋   | 2/3 [00:04<00:02,  2.01s/it]step:2 - train/loss:2.1",
    ]
    p = feed(lines).progress()
    assert (p.last_step, p.total_steps, p.stage_reached) == (2, 3, "training")
    assert p.seconds_per_step == pytest.approx(2.01)  # no timing_s/step: the bar's rate


def test_bar_only_when_console_logger_is_off() -> None:
    lines = ["(TaskRunner pid=7) \rTraining Progress:  16%|███▋   | 71/435 [1:10:40<6:31:06,  4.43it/s]"]
    p = feed(lines).progress()
    assert (p.last_step, p.total_steps) == (71, 435)
    assert p.seconds_per_step == pytest.approx(1 / 4.43)


def test_global_step_key_is_not_a_step_line() -> None:
    t = feed(["(TaskRunner pid=7) training/global_step:7 - training/epoch:0"])
    assert t.progress().last_step is None


def test_resume_sets_the_last_step_before_any_step_line() -> None:
    lines = START[:16] + [
        "(TaskRunner pid=3165) Load from checkpoint folder: /ckpt/demo/global_step_40",
        "(TaskRunner pid=3165) Setting global step to 40",
    ]
    assert feed(lines).progress().last_step == 40
    lines.append("(TaskRunner pid=3165) step:41 - actor/pg_loss:0.1 - timing_s/step:12.0")
    assert feed(lines).progress().last_step == 41


def test_attempts_restart_and_progress_per_attempt() -> None:
    restart = [
        "ray init kwargs: {'num_cpus': None}",
        "2025-08-23 09:00:00,000\tINFO worker.py:1832 -- Started a local Ray instance.",
        "(TaskRunner pid=4000) Resuming from /ckpt/demo/global_step_2, setting global step to 2",
        "(TaskRunner pid=4000) \rTraining Progress:  50%|█████     | 2/4 [00:00<?, ?it/s]",
    ]
    lines = START + restart
    t = feed(lines)
    second = len(START) + 1
    assert [a.seq for a in t.attempt_starts] == [
        1,
        second,
    ]  # `ray init kwargs` + `Started a local Ray` = one start
    assert [(a.source, a.line) for a in t.attempt_starts] == [("job.log", 1), ("job.log", second)]
    p = t.progress()
    assert (p.attempts, p.last_step, p.stage_reached, p.seconds_per_step) == (2, 2, "training", None)
    first = t.progress(end_seq=second - 1)
    assert (first.attempts, first.last_step, first.seconds_per_step) == (1, 2, pytest.approx(55.0))


def test_completion_belongs_to_its_attempt() -> None:
    lines = (
        START + FINISH + ["ray init kwargs: {'num_cpus': None}", "(TaskRunner pid=9) Training from scratch"]
    )
    t = feed(lines)
    assert t.progress().completed is False
    assert t.progress().stage_reached == "training"  # a new attempt: stages count again
    assert t.progress(end_seq=len(START) + len(FINISH)).completed is True


def test_repeated_sampling_kwargs_mean_rollout() -> None:
    lines = START[:18] + ["(WorkerDict pid=3588) kwargs: {'n': 1, 'logprobs': 0, 'max_tokens': 256}"]
    t = feed(lines)
    assert t.stage_at(seq_of(lines, "kwargs: {'n'")) == "model-load"
    assert t.stage_at(len(lines)) == "rollout"


def test_ray_dedup_copies_move_no_stage() -> None:
    lines = [
        *START[:13],
        "(WorkerDict pid=3588) Actor use_remove_padding=True",
        *START[13:18],
        (
            "(WorkerDict pid=3590) Actor use_remove_padding=True [repeated 3x across cluster] "
            "(Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication.)"
        ),
    ]
    assert feed(lines).stage_at(len(lines)) == "training"


def test_dedup_copy_counts_in_an_excerpt_without_the_first_copy() -> None:
    lines = [
        "(TaskRunner pid=3165) step:59 - actor/pg_loss:0.1",
        (
            "(WorkerDict pid=3590) [rank-0]: Saving model to /ckpt/global_step_60/actor/"
            "model_world_size_4_rank_0.pt [repeated 3x across cluster]"
        ),
    ]
    assert feed(lines).stage_at(2) == "checkpoint"


def test_a_bar_counting_fewer_steps_than_the_checkpoint_being_written_is_a_late_redraw() -> None:
    """verl saves step 60's checkpoint inside step 60, before its bar counts 60: a bar at 59/60 printed
    after the save began is the bar as it stood (flushed late), so the job is still in the checkpoint."""
    lines = [
        "(TaskRunner pid=3165) step:59 - actor/pg_loss:0.1",
        (
            "(WorkerDict pid=3590) [rank-0]: Saving model to /ckpt/global_step_60/actor/"
            "model_world_size_4_rank_0.pt [repeated 3x across cluster]"
        ),
        "(TaskRunner pid=3165) \rTraining Progress:  98%|█████████▊| 59/60 [10:03:47<10:14, 614.03s/it]",
    ]
    t = feed(lines)
    assert t.stage_at(3) == "checkpoint" and t.progress().last_step == 59
    # once the bar counts the step, the loop goes on
    done = "(TaskRunner pid=3165) \rTraining Progress: 100%|██████████| 60/60 [10:13:47<00:00, 614.03s/it]"
    assert feed([*lines, done]).stage_at(4) == "training"
    # a checkpoint that names no step, or an earlier one, says nothing about the bar: the loop went on
    assert (
        feed([lines[0], "(TaskRunner pid=3165) Saving checkpoint to /ckpt/latest", lines[2]]).stage_at(3)
        == "training"
    )
    earlier = lines[1].replace("global_step_60", "global_step_50")
    assert feed([lines[0], earlier, lines[2]]).stage_at(3) == "training"
    # another stage in between ends the checkpoint: a bar after it is no redraw of the checkpoint's step
    val = "(TaskRunner pid=3165) step:60 - val-core/openai/gsm8k/reward/mean@1:0.5"
    assert feed([*lines[:2], val, lines[2]]).stage_at(4) == "training"


def test_lines_without_keywords_are_not_examined() -> None:
    t = feed(["Traceback (most recent call last):", '  File "/x.py", line 3, in f', "ValueError: boom"])
    assert t.last_seq == 0 and t.progress().stage_reached is None


def test_bounds_keep_the_most_recent_and_say_so() -> None:
    config = StageTrackerConfig(max_transitions=4, max_marks=6, max_events=2)
    lines = []
    for step in range(1, 11):
        lines.append(f"(TaskRunner pid=1) step:{step} - actor/pg_loss:0.1 - timing_s/step:{step}.0")
        lines.append(f"(TaskRunner pid=1) local_global_step_folder: ckpt/global_step_{step}")
    t = feed(lines, StageTracker(config=config))
    assert t.stage_at(len(lines)) == "checkpoint"
    assert t.stage_at(len(lines) - 1) == "training"
    assert t.stage_at(1) is None  # older than the transitions kept
    assert len(t.transition_seqs) <= 4 and len(t.steps.seqs) <= 6
    assert t.progress().last_step == 10
    assert t.notes and "most recent" in t.notes[0]


def test_keyword_pattern_finds_every_keyword() -> None:
    words = ["step:", "steps", "Training Progress", "Train", "dataset len:", "{'a':"]
    pattern = keyword_pattern(words)
    for w in words:
        assert pattern.search(f"xx {w} yy")
    assert not pattern.search("trai step dataset")
    assert not keyword_pattern([]).search("anything")


def run_sample(name: str) -> Progression:
    path = str(SAMPLES / name)
    norm = Normalizer()
    t = StageTracker()
    for seq, line in enumerate(read_input(path, InputStats(path)), 1):
        t.feed(norm.normalize(line, seq))
    return t.freeze()


def test_sample_ray_healthy() -> None:
    p = run_sample("ray-healthy.log").progress()
    assert (p.last_step, p.total_steps, p.completed, p.stage_reached) == (5, 5, True, "shutdown")
    assert [s.stage for s in p.timeline] == [
        "launch",
        "config",
        "data-load",
        "model-load",
        "training",
        "shutdown",
    ]
    assert p.seconds_per_step == pytest.approx(1.52, abs=0.01)
    assert p.note is None


def test_sample_ray_actor_exception() -> None:
    t = run_sample("ray-actor-exception.log")
    p = t.progress(failed=True)
    assert (p.last_step, p.total_steps, p.completed) == (3, 6, False)
    assert p.stage_reached in ("training", "actor-update")
    assert p.note is None and [a.seq for a in t.attempt_starts] == [1]


def test_sample_torchrun_logs() -> None:
    healthy = run_sample("torchrun-healthy.log").progress()
    # its own end line, `Training finished: 20 steps in 2.2s`, is a completion marker (issue 22, point 7)
    assert (healthy.last_step, healthy.stage_reached, healthy.completed) == (20, "shutdown", True)
    assert healthy.note is None
    assert healthy.timeline[0].stage == "launch"  # torchrun's OMP_NUM_THREADS banner
    port = run_sample("torchrun-port-in-use.log").progress(failed=True)
    assert (port.stage_reached, port.last_step) == ("launch", None)


class _ListMarks:
    """What StageTracker kept before its marks became columns (a list of tuples per kind, trimmed
    the same way), and how it answered: the reference the columns must agree with."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.steps: list[tuple] = []
        self.bars: list[tuple] = []
        self.first: int | None = None  # the training stage's first line (a step line or a bar's marker)

    def add(self, items: list, item: tuple) -> None:
        self.first = self.first or item[0]
        items.append(item)
        if len(items) > self.cap:
            del items[: len(items) // 2]

    def went_on_after(self, seq: int) -> bool:
        """A later step line, or a later bar that counts more than the bar before it (a redraw of the
        same count, flushed late, is no progress)."""
        if self.steps and self.steps[-1][0] > seq:
            return True
        counts = [-1] + [b[1] for b in self.bars]  # (of the bars kept: the first kept one counts)
        return any(b[0] > seq and b[1] > counts[i] for i, b in enumerate(self.bars))

    def started_before(self, seq: int) -> bool:
        return any(items and items[0][0] < seq for items in (self.steps, self.bars)) or (
            self.first is not None and self.first < seq
        )

    def progress(self, begin: int, end: int, time_window: int) -> tuple:
        steps = [s for s in self.steps if begin <= s[0] <= end]
        bars = [b for b in self.bars if begin <= b[0] <= end]
        last = max(s[1] for s in steps) if steps else (bars[-1][1] if bars else None)
        times = [s[2] for s in steps if s[2] is not None][-time_window:]
        rates = [b[3] for b in bars if b[3] is not None]
        seconds = statistics.median(times) if times else (rates[-1] if rates else None)
        total = bars[-1][2] if bars else None
        if total is not None and last is not None and last > total:
            total = None  # a total the run went past is unknown (issue 22, point 7)
        return last, total, seconds


@pytest.mark.parametrize("seed", range(6))
def test_step_and_bar_columns_answer_as_the_lists_did(seed: int) -> None:
    """Random step lines (with and without timing_s/step, a huge step number now and then), bars (with
    and without a rate) and other lines, past the marks' limit: every question the scanner asks, at
    every seq, gets the answer the former list of tuples gave."""
    rnd = random.Random(seed)
    cap = rnd.choice([5, 8, 13])
    tracker = StageTracker(config=StageTrackerConfig(max_marks=cap))
    ref = _ListMarks(cap)
    norm = Normalizer()
    for seq in range(1, 400):
        kind = rnd.random()
        if kind < 0.35:
            step = rnd.choice([rnd.randrange(1, 500), rnd.randrange(1, 500), 10**30 + seq])
            secs = rnd.choice([None, rnd.random() * 9 + 0.1])
            text = f"(TaskRunner pid=7) step:{step} - a:1" + (f" - timing_s/step:{secs!r}" if secs else "")
            ref.add(ref.steps, (seq, step, secs))
        elif kind < 0.7:
            n, total = rnd.randrange(0, 500), rnd.randrange(1, 500)
            rate = rnd.choice([None, rnd.random() * 9 + 0.1])
            bracket = f"00:01<00:02, {rate!r}s/it" if rate else "00:01<?, ?it/s"
            text = f"(TaskRunner pid=7) \rTraining Progress:  1%|| {n}/{total} [{bracket}]"
            ref.add(ref.bars, (seq, n, total, rate))
        else:
            text = f"(WorkerDict pid=8) nothing here {seq}"
        tracker.feed(norm.normalize(Line("job.log", seq, text), seq))
        for probe in (1, seq // 2, seq, seq + 1):
            frozen = tracker.freeze()
            assert frozen.went_on_after(probe) == ref.went_on_after(probe)
            assert frozen.training_started_before(probe) == ref.started_before(probe)
        for end in (seq, rnd.randrange(1, seq + 1)):
            p = tracker.freeze().progress(end)
            want = ref.progress(-1, end, tracker.config.step_time_window)
            assert (p.last_step, p.total_steps, p.seconds_per_step) == want, end
    assert tracker.notes  # the limit was reached and said so


def _marks(marks) -> tuple:
    return (list(marks.seqs), [list(c) for c in marks.ints], [repr(list(c)) for c in marks.floats])  # (NaN)


def _state(tracker: StageTracker) -> tuple:
    """Everything a StageTracker holds, comparable."""
    spans = {stage: (s.first, s.last, s.first_time, s.last_time) for stage, s in tracker._spans.items()}
    return (
        spans,
        tracker._transition_seqs,
        tracker._transition_stages,
        tracker._transition_at,
        tracker._last_at,
        _marks(tracker._steps),
        _marks(tracker._bars),
        sorted(tracker._seen_in_attempt),
        tracker._progress_since_start,
        tracker._completed,
        sorted(tracker._dropped),
        tracker.last_seq,
        tracker.last_step_line,
        tracker._checkpoint_step,
        list(tracker._activity),
        tracker.attempts_started,
        tracker._completions,
        tracker.progress(),
        tracker.freeze().segments(),
        tracker.notes,
    )


@pytest.mark.parametrize("seed", range(40))
def test_a_run_applied_at_once_equals_its_lines_applied_each_as_a_run_of_one(seed: int) -> None:
    """StageTracker.apply is the one way in: a run of progress lines (steps, bars, markers of several
    stages, plain or not) leaves the tracker as each of its lines applied as a run of one does, also
    past the bounds on marks and transitions, after a completion and while a checkpoint is pending
    (then the run goes line by line); plain runs of MIN_BULK_LINES or more go a column at a time."""
    from logparse.observe import progress
    from logparse.read.progress_syntax import ProgressRun

    rnd = random.Random(seed)
    config = StageTrackerConfig(
        max_marks=rnd.choice([3, 10, 100_000]), max_transitions=rnd.choice([2, 5, 10_000])
    )
    one, many = StageTracker(config=config), StageTracker(config=config)
    known = one.matcher.markers
    plain = [i for i in range(len(known)) if one.syntax.plain_marker(i) and not known[i].attempt_start]
    others = [i for i in range(len(known)) if not one.syntax.plain_marker(i) and not known[i].attempt_start]
    assert len({known[i].stage for i in plain}) > 3 and others
    training = [i for i in plain if known[i].stage == "training"]
    markers = rnd.sample(plain, 3) + rnd.sample(training, 1) + ([rnd.choice(others)] if seed % 4 == 0 else [])
    bulk = []
    many._apply_bulk = lambda seq, run: (
        bulk.append(len(run.numbers)),
        type(many)._apply_bulk(many, seq, run),
    )
    nan = float("nan")
    seq = 0
    for _ in range(rnd.randrange(1, 12)):
        if rnd.random() < 0.15:  # a line of its own between the runs: a completion, a restart, a save
            seq += 1
            line = rnd.choice(
                [
                    "Final validation metrics: {'a': 1}",
                    "ray init kwargs: {'num_cpus': None}",
                    "Saving checkpoint to /ckpt/global_step_30",
                ]
            )
            for tracker in (one, many):
                tracker.feed(Normalizer().normalize(Line("a.log", seq, line), seq))
        m = rnd.randrange(0, 30)
        cols: dict[str, list] = {
            k: [] for k in ("numbers", "steps", "seconds", "markers", "n", "total", "rate")
        }
        for j in range(m):
            kind = rnd.random()
            step = rnd.randrange(50) if kind < 0.4 else -1
            marker = rnd.choice(markers) if 0.4 <= kind < 0.7 or (kind >= 0.9 and step < 0) else -1
            bar = rnd.randrange(50) if kind >= 0.6 else -1
            cols["numbers"].append(seq + j + 1)
            cols["steps"].append(step)
            cols["seconds"].append(rnd.choice([nan, 1.5]) if step >= 0 else nan)
            cols["markers"].append(marker)
            cols["n"].append(bar)
            cols["total"].append(100 if bar >= 0 else -1)
            cols["rate"].append(rnd.choice([nan, 2.5]) if bar >= 0 else nan)
        names = ("numbers", "steps", "seconds", "markers", "n", "total", "rate")
        for j in range(m):
            line = [(cols[k][j],) for k in names]
            one.apply(seq + 1 + j, ProgressRun("a.log", *line, ((None, None),)))
        many.apply(seq + 1, ProgressRun("a.log", *(cols[k] for k in names), [(None, None)] * m))
        seq += m
        assert _state(many) == _state(one)
    assert all(n >= progress.MIN_BULK_LINES for n in bulk)
