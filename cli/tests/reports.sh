#!/usr/bin/env bash
# What check's reports say (the summary, JSON, HTML and JUnit; issues 15 and 24), one case per ctest
# (cli/tests/CMakeLists.txt):
#   fails_only_with            check.FindingSaysWhatItFailsOnlyWith: a bf16 kernel pairing grouped heads wrongly
#                              (PLUGIN) says the one feature it fails only with (grouped KV heads), and its
#                              values shrink to small integers
#   error_bound                check.TheReportedErrorBoundIsTheFindings: the summary's largest error/bound is the
#                              finding's: "inf" for a wrong special value (PLUGIN, the sentinel_1e4 mutant), the
#                              same finite number in the summary and the JSON for a bound failure (PLUGIN2, the
#                              head_dim_tail_dropped mutant); error_bound_is_the_findings.py says what each holds
#   finding_as_html_junit_json report.FindingWritesHtmlJunitJson: a finding (PLUGIN, the online_no_rescale mutant,
#                              in f16) written as HTML, JUnit and JSON at once, for the tests that read them
#   keep_going_html            report.KeepGoingHtmlIndexesEveryFinding: --keep-going's HTML (PLUGIN, three_bugs_plugin)
#                              indexes its three findings, each section with its heatmaps, no id twice on the
#                              page, and the page renders in chromium with no console message (html_in_browser.py)
#   pass_as_html_junit         report.PassWritesHtmlAndJunit: a pass (PLUGIN, the built-in, --cases CASES) written
#                              as HTML (verdict PASS, the properties, no heatmap) and JUnit
# Usage: reports.sh CASE ATTNCHECK PYTHON OUT_DIR PLUGIN [PLUGIN2 | CASES]
# PLUGIN2 for error_bound, CASES for pass_as_html_junit. Each case writes its files into OUT_DIR (created if
# need be) and exits 0 when the reports say what they should.
set -u
case=$1 attncheck=$2 python=$3 out=$4 plugin=$5 extra=${6-}
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/cli/tests
expect=$root/tools/tests/expect_exit.sh
mkdir -p "$out" && cd "$out" || exit 1
case $case in
  fails_only_with)
    "$attncheck" check --impl "$plugin" --cases 50 --seconds 600 --counterexample "$out/gqa_needs.replay" > "$out/gqa_needs.txt"
    cat "$out/gqa_needs.txt"
    grep -qx 'fails only with: grouped KV heads' "$out/gqa_needs.txt" && grep -qxE '  v:( -?[0-9])+' "$out/gqa_needs.txt" ;;
  error_bound)
    "$attncheck" check --impl "$plugin" --cases 400 --seconds 600 --counterexample ratio.replay --json inf.json | tail -1 |
      grep -q 'largest error/bound inf$' &&
      "$attncheck" check --impl "$extra" --cases 400 --seconds 600 --counterexample ratio.replay --json finite.json > finite.txt
    "$python" "$here/error_bound_is_the_findings.py" inf.json finite.json finite.txt ;;
  finding_as_html_junit_json)
    "$expect" 1 'counterexample to Property.' "$attncheck" check --impl "$plugin" --dtype f16 --cases 50 --seconds 600 \
      --counterexample "$out/online_no_rescale.replay" --html "$out/online_no_rescale.html" --junit "$out/online_no_rescale.xml" \
      --json "$out/online_no_rescale.json" ;;
  keep_going_html)
    "$attncheck" check --impl "$plugin" --keep-going yes --counterexample-dir keep_going_html --cases 100 --seconds 600 --shrink-seconds 3 \
      --html keep_going.html > /dev/null
    grep -q 'id="findings"' keep_going.html && [ "$(grep -o 'href="#finding-[0-9]"' keep_going.html | wc -l)" -eq 3 ] &&
      grep -q 'id="heatmap-mask-3"' keep_going.html && [ "$(grep -o 'id="[a-z0-9-]*"' keep_going.html | sort | uniq -d | wc -l)" -eq 0 ] &&
      "$python" "$here/html_in_browser.py" keep_going.html keep_going.png ;;
  pass_as_html_junit)
    "$expect" 0 'attncheck check: PASS' "$attncheck" check --impl "$plugin" --cases "$extra" --seconds 600 --html "$out/builtin.html" \
      --junit "$out/builtin.xml" &&
      grep -q 'id="verdict">PASS<' "$out/builtin.html" && grep -q 'id="properties"' "$out/builtin.html" &&
      ! grep -q 'class="heatmap"' "$out/builtin.html" ;;
  *) echo "reports.sh: no case $case"; exit 2 ;;
esac
