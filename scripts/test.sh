#!/usr/bin/env bash
# The whole test suite: installs what is needed, then
#   1. builds (with GPU code when nvcc is found) and runs every test;
#   2. rebuilds with AddressSanitizer + UndefinedBehaviorSanitizer and runs
#      every test again;
#   3. fuzzes the document parsers with libFuzzer for a bounded time
#      (PACER_FUZZ_SECONDS, default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)

echo "== build and test"
scripts/build.sh
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== sanitizers (ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPACER_SANITIZE=ON \
  -DPACER_BUILD_BENCHMARKS=OFF -DPACER_ENABLE_CUDA=OFF >/dev/null
cmake --build build-asan -j"$jobs"
# tests/lsan.supp: leaks inside cpprestsdk itself (not instrumented), not ours.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp" \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"

echo "== fuzz the parsers (libFuzzer)"
cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPACER_FUZZ=ON -DPACER_BUILD_BENCHMARKS=OFF -DPACER_ENABLE_CUDA=OFF -DPACER_WERROR=OFF >/dev/null
# (-Werror is enforced by the GCC builds above; clang 14 warns differently.)
cmake --build build-fuzz --target job_parser_fuzz -j"$jobs"
corpus=$(mktemp -d)
cp tests/fuzz/corpus/* "$corpus"/
build-fuzz/tests/job_parser_fuzz -max_total_time="${PACER_FUZZ_SECONDS:-60}" -max_len=65536 \
  -print_final_stats=1 "$corpus" 2>&1 | tail -n 5
rm -rf "$corpus"
echo "== all tests passed"
