#!/usr/bin/env bash
# mha_shapes.sh ATTNCHECK FLAG... -- LINE...: runs `attncheck mha-shapes FLAG...`; passes when it
# exits 0 and prints every LINE as a whole line (leading spaces aside). Whole lines, so that
# "192 weights" cannot pass on "1,192 weights"; several lines, which one PASS_REGULAR_EXPRESSION cannot require.
attncheck=$1
shift
flags=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do flags+=("$1"); shift; done
shift
output=$("$attncheck" mha-shapes "${flags[@]}" 2>&1)
code=$?
echo "$output"
[ "$code" -eq 0 ] || { echo "expected exit 0, got $code"; exit 1; }
for line in "$@"; do
  sed 's/^ *//' <<<"$output" | grep -qxF -- "$line" || { echo "expected the line: $line"; exit 1; }
done
