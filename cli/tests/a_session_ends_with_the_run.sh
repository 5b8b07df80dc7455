#!/usr/bin/env bash
# check.ASetsidGrandchildEndsWithTheRun (cli/tests/issue36_tests.cmake): what a command starts in a session of
# its own (setsid) ends with the run. The misbehaving child's setsid_grandchild starts `sleep 3017` under setsid;
# the keeper is a subreaper and the checker kills the command's descendants, not only its process group, so no
# `sleep 3017` is left half a second after the run (one that is, is ended and the test fails).
# Usage: a_session_ends_with_the_run.sh ATTNCHECK PYTHON
# It writes no file.
set -u
attncheck=$1 python=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
child="$python $root/tools/tests/children/misbehaving_child.py"
"$attncheck" check --impl-cmd "$child setsid_grandchild 3017" --cases 5 --seconds 60 > /dev/null
sleep 0.5
! pgrep -f '^sleep 3017$' || { pkill -f '^sleep 3017$'; echo 'sleep 3017 outlived the run'; false; }
