#!/usr/bin/env bash
# compare.TruncatedFile (cli/tests/CMakeLists.txt): `attncheck compare` given a .npy file cut short (the first
# 150 bytes of EXAMPLE_DIR/v.npy, written to OUT_DIR/truncated.npy) refuses it: exit 2, one line, "truncated".
# Usage: compare_truncated_file.sh ATTNCHECK EXAMPLE_DIR OUT_DIR
# EXAMPLE_DIR: the shipped compare example (examples/compare: q.npy, k.npy, v.npy, out.npy).
set -u
attncheck=$1 example=$2 out=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out" && cd "$out" || exit 1
head -c 150 "$example/v.npy" > "$out/truncated.npy" &&
  "$root/tools/tests/expect_exit.sh" 2 truncated "$attncheck" compare --q "$example/q.npy" --k "$example/k.npy" --v "$out/truncated.npy" \
    --out "$example/out.npy"
