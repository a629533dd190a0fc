#!/usr/bin/env bash
# The selection of the verdict across many tasks (docs/real-actor.md, "The verdict across
# many tasks"): the two stages on the train candidates (bench/real_gen.sh) merged into one
# dataset (collect.merge: the grid and the stage-2 design on the same tasks, weighted as
# one mixture per task), then helpdp.select at budgets 1 and 2 with the fallback chosen
# before any stage-1 episode was looked at: fallback=rules_hull, the one that lost least
# in the worlds of the agents fitted to this model (docs/ope.md, "Worlds played by the
# fitted agents": 91 of 400 choices worse than the rules' hull by more than 0.01, against
# 206 for the reference and 109 for stable_rule). Minutes of CPU; no model runs.
#
#   bash bench/real_gen_select.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
DATA=${DATA:-helpdp/data/real-gen}
OUT=${OUT:-docs/results/real-gen-select}
for d in helpdp/data/real-gen-stage1 helpdp/data/real-gen-stage2; do
    [ -f "$d/manifest.json" ] || { echo "$d: not a finished collection (bash bench/real_gen.sh)" >&2; exit 2; }
done
if [ ! -f "$DATA/manifest.json" ]; then
    "$PY" -m collect.merge 'sources=[helpdp/data/real-gen-stage1,helpdp/data/real-gen-stage2]' out="$DATA"
fi
"$PY" -m helpdp.select data="$DATA" 'budget=[1,2]' fallback=rules_hull out="$OUT"
