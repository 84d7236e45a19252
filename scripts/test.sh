#!/usr/bin/env bash
# The whole test suite: installs what is needed, then
#   1. builds (with GPU code when nvcc is found) and runs every test;
#   2. rebuilds with AddressSanitizer + UndefinedBehaviorSanitizer and runs
#      every test again, except those whose subject is not our C++ code under
#      the sanitizers (ASAN_SKIP below: stage 1 ran them);
#   3. builds the threaded code's tests with ThreadSanitizer (tests/tsan/:
#      work queue, informers, leader election, Event recorder, token rotation,
#      TCP store, supervisor) and runs them; PACER_TSAN_STAGE=0 skips it;
#   4. fuzzes the document parsers with libFuzzer for a bounded time
#      (PACER_FUZZ_SECONDS, default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's header says how long the run has taken so far: CI's budget is
# an hour on 2 cores, and the log then shows which stage grew.
stage() { printf '== %s (at %dm%02ds)\n' "$1" $((SECONDS / 60)) $((SECONDS % 60)); }
scripts/install-deps.sh
jobs=$(nproc)

stage "build and test"
# Line tables only (-g1, here and in the ASan build): a failure's stack trace
# still names file and line, and at -O2 the build takes about a quarter less
# time than with full debug information (-g: variable locations).
scripts/build.sh -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
ctest --test-dir build --output-on-failure -j"$jobs"

stage "sanitizers (ASan + UBSan)"
# A unity build: each target's files compile in batches of 16, so shared
# headers and their templates compile once a batch (about 10 minutes here
# instead of 17). Stage 1 built file by file, so includes are checked there.
# File-scope names must be unique within a target (docs/development.md).
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g1" -DPACER_SANITIZE=ON \
  -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 \
  -DPACER_BUILD_BENCHMARKS=OFF -DPACER_ENABLE_CUDA=OFF >/dev/null
cmake --build build-asan -j"$jobs"
# tests/lsan.supp: leaks inside cpprestsdk itself (not instrumented), not ours.
# Not again under ASan (stage 1 ran them): the Dockerfile checks,
# promtool's rule tests and gpu-validate.sh's (stub binaries) run no code of
# ours, and progress_line_tmux checks
# the terminal rendering of `pacer run` (two 60-step runs, ~75 s unsanitized)
# whose code LocalRunTest and ProgressLineTest run under ASan anyway.
ASAN_SKIP='^(docker_.*|monitoring_rules_.*|progress_line_tmux|scripts_gpu_validate)$'
# handle_abort, handle_sigill: ASan's stack for an abort() or SIGILL too
# (off by default), as tests/crash_trace.cc prints one in the other stages.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:handle_abort=1:handle_sigill=1 UBSAN_OPTIONS=print_stacktrace=1 \
  LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp" \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -E "$ASAN_SKIP"

if [[ "${PACER_TSAN_STAGE:-1}" != 0 ]]; then
  stage "ThreadSanitizer (the threaded code)"
  # Two small test binaries (tests/tsan/CMakeLists.txt), not the whole project.
  # -O1 -g1 (line tables for the reports): 40% less compile time than -O2 -g.
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DPACER_TSAN=ON -DPACER_BUILD_BENCHMARKS=OFF -DPACER_ENABLE_CUDA=OFF >/dev/null
  cmake --build build-tsan --target tsan_threads_tests tsan_kube_tests -j"$jobs"
  # tests/tsan/tsan.supp: reports inside uninstrumented libraries, not ours.
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan/tsan.supp" \
    ctest --test-dir build-tsan --output-on-failure -j"$jobs" -R '^tsan[.]'
fi

stage "fuzz the parsers (libFuzzer)"
cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPACER_FUZZ=ON -DPACER_BUILD_BENCHMARKS=OFF -DPACER_ENABLE_CUDA=OFF -DPACER_WERROR=OFF >/dev/null
# (-Werror is enforced by the GCC builds above; clang 14 warns differently.)
cmake --build build-fuzz --target job_parser_fuzz -j"$jobs"
corpus=$(mktemp -d)
cp tests/fuzz/corpus/* "$corpus"/
build-fuzz/tests/job_parser_fuzz -max_total_time="${PACER_FUZZ_SECONDS:-60}" -max_len=65536 \
  -print_final_stats=1 "$corpus" 2>&1 | tail -n 5
rm -rf "$corpus"
stage "all tests passed"
