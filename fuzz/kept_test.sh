#!/usr/bin/env bash
# kept_test.sh roundtrip REPLAY...: every file kept in corpus/regressions/<target>/ (the target of
# each REPLAY, <target>_replay) is a kept text that reads back to itself, byte for byte:
# `REPLAY --keep FILE` reads it and writes it again. A file of libFuzzer bytes fails: its case
# would change with the generator.
# kept_test.sh errors ATTENTION_REPLAY SOFTMAX_REPLAY NPY_REPLAY WORKDIR: a kept text for another
# target, a malformed one, and fuzz_npy asked for kept texts are one-line errors, exit 2; a
# libFuzzer input kept with --keep replays from its text. Run from the repository's root.
set -uo pipefail
expect=$(dirname "$0")/../tools/tests/expect_exit.sh
fail() { echo "kept_test: $*"; exit 1; }

roundtrip() {
  for replay in "$@"; do
    target=$(basename "$replay" _replay) count=0
    for file in "corpus/regressions/$target"/*; do
      [ -f "$file" ] || continue
      "$replay" --keep "$file" 2>/dev/null | cmp -s - "$file" ||
        fail "$file does not read back to itself (kept texts are written by ${target}_replay --keep; a file of bytes means another case once the generator changes)"
      count=$((count + 1))
    done
    [ "$count" -gt 0 ] || fail "no kept texts in corpus/regressions/$target"
    echo "kept_test: $count kept texts of $target read back to themselves"
  done
}

errors() {
  [ $# -eq 4 ] || { echo "usage: fuzz/kept_test.sh errors ATTENTION_REPLAY SOFTMAX_REPLAY NPY_REPLAY WORKDIR" >&2; exit 2; }
  local attention=$1 softmax=$2 npy=$3 work=$4
  rm -rf "$work" && mkdir -p "$work"
  local kept
  kept=$(find corpus/regressions/fuzz_attention -name '*.txt' | sort | head -n 1)
  [ -n "$kept" ] || fail "no kept text in corpus/regressions/fuzz_attention"
  sed '/^poison /d' "$kept" >"$work/no_poison.txt"
  sed 's/^q \([0-9a-f]*\)/q x\1/' "$kept" >"$work/bad_bits.txt"
  sed 's/^intervention .*/intervention b 9 i 0/' "$kept" >"$work/bad_batch.txt"
  sed '1s/ 1 / 2 /' "$kept" >"$work/version2.txt"
  printf 'attncheck-fuzz 1 fuzz_attention\n' >"$work/truncated.txt"
  : >"$work/empty_input"

  "$expect" 2 "kept for fuzz_attention, not fuzz_softmax" "$softmax" "$kept" || fail "a kept text of another target"
  "$expect" 2 "no 'poison' line" "$attention" "$work/no_poison.txt" || fail "a kept text without poison"
  "$expect" 2 "is not a bit pattern" "$attention" "$work/bad_bits.txt" || fail "a kept text with bad bits"
  "$expect" 2 "batch '9' is not in" "$attention" "$work/bad_batch.txt" || fail "a kept text with a batch out of range"
  "$expect" 2 "format version 2" "$attention" "$work/version2.txt" || fail "a kept text of another version"
  "$expect" 2 "must name float32 or float64" "$attention" --keep "$work/truncated.txt" || fail "a truncated kept text"
  "$expect" 2 "fuzz_npy has no kept texts" "$npy" --keep "$work/empty_input" || fail "--keep on fuzz_npy"
  "$expect" 2 "fuzz_npy has no kept texts" "$npy" "$kept" || fail "a kept text given to fuzz_npy"

  # The empty input decodes to a fully masked row (docs/fuzzing.md): kept, it replays as text.
  "$attention" --keep "$work/empty_input" >"$work/empty_input.txt" 2>"$work/keep.log" || fail "--keep of the empty input failed"
  head -n 1 "$work/empty_input.txt" | grep -qx 'attncheck-fuzz 1 fuzz_attention' || fail "--keep wrote no kept text"
  ATTNCHECK_IMPL= "$attention" "$work/empty_input.txt" >"$work/replay.log" 2>&1 || fail "the kept empty input fails (log: $work/replay.log)"
  echo "kept_test: errors are one line, exit 2; a kept input replays from its text"
}

mode=${1:-}
shift || true
case $mode in
  roundtrip) roundtrip "$@" ;;
  errors) errors "$@" ;;
  *) echo "usage: fuzz/kept_test.sh roundtrip REPLAY... | errors ATTENTION_REPLAY SOFTMAX_REPLAY NPY_REPLAY WORKDIR" >&2; exit 2 ;;
esac
