#include "app/backend_choice.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "cpu/cpu_backend.h"

namespace pacer::worker {
namespace {

// Stands in for a backend that could not be created, so the failure comes
// out of Initialize with its Status (and exit code) like any other.
class FailedBackend : public StepBackend {
 public:
  explicit FailedBackend(Status status) : status_(std::move(status)) {}
  const char* name() const override { return "gpu"; }
  Status Initialize(const BackendContext&, uint64_t) override { return status_; }
  StatusOr<StepTiming> RunStep(int64_t) override { return status_; }
  double PeakMemoryBytes() const override { return 0; }
  StatusOr<NamedBuffers> SaveBuffers() override { return status_; }
  Status LoadBuffers(const NamedBuffers&) override { return status_; }
  uint64_t CheckpointBufferBytes() const override { return 0; }

 private:
  Status status_;
};

}  // namespace

std::string GpuPluginPath() {
  if (const char* path = std::getenv("PACER_GPU_PLUGIN"); path != nullptr && *path != '\0') {
    return path;
  }
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return kGpuPluginFile;
  return (exe.parent_path() / kGpuPluginFile).string();
}

bool GpuBackendBuilt() { return access(GpuPluginPath().c_str(), R_OK) == 0; }

bool NvidiaDriverPresent() { return access("/proc/driver/nvidia/version", R_OK) == 0; }

StatusOr<const GpuPlugin*> LoadGpuPlugin() {
  static const StatusOr<const GpuPlugin*> loaded = []() -> StatusOr<const GpuPlugin*> {
    const std::string path = GpuPluginPath();
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      return FailedPreconditionError("cannot load the GPU backend " + path + ": " + dlerror());
    }
    using Entry = const GpuPlugin* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(handle, kGpuPluginSymbol));
    if (entry == nullptr) {
      return FailedPreconditionError(path + " has no " + kGpuPluginSymbol + " entry point");
    }
    const GpuPlugin* plugin = entry();
    RETURN_IF_ERROR(CheckGpuPlugin(plugin, path));
    return plugin;
  }();
  return loaded;
}

Status CheckGpuPlugin(const GpuPlugin* plugin, const std::string& path) {
  const std::string fix =
      "; install the libpacer_worker_gpu.so built with this pacer-worker (beside it, or named "
      "by PACER_GPU_PLUGIN)";
  if (plugin == nullptr) return FailedPreconditionError(path + " returned no plugin table" + fix);
  // `version` is the one field every version of the table has in place.
  if (plugin->version != kGpuPluginVersion) {
    return FailedPreconditionError(path + " is version " + std::to_string(plugin->version) +
                                   " of the GPU plugin interface, this pacer-worker needs " +
                                   std::to_string(kGpuPluginVersion) + fix);
  }
  if (plugin->layout != kGpuPluginLayout) {
    char layouts[96];
    std::snprintf(layouts, sizeof(layouts), "layout %016llx, this pacer-worker's %016llx",
                  static_cast<unsigned long long>(plugin->layout),
                  static_cast<unsigned long long>(kGpuPluginLayout));
    return FailedPreconditionError(
        path + " was built with other layouts of WorkerConfig or the backend's types (" + layouts +
        "): it would read the plan's fields at the wrong places" + fix);
  }
  return Status::Ok();
}

StatusOr<Backend> ResolveBackend(Backend requested, std::string_view setting) {
  const bool gpu_possible = GpuBackendBuilt() && NvidiaDriverPresent();
  switch (requested) {
    case Backend::kAuto: return gpu_possible ? Backend::kGpu : Backend::kCpu;
    case Backend::kCpu: return Backend::kCpu;
    case Backend::kGpu:
      if (!GpuBackendBuilt()) {
        return InvalidArgumentError(std::string(setting) + ": gpu requested but the GPU backend " +
                                    GpuPluginPath() +
                                    " is missing (built without nvcc?); use cpu or a CUDA build");
      }
      if (!NvidiaDriverPresent()) {
        return InvalidArgumentError(
            std::string(setting) +
            ": gpu requested but no NVIDIA driver is loaded on this node; use cpu or schedule the "
            "pod on a GPU node");
      }
      return Backend::kGpu;
  }
  return Backend::kCpu;
}

BackendFactory FactoryFor(Backend backend) {
  if (backend == Backend::kGpu) {
    return []() -> std::unique_ptr<StepBackend> {
      StatusOr<const GpuPlugin*> plugin = LoadGpuPlugin();
      if (!plugin.ok()) return std::make_unique<FailedBackend>(plugin.status());
      return (*plugin)->make_backend();
    };
  }
  return [] { return MakeCpuBackend(); };
}

}  // namespace pacer::worker
