"""What redaction masks in logs that hold no secret: every line of the samples, the fixtures and any
`--extra` folder (a corpus of your own) goes through the redactor, one line at a time and each file's
lines as one sequence (as evidence is: PEM blocks, pprint-wrapped values), and every change is listed.
None of these logs holds a secret, so each masked value is a false positive (0 is the goal).

    python benchmarks/redaction_false_positives.py [--extra DIR ...] [--hosts] [--quiet]

The listing shows file:line, the kinds and the line as masked (not the value), so it can be read
without copying the text of a private corpus anywhere. Exit 0 when nothing was masked, 1 otherwise.
"""

from __future__ import annotations

import argparse
import gzip
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from logparse.read.sources import decode_line  # noqa: E402
from logparse.redact import RedactConfig, Redactor  # noqa: E402

SUFFIXES = {".log", ".out", ".err", ".txt", ".json", ".gz"}
MASKED = re.compile(r"\[redacted:([a-z0-9-]+)\]")


def log_files(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and (p.suffix in SUFFIXES or p.name in ("stdout", "stderr"))
    )


def lines_of(path: Path) -> list[str]:
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return [decode_line(raw) for raw in data.split(b"\n")]


def masked_lines(lines: list[str], hosts: bool) -> dict[int, str]:
    """Line index -> the line as masked, for each line redaction changes (alone, or in sequence)."""
    redactor = Redactor(RedactConfig(hosts=hosts))
    if hosts:
        for text in lines:
            redactor.learn(text)
    changed = {}
    in_sequence = redactor.lines(lines)
    for i, (text, seq) in enumerate(zip(lines, in_sequence, strict=True)):
        out = redactor.text(seq)
        if out != text:
            changed[i] = out
    return changed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--extra", type=Path, action="append", default=[], help="another folder of logs")
    ap.add_argument(
        "--hosts", action="store_true", help="with --redact-hosts (for reading: hosts are no secrets)"
    )
    ap.add_argument("--quiet", action="store_true", help="the totals only")
    a = ap.parse_args()
    folders = [ROOT / "samples", ROOT / "tests" / "fixtures", *a.extra]
    files = lines_total = 0
    kinds: Counter[str] = Counter()
    found = 0
    for folder in folders:
        for path in log_files(folder):
            lines = lines_of(path)
            files += 1
            lines_total += len(lines)
            for i, out in sorted(masked_lines(lines, a.hosts).items()):
                found += 1
                names = MASKED.findall(out)
                kinds.update(names)
                if not a.quiet:
                    shown = out if len(out) <= 200 else out[:200] + "..."
                    print(f"{path}:{i + 1}: {', '.join(sorted(set(names)))}: {shown}")
    summary = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "none"
    print(f"{files} files, {lines_total:,} lines: {found} line(s) masked ({summary})")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
