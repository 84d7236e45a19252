#!/usr/bin/env bash
# Pacer's main job on this machine: installs what is needed, builds, and plans
# the example TrainJob against the default inventory (docs/inventory.md).
# Extra arguments go to `pacer plan` (e.g. -o json, --cluster FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
job=${PACER_JOB:-manifests/examples/llama-7b-h100.yaml}
exec build/controller/pacer plan "$job" "$@"
