// The inventory from a NodeList and a PodList (testdata/nodes.json and
// pods.json): product mapping, pools, free GPUs, excluded nodes, annotations.
#include "core/node_inventory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "json_fixture.h"
#include "pacer/planner/job_parser.h"
#include "pacer/planner/search.h"

namespace pacer::controller {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

const planner::NodePool* FindPool(const ClusterInventory& c, const std::string& name) {
  for (const auto& p : c.inventory.node_pools) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

class NodeInventoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto built = BuildInventory(Fixture("nodes.json"), Fixture("pods.json"));
    ASSERT_TRUE(built.ok()) << built.status().ToString();
    cluster_ = *built;
  }
  ClusterInventory cluster_;
};

TEST(CatalogNameForProductTest, MapsTheCommonProducts) {
  EXPECT_EQ(CatalogNameForProduct("NVIDIA-H100-80GB-HBM3"), "H100-SXM");
  EXPECT_EQ(CatalogNameForProduct("nvidia-h100-80gb-hbm3"), "H100-SXM");
  EXPECT_EQ(CatalogNameForProduct("NVIDIA-H100-PCIe"), "H100-PCIe");
  EXPECT_EQ(CatalogNameForProduct("NVIDIA-H100-NVL"), "H100-NVL");
  EXPECT_EQ(CatalogNameForProduct("NVIDIA-A100-SXM4-40GB"), "A100-40GB");
  EXPECT_EQ(CatalogNameForProduct("NVIDIA-A100-SXM4-80GB"), "A100-80GB");
  EXPECT_EQ(CatalogNameForProduct("NVIDIA-H200"), "H200");
  EXPECT_EQ(CatalogNameForProduct("NVIDIA-B200"), "B200");
  EXPECT_EQ(CatalogNameForProduct("NVIDIA-L40S"), "L40S");
  EXPECT_EQ(CatalogNameForProduct("Tesla-V100-SXM2-32GB"), "V100-SXM2");
  EXPECT_EQ(CatalogNameForProduct("Tesla-V100-SXM2-16GB"), std::nullopt);
  EXPECT_EQ(CatalogNameForProduct("NVIDIA-GeForce-RTX-4090"), std::nullopt);
}

// One catalog: every GPU type a node label maps to is one the planner knows,
// so `pacer plan` and the controller accept the same gpuTypes.
TEST(CatalogNameForProductTest, EveryMappedTypeIsInThePlannersCatalog) {
  for (const char* product :
       {"NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3",
        "NVIDIA-H100-SXM5-80GB", "NVIDIA-H100-PCIe", "NVIDIA-H100-NVL", "NVIDIA-H200",
        "NVIDIA-B200", "NVIDIA-L40S", "Tesla-V100-SXM2-32GB"}) {
    const std::optional<std::string> name = CatalogNameForProduct(product);
    ASSERT_TRUE(name.has_value()) << product;
    EXPECT_NE(planner::GpuCatalog::BuiltIn().Find(*name), nullptr) << product << " -> " << *name;
  }
}

TEST_F(NodeInventoryTest, GroupsNodesIntoPoolsByTypeCountAndAnnotations) {
  std::vector<std::string> names;
  for (const auto& p : cluster_.inventory.node_pools) names.push_back(p.name);
  EXPECT_THAT(names, ElementsAre("a100-80gb-8gpu", "h100-nvl-2gpu", "h100-sxm-4gpu",
                                 "h100-sxm-8gpu", "h100-sxm-8gpu-2", "h200-8gpu"));
  const planner::NodePool* h100 = FindPool(cluster_, "h100-sxm-8gpu");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->gpu_type, "H100-SXM");
  EXPECT_EQ(h100->nodes, 3);  // d is cordoned, e NotReady, f has 4 GPUs, g another price
  EXPECT_EQ(h100->gpus_per_node, 8);
  EXPECT_EQ(h100->price_per_gpu_hour, 2.5);
  // Checked before use: GCC 12 at -O3 reports a possible null dereference
  // of an unchecked FindPool result (a Release build failed on it).
  const planner::NodePool* other_price = FindPool(cluster_, "h100-sxm-8gpu-2");
  ASSERT_NE(other_price, nullptr);
  EXPECT_EQ(other_price->price_per_gpu_hour, 3.0);
}

TEST_F(NodeInventoryTest, FreeGpusSubtractLivePodsOnTheNode) {
  // a: 4 requested. b: limit-only 2 + 1, init 1 -> 3. c: 1 + sidecar 1, init 1
  // -> 2. Succeeded, Failed and unscheduled pods hold nothing.
  ASSERT_EQ(cluster_.nodes_by_pool.count("h100-sxm-8gpu"), 1u);
  const auto& nodes = cluster_.nodes_by_pool.at("h100-sxm-8gpu");
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].name, "gpu-h100-a");
  EXPECT_EQ(nodes[0].free_gpus, 4);
  EXPECT_EQ(nodes[1].name, "gpu-h100-b");
  EXPECT_EQ(nodes[1].free_gpus, 5);
  EXPECT_EQ(nodes[2].name, "gpu-h100-c");
  EXPECT_EQ(nodes[2].free_gpus, 6);
  EXPECT_EQ(FindPool(cluster_, "h100-sxm-8gpu")->free_gpus, 15);
  // Where they are counts: no node has 8 free, though 15 are; one has 6.
  EXPECT_EQ(FindPool(cluster_, "h100-sxm-8gpu")->NodesWithFreeGpus(8), 0);
  EXPECT_EQ(FindPool(cluster_, "h100-sxm-8gpu")->NodesWithFreeGpus(6), 1);
  EXPECT_EQ(FindPool(cluster_, "h100-sxm-8gpu")->NodesWithFreeGpus(4), 3);
  // An init container larger than the app containers sets the request.
  EXPECT_EQ(FindPool(cluster_, "h100-sxm-4gpu")->free_gpus, 1);
  EXPECT_EQ(FindPool(cluster_, "a100-80gb-8gpu")->free_gpus, 8);
  EXPECT_EQ(cluster_.nodes_by_pool.at("a100-80gb-8gpu")[0].free_gpus, 0);
}

// The scheduler gives each job back what its pods hold, by GPU type: bound
// pods that have not terminated, labelled with their TrainJob, on the pools'
// nodes; a pod of no TrainJob holds GPUs for none.
TEST_F(NodeInventoryTest, CountsTheGpusEachTrainJobsPodsHoldByType) {
  using Held = std::map<std::string, int>;
  EXPECT_EQ(cluster_.trainjob_gpus.size(), 2u);
  // llama-worker-0 (4 on a), llama-worker-1 (3 on b), big-init (3 on f);
  // not the finished, failed or unbound ones (the next test).
  EXPECT_EQ(cluster_.trainjob_gpus.at("research/llama"), (Held{{"H100-SXM", 10}}));
  EXPECT_EQ(cluster_.trainjob_gpus.at("research/bert"), (Held{{"A100-80GB", 8}}));
  EXPECT_EQ(cluster_.TrainJobGpus("research/llama", "H100-SXM"), 10);
  EXPECT_EQ(cluster_.TrainJobGpus("research/llama", "A100-80GB"), 0);
  EXPECT_EQ(cluster_.TrainJobGpus("other/llama", "H100-SXM"), 0) << "a job is namespaced";
}

// Worker pods the scheduler has not bound yet hold no node's GPUs, but they
// are spoken for: remembered by TrainJob and by the GPU type their node
// affinity asks for (none: ""), so that a job planned alone does not count
// them free. Unbound pods of no TrainJob are not the controller's to track.
TEST_F(NodeInventoryTest, RemembersTheGpusOfWorkerPodsNotScheduledYet) {
  using Held = std::map<std::string, int>;
  EXPECT_EQ(cluster_.unscheduled_trainjob_gpus.size(), 2u);
  // waiting: 8, no affinity. bert-worker-1: 8, affinity A100-SXM4-80GB.
  EXPECT_EQ(cluster_.unscheduled_trainjob_gpus.at("research/llama"), (Held{{"", 8}}));
  EXPECT_EQ(cluster_.unscheduled_trainjob_gpus.at("research/bert"), (Held{{"A100-80GB", 8}}));
  // Since when (creationTimestamp); waiting has none.
  EXPECT_EQ(cluster_.unscheduled_trainjob_since,
            (std::map<std::string, int64_t>{{"research/bert", 1795305600}}));
  // Not in any pool: the A100 node's GPUs are held by full-a100 alone.
  EXPECT_EQ(FindPool(cluster_, "a100-80gb-8gpu")->free_gpus, 8);
  EXPECT_EQ(cluster_.trainjob_gpus.at("research/bert"), (Held{{"A100-80GB", 8}}));

  // A notebook's unbound pod: no claim. The same pod once bound: a claim.
  nlohmann::json notebook = {
      {"metadata", {{"name", "nb"}, {"namespace", "research"}, {"labels", {{"app", "nb"}}}}},
      {"spec",
       {{"containers", {{{"name", "c"}, {"resources", {{"requests", {{kGpuResource, "2"}}}}}}}}}},
      {"status", {{"phase", "Pending"}}}};
  EXPECT_EQ(PodGpuClaimOf(notebook), std::nullopt);
  notebook["spec"]["nodeName"] = "gpu-h100-a";
  EXPECT_EQ(PodGpuClaimOf(notebook), (PodGpuClaim{"gpu-h100-a", 2, "", ""}));
}

TEST_F(NodeInventoryTest, AnnotationsOverrideDefaults) {
  const planner::NodePool* a100 = FindPool(cluster_, "a100-80gb-8gpu");
  ASSERT_NE(a100, nullptr);
  EXPECT_EQ(a100->nodes, 2);
  EXPECT_EQ(a100->network_gbps_per_node, 1600);
  EXPECT_EQ(a100->nvlink_gbps, 500);
  EXPECT_EQ(a100->price_per_gpu_hour, 0);  // unknown
  // Defaults: 400 Gbit/s per GPU, the catalog's NVLink.
  const planner::NodePool* small = FindPool(cluster_, "h100-sxm-4gpu");
  EXPECT_EQ(small->network_gbps_per_node, 1600);
  EXPECT_EQ(small->nvlink_gbps, 900);
  const planner::NodePool* nvl = FindPool(cluster_, "h100-nvl-2gpu");
  EXPECT_EQ(nvl->network_gbps_per_node, 800);
  EXPECT_EQ(nvl->nvlink_gbps, 600);
  ASSERT_NE(cluster_.inventory.catalog.Find("H100-NVL"), nullptr);
  EXPECT_EQ(cluster_.inventory.catalog.Find("H100-NVL")->memory_gb, 94);
  // A bad annotation falls back to the default, with a warning.
  EXPECT_EQ(FindPool(cluster_, "h200-8gpu")->network_gbps_per_node, 3200);
}

// An absurdly small bandwidth made every plan on the node take "forever":
// the annotations have the bounds a pool file's figures have.
TEST(NodeCapacityTest, AnnotationsOutsideTheirBoundsFallBackToTheDefault) {
  nlohmann::json node = {{"metadata",
                          {{"name", "n1"},
                           {"labels", {{kGpuProductLabel, "NVIDIA-H100-80GB-HBM3"}}},
                           {"annotations",
                            {{kNetworkGbpsAnnotation, "1e-300"},
                             {kNvlinkGbpsAnnotation, "5e9"},
                             {kPricePerGpuHourAnnotation, "2.5"}}}}},
                         {"status",
                          {{"allocatable", {{kGpuResource, "8"}}},
                           {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  std::vector<std::string> warnings;
  std::optional<NodeCapacity> c = NodeCapacityOf(node, &warnings);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->network_gbps, 8 * kDefaultNetworkGbpsPerGpu);
  EXPECT_EQ(c->nvlink_gbps, 900);  // the catalog's
  EXPECT_EQ(c->price_per_gpu_hour, 2.5);
  EXPECT_THAT(warnings,
              UnorderedElementsAre(HasSubstr("pacer.dev/network-gbps=\"1e-300\" is outside "
                                             "0.1..1000000; using the default"),
                                   HasSubstr("pacer.dev/nvlink-gbps=\"5e9\" is outside")));
}

TEST_F(NodeInventoryTest, WarnsAboutSkippedNodes) {
  EXPECT_THAT(cluster_.warnings,
              UnorderedElementsAre(HasSubstr("gpu-mig-a"), HasSubstr("ws-4090"),
                                   HasSubstr("gpu-nolabel"), HasSubstr("gpu-h200-a")));
  for (const std::string& w : cluster_.warnings) {
    if (w.find("ws-4090") != std::string::npos) {
      EXPECT_THAT(w, HasSubstr("unknown GPU product \"NVIDIA-GeForce-RTX-4090\""));
    }
  }
}

TEST_F(NodeInventoryTest, ExcludesCordonedAndNotReadyNodes) {
  for (const auto& [pool, nodes] : cluster_.nodes_by_pool) {
    for (const PoolNode& n : nodes) {
      EXPECT_NE(n.name, "gpu-h100-d") << pool;
      EXPECT_NE(n.name, "gpu-h100-e") << pool;
      EXPECT_NE(n.name, "cpu-a") << pool;
    }
  }
}

// The plan of a 1.3B job of global batch 64 with `resources` (a YAML map).
StatusOr<planner::PlanResult> PlanSmallJob(const planner::Inventory& inventory,
                                           const std::string& resources) {
  auto job = planner::ParseTrainJob(
      "apiVersion: pacer.dev/v1alpha1\nkind: TrainJob\nmetadata: {name: j}\nspec:\n"
      "  model: {parameters: 1.3B}\n  data: {tokens: 1B}\n"
      "  training: {globalBatchSize: 64}\n  resources: " +
      resources + "\n");
  if (!job.ok()) return job.status();
  planner::PlanOptions options;
  options.now_unix_seconds = 1795305600;
  return planner::Plan(*job, inventory, {}, options);
}

TEST_F(NodeInventoryTest, ThePlannerAcceptsTheInventory) {
  auto result = PlanSmallJob(cluster_.inventory, "{gpuTypes: [H100-SXM, H100-NVL]}");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_TRUE(result->plan.has_value());
  EXPECT_EQ(result->plan->layout.global_batch(), 64);
}

// Two 8-GPU nodes with 4 GPUs busy on each: 8 GPUs are free, but no node can
// hold an 8-GPU worker; a plan for 8 GPUs must use 2 nodes x 4, not a pod
// that would stay Pending.
TEST(BuildInventoryTest, HalfFreeNodesAreNotPlannedAsOneWholeNode) {
  nlohmann::json nodes = {{"items", nlohmann::json::array()}};
  nlohmann::json pods = {{"items", nlohmann::json::array()}};
  for (const char* name : {"n1", "n2"}) {
    nodes["items"].push_back(
        nlohmann::json::parse(std::string(R"({"metadata": {"name": ")") + name +
                              R"(", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True"}]}})"));
    pods["items"].push_back(nlohmann::json::parse(
        std::string(R"({"spec": {"nodeName": ")") + name +
        R"(", "containers": [{"resources": {"requests": {"nvidia.com/gpu": "4"}}}]},
            "status": {"phase": "Running"}})"));
  }
  auto built = BuildInventory(nodes, pods);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  ASSERT_EQ(built->inventory.node_pools.size(), 1u);
  EXPECT_EQ(built->inventory.node_pools[0].free_gpus, 8);
  auto result = PlanSmallJob(built->inventory, "{gpuTypes: [H100-SXM], minGPUs: 8, maxGPUs: 8}");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_TRUE(result->plan.has_value());
  EXPECT_EQ(result->plan->layout.nodes, 2);
  EXPECT_EQ(result->plan->layout.gpus_per_node, 4);
}

TEST(BuildInventoryTest, EmptyListsGiveAnEmptyInventory) {
  auto built = BuildInventory(nlohmann::json::parse(R"({"items": []})"),
                              nlohmann::json::parse(R"({"items": []})"));
  ASSERT_TRUE(built.ok());
  EXPECT_TRUE(built->inventory.node_pools.empty());
  EXPECT_TRUE(built->warnings.empty());
}

TEST(BuildInventoryTest, RejectsDocumentsThatAreNotLists) {
  const auto list = nlohmann::json::parse(R"({"items": []})");
  EXPECT_EQ(BuildInventory(nlohmann::json::parse("[]"), list).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildInventory(list, nlohmann::json::parse(R"({"kind": "PodList"})")).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(BuildInventoryTest, ToleratesOddlyTypedFields) {
  auto nodes = nlohmann::json::parse(R"({"items": [
      {"metadata": {"name": "n1", "labels": {"nvidia.com/gpu.product": "NVIDIA-B200"}},
       "spec": {"unschedulable": "yes"},
       "status": {"allocatable": {"nvidia.com/gpu": "8"},
                  "conditions": [{"type": "Ready", "status": "True"}]}},
      {"metadata": {"name": "n2", "labels": {"nvidia.com/gpu.product": "NVIDIA-B200"}},
       "status": {"allocatable": {"nvidia.com/gpu": "8x"}}},
      {"metadata": {}}, 42]})");
  auto pods = nlohmann::json::parse(R"({"items": [
      {"spec": {"nodeName": "n1", "containers": [7, {"resources": {"limits": {"nvidia.com/gpu": "x"}}}]}},
      "garbage"]})");
  auto built = BuildInventory(nodes, pods);
  ASSERT_TRUE(built.ok());
  ASSERT_EQ(built->inventory.node_pools.size(), 1u);
  EXPECT_EQ(built->inventory.node_pools[0].free_gpus, 8);
  EXPECT_EQ(built->warnings.size(), 3u);  // n2's count, and two nodes without a name
}

// A broken device plugin's count: the string form took any int (two nodes
// of 2e9 summed to -294967296 GPUs, and the planner searched 2e9 per-node
// counts per layout). Past what a pool allows, the node is skipped, said.
TEST(BuildInventoryTest, ANodeWithMoreGpusThanAPoolAllowsIsSkippedWithAWarning) {
  auto node = [](const std::string& name, const nlohmann::json& gpus) {
    return nlohmann::json{
        {"metadata",
         {{"name", name}, {"labels", {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}}}},
        {"status",
         {{"allocatable", {{"nvidia.com/gpu", gpus}}},
          {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  };
  const nlohmann::json nodes = {{"items",
                                 {node("big-1", "2000000000"), node("big-2", "2000000000"),
                                  node("huge", 3000000000LL), node("wide", 65), node("h1", "8")}}};
  auto built = BuildInventory(nodes, nlohmann::json{{"items", nlohmann::json::array()}});
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  ASSERT_EQ(built->inventory.node_pools.size(), 1u);
  EXPECT_EQ(built->inventory.node_pools[0].nodes, 1);
  EXPECT_EQ(built->inventory.node_pools[0].free_gpus, 8);
  ASSERT_EQ(built->warnings.size(), 4u);
  for (const std::string& warning : built->warnings) {
    EXPECT_NE(warning.find("allocatable nvidia.com/gpu, more than a node pool allows (64"),
              std::string::npos)
        << warning;
  }
  EXPECT_EQ(built->warnings[0].rfind("node big-1: 2000000000 allocatable", 0), 0u)
      << built->warnings[0];
  EXPECT_EQ(built->warnings[2].rfind("node huge: 3000000000 allocatable", 0), 0u)
      << built->warnings[2];
}

TEST(BuildInventoryTest, PodsOverAllocatableLeaveZeroFree) {
  auto nodes = nlohmann::json::parse(R"({"items": [{
      "metadata": {"name": "n1", "labels": {"nvidia.com/gpu.product": "NVIDIA-L40S"}},
      "status": {"allocatable": {"nvidia.com/gpu": 4},
                 "conditions": [{"type": "Ready", "status": "True"}]}}]})");
  auto pods = nlohmann::json::parse(R"({"items": [
      {"spec": {"nodeName": "n1", "containers": [{"resources": {"limits": {"nvidia.com/gpu": "3"}}}]},
       "status": {"phase": "Running"}},
      {"spec": {"nodeName": "n1", "containers": [{"resources": {"requests": {"nvidia.com/gpu": "3"}}}]},
       "status": {"phase": "Running"}}]})");
  auto built = BuildInventory(nodes, pods);
  ASSERT_TRUE(built.ok());
  ASSERT_EQ(built->inventory.node_pools.size(), 1u);
  EXPECT_EQ(built->inventory.node_pools[0].name, "l40s-4gpu");
  EXPECT_EQ(built->inventory.node_pools[0].free_gpus, 0);
  EXPECT_EQ(built->inventory.node_pools[0].nvlink_gbps, 0);  // L40S: PCIe only
}

}  // namespace
}  // namespace pacer::controller
