"""Leave-one-entry-out: how well does verl-logscan name a failure that its catalog has no entry for?

For every case (a labelled log, or a catalog entry's `match` example scanned as a log) it scans
once with the full catalog, then again with the entries that fired on it and name its answer
disabled (`verl-logscan scan --disable ID ...`): the root cause's entry, and every other entry found
in the log whose category is the expected one. What is left is the evidence a new wording of the same
failure would leave: the exception's type, its frames, its message, the fallback rules
(patterns/fallback.yaml) and the nearest known entry. Counted per case set:

  detected   the re-scan still says `failed` (not `healthy`)
  category   the re-scan names the expected category
  stage      the re-scan names the expected stage (only where one is expected)
  rank       the expected failing rank, or none where the label says none (only where a label gives
             `rank` / `failing_rank`): with the full catalog (`rank (full)`) and in the re-scan

Case sets: the dev corpus (../shared/corpus/dev/labels.yaml, third-party logs read in place, never
copied), samples/expected.yaml, tests/fixtures/cascades/expected.yaml, and every `cause` entry's
match examples (expected: the entry's category). `--strict` disables every entry that fired, of
any category and role (wrappers and symptoms too).

    python benchmarks/generalization.py [--corpus DIR] [--strict] [--show-misses] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# run as a script from anywhere: the repository root must be on sys.path before these imports
from logparse.pipeline import start_analysis  # noqa: E402
from logparse.read.sources import expand_inputs  # noqa: E402
from patterns import Catalog, Role, load_builtin_catalog  # noqa: E402

TRAINING_STAGES = {
    "training",
    "rollout",
    "reward",
    "old-log-prob",
    "ref",
    "values",
    "advantage",
    "critic-update",
    "actor-update",
    "weight-sync",
    "validation",
    "checkpoint",
}


@dataclass
class Case:
    set: str
    name: str
    path: Path
    category: str
    stage: str | None = None
    rank: int | None = None
    has_rank: bool = False  # the label says which rank failed (None: none is to be named)


@dataclass
class Outcome:
    case: Case
    baseline: str  # category (or "healthy") with the full catalog
    disabled: list[str] = field(default_factory=list)
    got: str = ""
    got_stage: str | None = None
    got_rank: int | None = None
    baseline_rank: int | None = None  # the rank named with the full catalog
    basis: str = ""  # what decided the category in the re-scan

    @property
    def detected(self) -> bool:
        return self.got != "healthy"

    @property
    def category_kept(self) -> bool:
        return self.got == self.case.category

    @property
    def stage_kept(self) -> bool | None:
        if not self.case.stage:
            return None
        want = self.case.stage
        return self.got_stage == want or (want == "training" and self.got_stage in TRAINING_STAGES)

    @property
    def rank_kept(self) -> bool | None:
        return self.got_rank == self.case.rank if self.case.has_rank else None

    @property
    def rank_right(self) -> bool | None:
        """With the full catalog: is the failing rank the label's?"""
        return self.baseline_rank == self.case.rank if self.case.has_rank else None


def scan(path: Path, catalog: Catalog):
    scanner = start_analysis(catalog)
    scanner.feed_inputs(expand_inputs([str(path)]))
    return scanner.report()


def labelled_cases(label_file: Path, set_name: str) -> list[Case]:
    out = []
    for label in yaml.safe_load(label_file.read_text()) or []:
        if label.get("scored") is False:
            continue
        want = label.get("root_cause") or label.get("category")
        if not want or want == "healthy":
            continue
        log = label_file.parent / (label.get("file") or f"{label['id']}.log")
        key = next((k for k in ("rank", "failing_rank") if k in label), None)
        rank = label.get(key) if key else None
        out.append(Case(set_name, log.name, log, want, label.get("stage"), rank, key is not None))
    return out


def example_cases(catalog: Catalog, tmp: Path) -> list[Case]:
    out = []
    for entry in catalog.entries:
        if entry.role != Role.CAUSE or entry.category == "unknown":
            continue
        for i, ex in enumerate(entry.examples.match, 1):
            path = tmp / f"{entry.id}-{i}.log"
            path.write_text(ex.line + "\n", encoding="utf-8")
            out.append(Case("catalog examples", f"{entry.id}#{i}", path, entry.category, entry.stage))
    return out


def run_case(case: Case, catalog: Catalog, strict: bool) -> Outcome:
    report = scan(case.path, catalog)
    rc = report.root_cause
    out = Outcome(case, rc.category if rc else "healthy")
    out.baseline_rank = rc.rank if rc else None
    fired = {f.id for f in report.findings if strict or f.category == case.category}
    if rc is not None and rc.id != "unknown":
        fired.add(rc.id)
    out.disabled = sorted(fired)
    again = scan(case.path, catalog.without(fired)) if fired else report
    rc = again.root_cause
    out.got = rc.category if rc else "healthy"
    out.got_stage = rc.stage if rc else None
    out.got_rank = rc.rank if rc else None
    if rc is not None:
        b = rc.basis
        out.basis = f"{b.kind}:{b.rule}" if b is not None and b.rule else (b.kind if b is not None else rc.id)
    return out


def pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.0f}%)" if n else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--corpus",
        default=str(ROOT.parent / "shared" / "corpus" / "dev"),
        help="folder with labels.yaml (default: ../shared/corpus/dev; skipped when missing)",
    )
    ap.add_argument(
        "--strict",
        action="store_true",
        help="disable every entry that fired, not only those naming the answer",
    )
    ap.add_argument("--show-misses", action="store_true")
    ap.add_argument("--json", help="write every outcome to this file")
    a = ap.parse_args()
    catalog = load_builtin_catalog()
    with tempfile.TemporaryDirectory() as tmp:
        cases: list[Case] = []
        labels = Path(a.corpus) / "labels.yaml"
        if labels.is_file():
            cases += labelled_cases(labels, "dev corpus")
        else:
            print(f"(no {labels}: the dev corpus is skipped)")
        cases += labelled_cases(ROOT / "samples" / "expected.yaml", "samples")
        cases += labelled_cases(ROOT / "tests" / "fixtures" / "cascades" / "expected.yaml", "fixtures")
        cases += example_cases(catalog, Path(tmp))
        outcomes = [run_case(c, catalog, a.strict) for c in cases]
    sets = list(dict.fromkeys(c.set for c in cases))
    print(f"leave-one-entry-out{' (strict: every entry that fired disabled)' if a.strict else ''}")
    print(
        f"{'cases':18} {'n':>4}  {'full catalog':>14}  {'detected':>14}  "
        f"{'category kept':>14}  {'stage kept':>14}  {'rank (full)':>14}  {'rank kept':>14}"
    )
    for s in sets:
        rows = [o for o in outcomes if o.case.set == s]
        staged = [o for o in rows if o.stage_kept is not None]
        ranked = [o for o in rows if o.rank_kept is not None]
        print(
            f"{s:18} {len(rows):>4}  {pct(sum(o.baseline == o.case.category for o in rows), len(rows)):>14}  "
            f"{pct(sum(o.detected for o in rows), len(rows)):>14}  "
            f"{pct(sum(o.category_kept for o in rows), len(rows)):>14}  "
            f"{pct(sum(bool(o.stage_kept) for o in staged), len(staged)):>14}  "
            f"{pct(sum(bool(o.rank_right) for o in ranked), len(ranked)):>14}  "
            f"{pct(sum(bool(o.rank_kept) for o in ranked), len(ranked)):>14}"
        )
    if a.show_misses:
        for o in outcomes:
            if not o.category_kept:
                print(
                    f"  miss {o.case.set:16} {o.case.name:40} want={o.case.category:20} got={o.got:20} "
                    f"basis={o.basis} disabled={','.join(o.disabled)}"
                )
            elif o.stage_kept is False or o.rank_kept is False:
                print(
                    f"  place {o.case.set:15} {o.case.name:40} stage want={o.case.stage} got={o.got_stage} "
                    f"rank want={o.case.rank if o.case.has_rank else '-'} got={o.got_rank}"
                )
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                [
                    dict(
                        set=o.case.set,
                        case=o.case.name,
                        want=o.case.category,
                        baseline=o.baseline,
                        disabled=o.disabled,
                        got=o.got,
                        basis=o.basis,
                        stage_want=o.case.stage,
                        stage_got=o.got_stage,
                        rank_want=o.case.rank if o.case.has_rank else "-",
                        rank_got=o.got_rank,
                    )
                    for o in outcomes
                ],
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
