#!/usr/bin/env bash
# minimize_test.sh FUZZER REPLAY PLUGIN.so WORKDIR: the way from a finding to a kept regression, end
# to end. The libFuzzer program FUZZER, aimed at a planted bug (PLUGIN.so) with a fixed seed and run
# budget, finds a failure from its corpus; -minimize_crash shrinks it; the replay program REPLAY
# must fail on the minimized input with the plugin and pass with the built-in implementation, so
# that the input is a regression every correct kernel passes. Run from the repository's root.
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: fuzz/minimize_test.sh FUZZER REPLAY PLUGIN.so WORKDIR" >&2; exit 2; }
fuzzer=$1 replay=$2 plugin=$3 work=$4
target=$(basename "$fuzzer")
fail() { echo "minimize_test: $*"; exit 1; }
rm -rf "$work"
mkdir -p "$work/corpus"

if ATTNCHECK_IMPL=$plugin "$fuzzer" -seed=1 -runs=100000 -artifact_prefix="$work/" "$work/corpus" "corpus/$target" \
    >"$work/find.log" 2>&1; then
  fail "the fuzzer found nothing in $plugin (log: $work/find.log)"
fi
crash=$(find "$work" -maxdepth 1 -name 'crash-*' | head -n 1)
[ -n "$crash" ] || fail "the fuzzer failed without a crash file (log: $work/find.log)"

ATTNCHECK_IMPL=$plugin "$fuzzer" -seed=1 -minimize_crash=1 -runs=1000 -exact_artifact_path="$work/minimized" "$crash" \
  >"$work/minimize.log" 2>&1 || fail "minimizing failed (log: $work/minimize.log)"
[ -s "$work/minimized" ] || fail "no minimized input (log: $work/minimize.log)"
before=$(wc -c <"$crash") after=$(wc -c <"$work/minimized")
[ "$after" -le "$before" ] || fail "the minimized input ($after bytes) is larger than the crash ($before bytes)"

if ATTNCHECK_IMPL=$plugin "$replay" "$work/minimized" >"$work/replay.log" 2>&1; then
  fail "the replay program passes the minimized input with $plugin (log: $work/replay.log)"
fi
grep -q '^FINDING: ' "$work/replay.log" || fail "the replay failed without a FINDING message (log: $work/replay.log)"
ATTNCHECK_IMPL= "$replay" "$work/minimized" >"$work/builtin.log" 2>&1 ||
  fail "the built-in implementation fails the minimized input too (log: $work/builtin.log)"
echo "minimize_test: a $before-byte failure minimized to $after bytes; it fails with $(basename "$plugin") and passes with the built-in"
