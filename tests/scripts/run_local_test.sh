#!/usr/bin/env bash
# scripts/run-local.sh builds only what `pacer run` needs: the targets pacer
# and pacer-worker, GPU code only when the machine has a GPU, then runs the
# job. Runs a copy of the script against stub cmake, nvidia-smi and
# install-deps.sh that record what they were asked, so nothing is built.
#   run_local_test.sh SOURCE_DIR
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

setup() {  # $1: "gpu" or "nogpu"
  rm -rf "$tmp/repo" "$tmp/bin"
  mkdir -p "$tmp/repo/scripts" "$tmp/bin"
  cp "$src/scripts/run-local.sh" "$tmp/repo/scripts/"
  printf '#!/bin/sh\necho "deps $*" >>"%s/calls"\n' "$tmp" >"$tmp/repo/scripts/install-deps.sh"
  # The stub cmake records its arguments; the build step leaves a stub pacer.
  cat >"$tmp/bin/cmake" <<STUB
#!/bin/sh
echo "cmake \$*" >>"$tmp/calls"
if [ "\$1" = --build ]; then
  mkdir -p build/controller
  printf '#!/bin/sh\necho "pacer \$*" >>"$tmp/calls"\n' >build/controller/pacer
  chmod +x build/controller/pacer
fi
STUB
  if [ "$1" = gpu ]; then
    printf '#!/bin/sh\necho "GPU 0: NVIDIA H100 80GB HBM3"\n' >"$tmp/bin/nvidia-smi"
  else
    printf '#!/bin/sh\nexit 9\n' >"$tmp/bin/nvidia-smi"  # a driver that does not answer
  fi
  chmod +x "$tmp/bin/"* "$tmp/repo/scripts/"*
  : >"$tmp/calls"
}

run() { PATH="$tmp/bin:$PATH" "$tmp/repo/scripts/run-local.sh" "$@" >"$tmp/out" 2>&1 || {
  cat "$tmp/out" >&2; fail "run-local.sh exited non-zero"; }; }

# No GPU: CUDA off, only pacer and pacer-worker, then the quickstart job.
setup nogpu
run --progress plain
build_line=$(grep '^cmake --build' "$tmp/calls") || fail "no cmake --build call"
[ "${build_line#*--target }" = "pacer pacer-worker" ] ||
  fail "builds '${build_line#*--target }', want only 'pacer pacer-worker': $build_line"
grep -q -- '-DPACER_ENABLE_CUDA=OFF' "$tmp/calls" || fail "GPU code configured without a GPU"
grep -qx 'pacer run manifests/examples/quickstart.yaml --progress plain' "$tmp/calls" ||
  fail "did not run the quickstart job: $(cat "$tmp/calls")"
# Only the packages the build and the job need: the test, fuzzing and
# chart tooling (Prometheus, clang, Node.js, Helm) made a first run wait
# for installs it never used.
grep -qx 'deps --run-only' "$tmp/calls" || fail "did not install only the run's dependencies: $(grep '^deps' "$tmp/calls")"
grep -q -- '-DPACER_BUILD_TESTS=OFF' "$tmp/calls" || fail "tests configured (their packages are not installed)"
grep -q -- '-DPACER_BUILD_BENCHMARKS=OFF' "$tmp/calls" || fail "benchmarks configured"
grep -q 'building pacer pacer-worker' "$tmp/out" || fail "no build step announced: $(cat "$tmp/out")"

# A GPU: CUDA on (pacer-worker then depends on the GPU plugin), same targets.
setup gpu
run
build_line=$(grep '^cmake --build' "$tmp/calls")
[ "${build_line#*--target }" = "pacer pacer-worker" ] || fail "GPU machine builds: $build_line"
grep -q -- '-DPACER_ENABLE_CUDA=ON' "$tmp/calls" || fail "GPU code not configured with a GPU"
# PACER_JOB relative to the caller's directory (the script changes to the
# repository root before it builds): the job the caller named runs.
setup nogpu
mkdir -p "$tmp/elsewhere"
(cd "$tmp/elsewhere" && PACER_JOB=myjob.yaml run)
grep -qx "pacer run $tmp/elsewhere/myjob.yaml" "$tmp/calls" ||
  fail "a relative PACER_JOB was not read from the caller's directory: $(grep '^pacer' "$tmp/calls")"
echo "PASS: run-local.sh builds pacer and pacer-worker only (GPU code only with a GPU)"
