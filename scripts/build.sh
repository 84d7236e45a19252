#!/usr/bin/env bash
# Configures and builds Pacer into build/ (RelWithDebInfo). GPU code is built
# when nvcc is found (/usr/local/cuda), skipped otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
