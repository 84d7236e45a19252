// init_weights_bench: FillInitialWeights (worker/core/initial_weights.h),
// the host-side fill of a rank's initial weights, for one 4096 x 12288
// matrix (a 7B layer's QKV, split by column sections), on 1 thread and on
// every hardware thread, against the whole HashKeys chain per element with
// the mapping resolved per element by the matrix's name (the executor's
// fill before FillInitialWeights). Reports elements per second.
//   build/tests/init_weights_bench --benchmark_repetitions=3
//   --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/hash_keys.h"
#include "core/initial_weights.h"

namespace pw = pacer::worker;

namespace {

constexpr size_t kRows = 4096, kCols = 12288;

void Fill(benchmark::State& state) {
  const auto threads = static_cast<unsigned>(state.range(0));
  const pw::UnsplitMap map = pw::UnsplitMap::Columns({4096, 4096, 4096}, 1, 0);
  std::vector<float> out(kRows * kCols);
  for (auto _ : state) {
    pw::FillInitialWeights(1, 2, map, 0.01f, out.data(), out.size(), threads);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * out.size()));
}

// The former loop, as it was in substance: the matrix's name matched and
// its mapping built per element, then the whole HashKeys chain.
void PerElement(benchmark::State& state) {
  const std::string name = "layers.3/qkv";
  std::vector<float> out(kRows * kCols);
  for (auto _ : state) {
    for (size_t i = 0; i < out.size(); ++i) {
      uint64_t u = i;
      if (name == "embedding" || name == "output" || name.ends_with("/proj") ||
          name.ends_with("/mlp_out")) {
        u = i;
      } else if (name.ends_with("/qkv")) {
        u = pw::UnsplitMap::Columns({4096, 4096, 4096}, 1, 0)(i);
      }
      out[i] = pw::UniformFromHash(pw::HashKeys(1, 0, 2, u, 0x77)) * 0.01f;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * out.size()));
}

BENCHMARK(Fill)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(PerElement)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
