// The entry point of libpacer_worker_gpu.so (see gpu_plugin.h).
#include "gpu/gpu_plugin.h"

#include "gpu/gpu_backend.h"

extern "C" const pacer::worker::GpuPlugin* PacerGpuPlugin() {
  static const pacer::worker::GpuPlugin plugin = {
      pacer::worker::kGpuPluginVersion,
      // This build's layout, compiled here: pacer-worker compares it with
      // its own (gpu_plugin.h).
      pacer::worker::kGpuPluginLayout,
      &pacer::worker::MakeGpuBackend,
      &pacer::worker::CalibrateGpu,
  };
  return &plugin;
}
