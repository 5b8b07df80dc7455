#!/usr/bin/env bash
# expect_exit.sh CODE TEXT COMMAND...: runs COMMAND; passes when it exits with CODE, prints TEXT
# (stdout or stderr), and an error (CODE 2) is exactly one line.
code=$1 text=$2
shift 2
output=$("$@" 2>&1)
actual=$?
echo "$output"
[ "$actual" -eq "$code" ] || { echo "expected exit $code, got $actual"; exit 1; }
grep -qF -- "$text" <<<"$output" || { echo "expected the output to contain: $text"; exit 1; }
[ "$code" -ne 2 ] || [ "$(wc -l <<<"$output")" -eq 1 ] || { echo "expected a one-line error"; exit 1; }
