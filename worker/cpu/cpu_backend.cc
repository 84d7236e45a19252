#include "cpu/cpu_backend.h"

namespace pacer::worker {

std::unique_ptr<StepBackend> MakeCpuBackend() { return std::make_unique<cpu::CpuBackend>(); }

}  // namespace pacer::worker
