// planner_bench: how long planning takes on a large cluster.
// The job: a 70B model (80 layers, hidden 8192, 64 heads, 8 KV heads, SwiGLU
// 28672, s 4096, V 128256), GBS 1024, 2T tokens, bf16, deadline 60 days.
// The cluster: 1024 nodes x 8 GPUs in three pools (512 H100-SXM, 256 H200,
// 256 A100-80GB nodes), with and without each node's free GPUs listed
// (listed: also 10 times as many nodes).
// Goal: median under 20 ms on one core.
//   build/tests/planner_bench --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>

#include "pacer/planner/job_parser.h"
#include "pacer/planner/search.h"

namespace pp = pacer::planner;

namespace {

constexpr char kJob[] = R"(apiVersion: pacer.dev/v1alpha1
kind: TrainJob
metadata: {name: llama-70b}
spec:
  model: {layers: 80, hiddenSize: 8192, attentionHeads: 64, kvHeads: 8, ffnHiddenSize: 28672,
          ffnKind: swiglu, vocabSize: 128256, sequenceLength: 4096}
  data: {tokens: 2e12}
  training: {globalBatchSize: 1024, precision: bf16}
  maxDuration: 60d
  objective: %s
)";

constexpr char kCluster[] = R"(nodePools:
  - {name: h100, gpuType: H100-SXM, nodes: 512, gpusPerNode: 8, networkGbpsPerNode: 3200, pricePerGPUHour: 2.5}
  - {name: h200, gpuType: H200, nodes: 256, gpusPerNode: 8, networkGbpsPerNode: 3200, pricePerGPUHour: 3.2}
  - {name: a100, gpuType: A100-80GB, nodes: 256, gpusPerNode: 8, networkGbpsPerNode: 1600, pricePerGPUHour: 1.6}
)";

pp::JobSpec Job(const char* objective) {
  char buffer[1024];
  std::snprintf(buffer, sizeof(buffer), kJob, objective);
  auto job = pp::ParseTrainJob(buffer);
  if (!job.ok()) {
    std::fprintf(stderr, "%s\n", job.status().ToString().c_str());
    std::abort();
  }
  return *job;
}

// per_node: each pool also lists every node's free GPUs (all 8), as the
// controller's inventory does (NodePool::free_gpus_by_node).
void Plan(benchmark::State& state, const char* objective, bool per_node) {
  const pp::JobSpec job = Job(objective);
  auto inventory = pp::ParseInventory(kCluster);
  if (!inventory.ok()) std::abort();
  if (per_node) {
    // Arg: the cluster scaled up by this factor (10: 10,240 nodes).
    const int scale = static_cast<int>(state.range(0));
    for (pp::NodePool& pool : inventory->node_pools) {
      pool.nodes *= scale;
      pool.free_gpus = pool.nodes * pool.gpus_per_node;
      pool.free_gpus_by_node.assign(pool.nodes, pool.gpus_per_node);
    }
  }
  pp::PlanOptions options;
  options.now_unix_seconds = 1795305600;  // 2026-11-22T00:00:00Z
  pp::SearchStats stats;
  for (auto _ : state) {
    auto result = pp::Plan(job, *inventory, pp::Calibration{}, options);
    if (!result.ok()) state.SkipWithError(result.status().ToString().c_str());
    stats = result->stats;
    benchmark::DoNotOptimize(result);
  }
  state.counters["considered"] = static_cast<double>(stats.layouts_considered);
  state.counters["evaluated"] = static_cast<double>(stats.evaluated);
  state.counters["pruned"] = static_cast<double>(stats.pruned);
}

void PlanLargeCluster(benchmark::State& state, const char* objective) {
  Plan(state, objective, false);
}
void PlanLargeClusterPerNodeFreeGpus(benchmark::State& state, const char* objective) {
  Plan(state, objective, true);
}

}  // namespace

BENCHMARK_CAPTURE(PlanLargeCluster, cost, "cost")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(PlanLargeCluster, time, "time")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(PlanLargeClusterPerNodeFreeGpus, cost, "cost")
    ->Arg(1)
    ->Arg(10)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(PlanLargeClusterPerNodeFreeGpus, time, "time")
    ->Arg(1)
    ->Arg(10)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
