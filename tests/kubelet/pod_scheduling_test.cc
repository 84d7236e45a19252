// The scheduler's pure part: selectors, affinity, GPU accounting and the
// choice of node, on hand-written objects.
#include "pod_scheduling.h"

#include <gtest/gtest.h>

namespace pacer::testing {
namespace {

using nlohmann::json;

json Node(const std::string& name, const std::string& product, int gpus, bool ready = true) {
  return {
      {"metadata", {{"name", name}, {"labels", {{kGpuProductLabel, product}}}}},
      {"status",
       {{"allocatable", {{kGpuResource, std::to_string(gpus)}}},
        {"conditions", json::array({{{"type", "Ready"}, {"status", ready ? "True" : "False"}}})}}}};
}

json Pod(int gpus, const std::string& node = "", const std::string& phase = "") {
  json pod = {
      {"metadata", {{"name", "p"}}},
      {"spec",
       {{"containers",
         json::array({{{"name", "worker"},
                       {"resources", {{"limits", {{kGpuResource, std::to_string(gpus)}}}}}}})}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  if (!phase.empty()) pod["status"]["phase"] = phase;
  return pod;
}

json WithSelector(json pod, const std::string& product) {
  pod["spec"]["nodeSelector"] = {{kGpuProductLabel, product}};
  return pod;
}

json WithAffinity(json pod, const std::string& op, const std::vector<std::string>& values) {
  pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
     ["nodeSelectorTerms"] = json::array(
         {{{"matchExpressions",
            json::array({{{"key", kGpuProductLabel}, {"operator", op}, {"values", values}}})}}});
  return pod;
}

TEST(DeviceQuantityTest, ReadsStringsAndNumbers) {
  EXPECT_EQ(DeviceQuantity(json("8")), 8);
  EXPECT_EQ(DeviceQuantity(json(4)), 4);
  EXPECT_EQ(DeviceQuantity(json("2.0")), 2);
  EXPECT_EQ(DeviceQuantity(json("eight")), 0);
  EXPECT_EQ(DeviceQuantity(json()), 0);
}

TEST(PodGpuRequestTest, SumsLimitsOverContainers) {
  json pod = Pod(2);
  pod["spec"]["containers"].push_back(
      {{"name", "sidecar"}, {"resources", {{"requests", {{kGpuResource, "1"}}}}}});
  pod["spec"]["containers"].push_back({{"name", "no-gpu"}});
  EXPECT_EQ(PodGpuRequest(pod), 3);
}

TEST(NodeMatchesPodTest, NodeSelectorAndAffinityBothCount) {
  const json h100 = Node("a", "H100", 8);
  const json a100 = Node("b", "A100", 8);
  EXPECT_TRUE(NodeMatchesPod(h100, Pod(1)));
  EXPECT_TRUE(NodeMatchesPod(h100, WithSelector(Pod(1), "H100")));
  EXPECT_FALSE(NodeMatchesPod(a100, WithSelector(Pod(1), "H100")));
  EXPECT_TRUE(NodeMatchesPod(a100, WithAffinity(Pod(1), "In", {"H100", "A100"})));
  EXPECT_FALSE(NodeMatchesPod(a100, WithAffinity(Pod(1), "In", {"H100"})));
  EXPECT_TRUE(NodeMatchesPod(a100, WithAffinity(Pod(1), "NotIn", {"H100"})));
  // Both must hold.
  EXPECT_FALSE(NodeMatchesPod(a100, WithAffinity(WithSelector(Pod(1), "H100"), "In", {"A100"})));
}

TEST(GpusInUseTest, CountsOnlyBoundNonTerminatedPods) {
  const std::map<std::string, int> used =
      GpusInUse({Pod(2, "a"), Pod(1, "a", "Running"), Pod(4, "a", "Succeeded"),
                 Pod(8, "b", "Failed"), Pod(3)});
  EXPECT_EQ(used.at("a"), 3);
  EXPECT_EQ(used.count("b"), 0u);
}

TEST(ChooseNodeTest, PacksOntoTheFullestNodeThatFits) {
  const std::vector<json> nodes = {Node("a", "H100", 8), Node("b", "H100", 8)};
  const ScheduleDecision d = ChooseNode(Pod(2), nodes, {{"a", 2}, {"b", 4}});
  ASSERT_TRUE(d.node.has_value());
  EXPECT_EQ(*d.node, "b");
  const ScheduleDecision big = ChooseNode(Pod(6), nodes, {{"a", 2}, {"b", 4}});
  ASSERT_TRUE(big.node.has_value());
  EXPECT_EQ(*big.node, "a");
}

TEST(ChooseNodeTest, ExplainsWhyNothingFits) {
  const std::vector<json> nodes = {Node("a", "H100", 2), Node("b", "H100", 2),
                                   Node("c", "A100", 8, /*ready=*/false)};
  const ScheduleDecision full = ChooseNode(Pod(4), nodes, {});
  EXPECT_FALSE(full.node.has_value());
  EXPECT_EQ(full.message, "0/3 nodes are available: insufficient nvidia.com/gpu");
  const ScheduleDecision wrong = ChooseNode(WithSelector(Pod(1), "B200"), nodes, {});
  EXPECT_FALSE(wrong.node.has_value());
  EXPECT_EQ(wrong.message,
            "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector");
  const ScheduleDecision unready = ChooseNode(WithSelector(Pod(1), "A100"), nodes, {});
  EXPECT_FALSE(unready.node.has_value());
  EXPECT_NE(unready.message.find("not ready"), std::string::npos);
}

}  // namespace
}  // namespace pacer::testing
