#!/usr/bin/env bash
# Capture logs the way a terminal wraps them (tests/fixtures/wrapped/, see its README.md).
#
#   bash samples/scripts/capture_wrapped.sh        # needs tmux and script (util-linux)
#
# Each log is printed (`cat`) in a detached tmux pane of a fixed width, then saved as a user saves it:
#   - `tmux capture-pane -p -S - -E -`: the pane's rows as the terminal wrapped them (what a copy from
#     the pane or a paste of it holds: long lines cut at the pane's width, each row's trailing spaces
#     dropped, ANSI escapes rendered away, a CR's overwrite applied); the screen's empty rows after the
#     last line are dropped;
#   - `script -q -c CMD FILE` run in the pane: what the program wrote, as script records it before the
#     terminal wraps anything (CRLF line ends, script's own first and last lines).
# The logs printed are the samples (already neutralised) and cjk-validation.log of the fixture folder;
# script's header names the command, run from the fixture folder, so no path of this machine is in it.
set -u -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$(dirname "$HERE")")
OUT=$REPO/tests/fixtures/wrapped
CONF=$(mktemp)
printf 'set -g history-limit 100000\nset -g status off\n' > "$CONF"
SOCK=logscan-wrap-$$

# pane LOG WIDTH OUT: cat LOG in a pane WIDTH columns wide, save the pane's history to OUT
pane() {
    local log=$1 width=$2 out=$3
    tmux -L "$SOCK" -f "$CONF" new-session -d -x "$width" -y 40 -s cap "cat '$log'; sleep 30"
    sleep 3
    tmux -L "$SOCK" capture-pane -p -S - -E - -t cap > "$out.raw"
    tmux -L "$SOCK" kill-server
    python3 -c 'import sys; d = open(sys.argv[1], "rb").read().rstrip(b"\n") + b"\n"; open(sys.argv[2], "wb").write(d)' \
        "$out.raw" "$out"
    rm -f "$out.raw"
    printf '%-60s %s columns\n' "${out#"$REPO"/}" "$width"
}

# typescript NAME WIDTH OUT: `script` recording `cat NAME` (a file of $OUT) in a pane WIDTH columns wide
typescript() {
    local name=$1 width=$2 out=$3
    tmux -L "$SOCK" -f "$CONF" new-session -d -x "$width" -y 40 -s cap -c "$OUT" \
        "script -q -c 'cat $name' '$out'; sleep 30"
    sleep 4
    tmux -L "$SOCK" kill-server
    printf '%-60s %s columns (script)\n' "${out#"$REPO"/}" "$width"
}

pane "$REPO/samples/torchrun-gloo-timeout.log" 80 "$OUT/torchrun-gloo-timeout.tmux80.log"
pane "$REPO/samples/ray-actor-exception.log" 97 "$OUT/ray-actor-exception.tmux97.log"
pane "$OUT/cjk-validation.log" 80 "$OUT/cjk-validation.tmux80.log"
cp "$REPO/samples/torchrun-rank-exception.log" "$OUT/.rank-exception.log"
typescript .rank-exception.log 80 "$OUT/torchrun-rank-exception.script80.log"
rm -f "$OUT/.rank-exception.log" "$CONF"
