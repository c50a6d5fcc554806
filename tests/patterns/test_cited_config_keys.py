"""A fix can quote the job's own settings only for config keys the environment tracker records: every
key patterns/inference.yaml's cite_config names is one environment.yaml tracks, the loader refuses one
that is not, and verl's real config dump and Hydra overrides are read for each of them."""

from __future__ import annotations

import pytest

from logparse.observe.environment import CONFIG_LEAVES, EnvironmentTracker
from logparse.read.normalize import Normalizer
from logparse.read.sources import Line
from patterns import CatalogError
from patterns.environment import load_environment, tracked_config_keys
from patterns.inference import _read_builtin, inference_rules, load_inference_rules

# verl's pprinted config (`pprint(OmegaConf.to_container(config, resolve=True))`, reference §1.2) under
# the TaskRunner's Ray prefix, and Hydra's override list (§4.5)
DUMP = """\
(TaskRunner pid=11798) {'actor_rollout_ref': {'actor': {'optim': {'lr': 1e-06},
(TaskRunner pid=11798)                                  'ppo_micro_batch_size_per_gpu': 16},
(TaskRunner pid=11798)                        'model': {'path': 'Qwen/Qwen2.5-3B-Instruct',
(TaskRunner pid=11798)                                  'trust_remote_code': False},
(TaskRunner pid=11798)                        'nccl_timeout': 600},
(TaskRunner pid=11798)  'data': {'prompt_key': 'prompt',
(TaskRunner pid=11798)           'train_files': '/workspace/job/data/gsm8k/train.parquet',
(TaskRunner pid=11798)           'val_files': '/workspace/job/data/gsm8k/test.parquet'},
(TaskRunner pid=11798)  'trainer': {'default_local_dir': 'checkpoints/verl_grpo_example_gsm8k/qwen2.5_3b_grpo',
(TaskRunner pid=11798)              'n_gpus_per_node': 4,
(TaskRunner pid=11798)              'save_freq': -1}}
"""
OVERRIDES = (
    "Error executing job with overrides: ['algorithm.adv_estimator=grpo', "
    "'data.train_files=/root/data/gsm8k/train.parquet', 'data.val_files=/root/data/gsm8k/test.parquet', "
    "'data.prompt_key=question', 'trainer.save_freq=10', 'trainer.default_local_dir=/ckpt/run1', "
    "'+actor_rollout_ref.nccl_timeout=1800', 'actor_rollout_ref.model.trust_remote_code=True']"
)


def _config(text: str) -> dict[str, object]:
    tracker = EnvironmentTracker()
    normalizer = Normalizer()
    for i, raw in enumerate(text.splitlines(), 1):
        tracker.feed(normalizer.normalize(Line("job.log", i, raw), seq=i))
    return tracker.config_values()


def test_every_cited_config_key_is_tracked() -> None:
    cited = {key for _, keys in inference_rules().cite_config for key in keys}
    assert cited <= tracked_config_keys() == CONFIG_LEAVES
    assert {
        "default_local_dir",
        "save_freq",
        "nccl_timeout",
        "train_files",
        "val_files",
        "prompt_key",
    } <= cited
    assert "trust_remote_code" in cited


def test_verls_config_dump_records_the_cited_keys() -> None:
    config = _config(DUMP)
    assert config["actor_rollout_ref.model.trust_remote_code"] is False
    assert config["actor_rollout_ref.nccl_timeout"] == 600
    assert config["data.prompt_key"] == "prompt"
    assert config["data.train_files"] == "/workspace/job/data/gsm8k/train.parquet"
    assert config["data.val_files"] == "/workspace/job/data/gsm8k/test.parquet"
    assert config["trainer.default_local_dir"] == "checkpoints/verl_grpo_example_gsm8k/qwen2.5_3b_grpo"
    assert config["trainer.save_freq"] == -1


def test_hydras_overrides_record_the_cited_keys() -> None:
    config = _config(OVERRIDES)
    assert config == {
        "actor_rollout_ref.model.trust_remote_code": True,
        "actor_rollout_ref.nccl_timeout": 1800,
        "algorithm.adv_estimator": "grpo",
        "data.prompt_key": "question",
        "data.train_files": "/root/data/gsm8k/train.parquet",
        "data.val_files": "/root/data/gsm8k/test.parquet",
        "trainer.default_local_dir": "/ckpt/run1",
        "trainer.save_freq": 10,
    }


def test_an_inference_file_citing_an_untracked_key_is_refused_with_its_line() -> None:
    text = _read_builtin()
    broken = text.replace(
        "checkpoint-error: [default_local_dir, save_freq]",
        "checkpoint-error: [default_local_dir, save_frequency]",
    )
    assert broken != text
    line = next(i for i, row in enumerate(broken.splitlines(), 1) if "save_frequency" in row)
    with pytest.raises(CatalogError) as info:
        load_inference_rules(broken, "x/inference.yaml")
    assert str(info.value).startswith(
        f"x/inference.yaml:{line}: cite_config.checkpoint-error: 'save_frequency' is no config key "
        "patterns/environment.yaml tracks"
    )
    assert "did you mean 'save_freq'?" in str(info.value)


def test_a_key_dropped_from_the_tracker_is_refused_where_inference_cites_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from patterns import environment

    keys = frozenset(load_environment().literals("tracked-keys"))
    assert "save_freq" in keys
    monkeypatch.setattr(environment, "tracked_config_keys", lambda: keys - {"save_freq"})
    with pytest.raises(CatalogError, match="'save_freq' is no config key"):
        load_inference_rules(_read_builtin())
