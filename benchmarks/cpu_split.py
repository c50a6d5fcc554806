"""Where a scan's CPU time goes, process by process: the scanner, each reader process, the report.

Runs a scan of LOG in a fresh Python process of the tree (`--tree`, default this checkout: its code on
`sys.path`) as `scan --format json` does (Analysis, then the redacted report rendered as JSON), with
`--workers N` for each N given, best of --repeat by wall time, and prints, per N:

* the wall time of reading and observing (`feed`) and of the report;
* the scanner's CPU time (user + system) while it feeds, and the part of it spent making blocks itself
  (the line-local work: prefilter, line numbers, progress columns; logparse.read.blocks);
* each reader process's CPU time (as it tells it at its end; a tree that does not tell gives the sum of
  its children's, from RUSAGE_CHILDREN);
* the critical path: the largest CPU time of one process while feeding, which is the feed's wall time
  when every process has a core of its own;
* the peak memory of the whole process tree, as PSS (proportional set size: a page shared by the
  forked processes counts once, split among them) and as the sum of RSS (shared pages counted in each).

From the one-process run (N=1) it also splits the work into the line-local part L (making blocks) and
the scanner's own S (the rest of feeding), and projects the feed's CPU critical path at N processes
with a core each as max(S, (L + S + overhead) / N), the overhead per block measured at the largest N.

    python benchmarks/cpu_split.py LOG [--workers 1 2 4 8] [--repeat 3] [--tree PATH]

Exit 2, with the reason, when LOG is no file or `--tree` no checkout.

CPU times are steadier than wall times on a busy machine; the load is printed with each row. With more
processes than cores the scanner makes more blocks itself (its readers wait for a core), so the split
at a large N on a small machine is not the split on a large one; the projection uses N=1's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# Run inside the tree: one scan, its CPU split as JSON on stdout.
DRIVER = r"""
import json, os, resource, sys, time
sys.path.insert(0, sys.argv[1])
def cpu(who):
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime
import dataclasses
import logparse.pipeline as pipeline
from logparse.pipeline import ScanConfig
from logparse.redact import RedactConfig
from patterns import load_builtin_catalog
from reports import render
catalog = load_builtin_catalog()
config = ScanConfig()
if "workers" in {f.name for f in dataclasses.fields(ScanConfig)}:
    config = dataclasses.replace(config, workers=int(sys.argv[3]))
w0, s0, c0 = time.perf_counter(), cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
start = getattr(pipeline, 'start_analysis', None) or pipeline.Analysis  # (a tree from before it)
analysis = start(catalog, config)
analysis.feed_inputs([sys.argv[2]])
w1, s1, c1 = time.perf_counter(), cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
text = render(analysis.report(RedactConfig()), "json")
w2, s2 = time.perf_counter(), cpu(resource.RUSAGE_SELF)
stats = analysis.reader.inputs[0]
readers = list(getattr(stats, "reader_cpu", None) or ([c1 - c0] if c1 - c0 > 0.005 else []))
print(json.dumps({
    "feed_s": w1 - w0, "scanner_cpu": s1 - s0, "readers_cpu": readers,
    "blocks_here": getattr(stats, "scanner_blocks", None),
    "blocks_here_cpu": getattr(stats, "scanner_block_cpu", None),
    "report_s": w2 - w1, "report_cpu": s2 - s1, "report_chars": len(text),
}))
"""


def _tree_kb(pid: int, field: str) -> int:
    """`field` (Pss or Rss, kB) summed over a process and its children, from smaps_rollup."""
    total = 0
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    for p in [str(pid), *children]:
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith(field + ":"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def measure(tree: Path, log: Path, workers: int) -> dict:
    """One scan of `log` by `tree` with `workers` processes: the driver's figures and the tree's peak
    PSS and RSS in MB (sampled every 20 ms)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "NO_COLOR": "1", "VERL_LOGSCAN_WORKERS": str(workers)}
    if workers == 1:
        env["VERL_LOGSCAN_READER_MB"] = "off"  # (a tree without --workers: one process all the same)
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(tree), str(log), str(workers)],
        stdout=subprocess.PIPE,
        env=env,
        cwd=tree,
    )
    pss = rss = 0
    while proc.poll() is None:
        pss = max(pss, _tree_kb(proc.pid, "Pss"))
        rss = max(rss, _tree_kb(proc.pid, "Rss"))
        time.sleep(0.02)
    out = json.loads(proc.stdout.read())
    out["pss_mb"], out["rss_mb"] = pss / 1024, rss / 1024
    out["load"] = os.getloadavg()[0]
    return out


def critical(m: dict) -> float:
    """The largest CPU time of one process while feeding."""
    return max([m["scanner_cpu"], *m["readers_cpu"]])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tree", default=str(ROOT))
    a = ap.parse_args()
    tree, log = Path(a.tree).resolve(), Path(a.log).resolve()
    if not log.is_file():
        print(f"cpu_split.py: {a.log}: no such file", file=sys.stderr)
        return 2
    if not (tree / "logparse" / "pipeline.py").is_file():
        print(
            f"cpu_split.py: {a.tree}: not a verl-logscan checkout (no logparse/pipeline.py)", file=sys.stderr
        )
        return 2
    print(
        f"{log.name} ({log.stat().st_size / 1e6:.0f} MB), tree {tree}; best of {a.repeat} by feed wall time"
    )
    print(
        "| N | load | feed s | report s | scanner CPU s (making blocks) | readers' CPU s | "
        "critical path CPU s | total CPU s | PSS MB | RSS sum MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    best: dict[int, dict] = {}
    for n in a.workers:
        runs = [measure(tree, log, n) for _ in range(a.repeat)]
        m = min(runs, key=lambda r: r["feed_s"])
        m["pss_mb"] = max(r["pss_mb"] for r in runs)
        m["rss_mb"] = max(r["rss_mb"] for r in runs)
        best[n] = m
        here = m["blocks_here_cpu"]
        made = f" ({here:.2f}: {m['blocks_here']} blocks)" if here is not None else ""
        total = m["scanner_cpu"] + sum(m["readers_cpu"])
        readers = ", ".join(f"{t:.2f}" for t in m["readers_cpu"]) or "-"
        print(
            f"| {n} | {m['load']:.1f} | {m['feed_s']:.2f} | {m['report_s']:.2f} | "
            f"{m['scanner_cpu']:.2f}{made} | {readers} | {critical(m):.2f} | {total:.2f} | "
            f"{m['pss_mb']:.0f} | {m['rss_mb']:.0f} |",
            flush=True,
        )
    one = best.get(1)
    if one is not None and one["blocks_here_cpu"] is not None:
        line_local = one["blocks_here_cpu"]
        own = one["scanner_cpu"] - line_local
        blocks = one["blocks_here"] or 1
        top = max(best)
        extra = max(0.0, best[top]["scanner_cpu"] + sum(best[top]["readers_cpu"]) - one["scanner_cpu"])
        print(
            f"one process: line-local work L = {line_local:.2f} s CPU over {blocks} blocks, the scanner's "
            f"own S = {own:.2f} s; overhead of sharing at N={top}: {extra:.2f} s"
        )
        for n in (1, 2, 4, 8, 16, 32):
            path = max(own, (line_local + own + (extra if n > 1 else 0.0)) / n)
            print(
                f"projected feed CPU critical path at N={n}: {path:.2f} s "
                f"({path / (line_local + own):.2f} of one)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
