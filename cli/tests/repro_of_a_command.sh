#!/usr/bin/env bash
# attncheck repro of a command's finding (issue 36), one case per ctest (cli/tests/issue36_tests.cmake):
#   a_commands_finding          repro.ACommandsFinding: the misbehaving child's zeros, found and kept in
#                               OUT_DIR/zeros.replay with its failed call, for the two cases below (a fixture:
#                               it empties OUT_DIR first)
#   runs_only_the_given_command repro.APytestRunsOnlyTheCommandItIsGiven: the pytest file runs the command the
#                               user names (ATTNCHECK_REPRO_COMMAND), never the replay file's (touch PWNED) through
#                               /bin/sh: unnamed, the test fails saying so and the file's command is only a comment;
#                               named, the test runs it and fails on a value
#   words_not_utf8              repro.WordsThatAreNotUtf8MakePythonThatCompiles: byte 0xff in a replay file's name
#                               and command (KEPT_CALL's, an adapter's) and in the command given to repro makes
#                               Python that compiles, each word a string that encodes back to its bytes
#                               (repro_words_are_bytes.py)
# Usage: repro_of_a_command.sh CASE ATTNCHECK PYTHON OUT_DIR [KEPT_CALL]
# KEPT_CALL (words_not_utf8): a replay file that keeps its failed call. Each case works in OUT_DIR and exits 0
# when repro does what it should.
set -u
case=$1 attncheck=$2 python=$3 out=$4 kept_call=${5-}
root=$(cd "$(dirname "$0")/../.." && pwd)
child="$python $root/tools/tests/children/misbehaving_child.py"
if [ "$case" = a_commands_finding ]; then rm -rf "$out" || exit 1; fi
mkdir -p "$out" && cd "$out" || exit 1
case $case in
  a_commands_finding)
    "$attncheck" check --impl-cmd "$child zeros" --cases 500 --seconds 600 --shrink-seconds 1 --counterexample "$out/zeros.replay" > /dev/null
    grep -q '^failed-call-why ' "$out/zeros.replay" ;;
  runs_only_the_given_command)
    rm -f PWNED && sed "s|^impl-cmd .*|impl-cmd touch $out/PWNED|" zeros.replay > pwn.replay &&
      "$attncheck" repro pwn.replay --out test_pwn.py &&
      grep -qx "# The replay file.s command, run only when you name it: touch $out/PWNED" test_pwn.py || exit 1
    export PYTHONPATH=$root/python PYTHONDONTWRITEBYTECODE=1
    "$python" -m pytest -q -p no:cacheprovider test_pwn.py > unnamed.txt
    cat unnamed.txt
    grep -q 'name the command to test: ATTNCHECK_REPRO_COMMAND' unnamed.txt && [ ! -e PWNED ] &&
      ATTNCHECK_REPRO_COMMAND="$child zeros" "$python" -m pytest -q -p no:cacheprovider test_pwn.py > named.txt
    cat named.txt
    grep -q 'AssertionError: out\[' named.txt && [ ! -e PWNED ] ;;
  words_not_utf8)
    ff=$(printf '\377') &&
      sed "s|^impl-cmd .*|impl-cmd python3 -m attncheck.adapters.onnxruntime --x $ff|" "$kept_call" > "w$ff.replay" &&
      "$attncheck" repro "w$ff.replay" --standalone yes --out standalone.py &&
      "$attncheck" repro zeros.replay --impl-cmd "$child zeros $ff" --out test_ff.py &&
      "$python" -m py_compile standalone.py test_ff.py &&
      "$python" "$root/cli/tests/repro_words_are_bytes.py" standalone.py test_ff.py ;;
  *) echo "repro_of_a_command.sh: no case $case"; exit 2 ;;
esac
