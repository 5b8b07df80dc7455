# Issue 36: reports that stay true on bytes, full outputs and replay files (see each test comment).

# A file or table lost to a full disk is one line on stderr and exit 2, never exit 0 having written
# nothing: features (the table the Python client's _features.py is made from) and repro.
set(kept_call ${PROJECT_SOURCE_DIR}/examples/onnxruntime/rows_sum_to_one_f16_overflow.replay)  # an adapter's, its failed call kept
add_test(NAME features.PythonModuleOnAFullDiskIsAnError COMMAND ${expect} 2 "attncheck features: standard output: cannot write"
         bash -c "${attncheck} features --python yes > /dev/full")
add_test(NAME features.TableOnAFullDiskIsAnError COMMAND ${expect} 2 "attncheck features: standard output: cannot write"
         bash -c "${attncheck} features > /dev/full")
add_test(NAME repro.PytestOnAFullDiskIsAnError COMMAND ${expect} 2 "attncheck repro: standard output: cannot write"
         bash -c "${attncheck} repro ${kept_call} > /dev/full")
add_test(NAME repro.StandaloneOnAFullDiskIsAnError COMMAND ${expect} 2 "attncheck repro: standard output: cannot write"
         bash -c "${attncheck} repro ${kept_call} --standalone yes > /dev/full")

# A finding of a command (the misbehaving child's zeros), for the pytest files below.
set(zeros ${out}/repro_zeros)
add_test(NAME repro.ACommandsFinding COMMAND bash -c
         "rm -rf ${zeros} && mkdir -p ${zeros} && ${attncheck} check --impl-cmd '${child} zeros' --seconds 10 --shrink-seconds 1 --counterexample ${zeros}/zeros.replay > /dev/null; grep -q '^failed-call-why ' ${zeros}/zeros.replay")
set_tests_properties(repro.ACommandsFinding PROPERTIES FIXTURES_SETUP repro_zeros)
# The pytest file runs the command the user names (ATTNCHECK_REPRO_COMMAND), never the replay
# file's through /bin/sh: without it the test fails saying so, and the file's command (touch PWNED)
# is only a comment; named, the test runs it and fails on a value.
add_test(NAME repro.APytestRunsOnlyTheCommandItIsGiven COMMAND bash -c
         "cd ${zeros} && rm -f PWNED && sed 's|^impl-cmd .*|impl-cmd touch ${zeros}/PWNED|' zeros.replay > pwn.replay && ${attncheck} repro pwn.replay --out test_pwn.py && grep -qx '# The replay file.s command, run only when you name it: touch ${zeros}/PWNED' test_pwn.py || exit 1; export PYTHONPATH=${PROJECT_SOURCE_DIR}/python PYTHONDONTWRITEBYTECODE=1; ${ATTNCHECK_PYTHON} -m pytest -q -p no:cacheprovider test_pwn.py > unnamed.txt; cat unnamed.txt; grep -q 'name the command to test: ATTNCHECK_REPRO_COMMAND' unnamed.txt && [ ! -e PWNED ] && ATTNCHECK_REPRO_COMMAND='${child} zeros' ${ATTNCHECK_PYTHON} -m pytest -q -p no:cacheprovider test_pwn.py > named.txt; cat named.txt; grep -q 'AssertionError: out\\[' named.txt && [ ! -e PWNED ]")
# Words that are not UTF-8 (byte 0xff in the replay file's name and command, in the command given to
# repro) make Python that compiles, each word a string that encodes back to its bytes (os.fsencode).
add_test(NAME repro.WordsThatAreNotUtf8MakePythonThatCompiles COMMAND bash -c
         "cd ${zeros} && ff=$(printf '\\377') && sed \"s|^impl-cmd .*|impl-cmd python3 -m attncheck.adapters.onnxruntime --x $ff|\" ${kept_call} > w$ff.replay && ${attncheck} repro w$ff.replay --standalone yes --out standalone.py && ${attncheck} repro zeros.replay --impl-cmd \"${child} zeros $ff\" --out test_ff.py && ${ATTNCHECK_PYTHON} -m py_compile standalone.py test_ff.py && ${ATTNCHECK_PYTHON} -c \"import ast, os; v = lambda f, name: next(n.value for n in ast.parse(open(f, 'rb').read()).body if isinstance(n, ast.Assign) and getattr(n.targets[0], 'id', '') == name); o = ast.literal_eval(v('standalone.py', 'ADAPTER_OPTIONS')); c = ast.literal_eval(v('test_ff.py', 'COMMAND').args[1]); assert [os.fsencode(w) for w in o] == [b'--x', b'\\xff'], o; assert os.fsencode(c).endswith(b' zeros \\xff'), c\"")
set_tests_properties(repro.APytestRunsOnlyTheCommandItIsGiven repro.WordsThatAreNotUtf8MakePythonThatCompiles
                     PROPERTIES FIXTURES_REQUIRED repro_zeros)

# Every subcommand's report on a full stdout is an error (main.cpp): check's verdict too.
add_test(NAME check.VerdictOnAFullDiskIsAnError COMMAND ${expect} 2 "attncheck check: standard output: cannot write"
         bash -c "${attncheck} check --cases 5 --seconds 600 > /dev/full")

# A command that runs one instance at a time (flock -n: a second start fails at once) under the
# default --jobs: the error names --jobs, not only the second start's failure.
add_test(NAME check.ASingleInstanceCommandIsToldOfJobs COMMAND ${expect} 2 "one that runs one at a time needs --jobs 1"
         ${attncheck} check --impl-cmd "flock -n ${out}/single_instance.lock ${child} zeros" --jobs 2 --seconds 20)

# A kernel that writes the keep mask (dropout_mask) must write every byte 0 or 1, a forbidden key's
# too (docs/protocol.md): the keep_mask_unwritten_at_forbidden_keys mutant is flagged.
add_test(NAME check.KeepMaskBytesOfForbiddenKeysAreChecked COMMAND ${expect} 1 "of a forbidden key is 255 (never written), not 0 or 1"
         ${attncheck} check --impl $<TARGET_FILE:mutant_keep_mask_unwritten_at_forbidden_keys> --cases 400 --seconds 600)

# Claims a feature cannot use without its base (the keep mask without dropout, the layer's weights
# without the layer): claimed, not checked, never listed as checked.
add_test(NAME check.AFeatureWithoutItsBaseIsNotChecked COMMAND ${expect} 0 "claimed, not checked: dropout keep mask"
         ${attncheck} check --impl $<TARGET_FILE:claims_keep_mask_alone> --cases 100 --seconds 600)

# Under --empty-rows mean, a row emptied by a -inf bias (key lengths forbid key 1, the bias of key
# 0 is -inf) is the mean of V by its policy: no "forbidden key 1 has weight 0.5".
add_test(NAME check.Policy.MeanRowEmptiedByABiasIsNoFinding COMMAND ${expect} 0 "no longer fails"
         ${attncheck} check --impl $<TARGET_FILE:policy_mean_of_v> --empty-rows mean
         --replay ${CMAKE_CURRENT_SOURCE_DIR}/replays/mean_row_emptied_by_bias.replay)

# What a command starts in a session of its own (setsid) ends with it: the keeper is a subreaper
# and the checker kills the command's descendants, not only its process group.
add_test(NAME check.ASetsidGrandchildEndsWithTheRun COMMAND bash -c
         "${attncheck} check --impl-cmd '${child} setsid_grandchild 3017' --cases 5 --seconds 60 > /dev/null; sleep 0.5; ! pgrep -f '^sleep 3017$' || { pkill -f '^sleep 3017$'; echo 'sleep 3017 outlived the run'; false; }")

# A leak through ordinary forbidden values (1 and -1: a kernel that adds the padded keys' values)
# is "changed by a forbidden input", a mask ignored or leaking, never "a NaN, inf or extreme".
add_test(NAME check.ALeakOfOrdinaryValuesIsNotCalledPoisoned COMMAND bash -c
         "${attncheck} check --impl $<TARGET_FILE:leaks_padded_values> --replay ${CMAKE_CURRENT_SOURCE_DIR}/replays/padded_key_ordinary_value.replay --json ${out}/ordinary_leak.json > ${out}/ordinary_leak.txt; grep -q 'it reads keys or values a query may not see' ${out}/ordinary_leak.txt && ! grep -q 'NaN, inf or extreme' ${out}/ordinary_leak.txt && grep -q '\"kind\": \"changed by a forbidden input\"' ${out}/ordinary_leak.json")
