#!/usr/bin/env bash
# The Dockerfile checker must reject what it is there to catch: each case
# below breaks docker/controller.Dockerfile (the last one
# docker/worker.Dockerfile) in one way (a sed edit of a copy)
# and expects dockerfile_check.sh to fail with that case's message, and with
# no other failure, so a check that always passes, or one that fails for the
# wrong reason, shows here.
#
# Usage: check_rejects_test.sh SOURCE_DIR [PACER_CONTROLLER_BINARY [GPU_PLUGIN]]
# The missing-runtime-library cases need the built pacer-controller and GPU
# plugin (libpacer_worker_gpu.so); each is skipped (with a message) without it.
set -uo pipefail
source_dir="$1"
controller_binary="${2:-}"
gpu_plugin="${3:-}"
checker="$source_dir/tests/docker/dockerfile_check.sh"
# The file the cases edit, and its image and distribution.
dockerfile="$source_dir/docker/controller.Dockerfile"
image=ghcr.io/pacer-dev/pacer-controller
distro=debian
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

passed=0 failed=0 skipped=0
# Options every case passes: the cases about other checks skip the
# configure from the copied files (a missing COPY also fails that, which
# would count as a second failure); the case about it clears this.
case_options=(--skip-configure)
# expect_rejected NAME SED-SCRIPT EXPECTED-FAIL-LINE-PREFIX FAILURES [BINARY]
expect_rejected() {
  local case_name="$1" edit="$2" expected="$3" failures="$4" binary="${5:-}"
  local broken="$work/$case_name.Dockerfile" output status
  sed -E "$edit" "$dockerfile" > "$broken"
  if cmp -s "$dockerfile" "$broken"; then
    echo "FAIL - $case_name: the edit did not change $(basename "$dockerfile")"
    failed=$((failed + 1))
    return
  fi
  local args=(--source-dir "$source_dir" --dockerfile "$broken"
              --image "$image" --distro "$distro" --values "$work/no-values.yaml"
              "${case_options[@]}")
  [ -n "$binary" ] && args+=(--binary "$binary")
  output=$("$checker" "${args[@]}" 2>&1)
  status=$?
  local got_failures
  got_failures=$(sed -nE 's/.*: [0-9]+ passed, ([0-9]+) failed, [0-9]+ skipped$/\1/p' <<< "$output")
  if [ "$status" -ne 0 ] && grep -qF -- "FAIL - $expected" <<< "$output" &&
     [ "$got_failures" = "$failures" ]; then
    echo "ok   - $case_name: rejected ($expected...)"
    passed=$((passed + 1))
  else
    echo "FAIL - $case_name: expected exit 1 with 'FAIL - $expected' and $failures failure(s);" \
         "got exit $status, $got_failures failure(s):"
    grep -E '^FAIL' <<< "$output" | sed 's/^/    /'
    failed=$((failed + 1))
  fi
}

# The unmodified file passes, so every failure below is the edit's.
if "$checker" --source-dir "$source_dir" --dockerfile "$dockerfile" \
     --image ghcr.io/pacer-dev/pacer-controller --values "$work/no-values.yaml" > "$work/clean.log" 2>&1; then
  echo "ok   - the unmodified docker/controller.Dockerfile passes"
  passed=$((passed + 1))
else
  echo "FAIL - the unmodified docker/controller.Dockerfile fails:"
  grep -E '^FAIL' "$work/clean.log" | sed 's/^/    /'
  failed=$((failed + 1))
fi

expect_rejected root-user 's/^USER 65532:65532$/USER 0/' \
  "final stage USER '0' is not a numeric non-root" 1
expect_rejected named-user 's/^USER 65532:65532$/USER nobody/' \
  "final stage USER 'nobody' is not a numeric non-root" 1
expect_rejected root-group 's/^USER 65532:65532$/USER 65532:0/' \
  "final stage USER '65532:0' is not a numeric non-root" 1
expect_rejected dev-package-in-runtime 's/libcpprest2\.10 libssl3 /libcpprest2.10 libssl-dev /' \
  "final stage installs no compiler or -dev package (found: libssl-dev" 1
expect_rejected compiler-in-runtime 's/ca-certificates \\?$/ca-certificates g++-12 \\/' \
  "final stage installs no compiler or -dev package (found: g++-12" 1
expect_rejected missing-source 's/^COPY cmake cmake$/COPY cmake-modules cmake/' \
  "COPY cmake-modules: not in the repository" 2
expect_rejected source-outside-allow-list 's/^COPY cmake cmake$/COPY tests tests/' \
  "COPY tests: allowed by .dockerignore" 1
# The ElasticFlow tables controller/CMakeLists.txt reads at configure time.
case_options=()
expect_rejected data-not-copied '/^COPY data data$/d' \
  "stage 0: cmake does not configure from the files the stage copies" 1
case_options=(--skip-configure)
expect_rejected unknown-target 's/--target pacer-controller/--target pacer-controllerd/' \
  "stage 0: cmake --target pacer-controllerd is not declared" 1
expect_rejected wrong-build-path 's#build/controller/daemon/pacer-controller#build/controller/pacer-controller#' \
  "stage 0: build/controller/pacer-controller is no target's output" 1
expect_rejected copy-not-produced 's#^COPY --from=build /out/pacer-controller#COPY --from=build /out/pacer-ctl#' \
  "COPY --from=build /out/pacer-ctl: no RUN of stage build writes it" 1
# (and so the ENTRYPOINT is copied in by nothing: the second failure)
expect_rejected copy-from-unknown-stage 's#^COPY --from=build #COPY --from=builder #' \
  "COPY --from=builder /out/pacer-controller: no earlier stage named builder" 2
expect_rejected version-label 's/^ARG PACER_VERSION=0\.1\.0$/ARG PACER_VERSION=0.2.0/' \
  "label org.opencontainers.image.version '0.2.0' equals the CMake project version" 1
expect_rejected missing-label 's/org\.opencontainers\.image\.licenses=/org.opencontainers.image.license=/' \
  "label org.opencontainers.image.licenses is set" 1
expect_rejected untagged-base 's/^FROM debian:bookworm-slim$/FROM debian/' \
  "stage 1 base image debian has no explicit tag" 1
expect_rejected devel-final-stage 's/^FROM debian:bookworm-slim$/FROM nvidia\/cuda:13.0.2-devel-ubuntu24.04/' \
  "final stage base nvidia/cuda:13.0.2-devel-ubuntu24.04 is not a -devel image" 1
expect_rejected add-instead-of-copy 's/^COPY cmake cmake$/ADD cmake cmake/' \
  "stage 0: ADD cmake cmake (use COPY" 1
expect_rejected shell-form-entrypoint 's#^ENTRYPOINT .*#ENTRYPOINT /usr/local/bin/pacer-controller#' \
  "final stage ENTRYPOINT '/usr/local/bin/pacer-controller' is not in exec form" 1
expect_rejected entrypoint-not-copied 's#^ENTRYPOINT .*#ENTRYPOINT ["/usr/bin/pacer-controller"]#' \
  "ENTRYPOINT /usr/bin/pacer-controller (exec form) is copied in by the final stage" 1
if [ -n "$controller_binary" ] && [ -e "$controller_binary" ]; then
  # Without cpprestsdk's package, libcpprest.so has none. (OpenSSL's
  # libraries stay covered: ca-certificates depends on openssl, which
  # depends on libssl3.)
  expect_rejected missing-runtime-library 's/libcpprest2\.10 libssl3 //' \
    "pacer-controller: libcpprest.so.2.10 from libcpprest2.10 is not installed" 1 \
    "$controller_binary"
else
  echo "skip - missing-runtime-library: pacer-controller not built (${controller_binary:-no path given})"
  skipped=$((skipped + 1))
fi

dockerfile="$source_dir/docker/worker.Dockerfile"
image=ghcr.io/pacer-dev/pacer-worker
distro=ubuntu
if [ -n "$gpu_plugin" ] && [ -e "$gpu_plugin" ]; then
  # NCCL comes from the CUDA runtime image, not from a package the stage
  # installs: only the stage's assertion covers it.
  expect_rejected unasserted-cuda-library 's/ libnccl\.so\.2; do/; do/' \
    "libpacer_worker_gpu.so: libnccl.so.2 (" 1 "$gpu_plugin"
else
  echo "skip - unasserted-cuda-library: the GPU plugin not built (${gpu_plugin:-no path given})"
  skipped=$((skipped + 1))
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
