#!/usr/bin/env bash
# A verdict does not depend on the machine's load (issue 36): with three busy loops holding both
# cores, a correct kernel whose calls sometimes sleep 1.2 s and once spin 1.5 s passes, and a kernel
# that never returns when Tk is 7 is still reported hung. Prints how long each took.
# Usage: loaded_machine.sh ATTNCHECK STALLING_PLUGIN HANGING_PLUGIN OUT_DIR
set -u
attncheck=$1 stalls=$2 hangs=$3 out=$4
mkdir -p "$out"
source "$(dirname "$0")/../../tools/tests/busy_loops.sh"

start=$SECONDS
"$attncheck" check --impl "$stalls" --cases 60 --seconds 600 --counterexample "$out/stalls.replay" > "$out/stalls.txt"
code=$?
tail -3 "$out/stalls.txt"
echo "the stalling kernel: exit $code after $((SECONDS - start)) s"
[ $code -eq 0 ] || { cat "$out/stalls.txt"; exit 1; }

start=$SECONDS
"$attncheck" check --impl "$hangs" --seconds 60 --counterexample "$out/hangs.replay" > "$out/hangs.txt"
code=$?
echo "the hanging kernel: exit $code after $((SECONDS - start)) s"
[ $code -eq 1 ] && grep -q "hung: no answer within 1 s of CPU time" "$out/hangs.txt" || { cat "$out/hangs.txt"; exit 1; }
