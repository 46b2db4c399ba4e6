# Runs a libFuzzer binary for SECONDS seconds on a fresh copy of the .tile
# files in SEEDS (libFuzzer adds the inputs it finds to its first corpus
# folder; the source tree must not change). Fails when the fuzzer does: a
# crash, a sanitizer report or a round-trip abort, whose input is left in
# WORK/artifacts/.
#   cmake -DFUZZER=... -DSEEDS=... -DDICT=... -DWORK=... -DSECONDS=30 -P run_fuzzer.cmake
foreach(var FUZZER SEEDS DICT WORK SECONDS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_fuzzer.cmake: -D${var}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/corpus" "${WORK}/artifacts")
file(GLOB seeds "${SEEDS}/*.tile")
list(LENGTH seeds seed_count)
if(seed_count EQUAL 0)
  message(FATAL_ERROR "run_fuzzer.cmake: no seeds in ${SEEDS}")
endif()
file(COPY ${seeds} DESTINATION "${WORK}/corpus")
message(STATUS "fuzzing ${FUZZER} for ${SECONDS} s from ${seed_count} seeds")

execute_process(
  COMMAND "${FUZZER}"
    -max_total_time=${SECONDS}
    -timeout=10
    -rss_limit_mb=2048
    -max_len=16384
    -print_final_stats=1
    "-dict=${DICT}"
    "-artifact_prefix=${WORK}/artifacts/"
    "${WORK}/corpus"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(GLOB artifacts "${WORK}/artifacts/*")
  message(FATAL_ERROR "fuzzer failed (exit ${rc}); reproducers: ${artifacts}")
endif()
