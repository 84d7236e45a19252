#include "gpu/gpu_backend.h"

namespace pacer::worker {

std::unique_ptr<StepBackend> MakeGpuBackend() { return std::make_unique<gpu::GpuBackend>(); }

}  // namespace pacer::worker
