#!/usr/bin/env bash
# What a Python user sees (the client in python/, commands run by --impl-cmd), one case per ctest
# (cli/tests/CMakeLists.txt):
#   report_under_pytest python.PytestShowsTheReport: a failing attncheck.check under pytest
#                       (python/tests/shows_the_report.py) shows attncheck's report, not check()'s own source
#                       (__tracebackhide__, issue 24): exit 1, "attncheck check: FAIL", no "raise AssertionError"
#   cannot_start        python.ACommandThatCannotStartShowsItsStderr: a command that exits while starting (the
#                       misbehaving child's cannot_start) is an error, exit 2, whose first line says so and whose
#                       output carries the command's stderr (its ImportError)
# Usage: python_client.sh CASE ATTNCHECK PYTHON OUT_DIR
# Each case writes its files into OUT_DIR (created if need be) and exits 0 when the user sees what they should.
set -u
case=$1 attncheck=$2 python=$3 out=$4
root=$(cd "$(dirname "$0")/../.." && pwd)
child="$python $root/tools/tests/children/misbehaving_child.py"
mkdir -p "$out" && cd "$out" || exit 1
case $case in
  report_under_pytest)
    ATTNCHECK_BIN=$attncheck PYTHONPATH=$root/python PYTHONDONTWRITEBYTECODE=1 "$python" -m pytest -q -p no:cacheprovider "$root/python/tests/shows_the_report.py" \
      > "$out/shows_the_report.txt"
    code=$?
    cat "$out/shows_the_report.txt"
    [ $code -eq 1 ] && grep -q 'attncheck check: FAIL' "$out/shows_the_report.txt" && ! grep -q 'raise AssertionError' "$out/shows_the_report.txt" ;;
  cannot_start)
    "$attncheck" check --impl-cmd "$child cannot_start" --seconds 1 >"$out/cannot_start.txt" 2>&1
    code=$?
    cat "$out/cannot_start.txt"
    [ $code -eq 2 ] && head -1 "$out/cannot_start.txt" | grep -q 'exited with status 1 while starting' &&
      grep -q "ImportError: No module named 'my_kernel'" "$out/cannot_start.txt" ;;
  *) echo "python_client.sh: no case $case"; exit 2 ;;
esac
