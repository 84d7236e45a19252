#!/usr/bin/env bash
# scripts/gpu-validate.sh runs where GPU time is scarce, so its logic is
# checked here against stub binaries that record how they were called: the
# order (smoke, CPU comparisons, calibrate, the one-GPU checks, the
# 7B-shaped jobs with fp32 and bf16 activations, the time breakdowns, the
# memory checker last), the plan's layout reaching the worker, the 6.7B
# job only on an H200, PACER_VALIDATE_BUDGET_SECONDS skipping what no
# longer fits instead of overrunning, each CPU comparison reporting
# whether the device ran the attention path it checks,
# and the one-GPU checks (two local ranks refused, checkpoint and resume)
# passing only on what the worker says, not on its exit status alone.
#   gpu_validate_test.sh SOURCE_DIR
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$tmp/repo/scripts" "$tmp/repo/tests/testdata" "$tmp/repo/build/worker" \
  "$tmp/repo/build/controller" "$tmp/bin"
cp "$src/scripts/gpu-validate.sh" "$tmp/repo/scripts/"
cp -r "$src/tests/testdata/gpu" "$tmp/repo/tests/testdata/"
calls=$tmp/calls
# The stub smoke names the path the real device would take (or, with
# STUB_WRONG_PATH=1, a path it was not asked for: the tiled one for a
# fused plan, the fp32 walk for an unfused one), says so when it stores
# activations in bf16, and exits with STUB_SMOKE_EXIT (0).
cat >"$tmp/repo/build/worker/pacer-gpu-smoke" <<STUB
#!/bin/sh
echo "smoke \$* cudnn=\${PACER_CUDNN_ATTENTION:-} bf16act=\${PACER_GPU_BF16_ACTIVATIONS:-}" >>"$calls"
case "\${STUB_WRONG_PATH:-}:\${PACER_CUDNN_ATTENTION:-}:\$*" in
  :*unfused-attention*) path=""; unfused="in bf16 (P stored in bf16)" ;;
  1:*unfused-attention*) path=""; unfused="the default walk (P stored in fp32)" ;;
  1:*) path="tiled (cuDNN's SDPA failed its trial run)" ;;
  *:0:*full-attention*) path="tiled (PACER_CUDNN_ATTENTION=0)" ;;
  *full-attention*) path="cuDNN 9.19.0's SDPA forward and the bf16 backward" ;;
  *compare-cpu*) path="causal bf16 tiles of 128 query rows on cuBLAS" ;;
  *) path="causal bf16 tiles of 128 query rows on cuBLAS" ;;
esac
if [ -n "\$path" ]; then
  echo "pacer-worker gpu: fused attention runs \$path" >&2
else
  echo "pacer-worker gpu: unfused attention runs \$unfused" >&2
fi
if [ "\${PACER_GPU_BF16_ACTIVATIONS:-}" = 1 ]; then
  echo "pacer-worker gpu: activations that are GEMM operands are stored in bf16" >&2
fi
exit "\${STUB_SMOKE_EXIT:-0}"
STUB
# The stub worker refuses two local ranks as the GPU device does (unless
# STUB_SHARES_GPU=1), and with --checkpoint-dir saves step 2 and resumes
# there the next time (unless STUB_NO_RESUME=1), logging as the runner does.
cat >"$tmp/repo/build/worker/pacer-worker" <<STUB
#!/bin/sh
if [ -n "\${STUB_WORKER_ERROR:-}" ]; then echo "pacer-worker: \$STUB_WORKER_ERROR" >&2; exit 2; fi
echo "worker \$1 layers=\${PACER_MODEL_LAYERS:-} \${PACER_PRECISION:-} \${PACER_ATTENTION_KERNEL:-} mb=\${PACER_MICRO_BATCH_SIZE:-} k=\${PACER_GRAD_ACCUM_STEPS:-} ckpt=\${PACER_ACTIVATION_CHECKPOINTING:-} type=\${PACER_GPU_TYPE:-} op_times=\${PACER_GPU_OP_TIMES:-0} cudnn=\${PACER_CUDNN_ATTENTION:-} bf16act=\${PACER_GPU_BF16_ACTIVATIONS:-} causal=\${PACER_MODEL_CAUSAL_ATTENTION:-}" >>"$calls"
log() { echo "pacer-worker job=default/local rank=0 \$*" >&2; }
if [ "\${LOCAL_WORLD_SIZE:-1}" = 2 ] && [ -z "\${STUB_SHARES_GPU:-}" ]; then
  log 'event=failed during=initialize exit=invalid-config error="INVALID_ARGUMENT: GPU backend: 2 local ranks but only 1 CUDA devices visible; set the ranks per node"'
  exit 2
fi
dir=""
while [ \$# -gt 0 ]; do [ "\$1" = --checkpoint-dir ] && dir=\$2; shift; done
if [ -n "\$dir" ]; then
  ckpt=\$dir/rank-0/step-000000000002.ckpt
  resume=0
  [ -f "\$ckpt" ] && [ -z "\${STUB_NO_RESUME:-}" ] && resume=2
  log "event=start backend=gpu resume_step=\$resume run=0123456789abcdef precision=bf16"
  if [ "\$resume" = 0 ]; then
    mkdir -p "\$dir/rank-0" && echo checkpoint >"\$ckpt"
    log "event=checkpoint step=2 seconds=0.010"
  fi
  log "event=done steps=4 mean_step_seconds=0.003"
  exit 0
fi
echo "pacer-worker: event=done mean_step_seconds=0.5"
STUB
# The stub planner answers with the layout pinned in the job file.
cat >"$tmp/repo/build/controller/pacer" <<STUB
#!/bin/sh
if [ -n "\${STUB_PLAN_ERROR:-}" ]; then echo "error: \$STUB_PLAN_ERROR" >&2; exit 3; fi
echo "pacer \$1 \$(sed -n 's/^ *gpuTypes: *//p' "\$2")" >>"$calls"
mb=\$(sed -n 's/^ *microBatchSizes: \[\([0-9]*\)\]/\1/p' "\$2")
ckpt=\$(sed -n 's/^ *activationCheckpointing: *//p' "\$2")
echo "{\"plan\":{\"microBatchSize\":\$mb,\"gradientAccumulationSteps\":\$((8 / mb)),\"activationCheckpointing\":\"\$ckpt\",\"predictedStepSeconds\":0.3,\"predictedMemoryGiB\":40}}"
STUB
cat >"$tmp/bin/compute-sanitizer" <<STUB
#!/bin/sh
echo "compute-sanitizer \$* bf16act=\${PACER_GPU_BF16_ACTIVATIONS:-}" >>"$calls"
while [ "\$1" != --log-file ]; do shift; done
echo "========= ERROR SUMMARY: 0 errors" >"\$2"
STUB
chmod +x "$tmp/repo/build/worker/"* "$tmp/repo/build/controller/pacer" "$tmp/bin/compute-sanitizer"

# validate GPU_NAME BUDGET: the script against the stubs, a GPU of that name.
validate() {
  printf '#!/bin/sh\ncase "$*" in *noheader*) echo "NVIDIA %s";; *) echo "name, memory.total"; echo "NVIDIA %s, 1 MiB";; esac\n' \
    "$1" "$1" >"$tmp/bin/nvidia-smi"
  chmod +x "$tmp/bin/nvidia-smi"
  : >"$calls"
  PATH="$tmp/bin:$PATH" PACER_VALIDATE_BUDGET_SECONDS=$2 "$tmp/repo/scripts/gpu-validate.sh" build out \
    >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; fail "gpu-validate.sh exited non-zero"; }
  grep -v "^pacer plan" "$calls" >"$tmp/runs" || true
}

validate H200 0
cat >"$tmp/want" <<'WANT'
smoke  cudnn= bf16act=
smoke --compare-cpu cudnn= bf16act=
smoke --compare-cpu --full-attention cudnn= bf16act=
smoke --compare-cpu --full-attention cudnn=0 bf16act=
smoke --compare-cpu cudnn= bf16act=1
smoke --compare-cpu --unfused-attention cudnn= bf16act=
worker calibrate layers=   mb= k= ckpt= type= op_times=0 cudnn= bf16act= causal=
worker run layers=   mb= k= ckpt= type= op_times=0 cudnn= bf16act= causal=
worker run layers=2 bf16  mb=2 k=2 ckpt= type= op_times=0 cudnn= bf16act= causal=
worker run layers=2 bf16  mb=2 k=2 ckpt= type= op_times=0 cudnn= bf16act= causal=
worker run layers=8 bf16 unfused mb=2 k=4 ckpt=none type=H200 op_times=0 cudnn= bf16act= causal=false
worker run layers=8 bf16 fused mb=2 k=4 ckpt=none type=H200 op_times=0 cudnn= bf16act= causal=false
worker run layers=8 bf16 fused mb=2 k=4 ckpt=none type=H200 op_times=0 cudnn= bf16act= causal=true
worker run layers=8 bf16 fused mb=2 k=4 ckpt=none type=H200 op_times=0 cudnn= bf16act=1 causal=false
worker run layers=8 bf16 unfused mb=2 k=4 ckpt=none type=H200 op_times=0 cudnn= bf16act=1 causal=false
worker run layers=8 fp8 unfused mb=2 k=4 ckpt=none type=H200 op_times=0 cudnn= bf16act= causal=false
worker run layers=32 bf16 unfused mb=1 k=8 ckpt=full type=H200 op_times=0 cudnn= bf16act= causal=false
worker run layers=32 bf16 unfused mb=1 k=8 ckpt=full type=H200 op_times=0 cudnn= bf16act=1 causal=false
worker run layers=8 bf16 fused mb=2 k=4 ckpt=none type=H200 op_times=1 cudnn= bf16act= causal=true
worker run layers=8 bf16 fused mb=2 k=4 ckpt=none type=H200 op_times=1 cudnn= bf16act=1 causal=false
worker run layers=8 bf16 fused mb=2 k=4 ckpt=none type=H200 op_times=1 cudnn= bf16act= causal=false
worker run layers=8 bf16 fused mb=2 k=4 ckpt=none type=H200 op_times=1 cudnn=0 bf16act= causal=false
worker run layers=8 bf16 unfused mb=2 k=4 ckpt=none type=H200 op_times=1 cudnn= bf16act= causal=false
WANT
# The memory checker runs last: with fp32 and with bf16 activations, then
# on the unfused attention.
grep -q "^compute-sanitizer --tool memcheck --leak-check full --log-file .* .*pacer-gpu-smoke bf16act=$" <(tail -3 "$tmp/runs" | head -1) ||
  fail "the memory checker did not run third to last: $(tail -3 "$tmp/runs" | head -1)"
grep -q "^compute-sanitizer --tool memcheck --leak-check full --log-file .* .*pacer-gpu-smoke bf16act=1$" <(tail -2 "$tmp/runs" | head -1) ||
  fail "the memory checker with bf16 activations did not run second to last: $(tail -2 "$tmp/runs" | head -1)"
grep -q "^compute-sanitizer --tool memcheck --leak-check full --log-file .* .*pacer-gpu-smoke --unfused-attention bf16act=$" <(tail -1 "$tmp/runs") ||
  fail "the memory checker on the unfused attention did not run last: $(tail -1 "$tmp/runs")"
diff "$tmp/want" <(head -n -3 "$tmp/runs") || fail "steps differ from the expected order (above)"
grep -q "ERROR SUMMARY: 0 errors" "$tmp/out" || fail "the checker's summary is not in the log"
# Every step ran says its exit status and its seconds (to plan the next run).
[ "$(grep -c "^rc=0 ([0-9]* s)$" "$tmp/out")" = 25 ] || fail "want 25 'rc=0 (N s)' lines: $(grep rc= "$tmp/out")"
# The one-GPU checks pass on the worker's own lines.
grep -q "^PASS: two local ranks on one GPU fail fast (exit 2 in [0-9]* s: GPU backend: 2 local ranks but only 1 CUDA devices visible)$" "$tmp/out" ||
  fail "the device-count check did not pass: $(grep -E "^(PASS|FAIL)" "$tmp/out")"
grep -q "^PASS: checkpoint save and resume on the GPU (saved at step 2, resumed there, done at step 4)$" "$tmp/out" ||
  fail "the checkpoint check did not pass: $(grep -E "^(PASS|FAIL)" "$tmp/out")"
! grep -q "^FAIL" "$tmp/out" || fail "a check failed: $(grep "^FAIL" "$tmp/out")"
grep -q "event=done" "$tmp/repo/out/log.txt" || fail "the worker's done lines are not in out/log.txt"
grep -q "gpuTypes: \[H200\]" "$tmp/repo/out/llama7b-shape-l8-h200.yaml" || fail "job file not kept in out/"
# Each CPU comparison quotes the device's line for the path it checks
# (and the bf16 one its storage).
[ "$(grep -c "^path: " "$tmp/out")" = 6 ] || fail "want 6 'path:' lines: $(grep -E "^(path|PATH)" "$tmp/out")"
grep -q "^path: unfused attention runs in bf16 (P stored in bf16)$" "$tmp/out" ||
  fail "the unfused comparison does not quote the device's line: $(grep "^path" "$tmp/out")"
grep -q "^path: fused attention runs cuDNN 9.19.0's SDPA forward and the bf16 backward$" "$tmp/out" ||
  fail "the cuDNN comparison does not quote the device's line: $(grep "^path" "$tmp/out")"
grep -q "^path: stored in bf16$" "$tmp/out" || fail "bf16 storage not confirmed: $(grep "^path" "$tmp/out")"
! grep -q "PATH NOT TAKEN" "$tmp/out" || fail "a path reported not taken: $(grep "PATH NOT" "$tmp/out")"
# A device that quietly falls back to the tiled path is reported, not passed.
STUB_WRONG_PATH=1 validate H200 0
[ "$(grep -c "^PATH NOT TAKEN" "$tmp/out")" = 5 ] ||
  fail "want 5 paths reported not taken: $(grep -E "^(path|PATH)" "$tmp/out")"
# A failing check's own exit status is reported (not its log copy's).
STUB_SMOKE_EXIT=3 validate H200 0
[ "$(grep -c "^rc=3 ([0-9]* s)$" "$tmp/out")" = 6 ] || fail "want 6 'rc=3' lines: $(grep rc= "$tmp/out")"
# A worker that puts two ranks on one GPU, or does not resume, fails its
# check, and the script goes on.
STUB_SHARES_GPU=1 STUB_NO_RESUME=1 validate H200 0
grep -q "^FAIL: two local ranks on one GPU fail fast: exit 0, want exit 2 (invalid-config); no \"GPU backend: 2 local ranks but only 1 CUDA devices visible\" line$" "$tmp/out" ||
  fail "two ranks on one GPU not reported: $(grep -E "^(PASS|FAIL)" "$tmp/out")"
grep -q "^FAIL: checkpoint save and resume on the GPU: the second run did not start at step 2 (resume_step=0)$" "$tmp/out" ||
  fail "a run that did not resume not reported: $(grep -E "^(PASS|FAIL)" "$tmp/out")"
grep -q "layers=8 bf16 unfused" "$tmp/runs" || fail "the jobs after a failed check did not run"

# An H100: the jobs are planned for it, and the 6.7B job (110 GiB) is left out.
validate "H100 80GB HBM3" 0
grep -q "^pacer plan \[H100-SXM\]" "$calls" || fail "jobs not planned for the H100: $(grep '^pacer' "$calls")"
! grep -q "layers=32" "$tmp/runs" || fail "the 6.7B job ran on an H100"
grep -q "layers=8 bf16 unfused .*type=H100-SXM" "$tmp/runs" || fail "the 8-layer job did not run on the H100"

# Other parts are planned as what they are: a PCIe H100's peak is not the
# SXM part's, and a GH200 (96 GB) is no H200 (141 GB).
validate "H100 PCIe" 0
grep -q "layers=8 bf16 unfused .*type=H100-PCIe" "$tmp/runs" || fail "a PCIe H100 ran as: $(grep layers=8 "$tmp/runs" | head -1)"
validate "GH200 480GB" 0
! grep -qE "layers=(8|32) " "$tmp/runs" || fail "the 7B-shaped jobs ran on a GH200: $(grep -E "layers=(8|32) " "$tmp/runs" | head -1)"
# The one-GPU checks need no catalog type.
[ "$(grep -c "^PASS: " "$tmp/out")" = 2 ] || fail "the one-GPU checks did not pass on a GH200: $(grep -E "^(PASS|FAIL)" "$tmp/out")"
grep -q "written for the catalog's H100s and H200" "$tmp/out" || fail "a GH200 is not said to be skipped"

# Why a step failed is in the log: the planner's error, and a worker's own
# message (which is no event= line).
STUB_PLAN_ERROR="no layout fits" validate H200 0
grep -q "^no plan for .*: error: no layout fits$" "$tmp/out" || fail "the planner's reason is not in the log: $(grep "no plan" "$tmp/out" | head -1)"
STUB_WORKER_ERROR="PACER_MICRO_BATCH_SIZE: must be positive" validate H200 0
grep -q "^pacer-worker: PACER_MICRO_BATCH_SIZE: must be positive$" "$tmp/out" || fail "the worker's message is not in the log"
[ "$(grep -c "^rc=2 ([0-9]* s)$" "$tmp/out")" -ge 1 ] || fail "no 'rc=2' line: $(grep rc= "$tmp/out")"
grep -q "whole output: .*worker-1.txt" "$tmp/out" || fail "the whole output's file is not named"
# Exit 2 without the device's message (here a configuration error) is no pass.
grep -q "^FAIL: two local ranks on one GPU fail fast: no \"GPU backend: 2 local ranks but only 1 CUDA devices visible\" line$" "$tmp/out" ||
  fail "exit 2 alone passed the device-count check: $(grep -E "^(PASS|FAIL)" "$tmp/out")"
grep -q "^FAIL: checkpoint save and resume on the GPU: the first run: exit 2, want 0;" "$tmp/out" ||
  fail "a failed first run not reported: $(grep -E "^(PASS|FAIL)" "$tmp/out")"

# A budget already spent: nothing runs, every step says it was skipped.
validate H200 1
[ ! -s "$tmp/runs" ] || fail "steps ran with the budget spent: $(cat "$tmp/runs")"
[ "$(grep -c "^skipped: the budget of 1 s is spent" "$tmp/out")" = 24 ] ||
  fail "want 24 skipped steps: $(grep -c skipped "$tmp/out")"
grep -q "^skipped: [0-9]* s of the budget left, under the 40 s its two runs need$" "$tmp/out" ||
  fail "the checkpoint check is not said to be skipped"
! grep -qE "^(PASS|FAIL)" "$tmp/out" || fail "verdicts for skipped checks: $(grep -E "^(PASS|FAIL)" "$tmp/out")"
! grep -qE "^(path|PATH)" "$tmp/out" || fail "path lines for skipped steps: $(grep -E "^(path|PATH)" "$tmp/out")"
echo "gpu-validate: order, plans, GPU types and budget as expected"
