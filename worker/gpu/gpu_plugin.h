// The GPU backend as a plugin: pacer-worker loads libpacer_worker_gpu.so with
// dlopen only in a rank that runs on a GPU, instead of linking CUDA at start.
//
// Why: libraries linked at start place their thread-local storage in every
// thread's stack. cuBLASLt's is ~94 KiB, more than the small stacks the
// metrics server (civetweb, under prometheus-cpp) gives its threads, so with
// cuBLAS linked at start the /metrics server cannot start a thread. A
// library loaded with dlopen gets its TLS allocated on demand instead. It
// also lets one pacer-worker binary run on nodes without CUDA libraries.
//
// Thread-safety: the table is immutable; its functions follow gpu_backend.h
// and calibrate_gpu.h.
#ifndef PACER_WORKER_GPU_GPU_PLUGIN_H_
#define PACER_WORKER_GPU_GPU_PLUGIN_H_

#include <memory>

#include "core/step_backend.h"
#include "gpu/calibrate_gpu.h"
#include "pacer/status.h"

namespace pacer::worker {

inline constexpr int kGpuPluginVersion = 1;
inline constexpr char kGpuPluginSymbol[] = "PacerGpuPlugin";
inline constexpr char kGpuPluginFile[] = "libpacer_worker_gpu.so";

struct GpuPlugin {
  int version = kGpuPluginVersion;
  std::unique_ptr<StepBackend> (*make_backend)() = nullptr;
  StatusOr<GpuCalibrationReport> (*calibrate)(const GpuCalibrationOptions&) = nullptr;
};

}  // namespace pacer::worker

// Exported by the plugin (C linkage so dlsym finds it by name).
extern "C" const pacer::worker::GpuPlugin* PacerGpuPlugin();

#endif  // PACER_WORKER_GPU_GPU_PLUGIN_H_
