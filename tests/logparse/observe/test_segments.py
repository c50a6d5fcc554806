"""The stage timeline is the job's progression: a stage ends where the next begins, a late echo (Ray's
dedup flush) is no reason to stretch a stage over the run, and a stage that recurs every step is
bounded in how many stretches it keeps."""

from __future__ import annotations

import json
import re
from itertools import pairwise
from pathlib import Path

from logparse.observe.progress import StageTracker
from logparse.read.normalize import Normalizer
from logparse.read.sources import Line
from tests.conftest import SAMPLES, run_cli

LAUNCH = "2026-11-30 11:52:32,089\tINFO worker.py:2038 -- Started a local Ray instance."
MODEL_LOAD = "(WorkerDict pid=7710) Before FSDP, memory allocated (GB): 0.00, memory reserved (GB): 0.00, device memory used/total (GB): 0.61/79.11"
STEP = "(TaskRunner pid=4242) step:{n} - actor/pg_loss:np.float64(0.1) - timing_s/step:1.5"
VALIDATE = "(TaskRunner pid=4242) validation generation end"
LATE_FLUSH = MODEL_LOAD.replace("0.61/79.11", "0.61/79.11 [repeated 3x across cluster]")


def track(lines: list[str]) -> StageTracker:
    tracker = StageTracker()
    norm = Normalizer()
    for n, text in enumerate(lines, 1):
        rec = norm.normalize(Line("job.log", n, text))
        rec.seq = n
        tracker.feed(rec)
    return tracker.freeze()


def test_a_stage_ends_where_the_next_begins_and_late_echoes_stretch_nothing() -> None:
    lines = [LAUNCH, "filler", MODEL_LOAD, "filler"] + [STEP.format(n=n) for n in range(1, 101)]
    lines += ["shutting down"] * 50 + [LATE_FLUSH]  # line 155: Ray flushes its dedup copies late
    tracker = track(lines)
    got = [(s.stage, s.first_line, s.last_line) for s in tracker.segments()]
    assert got == [("launch", 1, 3), ("model-load", 3, 5), ("training", 5, 104)]
    # the first/last-line view is kept for the JSON `timeline`, and the late copy does not move it either
    spans = {s.stage: (s.first_line, s.last_line) for s in tracker.progress().timeline}
    assert spans["model-load"] == (3, 3)


def test_recurring_stages_alternate_and_are_bounded() -> None:
    lines = [LAUNCH, MODEL_LOAD]
    for n in range(1, 3001):
        lines.append(STEP.format(n=n))
        if n % 10 == 0:
            lines.append(VALIDATE)
    tracker = track(lines)
    full = tracker.segments(max_per_stage=10_000)  # nothing merged: every switch is a stretch
    assert [s.stage for s in full].count("validation") == 300
    for a, b in pairwise(full):  # contiguous: each stretch ends where the next starts
        assert a.last_line == b.first_line
    # validation every 11 lines of 3,300: closer than 1/50 of the log, so each stage is one bar
    merged = tracker.segments(max_per_stage=50)
    assert [s.stage for s in merged] == ["launch", "model-load", "training", "validation"]
    assert merged[3].first_line == full[3].first_line and merged[3].last_line == full[-1].last_line


def test_sparse_recurring_stage_keeps_its_stretches() -> None:
    lines = [LAUNCH, MODEL_LOAD]
    for n in range(1, 3001):
        lines.append(STEP.format(n=n))
        if n % 500 == 0:
            lines.append(VALIDATE)
    stages = [s.stage for s in track(lines).segments()]  # the default bound, 500 per stage
    # six validations far apart stay six; training resumes one line after each, closer than 1/500 of
    # the log, so its stretches join into one bar under the validation marks
    assert stages.count("validation") == 6 and stages.count("training") == 1


def test_sample_with_a_late_dedup_flush() -> None:
    """ray-actor-exception ends with Ray's dedup copies of model-load lines, 44 lines after the error."""
    report = json.loads(
        run_cli(["scan", str(SAMPLES / "ray-actor-exception.log"), "--format", "json"]).stdout
    )
    segments = report["progress"]["segments"]
    assert [s["stage"] for s in segments] == ["launch", "config", "data-load", "model-load", "training"]
    for a, b in pairwise(segments):
        assert a["last"]["line"] == b["first"]["line"]
    assert segments[-1]["last"]["line"] < 134  # not stretched to the flush at lines 134-135


def test_timeline_chart_draws_the_progression(tmp_path: Path) -> None:
    lines = [LAUNCH, "filler", MODEL_LOAD, "filler"] + [STEP.format(n=n) for n in range(1, 101)]
    lines += ["shutting down"] * 50 + [LATE_FLUSH]
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    html = run_cli(["scan", str(log), "--format", "html"]).stdout
    rows = dict(
        re.findall(r'<g class="stage" data-stage="([^"]+)" data-stretches="\d+">(.*?)</g>', html, re.DOTALL)
    )
    assert list(rows) == ["launch", "model-load", "training"]

    def bars(stage: str) -> list[tuple[float, float]]:
        return [
            (float(x), float(w))
            for x, w in re.findall(
                r'<rect class="stage-bar[^"]*" x="([\d.]+)" y="[\d.]+" '
                r'width="([\d.]+)"',
                rows[stage],
            )
        ]

    ((model_x, model_w),) = bars("model-load")
    ((train_x, train_w),) = bars("training")
    assert abs(model_x + model_w - train_x) <= 0.2  # it ends where training begins
    assert model_w < train_w / 10  # two lines against training's 99: a sliver, not a bar across the run
