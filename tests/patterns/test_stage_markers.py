"""Stage markers (patterns/stages.yaml): schema checked at load, every example run through the real
normaliser and the marker matcher, and the wordings of the reference each mapped to its stage."""

from __future__ import annotations

import functools

import pytest

from logparse.catalog_check import bare_message, check_marker_examples
from logparse.decide.stage import stage_of_task
from logparse.read.progress_syntax import MarkerMatcher
from patterns import STAGES, CatalogError
from patterns.loader import slow_probe
from patterns.stages import StageMarker, builtin_stage_markers, load_stage_markers, task_stages

MARKERS = builtin_stage_markers()

GOOD = """\
task_stages:
  init_model: model-load
markers:
  - id: my-marker
    stage: data-load
    keywords: ['rows loaded']
    patterns:
      - '^(?P<rows>\\d+) rows loaded'
    examples:
      match: ['(TaskRunner pid=1) 12 rows loaded']
      no_match:
        - line: 'no rows loaded'
          why: nothing was loaded
"""


def test_builtin_markers_load_with_known_stages_and_unique_ids() -> None:
    ids = [m.id for m in MARKERS.markers]
    assert len(ids) == len(set(ids)) > 50
    assert all(m.stage in STAGES for m in MARKERS.markers if not m.activity)
    assert all(m.stage is None for m in MARKERS.markers if m.activity)
    assert {m.id for m in MARKERS.markers if m.activity} == {"http-request-answered"}
    assert all(m.repeat_stage in (None, *STAGES) for m in MARKERS.markers)
    assert {m.id for m in MARKERS.markers if m.completion} == {
        "final-validation-metrics",
        "sft-total-time",
        "hf-trainer-runtime-summary",
        "training-finished",
        "torchrun-worker-group-succeeded",
    }
    assert {"ray-init-kwargs", "ray-local-instance", "torchrun-omp-banner"} <= {
        m.id for m in MARKERS.markers if m.attempt_start
    }


@functools.lru_cache(maxsize=1)
def all_example_results() -> tuple[int, tuple]:
    count, failures = check_marker_examples(MARKERS)
    return count, tuple(failures)


@pytest.mark.parametrize("marker", MARKERS.markers, ids=lambda m: m.id)
def test_marker_examples_through_normaliser(marker: StageMarker) -> None:
    count, failures = all_example_results()  # with all markers: "claimed first by another marker" too
    mine = [str(f) for f in failures if f.marker.id == marker.id]
    assert not mine, "\n".join(mine)
    assert count >= 2 * len(MARKERS.markers)


# The wordings named in the design (reference §1-§7), each with the real prefixes of a log line.
WORDINGS = [
    ("2025-04-30 20:59:12,200\tINFO worker.py:1832 -- Started a local Ray instance.", "launch"),
    ("ray init kwargs: {'num_cpus': 2}", "launch"),
    ("(TaskRunner pid=1888103) TaskRunner hostname: node-7, PID: 1888103", "launch"),
    (
        (
            "W0731 10:50:05.111000 3247964 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable "
            "for each process to be 1 in default, to avoid your system being overloaded."
        ),
        "launch",
    ),
    (
        "(TaskRunner pid=1888103) {'actor_rollout_ref': {'actor': {'checkpoint': {'contents': ['model',",
        "config",
    ),
    ("(TaskRunner pid=1888103) [validate_config] All configuration checks passed successfully!", "config"),
    ("(TaskRunner pid=1888103) Using dataset class: RLHFDataset", "data-load"),
    ("(TaskRunner pid=1888103) Using default dataset class: RLHFDataset", "data-load"),
    ("(TaskRunner pid=1888103) dataset len: 7473", "data-load"),
    ("(TaskRunner pid=1888103) filter dataset len: 7473", "data-load"),
    ("(TaskRunner pid=1888103) Size of train dataloader: 3, Size of val dataloader: 1", "data-load"),
    ("(TaskRunner pid=1888103) Total training steps: 45", "data-load"),
    (
        (
            "(TaskRunnerV1 pid=9) INFO:2026-08-20 10:00:01,234:train and validate dataloader initialized, train dataset "
            "size: 10, val dataset size: 2"
        ),
        "data-load",
    ),
    (
        "(TaskRunner pid=1888103) colocated worker base class <class 'verl.single_controller.base.worker.Worker'>",
        "distributed-init",
    ),
    (
        "(TaskRunnerV1 pid=9) INFO:2026-08-20 10:00:02,000:create worker group dict_keys(['actor_rollout'])",
        "distributed-init",
    ),
    (
        "(TaskRunnerV1 pid=9) INFO:2026-08-20 10:00:02,001:worker group kwargs: {'device_name': 'cuda'}",
        "distributed-init",
    ),
    (
        (
            "(TaskRunner pid=1888103) WARNING:2025-04-30 20:59:21,921:Waiting for register center actor X_register_center "
            "to be ready. Elapsed time: 0 seconds out of 300 seconds."
        ),
        "distributed-init",
    ),
    ("(WorkerDict pid=1888709) NCCL version 2.21.5+cuda12.4", "distributed-init"),
    (
        (
            "node-2:842624:842624 [0] NCCL INFO ncclCommInitRankConfig comm 0x55d1 rank 0 nranks 8 cudaDev 0 nvmlDev 0 "
            "busId 7000 commId 0x5a1c - Init START"
        ),
        "distributed-init",
    ),
    (
        (
            "node-2:842624:842624 [0] NCCL INFO ncclCommInitRankConfig comm 0x55d1 rank 0 nranks 8 cudaDev 0 nvmlDev 0 "
            "busId 7000 commId 0x5a1c - Init COMPLETE"
        ),
        "distributed-init",
    ),
    ("(WorkerDict pid=26107) [2025-11-20 01:13:05 TP0] Init torch distributed begin.", "distributed-init"),
    ("(WorkerDict pid=1888709) Qwen2ForCausalLM contains 494.03M parameters", "model-load"),
    (
        (
            "(WorkerDict pid=1888709) Before critic FSDP, memory allocated (GB): 0.00, memory reserved (GB): 0.00, "
            "device memory used/total (GB): 0.51/79.33"
        ),
        "model-load",
    ),
    (
        (
            "(WorkerDict pid=1888709) After critic FSDP, memory allocated (GB): 0.23, memory reserved (GB): 2.01, "
            "device memory used/total (GB): 5.33/79.33"
        ),
        "model-load",
    ),
    ("(WorkerDict pid=1888709) Model config after override: Qwen2Config {", "model-load"),
    (
        "(WorkerDict pid=1888709) wrap_policy: functools.partial(<function _or_policy at 0x7f2d>, policies=[])",
        "model-load",
    ),
    (
        "(WorkerDict pid=26107) \rLoading checkpoint shards:  75%|███████▌  | 3/4 [00:02<00:00,  1.42it/s]",
        "model-load",
    ),
    ("(WorkerDict pid=1888709) Total steps: 45, num_warmup_steps: 0", "model-load"),
    (
        (
            "(EngineCore_0 pid=82) INFO 08-27 21:02:50 [core.py:69] Initializing a V1 LLM engine (v0.10.1) with config: "
            "model='m'"
        ),
        "model-load",
    ),
    ("(WorkerDict pid=1891847) kwargs: {'n': 1, 'logprobs': 0, 'max_tokens': 256}", "model-load"),
    ("(TaskRunner pid=5120) AgentLoopManager: ['10.0.0.1:34567']", "model-load"),
    ("(TaskRunnerV1 pid=9) LLMServerManager: ['10.0.0.2:41001']", "model-load"),
    (
        (
            "(EngineCore pid=326) INFO 10-06 17:00:33 [kv_cache_utils.py:2464] GPU KV cache size: 460,496 tokens, "
            "Maximum concurrency for 131,072 tokens per request: 3.51x"
        ),
        "model-load",
    ),
    ("INFO 01-18 08:13:37 llm_engine.py:275] # GPU blocks: 3418, # CPU blocks: 327", "model-load"),
    ("(TaskRunnerV1 pid=9) INFO:2026-08-20 10:02:12,500:all initialize finished, ready to fit", "model-load"),
    (
        "(TaskRunnerV1 pid=9) INFO:2026-08-20 10:02:09,000:actor and ref model engine initialized",
        "model-load",
    ),
    ("(TaskRunner pid=1888103) Training from scratch", "training"),
    ("(TaskRunner pid=23446) Load from checkpoint folder: ckpt/global_step_40", "training"),
    ("(TaskRunner pid=23446) Resuming from ckpt/global_step_40", "training"),
    ("(TaskRunner pid=23446) Setting global step to 40", "training"),
    (
        "(TaskRunner pid=1888103) \rTraining Progress:   2%|▏         | 1/45 [01:02<46:08, 62.92s/it]",
        "training",
    ),
    (
        "(TaskRunner pid=3165) test_gen_batch meta info: {'eos_token_id': 151645, 'validate': True}",
        "validation",
    ),
    ("(TaskRunner pid=3165) validation generation end", "validation"),
    (
        "(TaskRunner pid=480334) (\"Initial validation metrics: {'val/test_score/openai/gsm8k': \"",
        "validation",
    ),
    ("(TaskRunner pid=1888103) local_global_step_folder: checkpoints/x/global_step_10", "checkpoint"),
    (
        "(TaskRunnerV1 pid=9) INFO:2026-08-20 11:00:00,000:Saving checkpoint to checkpoints/x/global_step_80",
        "checkpoint",
    ),
    (
        "(WorkerDict pid=3588) INFO:2025-08-22 23:08:37,898:[Rank 0] Saved model to /ckpt/actor/model.pt",
        "checkpoint",
    ),
    (
        "(WorkerDict pid=1888709) [rank-0]: Saving model to /ckpt/actor/model_world_size_8_rank_0.pt",
        "checkpoint",
    ),
    ("(TaskRunner pid=1888103) ('Final validation metrics: None')", "shutdown"),
    ("[default0]:Total time for train steps: 523.41s", "shutdown"),
    # the VERL_DEBUG=1 wordings of troubleshooting guides (not a real verl switch; recognised anyway)
    ("Placing actor on devices: [0,1]", "distributed-init"),
    ("Building data pipeline with batch_size=8", "data-load"),
    ("Starting rollout generation...", "rollout"),
    ("Computing KL divergence...", "ref"),
    # VERL_LOGGING_LEVEL=DEBUG memory reports of model init
    (
        (
            "(WorkerDict pid=7) DEBUG:2025-04-30 20:59:40,101:After init Critic from HF AutoModel, memory allocated (GB): "
            "0.00, memory reserved (GB): 0.00, device memory used/total (GB): 0.51/79.33"
        ),
        "model-load",
    ),
]


@pytest.mark.parametrize(("line", "stage"), WORDINGS, ids=[w[0][:50] for w in WORDINGS])
def test_reference_wordings_map_to_their_stage(line: str, stage: str) -> None:
    hit = MarkerMatcher(MARKERS).match(bare_message(line))
    assert hit is not None, f"no marker for {bare_message(line)!r}"
    assert hit.marker.stage == stage, hit.marker.id


@pytest.mark.parametrize(
    "line",
    [
        "(TaskRunner pid=1) step:3 - training/global_step:3 - actor/pg_loss:0.1",
        "Traceback (most recent call last):",
        "(WorkerDict pid=2) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "(TaskRunner pid=1)                                  'ppo_mini_batch_size': 64,",
    ],
)
def test_ordinary_lines_are_no_markers(line: str) -> None:
    assert MarkerMatcher(MARKERS).match(bare_message(line)) is None


def test_named_groups_reach_the_hit() -> None:
    matcher = MarkerMatcher(MARKERS)
    assert matcher.match("Total training steps: 45").groups["total_steps"] == "45"
    assert matcher.match("Setting global step to 40").groups["resume_step"] == "40"


def test_builtin_markers_pass_the_checks_a_lazy_load_skips() -> None:
    """At each start the built-in markers compile on first use; the strict load (length, risk check,
    compile) of the same file gives the same markers."""
    strict = load_stage_markers()
    lazy = builtin_stage_markers()
    assert [m.id for m in strict.markers] == [m.id for m in lazy.markers]
    for a, b in zip(strict.markers, lazy.markers, strict=True):
        assert [p.pattern for p in a.patterns] == [p.pattern for p in b.patterns]
        for p in a.patterns:  # short messages are searched without a timeout: no pattern may crawl
            assert slow_probe(p) is None, (a.id, p.pattern)


def test_a_long_line_of_a_markers_prefix_is_searched_in_bounded_time() -> None:
    """`NCCL INFO .*Init` backtracked quadratically on a long line of NCCL INFO text; the marker is
    written without that, and long messages are searched with a timeout."""
    marker = builtin_stage_markers().get("nccl-comm-init")
    assert marker.search("NCCL INFO " * 100_000) is None  # returns (was: hours)
    assert (
        marker.search("node:1:1 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 8 - Init COMPLETE")
        == {}
    )


def test_good_text_loads() -> None:
    markers = load_stage_markers(GOOD, "extra.yaml")
    (marker,) = markers.markers
    assert (marker.id, marker.stage, marker.source, marker.line) == (
        "my-marker",
        "data-load",
        "extra.yaml",
        4,
    )
    assert marker.search("12 rows loaded") == {"rows": "12"}
    assert check_marker_examples(markers) == (2, [])


def test_every_problem_reported_with_file_line_and_help() -> None:
    bad = (
        GOOD.replace("stage: data-load", "stage: data-lod")
        .replace("  - id: my-marker", "  - id: My_Marker\n    complete: true")
        .replace("'^(?P<rows>\\d+) rows loaded'", "'(a+)+b'")
        .replace("          why: nothing was loaded\n", "")
    )
    with pytest.raises(CatalogError) as err:
        load_stage_markers(bad, "extra.yaml")
    text = str(err.value)
    assert "extra.yaml:5: marker 'My_Marker': unknown field 'complete'" in text
    assert "did you mean 'completion'?" in text
    assert "not kebab-case" in text
    assert (
        "extra.yaml:6: marker 'My_Marker': unknown stage 'data-lod'" in text
        and "did you mean 'data-load'?" in text
    )
    assert "nests unbounded quantifiers" in text
    assert "need 'line' and 'why'" in text
    assert len(err.value.problems) >= 5


def test_bad_regex_duplicate_id_and_contradictory_flags() -> None:
    twice = GOOD + GOOD.split("markers:\n", 1)[1]
    with pytest.raises(CatalogError, match="duplicate marker id 'my-marker'"):
        load_stage_markers(twice, "extra.yaml")
    with pytest.raises(CatalogError, match="does not compile"):
        load_stage_markers(GOOD.replace("'^(?P<rows>\\d+) rows loaded'", "'(unclosed'"), "x.yaml")
    flags = GOOD.replace(
        "    stage: data-load\n", "    stage: data-load\n    completion: true\n    attempt_start: true\n"
    )
    with pytest.raises(CatalogError, match="both a completion and an attempt start"):
        load_stage_markers(flags, "x.yaml")
    with pytest.raises(CatalogError, match="'completion' must be true or false"):
        load_stage_markers(
            GOOD.replace("    stage: data-load\n", "    stage: data-load\n    completion: yes please\n"),
            "x.yaml",
        )


def test_an_activity_marker_has_no_stage_and_moves_none() -> None:
    work = GOOD.replace("    stage: data-load\n", "    activity: true\n")
    (marker,) = load_stage_markers(work, "x.yaml").markers
    assert marker.activity and marker.stage is None
    with pytest.raises(CatalogError, match="an activity marker has no stage"):
        load_stage_markers(
            GOOD.replace("    stage: data-load\n", "    stage: data-load\n    activity: true\n"), "x.yaml"
        )
    with pytest.raises(CatalogError, match="missing required field 'stage'"):
        load_stage_markers(GOOD.replace("    stage: data-load\n", ""), "x.yaml")


def test_missing_markers_and_bad_yaml() -> None:
    with pytest.raises(CatalogError, match="no 'markers:' list"):
        load_stage_markers("task_stages: {}\n", "x.yaml")
    with pytest.raises(CatalogError, match=r"x.yaml:\d+: invalid YAML") as err:
        load_stage_markers("markers:\n  - id: [\n", "x.yaml")
    assert len(err.value.problems) == 1
    with pytest.raises(CatalogError, match="unknown top-level field 'marker'"):
        load_stage_markers(GOOD.replace("markers:", "marker:"), "x.yaml")


def test_example_checker_reports_misses_and_false_hits() -> None:
    broken = GOOD.replace(
        "match: ['(TaskRunner pid=1) 12 rows loaded']", "match: ['(TaskRunner pid=1) rows loaded: 12']"
    ).replace("line: 'no rows loaded'", "line: '7 rows loaded'")
    _, failures = check_marker_examples(load_stage_markers(broken, "extra.yaml"))
    kinds = sorted(f.kind for f in failures)
    assert kinds == ["match", "no_match", "pattern"]
    assert "extra.yaml:4: marker 'my-marker'" in str(failures[0])


def test_task_stages_unchanged() -> None:
    assert task_stages()["update_actor"] == "actor-update"
    assert stage_of_task("WorkerDict.actor_rollout_compute_ref_log_prob") == "ref"
