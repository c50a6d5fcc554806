"""Redaction figures for the README: leaks per secret kind and output, masks on healthy logs (false
positives), and the cost of redacting a large report.

    python benchmarks/redaction.py leaks [--src DIR]         # kinds x outputs that leak (0 is the goal)
    python benchmarks/redaction.py false-positives [--src DIR] [--hosts]
    python benchmarks/redaction.py cost [--lines 10000] [--log JOB.log]

`--src DIR` runs the scans with another checkout's code (e.g. an export of an older commit:
`git archive COMMIT | tar -x -C /tmp/old`), so the same cases count before and after a change; the
cases themselves are this checkout's table (patterns/secrets.yaml) and logs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FORMATS = ("md", "html", "json", "text", "alert")


def scan(src: Path, args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(src))
    return subprocess.run(
        [sys.executable, "-m", "logparse", "scan", *args],
        check=False,
        input=stdin,
        capture_output=True,
        env=env,
        cwd=src,
        timeout=120,
    )


def leaks(src: Path) -> None:
    from patterns.secrets import secret_kinds
    from tests.reports.test_secret_matrix import job_log  # the same logs as the test matrix

    cases = [(k.id, ex) for k in secret_kinds() for ex in k.match]

    def one(case, fmt: str, tmp: str) -> tuple[str, str, bool]:
        kind, ex = case
        log = job_log(ex).encode()
        if fmt == "alert":
            out = scan(src, ["-", "--format", "json"], stdin=log).stderr.decode("utf-8", "replace")
        else:
            path = Path(tmp) / f"{kind}-{abs(hash(ex.line))}-{fmt}.log"
            path.write_bytes(log)
            out = scan(src, [str(path), "--format", fmt]).stdout.decode("utf-8", "replace")
        return kind, fmt, ex.secret in out

    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda cf: one(cf[0], cf[1], tmp), [(c, f) for c in cases for f in FORMATS]))
    leaked_kinds: dict[str, set[str]] = {}
    for kind, fmt, leaked in results:
        if leaked:
            leaked_kinds.setdefault(kind, set()).add(fmt)
    kinds = sorted({k for k, _ in cases})
    print(f"{len(kinds)} kinds, {len(cases)} examples x {len(FORMATS)} outputs = {len(results)} cases")
    print(
        f"leaking cases: {sum(leaked for *_, leaked in results)}; "
        f"kinds leaking somewhere: {len(leaked_kinds)}"
    )
    for kind in kinds:
        if kind in leaked_kinds:
            print(f"  {kind}: {', '.join(f for f in FORMATS if f in leaked_kinds[kind])}")


def healthy_inputs() -> list[Path]:
    inputs = sorted(ROOT.glob("samples/*.log"))
    for folder in sorted((ROOT / "tests" / "fixtures").iterdir()):
        inputs += sorted(p for p in folder.iterdir() if p.suffix in (".log", ".json") or p.is_dir())
    return inputs


def false_positives(src: Path, hosts: bool) -> None:
    """Masks in every sample and fixture log: none of them holds a secret, so each mask is a false
    positive (with --hosts: what host redaction masks, for reading, not a count of errors)."""
    extra = ["--redact-hosts"] if hosts else []
    total = 0
    for path in healthy_inputs():
        out = scan(src, [str(path), "--format", "json", *extra])
        try:
            report = json.loads(out.stdout)
        except json.JSONDecodeError:
            print(f"  {path.relative_to(ROOT)}: no JSON report (exit {out.returncode})")
            continue
        found = report.get("redactions", {})
        total += sum(found.values())
        if found:
            print(f"  {path.relative_to(ROOT)}: {found}")
    print(f"{len(healthy_inputs())} inputs, {total} masked value(s)")


def _time_redaction(report, label: str) -> None:
    from logparse.redact import RedactConfig, redact_report

    for hosts in (False, True):
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            masked = redact_report(report, RedactConfig(hosts=hosts))
            best = min(best, time.perf_counter() - start)
        print(f"{label}, hosts={hosts}: {best * 1000:.1f} ms; masked {masked.redactions}")


def cost(lines: int, log: Path | None) -> None:
    """Redaction of a report with `lines` evidence lines (a tenth with a secret), secrets only and with
    hosts, best of 3; with `log`, also of that log's own report (scanned first, not timed)."""
    import dataclasses

    from logparse.model import Evidence
    from tests.reports.test_html import handmade_report

    if log is not None:
        from logparse.pipeline import start_analysis
        from patterns import load_catalog

        scanner = start_analysis(load_catalog([]))
        scanner.feed_inputs([str(log)])
        report = scanner.report()
        strings = sum(1 for _ in __import__("logparse.redact", fromlist=["strings"]).strings(report))
        _time_redaction(report, f"{log.name}'s report ({strings} strings)")

    base = handmade_report()
    evidence = []
    for i in range(lines):
        text = (
            f"(WorkerDict pid={i}, ip=10.0.{i % 250}.{i % 200 + 1}) step:{i} - "
            f"actor/pg_loss:np.float64(-0.0{i}) - File /home/jdoe/verl/workers/actor_{i}.py line {i} "
            "commit 3f786850e387550fdab836ed7e6dc881de23001b"
        )
        if i % 10 == 0:
            text += f" export HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz{i:010d}"
        evidence.append(Evidence("job.log", i + 1, text))
    report = dataclasses.replace(
        base, root_cause=dataclasses.replace(base.root_cause, evidence=tuple(evidence))
    )
    chars = sum(len(e.text) for e in evidence)
    _time_redaction(report, f"{lines} evidence lines ({chars / 1e6:.1f} MB)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=("leaks", "false-positives", "cost"))
    parser.add_argument(
        "--src", type=Path, default=ROOT, help="the checkout whose code scans (default: this one)"
    )
    parser.add_argument("--hosts", action="store_true", help="false-positives: with --redact-hosts")
    parser.add_argument("--lines", type=int, default=10_000, help="cost: evidence lines in the report")
    parser.add_argument("--log", type=Path, help="cost: also time the redaction of this log's report")
    args = parser.parse_args()
    if args.what == "leaks":
        leaks(args.src)
    elif args.what == "false-positives":
        false_positives(args.src, args.hosts)
    else:
        cost(args.lines, args.log)


if __name__ == "__main__":
    main()
