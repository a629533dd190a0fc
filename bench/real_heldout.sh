#!/usr/bin/env bash
# The held-out verdict of stage 2 on the real model (docs/real-actor.md, "The held-out
# verdict"): "help at turn 0", the policy helpdp.select chooses at budget 2 on the stage-2
# data ("turns 0,3"), its equal-spend neighbour "turns 0,1" and always, in the
# environments, on the held-out tasks with at most 3 reference calls (the range where the
# model succeeds at all on train tasks: smart_home_1/2 and workflow_automation_1/0 (test),
# workflow_automation_1/1 (validation); chosen before any held-out episode ran), paired
# seeds from 300, under llama.cpp (collect.realserve, 2 slots x 1 thread). Seeds run in
# chunks of 3, one evaluate out directory each, so a stopped run is balanced and resumes at
# the first chunk without a report (a stopped chunk resumes its baselines' shards).
#
#   nohup nice -n 10 bash bench/real_heldout.sh [CHUNKS] >> outputs/real-heldout.log 2>&1 &
#   python bench/real_actor.py --eval-report outputs/real-heldout/seeds-*/ --pool  # joined
#
# `kill PID` (the script's) stops the chunk running and the servers; the finished chunks
# are kept (a chunk without results.parquet is not finished: leave it out of the report).
#
# Needs `make real-actor llama-server` and the stage-2 shards (helpdp/data/real-actor-stage2).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
CHUNKS=${1:-20}
OUT=outputs/real-heldout
DATA=$OUT/stage2-data
SEEDS=$("$PY" -c "print(','.join(map(str, range(100, 200))))")
mkdir -p "$OUT"
if [ ! -f "$DATA/manifest.json" ]; then  # the stage-2 data as far as it goes (its config)
    "$PY" bench/real_actor.py --publish-partial "$DATA" out=helpdp/data/real-actor-stage2 \
        collect/actor=qwen_coder_0_5b_llamacpp stage2.base=turn0 \
        'stage2.events=[repeat,failed,unknown_tool,turn:2]' stage2.q=0.5 stage2.max_randomised=2 \
        'schedule.scenarios=[e_commerce_admin_1,smart_home_1]' 'schedule.tasks=[0,1,2]' \
        'schedule.splits=[train]' "schedule.seeds=[$SEEDS]" executor.order=seed > /dev/null
fi
source bench/realserve_up.sh
for ((i = 0; i < CHUNKS; i++)); do
    s=$((300 + 3 * i))
    dir=$OUT/seeds-$s
    [ -f "$dir/report.md" ] && continue
    "$PY" -m helpdp.evaluate data="$DATA" 'scenarios=[workflow_automation_1,smart_home_1]' \
        'tasks=[0,1,2]' 'splits=[test,validation]' "seeds=[$s,$((s + 1)),$((s + 2))]" budget=2 \
        'random_p=[]' 'turn_rules=[[0,1],[0,3]]' ope=false batch_size=2 progress=false \
        "skip=['never','random episodes p=0.5','rule: after failure','rule: turn 0 + after failure','dp table (budget 2)']" \
        out="$dir" > "$dir.log" 2>&1 &
    pids+=($!)  # in the background, waited on: a kill of the script stops it at once
    wait "${pids[-1]}" || { echo "chunk $s failed: $dir.log"; exit 1; }
    echo "chunk $s done"
done
