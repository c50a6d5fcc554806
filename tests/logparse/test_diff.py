"""`verl-logscan diff GOOD BAD`: what changed between a good run and a bad one comes first. The pairs are
real runs (tests/fixtures/diff/, samples/scripts/capture.sh ONLY=diff): one config value, a learning
rate that overflows the loss, one package version."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from logparse.diff import env_changes, error_score, metric_divergence, template
from logparse.model import MetricSeries
from tests.conftest import FIXTURES, ROOT, SAMPLES, run_cli

PAIRS = FIXTURES / "diff"
SCHEMA = json.loads((ROOT / "reports" / "diff.schema.json").read_text())


def diff_json(good: Path | str, bad: Path | str, *extra: str, input: bytes | None = None) -> tuple[dict, int]:
    result = run_cli(["diff", "--format", "json", str(good), str(bad), *extra], input=input)
    data = json.loads(result.stdout)
    jsonschema.validate(data, SCHEMA)
    return data, result.exit_code


def pair(name: str) -> tuple[Path, Path]:
    return PAIRS / name / "good.log", PAIRS / name / "bad.log"


def test_a_changed_config_value_is_the_first_difference() -> None:
    data, code = diff_json(*pair("config-value"))
    assert code == 1 and data["differs"]
    first = data["changes"][0]
    assert (first["key"], first["kind"]) == ("config.data.train_batch_size", "config")
    assert (first["good"], first["bad"]) == ("128", "8")
    assert len(data["changes"]) == 1  # the rest of the config and the versions are the same


def test_a_learning_rate_that_overflows_the_loss_is_named_with_the_step_the_loss_left_goods_band() -> None:
    data, code = diff_json(*pair("learning-rate"))
    assert code == 1
    assert data["changes"][0]["key"] == "config.actor_rollout_ref.actor.optim.lr"
    first = data["divergences"][0]
    assert first["kind"] == "metric" and first["key"] in ("loss", "grad_norm")
    assert first["step"] == 2 and first["bad"] == "inf"
    assert data["bad"]["status"] == "failed" and data["good"]["status"] == "healthy"
    assert data["bad_in_good"]["answer"] == "no"
    # the first line new in BAD is the first step line with the overflowed loss, in training
    new = data["new_lines"][0]
    assert "loss:inf" in new["first"]["text"] and new["stage"] == "training"


def test_a_changed_package_version_is_the_first_difference() -> None:
    data, code = diff_json(*pair("package-version"))
    assert code == 1
    first = data["changes"][0]
    assert (first["key"], first["kind"]) == ("transformers", "version")
    assert first["good"] != first["bad"] and first["good"] and first["bad"]


def test_a_run_compared_with_itself_has_no_difference_and_exit_0() -> None:
    good, _ = pair("config-value")
    data, code = diff_json(good, good)
    assert code == 0 and not data["differs"]
    assert data["changes"] == [] and data["divergences"] == [] and data["new_lines"] == []


def test_a_run_that_stops_short_of_the_good_one_is_a_divergence(tmp_path: Path) -> None:
    good, _ = pair("config-value")
    lines = good.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "step:4 " in line)
    short = tmp_path / "short.log"
    short.write_text("".join(lines[:cut]))
    data, _ = diff_json(good, short)
    stop = [d for d in data["divergences"] if d["kind"] == "stops-earlier"]
    assert stop and stop[0]["bad"] == "3" and "GOOD reached step 8" in stop[0]["detail"]


def test_bad_may_come_from_stdin() -> None:
    good, bad = pair("learning-rate")
    data, code = diff_json(good, "-", input=bad.read_bytes())
    assert code == 1 and data["changes"][0]["key"] == "config.actor_rollout_ref.actor.optim.lr"


def test_a_failure_good_also_shows_is_said_to_be_in_good() -> None:
    log = SAMPLES / "torchrun-gloo-timeout.log"
    data, _ = diff_json(log, log)
    assert data["bad_in_good"]["answer"] == "same"


def test_lines_new_in_bad_are_the_error_lines_first_with_their_rank() -> None:
    data, _ = diff_json(SAMPLES / "torchrun-healthy.log", SAMPLES / "torchrun-rank-exception.log")
    assert data["new_templates"] >= len(data["new_lines"]) > 0
    scores = [n["score"] for n in data["new_lines"]]
    assert scores == sorted(scores, reverse=True)
    assert any(n["streams"] for n in data["new_lines"][:5])


def test_the_number_of_new_lines_shown_is_bounded() -> None:
    data, _ = diff_json(
        SAMPLES / "torchrun-healthy.log", SAMPLES / "torchrun-rank-exception.log", "--max-lines", "2"
    )
    assert len(data["new_lines"]) == 2 < data["new_templates"]


def test_secrets_are_masked_as_a_scan_masks_them(tmp_path: Path) -> None:
    good = tmp_path / "good.log"
    bad = tmp_path / "bad.log"
    good.write_text("step:1 - loss:1.0\n")
    bad.write_text(
        "step:1 - loss:1.0\nwandb: login with WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567\n"
    )
    out = run_cli(["diff", str(good), str(bad)]).stdout
    assert "0123456789abcdef0123456789abcdef01234567" not in out and "[redacted:" in out


@pytest.mark.parametrize(
    "fmt, marker", [("md", "### Environment and config"), ("html", "<svg"), ("text", "DIFF")]
)
def test_every_format_puts_the_changes_first(fmt: str, marker: str) -> None:
    out = run_cli(["diff", "--format", fmt, *map(str, pair("learning-rate"))]).stdout
    assert marker in out
    assert out.index("optim.lr") < out.index("inf at step 2")


def test_both_sides_on_stdin_is_a_usage_error() -> None:
    result = run_cli(["diff", "-", "-"], input=b"x\n")
    assert result.exit_code == 2


def test_versions_come_before_topology_and_config_values() -> None:
    good = {"config.data.train_batch_size": 8, "world_size": 4, "torch": "2.6.0", "hosts": ["a"]}
    bad = {"config.data.train_batch_size": 16, "world_size": 8, "torch": "2.7.0", "hosts": ["b"]}
    assert [c.key for c in env_changes(good, bad)] == ["torch", "world_size", "config.data.train_batch_size"]


def test_a_changed_number_does_not_make_a_line_new() -> None:
    assert template("lr:1e+30 loss:0.5") == template("lr:0.05 loss:12") == template("lr:3.2e-05 loss:7")


def test_error_words_and_levels_rank_a_line_higher() -> None:
    assert error_score("RuntimeError: boom", "ERROR") > error_score("step 3 done", "INFO") == 0


def test_a_flat_metric_that_moves_leaves_the_band() -> None:
    good = MetricSeries("reward", (1, 2, 3), (0.5, 0.5, 0.5))
    bad = MetricSeries("reward", (1, 2, 3), (0.5, 0.52, 0.1))
    div = metric_divergence(good, bad)
    assert div is not None and div.step == 3
