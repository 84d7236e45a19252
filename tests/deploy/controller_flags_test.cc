// The Deployments' container arguments (the chart's, with defaults and with
// every value set, and the kustomize manifests') given to the real
// pacer-controller: it must accept every flag, take the leader Lease where
// the arguments say, sync its caches and answer /readyz. A flag the
// controller does not know, or a value it refuses, fails here rather than in
// a cluster's crash loop.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <map>

#include "deploy_util.h"
#include "local/child_process.h"

namespace pacer::deploy {
namespace {

using nlohmann::json;
using std::chrono::seconds;

struct Case {
  std::string source;
  std::vector<json> objects;
  std::string lease;  // namespace/name the arguments name
};

// The controller starts with an environment of its own (as in its pod),
// except for this run's sanitizer settings: under ASan its leak check must
// use tests/lsan.supp like every other process the tests start (without it,
// cpprestsdk's known leak at exit failed the exit status now and then).
std::map<std::string, std::string> SanitizerEnvironment() {
  std::map<std::string, std::string> env;
  for (const char* name : {"ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS"}) {
    if (const char* value = std::getenv(name)) env[name] = value;
  }
  return env;
}

class ControllerFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (env_.skipped()) GTEST_SKIP() << "kubectl was not found when the build was configured";
  }

  // Runs the controller with the Deployment's arguments, the ports moved to
  // free ones and this server's kubeconfig; checks it becomes ready and
  // holds `lease`, then stops it.
  void RunWithArgumentsOf(const Case& c) {
    SCOPED_TRACE(c.source);
    const json deployment = FindObject(c.objects, "Deployment");
    ASSERT_TRUE(deployment.is_object());
    StatusOr<int> ports = controller::FindFreePortRun(2, {});
    ASSERT_TRUE(ports.ok()) << ports.status().ToString();
    std::vector<std::string> args = {"--kubeconfig", (env_.dir() / "kubeconfig").string(),
                                     "--bind-address=127.0.0.1"};
    for (const json& a : deployment["spec"]["template"]["spec"]["containers"][0]["args"]) {
      std::string arg = a.get<std::string>();
      if (arg.rfind("--metrics-port=", 0) == 0) arg = "--metrics-port=" + std::to_string(*ports);
      if (arg.rfind("--health-probe-port=", 0) == 0) {
        arg = "--health-probe-port=" + std::to_string(*ports + 1);
      }
      args.push_back(arg);
    }
    const std::string log = (env_.dir() / (c.source + ".log")).string();
    StatusOr<pid_t> pid = controller::SpawnProcess(
        PACER_CONTROLLER_BINARY, args, SanitizerEnvironment(), log, controller::LogMode::kTruncate);
    ASSERT_TRUE(pid.ok()) << pid.status().ToString();

    // Leading and synced: the Lease names it, and its three informers watch.
    const std::string lease_path = "/apis/coordination.k8s.io/v1/namespaces/" +
                                   c.lease.substr(0, c.lease.find('/')) + "/leases/" +
                                   c.lease.substr(c.lease.find('/') + 1);
    auto holder = [&] {
      StatusOr<json> lease = env_.server().GetObject(lease_path);
      return lease.ok() ? (*lease)["spec"].value("holderIdentity", std::string()) : std::string();
    };
    const bool ready = env_.server().WaitFor(
        [&] { return !holder().empty() && env_.server().OpenWatchCount() >= 3; }, seconds(60));
    int status = 0;
    const bool exited_early = ::waitpid(*pid, &status, WNOHANG) == *pid;
    EXPECT_FALSE(exited_early) << "exit code " << WEXITSTATUS(status) << ": "
                               << controller::LastLogLine(log);
    EXPECT_TRUE(ready) << controller::LastLogLine(log);
    if (!exited_early) {
      CommandResult probe = RunCommand("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:" +
                                       std::to_string(*ports + 1) + "/readyz");
      EXPECT_EQ(probe.out, "200") << controller::LastLogLine(log);
      // SIGTERM: it stops cleanly and hands the Lease back.
      ::kill(*pid, SIGTERM);
      ASSERT_EQ(::waitpid(*pid, &status, 0), *pid);
      // The whole log's end: a sanitizer's report spans many lines.
      const std::string text = ReadFile(log);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << text.substr(text.size() > 6000 ? text.size() - 6000 : 0);
      EXPECT_EQ(holder(), "") << "the Lease was released";
    }
  }

  KubectlEnv env_;
};

TEST_F(ControllerFlagsTest, TheKustomizeDeploymentsArgumentsStartTheController) {
  CommandResult r = RunCommand(std::string(KUBECTL_BINARY) + " kustomize " + SourcePath("manifests"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  RunWithArgumentsOf({"manifests", YamlDocuments(r.out), "pacer-system/pacer-controller"});
}

TEST_F(ControllerFlagsTest, TheChartsArgumentsStartTheControllerWithDefaultsAndEveryValueSet) {
  std::string why;
  std::optional<std::string> helm = Helm(&why);
  if (!helm) GTEST_SKIP() << why;
  CommandResult defaults = HelmTemplate(*helm);
  ASSERT_EQ(defaults.exit_code, 0) << defaults.err;
  RunWithArgumentsOf({"chart-defaults", YamlDocuments(defaults.out), "pacer-system/pacer-controller"});

  CommandResult all_set = HelmTemplate(
      *helm,
      "--set leaderElection.leaseName=pacer-lease --set controller.watchNamespace=research "
      "--set controller.workers=2 --set controller.maxRestarts=5 "
      "--set controller.relaunchSeconds=120 --set controller.podTerminationGraceSeconds=60 "
      "--set controller.workerCpuPerGpu=3 --set controller.workerMemoryPerGpuGiB=8 "
      "--set controller.pendingRetrySeconds=45 --set controller.gangCompletionSeconds=90 "
      "--set controller.gangSchedulingSeconds=600 --set "
      "controller.replan.minImprovementSeconds=300 "
      "--set controller.replan.minIntervalSeconds=900 --set controller.logFormat=text "
      "--set controller.logLevel=debug --set workerImage.tag=9.9.9 "
      "--set prometheus.url=http://127.0.0.1:1 --set-json "
      "controller.extraArgs='[\"--identity=x\"]'");
  ASSERT_EQ(all_set.exit_code, 0) << all_set.err;
  RunWithArgumentsOf({"chart-all-set", YamlDocuments(all_set.out), "pacer-system/pacer-lease"});
}

// controller.extraArgs come after the flags the chart renders; a flag given
// again there overrides the rendered one (the last value wins, as with kube
// flags) rather than failing the parse with exit 2 and a crash loop.
TEST_F(ControllerFlagsTest, TheChartsExtraArgsOverrideTheFlagsItRenders) {
  std::string why;
  std::optional<std::string> helm = Helm(&why);
  if (!helm) GTEST_SKIP() << why;
  CommandResult r =
      HelmTemplate(*helm,
                   "--set-json controller.extraArgs='[\"--log-level=debug\",\"--workers=2\","
                   "\"--max-restarts=5\"]'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> objects = YamlDocuments(r.out);
  // The premise: each flag is in the arguments twice, the chart's value first.
  const json args =
      FindObject(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"];
  std::vector<std::string> given;
  for (const json& a : args) given.push_back(a.get<std::string>());
  for (const auto& [rendered, extra] :
       {std::pair<std::string, std::string>{"--log-level=info", "--log-level=debug"},
        {"--workers=4", "--workers=2"},
        {"--max-restarts=3", "--max-restarts=5"}}) {
    const auto first = std::find(given.begin(), given.end(), rendered);
    const auto last = std::find(given.begin(), given.end(), extra);
    EXPECT_TRUE(first != given.end() && last != given.end() && first < last)
        << rendered << " then " << extra << " in " << args.dump();
  }
  // It starts with them (the parse does not fail on a flag given twice).
  RunWithArgumentsOf({"chart-extra-args", objects, "pacer-system/pacer-controller"});
}

}  // namespace
}  // namespace pacer::deploy
