#!/usr/bin/env bash
# stopped_checker_takes_its_child.sh ATTNCHECK PYTHON [SIGNAL]: a checker stopped by SIGNAL (TERM;
# KILL, which it cannot catch) while its command hangs in a call takes the command along (its shell
# and the process the shell started) and what the command started in a session of its own (setsid),
# leaving no orphan.
set -u
attncheck=$1 python=$2 signal=${3:-TERM}
hanging=$(mktemp -u /tmp/attncheck-hanging-XXXXXX)  # the child creates it once stuck in a call
seconds=$((4000 + $$ % 1000))  # names the command's setsid grandchild: sleep $seconds
child="$python $(dirname "$0")/misbehaving_child.py setsid_hang $hanging $seconds"
"$attncheck" check --impl-cmd "$child" --seconds 30 --case-timeout 60 >/dev/null 2>&1 &
checker=$!
for _ in $(seq 300); do [ -e "$hanging" ] && break; sleep 0.1; done
[ -e "$hanging" ] || { echo "the child never got to its call"; kill -9 $checker; exit 1; }
kill -"$signal" $checker
wait $checker 2>/dev/null
for _ in $(seq 50); do
  pgrep -f "misbehaving_child.py setsid_hang $hanging|^sleep $seconds\$" >/dev/null ||
    { echo "the child went with the checker"; rm -f "$hanging"; exit 0; }
  sleep 0.1
done
echo "orphaned: $(pgrep -af "misbehaving_child.py setsid_hang $hanging|^sleep $seconds\$")"
pkill -KILL -f "misbehaving_child.py setsid_hang $hanging|^sleep $seconds\$"
rm -f "$hanging"
exit 1
