"""Time `verl-logscan scan --format json` against `grep -c -E -f benchmarks/baseline.ere` in one run.

For each kind of log and each size it generates a log (benchmarks/generate_log.py: `realistic`, the
plain `dense` one, `dense+tb` with a caught traceback every 2,000 lines, `mix`, and `dense+bars`,
`mix+bars` whose bars have no prefix), then runs both commands REPEAT times, alternating, and reports
the best time of each, MB/s, the ratio tool/grep, the tool's CPU time (user + system of its whole
process tree, from wait4) and the peak memory of each: for the tool its whole process tree's PSS
(proportional set size: a page the forked readers share counts once), sampled from /proc in one more
run, with the sum of their RSS (shared pages counted in each) beside it. The modules are compiled
first, as `pip install` does, and the start-up cache (patterns.cache) is warm, as after a first run.
A second table splits each log's scan by process (benchmarks/cpu_split.py, one run): the scanner's
CPU time and the part of it spent making blocks itself, each reader process's, the critical path.

It prints the machine first: the CPU's model, the CPUs available, Python's and grep's versions, and a
Python yardstick (python_yardstick: a fixed loop no tree changes), because a ratio to grep moves with
how fast the machine runs Python against how fast it runs grep: the same code, the same instructions
(benchmarks/instructions.py), gave 6.1x on dense+bars on one machine and 9.1x on another.

The yardstick is grep's match of a fixed list of 50 ERE patterns (benchmarks/baseline.ere), so it
does not move with the catalog. grep counts every matching line (`-c`) into a file: with its output
on /dev/null, GNU grep stops at its first match, which made the yardstick right only for logs whose
first match is at their end. The count is checked once per log against a run that writes every
matching line.

    python benchmarks/bench_scan.py --sizes 100 1000
        [--kinds realistic dense dense+tb mix dense+bars mix+bars] [--repeat 3] [--workers N] [--keep DIR]

Targets (issue 25, on a machine with load below 1): every dense shape at 100 MB at most 6x grep,
the bars without a prefix included; realistic at 1 GB at most 1.5x grep with two processes; CPU time
per MB flat from 100 MB to 1 GB; peak PSS of the whole process tree at most 150 MB at every size; the
dense log with caught tracebacks within 1.5x of the plain one (linear). A small log costs what the
start-up costs: the last line times a scan of a 40-line log, with the cache and without.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from cpu_split import measure  # noqa: E402
from generate_log import generate  # noqa: E402

KINDS = {  # kind -> (generate_log kind, caught_every, bars)
    "realistic": ("realistic", None, "ray"),
    "dense": ("dense", 0, "ray"),
    "dense+tb": ("dense", 2000, "ray"),
    "mix": ("mix", None, "ray"),
    "dense+bars": ("dense", 0, "bare"),
    "mix+bars": ("mix", None, "bare"),
}


def _tree_kb(pid: int, field: str) -> int:
    """`field` of /proc/PID/smaps_rollup (Pss or Rss, in KB) summed over a process and its children
    (the tool's reader processes)."""
    total = 0
    pids = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            pids += [int(p) for p in fh.read().split()]
    except OSError:
        pass
    for p in pids:
        try:
            with open(f"/proc/{p}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith(field + ":"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def run(
    cmd: list[str], env: dict | None = None, sample: bool = False, stdout=subprocess.DEVNULL
) -> tuple[float, int, int, float, int]:
    """(seconds, peak memory in MB, exit code, CPU seconds, peak RSS sum in MB) of one command. CPU:
    user + system of the process and the children it waited for (its readers). Memory: wait4's
    figure (the process alone, or its largest child) and, with `sample`, the process tree's PSS read
    from /proc every 20 ms, whichever is larger; the RSS sum is 0 without `sample`."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, env=env)
    peak = rss = 0
    while sample:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, _tree_kb(p.pid, "Pss"))
        rss = max(rss, _tree_kb(p.pid, "Rss"))
        time.sleep(0.02)
    else:
        _, status, usage = os.wait4(p.pid, 0)
    seconds = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    p.stderr.close()
    cpu = usage.ru_utime + usage.ru_stime
    return seconds, max(usage.ru_maxrss, peak) // 1024, p.returncode, cpu, rss // 1024


def tool_command() -> list[str]:
    exe = shutil.which("verl-logscan", path=str(Path(sys.executable).parent)) or shutil.which("verl-logscan")
    return [exe] if exe else [sys.executable, "-m", "logparse"]


def grep_count(log: Path, out: Path, env: dict) -> tuple[float, int, int]:
    """grep -c into a file (not /dev/null, where GNU grep stops at the first match): (s, RSS, count)."""
    with open(out, "wb") as fh:
        seconds, rss, code, _, _ = run(
            ["grep", "-c", "-E", "-f", str(HERE / "baseline.ere"), str(log)], env, stdout=fh
        )
    if code not in (0, 1):
        sys.exit(f"grep exited {code}")
    return seconds, rss, int(out.read_text().strip() or 0)


def check_count(log: Path, count: int, out: Path, env: dict) -> None:
    """The count is that of a grep that writes every matching line."""
    with open(out, "wb") as fh:
        subprocess.run(
            ["grep", "-E", "-f", str(HERE / "baseline.ere"), str(log)], stdout=fh, env=env, check=False
        )
    with open(out, "rb") as fh:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    if lines != count:
        sys.exit(f"grep -c counted {count} lines of {log.name}, a full run wrote {lines}")


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def python_yardstick() -> float:
    """Seconds (best of 3) of a fixed pure-Python loop: 20,000 verl step lines of 60 keys split and
    their values converted, the kind of work a scan does per line. It does not depend on the tree: it
    tells how fast this machine runs Python, beside grep's MB/s in the table, so that ratios to grep
    measured on two machines can be compared (the same code's ratio moves with the two speeds)."""
    line = "step:12 - " + " - ".join(f"actor/key_{i}:{i * 0.37:.6f}" for i in range(60))
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(20_000):
            [float(part.rpartition(":")[2]) for part in line.split(" - ")[1:]]
        best = min(best, time.perf_counter() - t0)
    return best


def machine() -> str:
    """The CPU's model, the CPUs this process may use, Python's and grep's versions."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as fh:
            names = [line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")]
        model = names[0] if names else model
    except OSError:
        pass
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    grep = subprocess.run(["grep", "--version"], capture_output=True, text=True, check=False).stdout
    return (
        f"{model}, {cpus} CPUs available, Python {sys.version.split()[0]}, "
        f"{grep.splitlines()[0] if grep else 'grep ?'}"
    )


def _default_workers() -> int:
    sys.path.insert(0, str(ROOT))
    from logparse.pipeline import default_workers

    return default_workers()


def _print_splits(splits: list[tuple[str, float, dict]]) -> None:
    """Each log's scan split by process (benchmarks/cpu_split.py)."""
    if not splits:
        return
    print()
    print(
        "| log | size | feed s | scanner CPU s (making blocks) | readers' CPU s | critical path CPU s "
        "| report s | load |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for kind, mb, m in splits:
        here = f" ({m['blocks_here_cpu']:.2f})" if m.get("blocks_here_cpu") is not None else ""
        readers = ", ".join(f"{t:.2f}" for t in m["readers_cpu"]) or "-"
        path = max([m["scanner_cpu"], *m["readers_cpu"]])
        print(
            f"| {kind} | {mb:g} MB | {m['feed_s']:.2f} | {m['scanner_cpu']:.2f}{here} | {readers} "
            f"| {path:.2f} | {m['report_s']:.2f} | {m['load']:.1f} |"
        )


def main() -> None:  # noqa: C901 (the measuring procedure of docs/benchmarks.md, top to bottom)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=float, nargs="+", default=[100.0], help="log sizes in MB")
    ap.add_argument("--kinds", nargs="+", choices=list(KINDS), default=list(KINDS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", help="folder for the generated logs (default: a temporary one, removed)")
    ap.add_argument("--engine", choices=["hyperscan", "re"], help="force the prefilter engine")
    ap.add_argument(
        "--tool",
        help="the command to time instead of this checkout's verl-logscan (e.g. "
        "'python -m logparse' with PYTHONPATH set to an older checkout)",
    )
    ap.add_argument("--workers", type=int, help="VERL_LOGSCAN_WORKERS for the tool (default: its own)")
    a = ap.parse_args()
    tool_cmd = shlex.split(a.tool) if a.tool else tool_command()
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="vls-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, LC_ALL="C")
    # as `pip install` does: compile the modules once, so that no run pays for compiling them (an
    # environment with PYTHONDONTWRITEBYTECODE=1 would otherwise recompile them at every start)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "compileall",
            "-q",
            *(str(ROOT / p) for p in ("logparse", "patterns", "reports")),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    if a.engine:
        env["VERL_LOGSCAN_ENGINE"] = a.engine
    if a.workers:
        env["VERL_LOGSCAN_WORKERS"] = str(a.workers)
    small = ROOT / "samples" / "ray-actor-exception.log"
    subprocess.run(
        tool_cmd + ["scan", "--format", "json", str(small)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )  # warms the start-up cache
    rows = []
    splits = []
    print(
        f"machine: {machine()}; Python yardstick {python_yardstick():.3f} s (benchmarks/bench_scan.py "
        f"python_yardstick); load {load()}"
    )
    print()
    print(
        "| log | size | grep -c | verl-logscan | ratio | tool CPU s (per MB) "
        "| peak PSS (tool, all processes) | RSS sum | grep RSS | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    try:
        for mb in a.sizes:
            for kind in a.kinds:
                gen_kind, caught, bars = KINDS[kind]
                log = work / f"bench-{kind.replace('+', '-')}-{mb:g}mb.log"
                if not log.exists():
                    generate(str(log), mb, kind=gen_kind, caught_every=caught, bars=bars)
                size = log.stat().st_size / 1e6
                count_file = work / "grep.out"
                tool = tool_cmd + ["scan", "--format", "json", str(log)]
                g_best = t_best = c_best = float("inf")
                g_rss = count = 0
                before = load()
                for _ in range(a.repeat):
                    g, g_rss, count = grep_count(log, count_file, env)
                    t, _, code, cpu, _ = run(tool, env)
                    if code not in (0, 1):
                        sys.exit(f"verl-logscan exited {code} on {log.name}")
                    g_best, t_best, c_best = min(g_best, g), min(t_best, t), min(c_best, cpu)
                check_count(log, count, count_file, env)
                _, pss, _, _, rss_sum = run(
                    tool, env, sample=True
                )  # apart: sampling /proc costs a little CPU
                rows.append((kind, mb, g_best, t_best, pss, c_best))
                print(
                    f"| {kind} | {size:.0f} MB | {g_best:.2f} s ({size / g_best:.0f} MB/s) | {t_best:.2f} s "
                    f"({size / t_best:.0f} MB/s) | {t_best / g_best:.2f} | {c_best:.2f} "
                    f"({c_best / size * 1000:.1f} ms) | {pss} MB | {rss_sum} MB | {g_rss} MB | "
                    f"{before} -> {load()} |",
                    flush=True,
                )
                if a.tool is None:
                    splits.append((kind, mb, measure(ROOT, log, a.workers or _default_workers())))
        _print_splits(splits)
        # the Markdown report of the largest log must still fit a GitHub issue body
        biggest = max(work.glob("bench-*.log"), key=lambda p: p.stat().st_size)
        md = subprocess.run(
            tool_cmd + ["scan", "--format", "md", str(biggest)], capture_output=True, env=env, check=False
        ).stdout.decode("utf-8", "replace")
        print(
            f"markdown report of the {biggest.stat().st_size / 1e6:.0f} MB log ({biggest.name}): {len(md):,} "
            f"characters ({'under' if len(md) < 65536 else 'OVER'} GitHub's 65,536)"
        )
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    for mb in a.sizes:
        plain = [r for r in rows if r[0] == "dense" and r[1] == mb]
        tb = [r for r in rows if r[0] == "dense+tb" and r[1] == mb]
        if plain and tb:
            print(f"dense+tb / dense at {mb:g} MB: {tb[0][3] / plain[0][3]:.2f} (linear if at most 1.5)")
    for kind in a.kinds:
        per_mb = [(mb, t / mb, c / mb) for k, mb, _, t, _, c in rows if k == kind]
        if len(per_mb) > 1:
            print(
                f"{kind}: per MB "
                + ", ".join(f"{x * 1000:.2f} ms ({c * 1000:.2f} ms CPU) at {mb:g} MB" for mb, x, c in per_mb)
            )
    times = {}
    for label, extra in (("cache", {}), ("no cache", {"VERL_LOGSCAN_CACHE": "off"})):
        times[label] = min(
            run(tool_cmd + ["scan", "--format", "json", str(small)], dict(env, **extra))[0] for _ in range(5)
        )
    print(
        f"a {small.name} scan (start-up): {times['cache']:.2f} s with the start-up cache, "
        f"{times['no cache']:.2f} s without (best of 5)"
    )


if __name__ == "__main__":
    main()
