"""How long the hostile cases of the test matrix take: the timings that used to be assertions in tests.

The tests (tests/logparse/test_robustness.py, tests/logparse/test_hostile_catalogs.py,
tests/logparse/read/test_deep_and_dense_inputs.py,
tests/logparse/read/test_binary_and_compressed_inputs.py, tests/logparse/test_outputs_are_never_lost.py,
tests/logparse/test_fleet_failures.py) check what each case does (a report, a note, an exit code, no
traceback) and only guard against a hang; a shared, busy machine made their wall-clock limits fail.
This script times the same cases, each as a user runs it (`python -m logparse ...` in a fresh
process), and prints the seconds and peak RSS of each:

* three lines of a single 100 KB token reaching the trackers (they once backtracked for minutes);
* three lines of about 1 MB that look like interleaved exception lines (one took 5.8 s, quadratic);
* 100,000 tracebacks of 8 ranks (600,000 lines);
* one unbroken "During handling of the above exception" chain of 5,000, 20,000 and 80,000 links (its
  memory once grew with its length: 168 MB at 20,000, 554 MB at 80,000);
* four traceback frames whose paths have 100,000 folders each (1.6 MB), and a line of 400,000 `^`
  markers before the error line, each rendered as Markdown and as HTML (the frame paths once took
  97 s: a library-root regex was quadratic under `regex`; tests/reports/test_rendering_cost.py checks
  the ratio to the same log with short text);
* a user catalog whose regexes the loader accepts but which take the full match timeout on every
  line (the per-entry budget disables the entry after about 2 s);
* /dev/zero, and a gzip bomb of 4 GB of zeros (both stop after 256 MB of NUL bytes with a note);
* a catalog whose YAML aliases expand to 387 million values (refused by the loader);
* the first load (no start-up cache) of a user catalog of 5,000, 20,000 and 80,000 keywords (it was
  quadratic: 17 s at 20,000, over 300 s at 100,000), and one whose keyword is too long for Hyperscan;
* round four, each at two sizes (the second 4x the first: linear is about 4x the time, flat memory):
  a line of 1 MB / 4 MB / 22 MB of `\r` progress-bar redraws ending in a CUDA OOM (it was cut to its
  head: HEALTHY); a log after 64 KB / 256 KB of random bytes, and after 8 / 32 MB of them (a binary
  head skipped the whole log); 30,000 / 120,000 binary spans (one note each: a 5 MB report); a folder of
  200 / 800 rotated and .stdout logs; a .zst log of 50 / 200 MB; 500 / 2,000 tracebacks of 20 frames
  of 4,000 characters, and 2,000 of 100 characters (memory grew with the frames' width: 1.16 GB for a
  346 MB log).

    python benchmarks/bench_hostile_inputs.py [--keep DIR] [--round-four]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from bench_scan import run  # noqa: E402

OOM = (
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.11 GiB of which 1.00 GiB is free."
)
ENTRY = """\
- id: my-slow-failure
  title: My slow failure
  category: data-error
  role: cause
  severity: error
  priority: 70
  keywords: ['MyDataError']
  patterns:
    - 'MyDataError: {pattern}'
  message: 'data broke'
  remediation:
    summary: The data broke.
    why: Because.
    fix: ['Fix the data.']
  examples:
    match: ['[rank1]: MyDataError: {example}']
    no_match:
      - line: 'MyDataErrorHandler installed'
        why: not an error
"""


def build(work: Path) -> list[tuple]:  # noqa: C901 (the cases, listed one after the other)
    """The cases: (name, arguments of `python -m logparse`[, environment variables to set])."""
    cases = []
    long_lines = {
        "error-line-token": OOM + " " + "y" * 100_000,
        "repeated-between-blanks": OOM + " " * 50_000 + "[repeated 3x across cluster]" + " " * 50_000 + "end",
        "watchdog-token": (
            "[rank3]:[E808 04:21:41.190918398 ProcessGroupNCCL.cpp:655] [Rank 3] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLRED" + "y" * 100_000
        ),
    }
    for name, line in long_lines.items():
        (work / f"{name}.log").write_text("start\n" + line + "\n")
        cases.append((f"100 KB token: {name}", ["scan", "--format", "json", str(work / f"{name}.log")]))
    # lines of about 1 MB that look like exception lines interleaved by several processes
    # (logparse.read.interleave): 400,000 separators; a caret run; the type written 100,000 times
    woven = {
        "separators": "KeyError: " + ": " * 400_000 + "KeyError",
        "carets": "^~" * 400_000 + "KeyError: 'k'",
        "dotted-type": "    " + "a." * 400_000 + "Error : x",
    }
    for name, line in woven.items():
        (work / f"woven-{name}.log").write_text("start\n" + line + "\n")
        cases.append(
            (
                f"1 MB interleaving look-alike: {name}",
                ["scan", "--format", "json", str(work / f"woven-{name}.log")],
            )
        )

    block = (
        "[rank{r}]: Traceback (most recent call last):\n"
        '[rank{r}]:   File "/app/train.py", line {n}, in main\n'
        "[rank{r}]:     step(batch)\n"
        '[rank{r}]:   File "/app/model.py", line 88, in step\n'
        '[rank{r}]:     raise ValueError("bad batch {n}")\n'
        "[rank{r}]: ValueError: bad batch {n}\n"
    )
    with open(work / "tbs.log", "w") as fh:
        for n in range(100_000):
            fh.write(block.format(r=n % 8, n=n))
    cases.append(("100,000 tracebacks", ["scan", "--format", "json", str(work / "tbs.log")]))

    link = (
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/app/train.py", line {n}, in step\n'
        "[rank0]:     handle(batch)\n"
        "[rank0]: KeyError: 'retry {n}'\n"
    )
    between = (
        "[rank0]: \n[rank0]: During handling of the above exception, another exception occurred:\n[rank0]: \n"
    )
    for links in (5_000, 20_000, 80_000):
        with open(work / f"chain-{links}.log", "w") as fh:
            fh.write(between.join(link.format(n=n) for n in range(links)))
        cases.append(
            (f"a chain of {links:,} links", ["scan", "--format", "json", str(work / f"chain-{links}.log")])
        )
    shapes = {
        "four frame paths of 100,000 folders": ("/abc" * 100_000, "^^^^"),
        "400,000 markers before the error line": ("/abc", "^" * 400_000 + "x"),
    }
    for i, (name, (folders, marks)) in enumerate(shapes.items()):
        lines = ["start", "Traceback (most recent call last):"]
        for n in range(4):
            lines += [f'  File "{folders}/f{n}.py", line {n + 1}, in fn{n}', f"    call{n}()"]
        log = work / f"long-text-{i}.log"
        log.write_text("\n".join([*lines, f"    {marks}", "RuntimeError: boom"]) + "\n")
        for fmt in ("md", "html"):
            cases.append((f"{name}, {fmt}", ["scan", "--format", fmt, str(log)]))

    (work / "slow.yaml").write_text(ENTRY.format(pattern="(?:[a-z]|[a-y])*!$", example="abc!"))
    with open(work / "slow.log", "w") as fh:
        for i in range(2000):
            fh.write(f"[rank{i % 8}]: MyDataError: " + "a" * 30 + "!b\n")
    cases.append(
        (
            "slow user regex, 2,000 lines",
            ["scan", "--format", "json", "--catalog", str(work / "slow.yaml"), str(work / "slow.log")],
        )
    )

    if Path("/dev/zero").exists():
        cases.append(("/dev/zero", ["scan", "--format", "json", "/dev/zero"]))
    bomb = work / "bomb.log.gz"
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = b"\x00" * (16 << 20)
    with open(bomb, "wb") as fh:
        fh.write(z.compress(b"INFO start\n"))
        for _ in range(256):  # 4 GB
            fh.write(z.compress(zeros))
        fh.write(z.flush())
    cases.append(
        (
            f"gzip bomb, 4 GB of zeros in {bomb.stat().st_size >> 10} KB",
            ["scan", "--format", "json", str(bomb)],
        )
    )

    lines = ["  xa: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"  x{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    laughs = ENTRY.format(pattern="(?P<what>.+)", example="x").replace(
        "  title: My slow failure", "  title: My slow failure\n" + "\n".join(lines)
    )
    (work / "laughs.yaml").write_text(laughs)
    cases.append(("billion laughs catalog", ["catalog", "check", str(work / "laughs.yaml")]))

    (work / "kw.log").write_text("[rank1]: MyDataError: bad row 7\n")
    for n in (5_000, 20_000, 80_000):
        words = ", ".join(f"'MyErr{i * 7919 % 1_000_003:07d}x{i}'" for i in range(n))
        entry = ENTRY.format(pattern="(?P<what>.+)", example="x")
        (work / f"kw-{n}.yaml").write_text(entry.replace("['MyDataError']", f"['MyDataError', {words}]"))
        cases.append(
            (
                f"user catalog of {n:,} keywords, first load",
                ["scan", "--format", "json", "--catalog", str(work / f"kw-{n}.yaml"), str(work / "kw.log")],
                {"VERL_LOGSCAN_CACHE": "off"},
            )
        )
    (work / "kw-long.yaml").write_text(
        ENTRY.format(pattern="(?P<what>.+)", example="x").replace(
            "['MyDataError']", "['MyDataError', '" + "K" * 40_000 + "']"
        )
    )
    cases.append(
        (
            "catalog keyword of 40,000 characters",
            ["scan", "--format", "json", "--catalog", str(work / "kw-long.yaml"), str(work / "kw.log")],
            {"VERL_LOGSCAN_CACHE": "off"},
        )
    )
    cases += _round_four(work)
    return cases


def _round_four(work: Path) -> list[tuple]:  # noqa: C901 (the cases, listed one after the other)
    """Points 1, 6 and 7 of issue "Safe to paste, round four", each at two sizes."""
    import random

    cases: list[tuple] = []
    json_scan = ["scan", "--format", "json"]
    for n in (25_000, 100_000, 400_000):  # 1.3 / 5.4 / 22 MB of redraws on one line (written in pieces)
        log = work / f"redraws-{n}.log"
        with open(log, "w") as fh:
            fh.write("2025-01-01 12:00:00 INFO start training\n")
            fh.writelines(f"Training Progress: {i % 100}%|###| {i}/99999 [00:01<00:07]\r" for i in range(n))
            fh.write(OOM + "\n")
        cases.append((f"OOM after {log.stat().st_size >> 20} MB of \\r redraws", [*json_scan, str(log)]))
    # (the inputs are written in pieces: a child's peak RSS as wait4 reports it starts from this
    # process's size at the fork, so this process stays small)
    rnd = random.Random(7)
    text = ("".join(f"[rank0]: step:{i} - actor/loss:0.5\n" for i in range(20_000)) + OOM + "\n").encode()
    for size in (64 << 10, 256 << 10, 8 << 20, 32 << 20):
        log = work / f"binary-head-{size}.log"
        with open(log, "wb") as fh:
            for _ in range(size >> 16):
                fh.write(rnd.randbytes(1 << 16))
            fh.write(text)
        cases.append((f"log after {size >> 10:,} KB of random bytes", [*json_scan, str(log)]))
    clean = b"INFO a clean line of the log that ends a span\n"
    noise = rnd.randbytes(600).replace(b"\n", b"\x01") + b"\n"
    for spans in (30_000, 120_000):
        log = work / f"spans-{spans}.log"
        with open(log, "wb") as fh:
            for _ in range(spans // 1000):
                fh.write((noise + clean) * 1000)
            fh.write(OOM.encode() + b"\n")
        cases.append((f"{spans:,} binary spans", [*json_scan, str(log)]))
    for files in (200, 800):
        folder = work / f"rotated-{files}"
        folder.mkdir(exist_ok=True)
        for i in range(files):
            name = f"train.log.{i + 1}" if i % 2 else f"worker-{i}.stdout"
            (folder / name).write_text("".join(f"[rank0]: step:{j} - actor/loss:0.5\n" for j in range(200)))
        (folder / "worker.stderr").write_text(OOM + "\n")
        (folder / "model.safetensors").write_bytes(b"\x00" * 1024)
        cases.append((f"a folder of {files} rotated / .stdout logs", [*json_scan, str(folder)]))
    try:
        import zstandard
    except ImportError:  # pragma: no cover - a dependency
        zstandard = None
    # a log of mostly quiet lines, as .zst and as it is (the difference: what zstd costs)
    lines = b"".join(
        b"2025-01-01 12:00:%02d INFO worker heartbeat %06d, queue depth 3\n" % (i % 60, i)
        for i in range(1000)
    )
    for mb in (50, 200) if zstandard is not None else ():
        plain = work / f"quiet-{mb}.log"
        with open(plain, "wb") as fh:
            for _ in range((mb << 20) // len(lines)):
                fh.write(lines)
            fh.write(OOM.encode() + b"\n")
        packed = work / f"quiet-{mb}.log.zst"
        with open(plain, "rb") as src, open(packed, "wb") as fh:
            zstandard.ZstdCompressor().copy_stream(src, fh)
        cases.append((f"a log of {mb} MB", [*json_scan, str(plain)]))
        cases.append((f"the same as .zst ({packed.stat().st_size >> 10:,} KB)", [*json_scan, str(packed)]))
    # 20 frames of 4,000 characters: 80 / 320 MB (both past the 400 tracebacks kept: flat memory), and
    # the same tracebacks with 100-character frames, for the memory a frame's width adds
    for count, width in ((500, 4000), (2_000, 4000), (2_000, 100)):
        log = work / f"frames-{count}-{width}.log"
        half = "d" * (width // 2)
        with open(log, "w") as fh:
            for i in range(count):
                r = i % 8
                fh.write(f"[rank{r}]: Traceback (most recent call last):\n")
                for f in range(20):
                    fh.write(f'[rank{r}]:   File "/app/{half}/m{f}.py", line {f + 1}, in fn_{half}\n')
                    fh.write(f"[rank{r}]:     x = call_{half}{half}({i})\n")
                fh.write(f"[rank{r}]: ValueError: bad batch {i}\n")
        what = f"{count:,} tracebacks of {width:,}-character frames ({log.stat().st_size >> 20} MB)"
        cases.append((what, [*json_scan, str(log)]))
    return cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keep", help="folder for the generated inputs (default: a temporary one, removed)")
    ap.add_argument("--round-four", action="store_true", help="only the cases of round four (points 1, 6, 7)")
    a = ap.parse_args()
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="vls-hostile-"))
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
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        for name, args, *extra in _round_four(work) if a.round_four else build(work):
            case_env = dict(env, **extra[0]) if extra else env
            seconds, rss, code, *_ = run([sys.executable, "-m", "logparse", *args], case_env, sample=True)
            print(f"{name:45} {seconds:6.2f} s  peak RSS {rss:4d} MB  exit {code}", flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
