# Sourced by bench/real_stage2.sh and bench/real_heldout.sh (with PY set): starts
# `collect.realserve slots=2 threads=1` on :8011 (the real model under llama.cpp, 2 slots x
# 1 thread) and waits until it answers. The processes in `pids` (the server's, and any the
# script adds) are stopped when the script exits; `kill` the script's PID stops them all.
# The script's own PID goes to the log first: `kill` that one (a wrapper's PID, such as
# the `$!` of `VAR=... nohup nice bash ... &` in some shells, stops only the wrapper).
echo "$(basename "$0"): PID $$ (kill $$ stops it and its servers)"
pids=()
cleanup() {
    kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 143' INT TERM
# REALSERVE_ARGS: more collect.realserve overrides (bench/real_pilot.sh: n_ctx=16384)
"$PY" -m collect.realserve slots=2 threads=1 port=8011 ${REALSERVE_ARGS:-} &
pids+=($!)
"$PY" - <<'EOF'
import time, urllib.request
for _ in range(900):
    try:
        urllib.request.urlopen("http://127.0.0.1:8011/v1/models", timeout=5).read()
        break
    except OSError:
        time.sleep(1)
else:
    raise SystemExit("collect.realserve did not answer on :8011 in 15 minutes")
EOF
