"""Reports lead with the cause: the error line and 3 lines before it first, the rest of the evidence
folded, library and launcher frames folded, library paths shortened; a launcher is never the
innermost user frame."""

from __future__ import annotations

import dataclasses
import json

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from logparse.model import FRAME_LAUNCHER, FRAME_LIBRARY, FRAME_USER, Evidence, TracebackView
from logparse.observe.tracebacks import FrameKind, frame_kind
from reports.layout import FrameLine, error_window, evidence_locations, fold_frames, library_root, short_path
from tests.conftest import SAMPLES, run_cli
from tests.reports.test_html import handmade_report

SITE = "/opt/venv/lib/python3.11/site-packages"
MD = MarkdownIt("commonmark").enable("table")


@pytest.mark.parametrize(
    "path, kind",
    [
        ("/opt/venv/bin/torchrun", FrameKind.LAUNCHER),
        ("/usr/local/bin/ray", FrameKind.LAUNCHER),
        ("/usr/lib/python3.10/runpy.py", FrameKind.LAUNCHER),
        ("<string>", FrameKind.LAUNCHER),
        (f"{SITE}/torch/distributed/run.py", FrameKind.LIBRARY),
        ("/usr/lib/python3.10/threading.py", FrameKind.LIBRARY),
        (f"{SITE}/verl/trainer/ppo/ray_trainer.py", FrameKind.USER),  # verl is the user's framework
        ("/workspace/job/main_ppo.py", FrameKind.USER),
        ("/home/me/project/bin/train.py", FrameKind.USER),  # a script in a bin/ folder is still user code
    ],
)
def test_frame_kind(path: str, kind: FrameKind) -> None:
    assert frame_kind(path) is kind


def test_short_path_cuts_the_library_root() -> None:
    assert short_path(f"{SITE}/torch/distributed/run.py") == "torch/distributed/run.py"
    assert short_path("/usr/lib/python3.10/threading.py") == "threading.py"
    assert short_path("/workspace/job/main_ppo.py") == "/workspace/job/main_ppo.py"


# the regexes library_root replaced (quadratic under `regex` on a path of many folders): the reference
PACKAGES_ROOT = regex.compile(r"^(?P<root>.*/(?:site|dist)-packages)/(?P<rest>.+)$")
STDLIB_ROOT = regex.compile(r"^(?P<root>.*/lib/python3(?:\.\d+)?)/(?P<rest>.+)$")
PATH_PARTS = ["/", "/site", "/dist", "-packages", "/lib/python3", ".", "1", "\u0663", "x", "\n"]


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, database=None)
@given(st.lists(st.sampled_from(PATH_PARTS), max_size=12).map("".join))
def test_library_root_splits_a_path_as_the_path_patterns_did(path: str) -> None:
    m = PACKAGES_ROOT.match(path) or STDLIB_ROOT.match(path)
    assert library_root(path) == ((m.group("root"), m.group("rest")) if m else None)


def test_library_root_splits_at_the_last_library_folder() -> None:
    assert library_root("/a/lib/python3.10/site-packages/x/dist-packages/torch/a.py") == (
        "/a/lib/python3.10/site-packages/x/dist-packages",
        "torch/a.py",
    )
    assert library_root("/usr/lib/python3.10/site-packages/") == ("/usr/lib/python3.10", "site-packages/")
    assert library_root("/usr/lib/python3.x/a.py") is None and library_root("/w/train.py") is None


def _tb(frames: list[tuple[str, int, str]], innermost: tuple[str, int, str] | None) -> TracebackView:
    """A view as the verdict builds it: each frame's kind decided by logparse.observe.tracebacks."""
    kinds = tuple(frame_kind(f[0]).value for f in frames)
    return TracebackView("RuntimeError", "x", tuple(frames), innermost, None, (), frame_kinds=kinds)


def test_fold_frames_folds_runs_of_library_frames_only() -> None:
    user = ("/w/train.py", 10, "main")
    inner = ("/w/model.py", 5, "forward")
    frames = [
        ("/opt/venv/bin/torchrun", 8, "<module>"),
        (f"{SITE}/torch/run.py", 1, "main"),
        user,
        (f"{SITE}/torch/nn/module.py", 1, "_call"),
        inner,
        (f"{SITE}/torch/nn/module.py", 2, "_call"),
        (f"{SITE}/torch/functional.py", 3, "f"),
        (f"{SITE}/ray/worker.py", 4, "g"),
    ]
    folded = fold_frames(_tb(frames, inner))
    kinds = [type(f).__name__ for f in folded]
    # a run of two (launcher + torch) folds, a lone library frame between user frames stays in place
    assert kinds == ["FoldedFrames", "FrameLine", "FrameLine", "FrameLine", "FoldedFrames"]
    assert (
        folded[0].packages == ("launcher", "torch")
        and folded[0].label == "2 library frame(s) (launcher, torch)"
    )
    assert folded[4].packages == ("torch", "ray") and len(folded[4].frames) == 3
    assert isinstance(folded[3], FrameLine) and folded[3].innermost and folded[3].kind == "user"
    assert folded[2].short == "torch/nn/module.py" and folded[2].file == f"{SITE}/torch/nn/module.py"


def test_the_model_names_the_frame_kinds_the_tracebacks_decide() -> None:
    assert {FRAME_USER, FRAME_LIBRARY, FRAME_LAUNCHER} == {k.value for k in FrameKind}


def test_a_view_without_frame_kinds_shows_every_frame_as_user_code() -> None:
    frames = [("/w/train.py", 10, "main"), (f"{SITE}/torch/a.py", 1, "f"), (f"{SITE}/torch/b.py", 2, "g")]
    bare = TracebackView("RuntimeError", "x", tuple(frames), frames[0], None, ())
    folded = fold_frames(bare)
    assert all(isinstance(f, FrameLine) and f.kind == FRAME_USER for f in folded)
    # kinds that are not the frames' own (a view whose frames were replaced) are not used either
    stale = dataclasses.replace(_tb(frames, frames[0]), frames=(*frames, ("/w/more.py", 3, "h")))
    assert all(isinstance(f, FrameLine) and f.kind == FRAME_USER for f in fold_frames(stale))


def test_a_traceback_of_library_frames_only_is_shown_whole() -> None:
    frames = [("/opt/venv/bin/torchrun", 8, "<module>"), (f"{SITE}/torch/run.py", 1, "main")]
    assert all(isinstance(f, FrameLine) for f in fold_frames(_tb(frames, None)))


def test_error_window_is_the_error_line_and_three_lines_before_it() -> None:
    rc = handmade_report().root_cause
    assert rc is not None and rc.error_line is not None
    lines = [Evidence("job.log", n, f"line {n}") for n in range(50, 60)]
    lines += [Evidence("job.log", 60, "           ^^^^^^^^^^"), Evidence("job.log", 61, "")]
    evidence = (
        Evidence("other.log", 1, "elsewhere"),
        *lines,
        rc.error_line,
        Evidence("job.log", 121, "after"),
    )
    window = error_window(dataclasses.replace(rc, evidence=evidence))
    assert [e.line for e in window.lines] == [57, 58, 59, 120]  # carets and blank lines skipped
    assert window.error_index == 3 and window.hidden == len(evidence) - 4


def test_evidence_locations_do_not_repeat_the_file() -> None:
    one = [Evidence("/very/long/path/job.log", n, "x") for n in (1, 2)]
    assert evidence_locations(one) == (
        "/very/long/path/job.log",
        {("/very/long/path/job.log", 1): "1", ("/very/long/path/job.log", 2): "2"},
    )
    two = [Evidence("/a/rank0.log", 1, "x"), Evidence("/a/rank1.log", 2, "y")]
    assert evidence_locations(two)[1] == {
        ("/a/rank0.log", 1): "rank0.log:1",
        ("/a/rank1.log", 2): "rank1.log:2",
    }
    same_name = [Evidence("/a/x/stdout.log", 1, "x"), Evidence("/a/y/stdout.log", 2, "y")]
    assert evidence_locations(same_name)[1][("/a/x/stdout.log", 1)] == "/a/x/stdout.log:1"


def test_markdown_leads_with_the_error_line_and_folds_the_rest() -> None:
    sample = SAMPLES / "ray-actor-exception.log"
    text = run_cli(["scan", str(sample), "--format", "md"]).stdout
    report = json.loads(run_cli(["scan", str(sample), "--format", "json"]).stdout)
    rc = report["root_cause"]
    assert len(rc["evidence"]) > 20
    error_at = text.index("### Error line")
    assert error_at < text.index("### What to do") < text.index("All 44 evidence lines")
    fences = [t for t in MD.parse(text) if t.type == "fence"]
    first = fences[0].content.splitlines()
    assert len(first) == 4 and first[-1].startswith(f"> {rc['error_line']['line']}: torch.OutOfMemoryError")
    # nothing before the error line's section quotes the log but the banner table
    assert "main_ppo.py" not in text[:error_at]
    html = MD.render(text)
    assert html.count("<details>") == html.count("</details>")
    # library frames: one folded line in the traceback, all frames in a nested fold
    assert "  [4 library frame(s) (ray)]" in text and "<details><summary>All 10 frames</summary>" in text
    assert "  ray/_private/worker.py:3009 in get" not in text.split("All 10 frames")[0]


def test_torchrun_launcher_is_not_the_innermost_user_frame() -> None:
    sample = SAMPLES / "torchrun-sigkill.log"
    report = json.loads(run_cli(["scan", str(sample), "--format", "json"]).stdout)
    assert report["root_cause"]["traceback"]["innermost_user_frame"] is None
    text = run_cli(["scan", str(sample), "--format", "md"]).stdout
    assert "innermost user frame" not in text and "> /opt/venv/bin/torchrun" not in text
    html = run_cli(["scan", str(sample), "--format", "html"]).stdout
    assert "innermost user frame" not in html
    assert '<li class="launcher" title="/opt/venv/bin/torchrun">' in html  # not folded: no user frame at all
