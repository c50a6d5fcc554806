"""Instructions a scan executes (valgrind's cachegrind): a figure that does not move with the machine.

Wall and CPU times move with the machine and its load (between two runs of the same code here, a third
and more). The number of instructions a scan executes does not: it tells whether a change made the scan
do less work, and it is the same on any x86-64 machine for the same code, Python and libraries, so a
figure measured on one machine can be checked on another (a ratio to grep cannot: it moves with how fast
the machine runs Python against how fast it runs grep).

For each LOG (its first --mb megabytes, cut at a line end) and each tree (`--tree`, default this
checkout; two trees give the change between them), one scan in one process (`VERL_LOGSCAN_WORKERS=1`, no
reader process: cachegrind counts one process) of `scan --format json` under
`valgrind --tool=cachegrind --cache-sim=no`. A scan of the log's first line is counted too and
subtracted (start-up: imports, the catalog from the start-up cache, the report), so that the figure is
the work the log's lines cost. Each tree's modules are compiled first and its start-up cache is warmed by
one scan outside valgrind, as in bench_scan.py.

    python benchmarks/instructions.py LOG [LOG ...] [--mb 20] [--tree PATH [--tree PATH]]

Two runs of the same tree agree within about 0.3% (Python's hash seed is fixed; what is left is
memory layout): a change smaller than that is none.

Needs valgrind (Debian: `apt-get install valgrind`). Cachegrind runs the scan ~20-50x slower: 20 MB of a
dense log takes about 20 s a tree.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# valgrind's summary line: `==123== I   refs:      3,954,310,123` (or `I refs:` in newer releases)
REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def head(log: Path, mb: float, out: Path) -> Path:
    """The first `mb` megabytes of `log`, up to the end of the line they stop in, as the file `out`."""
    limit = int(mb * 1_000_000)
    with open(log, "rb") as src, open(out, "wb") as dst:
        data = src.read(limit)
        dst.write(data)
        if len(data) == limit and not data.endswith(b"\n"):
            dst.write(src.readline())
    return out


def scan(tree: Path, log: Path, cache: Path, valgrind: bool = True) -> subprocess.CompletedProcess:
    """One one-process `scan --format json` of `log` by `tree`, under cachegrind unless `valgrind` is
    False (a run that only warms the start-up cache in `cache`)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "NO_COLOR": "1",
        "VERL_LOGSCAN_CACHE_DIR": str(cache),
        "VERL_LOGSCAN_WORKERS": "1",
        "VERL_LOGSCAN_READER_MB": "off",
        "PYTHONHASHSEED": "0",  # (set and dict orders, and so the counts, the same run after run)
    }
    under = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    tool = [sys.executable, "-m", "logparse", "scan", "--format", "json", str(log)]
    cmd = [*under, *tool] if valgrind else tool
    p = subprocess.run(cmd, env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode not in (0, 1):  # (1: the scan found a failure)
        tail = p.stderr[-2000:]
        sys.exit(f"instructions.py: the scan of {log.name} by {tree} exited {p.returncode}:\n{tail}")
    return p


def count(tree: Path, log: Path, cache: Path) -> int:
    """Instructions of one one-process scan of `log` by `tree`."""
    stderr = scan(tree, log, cache).stderr
    m = REFS.search(stderr)
    if m is None:
        sys.exit(f"instructions.py: no instruction count in valgrind's output:\n{stderr[-2000:]}")
    return int(m.group(1).replace(",", ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", type=Path)
    ap.add_argument("--mb", type=float, default=20.0, help="megabytes of each log counted (default 20)")
    ap.add_argument("--tree", action="append", type=Path, help="a checkout to count (at most two)")
    a = ap.parse_args()
    trees = [t.resolve() for t in (a.tree or [ROOT])]
    if len(trees) > 2:
        ap.error("at most two trees")
    if shutil.which("valgrind") is None:
        print("instructions.py: no valgrind here (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    not_trees = [str(t) for t in trees if not (t / "logparse").is_dir()]
    if not_trees:
        print(f"instructions.py: not a verl-logscan checkout: {', '.join(not_trees)}", file=sys.stderr)
        return 2
    missing = [str(p) for p in a.logs if not p.is_file()]
    if missing:
        print(f"instructions.py: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="instructions-") as tmp:
        work = Path(tmp)
        caches = [work / f"cache-{n}" for n in range(len(trees))]
        for tree, cache in zip(trees, caches, strict=True):  # once a tree, not counted
            compile_modules = [sys.executable, "-m", "compileall", "-q", "logparse", "patterns", "reports"]
            subprocess.run(compile_modules, cwd=tree, check=True)
            scan(tree, head(a.logs[0], 0, work / "warm.log"), cache, valgrind=False)
        rows = []
        for log in a.logs:
            part = head(log, a.mb, work / f"{log.stem}-{a.mb:g}mb.log")
            first = head(log, 0, work / f"{log.stem}-first-line.log")
            per_tree = []
            for tree, cache in zip(trees, caches, strict=True):
                start = count(tree, first, cache)
                whole = count(tree, part, cache)
                per_tree.append((whole - start, start))
            rows.append((log.name, part.stat().st_size, per_tree))
    names = " | ".join(f"{t.name or t} (G)" for t in trees)
    print(f"| log | MB counted | {names} |{' change |' if len(trees) == 2 else ''} start-up (G) |")
    print(f"|---|---|{'---|' * len(trees)}{'---|' if len(trees) == 2 else ''}---|")
    for name, size, per_tree in rows:
        cells = " | ".join(f"{lines / 1e9:.3f}" for lines, _ in per_tree)
        change = ""
        if len(per_tree) == 2 and per_tree[0][0] > 0:
            change = f" {(per_tree[1][0] / per_tree[0][0] - 1) * 100:+.1f}% |"
        starts = " / ".join(f"{start / 1e9:.3f}" for _, start in per_tree)
        print(f"| {name} | {size / 1e6:.1f} | {cells} |{change} {starts} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
