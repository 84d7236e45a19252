// attention_bench: the attention core's forward + backward on the CPU
// device, unfused (the s x s probabilities stored between the passes)
// against the executor's tiled (fused) attention (worker/core/
// tiled_attention.h), which stores nothing and recomputes Q K^T in the
// backward pass. Shape: one sequence of 8 query heads of size 64 sharing 2
// K/V heads (grouped-query), sequence 256, 512 and 1024; tiles of 128
// query rows. Reports the time per forward + backward and, as counters,
// the peak bytes the device tracker saw and the GEMM FLOPs issued.
//   build/tests/attention_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "core/tiled_attention.h"
#include "cpu/cpu_device.h"

namespace pw = pacer::worker;

namespace {

void Attention(benchmark::State& state, bool tiled) {
  const pw::AttentionShape s{state.range(0), 64, 1, 8, 2};  // one sequence, 8 heads, 2 K/V
  std::unique_ptr<pw::Device> dev = pw::cpu::MakeCpuDevice();
  const size_t qkv_n = static_cast<size_t>(s.QkvElements());
  const size_t ctx_n = static_cast<size_t>(s.CtxElements());
  std::vector<float> host(qkv_n);
  std::mt19937 gen(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& x : host) x = dist(gen);
  using pw::BufferClass;
  pw::DeviceBuffer qkv(dev.get(), BufferClass::kActivations),
      ctx(dev.get(), BufferClass::kActivations), dqkv(dev.get(), BufferClass::kActivations),
      probs(dev.get(), BufferClass::kActivations);
  if (!qkv.Assign(qkv_n).ok() || !ctx.Assign(ctx_n).ok() || !dqkv.Assign(qkv_n).ok() ||
      !dev->CopyFromHost(host.data(), qkv_n, qkv.data()).ok()) {
    state.SkipWithError("allocation failed");
    return;
  }
  double flops = 0;
  for (auto _ : state) {
    dev->ResetCounters();
    bool ok = true;
    if (tiled) {
      ok = pw::TiledAttentionForward(dev.get(), s, qkv.data(), ctx.data()).ok() &&
           // ctx stands in for dctx: any values do.
           pw::TiledAttentionBackward(dev.get(), s, qkv.data(), ctx.data(), dqkv.data()).ok();
    } else {
      ok = probs.Assign(dev->AttentionStashElements(s), pw::Fill::kUndefined).ok() &&
           dev->AttentionForward(s, qkv.data(), probs.data(), ctx.data()).ok() &&
           dev->AttentionBackward(s, qkv.data(), probs.data(), ctx.data(), dqkv.data()).ok();
      probs.Clear();
    }
    if (!ok) {
      state.SkipWithError("attention failed");
      return;
    }
    flops = dev->counters().gemm_flops;
  }
  state.counters["peak_bytes"] = dev->memory().peak_bytes();
  state.counters["gemm_flops"] = flops;
}

void Unfused(benchmark::State& state) { Attention(state, false); }
void Tiled(benchmark::State& state) { Attention(state, true); }

BENCHMARK(Unfused)->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(Tiled)->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
