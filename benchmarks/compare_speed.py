"""Time this tree against a reference commit on the same logs, in one run: is a change no slower and no
bigger?

Generates the benchmark shapes (benchmarks/generate_log.py: `realistic`, `dense`, `dense+tb`, `mix`,
`dense+bars` and `mix+bars` (their bars without a prefix), and the dense-error logs of
benchmarks/bench_dense_errors.py: `identical`, `tracebacks`, `bare`), then
scans each with both trees (`python -m logparse scan --format json LOG`, the reference checked out in a
temporary git worktree), alternating, best of --repeat, and prints the seconds and the peak RSS of each
(the process tree, as wait4 reports it for the largest process, and sampled from /proc for the tool and
its reader processes together) with the ratio new / reference, and the CPU time of the whole process
tree (user + system, from wait4: the readers' time is in it once the scan has joined them), which a
busy machine disturbs less than the wall time. Both trees run the same Python with
compiled modules and a warm start-up cache.

    python benchmarks/compare_speed.py [--ref main] [--mb 100] [--repeat 3] [--only dense identical]

A ratio above 1.10 on a quiet machine is a slowdown worth a look; the machine's load is printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from bench_dense_errors import write_bare, write_identical, write_tracebacks  # noqa: E402 (the benchmarks' own)
from generate_log import generate  # noqa: E402

SHAPES = ("realistic", "dense", "dense+tb", "mix", "dense+bars", "mix+bars")
# shape -> (kind, caught_every, bars) of generate_log.generate
SHAPE_ARGS = {
    "realistic": ("realistic", None, "ray"),
    "dense": ("dense", 0, "ray"),
    "dense+tb": ("dense", None, "ray"),
    "mix": ("mix", None, "ray"),
    "dense+bars": ("dense", 0, "bare"),
    "mix+bars": ("mix", None, "bare"),
}
ERRORS = {"identical": write_identical, "tracebacks": write_tracebacks, "bare": write_bare}


def _rss_kb(pid: int) -> int:
    """Resident memory of a process and its children, in KB (shared pages count twice)."""
    total = 0
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    for p in [str(pid), *children]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def run(tree: Path, log: Path) -> tuple[float, int, float]:
    """(seconds, peak RSS in KB, CPU seconds of the process tree) of one scan of `log` by `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree), "NO_COLOR": "1"}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "logparse", "scan", "--format", "json", str(log)],
        cwd=tree,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    peak = 0
    while True:
        pid, _, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, _rss_kb(proc.pid))
        time.sleep(0.02)
    seconds = time.perf_counter() - start
    proc.returncode = 0  # (reaped above)
    return seconds, max(peak, usage.ru_maxrss), usage.ru_utime + usage.ru_stime


def warm(tree: Path) -> None:
    """Compile the tree's modules and fill its start-up cache, as a first run would."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "compileall",
            "-q",
            str(tree / "logparse"),
            str(tree / "patterns"),
            str(tree / "reports"),
        ],
        check=False,
        stdout=subprocess.DEVNULL,
    )
    small = ROOT / "samples" / "ray-healthy.log"
    run(tree, small)


def logs(folder: Path, mb: float, only: list[str]) -> list[tuple[str, Path]]:
    out = []
    for shape in SHAPES:
        if only and shape not in only:
            continue
        path = folder / f"{shape}-{mb:g}.log"
        if not path.exists():
            kind, caught, bars = SHAPE_ARGS[shape]
            generate(str(path), mb, seed=7, kind=kind, caught_every=caught, bars=bars)
        out.append((f"{shape} {mb:g} MB", path))
    for kind, write in ERRORS.items():
        if only and kind not in only:
            continue
        path = folder / f"errors-{kind}.log"
        if not path.exists():
            write(path)
        out.append((f"dense errors: {kind}", path))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", default="main")
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--keep", help="keep the generated logs here (default: a temporary folder)")
    a = ap.parse_args()
    scratch = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="compare-speed-"))
    scratch.mkdir(parents=True, exist_ok=True)
    ref = scratch / "ref-tree"
    if ref.exists():
        subprocess.run(["git", "worktree", "remove", "--force", str(ref)], cwd=ROOT, check=False)
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(ref), a.ref], cwd=ROOT, check=True, capture_output=True
    )
    try:
        items = logs(scratch, a.mb, a.only)
        for tree in (ref, ROOT):
            warm(tree)
        print(
            f"reference {a.ref} against the working tree; best of {a.repeat}; "
            f"load {os.getloadavg()[0]:.2f} at the start"
        )
        print(
            "| log | reference s | new s | new / ref | reference CPU s | new CPU s | CPU new / ref "
            "| reference RSS MB | new RSS MB | load |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for name, path in items:
            best = {ref: (float("inf"), 0, float("inf")), ROOT: (float("inf"), 0, float("inf"))}
            for _ in range(a.repeat):
                for tree in (ref, ROOT):
                    s, rss, cpu = run(tree, path)
                    b = best[tree]
                    best[tree] = (min(b[0], s), max(b[1], rss), min(b[2], cpu))
            (rs, rr, rc), (ns, nr, nc) = best[ref], best[ROOT]
            print(
                f"| {name} | {rs:.2f} | {ns:.2f} | {ns / rs:.2f} | {rc:.2f} | {nc:.2f} | {nc / rc:.2f} | "
                f"{rr / 1024:.0f} | {nr / 1024:.0f} | {os.getloadavg()[0]:.1f} |",
                flush=True,
            )
        print(f"load {os.getloadavg()[0]:.2f} at the end")
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(ref)], cwd=ROOT, check=False)
        if not a.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
