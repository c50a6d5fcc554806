"""Compare every report the tool writes against those of a reference commit, byte for byte.

For each input (every sample, every fixture file and fixture folder, a few generated logs of each
benchmark shape, and any `--extra` folder such as a corpus of your own), both trees run
`verl-logscan scan INPUT -o r.json -o r.md -o r.html -o r.txt --metrics-csv r.csv` once per option set
(default, `--redact-hosts`, `--no-redact`), plus `verl-logscan fleet` over all the inputs in each
fleet format and `verl-logscan explain ID` for every catalog entry. The reference commit is checked
out in a temporary git worktree; each tree runs in a process of its own (its own code on
`sys.path`), all inputs in one process through the CLI, so nothing but the code differs.

    python benchmarks/compare_reports.py [--ref main] [--extra DIR ...] [--show 3] [--keep DIR]

Exit 0 when every output is identical, 1 when some differ (each listed, with the first lines of
its diff), 2 on a usage error. Differences a change means to make are read as a list and judged
by a person: this script only finds them.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OPTION_SETS = {"default": [], "hosts": ["--redact-hosts"], "raw": ["--no-redact"]}
REPORT_FILES = ("r.json", "r.md", "r.html", "r.txt", "r.csv")
FLEET_FORMATS = ("text", "json", "md", "html", "csv")
# (kind, MB, bars): the benchmark shapes, and the dense and mix ones with bars that have no prefix
GENERATED = (
    ("realistic", 2.0, "ray"),
    ("dense", 2.0, "ray"),
    ("mix", 2.0, "ray"),
    ("dense", 2.0, "bare"),
    ("mix", 2.0, "bare"),
)

# Run inside each tree: every input through the CLI in one process (the catalog loads once).
DRIVER = r"""
import json, os, sys, io, contextlib
sys.path.insert(0, sys.argv[1])
os.chdir(sys.argv[1])
from logparse.cli import cli
plan = json.load(open(sys.argv[2]))
codes = {}
def run(args, key):
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            cli.main(args, prog_name="verl-logscan", standalone_mode=False)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except Exception as exc:  # a crash is an output too
        code = f"crash: {type(exc).__name__}: {exc}"
    codes[key] = code
    return out.getvalue()
for item in plan["scans"]:
    os.makedirs(item["out"], exist_ok=True)
    o = item["out"]
    run(["scan", *item["inputs"], *item["options"], "-o", f"{o}/r.json", "-o", f"{o}/r.md",
         "-o", f"{o}/r.html", "-o", f"{o}/r.txt", "--metrics-csv", f"{o}/r.csv"], item["key"])
for item in plan["explain"]:
    text = run(["explain", item["id"]], item["key"])
    open(item["out"], "w").write(text)
json.dump(codes, open(plan["codes"], "w"), indent=1, sort_keys=True)
"""


def inputs(extra: list[str], scratch: Path) -> list[tuple[str, list[str]]]:
    """(name, paths) of every input: samples, fixture files and folders, generated logs, extras."""
    out: list[tuple[str, list[str]]] = []
    for p in sorted((ROOT / "samples").glob("*.log")):
        out.append((f"samples/{p.name}", [str(p)]))
    fixtures = ROOT / "tests" / "fixtures"
    for p in sorted(fixtures.rglob("*")):
        rel = p.relative_to(fixtures)
        if p.is_file() and p.suffix not in (".md", ".yaml") and not _inside_folder_input(rel):
            out.append((f"fixtures/{rel}", [str(p)]))
    for folder in ("torchrun/logdir", "ray/session_logs"):
        out.append((f"fixtures/{folder}/", [str(fixtures / folder)]))
    sys.path.insert(0, str(HERE))
    from generate_log import generate  # the benchmarks' own generator

    for kind, mb, bars in GENERATED:
        name = kind if bars == "ray" else f"{kind}+{bars}-bars"
        path = scratch / f"generated-{name}.log"
        if not path.exists():
            generate(str(path), mb, seed=7, kind=kind, bars=bars)
        out.append((f"generated/{name}-{mb:g}MB", [str(path)]))
    for folder in extra:
        for p in sorted(Path(folder).rglob("*")):
            if p.is_file() and p.suffix not in (".md", ".yaml", ".json"):
                out.append((f"extra/{p.relative_to(folder)}", [str(p.resolve())]))
    return out


def _inside_folder_input(rel: Path) -> bool:
    return rel.parts[:2] in (("torchrun", "logdir"), ("ray", "session_logs"))


def catalog_ids(tree: Path) -> list[str]:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from patterns import load_catalog; "
        "print('\\n'.join(sorted(e.id for e in load_catalog([]).entries)))"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tree)], capture_output=True, text=True, check=True)
    return done.stdout.split()


def run_tree(tree: Path, out: Path, items: list[tuple[str, list[str]]], ids: list[str]) -> dict:
    """Every output of `tree` under `out`; the exit code of each run."""
    out.mkdir(parents=True, exist_ok=True)
    scans = []
    for n, (name, paths) in enumerate(items):
        for opt, options in OPTION_SETS.items():
            scans.append(
                {
                    "key": f"{name} [{opt}]",
                    "inputs": paths,
                    "options": options,
                    "out": str(out / "scan" / f"{n:03d}-{opt}"),
                }
            )
    explain = [{"key": f"explain {i}", "id": i, "out": str(out / "explain" / f"{i}.txt")} for i in ids]
    (out / "explain").mkdir(exist_ok=True)
    plan = {"scans": scans, "explain": explain, "codes": str(out / "codes.json")}
    (out / "plan.json").write_text(json.dumps(plan))
    env = {**os.environ, "PYTHONHASHSEED": "0", "NO_COLOR": "1", "COLUMNS": "100"}
    env.pop("FORCE_COLOR", None)
    subprocess.run(
        [sys.executable, "-c", DRIVER, str(tree), str(out / "plan.json")],
        env=env,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    all_paths = [p for _, paths in items for p in paths]
    fleet_dir = out / "fleet"
    fleet_dir.mkdir(exist_ok=True)
    codes = json.loads((out / "codes.json").read_text())
    for fmt in FLEET_FORMATS:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "logparse",
                "fleet",
                *all_paths,
                "--jobs",
                "2",
                "--format",
                fmt,
                "-o",
                str(fleet_dir / f"fleet.{fmt}"),
            ],
            cwd=tree,
            env={**env, "PYTHONPATH": str(tree)},
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        codes[f"fleet {fmt}"] = done.returncode
    return codes


def compare(ref_out: Path, new_out: Path, show: int) -> list[str]:
    """Lines describing each difference (empty: all identical)."""
    diffs: list[str] = []
    ref_files = {p.relative_to(ref_out) for p in ref_out.rglob("*") if p.is_file()}
    new_files = {p.relative_to(new_out) for p in new_out.rglob("*") if p.is_file()}
    for rel in sorted((ref_files | new_files) - {Path("plan.json"), Path("codes.json")}):
        a, b = ref_out / rel, new_out / rel
        if not a.exists() or not b.exists():
            diffs.append(f"{rel}: only in {'the reference' if a.exists() else 'the working tree'}")
            continue
        ta, tb = a.read_bytes(), b.read_bytes()
        if ta != tb:
            lines = list(
                difflib.unified_diff(
                    ta.decode("utf-8", "replace").splitlines(),
                    tb.decode("utf-8", "replace").splitlines(),
                    lineterm="",
                    n=0,
                )
            )
            diffs.append(f"{rel}: differs ({len(lines)} diff lines)")
            diffs.extend("    " + line[:200] for line in lines[2 : 2 + show])
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", default="main", help="the reference commit (default: main)")
    ap.add_argument("--extra", action="append", default=[], help="another folder of logs to compare on")
    ap.add_argument("--show", type=int, default=4, help="diff lines shown per differing file")
    ap.add_argument("--keep", help="keep the outputs in this folder (default: a temporary one)")
    args = ap.parse_args()
    scratch = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="compare-reports-"))
    scratch.mkdir(parents=True, exist_ok=True)
    worktree = scratch / "ref-tree"
    if worktree.exists():
        subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, check=False)
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(worktree), args.ref],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    try:
        items = inputs(args.extra, scratch)
        ids = sorted(set(catalog_ids(worktree)) | set(catalog_ids(ROOT)))
        ref_codes = run_tree(worktree, scratch / "ref", items, ids)
        new_codes = run_tree(ROOT, scratch / "new", items, ids)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, check=False)
    diffs = compare(scratch / "ref", scratch / "new", args.show)
    for key in sorted(set(ref_codes) | set(new_codes)):
        if ref_codes.get(key) != new_codes.get(key):
            diffs.append(f"exit code of {key}: {ref_codes.get(key)} -> {new_codes.get(key)}")
    runs = len(items) * len(OPTION_SETS)
    scans = f"{len(items)} inputs x {len(OPTION_SETS)} option sets = {runs} scans"
    print(
        f"{scans}, {len(REPORT_FILES)} files each; {len(FLEET_FORMATS)} fleet formats; "
        f"explain of {len(ids)} entries; reference {args.ref}"
    )
    if diffs:
        print("\n".join(diffs))
        print(f"DIFFERENT: {sum(1 for d in diffs if not d.startswith('    '))} output(s) differ")
    else:
        print("IDENTICAL: every output and exit code is the same")
    if not args.keep:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
