#!/usr/bin/env bash
# Pacer's main job on this machine (local mode): installs what is needed,
# builds only what the job needs, and runs the quickstart TrainJob with
# `pacer run` -- planned for this machine (its GPUs, or its CPU), trained by
# pacer-worker processes, with live progress, ETA against the deadline and
# re-planning from measured step time.
#
# Builds `pacer` and `pacer-worker` only (the GPU plugin too when this machine
# has an NVIDIA GPU): not the tests, benchmarks or the test API server, which
# scripts/build.sh and scripts/test.sh build. First run on a fresh clone:
# 6 to 10 CPU-minutes of building, i.e. 3 to 5 minutes on 2 idle cores
# without ccache (docs/benchmarks.md, "First run"); later runs rebuild nothing
# and start the job at once; the job itself takes
# about a minute on 2 cores. Extra arguments go to `pacer run` (e.g. --progress plain);
# PACER_JOB picks another TrainJob file.
set -euo pipefail
# PACER_JOB relative to the caller's directory, read before the cd below.
if [[ -n "${PACER_JOB:-}" && "$PACER_JOB" != /* ]]; then PACER_JOB="$PWD/$PACER_JOB"; fi
cd "$(dirname "$0")/.."

# A GPU is present when the driver answers or its device node exists; only
# then is the CUDA plugin worth its build time.
has_gpu() {
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then return 0; fi
  [ -e /dev/nvidia0 ]
}

echo "run-local: [1/3] dependencies (scripts/install-deps.sh --run-only)"
scripts/install-deps.sh --run-only

# pacer-worker depends on the GPU plugin whenever GPU code is configured.
cuda=OFF
if has_gpu; then cuda=ON; fi
targets=(pacer pacer-worker)
jobs=$(nproc 2>/dev/null || echo 2)
echo "run-local: [2/3] building ${targets[*]} (GPU code: $cuda) with $jobs jobs into build/;" \
  "the first time takes 3 to 5 minutes on 2 cores, later runs only what changed"
# Tests and benchmarks off: their packages are not installed here
# (scripts/build.sh turns them on again in the same build/).
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPACER_ENABLE_CUDA="$cuda" \
  -DPACER_BUILD_TESTS=OFF -DPACER_BUILD_BENCHMARKS=OFF >/dev/null
# cmake prints "[ NN%] Building ..." per file: the progress of this build.
cmake --build build -j"$jobs" --target "${targets[@]}"

job=${PACER_JOB:-manifests/examples/quickstart.yaml}
echo "run-local: [3/3] build/controller/pacer run $job $*"
exec build/controller/pacer run "$job" "$@"
