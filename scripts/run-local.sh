#!/usr/bin/env bash
# Pacer's main job on this machine (local mode): installs what is needed,
# builds, and runs the quickstart TrainJob with `pacer run` -- planned for this
# machine (its GPUs, or its CPU), trained by pacer-worker processes, with live
# progress, ETA against the deadline and re-planning from measured step time.
# About a minute on 2 CPU cores. Extra arguments go to `pacer run`
# (e.g. --progress plain); PACER_JOB picks another TrainJob file.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
job=${PACER_JOB:-manifests/examples/quickstart.yaml}
exec build/controller/pacer run "$job" "$@"
