// Which step backend a worker runs, and the factories for it. The GPU
// backend lives in a plugin (gpu/gpu_plugin.h) loaded with dlopen in the
// ranks that use it, never in the supervisor before it forks.
// Thread-safety: ResolveBackend is pure apart from reading the file system;
// LoadGpuPlugin loads once per process (thread-safe, function-local static).
#ifndef PACER_WORKER_APP_BACKEND_CHOICE_H_
#define PACER_WORKER_APP_BACKEND_CHOICE_H_

#include <string>
#include <string_view>

#include "core/runner.h"
#include "core/worker_config.h"
#include "gpu/gpu_plugin.h"
#include "pacer/status.h"

namespace pacer::worker {

// Where the GPU plugin is: $PACER_GPU_PLUGIN, else libpacer_worker_gpu.so
// beside the pacer-worker executable.
std::string GpuPluginPath();

// Whether the GPU plugin file exists (the build found nvcc).
bool GpuBackendBuilt();

// Whether an NVIDIA driver is loaded. Decided without touching CUDA, because
// the supervisor forks its ranks afterwards and CUDA does not survive fork.
bool NvidiaDriverPresent();

// Loads the plugin (once). FailedPrecondition naming the file and dlerror()
// when it cannot be loaded, e.g. without the CUDA libraries, or
// CheckGpuPlugin's error.
StatusOr<const GpuPlugin*> LoadGpuPlugin();

// Whether `plugin` (the table the file at `path` returned) can be used by
// this pacer-worker: the same kGpuPluginVersion and the same
// kGpuPluginLayout (gpu_plugin.h). FailedPrecondition naming the file, what
// differs and the fix otherwise.
Status CheckGpuPlugin(const GpuPlugin* plugin, const std::string& path);

// kAuto -> GPU when the plugin exists and a driver is present, else CPU.
// Asking for the GPU where there is none is InvalidArgument naming the fix
// and `setting`, where the user asked: "--backend" or "PACER_BACKEND".
StatusOr<Backend> ResolveBackend(Backend requested, std::string_view setting);

BackendFactory FactoryFor(Backend backend);

}  // namespace pacer::worker

#endif  // PACER_WORKER_APP_BACKEND_CHOICE_H_
