// StepExecutor: the one implementation of a training step, over a Device
// (device.h). It is the StepBackend the runner drives; a backend is a
// Device plus this executor (MakeCpuBackend in worker/cpu/cpu_backend.h).
//
// It executes the rank's StepSchedule faithfully: every GEMM at the
// schedule's shape (attention's batched GEMMs through the device's
// attention call), every tensor-parallel collective of a layer on real data
// (sequence parallelism: all-gather in, reduce-scatter out), the 1F1B order
// with point-to-point activations and gradients between stages, the
// recomputation the plan asks for, the data-parallel bucket collectives
// (all-reduce under ZeRO 0; reduce-scatter and all-gather under ZeRO 1-3,
// the optimizer updating only this rank's shard), then AdamW. The numbers
// are a real (if simplified) transformer's: RMS norm without gain, GELU or
// SwiGLU, softmax attention, a cross-entropy loss on the last stage over
// this rank's vocabulary shard; tokens and labels are drawn from (seed,
// step, micro-batch, data-parallel rank), so data-parallel ranks produce
// different gradients and the all-reduce really sums them. Storage and
// arithmetic are fp32, at the GEMM precision the device reports
// (ExecutedPrecision); FLOPs and bus bytes are counted as the schedule
// defines them (bus bytes at the plan's precision).
//
// Tensor parallelism is Megatron's, so t ranks compute exactly the one-rank
// model (weights hashed by their place in the unsplit matrix,
// UnsplitIndex): attention heads and MLP columns split across ranks, the
// tables by vocabulary (a vocabulary-parallel embedding reduce-scattered
// into sequence shards; the logits over the gathered sequence, with a
// vocabulary-parallel cross-entropy whose per-token statistics are
// gathered). Under ZeRO 2 and 3 no full-size
// gradient buffer exists: gradients go through per-bucket buffers,
// reduce-scattered into this rank's shard as soon as a micro-batch has
// written a bucket. ZeRO 3 over d > 1 ranks also shards the weights (FSDP):
// the buckets are the units (tables, layers), gathered one ahead of use in
// each pass and freed after, so a rank holds 1/d of the weights plus at most
// two units' full weights (docs/worker.md).
//
// Units: seconds, bytes, FLOPs (multiply-add = 2).
// Thread-safety: one rank's thread (StepBackend's contract).
#ifndef PACER_WORKER_CORE_STEP_EXECUTOR_H_
#define PACER_WORKER_CORE_STEP_EXECUTOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/step_backend.h"

namespace pacer::worker {

// A named matrix in this rank's parameter vector: "embedding", "output",
// or "layer<global index>/<qkv|proj|mlp_in|mlp_out>"; offsets and lengths
// in elements. Padding up to the schedule's parameter count is unnamed.
struct ParameterRange {
  std::string name;
  size_t offset = 0;
  size_t length = 0;
};

// The L2 norm of `values` over each of `ranges` (per-matrix norms of the
// gradients or weights the test hooks below return), in their order; a
// range past the end of `values` counts what it holds.
std::vector<double> RangeNorms(const std::vector<float>& values,
                               const std::vector<ParameterRange>& ranges);

class StepExecutor : public StepBackend {
 public:
  // `host_copies`: keep the test hooks' host copies below (a device-to-
  // host copy of every gradient bucket and of the weights each step, and
  // host memory for them). The CPU backend keeps them for its tests; the GPU
  // backend does not, since on a GPU they would stall every bucket and cost
  // host memory the size of the model.
  explicit StepExecutor(std::unique_ptr<Device> device, bool host_copies = true);
  ~StepExecutor() override;

  const char* name() const override;
  Status CheckPlan(const WorkerConfig& c) const override;
  Status Initialize(const BackendContext& context, uint64_t seed) override;
  StatusOr<StepTiming> RunStep(int64_t step) override;
  double PeakMemoryBytes() const override;
  StatusOr<NamedBuffers> SaveBuffers() override;
  Status LoadBuffers(const NamedBuffers& buffers) override;
  uint64_t CheckpointBufferBytes() const override;
  planner::Precision ExecutedPrecision(planner::Precision planned) const override;

  Device& device() { return *device_; }
  const MemoryTracker& memory() const { return device_->memory(); }

  // Test hooks (not part of StepBackend), host copies made after each
  // RunStep (empty unless constructed with host_copies). They cost host
  // memory outside the device's tracker.
  // This rank's gradients as its own micro-batches produced them (summed
  // over the micro-batches), before any data-parallel reduction.
  const std::vector<float>& local_gradients_before_reduce() const;
  // The gradients after the data-parallel reduction: all of them under
  // ZeRO 0; under ZeRO 1-3 only owned_ranges() hold the reduced sums, the
  // rest is zero.
  const std::vector<float>& gradients_after_reduce() const;
  // This rank's full weight copy.
  const std::vector<float>& parameters() const;
  // (offset, length) of the parameter ranges this rank's optimizer updates.
  const std::vector<std::pair<size_t, size_t>>& owned_ranges() const;
  // Mean cross-entropy over the last step's micro-batches (last stage only).
  double last_loss() const;
  // The matrices of parameters(), by name (fixed at Initialize).
  const std::vector<ParameterRange>& parameter_ranges() const;
  // Where element i of range r lies in the unsplit (t = 1) matrix of the
  // same name (row-major index): the initial weights hash it, so a tensor-
  // parallel rank holds exactly its share of the one-rank model.
  uint64_t UnsplitIndex(const ParameterRange& r, size_t i) const;

 private:
  class Impl;  // step_executor.cc: buffers, the step itself
  std::unique_ptr<Device> device_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_STEP_EXECUTOR_H_
