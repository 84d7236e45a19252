// pacer-gpu-info: lists the visible GPUs (name, compute capability, memory).
// Exit 0 with a list (possibly empty), 1 on a CUDA error, 2 for any argument
// but --help (it takes none).
#include <cstdio>
#include <cstring>

#include "gpu/device_info.h"

int main(int argc, char** argv) {
  constexpr const char* kUsage =
      "usage: pacer-gpu-info\n"
      "Lists the visible CUDA devices, one per line: index, name, compute capability,\n"
      "memory (GiB), multiprocessors. Exit codes: 0 listed (possibly none), 1 CUDA error,\n"
      "2 bad arguments.\n";
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc > 1) {
    std::fprintf(stderr, "pacer-gpu-info: unexpected argument \"%s\"; it takes none\n%s", argv[1],
                 kUsage);
    return 2;
  }
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
