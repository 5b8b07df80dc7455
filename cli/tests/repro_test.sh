#!/usr/bin/env bash
# repro_test.sh gtest ATTNCHECK SCRATCH CXX INCLUDE BUGGY.so FIXED.so [CXXFLAGS [TEXT]]
# repro_test.sh pytest ATTNCHECK SCRATCH PYTHON CLIENT_DIR "BUGGY COMMAND" "FIXED COMMAND"
# A finding of the buggy kernel, written by `attncheck repro` as a regression test: the test must
# fail against the buggy kernel and pass against the fixed one. TEXT: what check's report of the
# finding must say (which kind of finding the test is about).
set -u
# The search is bounded by its cases (a seed checks the same ones on any machine), not by seconds: under
# load, starting a Python command alone took 42 s of a 20 s budget and the check ended with no finding.
kind=$1 attncheck=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch" && cd "$scratch" || exit 1
fail() { echo "repro_test: $*"; exit 1; }
if [ "$kind" = gtest ]; then
  cxx=$4 include=$5 buggy=$6 fixed=$7 flags=${8:-} text=${9:-}  # flags: the plugins' sanitizers, which a loader needs too
  "$attncheck" check --impl "$buggy" --seconds 600 --cases 500 --counterexample finding.replay >check.txt; [ $? -eq 1 ] || fail "no finding"
  grep -qF -- "$text" check.txt || { cat check.txt; fail "the finding does not say: $text"; }
  "$attncheck" repro --replay finding.replay --out regression_test.cpp || fail "repro failed"
  # shellcheck disable=SC2086
  "$cxx" -std=c++17 $flags regression_test.cpp -I "$include" -lgtest -lgtest_main -ldl -pthread -o regression_test ||
    fail "does not compile"
  ATTNCHECK_REPRO_PLUGIN="$buggy" ./regression_test >buggy.txt && fail "passed against the buggy kernel"
  grep -q "out element\|lse element" buggy.txt || { cat buggy.txt; fail "failed against the buggy kernel, but not on a value"; }
  ATTNCHECK_REPRO_PLUGIN="$fixed" ./regression_test >fixed.txt || { cat fixed.txt; fail "failed against the fixed kernel"; }
else
  python=$4 client=$5 buggy=$6 fixed=$7
  "$attncheck" check --impl-cmd "$buggy" --empty-rows nan --seconds 600 --cases 500 --counterexample finding.replay >check.txt; [ $? -eq 1 ] || fail "no finding"
  "$attncheck" repro --replay finding.replay --out test_regression.py || fail "repro failed"
  export PYTHONPATH=$client PYTHONDONTWRITEBYTECODE=1
  ATTNCHECK_REPRO_COMMAND="$buggy" "$python" -m pytest -q -p no:cacheprovider test_regression.py >buggy.txt && fail "passed against the buggy command"
  grep -q "AssertionError: out\[\|AssertionError: lse\[" buggy.txt || { cat buggy.txt; fail "failed against the buggy command, but not on a value"; }
  ATTNCHECK_REPRO_COMMAND="$fixed" "$python" -m pytest -q -p no:cacheprovider test_regression.py >fixed.txt ||
    { cat fixed.txt; fail "failed against the fixed command"; }
fi
grep -m1 "Failure\|AssertionError" buggy.txt
echo "repro_test: fails against the buggy kernel, passes against the fixed one"
