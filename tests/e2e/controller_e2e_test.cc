// pacer-controller end to end: kubectl applies TrainJobs to the test API
// server; the controller plans and launches worker pods; the fake kubelet
// runs them as real pacer-worker processes; a real Prometheus scrapes them;
// the controller reads it back, writes status and events, and re-plans.
#include <csignal>
#include <fstream>
#include <regex>
#include <set>

#include "e2e_fixture.h"

namespace pacer::e2e {
namespace {

using std::chrono::seconds;

std::string EnvOf(const nlohmann::json& pod, const std::string& name) {
  for (const nlohmann::json& e : pod["spec"]["containers"][0]["env"]) {
    if (e.value("name", "") == name) return e.value("value", "");
  }
  return "";
}

TEST_F(E2eTest, AppliedJobRunsItsPodsReportsProgressThroughPrometheusAndSucceeds) {
  if (!StartPrometheus()) GTEST_SKIP() << "no prometheus binary (scripts/install-deps.sh)";
  ControllerProcess& controller = StartController("c1");
  // Long enough for several scrapes and a measured step time (tens of
  // seconds); short enough to finish well within the wait below. 30,000
  // steps took over 600 s in the sanitizer build on CI's two loaded cores.
  const int64_t steps = kSanitizedBuild ? 4000 : 20000;
  Apply(TinyJobYaml("tiny", steps, "2h"));

  // Pods appear with the plan in their environment, GPUs, labels, owner.
  ASSERT_TRUE(WaitFor([&] { return !Pods("research").empty(); }, seconds(60)));
  const nlohmann::json job = Job("research", "tiny");
  const nlohmann::json pod = Pods("research")[0];
  EXPECT_EQ(pod["metadata"]["labels"]["pacer.dev/job"], "tiny");
  EXPECT_EQ(pod["metadata"]["labels"]["pacer.dev/attempt"], "1");
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["uid"], job["metadata"]["uid"]);
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["controller"], true);
  const std::string gpus = pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"];
  EXPECT_EQ(EnvOf(pod, "LOCAL_WORLD_SIZE"), gpus);
  EXPECT_EQ(EnvOf(pod, "PACER_GLOBAL_BATCH_SIZE"), "16");
  EXPECT_EQ(EnvOf(pod, "PACER_TOTAL_STEPS"), std::to_string(steps));
  EXPECT_EQ(EnvOf(pod, "PACER_JOB_NAME"), "tiny");
  EXPECT_EQ(pod["spec"]["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ(pod["spec"]["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
  // A relaunch does not re-chown the whole checkpoint volume.
  EXPECT_EQ(pod["spec"]["securityContext"]["fsGroupChangePolicy"], "OnRootMismatch");
  const nlohmann::json& container_security = pod["spec"]["containers"][0]["securityContext"];
  EXPECT_EQ(container_security["allowPrivilegeEscalation"], false);
  EXPECT_EQ(container_security["readOnlyRootFilesystem"], true);
  EXPECT_EQ(container_security["capabilities"]["drop"], nlohmann::json::array({"ALL"}));
  EXPECT_EQ(pod["spec"]["automountServiceAccountToken"], false) << "workers need no API token";
  EXPECT_EQ(pod["spec"]["containers"][0]["terminationMessagePolicy"], "FallbackToLogsOnError");
  // One metrics port per local rank, so a PodMonitor can scrape them all.
  std::set<std::string> port_names;
  for (const nlohmann::json& port : pod["spec"]["containers"][0]["ports"]) {
    port_names.insert(port.value("name", ""));
  }
  EXPECT_EQ(port_names.count("metrics"), 1u);
  EXPECT_EQ(port_names.count("metrics-1"), gpus == "2" ? 1u : 0u) << pod.dump(2);

  // Progress and ETA arrive through Prometheus into the status.
  ASSERT_TRUE(WaitFor(
      [&] {
        const nlohmann::json j = Job("research", "tiny");
        return (j["status"].contains("measuredStepSeconds") &&
                j["status"]["progress"].value("stepsCompleted", 0) > 0 &&
                j["status"].contains("projectedCompletionTime"));
      },
      seconds(180)))
      << Job("research", "tiny").dump(2);
  std::string out;
  EXPECT_EQ(Kubectl({"get", "trainjobs", "-n", "research"}, &out), 0) << out;
  EXPECT_NE(out.find("PHASE"), std::string::npos) << out;
  EXPECT_NE(out.find("tiny"), std::string::npos) << out;

  ASSERT_TRUE(WaitFor([&] { return Phase(Job("research", "tiny")) == "Succeeded"; }, seconds(600)))
      << Job("research", "tiny").dump(2);
  const nlohmann::json done = Job("research", "tiny");
  EXPECT_EQ(done["status"]["progress"]["stepsCompleted"], steps);
  EXPECT_EQ(done["status"]["replans"], 0) << "on track: no churn";
  EXPECT_EQ(Kubectl({"describe", "trainjob", "tiny", "-n", "research"}, &out), 0) << out;
  EXPECT_NE(out.find("Launched"), std::string::npos) << out;
  EXPECT_NE(out.find("Completed"), std::string::npos) << out;
  // The controller's own metrics carry the job.
  const std::string metrics = HttpGet(controller.metrics_port, "/metrics");
  EXPECT_NE(
      metrics.find("pacer_trainjob_progress_ratio{namespace=\"research\",trainjob=\"tiny\"} 1"),
      std::string::npos)
      << metrics.substr(0, 2000);
  EXPECT_NE(metrics.find("pacer_controller_reconcile_total"), std::string::npos);
}

// Measured far slower than predicted, on a model that more GPUs cannot speed
// up (its step is at the latency floor at any count): the controller reports
// the measurement, says no number of GPUs meets the deadline,
// and keeps the running workers instead of churning through relaunches.
TEST_F(E2eTest, SlowerThanPredictedAtTheLatencyFloorSaysUnreachableWithoutChurn) {
  if (!StartPrometheus()) GTEST_SKIP() << "no prometheus binary (scripts/install-deps.sh)";
  StartController("c1");
  // Planned on H100 predictions (about 1.4 ms a step for this tiny model, at
  // its latency floor), measured on CPU workers running the whole model
  // (PACER_SCALE=1: hundreds of milliseconds a step, and Prometheus does not
  // say it is a CPU): 200,000 steps fit 15 minutes by the prediction, not by
  // the measurement.
  Apply(
      TinyJobYaml("slow", 200000, "15m", "  worker: {env: [{name: PACER_SCALE, value: \"1\"}]}\n"));
  ASSERT_TRUE(WaitFor(
      [&] {
        const nlohmann::json j = Job("research", "slow");
        if (!j.contains("status") || !j["status"].contains("conditions")) return false;
        for (const nlohmann::json& c : j["status"]["conditions"]) {
          if (c.value("type", "") == "DeadlineAtRisk" && c.value("status", "") == "True" &&
              c.value("reason", "") == "DeadlineUnreachable") {
            return true;
          }
        }
        return false;
      },
      seconds(240)))
      << Job("research", "slow").dump(2);
  const nlohmann::json job = Job("research", "slow");
  SCOPED_TRACE(job.dump(2));
  const double measured = job["status"].value("measuredStepSeconds", 0.0);
  const double predicted =
      job["status"].value("plan", nlohmann::json::object()).value("predictedStepSeconds", 0.0);
  EXPECT_GT(measured, 10 * predicted);
  EXPECT_EQ(job["status"].value("replans", -1), 0) << "no relaunch that cannot help";
  EXPECT_EQ(job["status"].value("phase", ""), "Running");
  std::string message;
  for (const nlohmann::json& c : job["status"]["conditions"]) {
    if (c.value("type", "") == "DeadlineAtRisk") message = c.value("message", "");
  }
  EXPECT_NE(message.find("measured"), std::string::npos) << message;
  EXPECT_NE(message.find("no number of GPUs"), std::string::npos) << message;
  std::set<std::string> names;
  for (const std::string& name : kubelet_->StartedPodNames()) {
    EXPECT_TRUE(names.insert(name).second) << "pod started twice: " << name;
  }
  for (const nlohmann::json& p : Pods("research")) {
    EXPECT_EQ(EnvOf(p, "PACER_GLOBAL_BATCH_SIZE"), "16");
    EXPECT_EQ(p["metadata"]["labels"]["pacer.dev/attempt"], "1");
  }
  std::string out;
  EXPECT_EQ(Kubectl({"delete", "trainjob", "slow", "-n", "research", "--timeout=60s"}, &out), 0)
      << out;
  EXPECT_TRUE(WaitFor([&] { return Pods("research").empty(); }, seconds(60)));
}

TEST_F(E2eTest, InvalidAndImpossibleJobsGetConditionsWhileOthersAreServed) {
  StartController("c1");
  // The CRD's schema refuses what it can express (kubectl apply fails, as
  // in a cluster); what only the planner knows reaches the controller.
  std::string refused;
  const std::string bad_batch = std::regex_replace(
      TinyJobYaml("refused", 100, "1h"), std::regex("globalBatchSize: 16"), "globalBatchSize: 0");
  {
    const std::string file = (dir_ / "refused.yaml").string();
    std::ofstream(file) << bad_batch;
    ASSERT_NE(Kubectl({"apply", "-f", file}, &refused), 0) << refused;
    EXPECT_NE(refused.find("spec.training.globalBatchSize"), std::string::npos) << refused;
  }
  Apply(std::regex_replace(TinyJobYaml("invalid", 100, "1h"),
                           std::regex("gpuTypes: \\[H100-SXM\\]"),
                           "gpuTypes: [H100-SXMM]"));  // not in the catalog
  // 7B parameters on a trillion tokens within an hour, on 8 GPUs.
  Apply(std::regex_replace(TinyJobYaml("impossible", 100, "1h"),
                           std::regex("  data: \\{samples: 1600\\}"),
                           "  data: {tokens: 1e12}\n  # 7B\n") +
        "");
  // A name with a digit first and a dot: a valid TrainJob name, but not a
  // Service name or a pod hostname as it stands (the server refused the
  // Service with 422, and the job was dropped without a word).
  Apply(TinyJobYaml("7b.fine", 200, "1h"));

  ASSERT_TRUE(WaitFor([&] { return Phase(Job("research", "invalid")) == "Failed"; }, seconds(60)));
  EXPECT_EQ(Condition(Job("research", "invalid"), "InvalidSpec"), "True/InvalidSpec");
  ASSERT_TRUE(
      WaitFor([&] { return Phase(Job("research", "impossible")) == "Infeasible"; }, seconds(60)))
      << Job("research", "impossible").dump(2);
  EXPECT_EQ(Condition(Job("research", "impossible"), "Infeasible"), "True/DeadlineUnreachable");
  ASSERT_TRUE(
      WaitFor([&] { return Phase(Job("research", "7b.fine")) == "Succeeded"; }, seconds(180)))
      << Job("research", "7b.fine").dump(2);
  std::string out;
  EXPECT_EQ(Kubectl({"describe", "trainjob", "invalid", "-n", "research"}, &out), 0);
  EXPECT_NE(out.find("unknown GPU type"), std::string::npos) << out;
  EXPECT_EQ(Kubectl({"describe", "trainjob", "impossible", "-n", "research"}, &out), 0);
  EXPECT_NE(out.find("DeadlineUnreachable"), std::string::npos) << out;
  for (const nlohmann::json& p : Pods("research")) {
    EXPECT_EQ(p["metadata"]["labels"]["pacer.dev/job"], "7b.fine");
  }
}

TEST_F(E2eTest, WaitingJobLaunchesAsSoonAsGpusAreFreed) {
  // The periodic retry is an hour away: only freed GPUs can wake the job.
  StartController(
      "c1", {"--pending-retry-seconds", "3600", "--worker-image", "registry.example.com/w:7"});
  Apply(std::regex_replace(TinyJobYaml("hog", 100000, "2h"), std::regex("gpuTypes: \\[H100-SXM\\]"),
                           "gpuTypes: [H100-SXM], minGPUs: 8"));  // every GPU there is
  // Every GPU held: all four of the hog's pods bound to their nodes.
  ASSERT_TRUE(WaitFor(
      [&] {
        int bound = 0;
        for (const nlohmann::json& p : Pods("research")) {
          bound += p["spec"].contains("nodeName") && p["status"].value("phase", "") == "Running";
        }
        return bound == 4;
      },
      seconds(90)));
  Apply(TinyJobYaml("patient", 200, "2h"));
  // Waiting: the deadline scheduler (the default) admitted it and reserved
  // GPUs for it later, as late as its deadline allows; freed GPUs are given
  // out at once all the same.
  ASSERT_TRUE(WaitFor(
      [&] {
        return Condition(Job("research", "patient"), "Planned") == "False/WaitingForReservedGpus";
      },
      seconds(60)))
      << Job("research", "patient").dump(2);

  std::string out;
  ASSERT_EQ(Kubectl({"delete", "trainjob", "hog", "-n", "research", "--wait=false"}, &out), 0)
      << out;
  nlohmann::json pod;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const nlohmann::json& p : Pods("research")) {
          if (p["metadata"]["labels"]["pacer.dev/job"] == "patient") pod = p;
        }
        return !pod.is_null();
      },
      seconds(90)))
      << Job("research", "patient").dump(2);
  EXPECT_EQ(pod["spec"]["containers"][0]["image"], "registry.example.com/w:7")
      << "a job without spec.worker.image runs the controller's --worker-image";
  ASSERT_TRUE(
      WaitFor([&] { return Phase(Job("research", "patient")) == "Succeeded"; }, seconds(180)))
      << Job("research", "patient").dump(2);
}

TEST_F(E2eTest, AForceDeletedWorkerPodRelaunchesItsJob) {
  StartController("c1");
  // Re-planning hourly, and one pod (no peer to fail with it): nothing but
  // the pod's deletion can wake the job soon.
  Apply(std::regex_replace(std::regex_replace(TinyJobYaml("orphaned", 100000, "2h"),
                                              std::regex("interval: 2s"), "interval: 1h"),
                           std::regex("gpuTypes: \\[H100-SXM\\]"),
                           "gpuTypes: [H100-SXM], maxGPUs: 1"));
  ASSERT_TRUE(WaitFor([&] { return Phase(Job("research", "orphaned")) == "Running"; }, seconds(90)))
      << Job("research", "orphaned").dump(2);
  std::string victim;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const nlohmann::json& p : Pods("research")) {
          if (p["status"].value("phase", "") == "Running") victim = p["metadata"]["name"];
        }
        return !victim.empty();
      },
      seconds(60)));
  std::string out;
  ASSERT_EQ(
      Kubectl({"delete", "pod", victim, "-n", "research", "--grace-period=0", "--force"}, &out), 0)
      << out;
  ASSERT_TRUE(WaitFor(
      [&] { return Job("research", "orphaned")["status"].value("attempt", 0) >= 2; }, seconds(30)))
      << "the job was not relaunched after its pod " << victim << " was deleted\n"
      << Job("research", "orphaned").dump(2);
}

// `kubectl patch` of a running job's data reaches its workers: they are
// stopped and relaunched with the new step total (the pods say what they
// were launched with), neither a re-plan nor a restart; status.stepUnit
// survives the CRD's structural schema.
TEST_F(E2eTest, AnEditOfARunningJobsDataRelaunchesItsWorkersWithIt) {
  StartController("c1");
  // Re-planning hourly: nothing but the edit relaunches the job soon.
  Apply(std::regex_replace(TinyJobYaml("edited", 100000, "2h"), std::regex("interval: 2s"),
                           "interval: 1h"));
  ASSERT_TRUE(WaitFor([&] { return Phase(Job("research", "edited")) == "Running"; }, seconds(90)))
      << Job("research", "edited").dump(2);
  const nlohmann::json launched = Job("research", "edited")["status"];
  EXPECT_EQ(launched["stepUnit"]["globalBatchSize"], 16) << launched.dump(2);
  EXPECT_EQ(launched["stepUnit"]["sequenceLength"], 128);
  auto pod_total_steps = [&](const std::string& attempt) {
    for (const nlohmann::json& p : Pods("research")) {
      if (p["metadata"]["labels"].value("pacer.dev/attempt", "") == attempt) {
        return p["metadata"]["annotations"].value("pacer.dev/total-steps", "");
      }
    }
    return std::string();
  };
  EXPECT_EQ(pod_total_steps("1"), "100000");

  std::string out;
  ASSERT_EQ(Kubectl({"patch", "trainjob", "edited", "-n", "research", "--type", "merge", "-p",
                     R"({"spec":{"data":{"samples":3200000}}})"},
                    &out),
            0)
      << out;
  ASSERT_TRUE(WaitFor([&] { return pod_total_steps("2") == "200000"; }, seconds(60)))
      << Job("research", "edited").dump(2);
  const nlohmann::json status = Job("research", "edited")["status"];
  EXPECT_EQ(status.value("replans", -1), 0) << status.dump(2);
  EXPECT_EQ(status.value("restarts", -1), 0);
  EXPECT_EQ(Kubectl({"describe", "trainjob", "edited", "-n", "research"}, &out), 0);
  EXPECT_NE(out.find("SpecChanged"), std::string::npos) << out;
}

TEST_F(E2eTest, ApiFaultsConvergeWithoutDuplicatePods) {
  StartController("c1");
  // A failed pod create (the gang is rolled back and retried), conflicts on
  // status writes, dropped watches and an expired resourceVersion.
  server_->FailNextRequests("POST", "/pods", 500, 1);
  server_->FailNextRequests("PUT", "/status", 409, 2);
  Apply(TinyJobYaml("faulty", 1500, "1h"));
  ASSERT_TRUE(WaitFor([&] { return kubelet_->RunningWorkers() > 0; }, seconds(90)));
  server_->DropWatches();
  server_->FailNextRequests("GET", "/trainjobs", 503, 2);
  server_->CompactHistory();
  server_->DropWatches();
  ASSERT_TRUE(
      WaitFor([&] { return Phase(Job("research", "faulty")) == "Succeeded"; }, seconds(240)))
      << Job("research", "faulty").dump(2);
  std::set<std::string> names;
  for (const std::string& name : kubelet_->StartedPodNames()) {
    EXPECT_TRUE(names.insert(name).second) << "pod started twice: " << name;
    EXPECT_NE(name.find("-a1-"), std::string::npos) << "no relaunch was needed: " << name;
  }
  EXPECT_EQ(Job("research", "faulty")["status"]["restarts"], 0);
}

TEST_F(E2eTest, KilledControllerRestartsWithoutDuplicatingOrLosingPods) {
  ControllerProcess& first = StartController("c1");
  Apply(TinyJobYaml("survivor", 2500, "1h"));
  ASSERT_TRUE(WaitFor([&] { return kubelet_->RunningWorkers() > 0; }, seconds(90)));
  const std::vector<std::string> before = kubelet_->StartedPodNames();
  KillController(first, SIGKILL);
  StartController("c2");
  ASSERT_TRUE(
      WaitFor([&] { return Phase(Job("research", "survivor")) == "Succeeded"; }, seconds(600)))
      << Job("research", "survivor").dump(2);
  EXPECT_EQ(kubelet_->StartedPodNames(), before) << "the new controller adopted the running pods";
  EXPECT_EQ(Job("research", "survivor")["status"]["attempt"], 1);
}

TEST_F(E2eTest, TwoControllersElectOneLeaderAndHandOver) {
  ControllerProcess& a = StartController("a");
  ControllerProcess& b = StartController("b");
  auto holder = [&]() -> std::string {
    auto lease = server_->GetObject(
        "/apis/coordination.k8s.io/v1/namespaces/pacer-system/leases/pacer-controller");
    if (!lease.ok() || !(*lease)["spec"].contains("holderIdentity") ||
        !(*lease)["spec"]["holderIdentity"].is_string()) {
      return "";
    }
    return (*lease)["spec"]["holderIdentity"];
  };
  ASSERT_TRUE(WaitFor([&] { return !holder().empty(); }, seconds(60)));
  const std::string leader = holder();
  ASSERT_TRUE(leader == "a" || leader == "b") << leader;
  ControllerProcess& lead = leader == "a" ? a : b;
  ControllerProcess& standby = leader == "a" ? b : a;
  // Exactly one reports itself leader.
  auto is_leader = [](const ControllerProcess& c) {
    return HttpGet(c.metrics_port, "/metrics").find("\npacer_controller_leader 1") !=
           std::string::npos;
  };
  ASSERT_TRUE(WaitFor([&] { return is_leader(lead); }, seconds(30)));
  EXPECT_FALSE(is_leader(standby));
  // The leader stops (releasing the lease): the standby takes over.
  KillController(lead, SIGTERM);
  ASSERT_TRUE(WaitFor([&] { return holder() == standby.identity; }, seconds(60)));
  Apply(TinyJobYaml("after-handover", 100, "1h"));
  ASSERT_TRUE(WaitFor([&] { return Phase(Job("research", "after-handover")) == "Succeeded"; },
                      seconds(180)));
}

}  // namespace
}  // namespace pacer::e2e
