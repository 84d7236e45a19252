// The mapping from failed workers' exit codes and nodes to the controller's
// action (reconcile/worker_failure.h), and the inventory without excluded nodes.
#include "reconcile/worker_failure.h"

#include <gtest/gtest.h>

namespace pacer::controller {
namespace {

FailedWorker Worker(int node_rank, std::optional<int> code, std::string node = "",
                    std::string message = "") {
  return FailedWorker{node_rank, code, std::move(node), std::move(message)};
}

TEST(WorkerFailureTest, InvalidConfigFailsWithTheWorkersMessage) {
  const FailureAction a =
      DecideWorkerFailure({Worker(0, 2, "n1", "PACER_TOTAL_STEPS: not a number")}, {});
  EXPECT_EQ(a.kind, FailureAction::Kind::kFail);
  EXPECT_FALSE(a.counts_as_restart);
  EXPECT_EQ(a.reason, "InvalidWorkerConfig");
  EXPECT_NE(a.message.find("PACER_TOTAL_STEPS: not a number"), std::string::npos) << a.message;
}

TEST(WorkerFailureTest, DataLossFailsWithoutRetry) {
  const FailureAction a = DecideWorkerFailure({Worker(0, 8)}, {});
  EXPECT_EQ(a.kind, FailureAction::Kind::kFail);
  EXPECT_EQ(a.reason, "DataLoss");
}

TEST(WorkerFailureTest, OutOfMemoryRaisesTheMarginByATenthUpToHalf) {
  FailureHistory history;
  for (double expected : {0.1, 0.2, 0.3, 0.4, 0.5}) {
    const FailureAction a = DecideWorkerFailure({Worker(0, 5)}, history);
    EXPECT_EQ(a.kind, FailureAction::Kind::kReplanWithMoreMemory);
    EXPECT_TRUE(a.counts_as_restart);
    EXPECT_EQ(a.reason, "OutOfMemory");
    EXPECT_DOUBLE_EQ(a.history.memory_margin_fraction, expected);
    history = a.history;
  }
  const FailureAction capped = DecideWorkerFailure({Worker(0, 5)}, history);
  EXPECT_EQ(capped.kind, FailureAction::Kind::kRelaunch);
  EXPECT_DOUBLE_EQ(capped.history.memory_margin_fraction, 0.5);
}

TEST(WorkerFailureTest, AnOomOnOneNodeIsTheCauseNotItsPeersCollectiveFailures) {
  const FailureAction a =
      DecideWorkerFailure({Worker(0, 4, "n0"), Worker(1, 5, "n1"), Worker(2, 4, "n2")}, {});
  EXPECT_EQ(a.reason, "OutOfMemory");
  EXPECT_TRUE(a.history.collective_failures_by_node.empty()) << "the peers are not to blame";
}

// A rank killed by a signal (a segfault, the host's OOM killer) makes its
// node exit 1 and its peers exit 4 a moment later: the peers' nodes were
// struck, and after two such crashes the healthy nodes were excluded. The
// same for a pod lost without an exit code, and for a clean stop.
TEST(WorkerFailureTest, ARankThatDiedIsTheCauseNotItsPeersCollectiveFailures) {
  for (std::optional<int> cause : {std::optional<int>(1), std::optional<int>(137),
                                   std::optional<int>(7), std::optional<int>()}) {
    const FailureAction a =
        DecideWorkerFailure({Worker(0, 4, "n0"), Worker(1, cause, "n1"), Worker(2, 3, "n2")}, {});
    EXPECT_EQ(a.reason, "WorkerFailed") << cause.value_or(-1);
    EXPECT_EQ(a.kind, FailureAction::Kind::kRelaunch);
    EXPECT_NE(a.message.find("worker 1 on node n1"), std::string::npos) << a.message;
    EXPECT_TRUE(a.history.collective_failures_by_node.empty()) << cause.value_or(-1);
  }
  const FailureAction stopped = DecideWorkerFailure({Worker(0, 4, "n0"), Worker(1, 6, "n1")}, {});
  EXPECT_EQ(stopped.reason, "StoppedExternally");
  EXPECT_FALSE(stopped.counts_as_restart);
  EXPECT_TRUE(stopped.history.collective_failures_by_node.empty());
}

// A drain: one worker stopped at a checkpoint, another's pod went without
// an exit code (deleted before its status showed one). It was WorkerFailed
// and counted a restart against maxRestarts; it is the drain's stop.
TEST(WorkerFailureTest, APodWithoutAnExitCodeBesideACleanStopIsTheSameStop) {
  const FailureAction a =
      DecideWorkerFailure({Worker(0, std::nullopt, "n0"), Worker(1, 6, "n1")}, {});
  EXPECT_EQ(a.reason, "StoppedExternally") << a.message;
  EXPECT_FALSE(a.counts_as_restart);
  // A crash still outranks it, and it still outranks its peers' waits.
  EXPECT_EQ(DecideWorkerFailure({Worker(0, 137, "n0"), Worker(1, 6, "n1")}, {}).reason,
            "WorkerFailed");
  const FailureAction lost =
      DecideWorkerFailure({Worker(0, std::nullopt, "n0"), Worker(1, 4, "n1")}, {});
  EXPECT_EQ(lost.reason, "WorkerFailed");
  EXPECT_TRUE(lost.counts_as_restart);
  EXPECT_TRUE(lost.history.collective_failures_by_node.empty());
}

TEST(WorkerFailureTest, CollectiveFailuresStrikeNodesAndTwoStrikesExclude) {
  const FailureAction first = DecideWorkerFailure({Worker(1, 4, "n1")}, {});
  EXPECT_EQ(first.kind, FailureAction::Kind::kRelaunch);
  EXPECT_TRUE(first.counts_as_restart);
  EXPECT_EQ(first.reason, "CollectiveFailure");
  EXPECT_EQ(first.history.collective_failures_by_node.at("n1"), 1);
  EXPECT_TRUE(first.history.excluded_nodes.empty());

  const FailureAction second =
      DecideWorkerFailure({Worker(0, 3, "n2"), Worker(1, 3, "n1")}, first.history);
  EXPECT_EQ(second.reason, "RendezvousTimeout");
  EXPECT_EQ(second.history.collective_failures_by_node.at("n1"), 2);
  EXPECT_EQ(second.history.collective_failures_by_node.at("n2"), 1);
  EXPECT_EQ(second.history.excluded_nodes, std::vector<std::string>{"n1"});
  EXPECT_EQ(second.newly_excluded_nodes, std::vector<std::string>{"n1"});
  EXPECT_EQ(second.exclusion_cause, "2 communication failures");
  EXPECT_TRUE(first.exclusion_cause.empty()) << "nothing excluded";
  EXPECT_NE(second.message.find("without node(s) n1"), std::string::npos) << second.message;
}

// An uncorrectable ECC or NVLink error (exit 9): the GPU is broken until it
// is reset, so its node is excluded at the first fault, and the peers that
// then failed waiting for it get no strike.
TEST(WorkerFailureTest, AGpuFaultExcludesItsNodeAtOnce) {
  FailureHistory history;
  history.excluded_nodes = {"n0"};
  const FailureAction a = DecideWorkerFailure(
      {Worker(0, 4, "n2"), Worker(1, 9, "n1", "CUDA error: uncorrectable ECC error encountered"),
       Worker(2, 1, "n3")},
      history);
  EXPECT_EQ(a.kind, FailureAction::Kind::kRelaunch);
  EXPECT_TRUE(a.counts_as_restart);
  EXPECT_EQ(a.reason, "DeviceFault");
  EXPECT_EQ(a.history.excluded_nodes, (std::vector<std::string>{"n0", "n1"}));
  EXPECT_EQ(a.newly_excluded_nodes, std::vector<std::string>{"n1"});
  EXPECT_EQ(a.exclusion_cause, "a GPU fault there (worker exit code 9)");
  EXPECT_TRUE(a.history.collective_failures_by_node.empty());
  EXPECT_NE(a.message.find("worker 1 on node n1"), std::string::npos) << a.message;
  EXPECT_NE(a.message.find("without node(s) n1"), std::string::npos) << a.message;
  // It outranks an out-of-memory elsewhere: that re-plan can come next time.
  EXPECT_EQ(DecideWorkerFailure({Worker(0, 5, "n2"), Worker(1, 9, "n1")}, {}).reason,
            "DeviceFault");
  // Without a node name (local mode) nothing is excluded.
  const FailureAction local = DecideWorkerFailure({Worker(0, 9)}, {});
  EXPECT_EQ(local.reason, "DeviceFault");
  EXPECT_TRUE(local.newly_excluded_nodes.empty());
}

TEST(WorkerFailureTest, TwoWorkersOnOneNodeAreOneStrike) {
  const FailureAction a = DecideWorkerFailure({Worker(0, 4, "n1"), Worker(1, 4, "n1")}, {});
  EXPECT_EQ(a.history.collective_failures_by_node.at("n1"), 1);
  EXPECT_TRUE(a.history.excluded_nodes.empty());
}

TEST(WorkerFailureTest, AStopNobodyAskedForRelaunchesWithoutARestart) {
  const FailureAction a = DecideWorkerFailure({Worker(0, 6, "n1")}, {});
  EXPECT_EQ(a.kind, FailureAction::Kind::kRelaunch);
  EXPECT_FALSE(a.counts_as_restart);
  EXPECT_EQ(a.reason, "StoppedExternally");
}

TEST(WorkerFailureTest, OtherCodesRestartFromTheCheckpoint) {
  for (std::optional<int> code : {std::optional<int>(1), std::optional<int>(7),
                                  std::optional<int>(137), std::optional<int>()}) {
    const FailureAction a = DecideWorkerFailure({Worker(0, code, "n1")}, {});
    EXPECT_EQ(a.kind, FailureAction::Kind::kRelaunch);
    EXPECT_TRUE(a.counts_as_restart);
    EXPECT_EQ(a.reason, "WorkerFailed");
    EXPECT_TRUE(a.history.collective_failures_by_node.empty());
  }
}

TEST(WorkerFailureTest, ExcludedNodesLeaveTheInventory) {
  ClusterInventory c;
  planner::NodePool pool;
  pool.name = "h100";
  pool.gpu_type = "H100-SXM";
  pool.nodes = 3;
  pool.gpus_per_node = 8;
  pool.free_gpus = 20;
  pool.free_gpus_by_node = {8, 4, 8};
  pool.network_gbps_per_node = 3200;
  c.inventory.node_pools.push_back(pool);
  c.nodes_by_pool["h100"] = {{"n0", 8, 8}, {"n1", 8, 4}, {"n2", 8, 8}};
  planner::NodePool lonely = pool;
  lonely.name = "a100";
  lonely.nodes = 1;
  lonely.free_gpus = 8;
  lonely.free_gpus_by_node = {8};
  c.inventory.node_pools.push_back(lonely);
  c.nodes_by_pool["a100"] = {{"n3", 8, 8}};

  const ClusterInventory without = WithoutNodes(c, {"n1", "n3"});
  ASSERT_EQ(without.inventory.node_pools.size(), 1u);
  EXPECT_EQ(without.inventory.node_pools[0].nodes, 2);
  EXPECT_EQ(without.inventory.node_pools[0].free_gpus, 16);
  EXPECT_EQ(without.inventory.node_pools[0].free_gpus_by_node, (std::vector<int>{8, 8}));
  ASSERT_EQ(without.nodes_by_pool.at("h100").size(), 2u);
  EXPECT_EQ(without.nodes_by_pool.at("h100")[1].name, "n2");
  EXPECT_FALSE(without.nodes_by_pool.contains("a100"));
}

}  // namespace
}  // namespace pacer::controller
