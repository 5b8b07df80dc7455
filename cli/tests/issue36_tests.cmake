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
add_test(NAME repro.ACommandsFinding COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/repro_of_a_command.sh a_commands_finding ${attncheck} ${ATTNCHECK_PYTHON} ${zeros})
set_tests_properties(repro.ACommandsFinding PROPERTIES FIXTURES_SETUP repro_zeros)
# The pytest file runs the command the user names (ATTNCHECK_REPRO_COMMAND), never the replay
# file's through /bin/sh: without it the test fails saying so, and the file's command (touch PWNED)
# is only a comment; named, the test runs it and fails on a value.
add_test(NAME repro.APytestRunsOnlyTheCommandItIsGiven COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/repro_of_a_command.sh runs_only_the_given_command ${attncheck}
         ${ATTNCHECK_PYTHON} ${zeros})
# Words that are not UTF-8 (byte 0xff in the replay file's name and command, in the command given to
# repro) make Python that compiles, each word a string that encodes back to its bytes (os.fsencode).
add_test(NAME repro.WordsThatAreNotUtf8MakePythonThatCompiles COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/repro_of_a_command.sh words_not_utf8 ${attncheck}
         ${ATTNCHECK_PYTHON} ${zeros} ${kept_call})
set_tests_properties(repro.APytestRunsOnlyTheCommandItIsGiven repro.WordsThatAreNotUtf8MakePythonThatCompiles
                     PROPERTIES FIXTURES_REQUIRED repro_zeros)

# Every subcommand's report on a full stdout is an error (main.cpp): check's verdict too.
add_test(NAME check.VerdictOnAFullDiskIsAnError COMMAND ${expect} 2 "attncheck check: standard output: cannot write"
         bash -c "${attncheck} check --cases 5 --seconds 600 > /dev/full")

# A command that runs one instance at a time (flock -n: a second start fails at once) under the
# default --jobs: the error names --jobs, not only the second start's failure.
add_test(NAME check.ASingleInstanceCommandIsToldOfJobs COMMAND ${expect} 2 "one that runs one at a time needs --jobs 1"
         ${attncheck} check --impl-cmd "flock -n ${out}/single_instance.lock ${child} zeros" --jobs 2 --cases 50 --seconds 600)

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
add_test(NAME check.ASetsidGrandchildEndsWithTheRun COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/a_session_ends_with_the_run.sh ${attncheck} ${ATTNCHECK_PYTHON})

# A leak through ordinary forbidden values (1 and -1: a kernel that adds the padded keys' values)
# is "changed by a forbidden input", a mask ignored or leaking, never "a NaN, inf or extreme".
add_test(NAME check.ALeakOfOrdinaryValuesIsNotCalledPoisoned COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/replays.sh ordinary_leak ${attncheck}
         $<TARGET_FILE:leaks_padded_values> ${out})
