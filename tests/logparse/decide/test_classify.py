"""The fallback layer's order of evidence (phrase, type, frames, weak hints, context, nearest entry)
and which lines it reads as bare failure lines."""

from __future__ import annotations

import pytest

from logparse.catalog_check import example_evidence
from logparse.decide.classify import classify, nearest_entries, unwrap_type
from logparse.observe.bare_lines import BareLineDetector
from logparse.observe.evidence import FailureEvidence
from logparse.read.normalize import Normalizer
from logparse.read.sources import Line
from patterns import load_builtin_catalog

VLLM = "/opt/venv/lib/python3.10/site-packages/vllm/v1/engine/core.py"
USER = "/workspace/job/train.py"


def frames(*items: tuple[str, str]) -> tuple[tuple[str, str, str | None], ...]:
    return tuple((file, function, None) for file, function in items)


def decided(evidence: FailureEvidence, catalog=None) -> tuple[str, str] | None:
    c = classify(evidence, catalog)
    return (c.category, c.basis) if c else None


def test_a_strong_phrase_beats_the_type() -> None:
    ev = FailureEvidence("ImportError", "/opt/venv/lib/flash_attn_2_cuda.so: undefined symbol: _ZN3c105Error")
    assert decided(ev) == ("version-mismatch", "phrase")


def test_a_strong_type_beats_the_frames() -> None:
    ev = FailureEvidence(
        "ImportError",
        "libcudart.so.12: cannot open shared object file",
        frames((USER, "main"), ("/workspace/job/math_reward.py", "compute_score")),
    )
    assert decided(ev) == ("import-error", "type")


def test_frames_beat_a_weak_type() -> None:
    ev = FailureEvidence("AssertionError", "", frames((USER, "main"), (VLLM, "step")))
    assert decided(ev) == ("vllm-error", "frame")
    assert decided(FailureEvidence("AssertionError", "n_gpus must divide 6")) == ("config-error", "weak-type")
    # a bare assert is an invariant of the code it sits in: it names no category
    assert decided(FailureEvidence("AssertionError", "")) is None


@pytest.mark.parametrize(
    "function",
    [
        "compute_score",
        "_compute_reward",
        "compute_reward",
        "compute_score_batch",
        "my_reward_fn",
        "reward_func",
        "_score_output",
    ],
)
def test_reward_function_names_are_matched_tolerantly(function: str) -> None:
    ev = FailureEvidence(
        "KeyError", "'answer'", frames((USER, "fit"), ("/workspace/job/scoring.py", function))
    )
    assert decided(ev) == ("reward-error", "frame")


def test_the_innermost_matching_frame_decides() -> None:
    dataset = "/opt/venv/lib/python3.10/site-packages/verl/utils/dataset/rl_dataset.py"
    tokenizer = "/opt/venv/lib/python3.10/site-packages/transformers/tokenization_utils_base.py"
    ev = FailureEvidence(
        "ValueError", "no template", frames((dataset, "__getitem__"), (tokenizer, "apply_chat_template"))
    )
    assert decided(ev) == ("tokenizer-error", "frame")
    ev = FailureEvidence(
        "KeyError", "'prompt'", frames((dataset, "__getitem__"), ("/x/pandas/core/frame.py", "__getitem__"))
    )
    assert decided(ev) == ("data-error", "frame")


def test_types_that_say_nothing_stay_open() -> None:
    for exc_type in ("RuntimeError", "ValueError", "Exception", "KeyError", "TypeError"):
        assert classify(FailureEvidence(exc_type, "something odd happened")) is None, exc_type


def test_a_wrapper_class_is_unwrapped() -> None:
    assert unwrap_type("ray.exceptions.RayTaskError(ModuleNotFoundError)") == "ModuleNotFoundError"
    assert unwrap_type("KeyError") == "KeyError"
    ev = FailureEvidence("ray.exceptions.RayTaskError(GetTimeoutError)", "ray::TaskRunner.run() (pid=1)")
    assert decided(ev) == ("timeout", "type")


def test_the_chain_is_read_after_the_final_exception() -> None:
    ev = FailureEvidence(
        "RuntimeError",
        "failed to build the dataset",
        (),
        chain=(("FileNotFoundError", "[Errno 2] No such file or directory: '/data/gsm8k/train.parquet'"),),
    )
    assert decided(ev) == ("data-error", "type")


def test_context_lines_come_after_everything_the_failure_says() -> None:
    own = FailureEvidence(
        "ImportError",
        "libcudart.so.12: cannot open shared object file",
        context=("NCCL error: unhandled system error",),
    )
    assert decided(own) == ("import-error", "type")
    bare = FailureEvidence(
        None,
        "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.",
        context=("Key 'n' is not in struct", "Could not override 'actor_rollout_ref.rollout.n'."),
    )
    c = classify(bare)
    assert (c.category, c.basis) == ("config-error", "phrase") and "a line just before it" in c.detail


def test_rays_list_of_possible_causes_decides_nothing() -> None:
    ev = FailureEvidence(
        "ray.exceptions.ActorDiedError",
        (
            "The actor died unexpectedly before finishing this task. The actor is dead because its worker process has "
            "died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error "
            "code 2. End of file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM "
            "killer due to high memory usage. (2) ray stop --force is called. (3) The worker is crashed unexpectedly due "
            "to SIGSEGV or other unexpected errors."
        ),
    )
    assert decided(ev) == ("ray-error", "phrase")


def test_exit_codes_by_signal() -> None:
    assert decided(
        FailureEvidence(None, "['/opt/venv/bin/python3', 'main.py'] exits with return code = -11")
    ) == ("segfault", "phrase")
    assert decided(FailureEvidence(None, "failed (exitcode: -9) local_rank: 1 (pid: 4102)")) == (
        "host-oom",
        "phrase",
    )
    assert decided(FailureEvidence(None, "failed (exitcode: -7) local_rank: 0 (pid: 4101)")) == (
        "shm-exhausted",
        "phrase",
    )
    assert classify(FailureEvidence(None, "failed (exitcode: 1) local_rank: 0 (pid: 4101)")) is None


@pytest.fixture(scope="module")
def catalog():
    return load_builtin_catalog()


def test_the_nearest_entry_names_a_new_wording(catalog) -> None:
    # a rewording of an OOM that no rule or entry matches word for word
    ev = FailureEvidence("torch.cuda.OutOfMemoryError", "")
    assert decided(ev) == ("cuda-oom", "type")
    reworded = FailureEvidence(
        "RuntimeError",
        "ran out of GPU memory while allocating 2.00 GiB on device 3; "
        "3.10 GiB free of 79.11 GiB total capacity",
    )
    near = nearest_entries(reworded, catalog)
    assert near and near[0].category == "cuda-oom"


def test_nearest_abstains_on_a_short_or_foreign_message(catalog) -> None:
    assert nearest_entries(FailureEvidence("ValueError", "bad"), catalog) == []
    foreign = FailureEvidence("ValueError", "the quick brown fox jumps over the lazy dog near the river bank")
    assert classify(foreign, catalog) is None


def record(text: str):
    return Normalizer().normalize(Line("x.log", 1, text))


@pytest.mark.parametrize(
    "text, kind",
    [
        ("ValueError: reward tensor has shape (8,), expected (8, 1024)", "exception"),
        ("[rankx]: ValueError: bad prompt key", "exception"),
        ("[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "exception"),
        ("omegaconf.errors.MissingMandatoryValue: Missing mandatory value: data.train_files", "phrase"),
        (
            "(WorkerDict pid=2210) ERROR 05-22 14:41:15 [core.py:1102] EngineCore failed to start.",
            "error-record",
        ),
        (
            "[2026-05-20 12:02:54,095] [ERROR] [launch.py:324:sigkill_handler] worker exits with return code = 1",
            "error-record",
        ),
        ("Error: dataset file /workspace/job/data/train.parquet is empty", "error-prefix"),
        ("FATAL: cannot open /workspace/job/data", "error-prefix"),
        ("Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.", "marker"),
        ("zsh: segmentation fault (core dumped)  python train.py", "phrase"),
        ("step:12 - actor/pg_loss:nan - actor/grad_norm:nan", "phrase"),
        ("{'loss': nan, 'grad_norm': nan, 'epoch': 0.4}", "phrase"),
    ],
)
def test_failure_lines(text: str, kind: str) -> None:
    found = BareLineDetector().detect(record(text))
    assert found is not None and found[0] == kind, (text, found)


@pytest.mark.parametrize(
    "text",
    [
        "(WorkerDict pid=2210) WARNING 05-22 14:41:15 [config.py:1402] errors in chat template are reported as warnings",
        "2026-10-07 10:00:01,000 ERROR http.py:40 -- request failed (attempt 1 of 5), retrying in 2 s",
        "step:12 - val/ErrorRate:0.12 - actor/pg_loss:0.01",
        "step:12 - critic/values/mean:nan - actor/pg_loss:0.01",
        "INFO: loaded dataset ErrorFreeMath-7k (12000 rows)",
        "FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated.",
        "Error: transient glitch, ignored",
        "0 errors found in 12000 rows",
        "Training Progress:  40%|████      | 2/5 [00:10<00:15,  5.0s/it]",
        "[response] The answer raises ValueError: no, it is 7",
    ],
)
def test_benign_look_alikes(text: str) -> None:
    assert BareLineDetector().detect(record(text)) is None, text


def test_example_blocks_are_read_as_a_scan_reads_them() -> None:
    ev = example_evidence(
        'Traceback (most recent call last):\n  File "/w/data.py", line 22, in __getitem__\n'
        "    prompt = row[\"q\"]\nKeyError: 'q'\n",
        block=True,
    )
    assert ev.exc_type == "KeyError" and ev.frames[-1][1] == "__getitem__"
