#!/usr/bin/env bash
# A real Prometheus server scrapes a running pacer-worker (CPU backend, a
# small scaled model) and the controller's queries must return the worker's
# series with the documented labels. Exits 77 (ctest: skipped) when the
# `prometheus` binary is missing.
#
#   prometheus_scrape_test.sh PATH/TO/pacer-worker
#
# Bounded: fails with a message after TIMEOUT_SECONDS (default 60). Both
# processes are killed on exit, whatever the outcome.
set -euo pipefail

worker=${1:?usage: prometheus_scrape_test.sh PATH/TO/pacer-worker}
timeout_seconds=${TIMEOUT_SECONDS:-60}

if ! command -v prometheus >/dev/null 2>&1; then
  echo "SKIP: no prometheus binary on PATH (Debian: apt-get install prometheus)"
  exit 77
fi
for tool in curl jq; do
  command -v "$tool" >/dev/null 2>&1 || { echo "FAIL: $tool is missing (scripts/install-deps.sh)"; exit 1; }
done

work=$(mktemp -d)
worker_pid=""
prometheus_pid=""
# Keeps the script's own status: the children's exit codes (pacer-worker
# exits 6 on SIGTERM) must not become the test's.
cleanup() {
  local status=$?
  if [ -n "$prometheus_pid" ]; then kill "$prometheus_pid" 2>/dev/null || true; fi
  if [ -n "$worker_pid" ]; then kill "$worker_pid" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT

# To stderr, so that a failure inside $(wait_for ...) is still seen.
fail() {
  echo "FAIL: $*" >&2
  if [ -f "$work/prometheus.log" ]; then
    echo "--- prometheus log (last 20 lines)" >&2
    tail -n 20 "$work/prometheus.log" >&2
  fi
  exit 1
}

# A port nobody listens on now. Prometheus cannot report the port it picked
# for ":0", so ask the kernel for one and hand it over (a tiny race, which a
# failed start below reports plainly).
free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
    return
  fi
  local port
  for _ in $(seq 50); do  # without python3: a random port nobody answers on
    port=$((20000 + RANDOM % 12000))  # below the ephemeral range (32768-60999)
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return; fi
  done
  fail "found no free port"
}

# The worker: one CPU rank of a small model, scaled by 0.25, many steps; its
# labels come from the environment the controller sets.
worker_port=$(free_port)
launched_at=$(date +%s.%N)
PACER_JOB_NAME=scrape-test PACER_JOB_NAMESPACE=pacer-ci PACER_BACKEND=cpu \
  MASTER_ADDR=127.0.0.1 MASTER_PORT="$(free_port)" PACER_METRICS_PORT="$worker_port" \
  PACER_TOTAL_STEPS=100000 PACER_MODEL_LAYERS=4 PACER_MODEL_HIDDEN_SIZE=256 \
  PACER_MODEL_ATTENTION_HEADS=4 PACER_SEQUENCE_LENGTH=128 PACER_MODEL_VOCAB_SIZE=2048 \
  PACER_SCALE=0.25 PACER_PREDICTED_STEP_SECONDS=0.05 \
  "$worker" >"$work/worker.log" 2>&1 &
worker_pid=$!
until grep -q "event=start" "$work/worker.log" 2>/dev/null; do
  kill -0 "$worker_pid" 2>/dev/null || { cat "$work/worker.log" >&2; fail "pacer-worker exited"; }
  [ "$SECONDS" -lt "$timeout_seconds" ] || fail "pacer-worker did not start"
  sleep 0.2
done
started_at=$(date +%s.%N)  # no earlier than the worker's own start

prometheus_port=$(free_port)
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: pacer-worker-scrape
    # The worker's own namespace label must win over the target's
    # (otherwise it arrives as exported_namespace); job stays the scrape
    # job's: the worker names its TrainJob in trainjob.
    honor_labels: true
    static_configs:
      - targets: ['127.0.0.1:$worker_port']
EOF
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$prometheus_port" --log.level=warn \
  >"$work/prometheus.log" 2>&1 &
prometheus_pid=$!
api="http://127.0.0.1:$prometheus_port"

# Waiting on an external server: bounded polls with a short sleep.
until curl -sf "$api/-/ready" >/dev/null 2>&1; do
  kill -0 "$prometheus_pid" 2>/dev/null || fail "prometheus exited during start-up"
  [ "$SECONDS" -lt "$timeout_seconds" ] || fail "prometheus not ready after ${timeout_seconds} s"
  sleep 0.2
done

# query PROMQL: prints the API's JSON answer.
query() { curl -sf --get "$api/api/v1/query" --data-urlencode "query=$1"; }

# wait_for PROMQL JQ_CONDITION: polls until the answer satisfies the jq
# condition, then prints the answer.
wait_for() {
  local answer
  while true; do
    answer=$(query "$1" || true)
    if [ -n "$answer" ] && jq -e "$2" >/dev/null 2>&1 <<<"$answer"; then
      echo "$answer"
      return 0
    fi
    [ "$SECONDS" -lt "$timeout_seconds" ] || fail "no answer to $1 satisfying $2 after ${timeout_seconds} s; last: $answer"
    sleep 0.5
  done
}

labels='.metric.trainjob == "scrape-test" and .metric.job == "pacer-worker-scrape" and .metric.namespace == "pacer-ci" and .metric.rank == "0"
        and .metric.backend == "cpu" and .metric.gpu_type == "cpu"'

count_query='sum by (trainjob, job, namespace, rank, backend, gpu_type) (pacer_worker_step_duration_seconds_count)'
answer=$(wait_for "$count_query" ".data.result | length == 1 and (.[0].value[1] | tonumber) >= 5")
jq -e ".data.result[0] | $labels" >/dev/null <<<"$answer" || fail "wrong labels: $answer"
echo "PromQL: $count_query"
echo "  => $(jq -c '.data.result[0]' <<<"$answer")"

# Rates over a window of a few scrapes only extrapolate each bucket series
# on its own: wait for five scrapes in the window first.
wait_for 'min(count_over_time(pacer_worker_step_duration_seconds_count[30s]))' \
  '.data.result | length == 1 and (.[0].value[1] | tonumber) >= 5' >/dev/null
median_query='histogram_quantile(0.5, sum by (le, trainjob, job, namespace, rank, backend, gpu_type) (rate(pacer_worker_step_duration_seconds_bucket[30s])))'
answer=$(wait_for "$median_query" '.data.result | length == 1 and (.[0].value[1] != "NaN")')
jq -e ".data.result[0] | $labels" >/dev/null <<<"$answer" || fail "wrong labels: $answer"
# Checks that hold on any machine, however loaded (a 10x agreement between
# median and mean did not: on a busy 2-core machine a 3 ms median came with
# a 30 ms mean, a heavy tail of preempted steps).
#  - Unit: one worker runs its steps one after another, so its step seconds
#    (_sum) cannot exceed the wall-clock time since it was launched, and,
#    as a step's bookkeeping is tiny next to the step, they are far more
#    than 2% of the time since it started. Milliseconds recorded as seconds
#    would read ~1000x, microseconds ~0.001x.
#  - Buckets: the true median is at most twice the mean (Markov: at most
#    half of a non-negative sample lies at or above 2x its mean), and
#    histogram_quantile interpolates within the median's bucket, at most
#    x1.78 above it (the first bucket reaches down to 0, hence the 1 ms
#    floor). A median clamped to the top finite bucket (steps falling in
#    +Inf) or in a wrongly scaled bucket breaks this. Both are evaluated at
#    the median's own timestamp, so they see the same window.
median=$(jq -r '.data.result[0].value[1]' <<<"$answer")
at=$(jq -r '.data.result[0].value[0]' <<<"$answer")
query_at() {
  curl -sf --get "$api/api/v1/query" --data-urlencode "query=$1" --data-urlencode "time=$at" ||
    fail "prometheus did not answer $1 at $at"
}
# one_result JSON: fails unless the answer holds exactly one series.
one_result() { jq -e '.data.result | length == 1' >/dev/null <<<"$1" || fail "expected one series: $1"; }
mean_answer=$(query_at 'sum(rate(pacer_worker_step_duration_seconds_sum[30s])) / sum(rate(pacer_worker_step_duration_seconds_count[30s]))')
one_result "$mean_answer"
mean=$(jq -r '.data.result[0].value[1]' <<<"$mean_answer")
# The newest sample of _sum at or before $at: its time and value.
sum_answer=$(query_at 'pacer_worker_step_duration_seconds_sum[10s]')
one_result "$sum_answer"
sample_at=$(jq -r '.data.result[0].values[-1][0]' <<<"$sum_answer")
step_seconds=$(jq -r '.data.result[0].values[-1][1]' <<<"$sum_answer")
awk -v s="$step_seconds" -v t="$sample_at" -v l="$launched_at" -v b="$started_at" \
  'BEGIN { exit !(s > 0 && s <= t - l && s >= 0.02 * (t - b)) }' ||
  fail "the worker's step seconds ($step_seconds at $sample_at) do not fit its run (launched at $launched_at, started by $started_at): a unit error?"
awk -v m="$median" -v l="$mean" 'BEGIN { exit !(m > 0 && l > 0 && m < 1000 && m <= 4 * l + 0.001) }' ||
  fail "median step time $median s cannot come from steps whose mean is $mean s (broken buckets?)"
echo "PromQL: $median_query"
echo "  => $(jq -c '.data.result[0]' <<<"$answer") (mean $mean s; $step_seconds step seconds by $sample_at, launched at $launched_at)"

# The scrape parsed everything (prometheus-cpp writes NaN as "Nan"), and the
# plan and scale series came through.
answer=$(wait_for 'up{job="pacer-worker-scrape"}' '.data.result | length == 1 and .[0].value[1] == "1"')
answer=$(wait_for 'pacer_worker_mfu_ratio{peak="calibrated"}' '.data.result | length == 1')
jq -e '.data.result[0].value[1] == "NaN"' >/dev/null <<<"$answer" ||
  fail "an unknown calibrated peak should read NaN: $answer"
# precision is what ran: the CPU runs the (default) bf16 plan in fp32.
answer=$(wait_for 'pacer_worker_info' '.data.result | length == 1')
jq -e '.data.result[0].metric | .tp == "1" and .pp == "1" and .dp == "1" and .zero == "0"
       and .micro_batch == "1" and .grad_accum == "1" and .precision == "fp32"' >/dev/null \
  <<<"$answer" || fail "pacer_worker_info lacks the plan labels: $answer"
answer=$(wait_for 'pacer_worker_model_scale' '.data.result | length == 1')
jq -e '.data.result[0].value[1] == "0.25"' >/dev/null <<<"$answer" ||
  fail "pacer_worker_model_scale should be 0.25: $answer"

# The first step of the process is warm-up: progress, not a measurement.
# (Polled: a scrape may land between the two updates of one step.)
wait_for 'max(pacer_worker_step) - max(pacer_worker_step_duration_seconds_count)' \
  '.data.result | length == 1 and .[0].value[1] == "1"' >/dev/null

answer=$(wait_for 'pacer_worker_predicted_step_seconds' '.data.result | length == 1')
jq -e '.data.result[0].value[1] == "0.05"' >/dev/null <<<"$answer" ||
  fail "the planner's prediction should be exported beside the measurement: $answer"

echo "PASS: prometheus scraped pacer-worker on port $worker_port in ${SECONDS} s"
