"""Known upstream issues against a job (logparse/decide/known_issues.py): each verdict (matches, may
match, fixed in your version, none) on logs written to the real formats of verl, Ray and vLLM, and the
range boundaries: no entry is ever shown as a match for a version outside its range."""

from __future__ import annotations

from pathlib import Path

import pytest

from logparse.decide.known_issues import Verdict, check_package, match_known_issues, verdict_of
from logparse.model import Evidence, Fix, RootCause
from logparse.pipeline import analyse
from patterns import load_builtin_catalog
from patterns.upstream_issues import KnownIssues, load_known_issues, parse_specifier, parse_version

CATALOG = load_builtin_catalog()
BUILTIN = load_known_issues()

# A verl job on Ray whose vLLM prints its version at engine start (vLLM 0.6.3's wording), then fails to
# load a Qwen3 checkpoint: vLLM 0.6.3 has no Qwen3 (vllm-project/vllm#22973).
VERL_VLLM_QWEN3 = """\
2025-06-01 10:00:01,000\tINFO worker.py:1832 -- Started a local Ray instance. View the dashboard at 127.0.0.1:8265
(TaskRunner pid=2201) {{'actor_rollout_ref': {{'rollout': {{'name': 'vllm', 'gpu_memory_utilization': 0.6}}}}}}
(WorkerDict pid=3101, ip=10.0.0.2) INFO 06-01 10:01:12 llm_engine.py:237] Initializing an LLM engine (v{vllm}) with config: model='/models/Qwen3-8B', speculative_config=None, tokenizer='/models/Qwen3-8B', dtype=torch.bfloat16
(WorkerDict pid=3101, ip=10.0.0.2) Traceback (most recent call last):
(WorkerDict pid=3101, ip=10.0.0.2)   File "/opt/venv/lib/python3.10/site-packages/vllm/model_executor/model_loader/utils.py", line 32, in get_model_architecture
(WorkerDict pid=3101, ip=10.0.0.2)     return ModelRegistry.resolve_model_cls(architectures)
(WorkerDict pid=3101, ip=10.0.0.2) ValueError: Model architectures ['Qwen3ForCausalLM'] are not supported for now. Supported architectures: dict_keys(['AquilaModel', 'LlamaForCausalLM'])
"""

# The same failure where the log shows no vLLM version (no engine banner).
QWEN3_NO_VERSION = """\
(TaskRunner pid=2201) {'actor_rollout_ref': {'rollout': {'name': 'vllm'}}}
(WorkerDict pid=3101, ip=10.0.0.2) ValueError: Model architectures ['Qwen3ForCausalLM'] are not supported for now. Supported architectures: dict_keys(['AquilaModel'])
"""

# vLLM's multiprocessing worker failing to initialise CUDA in a forked process (fixed in 0.6.3 by
# vllm-project/vllm#8823), in a log whose engine banner shows vLLM 0.6.4.
FORK_WITH_FREEZE = """\
INFO 03-02 11:19:58 llm_engine.py:237] Initializing an LLM engine (v0.6.4) with config: model='/models/Qwen2.5-7B-Instruct', tensor_parallel_size=2
(VllmWorkerProcess pid=4412) ERROR 03-02 11:20:05 multiproc_worker_utils.py:233] Exception in worker VllmWorkerProcess while processing method init_device: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method
"""

SGLANG_EMPTY_CACHE = """\
sglang=={sglang}
(WorkerDict pid=1881, ip=10.0.0.2) Traceback (most recent call last):
(WorkerDict pid=1881, ip=10.0.0.2)   File "/opt/venv/lib/python3.10/site-packages/sglang/srt/model_loader/weight_utils.py", line 460, in pt_weights_iterator
(WorkerDict pid=1881, ip=10.0.0.2)     torch.cuda.empty_cache()
(WorkerDict pid=1881, ip=10.0.0.2) RuntimeError: captures_underway.empty() INTERNAL ASSERT FAILED at "../c10/cuda/CUDACachingAllocator.cpp":2967, please report a bug to PyTorch.
"""


def _report(tmp_path: Path, text: str, known: KnownIssues | None = None):
    log = tmp_path / "job.log"
    log.write_text(text, encoding="utf-8")
    return analyse([str(log)], CATALOG, known_issues=known if known is not None else BUILTIN)


def test_matches_when_the_log_prints_a_version_in_range(tmp_path: Path) -> None:
    report = _report(tmp_path, VERL_VLLM_QWEN3.format(vllm="0.6.3"))
    assert report.environment["vllm"] == "0.6.3"
    first = report.known_issues[0]
    assert (first.id, first.verdict) == ("vllm-0-6-3-no-qwen3", "matches")
    assert first.url == "https://github.com/vllm-project/vllm/issues/22973"
    assert first.versions[0].state == "in-range" and first.versions[0].job == "0.6.3"
    assert "update vLLM" in first.source_quote and first.workaround


def test_no_match_when_the_printed_version_is_outside_the_range(tmp_path: Path) -> None:
    report = _report(tmp_path, VERL_VLLM_QWEN3.format(vllm="0.7.3"))
    assert report.root_cause is not None and report.environment["vllm"] == "0.7.3"
    assert all(k.id != "vllm-0-6-3-no-qwen3" for k in report.known_issues)
    assert report.known_issues == ()


def test_may_match_says_which_version_to_check_and_how(tmp_path: Path) -> None:
    report = _report(tmp_path, QWEN3_NO_VERSION)
    (k,) = report.known_issues
    assert k.verdict == "may-match"
    assert k.versions[0].job is None and k.versions[0].check == "pip show vllm"
    assert "check vllm" in k.reason and "pip show vllm" in k.reason


def test_fixed_in_your_version_is_shown_last(tmp_path: Path) -> None:
    report = _report(tmp_path, SGLANG_EMPTY_CACHE.format(sglang="0.4.6.post1"))
    assert report.environment["sglang"] == "0.4.6.post1"
    (k,) = report.known_issues
    assert (k.id, k.verdict) == ("sglang-pt-weights-empty-cache-assert", "fixed-in-your-version")
    assert "at or past the fix (0.4.6)" in k.reason


def test_an_issue_the_thread_leaves_open_names_no_fix(tmp_path: Path) -> None:
    report = _report(tmp_path, FORK_WITH_FREEZE)
    assert report.environment["vllm"] == "0.6.4"
    (k,) = report.known_issues
    assert k.id == "vllm-fork-cuda-reinit" and k.verdict != "fixed-in-your-version"
    assert k.fix_pr is None and k.fixed_in.startswith("Not fixed per the thread")


def test_a_healthy_log_has_no_known_issues(tmp_path: Path) -> None:
    report = _report(tmp_path, "(TaskRunner pid=1) step:1 - actor/loss:0.5\n")
    assert report.root_cause is None and report.known_issues == ()


# -- the range boundary: a team's own entry, its range and fix as pip reads them ---------------------------
TEAM_FILE = """\
- id: team-rollout-hang
  project: our-infra
  url: https://tracker.example.internal/browse/RL-1234
  title: Rollout dies with engine core dead after a weight sync
  symptom:
    patterns: ['EngineCore encountered an issue']
  affected: {vllm: '>=0.8.0,<0.8.3'}
  fixed_in:
    versions: {vllm: 0.8.3}
    text: Fixed in vLLM 0.8.3.
  workaround: Pin vllm==0.7.3 until the upgrade.
  source_quote: 'RL-1234: "confirmed on 0.8.0 to 0.8.2, gone in 0.8.3".'
  examples:
    match:
      - '(WorkerDict pid=512, ip=10.0.0.2) ERROR 05-02 10:00:00 [core.py:343] EngineCore encountered an issue. See stack trace (above) for the root cause.'
    no_match:
      - line: '(WorkerDict pid=512, ip=10.0.0.2) INFO 05-02 10:00:00 [core.py:58] Initializing a V1 LLM engine (v0.8.2)'
        why: the engine starting
"""

ENGINE_DEAD = """\
(WorkerDict pid=512, ip=10.0.0.2) INFO 05-02 09:58:00 [core.py:58] Initializing a V1 LLM engine (v{vllm}) with config: model='/models/Qwen2.5-7B-Instruct'
(WorkerDict pid=512, ip=10.0.0.2) ERROR 05-02 10:00:00 [core.py:343] EngineCore encountered an issue. See stack trace (above) for the root cause.
"""


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> KnownIssues:
    path = tmp_path_factory.mktemp("team") / "ours.yaml"
    path.write_text(TEAM_FILE, encoding="utf-8")
    return load_known_issues([str(path)], builtin=False)


@pytest.mark.parametrize(
    ("vllm", "verdict"),
    [
        ("0.7.3", None),  # below the range: never shown
        ("0.8.0", "matches"),  # the lower bound is in
        ("0.8.2", "matches"),
        ("0.8.2+cu124", "matches"),  # a local build of 0.8.2
        # PEP 440 (as pip reads it): `<0.8.3` leaves out 0.8.3's own pre-releases, which may have the
        # fix; outside the range and before the fix: not shown
        ("0.8.3rc1", None),
        ("0.8.1rc1", "matches"),  # another release's pre-release is in
        ("0.8.3", "fixed-in-your-version"),  # the upper bound is the fix
        ("0.9.1", "fixed-in-your-version"),
    ],
)
def test_range_boundaries(tmp_path: Path, team: KnownIssues, vllm: str, verdict: str | None) -> None:
    report = _report(tmp_path, ENGINE_DEAD.format(vllm=vllm), team)
    assert report.environment["vllm"] == vllm
    got = [k.verdict for k in report.known_issues]
    assert got == ([] if verdict is None else [verdict])
    if verdict == "matches":  # an internal tracker's URL is the entry's own
        assert report.known_issues[0].url.startswith("https://tracker.example.internal/")


def _root(message: str) -> RootCause:
    return RootCause(
        id="unknown",
        category="unknown",
        title="t",
        summary=message,
        message=message,
        evidence=(Evidence("job.log", 1, message),),
        rank=None,
        local_rank=None,
        pid=None,
        actor=None,
        node=None,
        stage=None,
        confidence=0.5,
        remediation=Fix("s", "w", (), ()),
    )


VERSIONS = ["0.1", "0.6.3", "0.8.0", "0.8.2", "0.8.3", "1.0", "2.3.0", "2.4.0", "2.6.0", "4.57.3", "2.29.2"]


def test_no_builtin_entry_matches_a_version_outside_its_range() -> None:
    """Every built-in entry, for every package it names at every version above: a `matches` verdict
    only where the version is inside the stated range and before the fix."""
    for issue in BUILTIN.entries:
        for package in issue.packages:
            for v in VERSIONS:
                env = {
                    p: v
                    for p in ("vllm", "torch", "sglang", "ray", "transformers", "flash_attn", "nccl", "verl")
                }
                checks = tuple(check_package(issue, p, env) for p in issue.packages)
                verdict = verdict_of(issue, checks)
                spec = issue.specifier_of(package)
                fix = issue.fixed_in.version_of(package)
                if verdict is Verdict.MATCHES and env.get(package) is not None and package in env:
                    assert spec is not None and parse_specifier(spec).contains(parse_version(v)), (
                        issue.id,
                        v,
                    )
                    assert fix is None or parse_version(v) < parse_version(fix), (issue.id, v)


def test_symptom_kinds_must_all_hold() -> None:
    """An entry naming a catalog entry and a message matches only a root cause of that entry with
    that message."""
    torch_oom = next(k for k in BUILTIN.entries if k.id == "verl-torch-2-6-fsdp-state-dict-oom")
    only_this = KnownIssues((torch_oom,))
    assert match_known_issues(_root("torch.OutOfMemoryError: CUDA out of memory."), {}, only_this) == ()


# An illegal memory access raised inside SGLang's scheduler (a verl job rolling out with SGLang): the
# vLLM entries that name the same catalog entry do not apply.
SGLANG_IMA = """\
(WorkerDict pid=7001, ip=10.0.0.2) Traceback (most recent call last):
(WorkerDict pid=7001, ip=10.0.0.2)   File "/opt/venv/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py", line 1010, in event_loop_normal
(WorkerDict pid=7001, ip=10.0.0.2)     result = self.run_batch(batch)
(WorkerDict pid=7001, ip=10.0.0.2) RuntimeError: CUDA error: an illegal memory access was encountered
"""
VLLM_IMA = SGLANG_IMA.replace("sglang/srt/managers/scheduler.py", "vllm/worker/model_runner.py")


def test_a_vllm_issue_does_not_apply_to_an_sglang_rollout(tmp_path: Path) -> None:
    report = _report(tmp_path, SGLANG_IMA)
    assert report.root_cause is not None and report.root_cause.id == "cuda-illegal-memory-access"
    assert report.known_issues == ()
    vllm = _report(tmp_path, VLLM_IMA)
    assert {k.id for k in vllm.known_issues} >= {"verl-vllm-0-6-3-illegal-memory-access"}
    assert all(k.verdict == "may-match" for k in vllm.known_issues)  # no vLLM version in the log
