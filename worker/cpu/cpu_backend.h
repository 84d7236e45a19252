// CpuBackend: the StepBackend that runs a StepSchedule on the host, with
// OpenBLAS sgemm for the GEMMs and Gloo over TCP for the collectives. It is
// what CI, the tests and the local quickstart run, and what pacer-worker
// picks when no GPU is present (or with --backend cpu); --scale shrinks the
// model (ApplyScale in core/worker_config.h) so a step takes seconds.
//
// It executes the schedule faithfully: every GEMM at the schedule's shape
// (batched ones as a loop), every tensor-parallel collective of a layer on
// real data (sequence parallelism: all-gather in, reduce-scatter out), the
// 1F1B order with point-to-point activations and gradients between stages,
// the recomputation the plan asks for, the data-parallel bucket collectives
// (all-reduce under ZeRO 0; reduce-scatter and all-gather under ZeRO 1-3,
// the optimizer updating only this rank's shard), then AdamW. The numbers
// are a real (if simplified) transformer's: RMS norm without gain, GELU or
// SwiGLU, softmax attention, a cross-entropy loss on the last stage over
// this rank's vocabulary shard; tokens and labels are drawn from (seed,
// step, micro-batch, data-parallel rank), so data-parallel ranks produce
// different gradients and the all-reduce really sums them. All arithmetic is
// fp32, whatever the plan's precision (logged once); FLOPs and bus bytes are
// counted as the schedule defines them (bus bytes at the plan's precision).
//
// Simplifications, each because the schedule lists no collective for it:
// the embedding lookup reads this rank's vocabulary shard (token modulo the
// shard), and the logits GEMM takes this rank's sequence shard repeated t
// times instead of gathering the others'. ZeRO 3 keeps full weights between
// its per-micro-batch all-gathers.
//
// Units: seconds, bytes, FLOPs (multiply-add = 2).
// Thread-safety: one rank's thread (StepBackend's contract). Several
// instances may run in one process, one thread each (as the tests do);
// OpenBLAS's thread count is process-wide and set to cores / local ranks.
#ifndef PACER_WORKER_CPU_CPU_BACKEND_H_
#define PACER_WORKER_CPU_CPU_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/step_backend.h"

namespace pacer::worker {

// The CPU backend, as the runner sees it.
std::unique_ptr<StepBackend> MakeCpuBackend();

namespace cpu {

class CpuBackend : public StepBackend {
 public:
  CpuBackend();
  ~CpuBackend() override;

  const char* name() const override { return "cpu"; }
  Status Initialize(const BackendContext& context, uint64_t seed) override;
  StatusOr<StepTiming> RunStep(int64_t step) override;
  double PeakMemoryBytes() const override;
  StatusOr<NamedBuffers> SaveBuffers() override;
  Status LoadBuffers(const NamedBuffers& buffers) override;

  // Test hooks (not part of StepBackend). All refer to the last RunStep.
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

 private:
  class Impl;  // cpu_backend.cc: buffers, communicators, the step itself
  std::unique_ptr<Impl> impl_;
};

}  // namespace cpu
}  // namespace pacer::worker

#endif  // PACER_WORKER_CPU_CPU_BACKEND_H_
