#!/usr/bin/env bash
# Replays the scheduling benchmark's trace and pool pairs through
# `pacer simulate --policy pacer` and prints one Markdown row per pair and
# the totals (deadlines met, admitted jobs that finished late): the figures
# behind docs/benchmarks.md ("Deadline scheduling across jobs on public
# traces") and the experiments in docs/scheduling.md ("Known gaps").
# The four goal pairs and the Fig. 8(b) pairs of the ElasticFlow paper, plus
# pairs on loaded pools; the ITP traces other than cluster01 and cluster10
# are not in this repository: pass the reference data set's traces folder
# (ElasticFlow reference data: traces/itp/*.csv, traces/derived/*.csv; see
# tests/testdata/elasticflow/SOURCE.md for where they come from).
# Usage: scripts/bench-traces.sh TRACES_DIR [PACER_BINARY (build/controller/pacer)]
# A pair whose trace is missing is reported as skipped, not failed:
# `scripts/bench-traces.sh tests/testdata/elasticflow` runs the four goal
# pairs from the traces this repository carries. A folder holding none of
# the traces is an error (exit 1), not totals of 0. Relative paths are read
# from the caller's directory (tests/scripts/bench_traces_test.sh).
set -euo pipefail
traces=${1:?usage: scripts/bench-traces.sh TRACES_DIR [PACER_BINARY]}
# Paths given relative to the caller's directory, read before the cd below.
[[ -d "$traces" ]] || { echo "no traces folder at $traces" >&2; exit 2; }
traces=$(CDPATH='' cd -- "$traces" >/dev/null && pwd)
pacer=${2:-}
if [[ -n "$pacer" && "$pacer" != /* ]]; then pacer="$PWD/$pacer"; fi
cd "$(dirname "$0")/.."
pacer=${pacer:-build/controller/pacer}
[[ -x "$pacer" ]] || { echo "no pacer binary at $pacer: cmake --build build --target pacer" >&2; exit 2; }

pairs=(
  "derived/elasticVpollux_e 64" "itp/cluster10 256" "itp/cluster10 32" "itp/cluster01 512"
  "itp/195job 64" "itp/195job 128" "itp/cluster02 128" "itp/cluster02 256" "itp/cluster03 256"
  "itp/cluster05 16" "itp/cluster05 32" "itp/cluster06 64" "itp/cluster06 128" "itp/cluster09 128"
  "itp/cluster02 512" "itp/cluster03 512" "itp/cluster04 1024" "itp/cluster05 512"
  "itp/cluster06 512" "itp/cluster07 1024" "itp/cluster08 1024" "itp/cluster09 1024"
)
met_total=0
late_total=0
ran=0
echo "| trace | GPUs | met | ratio | admitted late |"
echo "|---|---|---|---|---|"
for pair in "${pairs[@]}"; do
  read -r trace gpus <<<"$pair"
  file="$traces/$trace.csv"
  # A flat folder (tests/testdata/elasticflow) holds the files without itp/.
  [[ -f "$file" ]] || file="$traces/$(basename "$trace").csv"
  if [[ ! -f "$file" ]]; then
    echo "| $trace | $gpus | skipped: $file not found | | |"
    continue
  fi
  # The summary row: "pacer  MET/ALL  RATIO  ADMITTED  REJECTED  LATE ...".
  row=$("$pacer" simulate "$file" --gpus "$gpus" --policy pacer | awk '$1 == "pacer" {print $2, $3, $6}')
  read -r met_of ratio late <<<"$row"
  echo "| $trace | $gpus | $met_of | $ratio | $late |"
  ran=$((ran + 1))
  met_total=$((met_total + ${met_of%%/*}))
  late_total=$((late_total + late))
done
echo
echo "total: $met_total deadlines met, $late_total admitted jobs late ($ran of ${#pairs[@]} pairs run)"
# Totals of no pair are no measurement: a wrong folder must not read as one.
if ((ran == 0)); then
  echo "no trace found under $traces (expected e.g. $traces/itp/cluster10.csv or $traces/cluster10.csv)" >&2
  exit 1
fi
