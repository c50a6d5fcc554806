"""The stall detector's figures (issue 23) on every fixture: caught, false alarms, and the time to the
first ALERT with `scan --follow`.

    python benchmarks/bench_stalls.py [--cuts 20] [--stall-after 10]

* caught: each real hang in tests/fixtures/stalls/ scanned whole: `status: stalled`, and what it names
  (the odd one out, or the likely cause).
* false alarms: every sample log, every diff fixture run and every fixture under tests/fixtures/
  {torchrun,ray,verl}/ that is not a hang, whole and cut at CUTS random lines each (seeded): reports
  that come out `stalled`.
* time to the first ALERT: each hang's log up to its last line before the hang (its last step line,
  else its last line before the interruption) is written to a file, `scan --follow --stall-after
  SECONDS` follows it, and the wall time from the start to the `ALERT stalled` line is measured; the
  limit a plain `--follow` would use (live_alert_after with the run's own step time) is printed too.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from logparse.decide.stall import live_alert_after  # noqa: E402

# an ordinary script's step line (`step 7 loss ...`, `iter 7: loss ...`): what the last step is cut after
COUNTER = re.compile(rb"(?<![\w/])(?:[Ss]tep|[Ii]ter) [0-9]+:? loss")

STALLS = ROOT / "tests" / "fixtures" / "stalls"
CLI = [sys.executable, "-m", "logparse"]
HANGS = {  # fixture (under tests/fixtures/stalls/, or a path from tests/fixtures/) -> the file to follow
    "torchrun-hang-faulthandler-ctrl-c.log": "torchrun-hang-faulthandler-ctrl-c.log",
    "torchrun-hang-py-spy": "torchrun-hang-py-spy/train.log",
    "ray-placement-group-wait": "ray-placement-group-wait/driver.log",
    "ray-rollout-hang.log": "ray-rollout-hang.log",
    # an ordinary script's step lines (issue 38): Python logging's, and `iter N: ...` under --tee
    "torchrun-shared-stderr-dumps.log": "torchrun-shared-stderr-dumps.log",
    "../steps/plain-hang-iter.log": "../steps/plain-hang-iter.log",
}
# a healthy run that steps every second, replayed live a step every PACE_S seconds: slower than the
# CAUGHT_UP_S (1 s) after which the watch counts the silence, so a step line the scan did not read as
# one would leave it counting "before any step"
PACE_S = 1.5
LIVE_HEALTHY = ROOT / "tests" / "fixtures" / "steps" / "plain-healthy-logging.log"
INTERRUPT_WORDS = ("death signal", "KeyboardInterrupt", "got signal", "Traceback (most recent call last)")


def scan(path: Path | None, data: bytes | None = None) -> dict:
    args = CLI + ["scan", "--format", "json"] + ([str(path)] if path is not None else [])
    out = subprocess.run(args, input=data, capture_output=True, check=False).stdout
    return json.loads(out)


def caught() -> list[tuple[str, str, str]]:
    rows = []
    for name in HANGS:
        r = scan(STALLS / name)
        st = r.get("stall") or {}
        named = st.get("odd_one_out") or (st.get("cause") or {}).get("id") or "-"
        rows.append((name, r["status"], named))
    return rows


def healthy_inputs() -> list[Path]:
    out = sorted((ROOT / "samples").glob("*.log"))
    out += sorted((ROOT / "tests" / "fixtures" / "diff").rglob("*.log"))
    for sub in ("torchrun", "ray", "verl", "steps"):
        out += sorted(p for p in (ROOT / "tests" / "fixtures" / sub).rglob("*.log") if p.is_file())
    return [p for p in out if "hang" not in p.name]


def false_alarms(cuts: int) -> tuple[int, int, list[str]]:
    rng = random.Random(23)
    runs = alarms = 0
    where = []
    for path in healthy_inputs():
        lines = path.read_bytes().splitlines(keepends=True)
        points = [len(lines)] + sorted(rng.sample(range(1, len(lines)), min(cuts, max(0, len(lines) - 1))))
        for cut in points:
            runs += 1
            if scan(None, b"".join(lines[:cut]))["status"] == "stalled":
                alarms += 1
                where.append(f"{path.relative_to(ROOT)} cut at {cut}")
    return runs, alarms, where


def before_the_hang(path: Path) -> bytes:
    lines = path.read_bytes().splitlines(keepends=True)
    steps = [i for i, line in enumerate(lines) if b"step:" in line or COUNTER.search(line)]
    if steps:
        return b"".join(lines[: steps[-1] + 1])
    stop = next(
        (i for i, line in enumerate(lines) if any(w.encode() in line for w in INTERRUPT_WORDS)), len(lines)
    )
    return b"".join(lines[:stop])


def first_alert(path: Path, stall_after: float) -> float | None:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "job.log"
        log.write_bytes(before_the_hang(path))
        t0 = time.monotonic()
        p = subprocess.Popen(
            CLI
            + [
                "scan",
                "--follow",
                "--stall-after",
                f"{stall_after}s",
                str(log),
                "-o",
                str(Path(tmp) / "r.json"),
            ],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        got: list[float] = []

        def reader() -> None:
            for line in iter(p.stderr.readline, ""):
                if "ALERT stalled" in line:
                    got.append(time.monotonic() - t0)
                    return

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        t.join(stall_after + 30)
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
        return got[0] if got else None


def live_healthy(stall_after: float) -> tuple[int, int]:
    """LIVE_HEALTHY's step lines written to a followed file a step every PACE_S, for about
    stall_after + 5 s: (steps written, ALERT lines said)."""
    lines = LIVE_HEALTHY.read_bytes().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if COUNTER.search(line))
    steps = int((stall_after + 5) / PACE_S)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "job.log"
        log.write_bytes(b"".join(lines[: first + 1]))
        p = subprocess.Popen(
            CLI
            + [
                "scan",
                "--follow",
                "--stall-after",
                f"{stall_after}s",
                str(log),
                "-o",
                str(Path(tmp) / "r.json"),
            ],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        with log.open("ab") as fh:
            for line in lines[first + 1 : first + 1 + steps]:
                time.sleep(PACE_S)
                fh.write(line)
                fh.flush()
        p.send_signal(signal.SIGINT)
        try:
            _, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
    return steps, err.count("ALERT stalled")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuts", type=int, default=20)
    ap.add_argument("--stall-after", type=float, default=10.0)
    args = ap.parse_args()
    print("caught (whole fixture):")
    for name, status, named in caught():
        print(f"  {name:42} {status:8} {named}")
    runs, alarms, where = false_alarms(args.cuts)
    print(f"false alarms: {alarms} of {runs} healthy or failed runs (whole and cut) came out stalled")
    for w in where:
        print(f"  {w}")
    steps, alerts = live_healthy(args.stall_after)
    print(
        f"live healthy run ({LIVE_HEALTHY.name}, {steps} steps a step every {PACE_S:g} s): {alerts} ALERT(s)"
    )
    print(f"time to the first ALERT (--follow --stall-after {args.stall_after:g}s):")
    for name, file in HANGS.items():
        path = STALLS / file
        step_time = (scan(STALLS / name).get("stall") or {}).get("step_time_s")
        auto = live_alert_after(step_time, None)
        took = first_alert(path, args.stall_after)
        shown = f"{took:.1f} s" if took is not None else "no ALERT"
        plain = f"{auto:.0f} s" if auto is not None else "none (no step time in the log)"
        print(f"  {name:42} {shown:10} plain --follow limit: {plain}")


if __name__ == "__main__":
    main()
