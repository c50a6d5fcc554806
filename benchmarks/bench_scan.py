"""Time `verl-logscan scan --format json` against `grep -c -E -f benchmarks/baseline.ere` in one run.

For each size it generates a realistic multi-rank verl log (benchmarks/generate_log.py), then runs
both commands REPEAT times, alternating, and reports the best time of each, MB/s, the ratio
tool/grep, and the tool's peak RSS: the sum over the tool and its reader process, sampled from /proc
in one more run (shared pages count twice, so this overstates), or wait4's figure if larger. The
modules are compiled first, as `pip install` does. The yardstick is
grep's bare match with a fixed list of 50 ERE patterns (benchmarks/baseline.ere), so it does not
move with the catalog.

    python benchmarks/bench_scan.py --sizes 200 1000 2000 [--keep DIR] [--repeat 3]

Targets (issue 7): ratio <= 2.0 (goal 1.0); peak RSS <= 150 MB at 2 GB; cost linear in size.
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

from generate_log import generate  # noqa: E402


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


def run(cmd: list[str], env: dict | None = None, sample: bool = False) -> tuple[float, int, int]:
    """(seconds, peak RSS in MB, exit code) of one command. The peak is the largest of wait4's
    figure (the process alone, or its largest child) and, with `sample`, the sum over the process
    and its children read from /proc every 20 ms."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=float, nargs="+", default=[200.0], help="log sizes in MB")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", help="folder for the generated logs (default: a temporary one, removed)")
    ap.add_argument("--engine", choices=["hyperscan", "re"], help="force the prefilter engine")
    a = ap.parse_args()
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="vls-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, LC_ALL="C")
    # as `pip install` does: compile the modules once, so that no run pays for compiling them (an
    # environment with PYTHONDONTWRITEBYTECODE=1 would otherwise recompile them at every start)
    subprocess.run([sys.executable, "-m", "compileall", "-q", *(str(ROOT / p) for p in ("logparse", "patterns",
                    "reports"))], check=True, stdout=subprocess.DEVNULL)
    if a.engine:
        env["VERL_LOGSCAN_ENGINE"] = a.engine
    rows = []
    try:
        for mb in a.sizes:
            log = work / f"bench-{int(mb)}mb.log"
            if not log.exists():
                generate(str(log), mb)
            size = log.stat().st_size / 1e6
            grep = ["grep", "-c", "-E", "-f", str(HERE / "baseline.ere"), str(log)]
            tool = tool_command() + ["scan", "--format", "json", str(log)]
            g_best = t_best = float("inf")
            rss = 0
            for _ in range(a.repeat):
                g, _, _ = run(grep, env)
                t, _, code = run(tool, env)
                if code not in (0, 1):
                    sys.exit(f"verl-logscan exited {code}")
                g_best, t_best = min(g_best, g), min(t_best, t)
            _, rss, _ = run(tool, env, sample=True)  # timed apart: sampling /proc costs a little CPU
            rows.append((size, g_best, t_best, rss))
            print(f"{size:8.0f} MB  grep {g_best:6.2f} s ({size / g_best:6.0f} MB/s)  verl-logscan {t_best:6.2f} s "
                  f"({size / t_best:5.0f} MB/s)  ratio {t_best / g_best:5.2f}  peak RSS {rss} MB (both processes)", flush=True)
        # the Markdown report of the largest log must still fit a GitHub issue body
        biggest = work / f"bench-{int(max(a.sizes))}mb.log"
        md = subprocess.run(tool_command() + ["scan", "--format", "md", str(biggest)], capture_output=True,
                            env=env, check=False).stdout.decode("utf-8", "replace")
        print(f"markdown report of the {biggest.stat().st_size / 1e6:.0f} MB log: {len(md):,} characters "
              f"({'under' if len(md) < 65536 else 'OVER'} GitHub's 65,536)")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    if len(rows) > 1:
        per_mb = [t / s for s, _, t, _ in rows]
        print(f"seconds per MB: {', '.join(f'{x * 1000:.2f} ms' for x in per_mb)} "
              f"(linear if these stay flat)")


if __name__ == "__main__":
    main()
