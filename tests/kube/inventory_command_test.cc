// `pacer inventory` against the test API server: the document it writes
// round-trips through the inventory parser and `pacer plan --cluster`, and
// an unreachable server, rejected credentials (401) and a forbidden list
// (403) each fail with exit code 3 and say what to fix.
#include "kubecli/inventory_command.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "kube_test_env.h"
#include "pacer/planner/inventory.h"

namespace pacer::controller {
namespace {

using nlohmann::json;

json GpuNode(const std::string& name, const std::string& product, int gpus,
             const std::string& price = "") {
  json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.product", product}}}}},
               {"status",
                {{"allocatable", {{"nvidia.com/gpu", std::to_string(gpus)}}},
                 {"capacity", {{"nvidia.com/gpu", std::to_string(gpus)}}},
                 {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
  if (!price.empty()) {
    node["metadata"]["annotations"] = {{"pacer.dev/price-per-gpu-hour", price}};
  }
  return node;
}

json CpuNode(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}}},
          {"status", {{"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

json GpuPod(const std::string& name, const std::string& node, int gpus, const std::string& phase) {
  const json limits = {{"nvidia.com/gpu", std::to_string(gpus)}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "default"}}},
          {"spec",
           {{"nodeName", node},
            {"containers",
             json::array({{{"name", "train"},
                           {"image", "trainer:1"},
                           {"resources", {{"requests", limits}, {"limits", limits}}}}})}}},
          {"status", {{"phase", phase}}}};
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct PacerRun {
  int exit_code = -1;
  std::string out, err;
};

class InventoryCommandTest : public KubeTest {
 protected:
  void SetUp() override {
    KubeTest::SetUp();
    dir_ = std::filesystem::temp_directory_path() /
           ("pacer-inventory-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    kubeconfig_ = (dir_ / "kubeconfig").string();
    ASSERT_TRUE(server_->WriteKubeconfig(kubeconfig_).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void AddObjects() {
    for (const json& node : {GpuNode("h100-a", "NVIDIA-H100-80GB-HBM3", 8, "2.5"),
                             GpuNode("h100-b", "NVIDIA-H100-80GB-HBM3", 8, "2.5"),
                             GpuNode("a100-a", "NVIDIA-A100-SXM4-80GB", 8), CpuNode("cpu-a")}) {
      ASSERT_TRUE(server_->CreateObject("/api/v1/nodes", node).ok());
    }
    // A running pod holds 4 GPUs of h100-a; a finished one holds none.
    for (const json& pod : {GpuPod("running", "h100-a", 4, "Running"),
                            GpuPod("finished", "h100-b", 8, "Succeeded")}) {
      auto created = server_->CreateObject("/api/v1/namespaces/default/pods", pod);
      ASSERT_TRUE(created.ok()) << created.status().ToString();
    }
  }

  // `pacer ARGS...` in-process, with the inventory command plugged in.
  PacerRun Pacer(std::vector<std::string> args) {
    args.insert(args.begin(), "pacer");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    InventoryCommand inventory;
    std::ostringstream out, err;
    PacerRun run;
    run.exit_code = cli::RunCli(static_cast<int>(argv.size()), argv.data(), out, err, {&inventory});
    run.out = out.str();
    run.err = err.str();
    return run;
  }

  std::filesystem::path dir_;
  std::string kubeconfig_;
};

const planner::NodePool* PoolOfType(const planner::Inventory& inv, const std::string& type) {
  for (const planner::NodePool& p : inv.node_pools) {
    if (p.gpu_type == type) return &p;
  }
  return nullptr;
}

TEST_F(InventoryCommandTest, WritesAnInventoryThatParsesAndPlans) {
  AddObjects();
  const std::string file = (dir_ / "cluster.yaml").string();
  const PacerRun run = Pacer({"inventory", "--kubeconfig", kubeconfig_, "--output-file", file});
  ASSERT_EQ(run.exit_code, cli::kExitOk) << run.err;
  EXPECT_EQ(run.out, "wrote " + file + ": 2 pools, 24 GPUs (20 free)\n");

  StatusOr<planner::Inventory> parsed = planner::ParseInventory(ReadText(file));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString() << "\n" << ReadText(file);
  ASSERT_EQ(parsed->node_pools.size(), 2u);
  const planner::NodePool* h100 = PoolOfType(*parsed, "H100-SXM");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->nodes, 2);
  EXPECT_EQ(h100->gpus_per_node, 8);
  EXPECT_EQ(h100->free_gpus, 12);  // 4 held by the running pod
  // Per node too: the running pod's node has 4 free, the other 8.
  std::vector<int> by_node = h100->free_gpus_by_node;
  std::sort(by_node.begin(), by_node.end());
  EXPECT_EQ(by_node, (std::vector<int>{4, 8}));
  EXPECT_DOUBLE_EQ(h100->price_per_gpu_hour, 2.5);
  EXPECT_DOUBLE_EQ(h100->network_gbps_per_node, 3200);
  const planner::NodePool* a100 = PoolOfType(*parsed, "A100-80GB");
  ASSERT_NE(a100, nullptr);
  EXPECT_EQ(a100->nodes, 1);
  EXPECT_EQ(a100->free_gpus, 8);

  // `pacer plan --cluster` takes it: a plan (or an infeasible one), not an
  // input error.
  const PacerRun plan = Pacer({"plan", std::string(PACER_SOURCE_DIR) + "/tests/cli/testdata/llama-7b.yaml",
                          "--cluster", file, "--now", "2026-06-01T00:00:00Z"});
  EXPECT_TRUE(plan.exit_code == cli::kExitOk || plan.exit_code == cli::kExitInfeasible)
      << plan.exit_code << "\n"
      << plan.out << plan.err;
  EXPECT_NE(plan.out.find("H100-SXM"), std::string::npos) << plan.out;
}

TEST_F(InventoryCommandTest, JsonGoesToStdout) {
  AddObjects();
  const PacerRun run = Pacer({"inventory", "--kubeconfig", kubeconfig_, "-o", "json"});
  ASSERT_EQ(run.exit_code, cli::kExitOk) << run.err;
  const json doc = json::parse(run.out);
  ASSERT_EQ(doc["nodePools"].size(), 2u);
  EXPECT_TRUE(planner::ParseInventory(run.out).ok());
}

TEST_F(InventoryCommandTest, RejectedCredentialsSayToLogInAgain) {
  AddObjects();
  server_->RotateToken("a-token-the-kubeconfig-does-not-have");
  const PacerRun run = Pacer({"inventory", "--kubeconfig", kubeconfig_});
  EXPECT_EQ(run.exit_code, kExitClusterUnreachable) << run.out << run.err;
  EXPECT_NE(run.err.find("rejected the credentials (401 Unauthorized)"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("log in to the cluster again"), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty()) << run.out;
}

TEST_F(InventoryCommandTest, ForbiddenListSaysWhichPermissionIsMissing) {
  AddObjects();
  server_->FailNextRequests("GET", "/api/v1/nodes", 403, 1);
  const PacerRun run = Pacer({"inventory", "--kubeconfig", kubeconfig_});
  EXPECT_EQ(run.exit_code, kExitClusterUnreachable) << run.out << run.err;
  EXPECT_NE(run.err.find("does not allow this user to list nodes (403 Forbidden)"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("kubectl auth can-i list nodes"), std::string::npos) << run.err;
}

// A server that answers 500 was reached: its error is not called a network
// problem (it said "cannot reach ... VPN, proxy, firewall").
TEST_F(InventoryCommandTest, AServerErrorIsNotCalledUnreachable) {
  AddObjects();
  server_->FailNextRequests("GET", "/api/v1/nodes", 500, 10);
  const PacerRun run = Pacer({"inventory", "--kubeconfig", kubeconfig_});
  EXPECT_EQ(run.exit_code, kExitClusterUnreachable) << run.out << run.err;
  EXPECT_NE(run.err.find("answered with an error when asked to list nodes"), std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("cannot reach"), std::string::npos) << run.err;
}

TEST_F(InventoryCommandTest, UnreachableServerSaysToCheckTheAddress) {
  server_.reset();  // the kubeconfig now points at a closed port
  const PacerRun run = Pacer({"inventory", "--kubeconfig", kubeconfig_});
  EXPECT_EQ(run.exit_code, kExitClusterUnreachable) << run.out << run.err;
  EXPECT_NE(run.err.find("cannot reach the API server at https://127.0.0.1:"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("context pacer-test"), std::string::npos) << run.err;
}

TEST_F(InventoryCommandTest, ClusterWithoutGpuNodesExitsFour) {
  ASSERT_TRUE(server_->CreateObject("/api/v1/nodes", CpuNode("cpu-a")).ok());
  const PacerRun run = Pacer({"inventory", "--kubeconfig", kubeconfig_});
  EXPECT_EQ(run.exit_code, kExitNoGpuNodes) << run.out << run.err;
  EXPECT_NE(run.err.find("no usable GPU node among the cluster's 1 nodes"), std::string::npos)
      << run.err;
}

// An API server that sends its answer a byte at a time would keep the
// command waiting without end: every request must be answered by
// --timeout-seconds after the start.
TEST_F(InventoryCommandTest, AnAnswerThatNeverEndsStopsAtTheTimeout) {
  AddObjects();
  server_->HangRequests("GET", "/api/v1/nodes", "",
                        testing::TestApiServer::HangPoint::kAfterHeaders);
  const PacerRun run = Pacer({"inventory", "--kubeconfig", kubeconfig_, "--timeout-seconds", "1"});
  server_->StopHanging();
  EXPECT_EQ(run.exit_code, kExitClusterUnreachable) << run.out << run.err;
  EXPECT_NE(run.err.find("did not finish answering when asked to list nodes in time"),
            std::string::npos)
      << run.err;
}

// A pager whose continue token never changes would be followed forever.
TEST_F(InventoryCommandTest, APagerThatNeverEndsIsAnError) {
  AddObjects();
  server_->RepeatListContinueToken("pods");
  const PacerRun run = Pacer({"inventory", "--kubeconfig", kubeconfig_});
  EXPECT_EQ(run.exit_code, kExitClusterUnreachable) << run.out << run.err;
  EXPECT_NE(run.err.find("gave a continue token it had given before"), std::string::npos)
      << run.err;
  EXPECT_LE(server_->RequestCount("GET", "/api/v1/pods"), 3) << "it stops at the repeat";
}

// A password in the server URL would be written into every message and the
// inventory's header: refused, and not shown.
TEST_F(InventoryCommandTest, AServerUrlWithAPasswordIsRefusedWithoutShowingIt) {
  std::string kubeconfig = ReadText(kubeconfig_);
  const std::size_t at = kubeconfig.find("server: https://");
  ASSERT_NE(at, std::string::npos) << kubeconfig;
  kubeconfig.insert(at + std::string("server: https://").size(), "user:PASSWORD99@");
  std::ofstream(kubeconfig_, std::ios::trunc) << kubeconfig;
  const PacerRun run = Pacer({"inventory", "--kubeconfig", kubeconfig_});
  EXPECT_EQ(run.exit_code, cli::kExitInvalidInput) << run.out << run.err;
  EXPECT_NE(run.err.find("user name or password"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("PASSWORD99"), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty()) << run.out;
}

TEST_F(InventoryCommandTest, AKubeconfigThatIsADeviceIsRefusedAtItsLimit) {
  const PacerRun run = Pacer({"inventory", "--kubeconfig", "/dev/zero"});
  EXPECT_EQ(run.exit_code, cli::kExitInvalidInput) << run.out << run.err;
  EXPECT_NE(run.err.find("larger than 1048576 bytes"), std::string::npos) << run.err;
}

TEST_F(InventoryCommandTest, UnreadableKubeconfigIsInvalidInput) {
  const PacerRun run = Pacer({"inventory", "--kubeconfig", (dir_ / "missing").string()});
  EXPECT_EQ(run.exit_code, cli::kExitInvalidInput) << run.out << run.err;
  EXPECT_NE(run.err.find("missing"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace pacer::controller
