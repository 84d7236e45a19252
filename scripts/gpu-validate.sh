#!/usr/bin/env bash
# GPU validation of pacer-worker on a machine with one NVIDIA GPU (results in
# docs/benchmarks.md, "GPU measurements"):
#   1. pacer-gpu-smoke: a tiny plan's three steps, alone and against the CPU
#      device with the same seed (--compare-cpu), with the fused attention by
#      cuDNN's SDPA (when built with cuDNN) and by the tiled path
#      (PACER_CUDNN_ATTENTION=0), and with bf16 activation storage
#      (PACER_GPU_BF16_ACTIVATIONS=1), and with the unfused attention
#      (--unfused-attention); after each comparison "path: ..." or
#      "PATH NOT TAKEN: ..." says whether the device ran the attention path
#      the comparison is meant to check (its log line);
#   2. the same under compute-sanitizer (memcheck, leak check), if installed,
#      with fp32 and with bf16 activations, and with the unfused attention;
#   3. pacer-worker calibrate --backend gpu (GEMM TFLOP/s, copy bandwidth);
#   4. 7B-shaped single-GPU steps (tests/testdata/gpu/*.yaml) run by
#      pacer-worker with the planner's prediction beside the measurement:
#      its `event=done` line prints mean_step_seconds, mfu, peak_memory_bytes
#      and the predicted values; an fp8 plan must be refused (exit 2); then
#      the 8-layer jobs again with bf16 activations, and with
#      PACER_GPU_OP_TIMES=1 (time by operation).
#   The order is by worth, the memory checker last (slowest): with
#   PACER_VALIDATE_BUDGET_SECONDS=N the script ends within about N seconds,
#   each step's limit cut to what is left and a step with under 20 s left
#   reported as skipped, so a machine lent for a fixed time still returns
#   the most important figures.
# Usage: scripts/gpu-validate.sh [BUILD_DIR (build)] [OUT_DIR (gpu-validate-out)]
# Needs a build with CUDA (scripts/build.sh on a machine with nvcc) and jq;
# on a machine without the build dependencies, the kit of scripts/gpu-kit.sh.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
build=${1:-build}
out=${2:-gpu-validate-out}
mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1
worker=$build/worker/pacer-worker
smoke=$build/worker/pacer-gpu-smoke
pacer=$build/controller/pacer
for f in "$worker" "$smoke" "$pacer"; do
  [ -x "$f" ] || { echo "gpu-validate: $f missing: build with CUDA first (scripts/build.sh)"; exit 2; }
done
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || exit 2
# The catalog's type, for the plan's peak and memory (a GH200 has 96 GB, not
# an H200's 141; a PCIe or NVL H100 has a lower peak than the SXM part).
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *GH200*) gpu_type="" ;;
  *H200*NVL*) gpu_type="" ;;
  *H200*) gpu_type=H200 ;;
  *H100*PCIe*) gpu_type=H100-PCIe ;;
  *H100*NVL*) gpu_type=H100-NVL ;;
  *H100*) gpu_type=H100-SXM ;;
  *) gpu_type="" ;;
esac
[ -n "$gpu_type" ] || echo "gpu-validate: the 7B-shaped jobs are written for the catalog's H100s and H200 (SXM); skipped"

budget=${PACER_VALIDATE_BUDGET_SECONDS:-0}  # 0: no budget
# budgeted WANT: sets `limit` to WANT seconds, or to what is left of the
# budget if that is less; false, saying so, when under 20 s are left.
budgeted() {
  limit=$1
  if [ "$budget" -gt 0 ] && [ $((budget - SECONDS)) -lt "$limit" ]; then limit=$((budget - SECONDS)); fi
  [ "$limit" -ge 20 ] || { echo "skipped: the budget of ${budget} s is spent"; return 1; }
}
# step NAME SECONDS COMMAND...: COMMAND with a limit of SECONDS (less if the
# budget has less), its exit status after it; its output is kept in
# $out/step.txt for `expect`.
step() {
  local limit begin=$SECONDS
  echo "== $1"
  : >"$out/step.txt"
  step_ran=0
  budgeted "$2" || return 0
  step_ran=1
  shift 2
  timeout "$limit" "$@" 2>&1 | tee "$out/step.txt"
  echo "rc=${PIPESTATUS[0]} ($((SECONDS - begin)) s)"
}
# expect PATTERN: whether the last step's device said it ran what the step
# is meant to check (its "fused attention runs ...", "unfused attention
# runs ..." or "stored in bf16" line), quoting the line it said: a comparison that passed on another
# path says nothing about this one. Nothing for a skipped step.
expect() {
  [ "$step_ran" = 1 ] || return 0
  local said
  said=$(grep -m1 -oE "$1.*" "$out/step.txt")
  if [ -n "$said" ]; then
    echo "path: $said"
  else
    echo "PATH NOT TAKEN: wanted \"$1\""
  fi
}
step_ran=0

step smoke 120 "$smoke"
step "smoke against the CPU device" 300 "$smoke" --compare-cpu
expect "fused attention runs causal bf16 tiles"
step "smoke against the CPU device, full attention (cuDNN's SDPA)" 300 "$smoke" --compare-cpu --full-attention
# cuDNN's forward; the line it quotes says which backward ran with it.
expect "fused attention runs cuDNN [0-9.]+'s SDPA"
step "smoke against the CPU device, tiled attention" 300 env PACER_CUDNN_ATTENTION=0 "$smoke" --compare-cpu --full-attention
expect "fused attention runs tiled \(PACER_CUDNN_ATTENTION=0\)"
step "smoke against the CPU device, bf16 activations" 300 env PACER_GPU_BF16_ACTIVATIONS=1 "$smoke" --compare-cpu
expect "fused attention runs causal bf16 tiles"
expect "stored in bf16"
step "smoke against the CPU device, unfused attention" 300 "$smoke" --compare-cpu --unfused-attention
expect "unfused attention runs in bf16"
step calibrate 300 "$worker" calibrate --backend gpu --gpu-type "${gpu_type:-H100-SXM}" \
  -o "$out/calibration.json"

# run JOB PRECISION STEPS [VAR=VALUE...]: pacer-worker with the plan
# `pacer plan` makes for JOB on this GPU type (layout pinned in the file),
# prediction attached, extra environment last.
run() {
  local job=$1 precision=$2 steps=$3 plan typed limit
  shift 3
  typed="$out/$(basename "$job")"
  sed "s/gpuTypes: \[H200\]/gpuTypes: [$gpu_type]/" "$job" >"$typed"
  plan=$("$pacer" plan "$typed" -o json 2>"$out/plan-error.txt" | jq -c .plan)
  if [ -z "$plan" ] || [ "$plan" = null ]; then
    echo "no plan for $job: $(cat "$out/plan-error.txt")"
    return
  fi
  echo "== $(basename "$job") $precision $* on $gpu_type: $plan"
  budgeted 300 || return 0
  local begin=$SECONDS
  env PACER_BACKEND=gpu PACER_GPU_TYPE="$gpu_type" PACER_METRICS_PORT=0 \
    PACER_MODEL_LAYERS="$(yq_get "$job" layers)" PACER_MODEL_HIDDEN_SIZE=4096 \
    PACER_MODEL_ATTENTION_HEADS=32 PACER_MODEL_KV_HEADS=32 PACER_MODEL_FFN_HIDDEN_SIZE=11008 \
    PACER_MODEL_FFN_KIND=swiglu PACER_MODEL_VOCAB_SIZE=32000 PACER_SEQUENCE_LENGTH=2048 \
    PACER_MICRO_BATCH_SIZE="$(jq -r .microBatchSize <<<"$plan")" \
    PACER_GRAD_ACCUM_STEPS="$(jq -r .gradientAccumulationSteps <<<"$plan")" \
    PACER_GLOBAL_BATCH_SIZE=8 PACER_ACTIVATION_CHECKPOINTING="$(jq -r .activationCheckpointing <<<"$plan")" \
    PACER_ATTENTION_KERNEL="$(sed -n 's/^ *attention: *\([a-z]*\).*/\1/p' "$job" | head -1)" \
    PACER_MODEL_CAUSAL_ATTENTION="$(sed -n 's/^ *causalAttention: *\([a-z]*\).*/\1/p' "$job" | head -1 | grep . || echo true)" \
    PACER_PRECISION="$precision" PACER_TOTAL_STEPS="$steps" \
    PACER_PREDICTED_STEP_SECONDS="$(jq -r .predictedStepSeconds <<<"$plan")" \
    PACER_PREDICTED_MEMORY_BYTES="$(jq -r '.predictedMemoryGiB * 1073741824 | floor' <<<"$plan")" \
    "$@" timeout "$limit" "$worker" run --backend gpu >"$out/worker.txt" 2>&1
  local rc=$?
  # The summary lines here, and on a failure the last lines too (a
  # configuration error is a `pacer-worker: PACER_...` line, not an event);
  # the whole output in worker-N.txt.
  grep -E "event=(start|done|failed)|op_times|fused attention runs|stored in bf16" "$out/worker.txt"
  runs=$((runs + 1))
  cp "$out/worker.txt" "$out/worker-$runs.txt"
  [ "$rc" -eq 0 ] || { tail -n 5 "$out/worker.txt"; echo "whole output: $out/worker-$runs.txt"; }
  echo "rc=$rc ($((SECONDS - begin)) s)"
}
runs=0
yq_get() { sed -n "s/^ *$2: *\([0-9]*\).*/\1/p" "$1" | head -1; }
if [ -n "$gpu_type" ]; then
  l8=tests/testdata/gpu/llama7b-shape-l8-h200.yaml
  l8_fused=tests/testdata/gpu/llama7b-shape-l8-fused-h200.yaml
  l8_causal=tests/testdata/gpu/llama7b-shape-l8-causal-h200.yaml
  run "$l8" bf16 8
  # The same shape with a fused attention (docs/worker.md, "Attention"):
  # cuDNN's SDPA where it runs, else the tiled path (the log line says which).
  run "$l8_fused" bf16 8
  # The same under a causal mask: the device's causal tiles (docs/worker.md).
  run "$l8_causal" bf16 8
  # bf16 storage of the activations that are GEMM operands (docs/worker.md).
  run "$l8_fused" bf16 8 PACER_GPU_BF16_ACTIVATIONS=1
  run "$l8" bf16 8 PACER_GPU_BF16_ACTIVATIONS=1
  run "$l8" fp8 3
  # 6.7B parameters with AdamW need ~110 GiB: only on GPUs with more memory.
  if [ "$gpu_type" = H200 ]; then
    run tests/testdata/gpu/llama7b-shape-l32-h200.yaml bf16 5
    run tests/testdata/gpu/llama7b-shape-l32-h200.yaml bf16 5 PACER_GPU_BF16_ACTIVATIONS=1
  fi
  # Where the step's time goes, by operation kind (docs/worker.md).
  run "$l8_causal" bf16 8 PACER_GPU_OP_TIMES=1
  run "$l8_fused" bf16 8 PACER_GPU_OP_TIMES=1 PACER_GPU_BF16_ACTIVATIONS=1
  run "$l8_fused" bf16 8 PACER_GPU_OP_TIMES=1
  run "$l8_fused" bf16 8 PACER_GPU_OP_TIMES=1 PACER_CUDNN_ATTENTION=0
  run "$l8" bf16 8 PACER_GPU_OP_TIMES=1
fi
if command -v compute-sanitizer >/dev/null; then
  step "compute-sanitizer memcheck" 300 \
    compute-sanitizer --tool memcheck --leak-check full --log-file "$out/sanitizer.txt" "$smoke"
  tail -n 2 "$out/sanitizer.txt" 2>/dev/null
  step "compute-sanitizer memcheck, bf16 activations" 300 env PACER_GPU_BF16_ACTIVATIONS=1 \
    compute-sanitizer --tool memcheck --leak-check full --log-file "$out/sanitizer-bf16.txt" "$smoke"
  tail -n 2 "$out/sanitizer-bf16.txt" 2>/dev/null
  step "compute-sanitizer memcheck, unfused attention" 300 \
    compute-sanitizer --tool memcheck --leak-check full --log-file "$out/sanitizer-unfused.txt" \
    "$smoke" --unfused-attention
  tail -n 2 "$out/sanitizer-unfused.txt" 2>/dev/null
fi
