// pacer-gpu-info: lists the visible GPUs (name, compute capability, memory).
// Exit 0 with a list (possibly empty), 1 on a CUDA error.
#include <cstdio>

#include "gpu/device_info.h"

int main() {
  auto devices = pacer::worker::QueryDevices();
  if (!devices.ok()) {
    std::fprintf(stderr, "pacer-gpu-info: %s\n", devices.status().ToString().c_str());
    return 1;
  }
  if (devices->empty()) std::printf("no CUDA devices visible\n");
  for (const auto& d : *devices) {
    std::printf("%d\t%s\tsm_%d%d\t%.1f GiB\t%d SMs\n", d.index, d.name.c_str(),
                d.compute_capability_major, d.compute_capability_minor,
                static_cast<double>(d.total_memory_bytes) / (1024.0 * 1024 * 1024),
                d.multiprocessors);
  }
  return 0;
}
