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
#   4. two checks of pacer-worker on one GPU, each ending in a "PASS: ..." or
#      "FAIL: ...: why" line (or "skipped" when the budget runs out before
#      it is done): two local ranks with one GPU visible are refused
#      at start (exit 2, the message naming both counts), and a small job
#      of 2 steps, checkpointed after its last step with its weights
#      (--checkpoint-buffers), resumes there when given 4 steps;
#   5. 7B-shaped single-GPU steps (tests/testdata/gpu/*.yaml) run by
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
# budget has less), its exit status after it (also in step_rc); its output
# is kept in $out/step.txt for `expect` and the checks.
step() {
  local limit begin=$SECONDS
  echo "== $1"
  : >"$out/step.txt"
  step_ran=0 step_rc=""
  budgeted "$2" || return 0
  step_ran=1
  shift 2
  timeout "$limit" "$@" 2>&1 | tee "$out/step.txt"
  step_rc=${PIPESTATUS[0]}
  echo "rc=$step_rc ($((SECONDS - begin)) s)"
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
# verdict CHECK WHY [EVIDENCE]: a check's outcome on one line that the log
# can be searched for: "PASS: CHECK (EVIDENCE)" when WHY is empty, else
# "FAIL: CHECK: WHY". A failed check does not end the script.
verdict() {
  if [ -z "$2" ]; then echo "PASS: $1${3:+ ($3)}"; else echo "FAIL: $1: $2"; fi
}
# exit_text RC: "exit RC", saying so when it is timeout's (the step's limit).
exit_text() { if [ "$1" = 124 ]; then echo "exit 124 (timed out)"; else echo "exit $1"; fi; }
step_ran=0 step_rc=""

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

# Two local ranks with one GPU visible must be refused before either touches
# the device (docs/worker.md, "GPU backend"), not share it or wait for a peer.
# The exit status alone proves nothing: a missing GPU plugin or driver exits
# 2 too, so the device's own message must be there. One GPU is made visible
# so that the counts are the same on a machine with more.
check="two local ranks on one GPU fail fast"
lone_gpu=${CUDA_VISIBLE_DEVICES:-0}
check_begin=$SECONDS
step "$check" 60 env CUDA_VISIBLE_DEVICES="${lone_gpu%%,*}" LOCAL_WORLD_SIZE=2 WORLD_SIZE=2 \
  PACER_DATA_PARALLEL=2 PACER_GLOBAL_BATCH_SIZE=2 PACER_METRICS_PORT=0 "$worker" run --backend gpu
if [ "$step_ran" = 1 ]; then
  said=$(grep -m1 -oE 'GPU backend: [0-9]+ local ranks but only [0-9]+ CUDA devices visible' \
    "$out/step.txt")
  why=""
  [ "$step_rc" = 2 ] || why="$(exit_text "$step_rc"), want exit 2 (invalid-config)"
  want="GPU backend: 2 local ranks but only 1 CUDA devices visible"
  [ "$said" = "$want" ] || why="${why:+$why; }no \"$want\" line${said:+ (got \"$said\")}"
  verdict "$check" "$why" "exit 2 in $((SECONDS - check_begin)) s: $said"
fi

# Checkpoint save and resume on the GPU: the smoke's layer shape (2 layers,
# a 1024-token vocabulary: about 80 MB a checkpoint) for 4 steps, a
# checkpoint every 2, with the weights and optimizer state, so that the
# device's copies to the host and back are part of it. A run saves nothing
# at its last step, so the same command again must start at step 2 and end
# at step 4 (docs/worker.md, "Checkpoints, resume and stopping").
check="checkpoint save and resume on the GPU"
if [ "$budget" -gt 0 ] && [ $((budget - SECONDS)) -lt 40 ]; then
  echo "== $check"
  echo "skipped: $((budget - SECONDS)) s of the budget left, under the 40 s its two runs need"
else
  ckpt_dir=$(mktemp -d "${TMPDIR:-/tmp}/pacer-gpu-ckpt.XXXXXX")
  ckpt_job=(env PACER_METRICS_PORT=0 PACER_PRECISION=bf16 PACER_MODEL_LAYERS=2
    PACER_MODEL_HIDDEN_SIZE=512 PACER_MODEL_ATTENTION_HEADS=8 PACER_MODEL_KV_HEADS=4
    PACER_MODEL_FFN_HIDDEN_SIZE=1408 PACER_MODEL_FFN_KIND=swiglu PACER_MODEL_VOCAB_SIZE=1024
    PACER_SEQUENCE_LENGTH=256 PACER_MICRO_BATCH_SIZE=2 PACER_GRAD_ACCUM_STEPS=2
    PACER_GLOBAL_BATCH_SIZE=4
    "$worker" run --backend gpu --checkpoint-dir "$ckpt_dir" --checkpoint-interval 2
    --checkpoint-buffers)
  # Two steps, then the checkpoint of the last one (with the weights); the
  # second run is the job given two more steps, which resumes there.
  step "$check: first run" 60 env PACER_TOTAL_STEPS=2 "${ckpt_job[@]}"
  saved=$step_ran why=""
  if [ "$step_ran" = 1 ]; then
    [ "$step_rc" = 0 ] || why="the first run: $(exit_text "$step_rc"), want 0"
    grep -q "event=checkpoint step=2 " "$out/step.txt" ||
      why="${why:+$why; }the first run logged no \"event=checkpoint step=2\""
    [ -s "$ckpt_dir/rank-0/step-000000000002.ckpt" ] ||
      why="${why:+$why; }the first run left no rank-0/step-000000000002.ckpt"
    [ -z "$why" ] || { verdict "$check" "$why"; saved=0; }
  fi
  if [ "$saved" = 1 ]; then
    step "$check: the same job with 4 steps" 60 env PACER_TOTAL_STEPS=4 "${ckpt_job[@]}"
    if [ "$step_ran" = 1 ]; then
      [ "$step_rc" = 0 ] || why="the second run: $(exit_text "$step_rc"), want 0"
      began=$(grep -m1 -o "resume_step=[0-9]*" "$out/step.txt" || echo "no event=start line")
      grep -q "event=start backend=gpu resume_step=2 " "$out/step.txt" ||
        why="${why:+$why; }the second run did not start at step 2 ($began)"
      ! grep -qE "event=(resume-fallback|checkpoint-unusable)" "$out/step.txt" ||
        why="${why:+$why; }the step-2 checkpoint was refused"
      grep -q "event=done steps=4 " "$out/step.txt" ||
        why="${why:+$why; }the second run did not end at step 4"
      verdict "$check" "$why" "saved at step 2, resumed there, done at step 4"
    fi
  fi
  rm -rf "$ckpt_dir"
fi

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
