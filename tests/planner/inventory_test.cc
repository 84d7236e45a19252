#include "pacer/planner/inventory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "pacer/planner/job_parser.h"
#include "pacer/planner/search.h"

namespace pacer::planner {
namespace {

using ::testing::HasSubstr;

constexpr char kInventory[] = R"(nodePools:
  - name: h100-a
    gpuType: h100-sxm
    nodes: 64
    gpusPerNode: 8
    freeGPUs: 480
    networkGbpsPerNode: 3200
    pricePerGPUHour: 2.5
  - name: mi
    gpuType: MI300X
    nodes: 4
    gpusPerNode: 8
    networkGbpsPerNode: 1600
    nvlinkGBps: 896
gpuTypes:
  - name: MI300X
    bf16TFLOPS: 1307
    fp8TFLOPS: 2615
    memoryGB: 192
    hbmGBps: 5300
  - name: A100-80GB
    pricePerGPUHour: 1.1
)";

std::string InventoryErrorOf(const std::string& doc) {
  StatusOr<Inventory> inv = ParseInventory(doc);
  if (inv.ok()) return "OK";
  EXPECT_EQ(inv.status().code(), StatusCode::kInvalidArgument) << inv.status().ToString();
  return inv.status().message();
}

TEST(InventoryTest, ParsesPoolsAndGpuTypes) {
  StatusOr<Inventory> parsed = ParseInventory(kInventory);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const Inventory& inv = *parsed;
  ASSERT_EQ(inv.node_pools.size(), 2u);
  const NodePool& h100 = inv.node_pools[0];
  EXPECT_EQ(h100.name, "h100-a");
  EXPECT_EQ(h100.gpu_type, "H100-SXM");  // canonical spelling
  EXPECT_EQ(h100.nodes, 64);
  EXPECT_EQ(h100.gpus_per_node, 8);
  EXPECT_EQ(h100.free_gpus, 480);
  EXPECT_EQ(h100.network_gbps_per_node, 3200);
  EXPECT_EQ(h100.nvlink_gbps, 900);  // from the catalog
  EXPECT_EQ(h100.price_per_gpu_hour, 2.5);

  const NodePool& mi = inv.node_pools[1];
  EXPECT_EQ(mi.gpu_type, "MI300X");
  EXPECT_EQ(mi.free_gpus, 32);  // all by default
  EXPECT_EQ(mi.nvlink_gbps, 896);
  EXPECT_EQ(mi.price_per_gpu_hour, 0);

  const GpuType* mi300 = inv.catalog.Find("MI300X");
  ASSERT_NE(mi300, nullptr);
  EXPECT_EQ(mi300->bf16_tflops, 1307);
  EXPECT_EQ(mi300->fp16_tflops, 1307);  // defaults to bf16
  EXPECT_EQ(mi300->fp8_tflops, 2615);
  EXPECT_EQ(mi300->memory_gb, 192);

  // A partial override keeps the datasheet fields.
  const GpuType* a100 = inv.catalog.Find("A100-80GB");
  ASSERT_NE(a100, nullptr);
  EXPECT_EQ(a100->price_per_gpu_hour, 1.1);
  EXPECT_EQ(a100->bf16_tflops, 312);
  EXPECT_EQ(a100->memory_gb, 80);
}

// The controller compares a job's last layout with these counts: two pools of
// one type in different spellings are one count, busy GPUs count, and a pool
// of a type the catalog lacks counts for no type.
TEST(InventoryTest, GpusByTypeCountsEveryGpuUnderItsCanonicalName) {
  Inventory inv;
  inv.node_pools.push_back(
      {.name = "a", .gpu_type = "H100-SXM", .nodes = 2, .gpus_per_node = 8, .free_gpus = 0});
  inv.node_pools.push_back(
      {.name = "b", .gpu_type = "h100-sxm", .nodes = 1, .gpus_per_node = 4, .free_gpus = 4});
  inv.node_pools.push_back({.name = "c", .gpu_type = "A100-80GB", .nodes = 3, .gpus_per_node = 8});
  inv.node_pools.push_back(
      {.name = "d", .gpu_type = "no-such-gpu", .nodes = 5, .gpus_per_node = 8});
  const std::map<std::string, int> counts = GpusByType(inv);
  EXPECT_EQ(counts, (std::map<std::string, int>{{"A100-80GB", 24}, {"H100-SXM", 20}}));
}

TEST(InventoryTest, OverrideKeepsCanonicalName) {
  StatusOr<Inventory> inv = ParseInventory(R"(
gpuTypes: [{name: h200, pricePerGPUHour: 3.5}]
nodePools: [{name: p, gpuType: H200, nodes: 2, gpusPerNode: 8, networkGbpsPerNode: 3200}]
)");
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->catalog.Find("H200")->name, "H200");
  EXPECT_EQ(inv->node_pools[0].price_per_gpu_hour, 3.5);
}

// A built-in entry carries the device's MiB, which memory_bytes() prefers
// to the datasheet GB: an override of memoryGB must replace both, or the
// planner keeps fitting layouts into the datasheet's memory.
TEST(InventoryTest, AMemoryOverrideReplacesTheBuiltInDeviceMemory) {
  StatusOr<Inventory> inv = ParseInventory(R"(
gpuTypes: [{name: H100-SXM, memoryGB: 40}]
nodePools: [{name: p, gpuType: H100-SXM, nodes: 2, gpusPerNode: 8, networkGbpsPerNode: 3200}]
)");
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_DOUBLE_EQ(inv->catalog.Find("H100-SXM")->memory_bytes(), 40e9);
  // Without the override the device's 81,559 MiB stand.
  StatusOr<Inventory> plain = ParseInventory(
      "nodePools: [{name: p, gpuType: H100-SXM, nodes: 2, gpusPerNode: 8, "
      "networkGbpsPerNode: 3200}]\n");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_DOUBLE_EQ(plain->catalog.Find("H100-SXM")->memory_bytes(), 81559.0 * 1048576.0);
}

// An fp8 plan times its 16-bit parts (attention, logits) at the bf16
// peak, or the fp16 one on a new type that gives no bf16TFLOPS: a zero
// peak made the step take forever.
TEST(InventoryTest, AnFp8PlanOnAnFp16OnlyTypeHasAFiniteStepTime) {
  StatusOr<Inventory> inv = ParseInventory(R"(
gpuTypes: [{name: X16, fp16TFLOPS: 400, fp8TFLOPS: 800, memoryGB: 80, hbmGBps: 3000}]
nodePools: [{name: p, gpuType: X16, nodes: 4, gpusPerNode: 8, networkGbpsPerNode: 3200}]
)");
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  StatusOr<JobSpec> job = ParseTrainJob(R"(apiVersion: pacer.dev/v1alpha1
kind: TrainJob
metadata: {name: j}
spec:
  model: {layers: 8, hiddenSize: 1024, attentionHeads: 16, sequenceLength: 2048}
  data: {tokens: 1e9}
  training: {globalBatchSize: 64, precision: fp8}
)");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  PlanOptions options;
  options.now_unix_seconds = 1795305600;
  StatusOr<PlanResult> r = Plan(*job, *inv, {}, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->plan.has_value());
  EXPECT_TRUE(std::isfinite(r->plan->step.step_seconds));
  EXPECT_TRUE(std::isfinite(r->plan->total.total_seconds));
}

TEST(InventoryTest, JsonWorksToo) {
  StatusOr<Inventory> inv = ParseInventory(
      R"({"nodePools": [{"name": "a", "gpuType": "A100-40GB", "nodes": 2, "gpusPerNode": 4,
          "freeGPUs": 5, "networkGbpsPerNode": 800}]})");
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->node_pools[0].free_gpus, 5);
}

TEST(InventoryTest, ErrorsNameThePath) {
  const std::string pool0 =
      "nodePools:\n  - {name: a, gpuType: H100-SXM, nodes: 2, gpusPerNode: 8, "
      "networkGbpsPerNode: 3200}\n";
  EXPECT_EQ(InventoryErrorOf(pool0 + "  - {name: b, gpuType: H100-SXM, nodes: 2, gpusPerNode: 0, "
                                     "networkGbpsPerNode: 3200}\n"),
            "nodePools[1].gpusPerNode: must be a positive integer, got 0");
  EXPECT_EQ(InventoryErrorOf("nodePools:\n  - {name: a, gpuType: H1000, nodes: 2, gpusPerNode: 8, "
                             "networkGbpsPerNode: 3200}\n"),
            "nodePools[0].gpuType: unknown GPU type \"H1000\"; known types: A100-40GB, "
            "A100-80GB, H100-SXM, H100-PCIe, H100-NVL, H200, B200, L40S, V100-SXM2; add it under "
            "gpuTypes");
  EXPECT_EQ(InventoryErrorOf(pool0 + pool0.substr(11)),
            "nodePools[1].name: duplicate pool name (also nodePools[0]), got \"a\"");
  EXPECT_EQ(
      InventoryErrorOf("nodePools:\n  - {name: a, gpuType: H100-SXM, nodes: 2, gpusPerNode: 8, "
                       "freeGPUs: 17, networkGbpsPerNode: 3200}\n"),
      "nodePools[0].freeGPUs: must be at most nodes x gpusPerNode (16), got 17");
  EXPECT_EQ(
      InventoryErrorOf("nodePools:\n  - {name: a, gpuType: H100-SXM, nodes: 2, gpusPerNode: 8, "
                       "networkGbpsPerNode: 3200, gpuPerNode: 8}\n"),
      "nodePools[0].gpuPerNode: unknown field; did you mean gpusPerNode?");
  EXPECT_EQ(
      InventoryErrorOf("nodePools:\n  - {name: a, gpuType: H100-SXM, nodes: 2, gpusPerNode: 8}\n"),
      "nodePools[0].networkGbpsPerNode: required");
  EXPECT_EQ(InventoryErrorOf("nodePools: []\n"), "nodePools: must list at least one node pool");
  EXPECT_EQ(InventoryErrorOf("gpuTypes: []\n"), "nodePools: required: a list of node pools");
  EXPECT_EQ(InventoryErrorOf("nodePools:\n  - {name: a, gpuType: H100-SXM, nodes: 200000, "
                             "gpusPerNode: 8, networkGbpsPerNode: 3200}\n"),
            "nodePools[0].nodes: must be at most 100000, got 200000");
  EXPECT_EQ(
      InventoryErrorOf("nodePools:\n  - {name: a, gpuType: H100-SXM, nodes: 2, gpusPerNode: 8, "
                       "networkGbpsPerNode: -1}\n"),
      "nodePools[0].networkGbpsPerNode: must be a positive number, got -1");
  EXPECT_THAT(InventoryErrorOf("gpuTypes: [{name: X1, bf16TFLOPS: 100, memoryGB: 80}]\n" + pool0),
              HasSubstr("gpuTypes[0].hbmGBps: required for a new GPU type"));
  EXPECT_THAT(InventoryErrorOf("gpuTypes: [{name: X1, memoryGB: 80, hbmGBps: 1000}]\n" + pool0),
              HasSubstr("gpuTypes[0]: a new GPU type (\"X1\") needs bf16TFLOPS or fp16TFLOPS"));
  EXPECT_THAT(InventoryErrorOf("nodePools: {}\n"), HasSubstr("nodePools: must be a list"));
  EXPECT_THAT(InventoryErrorOf("nodePools: [\n"), HasSubstr("malformed YAML at line"));
  EXPECT_EQ(InventoryErrorOf(""), "inventory: the document is empty");
}

// A name is printed in the plan's table and in one-line messages: a line
// feed or an escape sequence written as a JSON escape split the plan's
// lines and reached the terminal; " " printed as no name at all.
TEST(InventoryTest, NamesThatWouldBreakAPlansLinesAreRefused) {
  const std::string rule =
      "must be a name: not empty, without control characters or leading or trailing spaces, got ";
  EXPECT_EQ(InventoryErrorOf(R"({"nodePools": [{"name": "a\nb\u001b[31m", "gpuType": "H100-SXM",
      "nodes": 2, "gpusPerNode": 8, "networkGbpsPerNode": 3200}]})"),
            "nodePools[0].name: " + rule + "\"a\\x0ab\\x1b[31m\"");
  EXPECT_EQ(InventoryErrorOf(R"({"nodePools": [{"name": " ", "gpuType": "H100-SXM",
      "nodes": 2, "gpusPerNode": 8, "networkGbpsPerNode": 3200}]})"),
            "nodePools[0].name: " + rule + "\" \"");
  EXPECT_EQ(InventoryErrorOf(R"({"gpuTypes": [{"name": "Z\u001b[2J", "bf16TFLOPS": 100,
      "memoryGB": 80, "hbmGBps": 1000}], "nodePools": [{"name": "a", "gpuType": "H100-SXM",
      "nodes": 2, "gpusPerNode": 8, "networkGbpsPerNode": 3200}]})"),
            "gpuTypes[0].name: " + rule + "\"Z\\x1b[2J\"");
  EXPECT_EQ(InventoryErrorOf(R"({"nodePools": [{"name": "a", "gpuType": "H100-SXM\t",
      "nodes": 2, "gpusPerNode": 8, "networkGbpsPerNode": 3200}]})"),
            "nodePools[0].gpuType: " + rule + "\"H100-SXM\\x09\"");
  // Spaces inside a name are fine.
  StatusOr<Inventory> spaced = ParseInventory(R"({"nodePools": [{"name": "rack 1",
      "gpuType": "H100-SXM", "nodes": 2, "gpusPerNode": 8, "networkGbpsPerNode": 3200}]})");
  ASSERT_TRUE(spaced.ok()) << spaced.status().ToString();
  EXPECT_EQ(spaced->node_pools[0].name, "rack 1");
}

// Absurdly small hardware figures made the cost model's times infinite (a
// step at 1e-300 TFLOP/s takes "forever", completion times past any year):
// each has a floor, and 0 stays "none" where it means that.
TEST(InventoryTest, AbsurdlySmallFiguresAreRefused) {
  const std::string pool0 =
      "nodePools:\n  - {name: a, gpuType: H100-SXM, nodes: 2, gpusPerNode: 8, "
      "networkGbpsPerNode: 3200}\n";
  EXPECT_EQ(InventoryErrorOf("gpuTypes: [{name: H100-SXM, bf16TFLOPS: 1e-300}]\n" + pool0),
            "gpuTypes[0].bf16TFLOPS: must be 0 or at least 0.01, got 1e-300");
  EXPECT_EQ(InventoryErrorOf("gpuTypes: [{name: H100-SXM, memoryGB: 0.001}]\n" + pool0),
            "gpuTypes[0].memoryGB: must be at least 1, got 0.001");
  EXPECT_EQ(InventoryErrorOf("gpuTypes: [{name: H100-SXM, hbmGBps: 1e-9}]\n" + pool0),
            "gpuTypes[0].hbmGBps: must be at least 0.1, got 1e-9");
  EXPECT_EQ(
      InventoryErrorOf("nodePools:\n  - {name: a, gpuType: H100-SXM, nodes: 2, gpusPerNode: 8, "
                       "networkGbpsPerNode: 1e-12}\n"),
      "nodePools[0].networkGbpsPerNode: must be at least 0.1, got 1e-12");
  EXPECT_EQ(
      InventoryErrorOf("nodePools:\n  - {name: a, gpuType: H100-SXM, nodes: 2, gpusPerNode: 8, "
                       "networkGbpsPerNode: 3200, nvlinkGBps: 0.0001}\n"),
      "nodePools[0].nvlinkGBps: must be 0 or at least 0.1, got 0.0001");
  // 0: no such precision, no NVLink, price unknown.
  StatusOr<Inventory> zeros = ParseInventory(
      "gpuTypes: [{name: H100-SXM, fp8TFLOPS: 0, nvlinkGBps: 0, pricePerGPUHour: 0}]\n" + pool0);
  EXPECT_TRUE(zeros.ok()) << zeros.status().ToString();
}

TEST(InventoryTest, OversizedIsResourceExhausted) {
  const std::string doc = "# " + std::string(kMaxDocumentBytes, 'x');
  StatusOr<Inventory> inv = ParseInventory(doc);
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), StatusCode::kResourceExhausted);
}

TEST(NodePoolTest, NodesWithFreeGpus) {
  NodePool pool;
  pool.nodes = 4;
  pool.gpus_per_node = 8;
  pool.free_gpus = 20;  // two whole nodes and 4 GPUs on a third
  EXPECT_EQ(pool.NodesWithFreeGpus(8), 2);
  EXPECT_EQ(pool.NodesWithFreeGpus(4), 3);
  EXPECT_EQ(pool.NodesWithFreeGpus(2), 3);
  EXPECT_EQ(pool.NodesWithFreeGpus(5), 2);
  EXPECT_EQ(pool.NodesWithFreeGpus(16), 0);  // larger than a node
  EXPECT_EQ(pool.NodesWithFreeGpus(0), 0);
  pool.free_gpus = 32;
  EXPECT_EQ(pool.NodesWithFreeGpus(1), 4);
  pool.free_gpus = 0;
  EXPECT_EQ(pool.NodesWithFreeGpus(1), 0);
}

// Known per node, the free GPUs are counted where they are: two nodes with
// half their GPUs free hold two half-node workers and no whole-node one.
TEST(NodePoolTest, NodesWithFreeGpusCountsEachNodeWhenKnown) {
  NodePool pool;
  pool.nodes = 3;
  pool.gpus_per_node = 8;
  pool.free_gpus = 8 + 4 + 4;
  pool.free_gpus_by_node = {4, 8, 4};
  EXPECT_EQ(pool.NodesWithFreeGpus(8), 1);
  EXPECT_EQ(pool.NodesWithFreeGpus(4), 3);
  EXPECT_EQ(pool.NodesWithFreeGpus(5), 1);
  EXPECT_EQ(pool.NodesWithFreeGpus(16), 0);
  pool.free_gpus_by_node = {4, 4, 0};
  pool.free_gpus = 8;
  EXPECT_EQ(pool.NodesWithFreeGpus(8), 0);  // the total alone would say 1
  EXPECT_EQ(pool.NodesWithFreeGpus(4), 2);
  pool.MarkAllFree();
  EXPECT_EQ(pool.free_gpus, 24);
  EXPECT_EQ(pool.NodesWithFreeGpus(8), 3);
}

TEST(InventoryTest, FreeGpusByNode) {
  const std::string head =
      "nodePools:\n  - {name: a, gpuType: H100-SXM, nodes: 2, gpusPerNode: 8, "
      "networkGbpsPerNode: 3200, ";
  StatusOr<Inventory> parsed = ParseInventory(head + "freeGPUsByNode: [4, 4]}\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const NodePool& pool = parsed->node_pools.at(0);
  EXPECT_EQ(pool.free_gpus, 8);  // the sum, when freeGPUs is not given
  EXPECT_EQ(pool.free_gpus_by_node, (std::vector<int>{4, 4}));
  EXPECT_EQ(pool.NodesWithFreeGpus(8), 0);
  EXPECT_EQ(InventoryErrorOf(head + "freeGPUs: 8, freeGPUsByNode: [4, 4]}\n"), "OK");
  EXPECT_EQ(InventoryErrorOf(head + "freeGPUsByNode: [4]}\n"),
            "nodePools[0].freeGPUsByNode: must list one count per node: 2 (nodes), got 1");
  EXPECT_EQ(InventoryErrorOf(head + "freeGPUsByNode: [4, 9]}\n"),
            "nodePools[0].freeGPUsByNode[1]: must be at most 8, got 9");
  EXPECT_EQ(InventoryErrorOf(head + "freeGPUs: 16, freeGPUsByNode: [4, 4]}\n"),
            "nodePools[0].freeGPUsByNode: sums to 8 free GPUs, but freeGPUs is 16; give one of "
            "them, or make them agree");
  EXPECT_THAT(InventoryErrorOf(head + "freeGPUsByNode: 8}\n"),
              HasSubstr("freeGPUsByNode: must be a list"));
}

TEST(DefaultInventoryTest, ThreeFreePools) {
  const Inventory inv = DefaultInventory();
  ASSERT_EQ(inv.node_pools.size(), 3u);
  EXPECT_EQ(inv.node_pools[0].name, "h100");
  EXPECT_EQ(inv.node_pools[0].gpu_type, "H100-SXM");
  EXPECT_EQ(inv.node_pools[0].nodes, 128);
  EXPECT_EQ(inv.node_pools[0].free_gpus, 1024);
  EXPECT_EQ(inv.node_pools[0].network_gbps_per_node, 3200);
  EXPECT_EQ(inv.node_pools[0].nvlink_gbps, 900);
  EXPECT_EQ(inv.node_pools[1].name, "h200");
  EXPECT_EQ(inv.node_pools[1].gpu_type, "H200");
  EXPECT_EQ(inv.node_pools[1].nodes, 64);
  EXPECT_EQ(inv.node_pools[2].name, "a100");
  EXPECT_EQ(inv.node_pools[2].gpu_type, "A100-80GB");
  EXPECT_EQ(inv.node_pools[2].network_gbps_per_node, 1600);
  for (const NodePool& pool : inv.node_pools) {
    EXPECT_EQ(pool.gpus_per_node, 8);
    EXPECT_EQ(pool.free_gpus, pool.nodes * pool.gpus_per_node);
    EXPECT_EQ(pool.price_per_gpu_hour, 0);
    EXPECT_NE(inv.catalog.Find(pool.gpu_type), nullptr);
  }
}

}  // namespace
}  // namespace pacer::planner
