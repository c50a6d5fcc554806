"""Issue 38 on real captures of an ordinary training script (samples/scripts/plain_train.py): config
dumps and version lines read by their shape in `diff`, several processes' stack dumps in one stderr,
and the rank a gloo barrier timeout blames."""

from __future__ import annotations

from pathlib import Path

import pytest

from logparse.diff import diff_runs
from logparse.pipeline import analyse
from patterns import load_builtin_catalog
from tests.conftest import FIXTURES

ROOT = FIXTURES
CATALOG = load_builtin_catalog()
SHAPES = {
    "dict": "config.data.batch_size",
    "json": "config.data.batch_size",
    "namespace": "config.data_batch_size",
    "yaml": "config.model.hidden_size",
    "omegaconf": "config.model.hidden_size",
    "overrides": "config.model.hidden_size",
    "hydra": "config.model.hidden_size",
}


def _diff(pair: str):
    folder = ROOT / "diff" / pair
    return diff_runs([str(folder / "good.log")], [str(folder / "bad.log")], CATALOG)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_changed_config_value_comes_first(shape: str) -> None:
    out = _diff(f"config-{shape}")
    first = out.changes[0]
    assert first.key == SHAPES[shape] and first.kind == "config"
    assert (first.good, first.bad) in (("8", "64"), ("64", "96"))
    assert [c for c in out.changes if not c.one_run_only] == [first]  # the versions printed are the same
    assert out.lead is not None and out.lead.startswith(SHAPES[shape])


def test_the_version_named_in_the_error_comes_first_and_a_one_sided_value_never_leads() -> None:
    out = _diff("numpy-version")
    first = out.changes[0]
    assert (first.key, first.good, first.bad, first.why) == (
        "numpy",
        "1.26.4",
        "2.4.6",
        "named in BAD's error",
    )
    assert out.lead.startswith("numpy: 1.26.4 -> 2.4.6")
    python = next(c for c in out.changes if c.key == "python")
    assert python.good is None and python.why == "shown in one run only"
    assert out.changes[-1].one_run_only
    # the new lines start with the traceback that holds BAD's own error, not the launcher's echo of it
    assert out.new_lines[0].verdict and "np.float_" in out.new_lines[0].first.text
    assert "failed (exitcode" in out.new_lines[1].first.text


def test_a_secret_a_config_dump_prints_stays_masked_in_the_diff(tmp_path: Path) -> None:
    """A printed config's value is a secret by its key (`"auth": ...`, `judge.token=...`): each shape
    it was read from masks it, where the bare value alone would pass."""
    from logparse.redact import RedactConfig

    good, bad = tmp_path / "good.log", tmp_path / "bad.log"
    good.write_text("INFO step 1\n")
    bad.write_text(
        "INFO step 1\n"
        '{"auths": {"ghcr.io": {"auth": "amRvZTpnaHBfc2VjcmV0dmFsdWU="}}}\n'
        "Error executing job with overrides: ['++judge.token=jt-4a5b6c7d8e']\n"
    )
    out = diff_runs([str(good)], [str(bad)], CATALOG, RedactConfig())
    values = {c.key: c.bad for c in out.changes}
    assert values["config.auths.ghcr.io.auth"] == "[redacted:docker-auth]"
    assert values["config.judge.token"] == "[redacted:hydra-override-secret]"


def test_dumps_in_one_shared_stderr_are_each_a_process_and_the_odd_rank_is_named() -> None:
    report = analyse([str(ROOT / "stalls" / "torchrun-shared-stderr-dumps.log")], CATALOG)
    stall = report.stall
    assert report.status == "stalled" and stall is not None
    odd = next(g for g in stall.waits if g.odd)
    assert odd.streams == ("rank 3",) and "broadcast" in odd.waiting_in
    rest = next(
        g
        for g in stall.waits
        if not g.odd and "all_reduce" in g.waiting_in and g.streams[0].startswith("rank")
    )
    assert rest.streams == ("rank 0", "rank 1", "rank 2")
    # the faulthandler dumps (no pid, no prefix) are not merged into one
    threads = {w for g in stall.waits for w in g.streams if w.startswith("thread ")}
    assert len(threads) >= 2
    assert stall.cause.id == "collective-mismatch"
    assert not any("not shown" in step for step in stall.cause.fix)


def test_a_gloo_barrier_timeout_blames_the_rank_that_never_arrived() -> None:
    report = analyse([str(ROOT / "torchrun" / "gloo-barrier-rank1-absent.log")], CATALOG)
    rc = report.root_cause
    assert rc.category == "collective-timeout"
    assert rc.rank == 1  # ranks 0, 2 and 3 printed the timeout; rank 1 was loading a shard
    assert any(e.startswith("rank 1 never arrived") and "loading shard" in e for e in rc.explanation)
