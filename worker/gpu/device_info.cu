#include "gpu/device_info.h"

#include "gpu/cuda_check.h"

namespace pacer::worker {
namespace {

Status Query(std::vector<DeviceInfo>* out) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  // No driver or no device is a normal answer on CPU machines, not a failure.
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) {
    (void)cudaGetLastError();
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
