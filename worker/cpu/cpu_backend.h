// The CPU backend: the step executor (core/step_executor.h) over the CPU
// device (cpu_device.h: OpenBLAS sgemm, fp32 kernels, Gloo over TCP). It is
// what CI, the tests and the local quickstart run, and what pacer-worker
// picks when no GPU is present (or with --backend cpu); --scale shrinks the
// model (ApplyScale in core/worker_config.h) so a step takes seconds.
//
// Units: seconds, bytes, FLOPs (multiply-add = 2).
// Thread-safety: one rank's thread (StepBackend's contract). Several
// instances may run in one process, one thread each (as the tests do).
#ifndef PACER_WORKER_CPU_CPU_BACKEND_H_
#define PACER_WORKER_CPU_CPU_BACKEND_H_

#include <memory>

#include "core/step_executor.h"
#include "cpu/cpu_device.h"

namespace pacer::worker {

// The CPU backend, as the runner sees it: without the test hooks' host
// copies (host memory outside the tracker, time inside the step).
std::unique_ptr<StepBackend> MakeCpuBackend();

namespace cpu {

// The executor over a CPU device, with the executor's test hooks (for the
// tests, not pacer-worker).
class CpuBackend : public StepExecutor {
 public:
  CpuBackend() : StepExecutor(MakeCpuDevice()) {}
};

}  // namespace cpu
}  // namespace pacer::worker

#endif  // PACER_WORKER_CPU_CPU_BACKEND_H_
