"""Fuzz the whole `verl-logscan scan` (in-process, through click) with mutated real logs for a while and
count what went wrong. Not part of the test run; tests/test_fuzz.py holds the short property tests.

Each round builds one input from the bundled samples and fixtures: lines spliced from several logs,
bytes flipped, NUL runs, ANSI and control bytes, lone CRs, byte-order marks, UTF-16, over-long lines,
truncation, gzip (whole or cut), a folder of rank files, or a torchrun error.json with hostile JSON. It
is scanned in a random format; a round fails when the CLI raises (anything but SystemExit), exits with
a code other than 0 / 1 / 2, prints a Python traceback, writes JSON that does not parse, or takes
longer than --slow seconds. Failing
inputs are kept in --keep with the traceback.

    python benchmarks/fuzz_run.py --seconds 60 --seed 1
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from click.testing import CliRunner  # noqa: E402

from logparse.cli import cli  # noqa: E402

HOSTILE = [
    b"\x00",
    b"\x00" * 4096,
    b"\x1b",
    b"\x1b[31m",
    b"\x1b]0;t\x07",
    b"\r",
    b"\r\n",
    b"\xff\xfe",
    b"\xef\xbb\xbf",
    b"\xed\xa0\x80",
    b"\xc0\xaf",
    b"\x07\x08",
    b"\xe2\x80\xa8",
    b"Traceback (most recent call last):\n",
    b'  File "/x.py", line 1, in f\n',
    b"[repeated 9x across cluster]",
    b"[rank999999999999999999]: ",
    b"(WorkerDict pid=99999999999999999999, ip=::1) ",
    b"step:99999999999999999999 - loss:nan",
]


class SlowRound(BaseException):
    """Raised by SIGALRM when a scan runs past --slow seconds."""


def _alarm(signum: int, frame: object) -> None:
    raise SlowRound()


FILLERS = [
    b"y",
    b"1",
    b" ",
    b"/a",
    b"a.",
    b"0xf",
    b"-",
    b"ab",
    b"1.",
    b"a ",
    b"[",
    b"(",
    b"=",
    b", ",
    b"\t",
    b"\x1b[",
    b"rank0]: ",
    b"WorkNCCL(",
    b"step:1 - ",
    b"a:1 ",
    b"Error",
    b'"',
    b"'",
    b"\\",
]


def corpus() -> list[bytes]:
    files = sorted(ROOT.glob("samples/*.log")) + sorted(ROOT.glob("tests/fixtures/**/*.log"))
    return [f.read_bytes() for f in files]


def mutate(rnd: random.Random, logs: list[bytes]) -> bytes:
    lines = [
        line for log in rnd.sample(logs, k=min(len(logs), rnd.randint(1, 4))) for line in log.split(b"\n")
    ]
    if rnd.random() < 0.7:  # splice: a shuffle of chunks of lines
        k = rnd.randint(1, 30)
        pieces = [lines[i : i + rnd.randint(1, 40)] for i in range(0, len(lines), max(1, len(lines) // k))]
        rnd.shuffle(pieces)
        lines = [line for p in pieces for line in p]
    data = bytearray(b"\n".join(lines))
    for _ in range(rnd.randint(0, 20)):
        kind = rnd.random()
        pos = rnd.randint(0, len(data))
        if kind < 0.4:
            data[pos:pos] = rnd.choice(HOSTILE)
        elif kind < 0.7 and data:
            data[min(pos, len(data) - 1)] = rnd.randrange(256)
        elif kind < 0.8:
            data[pos:pos] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 200)))
        elif kind < 0.85:
            filler = rnd.choice(FILLERS)  # an over-long line, of one token or of a repeated pattern
            data[pos:pos] = filler * (rnd.randint(1 << 16, 3 << 20) // len(filler))
        else:
            del data[pos : pos + rnd.randint(1, 500)]
    if rnd.random() < 0.1:
        del data[rnd.randint(0, len(data)) :]
    return bytes(data)


def make_input(rnd: random.Random, logs: list[bytes], workdir: Path) -> list[str]:
    data = mutate(rnd, logs)
    shape = rnd.random()
    if shape < 0.08:
        text = data.decode("utf-8", "replace")
        enc = rnd.choice(["utf-16", "utf-16-le", "utf-16-be"])
        (workdir / "job.log").write_bytes(text.encode(enc, "replace"))
        return ["job.log"]
    if shape < 0.13:
        (workdir / "job.log").write_bytes(data.replace(b"\n", b"\r"))
        return ["job.log"]
    if shape < 0.23:
        z = gzip.compress(data, compresslevel=1)
        if rnd.random() < 0.5:
            z = z[: rnd.randint(0, len(z))]
        (workdir / "job.log.gz").write_bytes(z)
        return ["job.log.gz"]
    if shape < 0.33:
        logs_dir = workdir / "logs"
        lines = data.split(b"\n")
        n = rnd.randint(1, 12)
        for r in range(n):
            (logs_dir / f"rank{r}").mkdir(parents=True, exist_ok=True)
            (logs_dir / f"rank{r}" / "stdout.log").write_bytes(b"\n".join(lines[r::n]))
        if rnd.random() < 0.5:
            payload = {
                "message": {
                    "message": data[:200].decode("utf-8", "replace"),
                    "extraInfo": {
                        "py_callstack": data[:3000].decode("utf-8", "replace") + "\ud800\x00\x1b]0;x\x07",
                        "timestamp": "1",
                    },
                }
            }
            raw = json.dumps(payload)
            if rnd.random() < 0.3:
                raw = raw[: rnd.randint(0, len(raw))]
            (logs_dir / "rank0" / "error.json").write_text(raw)
        return ["logs"]
    (workdir / "job.log").write_bytes(data)
    return ["job.log"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", type=Path, default=Path("fuzz-failures"), help="folder for failing inputs")
    ap.add_argument(
        "--slow", type=float, default=10.0, help="a scan taking longer than this many seconds fails"
    )
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    signal.signal(signal.SIGALRM, _alarm)
    logs = corpus()
    runner = CliRunner()
    codes: Counter = Counter()
    failures: list[str] = []
    times: list[float] = []
    total_bytes = 0
    rounds = 0
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        rounds += 1
        workdir = Path(tempfile.mkdtemp(prefix="fuzz-"))
        try:
            paths = make_input(rnd, logs, workdir)
            total_bytes += sum(f.stat().st_size for f in workdir.rglob("*") if f.is_file())
            fmt = rnd.choice(["json", "json", "text", "md", "html"])
            argv = ["scan", "--format", fmt, *[str(workdir / p) for p in paths]]
            start = time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, args.slow)
            try:
                result = runner.invoke(cli, argv, catch_exceptions=True)
                slow = None
            except SlowRound:
                result, slow = None, traceback.format_exc()
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            times.append(time.monotonic() - start)
            codes["slow" if result is None else result.exit_code] += 1
            problem = None
            if result is None:
                problem = f"slow: stopped after {args.slow:g} s in\n{slow}"
            elif result.exception is not None and not isinstance(result.exception, SystemExit):
                problem = "".join(traceback.format_exception(*result.exc_info))
            elif result.exit_code not in (0, 1, 2, 5):
                problem = f"exit code {result.exit_code}"
            elif "Traceback (most recent call last)" in (result.stderr if hasattr(result, "stderr") else ""):
                problem = "traceback on stderr"
            elif fmt == "json" and result.exit_code in (0, 1, 5):
                try:
                    json.loads(result.stdout)
                except ValueError as exc:
                    problem = f"invalid JSON: {exc}"
            if problem:
                keep = args.keep / f"round-{rounds}"
                shutil.copytree(workdir, keep)
                (keep / "problem.txt").write_text(f"{argv}\n\n{problem}")
                frames = [
                    ln.strip()
                    for ln in problem.splitlines()
                    if ln.strip().startswith("File ") and "fuzz_run.py" not in ln
                ]
                where = frames[-1:] or [""]
                failures.append(f"round {rounds}: {problem.splitlines()[0]} {where[0]} (kept in {keep})")
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"fuzz_run: {rounds} rounds in {args.seconds:.0f} s (seed {args.seed}), "
        f"{total_bytes / 1e6:.1f} MB of input"
    )
    print(f"  exit codes: {dict(sorted(codes.items(), key=str))}")
    if times:
        times.sort()
        print(
            f"  scan time: median {statistics.median(times) * 1000:.0f} ms, "
            f"p95 {times[int(len(times) * 0.95)] * 1000:.0f} ms, max {times[-1] * 1000:.0f} ms"
        )
    print(f"  failures: {len(failures)}")
    for f in failures[:20]:
        print(f"    {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
