#!/usr/bin/env bash
# What the replay of a kept finding says, one case per ctest (cli/tests/CMakeLists.txt, issue36_tests.cmake):
#   find_then_replay  check.FindThenReplay: a planted bug (PLUGIN, the sentinel_1e4 mutant) is found and kept in
#                     sentinel.replay; replayed, it still fails on the mutant (the file's plugin, trusted) and no
#                     longer fails on the built-in
#   answers_vary      check.AnswersVary.AReplaySaysSo: the finding of a kernel wrong on every second call (PLUGIN)
#                     replays as "answers vary between identical calls", never "no longer fails", in the text and
#                     the JSON
#   policy_kept       check.Policy.TheReplayFileKeepsThem: a finding under --empty-rows mean (PLUGIN, policy_finite_mask)
#                     keeps the policy in its replay file, replays under it, and the replay's JSON says it
#   ordinary_leak     check.ALeakOfOrdinaryValuesIsNotCalledPoisoned: a kernel that adds the padded keys' values
#                     (PLUGIN, leaks_padded_values) replayed on replays/padded_key_ordinary_value.replay is "changed by
#                     a forbidden input" (it reads keys or values a query may not see), never "a NaN, inf or extreme"
# Usage: replays.sh CASE ATTNCHECK PLUGIN OUT_DIR
# Each case writes its files into OUT_DIR (created if need be) and exits 0 when the replay says what it should.
set -u
case=$1 attncheck=$2 plugin=$3 out=$4
root=$(cd "$(dirname "$0")/../.." && pwd)
expect=$root/tools/tests/expect_exit.sh
mkdir -p "$out" && cd "$out" || exit 1
case $case in
  find_then_replay)
    "$expect" 1 'counterexample to Property.' "$attncheck" check --impl "$plugin" --cases 50 --seconds 600 --counterexample "$out/sentinel.replay" &&
      "$expect" 1 'attncheck check: FAIL' "$attncheck" check --replay "$out/sentinel.replay" --trust-replay &&
      "$expect" 0 'no longer fails' "$attncheck" check --replay "$out/sentinel.replay" --impl builtin ;;
  answers_vary)
    "$attncheck" check --impl "$plugin" --cases 400 --seconds 600 --counterexample every_other.replay > /dev/null
    "$attncheck" check --impl "$plugin" --replay every_other.replay --json every_other.json > every_other.txt
    code=$?
    cat every_other.txt
    [ $code -eq 1 ] && grep -q '^answers vary between identical calls: ' every_other.txt && ! grep -q 'no longer fails' every_other.txt &&
      grep -q '"kind": "answers vary"' every_other.json ;;
  policy_kept)
    "$attncheck" check --impl "$plugin" --empty-rows mean --cases 50 --seconds 600 --counterexample kept_policy.replay >/dev/null
    grep -qx 'empty-rows mean' kept_policy.replay &&
      "$attncheck" check --impl "$plugin" --replay kept_policy.replay --json kept_policy.json | tail -1 | grep -q 'under --empty-rows mean' &&
      grep -q '"empty-rows": "mean"' kept_policy.json ;;
  ordinary_leak)
    "$attncheck" check --impl "$plugin" --replay "$root/cli/tests/replays/padded_key_ordinary_value.replay" --json "$out/ordinary_leak.json" \
      > "$out/ordinary_leak.txt"
    grep -q 'it reads keys or values a query may not see' "$out/ordinary_leak.txt" && ! grep -q 'NaN, inf or extreme' "$out/ordinary_leak.txt" &&
      grep -q '"kind": "changed by a forbidden input"' "$out/ordinary_leak.json" ;;
  *) echo "replays.sh: no case $case"; exit 2 ;;
esac
