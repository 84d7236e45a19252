// Deadline scheduling across jobs, end to end: three TrainJobs compete for
// the fixture's 8 GPUs (4 nodes x 2 H100). The planner's curve of the 1.3B
// model below on those nodes: 0.293 s per step on 2 GPUs, 0.157 s on 4,
// 0.134 s on 6, 0.102 s on 8 (`pacer sweep JOB --gpus 2,4,6,8 --cluster
// INV`, INV holding the pool the controller reads from the fixture's
// nodes: `nodePools: [{name: h100-sxm-2gpu, gpuType: H100-SXM, nodes: 4,
// gpusPerNode: 2, freeGPUs: 8, networkGbpsPerNode: 800}]`, 400 Gbit/s a
// GPU by default). A relaunch costs 5 s here (the fixture's
// --relaunch-seconds), plans keep 5% headroom and finish a minute early.
//
//   early   100,000 steps, 20 h, objective time: alone it takes all 8 GPUs
//   urgent   20,000 steps, 50 min: 45 min on 6 GPUs, 52 min on 4, so its
//           6 GPUs must start within minutes
//   late    100,000 steps, 200 min: alone on 8 GPUs it needs 170 min, on 6
//           223 min; beside urgent it cannot have 8 in time
//
// With first come, first served, early keeps its 8 GPUs and urgent waits (it
// will miss its deadline). The deadline scheduler shrinks early to make room,
// admits urgent, and rejects late with advice. A pass holds for each job what
// its reservation needs before the next pass (--scheduling-interval-seconds
// 600), so urgent's reservation, a few minutes ahead, is given at once. No
// Prometheus: progress follows the predictions, so the decisions do not
// depend on how fast the CPU workers happen to run.
#include <map>
#include <regex>
#include <set>

#include "e2e_fixture.h"

namespace pacer::e2e {
namespace {

using std::chrono::seconds;

std::string JobYaml(const std::string& name, int64_t steps, const std::string& max_duration,
                    const std::string& objective) {
  return "apiVersion: pacer.dev/v1alpha1\nkind: TrainJob\nmetadata:\n  name: " + name +
         "\n  namespace: research\nspec:\n"
         "  model: {layers: 24, hiddenSize: 2048, attentionHeads: 16, ffnHiddenSize: 8192, "
         "ffnKind: gelu, vocabSize: 32000, sequenceLength: 2048}\n"
         "  data: {samples: " +
         std::to_string(steps * 16) +
         "}\n"
         "  training: {globalBatchSize: 16, precision: bf16}\n"
         "  maxDuration: " +
         max_duration + "\n  objective: " + objective +
         "\n"
         "  resources: {gpuTypes: [H100-SXM], minGPUs: 2}\n"
         "  replan: {enabled: true, interval: 2s, slack: 5%}\n";
}

// GPUs requested by the job's pods that are not finished, by attempt label.
std::map<std::string, int> GpusByAttempt(const std::vector<nlohmann::json>& pods,
                                         const std::string& job) {
  std::map<std::string, int> gpus;
  for (const nlohmann::json& p : pods) {
    const nlohmann::json& labels = p["metadata"]["labels"];
    if (labels.value("pacer.dev/job", "") != job) continue;
    const std::string phase = p.contains("status") ? p["status"].value("phase", "") : "";
    if (phase == "Succeeded" || phase == "Failed" || p["metadata"].contains("deletionTimestamp")) {
      continue;
    }
    const nlohmann::json& limits = p["spec"]["containers"][0]["resources"]["limits"];
    gpus[labels.value("pacer.dev/attempt", "")] +=
        std::stoi(limits.value("nvidia.com/gpu", std::string("0")));
  }
  return gpus;
}

int RunningGpus(const std::vector<nlohmann::json>& pods, const std::string& job) {
  int total = 0;
  for (const nlohmann::json& p : pods) {
    const nlohmann::json& labels = p["metadata"]["labels"];
    if (labels.value("pacer.dev/job", "") != job) continue;
    if (!p.contains("status") || p["status"].value("phase", "") != "Running") continue;
    if (p["metadata"].contains("deletionTimestamp")) continue;
    total += std::stoi(p["spec"]["containers"][0]["resources"]["limits"].value("nvidia.com/gpu",
                                                                               std::string("0")));
  }
  return total;
}

std::vector<std::string> EventReasons(const std::vector<nlohmann::json>& events,
                                      const std::string& job) {
  std::vector<std::string> reasons;
  for (const nlohmann::json& e : events) {
    if (e["involvedObject"].value("name", "") == job) reasons.push_back(e.value("reason", ""));
  }
  return reasons;
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

class SchedulingE2eTest : public E2eTest {
 protected:
  // Starts the controller and lets early take the whole cluster.
  void StartWithEarlyOnEveryGpu(const std::vector<std::string>& args) {
    StartController("c1", args);
    Apply(JobYaml("early", 100000, "20h", "time"));
    ASSERT_TRUE(WaitFor([&] { return RunningGpus(Pods("research"), "early") == 8; }, seconds(120)))
        << Job("research", "early").dump(2);
  }
};

TEST_F(SchedulingE2eTest, TheSchedulerShrinksAnEarlyJobForATightDeadlineAndRejectsWhatCannotFit) {
  StartWithEarlyOnEveryGpu({"--scheduling", "deadline", "--scheduling-interval-seconds", "600"});
  // The pods can run before the status write of the pass that launched them
  // lands (seen under load): wait for it rather than read it once.
  EXPECT_TRUE(
      WaitFor([&] { return Condition(Job("research", "early"), "Admitted") == "True/Admitted"; },
              seconds(60)))
      << Job("research", "early").dump(2);
  Apply(JobYaml("urgent", 20000, "50m", "cost"));
  // Created after urgent was decided, so admitted (or not) after it.
  ASSERT_TRUE(
      WaitFor([&] { return Condition(Job("research", "urgent"), "Admitted") == "True/Admitted"; },
              seconds(60)))
      << Job("research", "urgent").dump(2);
  // 200 minutes: feasible on all 8 GPUs, not on 6 (see the top).
  Apply(JobYaml("late", 100000, "200m", "cost"));

  // urgent runs on at least the 4 GPUs its deadline needs, early gave them up.
  ASSERT_TRUE(WaitFor([&] { return RunningGpus(Pods("research"), "urgent") >= 4; }, seconds(180)))
      << Job("research", "urgent").dump(2) << Job("research", "early").dump(2);
  const nlohmann::json urgent = Job("research", "urgent");
  EXPECT_EQ(Condition(urgent, "Admitted"), "True/Admitted");
  EXPECT_TRUE(urgent["status"]["schedule"].value("admitted", false)) << urgent.dump(2);
  EXPECT_GE(urgent["status"]["schedule"].value("allocatedGpus", 0), 4) << urgent.dump(2);

  ASSERT_TRUE(WaitFor(
      [&] {
        const int early = RunningGpus(Pods("research"), "early");
        return early >= 2 && early <= 4;
      },
      seconds(180)))
      << Job("research", "early").dump(2);
  const nlohmann::json early = Job("research", "early");
  EXPECT_EQ(Condition(early, "Admitted"), "True/Admitted") << "admitted jobs are never dropped";
  EXPECT_GE(early["status"].value("attempt", 0), 2) << "the shrink was a checkpoint and relaunch";

  // late would need every GPU before its deadline: rejected, with advice.
  ASSERT_TRUE(
      WaitFor([&] { return Condition(Job("research", "late"), "Admitted") == "False/Rejected"; },
              seconds(60)))
      << Job("research", "late").dump(2);
  const nlohmann::json late = Job("research", "late");
  EXPECT_EQ(Condition(late, "Planned"), "False/Rejected");
  std::string advice;
  for (const nlohmann::json& c : late["status"]["conditions"]) {
    if (c.value("type", "") == "Admitted") advice = c.value("message", "");
  }
  EXPECT_NE(advice.find("it would be admitted with"), std::string::npos) << advice;
  EXPECT_TRUE(GpusByAttempt(Pods("research"), "late").empty()) << "a rejected job is not launched";

  // Never more GPUs asked for than the cluster has, and each job's live pods
  // belong to at most one attempt (no duplicate gang across a resize; between
  // an attempt's stop and the next one's launch a job has none).
  const std::vector<nlohmann::json> pods = Pods("research");
  int requested = 0;
  for (const char* job : {"early", "urgent"}) {
    const std::map<std::string, int> by_attempt = GpusByAttempt(pods, job);
    EXPECT_LE(by_attempt.size(), 1u) << job;
    for (const auto& [attempt, gpus] : by_attempt) requested += gpus;
  }
  EXPECT_LE(requested, 8);

  // Events are posted after the status write that decided them.
  auto has_event = [&](const std::string& job, const std::string& reason) {
    return Has(EventReasons(server_->ListObjects("/api/v1/namespaces/research/events"), job),
               reason);
  };
  EXPECT_TRUE(WaitFor([&] { return has_event("early", "Shrinking"); }, seconds(30)));
  EXPECT_TRUE(WaitFor([&] { return has_event("urgent", "Admitted"); }, seconds(30)));
  EXPECT_TRUE(WaitFor([&] { return has_event("late", "Rejected"); }, seconds(30)));
  std::string out;
  EXPECT_EQ(Kubectl({"describe", "trainjob", "late", "-n", "research"}, &out), 0);
  EXPECT_NE(out.find("Rejected"), std::string::npos) << out;
}

TEST_F(SchedulingE2eTest, FirstComeFirstServedLeavesTheTightDeadlineWaiting) {
  // The same arrival with --scheduling=fifo: early keeps every GPU, urgent
  // waits with no GPU free and will miss its deadline.
  StartWithEarlyOnEveryGpu({"--scheduling", "fifo"});
  Apply(JobYaml("urgent", 20000, "50m", "cost"));
  ASSERT_TRUE(WaitFor(
      [&] { return Condition(Job("research", "urgent"), "Planned") == "False/InsufficientGpus"; },
      seconds(60)))
      << Job("research", "urgent").dump(2);
  EXPECT_EQ(RunningGpus(Pods("research"), "early"), 8);
  EXPECT_EQ(Condition(Job("research", "urgent"), "Admitted"), "") << "no admission under fifo";
}

}  // namespace
}  // namespace pacer::e2e
