// The fake kubelet against the in-process test API server, running the real
// pacer-worker: scheduling, Running and Succeeded status, metrics endpoints,
// unschedulable pods, graceful deletion, killed workers and a two-pod
// rendezvous. Waits are on the server's or the kubelet's change
// notifications, never on sleeps.
#include "fake_kubelet.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

namespace pacer::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Generous: two cores shared with other builds and tests.
constexpr std::chrono::seconds kTimeout{120};
constexpr char kNs[] = "ns";

// The environment the controller gives a worker of a 1-node, 2-rank
// data-parallel CPU plan of a tiny model (docs/worker.md).
std::map<std::string, std::string> PlanEnv(const std::string& job, int total_steps) {
  return {{"RANK", "0"},
          {"WORLD_SIZE", "2"},
          {"LOCAL_WORLD_SIZE", "2"},
          {"NODE_RANK", "0"},
          {"NNODES", "1"},
          {"MASTER_ADDR", job + "-a1-n0." + job + "-workers.ns.svc"},
          {"MASTER_PORT", "29500"},
          {"PACER_TENSOR_PARALLEL", "1"},
          {"PACER_PIPELINE_PARALLEL", "1"},
          {"PACER_DATA_PARALLEL", "2"},
          {"PACER_ZERO_STAGE", "0"},
          {"PACER_MICRO_BATCH_SIZE", "1"},
          {"PACER_GRAD_ACCUM_STEPS", "1"},
          {"PACER_GLOBAL_BATCH_SIZE", "2"},
          {"PACER_TOTAL_STEPS", std::to_string(total_steps)},
          {"PACER_MODEL_LAYERS", "2"},
          {"PACER_MODEL_HIDDEN_SIZE", "64"},
          {"PACER_MODEL_ATTENTION_HEADS", "4"},
          {"PACER_MODEL_KV_HEADS", "4"},
          {"PACER_MODEL_FFN_HIDDEN_SIZE", "256"},
          {"PACER_MODEL_FFN_KIND", "gelu"},
          {"PACER_MODEL_VOCAB_SIZE", "512"},
          {"PACER_SEQUENCE_LENGTH", "32"},
          {"PACER_METRICS_PORT", "9400"},
          {"PACER_JOB_NAME", job},
          {"PACER_JOB_NAMESPACE", kNs}};
}

// A worker pod as the controller writes it (docs/controller.md).
json WorkerPod(const std::string& job, int node_rank, int gpus,
               const std::map<std::string, std::string>& env,
               const std::string& gpu_product = "NVIDIA-H100-80GB-HBM3") {
  const std::string name = job + "-a1-n" + std::to_string(node_rank);
  json env_list = json::array();
  for (const auto& [k, v] : env) env_list.push_back({{"name", k}, {"value", v}});
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", kNs},
        {"labels",
         {{"pacer.dev/job", job},
          {"pacer.dev/attempt", "1"},
          {"pacer.dev/node-rank", std::to_string(node_rank)},
          {"app.kubernetes.io/managed-by", "pacer"}}}}},
      {"spec",
       {{"hostname", name},
        {"subdomain", job + "-workers"},
        {"restartPolicy", "Never"},
        {"affinity",
         {{"nodeAffinity",
           {{"requiredDuringSchedulingIgnoredDuringExecution",
             {{"nodeSelectorTerms",
               json::array({{{"matchExpressions",
                              json::array({{{"key", "nvidia.com/gpu.product"},
                                            {"operator", "In"},
                                            {"values", json::array({gpu_product})}}})}}})}}}}}}},
        {"containers",
         json::array(
             {{{"name", "worker"},
               {"image", "ghcr.io/pacer/worker:test"},
               {"command", json::array({"pacer-worker", "run"})},
               {"env", env_list},
               {"resources", {{"limits", {{"nvidia.com/gpu", std::to_string(gpus)}}}}},
               {"ports", json::array({{{"name", "metrics"}, {"containerPort", 9400}}})}}})}}}};
}

std::string PodPath(const std::string& name) {
  return std::string("/api/v1/namespaces/") + kNs + "/pods/" + name;
}

// GET http://127.0.0.1:port/metrics; "" when nothing answers.
std::string FetchMetrics(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string body;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request =
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buffer[8192];
      ssize_t n;
      while ((n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0)
        body.append(buffer, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return body;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class FakeKubeletTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pacer-kubelet-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto server = TestApiServer::Start();
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    FakeKubeletOptions options;
    options.worker_binary = PACER_WORKER_BINARY;
    options.work_dir = dir_.string();
    // A broken rendezvous fails in a minute rather than the default five.
    options.extra_env["PACER_TIMEOUT_SECONDS"] = "60";
    kubelet_ = std::make_unique<FakeKubelet>(server_.get(), options);
    ASSERT_TRUE(kubelet_
                    ->AddNodes({{"gpu-a", "NVIDIA-H100-80GB-HBM3", 2},
                                {"gpu-b", "NVIDIA-H100-80GB-HBM3", 2}})
                    .ok());
    kubelet_->Start();
  }

  void TearDown() override {
    kubelet_.reset();  // kills and reaps every worker
    server_.reset();
    fs::remove_all(dir_);
  }

  void Create(const json& pod) {
    auto created = server_->CreateObject(std::string("/api/v1/namespaces/") + kNs + "/pods", pod);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
  }

  json Pod(const std::string& name) const {
    auto pod = server_->GetObject(PodPath(name));
    return pod.ok() ? *pod : json();
  }

  std::string Phase(const std::string& name) const {
    const json pod = Pod(name);
    return pod.is_object() ? pod["status"].value("phase", "") : "";
  }

  // Waits until the pod reaches `phase`; the pod as it then is.
  json WaitForPhase(const std::string& name, const std::string& phase) {
    const bool reached = server_->WaitFor([&] { return Phase(name) == phase; }, kTimeout);
    EXPECT_TRUE(reached) << name << " never reached " << phase << ": " << Pod(name).dump(2)
                         << "\nlog:\n"
                         << ReadFile(kubelet_->LogPath(kNs, name));
    return Pod(name);
  }

  static int ExitCode(const json& pod) {
    return pod["status"]["containerStatuses"][0]["state"]["terminated"].value("exitCode", -1);
  }

  // The metrics of the pod's first rank, once its endpoint answers. The
  // endpoint gives no signal when it starts listening, so this asks again
  // (as Prometheus would) with a short pause, until the deadline.
  std::string WaitForMetrics(const std::string& pod) {
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    while (std::chrono::steady_clock::now() < deadline) {
      for (const FakeKubelet::Target& t : kubelet_->Targets()) {
        if (t.pod != pod) continue;
        std::string body = FetchMetrics(t.port);
        if (body.find("pacer_worker_step ") != std::string::npos ||
            body.find("pacer_worker_step{") != std::string::npos) {
          return body;
        }
      }
      ::poll(nullptr, 0, 50);  // retry interval of a scrape loop, not a synchronisation
    }
    return "";
  }

  fs::path dir_;
  std::unique_ptr<TestApiServer> server_;
  std::unique_ptr<FakeKubelet> kubelet_;
};

TEST_F(FakeKubeletTest, SchedulesRunsAndReportsSuccess) {
  Create(WorkerPod("done", 0, 2, PlanEnv("done", 20)));
  const json succeeded = WaitForPhase("done-a1-n0", "Succeeded");
  ASSERT_EQ(succeeded["status"].value("phase", ""), "Succeeded");
  EXPECT_EQ(ExitCode(succeeded), 0) << succeeded.dump(2);
  const json& terminated = succeeded["status"]["containerStatuses"][0]["state"]["terminated"];
  EXPECT_EQ(terminated.value("reason", ""), "Completed");
  EXPECT_FALSE(terminated.value("finishedAt", "").empty());
  const std::string node = succeeded["spec"].value("nodeName", "");
  EXPECT_TRUE(node == "gpu-a" || node == "gpu-b") << node;
  EXPECT_EQ(succeeded["status"].value("podIP", ""), "127.0.0.1");
  EXPECT_EQ(kubelet_->StartedWorkers(), 1);
  EXPECT_EQ(kubelet_->WorkerExitCode(kNs, "done-a1-n0"), 0);
  // It ran the plan to its end, with its checkpoints on the job's shared volume.
  const std::string log = ReadFile(kubelet_->LogPath(kNs, "done-a1-n0"));
  EXPECT_NE(log.find("event=done steps=20"), std::string::npos) << log;
  EXPECT_TRUE(fs::is_directory(dir_ / kNs / "done" / "checkpoints"));
}

TEST_F(FakeKubeletTest, ARunningPodServesMetricsAndStopsWithACheckpointWhenDeleted) {
  Create(WorkerPod("long", 0, 2, PlanEnv("long", 100000000)));
  const json running = WaitForPhase("long-a1-n0", "Running");
  EXPECT_FALSE(running["spec"].value("nodeName", "").empty());
  const json& state = running["status"]["containerStatuses"][0];
  EXPECT_EQ(state.value("name", ""), "worker");
  EXPECT_TRUE(state.value("ready", false));
  EXPECT_FALSE(state["state"]["running"].value("startedAt", "").empty());

  // One metrics endpoint per rank, and the first answers with progress.
  std::vector<FakeKubelet::Target> targets = kubelet_->Targets();
  ASSERT_EQ(targets.size(), 2u);
  EXPECT_EQ(targets[1].port, targets[0].port + 1);
  EXPECT_EQ(targets[0].job, "long");
  EXPECT_EQ(targets[0].ns, kNs);
  const std::string metrics = WaitForMetrics("long-a1-n0");
  EXPECT_NE(metrics.find("pacer_worker_step"), std::string::npos) << metrics;

  // Deleting the pod SIGTERMs the worker: it checkpoints and exits 6, and
  // the pod stays gone.
  ASSERT_TRUE(server_->DeleteObject(PodPath("long-a1-n0")).ok());
  ASSERT_TRUE(kubelet_->WaitFor(
      [&] { return kubelet_->WorkerExitCode(kNs, "long-a1-n0").has_value(); }, kTimeout));
  const std::string log = ReadFile(kubelet_->LogPath(kNs, "long-a1-n0"));
  EXPECT_EQ(kubelet_->WorkerExitCode(kNs, "long-a1-n0"), 6) << log;
  EXPECT_NE(log.find("event=stopped"), std::string::npos) << log;
  EXPECT_NE(log.find("event=checkpoint"), std::string::npos) << log;
  EXPECT_TRUE(kubelet_->Targets().empty());
  EXPECT_EQ(kubelet_->RunningWorkers(), 0);
  EXPECT_FALSE(server_->GetObject(PodPath("long-a1-n0")).ok());
}

TEST_F(FakeKubeletTest, APodNeedingMoreGpusThanAnyNodeStaysPending) {
  Create(WorkerPod("huge", 0, 8, PlanEnv("huge", 20)));
  const bool pending = server_->WaitFor(
      [&] {
        const json pod = Pod("huge-a1-n0");
        return pod.is_object() && pod["status"].value("phase", "") == "Pending" &&
               pod["status"].contains("conditions");
      },
      kTimeout);
  ASSERT_TRUE(pending) << Pod("huge-a1-n0").dump(2);
  const json pod = Pod("huge-a1-n0");
  const json& condition = pod["status"]["conditions"][0];
  EXPECT_EQ(condition.value("type", ""), "PodScheduled");
  EXPECT_EQ(condition.value("status", ""), "False");
  EXPECT_EQ(condition.value("reason", ""), "Unschedulable");
  EXPECT_EQ(condition.value("message", ""), "0/2 nodes are available: insufficient nvidia.com/gpu");
  EXPECT_FALSE(pod["spec"].contains("nodeName"));
  EXPECT_EQ(kubelet_->StartedWorkers(), 0);
}

TEST_F(FakeKubeletTest, APodForAnotherGpuTypeStaysPending) {
  Create(WorkerPod("a100", 0, 1, PlanEnv("a100", 20), "NVIDIA-A100-SXM4-80GB"));
  ASSERT_TRUE(server_->WaitFor([&] { return Pod("a100-a1-n0")["status"].contains("conditions"); },
                               kTimeout));
  const json pod = Pod("a100-a1-n0");
  EXPECT_EQ(pod["status"]["conditions"][0].value("reason", ""), "Unschedulable");
  EXPECT_NE(pod["status"]["conditions"][0].value("message", "").find("didn't match"),
            std::string::npos);
  EXPECT_EQ(kubelet_->StartedWorkers(), 0);
}

TEST_F(FakeKubeletTest, AKilledWorkerFailsItsPodWith137AndFreesItsGpus) {
  // Two 2-GPU pods fill both nodes; a third waits for room.
  Create(WorkerPod("k1", 0, 2, PlanEnv("k1", 100000000)));
  Create(WorkerPod("k2", 0, 2, PlanEnv("k2", 100000000)));
  WaitForPhase("k1-a1-n0", "Running");
  WaitForPhase("k2-a1-n0", "Running");
  Create(WorkerPod("k3", 0, 2, PlanEnv("k3", 100000000)));
  ASSERT_TRUE(
      server_->WaitFor([&] { return Pod("k3-a1-n0")["status"].contains("conditions"); }, kTimeout));
  EXPECT_EQ(Phase("k3-a1-n0"), "Pending");

  ASSERT_TRUE(kubelet_->KillWorker(kNs, "k1-a1-n0").ok());
  const json failed = WaitForPhase("k1-a1-n0", "Failed");
  EXPECT_EQ(ExitCode(failed), 137) << failed.dump(2);
  EXPECT_EQ(failed["status"]["containerStatuses"][0]["state"]["terminated"].value("reason", ""),
            "Error");
  // Its GPUs are free again: the waiting pod runs on the same node.
  const json third = WaitForPhase("k3-a1-n0", "Running");
  EXPECT_EQ(third["spec"].value("nodeName", ""), failed["spec"].value("nodeName", ""));
  EXPECT_EQ(kubelet_->StartedWorkers(), 3);
  EXPECT_EQ(kubelet_->KillWorker(kNs, "k1-a1-n0").code(), StatusCode::kNotFound);
}

// A fault set before the pod exists: its worker dies as it starts; other
// pods run.
TEST_F(FakeKubeletTest, AWorkerKilledWhenStartedFailsItsPodOnce) {
  kubelet_->KillWorkerWhenStarted(kNs, "doomed-a1-n0");
  Create(WorkerPod("doomed", 0, 2, PlanEnv("doomed", 100000000)));
  const json failed = WaitForPhase("doomed-a1-n0", "Failed");
  EXPECT_EQ(ExitCode(failed), 137) << failed.dump(2);
  Create(WorkerPod("spared", 0, 2, PlanEnv("spared", 100000000)));
  WaitForPhase("spared-a1-n0", "Running");
  EXPECT_EQ(kubelet_->StartedWorkers(), 2);
}

TEST_F(FakeKubeletTest, TwoPodsOfOneJobRendezvousAndBothSucceed) {
  for (int node_rank = 0; node_rank < 2; ++node_rank) {
    std::map<std::string, std::string> env = PlanEnv("pair", 20);
    env["NNODES"] = "2";
    env["LOCAL_WORLD_SIZE"] = "1";
    env["NODE_RANK"] = std::to_string(node_rank);
    env["RANK"] = std::to_string(node_rank);
    Create(WorkerPod("pair", node_rank, 1, env));
  }
  const json first = WaitForPhase("pair-a1-n0", "Succeeded");
  const json second = WaitForPhase("pair-a1-n1", "Succeeded");
  EXPECT_EQ(ExitCode(first), 0);
  EXPECT_EQ(ExitCode(second), 0);
  EXPECT_EQ(kubelet_->StartedWorkers(), 2);
  std::vector<std::string> names = kubelet_->StartedPodNames();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"pair-a1-n0", "pair-a1-n1"}));
}

TEST_F(FakeKubeletTest, FileSdListsRunningWorkers) {
  const std::string path = (dir_ / "targets.json").string();
  kubelet_->SetFileSdPath(path);
  EXPECT_EQ(json::parse(ReadFile(path)), json::array());
  Create(WorkerPod("sd", 0, 2, PlanEnv("sd", 100000000)));
  ASSERT_TRUE(kubelet_->WaitFor([&] { return kubelet_->RunningWorkers() == 1; }, kTimeout));
  const json groups = json::parse(ReadFile(path));
  ASSERT_EQ(groups.size(), 2u) << groups.dump(2);
  const std::vector<FakeKubelet::Target> targets = kubelet_->Targets();
  ASSERT_EQ(targets.size(), 2u);
  EXPECT_EQ(groups[0]["targets"][0], "127.0.0.1:" + std::to_string(targets[0].port));
  EXPECT_EQ(groups[0]["labels"]["pod"], "sd-a1-n0");
  EXPECT_EQ(groups[0]["labels"]["trainjob"], "sd");
  EXPECT_EQ(groups[0]["labels"]["attempt"], "1");
  EXPECT_FALSE(groups[0]["labels"].contains("job")) << "the scrape job names itself";
  EXPECT_EQ(groups[0]["labels"]["namespace"], kNs);

  ASSERT_TRUE(kubelet_->KillWorker(kNs, "sd-a1-n0").ok());
  ASSERT_TRUE(kubelet_->WaitFor([&] { return kubelet_->RunningWorkers() == 0; }, kTimeout));
  EXPECT_EQ(json::parse(ReadFile(path)), json::array());
}

}  // namespace
}  // namespace pacer::testing
