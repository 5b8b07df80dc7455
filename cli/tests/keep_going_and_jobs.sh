#!/usr/bin/env bash
# How many findings one run reports, with --keep-going and with --jobs (issue 24), one case per ctest
# (cli/tests/CMakeLists.txt):
#   one_hang                  check.KeepGoingKeepsOneHang: with --keep-going, a kernel that hangs at Tk 7
#                             (PLUGIN, hangs_at_tk7) is one finding, "hung", not one per property
#   every_bug                 check.KeepGoingReportsEveryBug: a kernel with three planted bugs of three kinds
#                             (PLUGIN, three_bugs_plugin) gets three findings, one each, with a replay file each,
#                             in the JSON and the JUnit (keep_going_findings.py says what each must hold)
#   first_stops               check.WithoutKeepGoingTheFirstFindingStops: without --keep-going the same kernel
#                             gets one finding, the run's finding
#   jobs_share_one_sequence   check.JobsShareOneSequence: --jobs 1 and --jobs 3 make the same runs of each
#                             property (PLUGIN, plain_f32) for the same --cases CASES
#   jobs_report_first_finding check.JobsReportTheSequencesFirstFinding: --jobs 1 and --jobs 2 report the same
#                             first finding (PLUGIN, the no_scale mutant)
# Usage: keep_going_and_jobs.sh CASE ATTNCHECK PYTHON PLUGIN OUT_DIR [CASES]
# CASES (every_bug, jobs_share_one_sequence): the campaign's --cases. Each case writes its files into
# OUT_DIR (created if need be) and exits 0 when the findings are as they should be.
set -u
case=$1 attncheck=$2 python=$3 plugin=$4 out=$5 cases=${6-}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out" && cd "$out" || exit 1
case $case in
  one_hang)
    "$attncheck" check --impl "$plugin" --keep-going yes --counterexample-dir hang_tk7 --cases 100 --seconds 600 --json hang_tk7.json \
      > /dev/null
    "$python" -c "
import json
d = json.load(open('hang_tk7.json'))
kinds = [f['kind'] for f in d['findings']]
assert kinds == ['hung'], kinds" ;;
  every_bug)
    rm -rf keep_going &&
      "$attncheck" check --impl "$plugin" --jobs 2 --keep-going yes --counterexample-dir keep_going --cases "$cases" --seconds 600 \
        --shrink-seconds 30 --json keep_going.json --junit keep_going.xml > keep_going.txt
    code=$?
    cat keep_going.txt
    [ $code -eq 1 ] && "$python" "$here/keep_going_findings.py" keep_going.json keep_going.xml && grep -q '^findings: ' keep_going.txt ;;
  first_stops)
    "$attncheck" check --impl "$plugin" --cases 50 --seconds 600 --json first.json --counterexample first.replay > /dev/null
    "$python" -c "
import json
d = json.load(open('first.json'))
assert len(d['findings']) == 1 and d['finding'] == d['findings'][0], d['findings']" ;;
  jobs_share_one_sequence)
    "$attncheck" check --impl "$plugin" --jobs 1 --cases "$cases" --seconds 600 --json jobs1.json > /dev/null &&
      "$attncheck" check --impl "$plugin" --jobs 3 --cases "$cases" --seconds 600 --json jobs3.json > /dev/null &&
      "$python" -c "
import json, sys
a, b = (json.load(open(f)) for f in ('jobs1.json', 'jobs3.json'))
assert a['per_property'] == b['per_property'] and b['cases'] == int(sys.argv[1]), (a['per_property'], b['per_property'])" "$cases" ;;
  jobs_report_first_finding)
    for jobs in 1 2; do
      "$attncheck" check --impl "$plugin" --jobs $jobs --cases 50 --seconds 600 --shrink-seconds 0 --counterexample jobs.replay --json "first$jobs.json" \
        > /dev/null
    done
    "$python" -c "
import json
a, b = (json.load(open(f))['finding'] for f in ('first1.json', 'first2.json'))
assert a['property'] == b['property'] and a['message'] == b['message'], (a, b)" ;;
  *) echo "keep_going_and_jobs.sh: no case $case"; exit 2 ;;
esac
