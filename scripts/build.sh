#!/usr/bin/env bash
# Configures and builds Pacer into build/ (RelWithDebInfo). GPU code is built
# when nvcc is found (/usr/local/cuda), skipped otherwise (PACER_ENABLE_CUDA is
# set explicitly: scripts/run-local.sh turns it off in build/ on machines
# without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
# Extra arguments go to the configure step (scripts/test.sh passes its flags).
# Tests and benchmarks on, explicitly: scripts/run-local.sh turns them off in
# the same build/.
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPACER_ENABLE_CUDA=ON \
  -DPACER_BUILD_TESTS=ON -DPACER_BUILD_BENCHMARKS=ON "$@" >/dev/null
cmake --build build -j"$(nproc)"
