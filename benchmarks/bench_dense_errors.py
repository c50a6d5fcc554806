"""Logs dense in error lines must cost about what a plain log of the same size costs (issue 13).

Generates three logs and a plain one of the same size for each, scans each with
`verl-logscan scan --format json` (best of --repeat runs) and prints the time, the peak RSS and the
ratio of the dense log's time to the plain log's:

* `identical`: 200,000 identical CUDA error lines (illegal memory access) spread over 64 ranks, as a
  cascade on a large job prints them;
* `distinct`: 1,000,000 catalog hits, each line distinct (the match examples of the built-in catalog's
  causes, symptoms and wrappers, each with a different word and number in it);
* `tracebacks`: 20,000 tracebacks of 8 ranks, each with a distinct message;
* `workers`: 20,000 tracebacks, each from a Ray worker of its own (`(WorkerDict pid=N, ip=...)`): 20,000
  streams, which made closing idle tracebacks look at every stream on every line;
* `bare`: 200,000 distinct error lines that no catalog entry matches (`[rankN]: ValueError: ...`), each
  a bare failure line for the fallback layer (issue 12).

The plain log of each is the same number of bytes of ordinary INFO chatter (no keyword of the catalog).
Before issue 13 the first took 88 s, the second did not finish in 300 s and the tracebacks took 17 s
of CPU: choosing the verdict compared every candidate with every other, every hit read back up to 64
lines for its context, and closing idle tracebacks looked at every stream on every line.

    python benchmarks/bench_dense_errors.py [--keep DIR] [--repeat 1] [--only identical distinct tracebacks]
                                            [--distinct 200000]

Each line gives the CPU time of the whole process tree (user + system, from wait4) beside the wall time,
and for the dense log the CPU time a line: a busy machine stretches the wall time, much less the CPU time.
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from bench_scan import run, tool_command  # noqa: E402

IDENTICAL_LINES = 200_000
DISTINCT_HITS = 1_000_000
TRACEBACKS = 20_000
WORDS = (
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
)


def write_identical(path: Path) -> None:
    """200k identical CUDA illegal-memory-access lines over 64 ranks, with c10's prefix."""
    with open(path, "w") as fh:
        fh.write("INFO job start\n")
        for i in range(IDENTICAL_LINES):
            fh.write(f"[rank{i % 64}]: RuntimeError: CUDA error: an illegal memory access was encountered\n")


def _hit_lines() -> list[str]:
    """One match example line of every built-in single-line entry (not those needing a traceback)."""
    from patterns import load_catalog

    lines = []
    for e in load_catalog().entries:
        if e.frames:
            continue
        for x in e.examples.match:
            if not x.block and "\n" not in x.line:
                lines.append(x.line)
                break
    return lines


def write_distinct(path: Path, hits: int = DISTINCT_HITS) -> None:
    """1e6 catalog hits (`hits`), each line made distinct by a word pair and a number appended."""
    lines = _hit_lines()
    rnd = random.Random(13)
    with open(path, "w") as fh:
        for i in range(hits):
            a, b = rnd.choice(WORDS), rnd.choice(WORDS)
            fh.write(f"{lines[i % len(lines)]} ({a}-{b} {i})\n")


def write_tracebacks(path: Path) -> None:
    """20,000 tracebacks from 8 ranks, each a distinct ValueError."""
    with open(path, "w") as fh:
        for n in range(TRACEBACKS):
            r = n % 8
            fh.write(
                f"[rank{r}]: Traceback (most recent call last):\n"
                f'[rank{r}]:   File "/app/train.py", line {n}, in main\n'
                f"[rank{r}]:     step(batch)\n"
                f'[rank{r}]:   File "/app/model.py", line 88, in step\n'
                f'[rank{r}]:     raise ValueError("bad batch {n}")\n'
                f"[rank{r}]: ValueError: bad batch {n} of {WORDS[n % len(WORDS)]}\n"
            )


def write_workers(path: Path) -> None:
    """20,000 tracebacks, each printed by a Ray worker of its own."""
    with open(path, "w") as fh:
        for n in range(TRACEBACKS):
            p = f"(WorkerDict pid={100000 + n}, ip=10.0.{n % 200}.1) "
            fh.write(
                f"{p}Traceback (most recent call last):\n"
                f'{p}  File "/app/train.py", line {n}, in main\n'
                f"{p}    step(batch)\n"
                f'{p}  File "/app/model.py", line 88, in step\n'
                f'{p}    raise ValueError("bad batch {n}")\n'
                f"{p}ValueError: bad batch {n}\n"
            )


def write_bare(path: Path) -> None:
    """200,000 distinct exception lines without tracebacks that no entry names."""
    rnd = random.Random(11)
    with open(path, "w") as fh:
        for n in range(IDENTICAL_LINES):
            fh.write(
                f"[rank{n % 64}]: ValueError: sample {n} has a bad {rnd.choice(WORDS)} field "
                f"{rnd.random():.6f}\n"
            )


def write_plain(path: Path, size: int) -> None:
    """`size` bytes of INFO chatter that no catalog keyword marks."""
    rnd = random.Random(7)
    written = 0
    with open(path, "w") as fh:
        while written < size:
            line = f"[rank{rnd.randrange(64)}]: INFO worker heartbeat {rnd.randrange(10**6)} queue ok\n"
            fh.write(line)
            written += len(line)


CASES = {
    "identical": write_identical,
    "distinct": write_distinct,
    "tracebacks": write_tracebacks,
    "workers": write_workers,
    "bare": write_bare,
}
# the lines each log holds, for the CPU time a line
LINES = {
    "identical": IDENTICAL_LINES + 1,
    "distinct": DISTINCT_HITS,
    "tracebacks": TRACEBACKS * 6,
    "workers": TRACEBACKS * 6,
    "bare": IDENTICAL_LINES,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--keep", help="folder for the generated logs (default: a temporary one, removed)")
    ap.add_argument("--only", nargs="+", choices=sorted(CASES), default=list(CASES))
    ap.add_argument(
        "--distinct",
        type=int,
        default=DISTINCT_HITS,
        help="catalog hits of the `distinct` log (fewer: is the time a hit the same, i.e. linear?)",
    )
    ap.add_argument(
        "--tool",
        help="the command to time instead of this checkout's verl-logscan, as one string "
        "(e.g. --tool 'python -m logparse' with PYTHONPATH naming another version)",
    )
    a = ap.parse_args()
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="vls-dense-"))
    work.mkdir(parents=True, exist_ok=True)
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
    env = dict(os.environ)
    try:
        for name in a.only:
            log = work / (f"{name}.log" if name != "distinct" else f"distinct-{a.distinct}.log")
            plain = work / f"{log.stem}-plain.log"
            if name == "distinct":
                LINES[name] = a.distinct
            if not log.exists():
                CASES[name](log, a.distinct) if name == "distinct" else CASES[name](log)
            if not plain.exists():
                write_plain(plain, log.stat().st_size)
            best = {}
            for label, path in (("dense", log), ("plain", plain)):
                cmd = (shlex.split(a.tool) if a.tool else tool_command()) + [
                    "scan",
                    "--format",
                    "json",
                    str(path),
                ]
                times = []
                cpus = []
                rss = 0
                for _ in range(a.repeat):
                    seconds, peak, code, cpu, _ = run(cmd, env, sample=True)
                    if code not in (0, 1):
                        sys.exit(f"verl-logscan exited {code} on {path}")
                    times.append(seconds)
                    cpus.append(cpu)
                    rss = max(rss, peak)
                best[label] = (min(times), rss, min(cpus))
            (t, rss, c), (tp, rssp, cp) = best["dense"], best["plain"]
            lines = LINES.get(name)
            per_line = f"  |  {c / lines * 1e6:5.1f} us CPU a line" if lines else ""
            print(
                f"{name:10} {log.stat().st_size / 1e6:6.1f} MB  dense {t:6.2f} s ({c:6.2f} s CPU), peak PSS "
                f"{rss:4d} MB  |  plain {tp:6.2f} s ({cp:5.2f} s CPU), peak PSS {rssp:4d} MB  |  ratio "
                f"{t / tp:5.2f}{per_line}  |  load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
