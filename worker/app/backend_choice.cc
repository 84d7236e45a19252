#include "app/backend_choice.h"

#include <unistd.h>

#include "cpu/cpu_backend.h"
#ifdef PACER_HAVE_CUDA
#include "gpu/gpu_backend.h"
#endif

namespace pacer::worker {

bool GpuBackendBuilt() {
#ifdef PACER_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

bool NvidiaDriverPresent() { return access("/proc/driver/nvidia/version", R_OK) == 0; }

StatusOr<Backend> ResolveBackend(Backend requested) {
  const bool gpu_possible = GpuBackendBuilt() && NvidiaDriverPresent();
  switch (requested) {
    case Backend::kAuto: return gpu_possible ? Backend::kGpu : Backend::kCpu;
    case Backend::kCpu: return Backend::kCpu;
    case Backend::kGpu:
      if (!GpuBackendBuilt()) {
        return InvalidArgumentError(
            "PACER_BACKEND: gpu requested but this pacer-worker was built without CUDA; use cpu "
            "or a build with nvcc");
      }
      if (!NvidiaDriverPresent()) {
        return InvalidArgumentError(
            "PACER_BACKEND: gpu requested but no NVIDIA driver is loaded on this node; use cpu "
            "or schedule the pod on a GPU node");
      }
      return Backend::kGpu;
  }
  return Backend::kCpu;
}

BackendFactory FactoryFor(Backend backend) {
#ifdef PACER_HAVE_CUDA
  if (backend == Backend::kGpu) return [] { return MakeGpuBackend(); };
#else
  (void)backend;
#endif
  return [] { return MakeCpuBackend(); };
}

}  // namespace pacer::worker
