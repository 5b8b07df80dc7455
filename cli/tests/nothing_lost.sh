#!/usr/bin/env bash
# What a run found is never lost (issue 36), one case per ctest:
#   interrupted  SIGINT to the checker and its workers mid-run: exit 130, replay files, JSON, JUnit
#                and HTML written and marked interrupted
#   terminated   SIGTERM to the checker alone (--jobs 2): the same, its workers told
#   full_disk    no byte can be written to a file (ulimit -f 0): each output said on stderr, the
#                finding printed in full, exit 2
#   not_a_folder --counterexample-dir naming a file, and --json a FIFO: refused before the campaign
#   not_utf8     a path with byte 0xff: the JSON and JUnit are written (U+FFFD), exit 1
#   earlier_runs a later run moves an earlier run's replay files aside, and says so
# Usage: nothing_lost.sh CASE ATTNCHECK THREE_BUGS_PLUGIN PYTHON OUT_DIR
set -u
case=$1 attncheck=$2 plugin=$3 python=$4 out=$5/nothing_lost_$1
rm -rf "$out" && mkdir -p "$out" && cd "$out" || exit 1
fail() { echo "FAILED: $*"; for f in *.txt *.err; do [ -f "$f" ] && { echo "--- $f"; cat "$f"; }; done; exit 1; }
interrupted_outputs() {
  [ "$1" -eq 130 ] || fail "exit $1, not 130"
  grep -q "^attncheck check: INTERRUPTED (FAIL so far)" run.txt || fail "no INTERRUPTED verdict"
  "$python" -c "
import json, os, xml.etree.ElementTree as E
d = json.load(open('run.json'))
assert d['interrupted'] is True and d['verdict'].startswith('INTERRUPTED'), d['verdict']
assert d['findings'] and all(os.path.exists(f['replay']) for f in d['findings']), d['findings']
assert int(E.parse('run.xml').getroot().find('testsuite').get('failures')) == len(d['findings'])
assert 'INTERRUPTED' in open('run.html').read()
" || fail "outputs not written whole"
}
run_campaign() {  # in the background, its pid in $checker
  "$attncheck" check --impl "$plugin" --keep-going yes --counterexample-dir found --seconds 300 --shrink-seconds 60 \
    --json run.json --junit run.xml --html run.html "$@" > run.txt 2> run.err &
  checker=$!
  # Until it has done the work its first findings take (0.7 CPU-seconds), 7 times over, judged by
  # CPU time, not by the clock: under load, 10 s of waiting once ended before the workers had
  # loaded the plugin. It would run for 300 s.
  for _ in $(seq 1200); do [ "$(tree_cpu_seconds)" -ge 5 ] && break; sleep 0.5; done
}
tree_cpu_seconds() {  # the CPU seconds the checker and its live descendants have used
  ps -eo pid=,ppid=,times= | awk -v root="$checker" '{ up[$1] = $2; cpu[$1] = $3 }
    END { for (p in up) { q = p; while (q != root && q in up && q > 1) q = up[q]; if (q == root) sum += cpu[p] } print sum + 0 }'
}
case $case in
  interrupted)
    run_campaign --jobs 2
    pkill -INT -P $checker; kill -INT $checker  # as the terminal's Ctrl-C: the checker and its workers (not its kernels)
    wait $checker
    interrupted_outputs $? ;;
  terminated)
    run_campaign --jobs 2
    kill -TERM $checker
    wait $checker
    interrupted_outputs $? ;;
  full_disk)
    # stdout and stderr through a pipe: as files, under ulimit -f 0 they could hold nothing.
    (trap '' XFSZ; ulimit -f 0; exec "$attncheck" check --impl "$plugin" --cases 200 --seconds 600 --counterexample full.replay \
      --json full.json --junit full.xml) 2>&1 | cat > run.txt
    code=${PIPESTATUS[0]}
    [ "$code" -eq 2 ] || fail "exit $code, not 2"
    for f in full.replay full.json full.xml; do grep -q "^attncheck check: $f: cannot write" run.txt || fail "$f not said"; done
    grep -q "^counterexample to Property\." run.txt && grep -q "could not be written; the case is the one above" run.txt &&
      grep -q "^attncheck check: FAIL" run.txt || fail "the finding not printed in full" ;;
  not_a_folder)
    : > a_file && mkfifo fifo
    "$attncheck" check --impl "$plugin" --keep-going yes --counterexample-dir a_file > dir.txt 2>&1
    [ $? -eq 2 ] && grep -q "counterexample-dir a_file: not a folder" dir.txt || fail "a file taken for a folder"
    timeout 20 "$attncheck" check --impl "$plugin" --json fifo > fifo.txt 2>&1
    [ $? -eq 2 ] && grep -q -- "--json fifo: not a regular file" fifo.txt || fail "a FIFO taken for a file" ;;
  not_utf8)
    odd=$(printf 'odd\377dir') && mkdir "$odd" && cp "$plugin" "$odd/kernel.so"
    "$attncheck" check --impl "$odd/kernel.so" --cases 200 --seconds 600 --counterexample "$odd/x.replay" --json run.json \
      --junit run.xml > run.txt 2> run.err
    code=$?
    [ $code -eq 1 ] || fail "exit $code, not 1"
    "$python" -c "
import json, xml.etree.ElementTree as E
d = json.load(open('run.json'))
assert d['impl'] == 'odd\ufffddir/kernel.so' and d['verdict'] == 'FAIL', d['impl']
E.parse('run.xml')" || fail "the JSON or JUnit not written" ;;
  earlier_runs)
    mkdir found && echo "attncheck-replay 2" > found/Old.wrong-value.float32.replay
    "$attncheck" check --impl "$plugin" --keep-going yes --counterexample-dir found --cases 30 --seconds 600 > run.txt
    grep -q "^replay files of earlier runs moved to found/earlier-runs: 1$" run.txt && [ -f found/earlier-runs/Old.wrong-value.float32.replay ] &&
      [ ! -e found/Old.wrong-value.float32.replay ] || fail "an earlier run's file left among this run's" ;;
  *) fail "no case $case" ;;
esac
echo "$case: as it should be"
