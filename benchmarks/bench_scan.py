"""Time `verl-logscan scan --format json` against `grep -c -E -f benchmarks/baseline.ere` in one run.

For each kind of log and each size it generates a log (benchmarks/generate_log.py: `realistic`, the
plain `dense` one, `dense+tb` with a caught traceback every 2,000 lines, `mix`), then runs both
commands REPEAT times, alternating, and reports the best time of each, MB/s, the ratio tool/grep,
and the peak RSS of each: for the tool the sum over it and its reader process, sampled from /proc in
one more run (shared pages count twice, so this overstates), or wait4's figure if larger. The
modules are compiled first, as `pip install` does, and the start-up cache (patterns.cache) is warm,
as after a first run.

The yardstick is grep's match of a fixed list of 50 ERE patterns (benchmarks/baseline.ere), so it
does not move with the catalog. grep counts every matching line (`-c`) into a file: with its output
on /dev/null, GNU grep stops at its first match, which made the yardstick right only for logs whose
first match is at their end. The count is checked once per log against a run that writes every
matching line.

    python benchmarks/bench_scan.py --sizes 100 1000 2000 [--kinds realistic dense dense+tb mix]
                                    [--repeat 3] [--keep DIR]

Targets (issue 14): dense 100 MB at most 3x grep; realistic logs at 1-2 GB at most 1.5x grep; peak
RSS at most 150 MB at every size on both generators (both processes); the dense log with caught
tracebacks within 1.5x of the plain one (linear). A small log costs what the start-up costs: the
last line times a scan of a 40-line log, with the cache and without.
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

from generate_log import generate  # noqa: E402

KINDS = {
    "realistic": ("realistic", None),
    "dense": ("dense", 0),
    "dense+tb": ("dense", 2000),
    "mix": ("mix", None),
}


def _rss_kb(pid: int) -> int:
    """Resident memory of a process and its children (the tool's reader process), in KB; shared
    pages count in each (so this overstates)."""
    total = 0
    pids = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            pids += [int(p) for p in fh.read().split()]
    except OSError:
        pass
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def run(
    cmd: list[str], env: dict | None = None, sample: bool = False, stdout=subprocess.DEVNULL
) -> tuple[float, int, int]:
    """(seconds, peak RSS in MB, exit code) of one command. The peak is the largest of wait4's
    figure (the process alone, or its largest child) and, with `sample`, the sum over the process
    and its children read from /proc every 20 ms."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, env=env)
    peak = 0
    while sample:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, _rss_kb(p.pid))
        time.sleep(0.02)
    else:
        _, status, usage = os.wait4(p.pid, 0)
    seconds = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    p.stderr.close()
    return seconds, max(usage.ru_maxrss, peak) // 1024, p.returncode


def tool_command() -> list[str]:
    exe = shutil.which("verl-logscan", path=str(Path(sys.executable).parent)) or shutil.which("verl-logscan")
    return [exe] if exe else [sys.executable, "-m", "logparse"]


def grep_count(log: Path, out: Path, env: dict) -> tuple[float, int, int]:
    """grep -c into a file (not /dev/null, where GNU grep stops at the first match): (s, RSS, count)."""
    with open(out, "wb") as fh:
        seconds, rss, code = run(
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


def main() -> None:
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
    small = ROOT / "samples" / "ray-actor-exception.log"
    subprocess.run(
        tool_cmd + ["scan", "--format", "json", str(small)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )  # warms the start-up cache
    rows = []
    print(
        "| log | size | grep -c | verl-logscan | ratio | peak RSS (tool, both processes) | grep RSS | load |"
    )
    print("|---|---|---|---|---|---|---|---|")
    try:
        for mb in a.sizes:
            for kind in a.kinds:
                gen_kind, caught = KINDS[kind]
                log = work / f"bench-{kind.replace('+', '-')}-{mb:g}mb.log"
                if not log.exists():
                    generate(str(log), mb, kind=gen_kind, caught_every=caught)
                size = log.stat().st_size / 1e6
                count_file = work / "grep.out"
                tool = tool_cmd + ["scan", "--format", "json", str(log)]
                g_best = t_best = float("inf")
                g_rss = count = 0
                before = load()
                for _ in range(a.repeat):
                    g, g_rss, count = grep_count(log, count_file, env)
                    t, _, code = run(tool, env)
                    if code not in (0, 1):
                        sys.exit(f"verl-logscan exited {code} on {log.name}")
                    g_best, t_best = min(g_best, g), min(t_best, t)
                check_count(log, count, count_file, env)
                _, rss, _ = run(tool, env, sample=True)  # timed apart: sampling /proc costs a little CPU
                rows.append((kind, mb, g_best, t_best, rss))
                print(
                    f"| {kind} | {size:.0f} MB | {g_best:.2f} s ({size / g_best:.0f} MB/s) | {t_best:.2f} s "
                    f"({size / t_best:.0f} MB/s) | {t_best / g_best:.2f} | {rss} MB | {g_rss} MB | "
                    f"{before} -> {load()} |",
                    flush=True,
                )
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
        per_mb = [(mb, t / mb) for k, mb, _, t, _ in rows if k == kind]
        if len(per_mb) > 1:
            print(
                f"{kind}: seconds per MB {', '.join(f'{x * 1000:.2f} ms at {mb:g} MB' for mb, x in per_mb)}"
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
