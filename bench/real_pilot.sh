#!/usr/bin/env bash
# The real model's pilot over many tasks (docs/real-actor.md, "The pilot on 400 generated
# tasks"; issue "the real model's verdict across at least 30 held-out tasks"): the 0.5B
# model under llama.cpp (collect.realserve, 2 slots x 1 thread) at help probability 0 and
# 1 on every task of the fixed generated benchmark (collect.worlds.generate n=40 seed=0,
# checked against collect/worlds/benchmarks/gen40-seed0.sha256), seeds 0 and 1. Shards run
# helped first (executor.order=helped_first: every task at probability 1, seed 0 then seed
# 1, the tasks of a seed in a fixed shuffled order, then the same at probability 0): the
# first 229 episodes (114 tasks, run seed_shuffled) solved 0 of 114 tasks without help, and
# an unhelped episode read 10,376 prompt tokens on average against 2,640 helped, so the
# unhelped arm costs about three quarters of the time and tells least. A run stopped in
# the helped arm holds a uniform sample of the 400 tasks at probability 1. It says which tasks the model ever solves, with and
# without help, the episodes per hour here and the between-task variance that sizes the
# held-out evaluation; the splits are chosen from it before any verdict episode runs.
# env.max_turns=12 (the longest reference solution is 8 calls, plus list_tools and the
# answer): at the default 30, a first run finished 22 episodes in 5 minutes and then held
# both slots for over 20 minutes with two episodes (long tool results re-read each turn
# at about 55 prompt tokens a second per thread), about 25 episodes an hour.
# A 16,384-token context window per slot (collect.realserve n_ctx=16384, pinned by
# actor.context_window, so the plan says it): unhelped episodes that call list_tools again
# and again add its 4,128-token answer each turn, and at the model's own 32,768 two such
# episodes held both slots 36 minutes without ending (the 21 episodes run that way are kept
# in helpdp/data/real-actor-pilot-ctx32k; none of them reached 2,600 prompt tokens). An
# episode that outgrows the window ends context_full within a few minutes, its world
# verified as it stands (as at env.max_turns).
# Resumable: rerun the same command; finished shards are kept (and committed).
#
#   nohup nice -n 10 bash bench/real_pilot.sh >> outputs/real-pilot.log 2>&1 &
#   python bench/real_pilot_report.py helpdp/data/real-actor-pilot   # what it has so far
#
# Needs `make real-actor llama-server`. `kill PID` (the script's) stops the collection and
# the servers (a stopped episode reruns).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
OUT=helpdp/data/real-actor-pilot
source bench/gen40.sh
gen40_worlds
REALSERVE_ARGS="n_ctx=16384 ${REALSERVE_ARGS:-}" source bench/realserve_up.sh
"$PY" -m collect out="$OUT" worlds="$WORLDS" collect/actor=qwen_coder_0_5b_llamacpp \
    'schedule.probabilities=[0.0,1.0]' 'schedule.seeds=[0,1]' executor.order=helped_first \
    env.max_turns=12 actor.context_window=16384 progress=false &
pids+=($!)
wait "${pids[1]}"
