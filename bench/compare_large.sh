#!/usr/bin/env bash
# `attncheck compare` on a large causal float32 problem, [1,32,4096,128] unless told otherwise:
# every row exact (--rows all), then the default sampled check; wall time and peak memory of each.
# Run from the repository after a build: bench/compare_large.sh [BUILD_DIR] [B H T d]
set -euo pipefail
build=${1:-build}
shape=("${@:2}")
[ ${#shape[@]} -eq 4 ] || shape=(1 32 4096 128)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$build/bench/make_large_problem" "$dir" "${shape[@]}"
for rows in all auto; do
  echo "== attncheck compare --rows $rows on [${shape[*]}] causal float32"
  /usr/bin/time -f "wall %e s, peak memory %M KiB" "$build/cli/attncheck" compare --q "$dir/q.npy" --k "$dir/k.npy" \
    --v "$dir/v.npy" --out "$dir/out.npy" --causal upper-left --rows "$rows"
done
