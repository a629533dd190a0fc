#!/usr/bin/env bash
# Download the wheels of bench/gpu_wheels.txt for the device (Python 3.12, manylinux
# x86-64) into DIR (default gpu-wheels/, gitignored), without their dependencies; prints
# the total size (what travels with `carry` must stay under 64 MiB).
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-gpu-wheels}"
mkdir -p "$dir"
# antlr4-python3-runtime 4.9.3 (hydra's pin) is an sdist only: pure Python, fetched apart
grep -v '^#' bench/gpu_wheels.txt | grep . | grep -v '^antlr4' > "$dir/.list"
python3 -m pip download -q --no-deps --no-binary=:all: -d "$dir" "$(grep '^antlr4' bench/gpu_wheels.txt)"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --abi cp312 --abi abi3 --abi none \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux_2_28_x86_64 --platform any -d "$dir" -r "$dir/.list"
du -sh "$dir"
