// The end-to-end fixture: a TestApiServer, a FakeKubelet with GPU nodes
// running real pacer-worker processes, optionally a real Prometheus scraping
// them (file_sd written by the kubelet), and pacer-controller processes.
// Every wait is on a condition (the server's WaitFor wakes on each change);
// external servers (Prometheus, the controller's HTTP endpoints) are polled
// with a deadline.
#ifndef PACER_TESTS_E2E_E2E_FIXTURE_H_
#define PACER_TESTS_E2E_E2E_FIXTURE_H_

#include <gtest/gtest.h>
#include <sys/types.h>

#include <filesystem>
#include <list>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fake_kubelet.h"
#include "test_api_server.h"

namespace pacer::e2e {

// Whether this is the ASan + UBSan build, whose CPU workers take about ten
// times longer per step (on two loaded cores: ~3 ms unsanitized; over 20 ms
// sanitized, where 30,000 steps did not finish in 600 s on CI). A test that
// runs a job to completion sizes its steps
// by it, so the job runs long enough to be measured and short enough to
// finish within the test's wait in both builds.
#ifdef PACER_E2E_SANITIZED
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif

// What the fixture's Prometheus does besides scraping the workers as the
// Helm chart's PodMonitor does (job "pacer-workers", honor_labels: false: the
// fake kubelet's target labels namespace, pod, trainjob and attempt win over
// the worker's own; rank, backend and gpu_type are the worker's).
struct PrometheusOptions {
  // Also scrape every controller StartController starts afterwards, as the
  // Helm chart's ServiceMonitor does: job "pacer-controller", honor_labels
  // (per-job series keep the TrainJob's namespace), target labels
  // namespace "pacer-system" and pod "pacer-controller-<identity>".
  bool scrape_controllers = false;
  // Rule files to load, evaluated every second.
  std::vector<std::string> rule_files;
};

struct ControllerProcess {
  pid_t pid = -1;
  int metrics_port = 0;
  int probe_port = 0;
  std::string identity;
  std::string log_path;
};

class E2eTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Starts Prometheus on the kubelet's targets; false when not installed.
  bool StartPrometheus();
  bool StartPrometheus(const PrometheusOptions& options);
  std::string prometheus_url() const;

  // Starts pacer-controller and returns once its probe port answers, so a
  // test never waits on a controller that could not start. A flag in
  // `extra_args` replaces the fixture's default for it (the controller
  // refuses a flag given twice). A port taken
  // between FreePort and the controller's bind (other tests run beside this
  // one) is retried on new ports. The fixture owns the process: TearDown
  // stops it and, when the test failed, prints the end of its log.
  ControllerProcess& StartController(const std::string& identity,
                                     const std::vector<std::string>& extra_args = {});
  void KillController(ControllerProcess& c, int signal);

  // kubectl with the test kubeconfig; returns exit code, output in *out.
  int Kubectl(const std::vector<std::string>& args, std::string* out);
  // Writes `yaml` to a file and `kubectl apply -f`s it.
  void Apply(const std::string& yaml);

  nlohmann::json Job(const std::string& ns, const std::string& name) const;
  std::vector<nlohmann::json> Pods(const std::string& ns) const;
  // status.phase, or "".
  static std::string Phase(const nlohmann::json& job);
  // The condition of `type` as "Status/Reason", or "".
  std::string Condition(const nlohmann::json& job, const std::string& type) const;
  bool WaitFor(const std::function<bool()>& pred, std::chrono::seconds timeout) const;
  // GET http://127.0.0.1:<port><path>; "" when it cannot.
  static std::string HttpGet(int port, const std::string& path);

  // What SetUp starts the server with: a test fixture's constructor may
  // change it (e.g. graceful_pod_deletion).
  testing::TestApiServerOptions server_options_;
  std::filesystem::path dir_;
  std::unique_ptr<testing::TestApiServer> server_;
  std::unique_ptr<testing::FakeKubelet> kubelet_;
  std::string kubeconfig_;
  pid_t prometheus_ = -1;
  int prometheus_port_ = 0;
  // Every controller StartController started; a list so references stay valid.
  std::list<ControllerProcess> controllers_;
  // Controllers Prometheus scrapes (PrometheusOptions::scrape_controllers):
  // their file_sd file, empty when not scraping; targets as JSON groups.
  std::string controller_targets_path_;
  nlohmann::json controller_targets_ = nlohmann::json::array();
};

// A tiny GPT-style TrainJob for nodes of 2 H100s (CPU workers run it in
// milliseconds per step).
std::string TinyJobYaml(const std::string& name, int64_t steps, const std::string& max_duration,
                        const std::string& extra_spec = "");

}  // namespace pacer::e2e

#endif  // PACER_TESTS_E2E_E2E_FIXTURE_H_
