// pacer-controller end to end on control-plane defects that unit and
// integration tests covered but the real binary against an API server did
// not: a leader whose API server hangs, a rotated token file, a relaunch
// while the previous attempt's pods are still Terminating, and the
// completion time a worker pod's layout annotation predicts.
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include "e2e_fixture.h"
#include "pacer/planner/units.h"

namespace pacer::e2e {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

constexpr const char* kLease =
    "/apis/coordination.k8s.io/v1/namespaces/pacer-system/leases/pacer-controller";
constexpr const char* kEvents = "/api/v1/namespaces/research/events";

// RFC 3339 as Unix seconds; -1 when it is not one.
int64_t UnixSeconds(const nlohmann::json& value) {
  if (!value.is_string()) return -1;
  auto parsed = planner::ParseRfc3339(value.get<std::string>());
  return parsed.ok() ? *parsed : -1;
}

class ControlPlaneE2eTest : public E2eTest {
 protected:
  std::string LeaseHolder() const {
    auto lease = server_->GetObject(kLease);
    if (!lease.ok() || !(*lease)["spec"].contains("holderIdentity") ||
        !(*lease)["spec"]["holderIdentity"].is_string()) {
      return "";
    }
    return (*lease)["spec"]["holderIdentity"];
  }

  // Whether the process exited; reaps it (TearDown then leaves it alone).
  static bool Exited(ControllerProcess& c, int* exit_code) {
    if (c.pid <= 0) return true;
    int status = 0;
    if (::waitpid(c.pid, &status, WNOHANG) != c.pid) return false;
    *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    c.pid = -1;
    return true;
  }

  // What the controller says of itself; a process that is gone leads nothing.
  static bool SaysLeader(const ControllerProcess& c) {
    return c.pid > 0 && HttpGet(c.metrics_port, "/metrics").find("\npacer_controller_leader 1") !=
                            std::string::npos;
  }
};

// The server hangs (reads, never answers) the leader's Lease requests while
// the standby still reaches it. Defect: the leader's renewals waited for the
// client's 30 s request timeout while the standby took over after the 15 s
// lease duration, and judged the holder by comparing wall clocks: two
// leaders at once. The leader must step down by its renew deadline (10 s),
// before the standby's lease duration without a change (15 s) runs out.
TEST_F(ControlPlaneE2eTest, ALeaderWhoseApiServerHangsStepsDownBeforeTheStandbyTakesOver) {
  // Names that are no substring of each other, nor of "pacer-controller":
  // each one's User-Agent ("pacer-controller/<identity>") is told apart.
  ControllerProcess& a = StartController("replica-a");
  ControllerProcess& b = StartController("replica-b");
  ASSERT_TRUE(WaitFor([&] { return !LeaseHolder().empty(); }, seconds(120)));
  const std::string leader = LeaseHolder();
  ASSERT_TRUE(leader == a.identity || leader == b.identity) << leader;
  ControllerProcess& lead = leader == a.identity ? a : b;
  ControllerProcess& standby = leader == a.identity ? b : a;
  ASSERT_TRUE(WaitFor([&] { return SaysLeader(lead); }, seconds(120)));
  EXPECT_FALSE(SaysLeader(standby));

  server_->HangRequests("", "/leases", "pacer-controller/" + lead.identity);
  // Released however the test ends: the hung connections then close.
  const std::unique_ptr<void, std::function<void(void*)>> release(
      this, [this](void*) { server_->StopHanging(); });
  bool both_led = false;
  int most_hung = 0;
  int exit_code = -1;
  // Every change of the Lease and every request wakes this: the holder is
  // read first, so a leading old leader seen after it is a true overlap.
  ASSERT_TRUE(WaitFor(
      [&] {
        most_hung = std::max(most_hung, server_->HungRequestCount());
        const bool taken = LeaseHolder() == standby.identity;
        if (taken && SaysLeader(lead)) both_led = true;
        return taken && Exited(lead, &exit_code);
      },
      seconds(120)))
      << "holder " << LeaseHolder() << "; the old leader "
      << (lead.pid > 0 ? "still runs" : "exited");
  EXPECT_FALSE(both_led) << "the standby held the Lease while the old leader still led";
  EXPECT_EQ(exit_code, 1) << "pacer-controller exits 1 on a lost Lease";
  EXPECT_GE(most_hung, 1) << "the server hung the leader's requests; it did not refuse them";
  ASSERT_TRUE(WaitFor([&] { return SaysLeader(standby); }, seconds(60)));

  // The new leader serves jobs, alone.
  Apply(TinyJobYaml("after-hang", 100, "1h"));
  ASSERT_TRUE(
      WaitFor([&] { return Phase(Job("research", "after-hang")) == "Succeeded"; }, seconds(180)))
      << Job("research", "after-hang").dump(2);
  for (const testing::AuditRecord& r : server_->AuditLog()) {
    if (r.resource == "pods" && r.verb == "create") {
      EXPECT_NE(r.user_agent.find("pacer-controller/" + standby.identity), std::string::npos)
          << r.user_agent;
    }
  }
}

// The kubeconfig names a token file; the server rotates the token (the old
// one gets 401) and the file gets the new one, as a credential refresher or
// the kubelet does for a bound service-account token. Defect: the token was
// read once at start, so every request failed after the rotation and the
// leader lost its Lease.
TEST_F(ControlPlaneE2eTest, ATokenRotatedInItsFileIsReadAgainAndTheControllerKeepsServing) {
  const std::string token_file = (dir_ / "token").string();
  const auto write_token = [&](const std::string& token) {
    // Renamed into place: the controller never reads half a token.
    std::ofstream(token_file + ".tmp", std::ios::trunc) << token << "\n";
    fs::rename(token_file + ".tmp", token_file);
  };
  write_token(server_->token());
  {
    // kubectl reads the same kubeconfig: it follows the rotation as well.
    std::ostringstream text;
    text << std::ifstream(kubeconfig_).rdbuf();
    const std::string inline_token = text.str();
    const std::string with_file = std::regex_replace(
        inline_token, std::regex("\n    token: [^\n]*\n"), "\n    tokenFile: " + token_file + "\n");
    ASSERT_NE(with_file, inline_token);
    std::ofstream(kubeconfig_, std::ios::trunc) << with_file;
  }
  ControllerProcess& controller = StartController("c1");
  ASSERT_TRUE(WaitFor([&] { return SaysLeader(controller); }, seconds(120)));

  const size_t before_rotation = server_->AuditLog().size();
  server_->RotateToken("rotated-" + std::to_string(::getpid()));
  write_token(server_->token());
  // Its cached copy is the old token: the next request meets a 401 and
  // re-reads the file.
  const auto unauthorized = [&] {
    const std::vector<testing::AuditRecord> log = server_->AuditLog();
    for (size_t i = before_rotation; i < log.size(); ++i) {
      if (log[i].code == 401 && log[i].user_agent.find("pacer-controller/c1") != std::string::npos)
        return true;
    }
    return false;
  };
  ASSERT_TRUE(WaitFor(unauthorized, seconds(60))) << "the controller sent nothing after rotating";

  Apply(TinyJobYaml("after", 100, "1h"));
  ASSERT_TRUE(WaitFor([&] { return Phase(Job("research", "after")) == "Succeeded"; }, seconds(180)))
      << Job("research", "after").dump(2);
  int exit_code = -1;
  EXPECT_FALSE(Exited(controller, &exit_code)) << "exit code " << exit_code;
  EXPECT_TRUE(SaysLeader(controller)) << "it renewed its Lease with the new token";
}

// Pods deleted gracefully stay Terminating for their grace period, as in a
// cluster with a kubelet.
class ControlPlaneGracefulE2eTest : public ControlPlaneE2eTest {
 protected:
  ControlPlaneGracefulE2eTest() { server_options_.graceful_pod_deletion = true; }
};

// A worker fails; its attempt's pods are deleted and stay Terminating for
// their grace period. Defect: the next attempt was planned and its pods
// created at once, sized without the GPUs the old pods still held, and old
// and new workers could write the checkpoint volume at once.
TEST_F(ControlPlaneGracefulE2eTest, ARelaunchWaitsUntilThePreviousAttemptsPodsAreGone) {
  StartController("c1", {"--pod-termination-grace-seconds", "3"});
  // Two pods: one fails, the other must be stopped; re-planning hourly, so
  // that the failure alone relaunches. The failure is set up before the
  // job: killed once the job's steps had begun, a fast attempt 1 could end
  // first.
  kubelet_->KillWorkerWhenStarted("research", "relaunch-a1-n0");
  Apply(std::regex_replace(std::regex_replace(TinyJobYaml("relaunch", 150, "1h"),
                                              std::regex("interval: 2s"), "interval: 1h"),
                           std::regex("gpuTypes: \\[H100-SXM\\]"),
                           "gpuTypes: [H100-SXM], minGPUs: 4, maxGPUs: 4"));
  ASSERT_TRUE(
      WaitFor([&] { return kubelet_->WorkerExitCode("research", "relaunch-a1-n0").has_value(); },
              seconds(120)))
      << Job("research", "relaunch").dump(2);
  EXPECT_EQ(kubelet_->WorkerExitCode("research", "relaunch-a1-n0").value_or(-1), 137);

  // Re-evaluated on every change of the store: a pod of a later attempt
  // beside one of an earlier attempt is seen.
  std::string overlap;
  bool saw_terminating = false;
  ASSERT_TRUE(WaitFor(
      [&] {
        std::map<int, std::vector<std::string>> by_attempt;
        for (const nlohmann::json& p : Pods("research")) {
          const nlohmann::json& md = p["metadata"];
          by_attempt[std::stoi(md["labels"].value("pacer.dev/attempt", "0"))].push_back(
              md.value("name", ""));
          if (md.contains("deletionTimestamp")) saw_terminating = true;
        }
        if (by_attempt.size() > 1 && overlap.empty()) {
          for (const auto& [attempt, names] : by_attempt) {
            for (const std::string& name : names) overlap += name + " ";
          }
        }
        return Phase(Job("research", "relaunch")) == "Succeeded";
      },
      seconds(180)))
      << Job("research", "relaunch").dump(2);
  EXPECT_TRUE(saw_terminating) << "the old pods were never seen Terminating";
  EXPECT_EQ(overlap, "") << "pods of two attempts at once";
  EXPECT_GE(Job("research", "relaunch")["status"].value("attempt", 0), 2);
  bool waited = false;
  for (const nlohmann::json& e : server_->ListObjects(kEvents)) {
    waited |= e.value("reason", "") == "PreviousWorkersTerminating";
  }
  EXPECT_TRUE(waited) << "no PreviousWorkersTerminating event";
}

// Defect: the pacer.dev/layout annotation's predictedCompletionTime counted
// from 0 (1970) instead of from when the plan was made.
TEST_F(ControlPlaneE2eTest, APodsLayoutAnnotationPredictsTheCompletionTheStatusShows) {
  StartController("c1");
  Apply(TinyJobYaml("layout", 100, "1h"));
  nlohmann::json pod;
  nlohmann::json job;
  // The status plan of the attempt the pod belongs to (a re-plan would be
  // a new attempt with new pods).
  ASSERT_TRUE(WaitFor(
      [&] {
        job = Job("research", "layout");
        const std::vector<nlohmann::json> pods = Pods("research");
        if (pods.empty() || !job["status"].contains("plan")) return false;
        pod = pods.back();
        return pod["metadata"]["labels"].value("pacer.dev/attempt", "") ==
               std::to_string(job["status"].value("attempt", 0));
      },
      seconds(120)))
      << Job("research", "layout").dump(2);
  SCOPED_TRACE(job.dump(2));
  const std::string annotation = pod["metadata"]["annotations"].value("pacer.dev/layout", "");
  ASSERT_FALSE(annotation.empty()) << pod.dump(2);
  const nlohmann::json layout = nlohmann::json::parse(annotation);
  const nlohmann::json& plan = job["status"]["plan"];

  const int64_t predicted = UnixSeconds(layout["predictedCompletionTime"]);
  const int64_t created = UnixSeconds(job["metadata"]["creationTimestamp"]);
  const int64_t launched = UnixSeconds(job["status"]["launchTime"]);
  ASSERT_GT(created, 0);
  ASSERT_GE(launched, created);
  EXPECT_EQ(layout["predictedCompletionTime"], plan["predictedCompletionTime"]);
  EXPECT_GT(predicted, created);
  // The launch plus the plan's predicted run (rounded to a few digits).
  const double total = layout.value("predictedTotalSeconds", -1.0);
  EXPECT_GT(total, 0);
  EXPECT_NEAR(static_cast<double>(predicted - launched), total, 1.0 + 0.01 * total);
  EXPECT_LE(predicted, created + 3600) << "planned to meet its one-hour maxDuration";
}

}  // namespace
}  // namespace pacer::e2e
