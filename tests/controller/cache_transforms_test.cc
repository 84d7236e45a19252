// The informer cache transforms keep what the controller reads: the
// inventory from trimmed Nodes and Pods equals the one from whole objects,
// the pod fields the launcher reads survive, and the rest is dropped.
#include "core/cache_transforms.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "core/node_inventory.h"
#include "json_fixture.h"

namespace pacer::controller {
namespace {

using Json = nlohmann::json;


std::string Inventory(const Json& nodes, const Json& pods) {
  auto built = BuildInventory(nodes, pods);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  if (!built.ok()) return "";
  std::ostringstream out;
  for (const auto& [pool, pool_nodes] : built->nodes_by_pool) {
    out << pool << ":";
    for (const PoolNode& n : pool_nodes) out << " " << n.name << "=" << n.free_gpus << "/" << n.gpus;
    out << "\n";
  }
  for (const planner::NodePool& p : built->inventory.node_pools) {
    out << p.name << " net=" << p.network_gbps_per_node << " nvlink=" << p.nvlink_gbps
        << " price=" << p.price_per_gpu_hour << "\n";
  }
  for (const std::string& w : built->warnings) out << w << "\n";
  // Unscheduled workers: by the GPU type their affinity asks for, and since
  // when they wait (the fifo launch gate reads both).
  for (const auto& [job, by_type] : built->unscheduled_trainjob_gpus) {
    for (const auto& [type, gpus] : by_type)
      out << "unscheduled " << job << " " << type << "=" << gpus << "\n";
  }
  for (const auto& [job, since] : built->unscheduled_trainjob_since) {
    out << "waiting since " << job << " " << since << "\n";
  }
  return out.str();
}

TEST(CacheTransformsTest, TheInventoryFromTrimmedObjectsIsTheSame) {
  const Json nodes = Fixture("nodes.json");
  const Json pods = Fixture("pods.json");
  Json trimmed_nodes = nodes;
  Json trimmed_pods = pods;
  for (Json& node : trimmed_nodes["items"]) TrimNodeForCache(node);
  for (Json& pod : trimmed_pods["items"]) TrimPodForCache(pod);
  EXPECT_EQ(Inventory(trimmed_nodes, trimmed_pods), Inventory(nodes, pods));
  EXPECT_LT(trimmed_pods.dump().size(), pods.dump().size());
}

TEST(CacheTransformsTest, AWorkerPodKeepsWhatTheLauncherReadsAndLosesTheRest) {
  Json pod = {
      {"metadata",
       {{"name", "llama-a2-n0"},
        {"namespace", "research"},
        {"resourceVersion", "42"},
        {"deletionTimestamp", "2026-11-22T00:00:00Z"},
        {"labels", {{"pacer.dev/job", "llama"}, {"pacer.dev/attempt", "2"}}},
        {"annotations",
         {{"pacer.dev/layout", "{\"nodes\":2}"},
          {"pacer.dev/nodes", "2"},
          {"kubectl.kubernetes.io/last-applied-configuration", std::string(4096, 'x')}}},
        {"managedFields", Json::array({{{"manager", "kubelet"}}})}}},
      {"spec",
       {{"nodeName", "gpu-0"},
        {"containers",
         Json::array({{{"name", "worker"},
                       {"image", "w:1"},
                       {"env", Json::array({{{"name", "A"}, {"value", "1"}}})},
                       {"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}}}}})},
        {"volumes", Json::array({{{"name", "checkpoints"}}})}}},
      {"status",
       {{"phase", "Failed"},
        {"reason", "Evicted"},
        {"podIP", "10.0.0.1"},
        {"containerStatuses",
         Json::array({{{"name", "worker"},
                       {"imageID", "sha256:..."},
                       {"state", {{"terminated", {{"exitCode", 3}, {"message", "boom"}}}}}}})}}}};
  TrimPodForCache(pod);
  EXPECT_EQ(pod["metadata"]["name"], "llama-a2-n0");
  EXPECT_EQ(pod["metadata"]["resourceVersion"], "42");
  EXPECT_EQ(pod["metadata"]["labels"]["pacer.dev/attempt"], "2");
  EXPECT_EQ(pod["metadata"]["annotations"]["pacer.dev/nodes"], "2");
  EXPECT_EQ(pod["metadata"]["annotations"]["pacer.dev/layout"], "{\"nodes\":2}");
  EXPECT_TRUE(pod["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "8");
  EXPECT_EQ(pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 3);
  EXPECT_EQ(pod["status"]["reason"], "Evicted");
  EXPECT_FALSE(pod["metadata"]["annotations"].contains(
      "kubectl.kubernetes.io/last-applied-configuration"));
  EXPECT_FALSE(pod["metadata"].contains("managedFields"));
  EXPECT_FALSE(pod["spec"]["containers"][0].contains("env"));
  EXPECT_FALSE(pod["spec"].contains("volumes"));
  EXPECT_FALSE(pod["status"].contains("podIP"));
  EXPECT_FALSE(pod["status"]["containerStatuses"][0].contains("imageID"));
}

// The owners' uids stay (a re-created TrainJob's launcher tells its pods
// from an earlier one's by them), nothing else of them.
TEST(CacheTransformsTest, APodKeepsItsOwnersUids) {
  Json pod = {{"metadata",
               {{"name", "llama-a1-n0"},
                {"ownerReferences", Json::array({{{"apiVersion", "pacer.dev/v1alpha1"},
                                                  {"kind", "TrainJob"},
                                                  {"name", "llama"},
                                                  {"uid", "uid-1"},
                                                  {"controller", true},
                                                  {"blockOwnerDeletion", true}},
                                                 "not an object"})}}}};
  TrimPodForCache(pod);
  ASSERT_EQ(pod["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0],
            (Json{{"uid", "uid-1"}, {"kind", "TrainJob"}, {"controller", true}}));
}

TEST(CacheTransformsTest, ObjectsOfTheWrongShapeDoNotThrow) {
  Json odd = {{"metadata", "not an object"}, {"spec", {{"containers", "nope"}}}, {"status", 3}};
  EXPECT_NO_THROW(TrimPodForCache(odd));
  EXPECT_TRUE(odd["metadata"].empty());
  Json scalar = 5;
  EXPECT_NO_THROW(TrimNodeForCache(scalar));
  EXPECT_EQ(scalar, 5);
}

}  // namespace
}  // namespace pacer::controller
