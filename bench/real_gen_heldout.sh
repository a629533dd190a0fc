#!/usr/bin/env bash
# The held-out evaluation of the verdict across many tasks (docs/real-actor.md, "The verdict
# across many tasks"): on the test candidates of the split record, in the environments,
# under the pilot's actor (llama.cpp, 2 slots x 1 thread, 16,384-token window, at most 12
# turns: all recorded in the train data's manifest, which helpdp.evaluate re-aims), paired
# seeds from 300, one seed a chunk (one evaluate out directory each, so a stopped run is
# balanced across tasks; rerun to go on). Policies: the selection's choice at budgets 1 and
# 2 (SELECT/budget=<b>/selected.json), help at turn 0, the two-call turn rules 0,1 / 0,2 /
# 0,3 (with turn 0 and always they span the choices' spend), always, and never. Never runs
# on the first NEVER_SEEDS seeds only: an unhelped episode reads about four times the
# prompt tokens of a helped one, and it is the floor, not a contender.
#
#   nohup nice -n 10 bash bench/real_gen_heldout.sh [SEEDS] >> outputs/real-gen-heldout.log 2>&1 &
#   python bench/real_actor.py --eval-report outputs/real-gen-heldout/seed-*/ --worlds --skip=never
#
# Needs `make real-actor llama-server`, the split record (SPLITS), the merged train data
# (DATA) and the selection (SELECT).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
N_SEEDS=${1:-16}
NEVER_SEEDS=${NEVER_SEEDS:-4}
SPLITS=${SPLITS:-docs/results/tables/real-gen-splits.json}
DATA=${DATA:-helpdp/data/real-gen}
SELECT=${SELECT:-docs/results/real-gen-select}
OUT=${OUT:-outputs/real-gen-heldout}
for f in "$SPLITS" "$DATA/manifest.json" "$SELECT/budget=1/selected.json" "$SELECT/budget=2/selected.json"; do
    [ -f "$f" ] || { echo "$f: missing (docs/real-actor.md, The verdict across many tasks)" >&2; exit 2; }
done
source bench/gen40.sh
mapfile -t TASKS < <(PREFIX="" split_overrides "$SPLITS" test)
mkdir -p "$OUT"
REALSERVE_ARGS="n_ctx=16384 ${REALSERVE_ARGS:-}" source bench/realserve_up.sh
SKIP="'random episodes p=0.5','rule: after failure','rule: turn 0 + after failure','dp table (budget 2)'"
for ((i = 0; i < N_SEEDS; i++)); do
    s=$((300 + i))
    dir=$OUT/seed-$s
    [ -f "$dir/report.md" ] && continue
    skip=$SKIP
    [ "$i" -ge "$NEVER_SEEDS" ] && skip="$skip,'never'"
    "$PY" -m helpdp.evaluate data="$DATA" "${TASKS[@]}" 'splits=[test]' "seeds=[$s]" budget=2 \
        'random_p=[]' 'turn_rules=[[0,1],[0,2],[0,3]]' ope=false batch_size=2 progress=false \
        "policy_files=['$SELECT/budget=1/selected.json','$SELECT/budget=2/selected.json']" \
        "skip=[$skip]" out="$dir" > "$dir.log" 2>&1 &
    pids+=($!)  # in the background, waited on: a kill of the script stops it at once
    wait "${pids[-1]}" || { echo "seed $s failed: $dir.log"; exit 1; }
    echo "seed $s done"
done
