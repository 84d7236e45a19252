// InventoryTracker: fed object by object from watch events, it agrees with
// BuildInventory over the same lists, follows claims and capacity changes,
// does not reassemble for changes the inventory does not depend on, and
// says when GPUs may have been freed.
#include "core/inventory_tracker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "json_fixture.h"

namespace pacer::controller {
namespace {

using Json = nlohmann::json;

std::string PodKey(const Json& pod) {
  return pod["metadata"]["namespace"].get<std::string>() + "/" +
         pod["metadata"]["name"].get<std::string>();
}

// Everything a plan depends on, in a form gtest can compare and print.
std::string Describe(const ClusterInventory& c) {
  std::ostringstream out;
  for (const planner::NodePool& p : c.inventory.node_pools) {
    out << p.name << " type=" << p.gpu_type << " nodes=" << p.nodes << " gpn=" << p.gpus_per_node
        << " free=" << p.free_gpus << " net=" << p.network_gbps_per_node
        << " nvlink=" << p.nvlink_gbps << " price=" << p.price_per_gpu_hour << " [";
    for (const PoolNode& n : c.nodes_by_pool.at(p.name)) {
      out << n.name << ":" << n.free_gpus << "/" << n.gpus << " ";
    }
    out << "]\n";
  }
  for (const auto& [job, by_type] : c.trainjob_gpus) {
    for (const auto& [type, gpus] : by_type)
      out << "job " << job << " " << type << "=" << gpus << "\n";
  }
  for (const auto& [job, by_type] : c.unscheduled_trainjob_gpus) {
    for (const auto& [type, gpus] : by_type)
      out << "unscheduled " << job << " " << type << "=" << gpus << "\n";
  }
  std::vector<std::string> warnings = c.warnings;
  std::sort(warnings.begin(), warnings.end());
  for (const std::string& w : warnings) out << "warning: " << w << "\n";
  return out.str();
}

class InventoryTrackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nodes_ = Fixture("nodes.json");
    pods_ = Fixture("pods.json");
    // Pods first: a pod's watch event can arrive before its node's.
    for (const Json& pod : pods_["items"]) tracker_.UpdatePod(PodKey(pod), &pod);
    for (const Json& node : nodes_["items"]) {
      tracker_.UpdateNode(node["metadata"]["name"].get<std::string>(), &node);
    }
  }
  std::string Expected() const {
    auto built = BuildInventory(nodes_, pods_);
    EXPECT_TRUE(built.ok()) << built.status().ToString();
    return built.ok() ? Describe(*built) : "";
  }
  Json& Pod(const std::string& name) {
    for (Json& pod : pods_["items"]) {
      if (pod["metadata"]["name"] == name) return pod;
    }
    ADD_FAILURE() << "no pod " << name;
    return pods_["items"][0];
  }
  Json& Node(const std::string& name) {
    for (Json& node : nodes_["items"]) {
      if (node["metadata"]["name"] == name) return node;
    }
    ADD_FAILURE() << "no node " << name;
    return nodes_["items"][0];
  }
  void Erase(Json& list, const std::string& name) {
    auto& items = list["items"];
    for (auto it = items.begin(); it != items.end(); ++it) {
      if ((*it)["metadata"]["name"] == name) {
        items.erase(it);
        return;
      }
    }
  }

  Json nodes_;
  Json pods_;
  InventoryTracker tracker_;
};

TEST_F(InventoryTrackerTest, AgreesWithBuildInventoryOverTheSameObjects) {
  const std::string tracked = Describe(tracker_.Current());
  EXPECT_EQ(tracked, Expected());
  EXPECT_THAT(tracked, ::testing::HasSubstr("h100-sxm-8gpu"));
}

TEST_F(InventoryTrackerTest, StatusChurnAndHeartbeatsDoNotReassemble) {
  const std::string before = Describe(tracker_.Current());
  const int64_t rebuilds = tracker_.rebuilds();

  Json& pod = Pod("llama-worker-0");
  pod["status"]["podIP"] = "10.0.0.9";
  pod["status"]["conditions"] = Json::array({{{"type", "Ready"}, {"status", "True"}}});
  EXPECT_FALSE(tracker_.UpdatePod(PodKey(pod), &pod));
  Json& node = Node("gpu-h100-a");
  node["metadata"]["resourceVersion"] = "999";
  node["status"]["conditions"].push_back({{"type", "MemoryPressure"}, {"status", "False"}});
  EXPECT_FALSE(tracker_.UpdateNode("gpu-h100-a", &node));
  EXPECT_FALSE(tracker_.UpdateNode("never-seen", nullptr));  // deleting what was never there
  Json cpu_pod = Pod("prometheus-0");
  cpu_pod["metadata"]["name"] = "another-cpu-pod";
  EXPECT_FALSE(tracker_.UpdatePod("monitoring/another-cpu-pod", &cpu_pod));  // holds no GPU

  EXPECT_EQ(Describe(tracker_.Current()), before);
  EXPECT_EQ(tracker_.rebuilds(), rebuilds);
}

TEST_F(InventoryTrackerTest, FollowsClaimsAsPodsFinishAndGo) {
  const std::string before = Describe(tracker_.Current());
  Json& pod = Pod("llama-worker-0");
  pod["status"]["phase"] = "Succeeded";  // its GPUs come back
  EXPECT_TRUE(tracker_.UpdatePod(PodKey(pod), &pod));
  const std::string after_success = Describe(tracker_.Current());
  EXPECT_NE(after_success, before);
  EXPECT_EQ(after_success, Expected());

  const std::string key = PodKey(Pod("sidecar-job"));
  Erase(pods_, "sidecar-job");
  EXPECT_TRUE(tracker_.UpdatePod(key, nullptr));
  EXPECT_EQ(Describe(tracker_.Current()), Expected());

  Json& waiting = Pod("waiting");
  waiting["spec"]["nodeName"] = "gpu-h100-c";  // scheduled: now it holds GPUs
  // It frees none, but a launch on its way has landed: a job planned only
  // once no other launch is under way (--scheduling=fifo) may go now.
  EXPECT_TRUE(tracker_.UpdatePod(PodKey(waiting), &waiting));
  EXPECT_EQ(Describe(tracker_.Current()), Expected());
  EXPECT_EQ(tracker_.Current().unscheduled_trainjob_gpus.count("research/llama"), 0u);

  Json& running = Pod("llama-worker-0");
  running["status"]["phase"] = "Running";
  running["metadata"]["resourceVersion"] = "99999";  // status churn: the same claim
  EXPECT_FALSE(tracker_.UpdatePod(PodKey(running), &running));
  Json bound = Pod("bert-worker-1");
  bound["metadata"]["name"] = "bert-worker-2";  // a new pod bound from the start
  bound["spec"]["nodeName"] = "gpu-a100-a";
  pods_["items"].push_back(bound);
  EXPECT_FALSE(tracker_.UpdatePod(PodKey(bound), &bound));  // takes, frees nothing
  EXPECT_EQ(Describe(tracker_.Current()), Expected());
}

TEST_F(InventoryTrackerTest, ReportsANodesWarningsOnlyWhenTheyChange) {
  Json& b = Node("gpu-h100-b");
  b["metadata"]["annotations"]["pacer.dev/network-gbps"] = "fast";
  std::vector<std::string> warnings;
  tracker_.UpdateNode("gpu-h100-b", &b, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], ::testing::HasSubstr("pacer.dev/network-gbps"));
  warnings.clear();
  b["metadata"]["resourceVersion"] = "1000";  // the same node again
  tracker_.UpdateNode("gpu-h100-b", &b, &warnings);
  EXPECT_TRUE(warnings.empty()) << "said once, not on every event";
}

TEST_F(InventoryTrackerTest, FollowsCordonsDeletionsAndRepricing) {
  Json& a = Node("gpu-h100-a");
  a["spec"]["unschedulable"] = true;
  EXPECT_TRUE(tracker_.UpdateNode("gpu-h100-a", &a));
  EXPECT_EQ(Describe(tracker_.Current()), Expected());

  Erase(nodes_, "gpu-h200-a");
  EXPECT_FALSE(tracker_.UpdateNode("gpu-h200-a", nullptr));  // frees nothing
  const std::string after_delete = Describe(tracker_.Current());
  EXPECT_EQ(after_delete, Expected());
  EXPECT_THAT(after_delete, ::testing::Not(::testing::HasSubstr("h200")));

  Json& b = Node("gpu-h100-b");
  b["metadata"]["annotations"]["pacer.dev/price-per-gpu-hour"] = "9.5";
  EXPECT_TRUE(tracker_.UpdateNode("gpu-h100-b", &b));
  const std::string repriced = Describe(tracker_.Current());
  EXPECT_EQ(repriced, Expected());
  EXPECT_THAT(repriced, ::testing::HasSubstr("price=9.5"));
}

}  // namespace
}  // namespace pacer::controller
