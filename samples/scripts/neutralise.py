#!/usr/bin/env python3
"""Replace this machine's paths, hostname and IPs in captured logs with neutral ones, in place.

Works on bytes: everything else (ANSI escapes, \\r, tabs, line order, emoji) is kept byte for byte.

  --venv DIR      the capture venv              -> /opt/venv
  --workdir DIR   the job / script directory    -> /workspace/job   (may repeat)
  --stdlib DIR    the interpreter's stdlib dir  -> /usr/lib/python3.11
  --host NAME     the hostname                  -> node-1           (whole word only)
  --ip ADDR       an address of this machine    -> 10.0.0.1, 10.0.0.2, ... (IPv6: fd00::a, fd00::b, ...)
  /root/...  (the home directory)               -> /home/user/...

Usage: neutralise.py [options] FILE...
"""

import argparse
import re
import sys


def build_rules(args):
    rules = []  # (compiled regex, replacement bytes)
    literal = []
    for d in args.workdir:
        literal.append((d.rstrip("/"), "/workspace/job"))
    if args.venv:
        literal.append((args.venv.rstrip("/"), "/opt/venv"))
    if args.stdlib:
        literal.append((args.stdlib.rstrip("/"), "/usr/lib/python3.11"))
    # longest first, so that a path inside another is handled by the more specific rule
    literal.sort(key=lambda kv: len(kv[0]), reverse=True)
    for old, new in literal:
        rules.append((re.compile(re.escape(old.encode())), new.encode()))
    rules.append((re.compile(rb"(?<![\w.-])/root(?=/|\b)"), b"/home/user"))
    v4 = v6 = 0
    for ip in args.ip:
        if ip.startswith("127.") or ip == "::1":
            continue
        if ":" in ip:
            new = "fd00::" + "abcdef"[v6]
            v6 += 1
            pat = rb"(?<![0-9A-Fa-f:])" + re.escape(ip.encode()) + rb"(?![0-9A-Fa-f:])"
        else:
            v4 += 1
            new = f"10.0.0.{v4}"
            pat = rb"(?<![\d.])" + re.escape(ip.encode()) + rb"(?![\d])(?!\.\d)"
        rules.append((re.compile(pat), new.encode()))
    for host in args.host:
        if host and host not in ("localhost", "node-1"):
            rules.append((re.compile(rb"(?<![\w.-])" + re.escape(host.encode()) + rb"(?![\w-])"), b"node-1"))
    return rules


def neutralise_bytes(data, rules):
    for rx, new in rules:
        data = rx.sub(new, data)
    return data


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--venv")
    ap.add_argument("--workdir", action="append", default=[])
    ap.add_argument("--stdlib")
    ap.add_argument("--host", action="append", default=[])
    ap.add_argument("--ip", action="append", default=[])
    ap.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    rules = build_rules(args)
    for path in args.files:
        with open(path, "rb") as f:
            data = f.read()
        new = neutralise_bytes(data, rules)
        if new != data:
            with open(path, "wb") as f:
                f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
