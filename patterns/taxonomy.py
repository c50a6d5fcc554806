"""The closed vocabulary of ../shared/TAXONOMY.md: root-cause categories and stages."""

from __future__ import annotations

CATEGORIES: dict[str, str] = {
    "import-error": "ModuleNotFoundError / ImportError: missing package or symbol, shadowed module",
    "version-mismatch": "incompatible versions of torch / vllm / transformers / flash-attn / verl / CUDA",
    "nccl-error": "NCCL communicator failure that is not a timeout",
    "collective-timeout": "NCCL/gloo watchdog timeout, a collective that hung",
    "rendezvous-failure": "torch.distributed rendezvous, TCPStore, master port in use, peers failing to meet",
    "cuda-oom": "GPU memory exhausted (torch.OutOfMemoryError, vLLM KV cache)",
    "host-oom": "process killed for host RAM (SIGKILL, Ray memory monitor)",
    "shm-exhausted": "/dev/shm too small (Bus error, unable to write to file </torch_)",
    "cuda-error": "CUDA runtime error: illegal memory access, device-side assert, no kernel image",
    "ray-error": "Ray cluster problem: resources, placement, actor died with no clearer cause",
    "vllm-error": "rollout-engine (vLLM / SGLang) error that is not OOM",
    "config-error": "Hydra / OmegaConf / verl config error",
    "data-error": "dataset file missing, schema / key errors, prompt too long",
    "tokenizer-error": "pad_token missing, chat template missing, tokenizer fails to load",
    "model-load-error": "HF model or checkpoint cannot be loaded",
    "reward-error": "reward function / reward model failure",
    "checkpoint-error": "checkpoint save fails: disk full, permissions, filesystem",
    "numerical-instability": "NaN / Inf in loss, grad norm or logits",
    "timeout": "any other timeout: rollout server, HTTP, ray.get, scheduler time limit",
    "segfault": "SIGSEGV / core dumped with no clearer cause",
    "unknown": "a failure that no other category names",
}

STAGES: tuple[str, ...] = (
    "launch",
    "import",
    "config",
    "data-load",
    "distributed-init",
    "model-load",
    "training",
    "rollout",
    "reward",
    "old-log-prob",
    "ref",
    "values",
    "advantage",
    "critic-update",
    "actor-update",
    "weight-sync",
    "validation",
    "checkpoint",
    "shutdown",
)
