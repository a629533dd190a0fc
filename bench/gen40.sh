# Sourced by bench/real_pilot.sh, real_gen.sh and real_gen_heldout.sh (with PY set): the
# fixed generated benchmark of the real model's verdict, and the overrides that name the
# tasks of its split record (docs/real-actor.md, "The split rule").
WORLDS=outputs/worlds-gen40-seed0

# the 40 worlds (collect.worlds.generate n=40 seed=0), built once, checked by sha256
gen40_worlds() {
    if [ ! -f "$WORLDS/gen_solutions.jsonl" ]; then
        "$PY" -m collect.worlds.generate out="$WORLDS" n=40 seed=0 > /dev/null
    fi
    (cd "$WORLDS" && sha256sum --quiet -c ../../collect/worlds/benchmarks/gen40-seed0.sha256)
}

# split_overrides RECORD train|test: one override a line, the tasks of that side of the
# record as hydra lists; PREFIX (schedule. for a collection, empty for helpdp.evaluate)
# names the keys; with train, the test tasks are forced into the test split
split_overrides() {
    "$PY" - "$1" "$2" "${PREFIX-schedule.}" <<'PYEOF'
import json, sys
record, side, prefix = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
tasks = record[f"{side}_tasks"]
print(f"{prefix}scenarios=[" + ",".join(sorted({t.rpartition("/")[0] for t in tasks})) + "]")
print(f"{prefix}task_ids=[" + ",".join(tasks) + "]")
if side == "train":
    print("split.test_tasks=[" + ",".join(record["test_tasks"]) + "]")
PYEOF
}
