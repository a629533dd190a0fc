#!/usr/bin/env bash
# Stage 2 of the two-stage design on the real model (docs/real-actor.md,
# "Stage 2 on the real model"): help at turn 0, and at the trigger states (after a repeated
# call, a failed call, an unknown tool, and at turn 2) with probability 0.5 at the first 2
# trigger states of an episode (stage2.max_randomised=2; the base after), under llama.cpp
# (collect.realserve, 2 slots x 1 thread: the most episodes per CPU-second,
# bench/runtimes.py), on the five train tasks where the model succeeds at least
# sometimes (a pilot of 402 episodes on 11 train tasks, docs/results/real-actor.md: the
# other seven never succeeded under llama.cpp, so they carry nothing on which help is
# better), 100 seeds each. Shards run seed by seed across the tasks (executor.order=seed),
# so a run stopped part way is balanced. Resumable: rerun the same command; finished
# shards are kept (and committed: they are the data, one file set per episode).
#
#   nohup nice -n 10 bash bench/real_stage2.sh >> outputs/real-stage2.log 2>&1 &
#
# Needs `make real-actor llama-server`. The servers are stopped when the collection ends;
# `kill PID` (the script's) stops the collection and the servers (a stopped episode reruns).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
OUT=helpdp/data/real-actor-stage2
source bench/realserve_up.sh
"$PY" -m collect out="$OUT" collect/actor=qwen_coder_0_5b_llamacpp \
    stage2.base=turn0 'stage2.events=[repeat,failed,unknown_tool,turn:2]' stage2.q=0.5 \
    stage2.max_randomised=2 \
    'schedule.scenarios=[e_commerce_admin_1,smart_home_1]' 'schedule.tasks=[0,1,2]' \
    'schedule.splits=[train]' schedule.seeds=100:200 executor.order=seed \
    progress=false &
pids+=($!)
wait "${pids[1]}"
