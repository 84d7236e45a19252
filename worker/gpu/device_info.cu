#include "gpu/device_info.h"

#include <string>

#include "gpu/cuda_check.h"

namespace pacer::worker {
namespace {

// CUDA's version numbers (1000 * major + 10 * minor) as "13.0".
std::string CudaVersionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

Status Query(std::vector<DeviceInfo>* out) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  // No driver or no device is a normal answer on CPU machines, not a failure.
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    (void)cudaGetLastError();
    // But a driver older than the runtime is a GPU node that needs an
    // update: "no device" sent people looking for a missing GPU.
    int driver_version = 0;
    int runtime_version = 0;
    if (err == cudaErrorInsufficientDriver &&
        cudaDriverGetVersion(&driver_version) == cudaSuccess && driver_version > 0 &&
        cudaRuntimeGetVersion(&runtime_version) == cudaSuccess) {
      return FailedPreconditionError(
          "the NVIDIA driver on this machine supports CUDA " + CudaVersionText(driver_version) +
          ", older than the CUDA " + CudaVersionText(runtime_version) +
          " this pacer-worker was built with: update the node's driver to one for CUDA " +
          CudaVersionText(runtime_version) + " or newer, or use --backend cpu");
    }
    return Status::Ok();
  }
  CUDACHECK(err);
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    CUDACHECK(cudaGetDeviceProperties(&prop, i));
    DeviceInfo info;
    info.index = i;
    info.name = prop.name;
    info.compute_capability_major = prop.major;
    info.compute_capability_minor = prop.minor;
    info.total_memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    info.multiprocessors = prop.multiProcessorCount;
    out->push_back(info);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<DeviceInfo>> QueryDevices() {
  std::vector<DeviceInfo> devices;
  Status s = Query(&devices);
  if (!s.ok()) return s;
  return devices;
}

}  // namespace pacer::worker
