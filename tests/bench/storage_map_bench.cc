// storage_map_bench: the host cost of the GPU device's bf16 activation
// handles (worker/core/storage_map.h): one Add and Remove (an mmap and a
// munmap of reserved address space) for a buffer of a 7B layer's size
// (16.7 M elements, the [tokens x h] activation of 4,096 tokens), and one
// Resolve of an interior pointer among the ~30 handles a layer's forward
// and backward hold at once. The executor makes about 15 narrow
// allocations per layer and micro-batch (480 per step of the 8-layer,
// 4-micro-batch 7B-shaped job) and resolves a few pointers per device call.
//   build/tests/storage_map_bench --benchmark_repetitions=3
//   --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "core/storage_map.h"

namespace pw = pacer::worker;

namespace {

constexpr size_t kElements = size_t{4096} * 4096;

void AddRemove(benchmark::State& state) {
  pw::StorageMap map;
  // Never dereferenced: the physical address only travels through the map.
  auto* physical = reinterpret_cast<void*>(uintptr_t{0x1000});
  for (auto _ : state) {
    auto handle = map.Add(kElements, physical, 2);
    if (!handle.ok()) {
      state.SkipWithError("Add failed");
      break;
    }
    benchmark::DoNotOptimize(map.Remove(*handle));
  }
}
BENCHMARK(AddRemove);

void Resolve(benchmark::State& state) {
  pw::StorageMap map;
  std::vector<float*> handles;
  for (uintptr_t i = 1; i <= 30; ++i) {
    auto handle = map.Add(kElements, reinterpret_cast<void*>(i << 32), 2);
    if (!handle.ok()) {
      state.SkipWithError("Add failed");
      return;
    }
    handles.push_back(*handle);
  }
  size_t k = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(map.Resolve(handles[k % handles.size()] + 12345));
    ++k;
  }
}
BENCHMARK(Resolve);

}  // namespace

BENCHMARK_MAIN();
