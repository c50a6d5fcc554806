"""How often each stage source is right, on labelled corpora of real logs.

For every labelled log (a labels.yaml as ../shared/tools/score_corpus.py reads it) whose label names a
stage, the chosen failure's stage evidence is put to EVERY source of logparse.decide.stage.STAGE_CHAIN,
not only to the first that answers: for each source, how often it answers, and how often its answer is
the label's (a label of plain `training` accepts any stage of the training loop). Also the report's own
stage (the first source that answered). A source that is wrong more often than right where it answers
first is one to drop or to narrow.

    python benchmarks/stage_sources.py --labels ../shared/corpus/dev/labels.yaml \\
        --labels ../shared/corpus/dev-long/labels.yaml --expected samples/expected.yaml \\
        --expected tests/fixtures/cascades/expected.yaml --expected tests/fixtures/stories/expected.yaml

Prints one row per source: answered first (right/wrong), answered at all (right/wrong).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from logparse.decide import stage as stage_mod  # noqa: E402
from logparse.decide import verdict as verdict_mod  # noqa: E402
from logparse.pipeline import analyse  # noqa: E402
from patterns import load_builtin_catalog  # noqa: E402

LOOP = {
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


def right(got: str | None, want: str) -> bool:
    return got == want or (want == "training" and got in LOOP)


def main() -> int:  # noqa: C901 (the tally docs/benchmarks.md prints, top to bottom)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--labels", action="append", default=[], help="a corpus' labels.yaml (repeatable)")
    ap.add_argument(
        "--expected",
        action="append",
        default=[],
        help="a fixture set's expected.yaml (file, stage; repeatable), e.g. samples/expected.yaml",
    )
    args = ap.parse_args()
    catalog = load_builtin_catalog()
    seen: list[dict] = []
    real = stage_mod.stage_of

    def every_source(ev):
        answers = {name_of(strategy): strategy(ev) for _, strategy in stage_mod.STAGE_CHAIN}
        seen.append((ev.category, answers))
        return real(ev)

    verdict_mod.stage_of = every_source  # (the verdict module calls it by this name)
    first, anywhere, by_category, cases = Counter(), Counter(), Counter(), 0
    report_right = report_null = 0
    sets = [Path(p) for p in (*args.labels, *args.expected)]
    if not sets:
        ap.error("give at least one --labels or --expected file")
    for path in sets:
        for label in yaml.safe_load(path.read_text()):
            want = label.get("stage")
            healthy = label.get("root_cause") == "healthy" or label.get("status", "failed") != "failed"
            if label.get("scored") is False or not want or healthy:
                continue
            name = label.get("file") or f"{label['id']}.log"
            log = path.parent / name
            seen.clear()
            report = analyse([str(log)], catalog)
            rc = report.root_cause
            if rc is None or not seen:
                continue
            cases += 1
            category, answers = seen[-1]
            report_right += right(rc.stage, want)
            report_null += rc.stage is None
            winner = next((s for s, a in answers.items() if a), None)
            for source, got in answers.items():
                if got:
                    anywhere[(source, right(got, want))] += 1
            if answers["from_category"]:
                by_category[(category, right(answers["from_category"], want))] += 1
            if winner:
                first[(winner, right(answers[winner], want))] += 1
    print(
        f"{cases} failures whose label names a stage: the report's stage right on {report_right}, "
        f"null on {report_null}"
    )
    print(f"{'source':22} {'first':>6} {'wrong':>6} {'any: right':>11} {'wrong':>6}")
    for _, strategy in stage_mod.STAGE_CHAIN:
        s = name_of(strategy)
        row = (first[(s, True)], first[(s, False)], anywhere[(s, True)], anywhere[(s, False)])
        print(f"{s:22} {row[0]:6d} {row[1]:6d} {row[2]:11d} {row[3]:6d}")
    print("the category default (category_stages), asked of every failure, by category: right / wrong")
    for category in sorted({c for c, _ in by_category}):
        print(f"  {category:22} {by_category[(category, True)]:3d} {by_category[(category, False)]:3d}")
    return 0


def name_of(strategy) -> str:
    return strategy.__name__


if __name__ == "__main__":
    raise SystemExit(main())
