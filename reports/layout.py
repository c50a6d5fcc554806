"""What a report shows first and what it folds, shared by the HTML and Markdown reports: the error line
with a few lines before it (the rest of the evidence folds), traceback frames with the library and
launcher runs folded (as Sentry shows in-app frames), and repeated path prefixes shortened.

Decisions about the log (whose code a frame is: TracebackView.frame_kinds) come from logparse; this
module only arranges them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import regex

from logparse.model import FRAME_LAUNCHER, FRAME_USER, Evidence, RootCause, TracebackView

CONTEXT_BEFORE = 3  # lines shown before the error line; the full evidence folds
MIN_FOLD = 2  # a single library frame between user frames stays in place (a fold of one hides nothing)

# the folders a library root ends with: an installed-packages folder, else the standard library's
_PACKAGES = ("/site", "/dist")  # (followed by "-packages")
_STDLIB = "/lib/python3"  # (followed by "/" or by ".N/": `/usr/lib/python3.10/`)
# Python 3.11's markers under a frame's code line, after a launcher prefix (`[rank1]:`, `(WorkerDict pid=7)`).
# Each part can match in one way only (no `[~^]+[~^\s]*`), so a long run of markers that does not end
# the line fails in one pass, not in one pass per marker.
_CARETS = regex.compile(r"^(?:\S[^~^]*?[\]):])?\s*[~^][~^\s]*$")


@dataclass(frozen=True)
class FrameLine:
    file: str  # as the log wrote it
    short: str  # the same file, its library root cut off (`torch/distributed/run.py`)
    line: int
    function: str
    kind: str  # user | library | launcher (logparse.model.FRAME_USER, ...)
    innermost: bool


@dataclass(frozen=True)
class FoldedFrames:
    """A run of consecutive library or launcher frames, folded into one line until opened."""

    frames: tuple[FrameLine, ...]
    packages: tuple[str, ...]  # what they belong to, in order: `torch`, `ray`, `python`, `launcher`

    @property
    def label(self) -> str:
        return f"{len(self.frames)} library frame(s) ({', '.join(self.packages)})"


@dataclass(frozen=True)
class ErrorWindow:
    """The error line and up to CONTEXT_BEFORE lines just before it in the evidence."""

    lines: tuple[Evidence, ...]
    error_index: int  # index of the error line in `lines` (-1: the evidence does not hold it)
    hidden: int  # evidence lines not in the window (shown when the full evidence is opened)


def _packages_root(path: str) -> tuple[str, str] | None:
    """(root, rest) at the last `/site-packages/` or `/dist-packages/` that has something after it."""
    end = len(path)
    while (at := path.rfind("-packages/", 0, end)) >= 0:
        cut = at + len("-packages")
        if path.endswith(_PACKAGES, 0, at) and cut + 1 < len(path):
            return path[:cut], path[cut + 1 :]
        end = at
    return None


def _stdlib_root(path: str) -> tuple[str, str] | None:
    """(root, rest) at the last `/lib/python3/` or `/lib/python3.N/` that has something after it."""
    end = len(path)
    while (at := path.rfind(_STDLIB, 0, end)) >= 0:
        cut = at + len(_STDLIB)
        if path.startswith(".", cut):  # a version: `.` and digits, then the folder ends
            digits = cut + 1
            while digits < len(path) and path[digits].isdecimal():
                digits += 1
            if digits > cut + 1:
                cut = digits
        if path.startswith("/", cut) and cut + 1 < len(path):
            return path[:cut], path[cut + 1 :]
        end = at
    return None


def library_root(path: str) -> tuple[str, str] | None:
    """(root, rest) of a path inside an installed-packages folder or the standard library. String
    searches from the end, not a regex: a path of 100,000 folders took `regex` seconds per frame."""
    if path.endswith("\n"):  # (a path is one line; as `^...$` did, a final line break is not part of it)
        path = path[:-1]
    if "\n" in path:
        return None
    return _packages_root(path) or _stdlib_root(path)


def short_path(path: str) -> str:
    """A library file from its package (`torch/distributed/run.py`); any other path as written."""
    split = library_root(path)
    return split[1] if split else path


def library_roots(frames: Sequence[tuple[str, int, str]]) -> tuple[str, ...]:
    """The folders cut off library paths (say each once, as a legend), in order of appearance."""
    return tuple(dict.fromkeys(split[0] for f in frames if (split := library_root(f[0])) is not None))


def _package(line: FrameLine) -> str:
    if line.kind == FRAME_LAUNCHER:
        return "launcher"
    split = library_root(line.file)
    if split is None:
        return "library"
    root, rest = split
    if "-packages" not in root:
        return "python"  # the standard library
    return rest.split("/", 1)[0].removesuffix(".py")


def frame_line(
    frame: tuple[str, int, str], innermost: tuple[str, int, str] | None, kind: str = FRAME_USER
) -> FrameLine:
    f, n, fn = frame
    return FrameLine(
        f,
        short_path(f),
        n,
        fn,
        kind,
        innermost is not None and (f, n) == (innermost[0], innermost[1]),
    )


def fold_frames(tb: TracebackView, frames: Sequence[object] | None = None) -> list:
    """The traceback's frames (or `frames`, a trimmed copy of them whose other items, such as a gap
    marker, stay where they are) as FrameLines, each run of MIN_FOLD or more library / launcher
    frames folded into a FoldedFrames. A traceback with no user frame at all is shown whole: there is
    nothing else to look at."""
    items = list(tb.frames if frames is None else frames)
    # kinds by frame (equal frames are one file, of one kind), so that a trimmed copy's frames find theirs;
    # a view without kinds, or with kinds that are not its frames', shows every frame as user code
    kinds = {}
    if len(tb.frame_kinds) == len(tb.frames):
        kinds = dict(zip(tb.frames, tb.frame_kinds, strict=True))
    lines = [
        frame_line(f, tb.innermost_user_frame, kinds.get(f, FRAME_USER)) if isinstance(f, tuple) else f
        for f in items
    ]
    if not any(isinstance(f, FrameLine) and f.kind == FRAME_USER for f in lines):
        return lines
    out: list = []
    run: list[FrameLine] = []

    def flush() -> None:
        if len(run) >= MIN_FOLD:
            out.append(FoldedFrames(tuple(run), tuple(dict.fromkeys(_package(f) for f in run))))
        else:
            out.extend(run)
        run.clear()

    for f in lines:
        if isinstance(f, FrameLine) and f.kind != FRAME_USER:
            run.append(f)
        else:
            flush()
            out.append(f)
    flush()
    return out


def error_window(rc: RootCause) -> ErrorWindow:
    """The error line and the CONTEXT_BEFORE evidence lines before it (of its own file; Python's `^^^`
    marker lines and blank lines say nothing on their own and are skipped)."""
    evidence = list(rc.evidence)
    err = rc.error_line
    at = next(
        (
            i
            for i, e in enumerate(evidence)
            if err is not None and (e.source, e.line) == (err.source, err.line)
        ),
        None,
    )
    if at is None:
        lines = (err,) if err is not None else ()
        return ErrorWindow(lines, 0 if err is not None else -1, len(evidence))
    before: list[Evidence] = []
    i = at - 1
    while i >= 0 and len(before) < CONTEXT_BEFORE and evidence[i].source == evidence[at].source:
        if evidence[i].text.strip() and not _CARETS.match(evidence[i].text):
            before.append(evidence[i])
        i -= 1
    window = (*reversed(before), evidence[at])
    return ErrorWindow(window, len(before), len(evidence) - len(window))


def evidence_locations(evidence: Sequence[Evidence]) -> tuple[str | None, dict[tuple[str, int], str]]:
    """How to label each evidence line without repeating its file: (the one file every line is from,
    or None; (source, line) -> label). One file: the label is the line number; several: the file's
    base name and line when base names tell the files apart, else the full path."""
    sources = list(dict.fromkeys(e.source for e in evidence))
    if len(sources) == 1:
        return sources[0], {(e.source, e.line): str(e.line) for e in evidence}
    names = {s: os.path.basename(s) or s for s in sources}
    unique = len(set(names.values())) == len(names)
    return None, {(e.source, e.line): f"{names[e.source] if unique else e.source}:{e.line}" for e in evidence}
