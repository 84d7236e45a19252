// The entry point of libpacer_worker_gpu.so (see gpu_plugin.h).
#include "gpu/gpu_plugin.h"

#include "gpu/gpu_backend.h"

extern "C" const pacer::worker::GpuPlugin* PacerGpuPlugin() {
  static const pacer::worker::GpuPlugin plugin = {
      pacer::worker::kGpuPluginVersion,
      &pacer::worker::MakeGpuBackend,
      &pacer::worker::CalibrateGpu,
  };
  return &plugin;
}
