#!/usr/bin/env bash
# cflite_build_test.sh CC CXX DIR: runs .clusterfuzzlite/build.sh as ClusterFuzzLite would, with
# CXXFLAGS=-fsanitize=address,fuzzer-no-link, LIB_FUZZING_ENGINE=-fsanitize=fuzzer and SRC, OUT and
# WORK under DIR (WORK is kept, so later runs rebuild only what changed), then checks that every
# target (one per fuzz/*.options) reached $OUT with its options, seed corpus and dictionary where
# it has one, and that each fuzzer passes its seed corpus.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: fuzz/cflite_build_test.sh CC CXX DIR" >&2; exit 2; }
cc=$1 cxx=$2 dir=$3
root=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "cflite_build_test: $*"; exit 1; }
rm -rf "$dir/src" "$dir/out" "$dir/seeds"
mkdir -p "$dir/src" "$dir/out" "$dir/work"
ln -s "$root" "$dir/src/attncheck"

SRC=$dir/src OUT=$dir/out WORK=$dir/work CC=$cc CXX=$cxx CXXFLAGS="-fsanitize=address,fuzzer-no-link" \
  LIB_FUZZING_ENGINE=-fsanitize=fuzzer "$root/.clusterfuzzlite/build.sh" >"$dir/build.log" 2>&1 ||
  { tail -n 30 "$dir/build.log"; fail "build.sh failed (log: $dir/build.log)"; }

count=0
for options in "$root"/fuzz/*.options; do
  target=$(basename "$options" .options)
  for file in "$target" "$target.options" "${target}_seed_corpus.zip"; do
    [ -s "$dir/out/$file" ] || fail "build.sh left no $file in \$OUT"
  done
  [ ! -f "$root/fuzz/$target.dict" ] || [ -s "$dir/out/$target.dict" ] || fail "build.sh left no $target.dict in \$OUT"
  mkdir -p "$dir/seeds/$target"
  unzip -q "$dir/out/${target}_seed_corpus.zip" -d "$dir/seeds/$target"
  ATTNCHECK_IMPL= "$dir/out/$target" -runs=0 "$dir/seeds/$target" >"$dir/$target.log" 2>&1 ||
    fail "$target from \$OUT fails its seed corpus (log: $dir/$target.log)"
  count=$((count + 1))
done
echo "cflite_build_test: build.sh put $count fuzzers in \$OUT with their options, seed corpora and dictionaries; each passes its seeds"
