#!/usr/bin/env bash
# red_team.sh ATTACK ATTNCHECK SCRATCH PYTHON CXX INCLUDE PLUGINS: one attack of the red-team pass on
# attncheck (issue 23: hostile children, files and disks) and the outcome it must get. The table
# below is the list: each row an attack, then what attncheck must do, in `expect CODE TEXT COMMAND`
# (exit CODE, TEXT in the output, an error one line) and `absent FILE` (nothing the attack named
# ran). ctest runs every row as redteam.ATTACK (cli/tests/CMakeLists.txt reads the names here).
# PLUGINS: the build's folder of test plugins and mutants (build/), for the kernels attacks use.
set -u
attack=$1 attncheck=$2 scratch=$3/$1 python=$4 cxx=$5 include=$6 built=$7
root=$(cd "$(dirname "$0")/../.." && pwd)
child="$python $root/tools/tests/children/misbehaving_child.py"
kept=$root/corpus/regressions/check/mutant_sentinel_1e4.replay  # a kept finding without a failed call
ort_kept=$root/examples/onnxruntime/rows_sum_to_one_f16_overflow.replay  # an adapter's, with its failed call
example=$root/examples/compare
rm -rf "$scratch" && mkdir -p "$scratch" && cd "$scratch" || exit 1

fail() { echo "red_team $attack: $*"; exit 1; }
# expect CODE TEXT COMMAND...: exit CODE within two minutes (never a hang), TEXT in the output, an
# error (2) on one line.
expect() { timeout 120 "$root/tools/tests/expect_exit.sh" "$@" || fail "expected exit $1 and '$2'"; }
absent() { [ ! -e "$1" ] || fail "$1 exists: what the attack named was run"; }
# A replay file of a finding the built-in's planted sentinel bug gives, with its failed call kept.
found() { "$attncheck" check --impl "$built/impl/mutant_sentinel_1e4.so" --cases 50 --seconds 600 --counterexample found.replay >/dev/null
          [ -s found.replay ] || fail "no finding to attack"; }
# with_impl FILE KEY VALUE: FILE with its implementation line replaced by "KEY VALUE", as attacked.replay.
with_impl() { grep -v '^impl' "$1" | awk -v line="$2 $3" 'NR == 2 { print line } { print }' >attacked.replay; }
big_npy() {  # q.npy: a header claiming 2^31 float32 in a sparse file; k, v, out small
  "$python" -c "
import numpy as np
h = np.lib.format.header_data_from_array_1_0(np.zeros((1, 1), np.float32)); h['shape'] = (1, 1, 65536, 32768)
with open('q.npy', 'wb') as f: np.lib.format.write_array_header_1_0(f, h); f.truncate(f.tell() + 4 * 65536 * 32768)"
}
# max_rss_mb COMMAND...: the largest resident memory of COMMAND, in MB.
max_rss_mb() { "$python" -c "import resource, subprocess, sys; subprocess.run(sys.argv[1:], capture_output=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)" "$@"; }

case $attack in
  # ---- Data that runs code ----
  replay_names_a_command)
    with_impl "$kept" impl-cmd "touch $scratch/PWNED"
    expect 2 "which attncheck does not run because a file names it" "$attncheck" check --replay attacked.replay
    absent PWNED ;;
  replay_names_a_plugin)  # a plugin whose loading alone would create PWNED
    printf '__attribute__((constructor)) static void pwn(void) { extern int creat(const char*, int); creat("%s/PWNED", 0644); }\n' "$scratch" >evil.c
    cc -shared -fPIC -o evil.so evil.c || fail "cannot build the plugin"
    with_impl "$kept" impl "$scratch/evil.so"
    expect 2 "which attncheck does not run because a file names it" "$attncheck" check --replay attacked.replay
    absent PWNED ;;
  repro_of_a_file_without_its_call)
    with_impl "$kept" impl-cmd "touch $scratch/PWNED"
    expect 2 "which attncheck does not run because a file names it" "$attncheck" repro attacked.replay
    absent PWNED ;;
  repro_runs_nothing)
    found && with_impl found.replay impl-cmd "touch $scratch/PWNED"
    expect 0 "a pytest of Property." "$attncheck" repro attacked.replay --out test_found.py
    absent PWNED ;;
  standalone_of_a_quoted_command)  # the script takes a command's words; quoting is the shell's, refused
    with_impl "$ort_kept" impl-cmd "python3 -m attncheck.adapters.onnxruntime '; touch PWNED'"
    expect 2 "is quoted or escaped for the shell" "$attncheck" repro attacked.replay --standalone yes
    absent PWNED ;;
  standalone_of_shell_words)  # words the shell would run are only the adapter's options, as strings
    with_impl "$ort_kept" impl-cmd "python3 -m attncheck.adapters.onnxruntime ;touch PWNED"
    expect 0 "a standalone Python script of Property." "$attncheck" repro attacked.replay --standalone yes --out s.py
    grep -qF "ADAPTER_OPTIONS = [\";touch\", \"PWNED\"]" s.py || fail "the words are not the options' strings"
    absent PWNED ;;
  standalone_of_a_hostile_why)  # the reason a file gives closes a docstring and calls os.system()
    sed 's/^failed-call-why .*/failed-call-why x"""; __import__("os").system("touch PWNED"); """/' "$ort_kept" >attacked.replay
    expect 0 "a standalone Python script of Property." "$attncheck" repro attacked.replay --standalone yes --out s.py
    "$python" -I s.py >/dev/null 2>&1  # no onnxruntime in this python: the script stops at its import
    absent PWNED ;;
  standalone_of_no_adapter)
    with_impl "$ort_kept" impl-cmd "touch PWNED"
    expect 2 "runs no adapter" "$attncheck" repro attacked.replay --standalone yes
    absent PWNED ;;
  repro_of_a_hostile_plugin_path)  # the path closes the C++ string and calls system()
    found && with_impl found.replay impl "\",0);system(\"touch INJECTED\");(\""
    expect 0 "a GoogleTest of Property." "$attncheck" repro attacked.replay --out test_found.cpp
    "$cxx" -std=c++17 test_found.cpp -I "$include" -lgtest -lgtest_main -ldl -pthread -o test_found || fail "does not compile"
    ./test_found >test.txt 2>&1 && fail "passed with no plugin to load"
    grep -qF "touch INJECTED" test.txt || { cat test.txt; fail "did not try to load the hostile path as a path"; }
    absent INJECTED ;;
  repro_of_a_hostile_command)  # the command closes a Python string and calls os.system(); the test never takes it
    hostile='"); import os; os.system("touch INJECTED"); ("'
    found && with_impl found.replay impl-cmd "$hostile"
    expect 0 "a pytest of Property." "$attncheck" repro attacked.replay --out test_found.py
    env -u ATTNCHECK_REPRO_COMMAND PYTHONPATH=$root/python "$python" -c "import runpy; assert runpy.run_path('test_found.py')['COMMAND'] is None" ||
      fail "the test takes the file's command"
    absent INJECTED ;;
  impl_cmd_with_a_line_break)  # it would split the replay file's line and name another implementation
    expect 2 "holds a line break" "$attncheck" check --impl-cmd "$child zeros
impl builtin" ;;
  command_forges_a_fault)
    expect 1 "a FALT frame, which only attncheck's plugin host sends" "$attncheck" check --impl-cmd "$child forges_fault" --cases 50 --seconds 600 ;;
  command_forges_a_mode)
    expect 1 "a MODE frame, which only attncheck's plugin host sends" "$attncheck" check --impl-cmd "$child forges_mode" --cases 50 --seconds 600 ;;

  # ---- Hangs and processes ----
  command_stops_reading)  # a case of 256 KiB: more than the pipe holds, so sending it needs the child to read
    "$python" -c "
words = lambda n: ' '.join(['3f800000'] * n)
print('attncheck-replay 2\nproperty AgreesWithOracleInFloat\nimpl builtin\nempty-rows zero\ncase float32 1')
print('shape B 1 H 4 H_kv 4 Tq 256 Tk 16 dk 64 dv 8\noptions causal none scale 0x0p+0 empty-rows zero\nmix qk normal, v normal')
print('q', words(4 * 256 * 64)); print('k', words(4 * 16 * 64)); print('v', words(4 * 16 * 8)); print('end\nchoices')" >large.replay
    expect 1 "hung: no answer, and no CPU time used for 1 s (blocked) while reading its problem" "$attncheck" check --impl-cmd "$child stops_reading" --replay large.replay --case-timeout 1 ;;
  checker_killed)  # SIGKILL, which no handler sees: nothing the command started outlives the checker
    "$root/tools/tests/children/stopped_checker_takes_its_child.sh" "$attncheck" "$python" KILL || fail "orphaned" ;;
  command_start_text_paints_the_terminal)
    expect 2 "\\x1b[2J\\x1b[31mcannot start" "$attncheck" check --impl-cmd "$child hostile_fail" --seconds 5
    "$attncheck" check --impl-cmd "$child hostile_fail" --seconds 5 2>&1 | grep -q $'\x1b' && fail "an escape byte reached the terminal" ;;

  # ---- Inputs that take memory or time before they are checked ----
  fifo_as_a_tensor)
    mkfifo q.npy
    expect 2 "q.npy: cannot open (not a regular file)" "$attncheck" compare --q q.npy --k "$example/k.npy" --v "$example/v.npy" --out "$example/out.npy" ;;
  fifo_as_a_replay)
    mkfifo f.replay
    expect 2 "f.replay: cannot open the replay file (not a regular file)" "$attncheck" check --impl builtin --replay f.replay ;;
  device_as_a_replay)
    expect 2 "/dev/zero: cannot open the replay file (not a regular file)" "$attncheck" check --impl builtin --replay /dev/zero ;;
  replay_past_any_case)
    truncate -s 3G big.replay
    expect 2 "larger than any replay file" "$attncheck" check --impl builtin --replay big.replay ;;
  header_claims_2e31_elements)  # shapes are checked on the headers, before any data is read
    big_npy
    expect 2 "shapes do not fit" "$attncheck" compare --q q.npy --k "$example/k.npy" --v "$example/v.npy" --out "$example/out.npy"
    rss=$(max_rss_mb "$attncheck" compare --q q.npy --k "$example/k.npy" --v "$example/v.npy" --out "$example/out.npy")
    [ "$rss" -lt 300 ] || fail "took $rss MB before refusing" ;;

  # ---- Verdicts over nothing, or over the wrong problem ----
  nothing_checkable)  # q and k of 3e38 put every output outside the checkable range: no verdict, exit 3
    "$python" -c "import numpy as np; np.save('q.npy', np.full((1,1,2,4), 3e38, np.float32)); np.save('k.npy', np.full((1,1,3,4), 3e38, np.float32)); np.save('v.npy', np.ones((1,1,3,2), np.float32)); np.save('out.npy', np.ones((1,1,2,2), np.float32))"
    expect 3 "NO VERDICT: 0 out elements checked" "$attncheck" compare --q q.npy --k k.npy --v v.npy --out out.npy ;;
  replayed_window_past_int32)  # the ABI carries int32: 2^32 would reach the kernel as 0
    sed '/^options/a window 4294967296 4294967296' "$kept" >wide.replay
    expect 2 "past 2^31 - 1" "$attncheck" check --impl builtin --replay wide.replay ;;
  replay_format_1_header_over_a_case)
    sed '1s/ 2$/ 1/' "$kept" >damaged.replay
    expect 2 "a format-1 file holds no case" "$attncheck" check --impl builtin --replay damaged.replay ;;
  replay_without_its_options)
    sed '/^options/d' "$kept" >damaged.replay
    expect 2 "no options line" "$attncheck" check --impl builtin --replay damaged.replay ;;
  replay_without_its_impl)
    sed '/^impl /d' "$kept" >damaged.replay
    expect 2 "no 'impl' line" "$attncheck" check --impl builtin --replay damaged.replay ;;
  replay_with_an_unknown_line)
    sed '2a run rm -rf ~' "$kept" >damaged.replay
    expect 2 "an unknown line 'run rm -rf ~'" "$attncheck" check --impl builtin --replay damaged.replay ;;
  unknown_capability_bits)
    expect 0 "claimed bits this attncheck does not know, ignored: 0x7fe00000" "$attncheck" check --impl "$built/tools/tests/claims_unknown_bits.so" --cases 45 --seconds 600 ;;

  # ---- Output that is lost in silence ----
  replay_on_a_full_disk)  # /dev/full is no regular file: refused before the campaign (a disk that fills: nothing_lost.sh)
    expect 2 "--counterexample /dev/full: not a regular file" "$attncheck" check --impl "$built/impl/mutant_sentinel_1e4.so" --seconds 10 --counterexample /dev/full ;;
  report_into_a_missing_folder)  # refused before the campaign, not after it
    expect 2 "--json /nonexistent/folder/report.json: cannot write there" "$attncheck" check --impl builtin --seconds 600 --json /nonexistent/folder/report.json ;;
  *) fail "no such attack" ;;
esac
echo "red_team $attack: held"
