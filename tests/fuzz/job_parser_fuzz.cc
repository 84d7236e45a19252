// libFuzzer target for the document parsers: ParseTrainJob, ParseInventory and
// ParseCalibration must never crash, hang or throw on any input, and what they
// accept must satisfy the invariants JobSpec and Inventory document (the
// planner relies on them without re-checking). Build with -DPACER_FUZZ=ON and
// clang++; run with the seeds in tests/fuzz/corpus.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "pacer/planner/calibration.h"
#include "pacer/planner/inventory.h"
#include "pacer/planner/job_parser.h"

namespace {

using pacer::planner::Calibration;
using pacer::planner::GpuCalibration;
using pacer::planner::Inventory;
using pacer::planner::JobSpec;
using pacer::planner::NodePool;

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

void CheckJob(const JobSpec& job) {
  Check(!job.name.empty());
  Check(job.training.global_batch_size > 0);
  Check(job.data.epochs >= 1);
  Check(job.data.tokens.has_value() != job.data.samples.has_value());
  if (job.data.tokens) Check(std::isfinite(*job.data.tokens) && *job.data.tokens > 0);
  if (job.data.samples) Check(std::isfinite(*job.data.samples) && *job.data.samples > 0);
  const auto& m = job.model;
  Check(m.layers > 0 && m.hidden_size > 0 && m.attention_heads > 0 && m.kv_heads > 0);
  Check(m.hidden_size % m.attention_heads == 0);
  Check(m.attention_heads % m.kv_heads == 0);
  Check(m.ffn_hidden_size > 0 && m.vocab_size > 0 && m.sequence_length > 0);
  if (m.parameters) Check(std::isfinite(*m.parameters) && *m.parameters > 0);
  Check(!(job.deadline_unix_seconds && job.max_duration_seconds));
  if (job.max_duration_seconds) Check(*job.max_duration_seconds > 0);
  Check(job.resources.min_gpus >= 1);
  if (job.resources.max_gpus) Check(*job.resources.max_gpus >= job.resources.min_gpus);
  if (job.parallelism.zero_stage) {
    Check(*job.parallelism.zero_stage >= 0 && *job.parallelism.zero_stage <= 3);
  }
  for (int b : job.training.micro_batch_sizes) Check(b > 0);
  Check(job.replan.slack_fraction >= 0 && job.replan.slack_fraction < 1);
  Check(job.replan.interval_seconds >= 1);
}

void CheckInventory(const Inventory& inventory) {
  Check(!inventory.node_pools.empty());
  for (const NodePool& pool : inventory.node_pools) {
    Check(pool.nodes > 0 && pool.gpus_per_node > 0);
    Check(pool.free_gpus >= 0 && pool.free_gpus <= pool.nodes * pool.gpus_per_node);
    if (!pool.free_gpus_by_node.empty()) {
      Check(static_cast<int>(pool.free_gpus_by_node.size()) == pool.nodes);
      int sum = 0;
      for (int free : pool.free_gpus_by_node) {
        Check(free >= 0 && free <= pool.gpus_per_node);
        sum += free;
      }
      Check(sum == pool.free_gpus);
    }
    Check(pool.network_gbps_per_node > 0);
    Check(inventory.catalog.Find(pool.gpu_type) != nullptr);
    for (int g = 1; g <= pool.gpus_per_node; ++g) {
      const int n = pool.NodesWithFreeGpus(g);
      Check(n >= 0 && n <= pool.nodes);
    }
  }
}

void CheckCalibration(const Calibration& calibration) {
  for (const auto& [name, c] : calibration.by_gpu_type) {
    Check(calibration.Find(name) == &c);
    if (c.gemm_efficiency) Check(*c.gemm_efficiency > 0 && *c.gemm_efficiency <= 1);
    if (c.step_time_ratio) Check(*c.step_time_ratio > 0 && *c.step_time_ratio <= 100);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string document(reinterpret_cast<const char*>(data), size);
  if (auto job = pacer::planner::ParseTrainJob(document); job.ok()) CheckJob(*job);
  if (auto inventory = pacer::planner::ParseInventory(document); inventory.ok()) {
    CheckInventory(*inventory);
  }
  if (auto calibration = pacer::planner::ParseCalibration(document); calibration.ok()) {
    CheckCalibration(*calibration);
  }
  return 0;
}
