#!/usr/bin/env python3
"""Copy a small subset of a Ray session's log folder into a fixture folder, keeping file names.

Copied: worker-*-<pid>.out/.err and python-core-worker-*_<pid>.log for each --pid given
(the killed actor, the TaskRunner), and raylet.out and gcs_server.out trimmed to fewer than
200 lines each: the multi-line "[state-dump]" blocks (periodic debug dumps; their header line is
kept) are dropped, then, if still too long, only the first 60 and the last 130 lines are kept.
Kept lines are byte-for-byte copies.

Usage: collect_ray_session.py SESSION_LOGS_DIR OUT_DIR --pid N [--pid M ...]
"""

import argparse
import glob
import os
import shutil
import sys

MAX_LINES = 199


def trim_log(src, dst):
    with open(src, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    kept = [ln for ln in lines if not ln.startswith(b"[state-dump]")]
    if len(kept) > MAX_LINES:
        kept = kept[:60] + kept[-130:]
    with open(dst, "wb") as f:
        f.writelines(kept)
    return len(lines), len(kept)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("logs")
    ap.add_argument("out")
    ap.add_argument("--pid", action="append", type=int, default=[])
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    copied = []
    for pid in args.pid:
        pats = [f"worker-*-{pid}.out", f"worker-*-{pid}.err", f"python-core-worker-*_{pid}.log"]
        for pat in pats:
            for path in sorted(glob.glob(os.path.join(args.logs, pat))):
                shutil.copyfile(path, os.path.join(args.out, os.path.basename(path)))
                copied.append(os.path.basename(path))
    for name in ("raylet.out", "gcs_server.out"):
        n_in, n_out = trim_log(os.path.join(args.logs, name), os.path.join(args.out, name))
        copied.append(f"{name} ({n_in} -> {n_out} lines)")
    print("collected:", *copied, sep="\n  ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
