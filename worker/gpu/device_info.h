// The GPUs this process can see, as the worker reports them and as the
// controller's local mode will match them against the GPU catalog.
// Units: bytes for memory. Thread-safety: QueryDevices() is safe to call from
// any thread (it only reads device properties).
#ifndef PACER_WORKER_GPU_DEVICE_INFO_H_
#define PACER_WORKER_GPU_DEVICE_INFO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "pacer/status.h"

namespace pacer::worker {

struct DeviceInfo {
  int index = 0;
  std::string name;               // e.g. "NVIDIA H100 80GB HBM3"
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int64_t total_memory_bytes = 0;
  int multiprocessors = 0;
};

// Every visible device; an empty list (not an error) when the driver reports
// none or there is no driver. A driver older than the CUDA runtime this was
// built with is FailedPrecondition, naming both versions. Other errors carry
// host, file and line (CUDACHECK).
StatusOr<std::vector<DeviceInfo>> QueryDevices();

}  // namespace pacer::worker

#endif  // PACER_WORKER_GPU_DEVICE_INFO_H_
