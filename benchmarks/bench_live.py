"""Alert latency in a pipe: the time from writing a fatal line into `verl-logscan scan --tee` to the
ALERT line on its stderr (issue 7's goal: under 1 second).

    python benchmarks/bench_live.py [--rounds 5] [--lines 20000]

Each round starts the tool on a pipe, writes LINES healthy lines of a verl-style log, then the CUDA OOM
line, and measures until the alert is read. Prints each latency and the median.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

OOM = (
    "(WorkerDict pid=7, ip=10.0.0.2) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
    "GPU 0 has a total capacity of 79.11 GiB of which 1.00 GiB is free.\n"
)
HEALTHY = (
    "(WorkerDict pid=7, ip=10.0.0.2) node-1:7:24 [0] NCCL INFO Channel 03/0 : 0[0] -> 1[1] via P2P/IPC/read\n"
    "(TaskRunner pid=1) step:{n} - actor/pg_loss:np.float64(0.1) - timing_s/step:1.5\n"
)


def one_round(lines: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "logparse",
                "scan",
                "--tee",
                "--format",
                "md",
                "-o",
                os.path.join(tmp, "r.md"),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        alerted = threading.Event()
        seen_at: list[float] = []

        def read_err() -> None:
            for line in iter(p.stderr.readline, b""):
                if b"ALERT" in line:
                    seen_at.append(time.perf_counter())
                    alerted.set()

        threading.Thread(target=read_err, daemon=True).start()
        body = "".join(HEALTHY.format(n=i) for i in range(lines)).encode()
        p.stdin.write(body)
        p.stdin.flush()
        time.sleep(1.0)  # let it read and scan the healthy part first
        sent = time.perf_counter()
        p.stdin.write(OOM.encode())
        p.stdin.flush()
        ok = alerted.wait(30)
        p.stdin.close()
        p.wait(30)
        if not ok:
            raise SystemExit("no alert within 30 s")
        return seen_at[0] - sent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--lines", type=int, default=20000)
    a = ap.parse_args()
    got = [one_round(a.lines) for _ in range(a.rounds)]
    for i, s in enumerate(got, 1):
        print(f"round {i}: alert {s * 1000:.0f} ms after the fatal line was written")
    print(f"median {statistics.median(got) * 1000:.0f} ms (goal: under 1000 ms)")


if __name__ == "__main__":
    main()
