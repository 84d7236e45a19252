#include "e2e_fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <utility>

extern char** environ;

namespace pacer::e2e {
namespace {

namespace fs = std::filesystem;

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool OnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path == nullptr ? "" : path);
  std::string d;
  while (std::getline(dirs, d, ':')) {
    if (::access((d + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

// Prometheus re-reads file_sd files at any moment: never let it see half of one.
void WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp, std::ios::trunc) << text << "\n";
  std::error_code ignored;
  fs::rename(tmp, path, ignored);
}

// The last `bytes` of a log file.
std::string LogTail(const std::string& path, std::streamoff bytes = 6000) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - bytes));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void StopProcess(pid_t pid, int signal) {
  if (pid <= 0) return;
  ::kill(pid, signal);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

}  // namespace

void E2eTest::SetUp() {
  if (std::string(KUBECTL_BINARY).empty() || ::access(KUBECTL_BINARY, X_OK) != 0) {
    GTEST_SKIP() << "no kubectl (the end-to-end tests drive the real client)";
  }
  dir_ =
      fs::temp_directory_path() / ("pacer-e2e-" + std::to_string(::getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  auto server = testing::TestApiServer::Start(server_options_);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  server_ = std::move(*server);
  kubeconfig_ = (dir_ / "kubeconfig").string();
  ASSERT_TRUE(server_->WriteKubeconfig(kubeconfig_).ok());
  // The real CRD: the server then validates and prunes TrainJobs by its
  // schema as kube-apiserver does, so a status field the controller writes
  // but the schema lacks is lost here as it would be in a cluster.
  std::string out;
  ASSERT_EQ(Kubectl({"apply", "-f",
                     std::string(PACER_SOURCE_DIR) + "/manifests/crd/pacer.dev_trainjobs.yaml"},
                    &out),
            0)
      << out;

  testing::FakeKubeletOptions options;
  options.worker_binary = PACER_WORKER_BINARY;
  options.work_dir = (dir_ / "kubelet").string();
  options.extra_env = {{"PACER_TIMEOUT_SECONDS", "60"}};
  kubelet_ = std::make_unique<testing::FakeKubelet>(server_.get(), options);
  std::vector<testing::FakeNode> nodes;
  for (int i = 0; i < 4; ++i)
    nodes.push_back({"gpu-" + std::to_string(i), "NVIDIA-H100-80GB-HBM3", 2});
  ASSERT_TRUE(kubelet_->AddNodes(nodes).ok());
  kubelet_->SetFileSdPath((dir_ / "targets.json").string());
  kubelet_->Start();
}

void E2eTest::TearDown() {
  for (ControllerProcess& c : controllers_) {
    KillController(c, SIGTERM);
    // What a failed test's controllers said: the machine that ran it may be gone.
    if (HasFailure()) {
      std::cerr << "---- end of " << c.log_path << "\n" << LogTail(c.log_path) << "----\n";
    }
  }
  if (kubelet_) kubelet_->Stop();
  kubelet_.reset();
  StopProcess(prometheus_, SIGTERM);
  server_.reset();
  std::error_code ignored;
  if (!HasFailure() && !dir_.empty()) fs::remove_all(dir_, ignored);
}

bool E2eTest::StartPrometheus() { return StartPrometheus(PrometheusOptions{}); }

bool E2eTest::StartPrometheus(const PrometheusOptions& options) {
  if (!OnPath("prometheus")) return false;
  prometheus_port_ = FreePort();
  {
    std::ofstream config(dir_ / "prometheus.yml");
    config << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
           << "scrape_configs:\n  - job_name: pacer-workers\n    honor_labels: false\n"
           << "    file_sd_configs: [{files: ['" << (dir_ / "targets.json").string()
           << "'], refresh_interval: 1s}]\n";
    if (options.scrape_controllers) {
      controller_targets_path_ = (dir_ / "controllers.json").string();
      WriteFileAtomically(controller_targets_path_, controller_targets_.dump(2));
      config << "  - job_name: pacer-controller\n    honor_labels: true\n"
             << "    file_sd_configs: [{files: ['" << controller_targets_path_
             << "'], refresh_interval: 1s}]\n";
    }
    if (!options.rule_files.empty()) {
      config << "rule_files:\n";
      for (const std::string& f : options.rule_files) config << "  - '" << f << "'\n";
    }
  }
  prometheus_ = Spawn(
      {"prometheus", "--config.file=" + (dir_ / "prometheus.yml").string(),
       "--storage.tsdb.path=" + (dir_ / "prometheus-data").string(),
       "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port_), "--log.level=warn"},
      (dir_ / "prometheus.log").string());
  return prometheus_ > 0;
}

std::string E2eTest::prometheus_url() const {
  return prometheus_port_ > 0 ? "http://127.0.0.1:" + std::to_string(prometheus_port_) : "";
}

ControllerProcess& E2eTest::StartController(const std::string& identity,
                                            const std::vector<std::string>& extra_args) {
  constexpr int kAttempts = 5;
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    ControllerProcess c;
    c.identity = identity;
    c.metrics_port = FreePort();
    c.probe_port = FreePort();
    c.log_path =
        (dir_ / ("controller-" + identity + "-" + std::to_string(attempt) + ".log")).string();
    std::vector<std::string> args = {PACER_CONTROLLER_BINARY,
                                     "--kubeconfig",
                                     kubeconfig_,
                                     "--identity",
                                     identity,
                                     "--bind-address",
                                     "127.0.0.1",
                                     "--metrics-port",
                                     std::to_string(c.metrics_port),
                                     "--health-probe-port",
                                     std::to_string(c.probe_port)};
    const std::vector<std::pair<std::string, std::string>> defaults = {
        {"--workers", "2"},
        {"--relaunch-seconds", "5"},
        {"--replan-min-improvement-seconds", "5"},
        {"--replan-min-interval-seconds", "30"},
        {"--pod-termination-grace-seconds", "30"}};
    for (const auto& [flag, value] : defaults) {
      if (std::find(extra_args.begin(), extra_args.end(), flag) != extra_args.end()) continue;
      args.push_back(flag);
      args.push_back(value);
    }
    if (!prometheus_url().empty()) {
      args.push_back("--prometheus-url");
      args.push_back(prometheus_url());
    }
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    c.pid = Spawn(args, c.log_path);

    // Up when its probe port answers; or it exited, and its log says why.
    bool exited = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (c.pid > 0 && std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
        exited = true;
        c.pid = -1;
        break;
      }
      if (!HttpGet(c.probe_port, "/healthz").empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a port
    }
    const std::string log = LogTail(c.log_path);
    if (exited && log.find("cannot listen") != std::string::npos && attempt < kAttempts) continue;
    EXPECT_FALSE(exited) << "controller " << identity << " exited at start:\n" << log;
    if (!controller_targets_path_.empty()) {
      controller_targets_.push_back(
          {{"targets", nlohmann::json::array({"127.0.0.1:" + std::to_string(c.metrics_port)})},
           {"labels", {{"namespace", "pacer-system"}, {"pod", "pacer-controller-" + identity}}}});
      WriteFileAtomically(controller_targets_path_, controller_targets_.dump(2));
    }
    controllers_.push_back(std::move(c));
    return controllers_.back();
  }
  return controllers_.back();  // not reached: the last attempt always returns
}

void E2eTest::KillController(ControllerProcess& c, int signal) {
  StopProcess(c.pid, signal);
  c.pid = -1;
}

int E2eTest::Kubectl(const std::vector<std::string>& args, std::string* out) {
  std::string command = std::string(KUBECTL_BINARY) + " --kubeconfig " + kubeconfig_;
  for (const std::string& a : args) command += " '" + a + "'";
  command += " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  out->clear();
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out->append(buffer, n);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void E2eTest::Apply(const std::string& yaml) {
  static int counter = 0;
  const fs::path file = dir_ / ("job-" + std::to_string(++counter) + ".yaml");
  std::ofstream(file) << yaml;
  std::string out;
  ASSERT_EQ(Kubectl({"apply", "-f", file.string()}, &out), 0) << out;
}

nlohmann::json E2eTest::Job(const std::string& ns, const std::string& name) const {
  auto job = server_->GetObject("/apis/pacer.dev/v1alpha1/namespaces/" + ns + "/trainjobs/" + name);
  nlohmann::json out = job.ok() ? *job : nlohmann::json::object();
  // Tests read status fields of const objects: make the status always there.
  if (!out.contains("status") || !out["status"].is_object())
    out["status"] = nlohmann::json::object();
  if (!out["status"].contains("progress")) out["status"]["progress"] = nlohmann::json::object();
  return out;
}

std::vector<nlohmann::json> E2eTest::Pods(const std::string& ns) const {
  return server_->ListObjects("/api/v1/namespaces/" + ns + "/pods");
}

std::string E2eTest::Phase(const nlohmann::json& job) {
  // Without json::value, which GCC 12 at -O3 flags as a possible null
  // dereference after inlining.
  auto status = job.find("status");
  if (status == job.end() || !status->is_object()) return "";
  auto phase = status->find("phase");
  return phase != status->end() && phase->is_string() ? phase->get<std::string>() : "";
}

std::string E2eTest::Condition(const nlohmann::json& job, const std::string& type) const {
  if (!job.contains("status") || !job["status"].contains("conditions")) return "";
  for (const nlohmann::json& c : job["status"]["conditions"]) {
    if (c.value("type", "") == type) return c.value("status", "") + "/" + c.value("reason", "");
  }
  return "";
}

bool E2eTest::WaitFor(const std::function<bool()>& pred, std::chrono::seconds timeout) const {
  return server_->WaitFor(pred, timeout);
}

std::string E2eTest::HttpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "";
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::write(fd, request.data(), request.size()) < 0) {
    ::close(fd);
    return "";
  }
  std::string response;
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buffer, sizeof(buffer))) > 0)
    response.append(buffer, static_cast<size_t>(n));
  ::close(fd);
  return response;
}

std::string TinyJobYaml(const std::string& name, int64_t steps, const std::string& max_duration,
                        const std::string& extra_spec) {
  std::ostringstream y;
  y << "apiVersion: pacer.dev/v1alpha1\nkind: TrainJob\nmetadata:\n  name: " << name
    << "\n  namespace: research\nspec:\n"
    << "  model: {layers: 2, hiddenSize: 128, attentionHeads: 4, ffnHiddenSize: 512, "
       "ffnKind: gelu, vocabSize: 4096, sequenceLength: 128}\n"
    << "  data: {samples: " << steps * 16 << "}\n"
    << "  training: {globalBatchSize: 16, precision: bf16}\n"
    << "  maxDuration: " << max_duration << "\n"
    << "  objective: cost\n"
    << "  resources: {gpuTypes: [H100-SXM]}\n"
    << "  replan: {enabled: true, interval: 2s, slack: 5%}\n"
    << extra_spec;
  return y.str();
}

}  // namespace pacer::e2e
