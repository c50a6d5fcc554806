"""How many reports gain a known upstream issue: every log of the given folders scanned as `scan`
scans it (built-in catalog and known issues, $VERL_LOGSCAN_KNOWN_ISSUES included), one row per log with
its root cause and each known issue's verdict, then the counts per verdict.

    python benchmarks/known_issues.py ../shared/corpus/dev ../shared/corpus/dev-long

A log is a `*.log` file of a folder (a folder of logs of one job is not split); exit 2 when a folder
cannot be read. The figures go to docs/benchmarks.md ("Known upstream issues")."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from logparse.pipeline import analyse, default_known_issues
from patterns import load_builtin_catalog


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    catalog = load_builtin_catalog()
    known = default_known_issues()
    for folder in map(Path, argv):
        if not folder.is_dir():
            print(f"known_issues.py: not a folder: {folder}", file=sys.stderr)
            return 2
        logs = sorted(folder.glob("*.log"))
        gained: Counter[str] = Counter()
        failed = 0
        for log in logs:
            report = analyse([str(log)], catalog, known_issues=known)
            rc = report.root_cause
            failed += rc is not None
            verdicts = [f"{k.verdict}:{k.id}" for k in report.known_issues]
            for v in {k.verdict for k in report.known_issues}:
                gained[v] += 1
            if {k.verdict for k in report.known_issues} & {"matches", "may-match"}:
                gained["matches or may-match"] += 1
            print(f"{folder.name}/{log.name}\t{rc.id if rc else '-'}\t{' '.join(verdicts) or '-'}")
        print(
            f"== {folder}: {len(logs)} logs, {failed} with a root cause; "
            f"matches {gained['matches']}, may-match {gained['may-match']}, "
            f"fixed-in-your-version {gained['fixed-in-your-version']}, "
            f"a matches or may-match {gained['matches or may-match']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
