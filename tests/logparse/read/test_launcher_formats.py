"""A launcher prefix is data: one added from a formats file of one's own ($VERL_LOGSCAN_FORMATS), with
no Python change, is read by the same generic reader as the built-in ones, in a scan as in the
Normalizer, and its examples run in `catalog check`."""

from __future__ import annotations

from pathlib import Path

import pytest

from logparse.pipeline import ScanConfig, analyse
from logparse.read.normalize import Normalizer
from logparse.read.sources import Line
from patterns import load_builtin_catalog
from patterns.formats import FORMATS_ENV, CatalogError, line_formats
from tests.conftest import run_cli

# a scheduler's label `<host:pid:rN>` before each line (made up: no built-in format reads it)
OWN_FORMAT = """\
prefixes:
  - id: angle-label
    regex: '<(?P<host>[A-Za-z0-9][\\w.-]*):(?P<pid>\\d+):r(?P<rank>\\d+)> ?'
    fields:
      node: {group: host, kind: str}
      pid: {group: pid, kind: int}
      rank: {group: rank, kind: int}
    groups:
      host: the node
      pid: the process
      rank: the global rank
    examples:
      match:
        - line: '<gpu-node-7:4242:r3> step:1 - loss:0.5'
          groups: {host: gpu-node-7, pid: '4242', rank: '3'}
          expect: {message: 'step:1 - loss:0.5', node: gpu-node-7, pid: 4242, rank: 3}
      no_match:
        - line: '<gpu-node-7> hello'
          why: no pid or rank
          expect: {rank: null}
"""


@pytest.fixture
def own_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "my-formats.yaml"
    path.write_text(OWN_FORMAT, encoding="utf-8")
    monkeypatch.setenv(FORMATS_ENV, str(path))
    return path


def test_a_prefix_added_from_yaml_only_is_read(own_format: Path) -> None:
    rec = Normalizer().normalize(Line("x", 1, "<gpu-node-7:4242:r3> (WorkerDict pid=9) [rank5]: boom"))
    assert rec.message == "boom"
    # (the later prefixes of the line win, as with the built-in ones)
    assert (rec.origin.node, rec.origin.pid, rec.origin.rank, rec.origin.actor) == (
        "gpu-node-7",
        9,
        5,
        "WorkerDict",
    )
    rec = Normalizer().normalize(
        Line("x", 2, "<node-2:17:r11> RuntimeError: CUDA error: an illegal memory access")
    )
    assert (rec.origin.node, rec.origin.pid, rec.origin.rank) == ("node-2", 17, 11)
    assert rec.message == "RuntimeError: CUDA error: an illegal memory access"


def test_without_the_file_the_prefix_stays_in_the_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FORMATS_ENV, raising=False)
    rec = Normalizer().normalize(Line("x", 1, "<gpu-node-7:4242:r3> boom"))
    assert rec.message == "<gpu-node-7:4242:r3> boom" and rec.origin.rank is None


@pytest.mark.parametrize("reader_process_bytes", [None, 1])
def test_a_scan_reads_the_new_prefix_in_its_reader_processes_too(
    own_format: Path, tmp_path: Path, reader_process_bytes: int | None
) -> None:
    lines = [f"<node-{r}:{100 + r}:r{r}> step:{s} - actor/pg_loss:0.1" for s in range(1, 4) for r in range(2)]
    lines += [
        "<node-1:101:r1> Traceback (most recent call last):",
        '<node-1:101:r1>   File "/opt/verl/trainer/main.py", line 3, in <module>',
        "<node-1:101:r1> torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    ]
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyse(
        [str(log)], load_builtin_catalog(), ScanConfig(reader_process_bytes=reader_process_bytes)
    )
    cause = report.root_cause
    assert cause is not None and cause.category == "cuda-oom"
    assert (cause.rank, cause.node, cause.pid) == (1, "node-1", 101)


@pytest.mark.slow  # the whole catalog check twice (every example of every file): about 18 s here
def test_catalog_check_runs_the_new_formats_examples(own_format: Path) -> None:
    result = run_cli(["catalog", "check"])
    assert result.exit_code == 0, result.output
    assert "my-formats.yaml: 1 wordings, 2 examples" in result.output
    own_format.write_text(OWN_FORMAT.replace("pid: 4242, rank: 3}", "pid: 4242, rank: 4}"), encoding="utf-8")
    result = run_cli(["catalog", "check"])
    assert result.exit_code != 0
    assert "angle-label" in result.output and "rank = 3 where the example states 4" in result.output


def test_a_bad_formats_file_is_refused_before_any_scan_with_where(own_format: Path, tmp_path: Path) -> None:
    own_format.write_text(
        OWN_FORMAT.replace("kind: int}\n      rank", "kind: number}\n      rank"), encoding="utf-8"
    )
    with pytest.raises(CatalogError) as exc:
        line_formats()
    assert f"{own_format}:2: format 'angle-label': field 'pid' is read as int" in str(exc.value.problems[0])
    log = tmp_path / "job.log"
    log.write_text("hello\n", encoding="utf-8")
    result = run_cli(["scan", str(log)])
    assert result.exit_code == 2
    assert "formats error" in result.output and "field 'pid'" in result.output


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (("id: angle-label", "id: rank"), "a built-in format has this id"),
        (("<(?P<host>", "(?:step:)?<(?P<host>"), None),  # (still hits its examples: fine)
        (("> ?'", "> ?|step:'"), "reads the start of a verl message"),
        (("rank: {group: rank", "rank: {group: rnk"), "no named group of the regex"),
        (("node: {group", "nodes: {group"), "'nodes' is no origin field"),
    ],
)
def test_what_a_formats_file_of_ones_own_may_not_do(
    own_format: Path, change: tuple[str, str], reason: str | None
) -> None:
    own_format.write_text(OWN_FORMAT.replace(*change), encoding="utf-8")
    if reason is None:
        assert line_formats()[-1].id == "angle-label"
        return
    with pytest.raises(CatalogError) as exc:
        line_formats()
    assert any(reason in str(p) for p in exc.value.problems), exc.value.problems
