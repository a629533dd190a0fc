#!/usr/bin/env bash
# Stage 1 and stage 2 of the two-stage design on the real model's train candidates of the
# generated benchmark (docs/real-actor.md, "The verdict across many tasks"; issue "the real
# model's verdict across at least 30 held-out tasks"). The tasks come from the split
# choice the pilot wrote (bench/real_pilot_report.py --splits; the rule in docs/real-actor.md,
# "The split rule"): only its train_tasks run, and its test_tasks are forced into the test
# split of both collections' records (split.test_tasks, split.test=0 split.validation=0),
# so `helpdp.evaluate` on this data runs them as held-out tasks and no policy is fitted on
# them. The runtime and episode limits are the pilot's (llama.cpp, 2 slots x 1 thread,
# 16,384-token window, at most 12 turns), so the pilot, both stages and the held-out
# evaluation sample one actor.
#
#   stage 1, the grid: help probability 0.25, 0.5, 0.75 and 1 at every turn, seeds 10 and
#     11 (8 episodes a task); no p = 0 arm: 0 of 114 pilot tasks were solved without help,
#     and an unhelped episode costs about four helped ones; every no-help decision is
#     still supported (at p = 0.75 and below);
#   stage 2: help at turn 0, and with probability 0.5 at the first 2 trigger states of an
#     episode (a repeated call, a failed call, an unknown tool, turn 2), seeds 100-107
#     (8 episodes a task), the design of the earlier real stage 2.
#
# Each stage runs seed by seed across the tasks (a stopped run is balanced) into
# helpdp/data/real-gen-stage1 and -stage2; finished shards are kept (and committed as
# they finish). Resumable: rerun the same command. `kill PID` (the script's) stops the
# collection and the servers (a stopped episode reruns).
#
#   nohup nice -n 10 bash bench/real_gen.sh [stage1|stage2|both] >> outputs/real-gen.log 2>&1 &
#
# Needs `make real-actor llama-server` and the split choice (SPLITS, default below).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
WHICH=${1:-both}
SPLITS=${SPLITS:-docs/results/tables/real-gen-splits.json}
case "$WHICH" in stage1 | stage2 | both) ;; *) echo "usage: $0 [stage1|stage2|both]" >&2; exit 2 ;; esac
[ -f "$SPLITS" ] || { echo "$SPLITS: no split choice (bench/real_pilot_report.py --splits)" >&2; exit 2; }
source bench/gen40.sh
gen40_worlds
mapfile -t TASKS < <(split_overrides "$SPLITS" train)
COMMON=(worlds="$WORLDS" collect/actor=qwen_coder_0_5b_llamacpp "${TASKS[@]}" split.test=0
    split.validation=0 'schedule.splits=[train]' env.max_turns=12 actor.context_window=16384
    executor.order=seed progress=false)
REALSERVE_ARGS="n_ctx=16384 ${REALSERVE_ARGS:-}" source bench/realserve_up.sh
if [ "$WHICH" != stage2 ]; then
    "$PY" -m collect out=helpdp/data/real-gen-stage1 "${COMMON[@]}" \
        'schedule.probabilities=[0.25,0.5,0.75,1.0]' 'schedule.seeds=[10,11]' &
    pids+=($!)
    wait "${pids[-1]}"
fi
if [ "$WHICH" != stage1 ]; then
    "$PY" -m collect out=helpdp/data/real-gen-stage2 "${COMMON[@]}" stage2.base=turn0 \
        'stage2.events=[repeat,failed,unknown_tool,turn:2]' stage2.q=0.5 stage2.max_randomised=2 \
        schedule.seeds=100:108 &
    pids+=($!)
    wait "${pids[-1]}"
fi
