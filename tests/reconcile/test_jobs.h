// TrainJobs and clusters shared by the reconciler's tests.
// Thread-safety: pure functions.
#ifndef PACER_TESTS_RECONCILE_TEST_JOBS_H_
#define PACER_TESTS_RECONCILE_TEST_JOBS_H_

#include <nlohmann/json.hpp>
#include <string>

#include "core/node_inventory.h"

namespace pacer::controller::testing {

// The 7B job of manifests/examples/llama-7b-h100.yaml: planned on 16 H100s,
// about 7.7 days against a 14-day limit, created at the fake clock's start.
inline nlohmann::json LlamaJob(const std::string& name = "llama",
                        const std::string& max_duration = "14d") {
  return nlohmann::json::parse(R"({
    "apiVersion": "pacer.dev/v1alpha1", "kind": "TrainJob",
    "metadata": {"name": ")" + name +
                               R"(", "namespace": "research", "uid": "uid-)" + name +
                               R"(", "generation": 1, "creationTimestamp": "2026-11-22T00:00:00Z"},
    "spec": {
      "model": {"parameters": 6.7e9, "layers": 32, "hiddenSize": 4096, "attentionHeads": 32,
                "kvHeads": 32, "ffnHiddenSize": 11008, "ffnKind": "swiglu", "vocabSize": 32000,
                "sequenceLength": 4096},
      "data": {"tokens": 140e9},
      "training": {"globalBatchSize": 1024, "precision": "bf16"},
      "maxDuration": ")" + max_duration +
                               R"(",
      "objective": "cost",
      "resources": {"gpuTypes": ["H100-SXM"], "minGPUs": 8},
      "replan": {"enabled": true, "interval": "60s", "slack": "5%"}
    }})");
}

// 16 nodes x 8 H100s, all free.
inline ClusterInventory H100Cluster(int nodes = 16, int free_gpus = -1) {
  ClusterInventory c;
  planner::NodePool pool;
  pool.name = "h100";
  pool.gpu_type = "H100-SXM";
  pool.nodes = nodes;
  pool.gpus_per_node = 8;
  pool.free_gpus = free_gpus < 0 ? nodes * 8 : free_gpus;
  pool.network_gbps_per_node = 3200;
  pool.nvlink_gbps = 900;
  c.inventory.node_pools.push_back(pool);
  return c;
}

}  // namespace pacer::controller::testing

#endif  // PACER_TESTS_RECONCILE_TEST_JOBS_H_
