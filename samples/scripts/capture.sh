#!/usr/bin/env bash
# Capture every real sample log and fixture of verl-logscan (CPU only, gloo backend, local Ray).
#
#   python3.11 -m venv /tmp/capvenv
#   /tmp/capvenv/bin/pip install torch==2.13.0 ray hydra-core transformers tokenizers
#   bash samples/scripts/capture.sh            # VENV=/path/to/venv to use another venv
#
# Each run is launched the way a user would (`CMD 2>&1 | tee FILE`) under `timeout`, from a
# scratch job directory ($JOB) holding copies of the scripts, then neutralised by neutralise.py
# (venv -> /opt/venv, job dir -> /workspace/job, hostname -> node-1, IPs -> 10.0.0.x, /root -> /home/user).
# Writes samples/*.log, samples/scripts/wordings/*.txt, tests/fixtures/torchrun/*, tests/fixtures/ray/*,
# tests/fixtures/hydra/* (ONLY=hydra needs only hydra-core in the venv).
# ONLY=verl runs real verl in its own venv (VERL_VENV, default /tmp/verlvenv):
#   python3.11 -m venv /tmp/verlvenv
#   /tmp/verlvenv/bin/pip install torch==2.13.0 numpy==1.26.4 && /tmp/verlvenv/bin/pip install verl==0.5.0
# and writes tests/fixtures/verl/* (see its README: the second run needs that NumPy; the script then
# installs NumPy 2 into that venv for the third).
# Runs are real, so pids, ports, timings and (for racing ranks) the order of events differ per run.
set -u -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SAMPLES=$(dirname "$HERE")
REPO=$(dirname "$SAMPLES")
FIX_T=$REPO/tests/fixtures/torchrun
FIX_R=$REPO/tests/fixtures/ray
WORD=$HERE/wordings
VENV=${VENV:-/tmp/capvenv}
JOB=${JOB:-/tmp/logscan-job}
PY=$VENV/bin/python
TORCHRUN=$VENV/bin/torchrun
STDLIB=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['stdlib'])")
ONLY=${ONLY:-all}   # ONLY=torchrun|ray|hydra|wordings to run one group

NEUT_ARGS=(--venv "$VENV" --workdir "$JOB" --workdir "$HERE" --stdlib "$STDLIB" --host "$(hostname)"
           --host "$(hostname -f 2>/dev/null || hostname)")
for ip in $(hostname -I 2>/dev/null); do NEUT_ARGS+=(--ip "$ip"); done
neutralise() { python3 "$HERE/neutralise.py" "${NEUT_ARGS[@]}" "$@"; }

fresh_job() {
    rm -rf "$JOB"
    mkdir -p "$JOB"
    cp "$HERE/toy_train.py" "$HERE/main_ppo.py" "$JOB/"
    cp -r "$HERE/config" "$JOB/"
}

# run_case OUTFILE TIMEOUT_S CMD... : run CMD in $JOB as `CMD 2>&1 | tee OUTFILE`, then neutralise
run_case() {
    local out=$1 limit=$2
    shift 2
    mkdir -p "$(dirname "$out")"
    (cd "$JOB" && timeout -k 10 "$limit" "$@" 2>&1 | tee "$out" > /dev/null)
    local rc=$?
    neutralise "$out"
    printf '%-70s rc=%s\n' "${out#$REPO/}" "$rc"
}

export PYTHONDONTWRITEBYTECODE=1

if [[ $ONLY == all || $ONLY == torchrun ]]; then
    fresh_job
    # a. rank 2 raises (loss guard) while ranks 0,1,3 wait in DDP's all_reduce
    run_case "$SAMPLES/torchrun-rank-exception.log" 90 \
        "$TORCHRUN" --nproc_per_node 4 --master_port 29601 toy_train.py --case nan-guard --fail-step 5
    # b. rank 1 is SIGKILLed at step 4 (as by the host OOM killer)
    run_case "$SAMPLES/torchrun-sigkill.log" 90 \
        "$TORCHRUN" --nproc_per_node 4 --master_port 29602 toy_train.py --case sigkill --fail-step 4
    # c. rank 3 stalls before step 3's collectives; the others hit the 10 s gloo timeout
    run_case "$SAMPLES/torchrun-gloo-timeout.log" 90 \
        "$TORCHRUN" --nproc_per_node 4 --master_port 29603 toy_train.py --case hang --fail-step 3 --timeout 10 --hang-s 45
    # d. the master port is already taken by another process
    "$PY" -c "
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', 29604)); s.listen(); time.sleep(60)" &
    LISTENER=$!
    sleep 1
    run_case "$SAMPLES/torchrun-port-in-use.log" 60 \
        "$TORCHRUN" --nproc_per_node 2 --master_port 29604 toy_train.py --case healthy
    kill "$LISTENER" 2>/dev/null; wait "$LISTENER" 2>/dev/null
    # e. a healthy run
    run_case "$SAMPLES/torchrun-healthy.log" 90 \
        "$TORCHRUN" --nproc_per_node 4 --master_port 29605 toy_train.py --case healthy --steps 20 --step-s 0.1

    # fixtures: ranks 1-3 fail together, output tee'd with [defaultN]: prefixes
    run_case "$FIX_T/tee-interleaved.log" 90 \
        "$TORCHRUN" --nproc_per_node 4 --master_port 29606 --tee 3 toy_train.py --case interleaved --fail-step 3 --slow-stderr 0.08
    # fixtures: --redirects 3 --log-dir logdir with @record (error.json files)
    rm -rf "$FIX_T/logdir"
    run_case "$JOB/console.log" 90 \
        "$TORCHRUN" --nproc_per_node 4 --master_port 29607 --redirects 3 --log-dir logdir toy_train.py --case record --fail-step 3
    cp -r "$JOB/logdir" "$FIX_T/logdir"
    cp "$JOB/console.log" "$FIX_T/logdir/console.log"
    find "$FIX_T/logdir" -type f -exec python3 "$HERE/neutralise.py" "${NEUT_ARGS[@]}" {} +
    cp "$(ls "$FIX_T"/logdir/*/attempt_0/1/error.json)" "$FIX_T/record-error.json"
    # fixtures: 4 ranks raise the same KeyError at once, no --tee: their exception lines interleave
    # (a race: a run where every exception line came out whole shows nothing; the fixture is one where
    # two did not, kept as captured)
    rm -rf "$JOB/data"
    run_case "$FIX_T/shared-stderr-keyerror.log" 60 \
        "$TORCHRUN" --nproc_per_node 4 --master_port 29608 toy_train.py --case missing-key
    # fixtures: a DataLoader worker process of rank 1 exits; a --master_port out of range
    run_case "$FIX_T/dataloader-worker-exit.log" 90 \
        "$TORCHRUN" --nproc_per_node 4 --master_port 29609 toy_train.py --case loader-worker-exit --fail-step 4
    run_case "$FIX_T/bad-master-port.log" 60 \
        "$TORCHRUN" --nproc_per_node 2 --master_port 295001 toy_train.py --case healthy
    # fixtures: a 2-rank gloo timeout (rank 1 stalls, only rank 0 reports it); a monitored_barrier
    # that rank 2 never reaches (rank 0 names it)
    run_case "$FIX_T/gloo-timeout-two-ranks.log" 90 \
        "$TORCHRUN" --nproc_per_node 2 --master_port 29711 toy_train.py --case hang --fail-step 3 --timeout 10 --hang-s 30
    run_case "$FIX_T/monitored-barrier.log" 90 \
        "$TORCHRUN" --nproc_per_node 3 --master_port 29712 toy_train.py --case monitored-barrier --fail-step 3 --timeout 5 --hang-s 25

    # wordings taken from the runs above
    grep -h -m1 'EADDRINUSE' "$SAMPLES/torchrun-port-in-use.log" > "$WORD/torchrun-eaddrinuse.txt"
    grep -h -m1 'Connection closed by peer' "$SAMPLES"/torchrun-*.log > "$WORD/gloo-connection-closed.txt"
    grep -h -m1 'Connection reset by peer' "$SAMPLES"/torchrun-*.log > "$WORD/gloo-connection-reset.txt" || true
    grep -h 'Timed out waiting' "$SAMPLES/torchrun-gloo-timeout.log" > "$WORD/gloo-timeout.txt"
    [[ -s $WORD/gloo-connection-reset.txt ]] || rm -f "$WORD/gloo-connection-reset.txt"
fi

if [[ $ONLY == all || $ONLY == ray ]]; then
    fresh_job
    RAYTMP=/tmp/ray
    run_case "$SAMPLES/ray-actor-exception.log" 120 \
        "$PY" main_ppo.py case=oom fail_step=4 algorithm.adv_estimator=grpo data.train_batch_size=256 trainer.n_gpus_per_node=4
    run_case "$SAMPLES/ray-import-error.log" 120 \
        "$PY" main_ppo.py case=import-error actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct
    run_case "$SAMPLES/ray-healthy.log" 120 \
        "$PY" main_ppo.py case=healthy trainer.total_training_steps=5
    run_case "$FIX_R/ray-actor-sigkill.log" 120 \
        "$PY" main_ppo.py case=sigkill fail_step=3
    # the session folder of that last run: killed actor's and TaskRunner's worker logs, raylet.out
    SESSION=$(readlink -f "$RAYTMP/session_latest")
    KILLED=$(grep -a -m1 -oP '^\tpid: \K[0-9]+' "$FIX_R/ray-actor-sigkill.log")
    RUNNER=$(grep -a -m1 -oP '\(TaskRunner pid=\K[0-9]+' "$FIX_R/ray-actor-sigkill.log")
    rm -rf "$FIX_R/session_logs"
    python3 "$HERE/collect_ray_session.py" "$SESSION/logs" "$FIX_R/session_logs" --pid "$KILLED" --pid "$RUNNER"
    find "$FIX_R/session_logs" -type f -exec python3 "$HERE/neutralise.py" "${NEUT_ARGS[@]}" {} +
fi

if [[ $ONLY == verl ]]; then
    VERL_VENV=${VERL_VENV:-/tmp/verlvenv}
    FIX_V=$REPO/tests/fixtures/verl
    fresh_job
    mkdir -p "$JOB/data"
    # verl_ppo OUTFILE TIMEOUT_S OVERRIDES...: one run of verl's PPO entry point, as a user starts it
    verl_ppo() {
        local out=$1 limit=$2
        shift 2
        run_case "$out" "$limit" "$VERL_VENV/bin/python" -m verl.trainer.main_ppo "$@"
    }
    # toy_rows KEY NAME: 16 rows with their prompt under KEY, as $JOB/data/NAME-train.parquet and -val.parquet
    toy_rows() {
        "$VERL_VENV/bin/python" -c "
import pandas as pd
rows = [{'$1': [{'role': 'user', 'content': 'w1 w2 w3'}], 'data_source': 'toy',
         'reward_model': {'ground_truth': 'w4', 'style': 'rule'}} for _ in range(16)]
for part in ('train', 'val'):
    pd.DataFrame(rows).to_parquet('$JOB/data/$2-' + part + '.parquet')"
    }
    ONE_GPU=(trainer.n_gpus_per_node=1 "trainer.logger=['console']")
    LOCAL_RAY=(ray_init.num_cpus=2)
    MISSING=(data.train_files="$JOB/data/missing-train.parquet" data.val_files="$JOB/data/missing-val.parquet")
    SMALL_GRPO=(algorithm.adv_estimator=grpo data.train_batch_size=4 actor_rollout_ref.actor.ppo_mini_batch_size=4
                actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2
                actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2
                actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2)

    # a config key that does not exist
    verl_ppo "$FIX_V/hydra-unknown-key.log" 120 trainer.fooo=1
    # data files and a model that are not there; with NumPy 1.26 beside the pyarrow verl 0.5.0 brings,
    # the job fails before reaching them (see the README)
    verl_ppo "$FIX_V/numpy-pyarrow-conflict.log" 300 "${MISSING[@]}" actor_rollout_ref.model.path="$JOB/model-not-here" \
        "${ONE_GPU[@]}" "${LOCAL_RAY[@]}"
    # the same run with the NumPy pyarrow needs (over verl 0.5.0's numpy<2 pin): it gets as far as the model
    "$VERL_VENV/bin/pip" install -q 'numpy>=2,<2.4'
    verl_ppo "$FIX_V/model-path-missing.log" 400 "${MISSING[@]}" actor_rollout_ref.model.path="$JOB/model-not-here" \
        "${ONE_GPU[@]}" "${LOCAL_RAY[@]}"
    # a tiny Qwen2-shaped model and word-level tokenizer made offline, so verl gets to the data files
    "$VERL_VENV/bin/python" "$HERE/make_tiny_model.py" "$JOB/tiny"
    TINY=(actor_rollout_ref.model.path="$JOB/tiny")
    verl_ppo "$FIX_V/data-file-missing.log" 400 "${MISSING[@]}" "${TINY[@]}" "${ONE_GPU[@]}" "${LOCAL_RAY[@]}"
    # data files whose prompts are under `question`, not the `prompt` key verl reads (the overlong
    # filter reads it first)
    toy_rows question question
    verl_ppo "$FIX_V/wrong-prompt-key.log" 400 data.train_files="$JOB/data/question-train.parquet" \
        data.val_files="$JOB/data/question-val.parquet" data.filter_overlong_prompts=True "${TINY[@]}" \
        "${ONE_GPU[@]}" "${LOCAL_RAY[@]}"
    # the same rows under `prompt`: verl gets to building its trainer, whose config check wants a
    # micro batch size that verl 0.5.0's defaults leave unset
    toy_rows prompt prompt
    PROMPT_DATA=(data.train_files="$JOB/data/prompt-train.parquet" data.val_files="$JOB/data/prompt-val.parquet")
    verl_ppo "$FIX_V/micro-batch-unset.log" 400 "${PROMPT_DATA[@]}" "${TINY[@]}" "${ONE_GPU[@]}" "${LOCAL_RAY[@]}"
    # with micro batch sizes set, verl builds its Ray resource pools: this machine has no GPU
    verl_ppo "$FIX_V/no-gpus.log" 300 "${SMALL_GRPO[@]}" "${PROMPT_DATA[@]}" "${TINY[@]}" "${ONE_GPU[@]}" \
        "${LOCAL_RAY[@]}"
    # a Ray cluster that says it has a GPU this machine does not have: verl's worker finds none
    "$VERL_VENV/bin/ray" start --head --num-gpus=1 --num-cpus=4 --disable-usage-stats > /dev/null
    RAY_ADDRESS=auto verl_ppo "$FIX_V/worker-sees-no-gpu.log" 300 "${SMALL_GRPO[@]}" "${PROMPT_DATA[@]}" "${TINY[@]}" \
        "${ONE_GPU[@]}"
    "$VERL_VENV/bin/ray" stop > /dev/null
    python3 "$HERE/neutralise.py" "${NEUT_ARGS[@]}" --venv "$VERL_VENV" "$FIX_V"/*.log
fi

if [[ $ONLY == all || $ONLY == hydra ]]; then
    # Hydra's own output when it cannot compose the config, and when the app raises (hydra_app/)
    FIX_H=$REPO/tests/fixtures/hydra
    fresh_job
    cp -r "$HERE/hydra_app" "$JOB/"
    JOB=$JOB/hydra_app run_case "$FIX_H/config-group-option-missing.log" 60 "$PY" main_ppo.py rollout=vllm_v2
    JOB=$JOB/hydra_app run_case "$FIX_H/primary-config-missing.log" 60 "$PY" main_ppo.py --config-name ppo_trainer_v2
    JOB=$JOB/hydra_app run_case "$FIX_H/override-parse-error.log" 60 "$PY" main_ppo.py 'data.max_prompt_length=1,2]'
    JOB=$JOB/hydra_app run_case "$FIX_H/app-raises.log" 60 "$PY" main_ppo.py data.train_batch_size=7
fi

if [[ $ONLY == all || $ONLY == wordings ]]; then
    fresh_job
    cp "$WORD/transformers_errors.py" "$JOB/"
    for c in padding chat-template; do
        run_case "$WORD/transformers-$c.txt" 60 "$PY" transformers_errors.py "$c"
    done
    (cd "$JOB" && bash "$WORD/import_errors.sh" "$PY" "$WORD")
    neutralise "$WORD"/python-*.txt
fi
# run_hang OUTFILE LIMIT_S SIGNAL DUMP_AT_S DUMPFILE PIDS_CMD CMD...: `CMD 2>&1 | tee OUTFILE` as run_case, but
# the job hangs: at DUMP_AT_S seconds `py-spy dump --pid P` is taken of every pid that PIDS_CMD prints
# (into DUMPFILE, as a user pastes it; none when DUMPFILE is -), and at LIMIT_S the launcher gets
# SIGNAL (INT: Ctrl-C; TERM: a cancel, as scancel sends), from `timeout`
run_hang() {
    local out=$1 limit=$2 sig=$3 dump_at=$4 dumpfile=$5 pids_cmd=$6
    shift 6
    mkdir -p "$(dirname "$out")"
    if [[ $dumpfile != - ]]; then
        (sleep "$dump_at"; for p in $(bash -c "$pids_cmd"); do "$VENV/bin/py-spy" dump --pid "$p"; echo; done \
            > "$dumpfile" 2>&1) &
    fi
    (cd "$JOB" && timeout -s "$sig" -k 20 "$limit" "$@" 2>&1 | tee "$out" > /dev/null)
    local rc=$?
    wait
    neutralise "$out"
    [[ $dumpfile != - ]] && neutralise "$dumpfile"
    printf '%-70s rc=%s\n' "${out#$REPO/}" "$rc"
}

FIX_S=$REPO/tests/fixtures/stalls
if [[ $ONLY == all || $ONLY == stall || $ONLY == stall-torchrun ]]; then
    # hangs (issue 23): the stall diagnosis's real inputs, in tests/fixtures/stalls/ (needs py-spy in the venv)
    fresh_job
    # a. rank 3 blocks in a DataLoader read at step 4 while ranks 0-2 wait in all_reduce; every rank's
    #    faulthandler.dump_traceback_later(12 s) fires; Ctrl-C (SIGINT to torchrun) after 40 s
    run_hang "$FIX_S/torchrun-hang-faulthandler-ctrl-c.log" 40 INT 0 - "" \
        "$TORCHRUN" --nproc_per_node 4 --master_port 29711 --tee 3 toy_train.py --case stall-loader \
        --fail-step 4 --step-s 1 --hang-s 600 --faulthandler 12 --log-time
    # b. rank 1 sleeps on a shard lock at step 3 while ranks 0, 2, 3 wait in all_reduce; `py-spy dump`
    #    of each worker after 20 s; the job is cancelled (SIGTERM) after 35 s
    mkdir -p "$FIX_S/torchrun-hang-py-spy"
    run_hang "$FIX_S/torchrun-hang-py-spy/train.log" 35 TERM 20 "$FIX_S/torchrun-hang-py-spy/py-spy-dump.txt" \
        "pgrep -f -- '-u toy_train.py --case stall-sleep'" \
        "$TORCHRUN" --nproc_per_node 4 --master_port 29712 toy_train.py --case stall-sleep --odd-rank 1 \
        --fail-step 3 --step-s 1 --hang-s 600 --log-time
fi

if [[ $ONLY == all || $ONLY == stall || $ONLY == stall-ray ]]; then
    fresh_job
    # c. the TaskRunner waits for a placement group the cluster cannot give; `py-spy dump` of the
    #    TaskRunner after 50 s; Ctrl-C after 70 s
    mkdir -p "$FIX_S/ray-placement-group-wait"
    run_hang "$FIX_S/ray-placement-group-wait/driver.log" 70 INT 50 "$FIX_S/ray-placement-group-wait/py-spy-dump.txt" \
        "grep -a -m1 -oP '\(TaskRunner pid=\K[0-9]+' '$FIX_S/ray-placement-group-wait/driver.log'" \
        "$PY" main_ppo.py case=pg-wait trainer.n_gpus_per_node=2
    # d. worker rank 2 never returns from generate_sequences at step 3 (a stuck rollout); `py-spy dump`
    #    of the TaskRunner and every WorkerDict after 80 s; Ctrl-C after 100 s (Ray starts slowly on a
    #    busy machine: the hang must come before the dump)
    run_hang "$FIX_S/ray-rollout-hang.log" 100 INT 80 "$JOB/ray-rollout-hang-py-spy.txt" \
        "pgrep -f '^ray::(TaskRunner|WorkerDict)'" \
        "$PY" main_ppo.py case=rollout-hang fail_step=3 trainer.total_training_steps=6
    # (pasted after the log, as a user adds `py-spy dump` output to a bug report)
    cat "$JOB/ray-rollout-hang-py-spy.txt" >> "$FIX_S/ray-rollout-hang.log"
fi

if [[ $ONLY == all || $ONLY == story || $ONLY == story-torchrun ]]; then
    # the run's story (issue 36), in tests/fixtures/stories/: what ended a run, and what it survived
    FIX_ST=$REPO/tests/fixtures/stories
    fresh_job
    # a. per-sample errors logged with their tracebacks, a refused reward server retried every step
    #    (WARNING `(Exception: ...)`); the run completes
    run_case "$FIX_ST/torchrun-survives-sample-errors.log" 90 \
        "$TORCHRUN" --nproc_per_node 4 --master_port 29731 toy_train.py --case survive --steps 8 --step-s 0.2 --log-time
    # b. the same errors, then rank 2 dies of an IndexError at step 6
    run_case "$FIX_ST/torchrun-sample-errors-then-crash.log" 90 \
        "$TORCHRUN" --nproc_per_node 4 --master_port 29732 --tee 3 toy_train.py --case survive-then-crash --steps 10 \
        --fail-step 6 --step-s 0.2
    # c. a healthy run cancelled from outside (SIGTERM to torchrun, as scancel sends) and one stopped
    #    with Ctrl-C (SIGINT), both in the middle of the run
    run_hang "$FIX_ST/torchrun-sigterm-mid-run.log" 12 TERM 0 - "" \
        "$TORCHRUN" --nproc_per_node 4 --master_port 29733 toy_train.py --case healthy --steps 400 --step-s 0.5 --log-time
    run_hang "$FIX_ST/torchrun-sigint-mid-run.log" 12 INT 0 - "" \
        "$TORCHRUN" --nproc_per_node 2 --master_port 29734 toy_train.py --case healthy --steps 400 --step-s 0.5
    # d. the run completes, then its final save fails (a folder that does not exist)
    run_case "$FIX_ST/torchrun-final-save-fails.log" 90 \
        "$TORCHRUN" --nproc_per_node 2 --master_port 29735 toy_train.py --case final-save --steps 5 --step-s 0.2 --log-time
    # e. rank 1 aborts (os.abort(), as a native library does) under faulthandler at step 4
    run_case "$FIX_ST/torchrun-abort-faulthandler.log" 90 \
        "$TORCHRUN" --nproc_per_node 4 --master_port 29736 toy_train.py --case abort --fail-step 4 --steps 10 --step-s 0.2
fi

if [[ $ONLY == all || $ONLY == diff ]]; then
    # pairs of real runs for `verl-logscan diff GOOD BAD` (issue 23), in tests/fixtures/diff/; each run
    # prints its packages (as `pip freeze` does) and its config (as verl's main_ppo pprints it) first
    FIX_D=$REPO/tests/fixtures/diff
    fresh_job
    TOY=(toy_train.py --case healthy --steps 8 --step-s 0.1 --print-config --log-time)
    # a. one config value: the batch per rank cut from 32 to 2 rows (data.train_batch_size 128 -> 8)
    run_case "$FIX_D/config-value/good.log" 90 "$TORCHRUN" --nproc_per_node 4 --master_port 29721 "${TOY[@]}"
    run_case "$FIX_D/config-value/bad.log" 90 "$TORCHRUN" --nproc_per_node 4 --master_port 29722 "${TOY[@]}" \
        --batch-size 2
    # b. a learning rate that makes the loss overflow to inf, then NaN (gradients are clipped to norm 1,
    #    so only a rate many orders of magnitude too large gets there)
    run_case "$FIX_D/learning-rate/good.log" 90 "$TORCHRUN" --nproc_per_node 4 --master_port 29723 "${TOY[@]}"
    run_case "$FIX_D/learning-rate/bad.log" 90 "$TORCHRUN" --nproc_per_node 4 --master_port 29724 "${TOY[@]}" \
        --lr 1e30
    # c. one package version: the same job under transformers $TF_OLD (installed in $TF_OLD_DIR, put
    #    first on PYTHONPATH) and under the venv's own transformers
    TF_OLD=${TF_OLD:-4.57.6}
    TF_OLD_DIR=${TF_OLD_DIR:-/tmp/tf-old}
    [[ -d $TF_OLD_DIR ]] || "$VENV/bin/pip" install -q --no-deps --target "$TF_OLD_DIR" "transformers==$TF_OLD"
    run_case "$FIX_D/package-version/good.log" 90 env PYTHONPATH="$TF_OLD_DIR" \
        "$TORCHRUN" --nproc_per_node 4 --master_port 29725 "${TOY[@]}"
    run_case "$FIX_D/package-version/bad.log" 90 "$TORCHRUN" --nproc_per_node 4 --master_port 29726 "${TOY[@]}"
fi
if [[ $ONLY == all || $ONLY == shapes ]]; then
    # issue 38: an ordinary training script (plain_train.py, Python logging), not verl's formats
    FIX_D=$REPO/tests/fixtures/diff
    fresh_job
    cp "$HERE/plain_train.py" "$JOB/" && cp -r "$HERE/plain_conf" "$JOB/"
    PLAIN=(plain_train.py --steps 8 --step-s 0.1)
    # a. one config value per pair, printed in one of the common config shapes (and the versions in one
    #    of the common version shapes, the same in both runs): batch size 8 -> 64 or hidden size 64 -> 96
    port=29810
    for pair in dict:eq:data.batch_size=64 json:colon:data.batch_size=64 namespace:word:data.batch_size=64 \
                yaml:space:model.hidden_size=96 omegaconf:dunder:model.hidden_size=96 \
                overrides:pip-list:model.hidden_size=96 hydra:collect-env:model.hidden_size=96; do
        IFS=: read -r shape vshape change <<< "$pair"
        base=${change%%=*}=$([[ $change == data.* ]] && echo 8 || echo 64)
        run_case "$FIX_D/config-$shape/good.log" 120 "$TORCHRUN" --nproc_per_node 4 --master_port $((port++)) \
            "${PLAIN[@]}" --config-shape "$shape" --version-shape "$vshape" "$base"
        run_case "$FIX_D/config-$shape/bad.log" 120 "$TORCHRUN" --nproc_per_node 4 --master_port $((port++)) \
            "${PLAIN[@]}" --config-shape "$shape" --version-shape "$vshape" "$change"
    done
    # b. one package: NumPy $NP_OLD (installed with --target $NP_OLD_DIR, first on PYTHONPATH) in GOOD,
    #    the venv's NumPy 2 in BAD; at step 4 the script uses np.float_, which NumPy 2 removed
    NP_OLD=${NP_OLD:-1.26.4}
    NP_OLD_DIR=${NP_OLD_DIR:-/tmp/np126}
    [[ -d $NP_OLD_DIR ]] || "$VENV/bin/pip" install -q --no-deps --target "$NP_OLD_DIR" "numpy==$NP_OLD"
    run_case "$FIX_D/numpy-version/good.log" 120 env PYTHONPATH="$NP_OLD_DIR" "$TORCHRUN" --nproc_per_node 4 \
        --master_port 29830 "${PLAIN[@]}" --case np-float --version-shape space
    run_case "$FIX_D/numpy-version/bad.log" 120 "$TORCHRUN" --nproc_per_node 4 \
        --master_port 29831 "${PLAIN[@]}" --case np-float --version-shape space
    # d. a gloo barrier timeout: at step 3 rank 1 loads a shard for 30 s while the others wait in
    #    dist.barrier() under a 5 s process-group timeout; every rank logs its steps (--tee 3: `[defaultN]:`)
    run_case "$FIX_T/gloo-barrier-rank1-absent.log" 90 "$TORCHRUN" --nproc_per_node 4 --master_port 29833 --tee 3 \
        "${PLAIN[@]}" --case barrier-timeout --fail-step 3 --odd-rank 1 --timeout 5 --hang-s 30 --log-all-ranks
fi
if [[ $ONLY == all || $ONLY == shapes || $ONLY == shapes-hang ]]; then
    fresh_job
    cp "$HERE/plain_train.py" "$JOB/"
    PLAIN=(plain_train.py --steps 8 --step-s 0.1)
    # c. a hang: at step 3 rank 3 waits in a broadcast while ranks 0-2 wait in all_reduce; every rank printed
    #    `rank N pid M` and armed faulthandler.dump_traceback_later(10 s + 0.7 s x rank) into the one stderr
    #    they share (no rank prefixes); `py-spy dump` of every worker after 16 s is pasted after the log (as a
    #    user adds it to a bug report); the job is cancelled (SIGTERM) after 22 s
    run_hang "$FIX_S/torchrun-shared-stderr-dumps.log" 22 TERM 16 "$JOB/shared-stderr-py-spy.txt" \
        "pgrep -f -- '-u plain_train.py .*--case hang-broadcast'" \
        "$TORCHRUN" --nproc_per_node 4 --master_port 29832 "${PLAIN[@]}" --case hang-broadcast --fail-step 3 \
        --faulthandler 10
    cat "$JOB/shared-stderr-py-spy.txt" >> "$FIX_S/torchrun-shared-stderr-dumps.log"
fi
if [[ $ONLY == all || $ONLY == steps ]]; then
    # issue 38: an ordinary script's step lines, learnt by their shape, in tests/fixtures/steps/ (and a diff pair)
    FIX_SP=$REPO/tests/fixtures/steps
    FIX_D=$REPO/tests/fixtures/diff
    fresh_job
    cp "$HERE/plain_train.py" "$JOB/"
    # a. healthy, a step a second through Python logging (`... INFO step 7 loss ... lr ...`): the live
    #    stall watch must stay quiet on it
    run_case "$FIX_SP/plain-healthy-logging.log" 120 "$TORCHRUN" --nproc_per_node 4 --master_port 29850 \
        plain_train.py --steps 20 --step-s 1
    # b. healthy, the other printed shapes; the JSON one with every rank logging under --tee 3 (`[defaultN]:`)
    port=29851
    for shape in bar iter epoch; do
        run_case "$FIX_SP/plain-healthy-$shape.log" 120 "$TORCHRUN" --nproc_per_node 4 --master_port $((port++)) \
            plain_train.py --steps 12 --step-s 0.2 --step-shape "$shape"
    done
    run_case "$FIX_SP/plain-healthy-json-all-ranks.log" 120 "$TORCHRUN" --nproc_per_node 4 --master_port 29855 \
        --tee 3 plain_train.py --steps 12 --step-s 0.2 --step-shape json --log-all-ranks
    # c. rank 1 fails at step 12 (a RuntimeError: its shard is corrupt)
    run_case "$FIX_SP/plain-crash-step12.log" 120 "$TORCHRUN" --nproc_per_node 4 --master_port 29856 \
        plain_train.py --steps 20 --step-s 0.1 --case crash --fail-step 12 --odd-rank 1
    # d. a hang after step 6 (rank 3 in broadcast, ranks 0-2 in all_reduce), a step a second, `[defaultN]:`
    #    prefixes; SIGTERM after 30 s
    run_hang "$FIX_SP/plain-hang-iter.log" 30 TERM 0 - "" \
        "$TORCHRUN" --nproc_per_node 4 --master_port 29857 --tee 3 plain_train.py --steps 20 --step-s 1 \
        --step-shape iter --case hang-broadcast --fail-step 7 --faulthandler 18 --log-all-ranks
    # e. a diff pair: the same run with optim.lr=1e30 in BAD, whose loss overflows to inf, then NaN
    run_case "$FIX_D/plain-lr-divergence/good.log" 120 "$TORCHRUN" --nproc_per_node 4 --master_port 29858 \
        plain_train.py --steps 8 --step-s 0.1
    run_case "$FIX_D/plain-lr-divergence/bad.log" 120 "$TORCHRUN" --nproc_per_node 4 --master_port 29859 \
        plain_train.py --steps 8 --step-s 0.1 optim.lr=1e30
fi
rm -rf "$JOB"
echo "done"
