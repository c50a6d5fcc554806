"""Issue 36, points 4 and 5, through the CLI: a native abort or compiler failure is named by its own
message and beats the rollout engine's generic death printed after it; a wait for resources that never
come is the cause of the kill or timeout that follows it. The logs are tests/fixtures/stories/ (written
to the documented formats, see its README.md) and short excerpts below in the same formats."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURES, run_cli

STORIES = FIXTURES / "stories"


def scan(path=None, text: str | None = None) -> dict:
    args = ["scan", "--format", "json"] + ([str(path)] if path is not None else [])
    return json.loads(run_cli(args, input=text).stdout)


def candidate(rc: dict, entry_id: str) -> dict:
    return next(c for c in rc["candidates"] if c["id"] == entry_id)


def test_an_llvm_abort_in_a_worker_beats_the_engine_death_printed_300_lines_later() -> None:
    path = STORIES / "vllm-serve-llvm-abort.log"
    lines = path.read_text().splitlines()
    first_llvm = next(i for i, line in enumerate(lines, 1) if line.startswith("LLVM ERROR: "))
    engine_dead = next(i for i, line in enumerate(lines, 1) if "EngineCore encountered a fatal error" in line)
    assert engine_dead - first_llvm > 300
    report = scan(path)
    rc = report["root_cause"]
    assert (report["status"], rc["category"], rc["id"]) == ("failed", "cuda-error", "llvm-cannot-select")
    assert rc["error_line"]["line"] == first_llvm
    assert rc["error_line"]["text"].startswith("LLVM ERROR: Cannot select: intrinsic %llvm.nvvm.")
    # the engine's death, the worker's and the front end's EngineDeadError are its echoes
    for echo in ("vllm-engine-dead", "vllm-worker-proc-died"):
        assert candidate(rc, echo)["reason"].startswith("an echo: explained by llvm-cannot-select")


def test_a_placement_group_no_node_can_hold_explains_the_time_limit_that_ends_the_job() -> None:
    report = scan(STORIES / "verl-placement-group-time-limit.log")
    rc = report["root_cause"]
    assert (report["status"], rc["category"]) == ("failed", "ray-error")
    assert rc["id"] == "ray-resources-unschedulable"
    wait = "No available node types can fulfill resource request {'CPU': 24.0, 'GPU': 8.0}"
    assert wait in rc["error_line"]["text"]
    assert candidate(rc, "slurm-time-limit")["reason"].startswith("an echo: explained by ray-resources")


def test_vllm_waiting_for_its_placement_group_explains_its_failed_start() -> None:
    report = scan(STORIES / "vllm-ray-placement-group-timeout.log")
    rc = report["root_cause"]
    assert (report["status"], rc["category"]) == ("failed", "ray-error")
    assert rc["id"] == "vllm-placement-group-unschedulable"
    assert "exceeds the total number of available GPUs" in rc["error_line"]["text"]
    assert rc["actor"] == "EngineCore_DP0"
    # Ray's autoscaler reports the same pending placement group: an echo, not a rival
    assert candidate(rc, "ray-resources-unschedulable")["reason"].startswith("an echo: explained by vllm-")


W = "(WorkerDict pid=7410, ip=10.0.0.8)"
EC = "(vLLMHttpServer pid=5102) (EngineCore_DP0 pid=5390)"
ENGINE_DEAD = (
    f"{EC} ERROR 12-04 10:06:03 [core.py:710] EngineCore encountered a fatal error.\n"
    "(vLLMHttpServer pid=5102) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
    "See stack trace (above) for the root cause.\n"
)
EXCERPTS = {
    # libstdc++'s terminate handler: the class says nothing, the what() line names the failure
    "terminate-cudnn-arch": (
        f"{W} terminate called after throwing an instance of 'c10::CuDNNError'\n"
        f"{W}   what():  cuDNN error: CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH\n",
        "cuda-error",
        "cudnn-status-error",
    ),
    "terminate-triton-oom": (
        "terminate called after throwing an instance of 'std::runtime_error'\n"
        "  what():  Triton Error [CUDA]: out of memory\n",
        "cuda-oom",
        "cuda-driver-api-error",
    ),
    # cuDNN 9's loader, then the worker's death as Ray reports it
    "cudnn-symbol": (
        "Unable to load any of {libcudnn_cnn.so.9.1.0, libcudnn_cnn.so.9.1, libcudnn_cnn.so.9, libcudnn_cnn.so}\n"
        "Invalid handle. Cannot load symbol cudnnCreateConvolutionDescriptor\n"
        "(TaskRunner pid=3165) ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n",
        "version-mismatch",
        "cuda-library-symbol-missing",
    ),
    # FlashInfer's check in a worker's traceback, then the engine's generic death
    "flashinfer-then-engine-dead": (
        f"{EC} ERROR 12-04 10:06:02 [multiproc_executor.py:703] RuntimeError: Check failed: "
        "(status == cudaSuccess) is false: BatchPrefillWithPagedKVCache failed with error invalid argument\n"
        + ENGINE_DEAD,
        "cuda-error",
        "flashinfer-kernel-error",
    ),
    "flash-attn-ampere-then-engine-dead": (
        f"{W} RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n" + ENGINE_DEAD,
        "cuda-error",
        "gpu-too-old-for-kernel",
    ),
    "triton-fp8-then-engine-dead": (
        f'{EC} ERROR 12-04 10:05:41 [core.py:708] ValueError("type fp8e4nv not supported in this '
        "architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')\")\n" + ENGINE_DEAD,
        "cuda-error",
        "triton-fp8-unsupported-arch",
    ),
}


@pytest.mark.parametrize("name", sorted(EXCERPTS))
def test_a_native_failure_is_named_by_its_message(name: str) -> None:
    text, category, entry = EXCERPTS[name]
    rc = scan(text=text)["root_cause"]
    assert (rc["category"], rc["id"]) == (category, entry)


def test_llvm_s_own_out_of_memory_abort_is_a_host_memory_failure() -> None:
    text = "step:1 - actor/pg_loss:0.01\nLLVM ERROR: out of memory\nAllocation failed\n"
    rc = scan(text=text)["root_cause"]
    assert rc["category"] == "host-oom" and rc["error_line"]["text"] == "LLVM ERROR: out of memory"


def test_a_wait_that_ended_is_no_failure() -> None:
    text = (
        "(autoscaler +14s) Error: No available node types can fulfill resource request {'CPU': 1.0, 'GPU': 1.0}. "
        "Add suitable node types to this cluster to resolve this issue.\n"
        "(autoscaler +44s) Resized to 64 CPUs, 8 GPUs.\n"
        "(TaskRunner pid=4021) step:1 - actor/pg_loss:0.1\n"
        "(TaskRunner pid=4021) step:2 - actor/pg_loss:0.1\n"
    )
    report = scan(text=text)
    assert report["status"] == "healthy" and report["root_cause"] is None


def test_an_attention_backend_check_vllm_logs_and_falls_back_from_is_not_the_cause() -> None:
    text = (
        "(Worker_TP0 pid=300) ERROR 12-04 10:02:31 [fa_utils.py:171] Cannot use FA version 2 is not supported "
        "due to FA2 is only supported on devices with compute capability >= 8\n"
        "(Worker_TP0 pid=300) INFO 12-04 10:02:31 [cuda.py:366] Using FlashInfer backend on V1 engine.\n"
        "(WorkerDict pid=3721) RuntimeError: BatchPrefillWithPagedKVCache failed with error invalid argument\n"
    )
    rc = scan(text=text)["root_cause"]
    assert rc["id"] == "flashinfer-kernel-error" and "BatchPrefill" in rc["error_line"]["text"]
