// reconcile_bench: the controller's reconcile latency and memory at scale
// (docs/benchmarks.md, "Controller reconcile at scale").
//
// A TestApiServer holds N nodes and J TrainJobs; the controller's pieces are
// wired as controller/daemon/controller_manager.cc wires them (informers on
// TrainJobs, Pods indexed by pacer.dev/job, and Nodes; KubeJobStore,
// PodLauncher, KubeInventory, a PrometheusMetricsSource without Prometheus)
// and the Reconciler is called directly, one key at a time, so each call is
// timed alone, without the work queue's scheduling in the way:
//
//   launch        the first pass of every job: finalizer, plan, pods, status
//   steady        every worker pod Running (bound to a node, as the scheduler
//                 and kubelet would leave it): measure (no Prometheus ->
//                 Degraded), project, run the re-plan policy, write status
//   steady-again  the pass a job gets every replan interval from then on
//
// The API server runs in a child process (forked before any thread starts)
// so that this process's memory is the controller's alone; the child does
// the bulk writes a scheduler and kubelet would do (binding pods, marking
// them Running) directly in its store, on command over a pipe.
//
// Each call to the reconcile interfaces is timed too (the JobStore,
// Launcher, MetricsSource and InventorySource are wrapped), which splits a
// pass into API round trips, cache reads and the reconciler's own work.
//
// Usage: reconcile_bench [--jobs 1000] [--pods-per-job 10] [--nodes K]
//                        [--namespaces 10] [--unique-names]
// Jobs are ns-<i % namespaces>/job-<i / namespaces> (the same names in every
// namespace), or job-<i> with --unique-names.
// K defaults to jobs x pods-per-job: every worker pod takes a whole 8-GPU
// node. Units: latencies in milliseconds, memory in MiB.
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/cache_transforms.h"
#include "core/clock.h"
#include "core/node_inventory.h"
#include "daemon/kube_sources.h"
#include "daemon/pod_launcher.h"
#include "daemon/worker_pods.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/kube_client.h"
#include "kube/kube_config.h"
#include "kube/resources.h"
#include "pacer/planner/search.h"
#include "reconcile/job_object.h"
#include "reconcile/reconciler.h"
#include "test_api_server.h"

namespace pacer::controller {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// VmRSS of this process, MiB.
double CurrentRssMib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  return 0;
}

// ru_maxrss of this process, MiB (Linux reports KiB).
double PeakRssMib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

struct Flags {
  int jobs = 1000;
  int pods_per_job = 10;
  int nodes = 0;  // 0 = jobs x pods_per_job
  int namespaces = 10;
  // job-<i> across all namespaces instead of job-0.. in each: no two jobs
  // share a name (and so a pacer.dev/job label value).
  bool unique_names = false;
};

bool ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--unique-names") {
      flags->unique_names = true;
      continue;
    }
    int* target = nullptr;
    if (arg == "--jobs") target = &flags->jobs;
    if (arg == "--pods-per-job") target = &flags->pods_per_job;
    if (arg == "--nodes") target = &flags->nodes;
    if (arg == "--namespaces") target = &flags->namespaces;
    if (target == nullptr || i + 1 >= argc) {
      std::fprintf(
          stderr,
          "usage: %s [--jobs N] [--pods-per-job M] [--nodes K] [--namespaces S] [--unique-names]\n"
          "unknown flag or missing value: %s\n",
          argv[0], arg.c_str());
      return false;
    }
    *target = std::atoi(argv[++i]);
    if (*target <= 0) {
      std::fprintf(stderr, "%s must be a positive integer, got \"%s\"\n", arg.c_str(), argv[i]);
      return false;
    }
  }
  if (flags->nodes == 0) flags->nodes = flags->jobs * flags->pods_per_job;
  flags->namespaces = std::min(flags->namespaces, flags->jobs);
  return true;
}

// ---------------------------------------------------------------------------
// The API server's process. Commands, one a line; every answer is one line
// starting "ok" or "error".

constexpr int kGpusPerNode = 8;

json NodeObject(int i) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", "node-" + std::to_string(i)},
            {"labels",
             {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
              {"kubernetes.io/hostname", "node-" + std::to_string(i)}}}}},
          {"status",
           {{"allocatable", {{"nvidia.com/gpu", std::to_string(kGpusPerNode)}}},
            {"capacity", {{"nvidia.com/gpu", std::to_string(kGpusPerNode)}}},
            {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
}

// A 1.3B model pinned to `gpus` H100s (minGPUs = maxGPUs), so the plan is
// gpus / 8 nodes of 8 and the pod count is known in advance. The global
// batch is 8 sequences per GPU so that some layout divides it exactly (512
// has no layout on 80 GPUs: data parallelism must divide the batch). 30 days
// is far from the hour or two the plan needs: the job is on track and never
// re-planned.
json TrainJobObject(const std::string& ns, const std::string& name, int gpus) {
  return {{"apiVersion", "pacer.dev/v1alpha1"},
          {"kind", "TrainJob"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"model", {{"parameters", "1.3B"}, {"sequenceLength", 2048}}},
            {"data", {{"tokens", 2e10}}},
            {"training", {{"globalBatchSize", 8 * gpus}, {"precision", "bf16"}}},
            {"maxDuration", "30d"},
            {"resources", {{"gpuTypes", {"H100-SXM"}}, {"minGPUs", gpus}, {"maxGPUs", gpus}}}}}};
}

std::string JobNamespace(int job, const Flags& flags) {
  return "ns-" + std::to_string(job % flags.namespaces);
}
std::string JobName(int job, const Flags& flags) {
  return "job-" + std::to_string(flags.unique_names ? job : job / flags.namespaces);
}

std::string ServerAnswer(pacer::testing::TestApiServer& server, const std::string& command,
                         const Flags& flags) {
  const auto start = Clock::now();
  if (command == "populate") {
    for (int i = 0; i < flags.nodes; ++i) {
      StatusOr<json> made = server.CreateObject("/api/v1/nodes", NodeObject(i));
      if (!made.ok()) return "error " + made.status().ToString();
    }
    for (int j = 0; j < flags.jobs; ++j) {
      const std::string ns = JobNamespace(j, flags);
      StatusOr<json> made = server.CreateObject(
          "/apis/pacer.dev/v1alpha1/namespaces/" + ns + "/trainjobs",
          TrainJobObject(ns, JobName(j, flags), flags.pods_per_job * kGpusPerNode));
      if (!made.ok()) return "error " + made.status().ToString();
    }
  } else if (command == "run-pods") {
    // What the scheduler and the kubelet would do: bind every pod to a node
    // of its own (round robin when there are fewer nodes) and start it.
    std::vector<json> pods = server.ListObjects("/api/v1/pods");
    int node = 0;
    for (json& pod : pods) {
      const std::string path = "/api/v1/namespaces/" + pod["metadata"].value("namespace", "") +
                               "/pods/" + pod["metadata"].value("name", "");
      pod["spec"]["nodeName"] = "node-" + std::to_string(node++ % flags.nodes);
      pod["status"] = {
          {"phase", "Running"},
          {"startTime", "2026-01-01T00:00:00Z"},
          {"containerStatuses",
           json::array({{{"name", "worker"},
                         {"ready", true},
                         {"restartCount", 0},
                         {"state", {{"running", {{"startedAt", "2026-01-01T00:00:00Z"}}}}}}})}};
      StatusOr<json> updated = server.UpdateObject(path, std::move(pod));
      if (!updated.ok()) return "error " + updated.status().ToString();
    }
    char answer[128];
    std::snprintf(answer, sizeof(answer), "ok %.1f %.1f %zu", MillisSince(start), CurrentRssMib(),
                  pods.size());
    return answer;
  } else if (command != "rss") {
    return "error unknown command " + command;
  }
  char answer[96];
  std::snprintf(answer, sizeof(answer), "ok %.1f %.1f", MillisSince(start), CurrentRssMib());
  return answer;
}

// Runs in the child: serves until "quit" or the parent goes away.
[[noreturn]] void ServeInChild(int commands_fd, int answers_fd, const std::string& kubeconfig,
                               const Flags& flags) {
  FILE* in = ::fdopen(commands_fd, "r");
  FILE* out = ::fdopen(answers_fd, "w");
  pacer::testing::TestApiServerOptions options;
  // Every write of the run stays resumable, so no watch is cut off with 410
  // Gone (a relist would be timed as part of whatever reconcile it hit).
  options.history_limit = 4 * static_cast<size_t>(flags.nodes + flags.jobs * flags.pods_per_job) +
                          16 * static_cast<size_t>(flags.jobs);
  auto server = pacer::testing::TestApiServer::Start(options);
  if (!server.ok()) {
    std::fprintf(out, "error %s\n", server.status().ToString().c_str());
    std::fflush(out);
    std::_Exit(1);
  }
  Status written = (*server)->WriteKubeconfig(kubeconfig);
  std::fprintf(out, "%s\n", written.ok() ? "ok" : ("error " + written.ToString()).c_str());
  std::fflush(out);
  char line[256];
  while (std::fgets(line, sizeof(line), in) != nullptr) {
    std::string command(line);
    while (!command.empty() && (command.back() == '\n' || command.back() == '\r')) {
      command.pop_back();
    }
    if (command == "quit") break;
    std::fprintf(out, "%s\n", ServerAnswer(**server, command, flags).c_str());
    std::fflush(out);
  }
  server->reset();
  std::fprintf(out, "ok\n");
  std::fflush(out);
  std::_Exit(0);
}

class ServerProcess {
 public:
  // Forks; must run before this process starts any thread.
  static StatusOr<std::unique_ptr<ServerProcess>> Start(const std::string& kubeconfig,
                                                        const Flags& flags) {
    int commands[2], answers[2];
    if (::pipe(commands) != 0 || ::pipe(answers) != 0) {
      return InternalError(std::string("pipe: ") + std::strerror(errno));
    }
    const pid_t pid = ::fork();
    if (pid < 0) return InternalError(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::close(commands[1]);
      ::close(answers[0]);
      ServeInChild(commands[0], answers[1], kubeconfig, flags);
    }
    ::close(commands[0]);
    ::close(answers[1]);
    auto process = std::unique_ptr<ServerProcess>(
        new ServerProcess(pid, ::fdopen(commands[1], "w"), ::fdopen(answers[0], "r")));
    std::string ready = process->ReadLine();
    if (ready != "ok") return UnavailableError("the test API server did not start: " + ready);
    return process;
  }

  ~ServerProcess() {
    std::fprintf(commands_, "quit\n");
    std::fflush(commands_);
    (void)ReadLine();
    std::fclose(commands_);
    std::fclose(answers_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }

  // The answer's numbers after "ok"; an error names the command.
  StatusOr<std::vector<double>> Command(const std::string& command) {
    std::fprintf(commands_, "%s\n", command.c_str());
    std::fflush(commands_);
    const std::string answer = ReadLine();
    if (answer.rfind("ok", 0) != 0) {
      return InternalError("test API server, command \"" + command + "\": " + answer);
    }
    std::istringstream fields(answer.substr(2));
    std::vector<double> numbers;
    for (double x = 0; fields >> x;) numbers.push_back(x);
    return numbers;
  }

 private:
  ServerProcess(pid_t pid, FILE* commands, FILE* answers)
      : pid_(pid), commands_(commands), answers_(answers) {}

  std::string ReadLine() {
    char line[1024];
    if (std::fgets(line, sizeof(line), answers_) == nullptr) return "error: the server exited";
    std::string s(line);
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }

  pid_t pid_;
  FILE* commands_;
  FILE* answers_;
};

// ---------------------------------------------------------------------------
// Timing of the reconciler's calls to the outside world.

class CallTimes {
 public:
  void Add(const std::string& call, double ms) {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[call];
    ++e.count;
    e.total_ms += ms;
    e.max_ms = std::max(e.max_ms, ms);
  }

  struct Entry {
    int64_t count = 0;
    double total_ms = 0;
    double max_ms = 0;
  };
  std::map<std::string, Entry> TakeAll() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(entries_, {});
  }

 private:
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

// Times one call into `times` under `name`.
template <typename F>
auto Timed(CallTimes* times, const char* name, F&& f) {
  const auto start = Clock::now();
  auto result = f();
  times->Add(name, MillisSince(start));
  return result;
}

class TimedJobStore final : public JobStore {
 public:
  TimedJobStore(JobStore* inner, CallTimes* times) : inner_(inner), times_(times) {}
  StatusOr<json> Get(const std::string& key) override {
    return Timed(times_, "JobStore.Get", [&] { return inner_->Get(key); });
  }
  Status WriteStatus(const json& job, const json& status) override {
    return Timed(times_, "JobStore.WriteStatus", [&] { return inner_->WriteStatus(job, status); });
  }
  StatusOr<json> SetFinalizer(const json& job, const std::string& finalizer,
                              bool present) override {
    return Timed(times_, "JobStore.SetFinalizer",
                 [&] { return inner_->SetFinalizer(job, finalizer, present); });
  }
  void RecordEvent(const json& job, const std::string& type, const std::string& reason,
                   const std::string& message) override {
    const auto start = Clock::now();
    inner_->RecordEvent(job, type, reason, message);
    times_->Add("JobStore.RecordEvent", MillisSince(start));
  }

 private:
  JobStore* inner_;
  CallTimes* times_;
};

class TimedLauncher final : public Launcher {
 public:
  TimedLauncher(Launcher* inner, CallTimes* times) : inner_(inner), times_(times) {}
  Status Launch(const LaunchSpec& spec) override {
    return Timed(times_, "Launcher.Launch", [&] { return inner_->Launch(spec); });
  }
  StatusOr<std::optional<WorkerGroup>> Observe(const JobRef& job) override {
    return Timed(times_, "Launcher.Observe", [&] { return inner_->Observe(job); });
  }
  Status Stop(const JobRef& job, StopMode mode) override {
    return Timed(times_, "Launcher.Stop", [&] { return inner_->Stop(job, mode); });
  }

 private:
  Launcher* inner_;
  CallTimes* times_;
};

class TimedMetrics final : public MetricsSource {
 public:
  TimedMetrics(MetricsSource* inner, CallTimes* times) : inner_(inner), times_(times) {}
  StatusOr<Measurement> Measure(const JobRef& job) override {
    return Timed(times_, "MetricsSource.Measure", [&] { return inner_->Measure(job); });
  }

 private:
  MetricsSource* inner_;
  CallTimes* times_;
};

class TimedInventory final : public InventorySource {
 public:
  TimedInventory(InventorySource* inner, CallTimes* times) : inner_(inner), times_(times) {}
  StatusOr<ClusterInventory> Current() override {
    return Timed(times_, "InventorySource.Current", [&] { return inner_->Current(); });
  }

 private:
  InventorySource* inner_;
  CallTimes* times_;
};

// Counts the pods the informer has and how many of them run, so the bench
// waits on a condition instead of copying 10,000 pods per poll.
class PodCounter {
 public:
  void OnChange(const std::string& key, const json* pod) {
    std::lock_guard<std::mutex> lock(mu_);
    if (pod == nullptr) {
      running_.erase(key);
      present_.erase(key);
    } else {
      present_.insert(key);
      if (pod->value("status", json::object()).value("phase", "") == "Running") {
        running_.insert(key);
      } else {
        running_.erase(key);
      }
    }
    cv_.notify_all();
  }

  // Waits until at least `pods` pods are cached (and running, if asked).
  bool WaitFor(size_t pods, bool running, std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout,
                        [&] { return (running ? running_.size() : present_.size()) >= pods; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> present_;
  std::set<std::string> running_;
};

// ---------------------------------------------------------------------------
// Results.

struct PhaseResult {
  std::string name;
  std::vector<double> latencies_ms;
  std::map<std::string, int> phases;  // the jobs' phase after the pass
  std::map<std::string, CallTimes::Entry> calls;
  int errors = 0;
  std::string first_error;
  double wall_ms = 0;
  double rss_after_mib = 0;
};

double Percentile(std::vector<double> sorted, double p) {
  if (sorted.empty()) return 0;
  std::sort(sorted.begin(), sorted.end());
  // Nearest rank.
  const size_t rank =
      static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

PhaseResult RunPhase(const std::string& name, Reconciler& reconciler,
                     const std::vector<std::string>& keys, CallTimes& times) {
  PhaseResult r;
  r.name = name;
  (void)times.TakeAll();
  const auto phase_start = Clock::now();
  for (const std::string& key : keys) {
    const auto start = Clock::now();
    ReconcileResult result = reconciler.Reconcile(key);
    r.latencies_ms.push_back(MillisSince(start));
    if (!result.status.ok()) {
      if (r.errors++ == 0) r.first_error = key + ": " + result.status.ToString();
    }
    std::optional<JobView> view = reconciler.View(key);
    ++r.phases[view ? PhaseName(view->phase) : "none"];
  }
  r.wall_ms = MillisSince(phase_start);
  r.calls = times.TakeAll();
  r.rss_after_mib = CurrentRssMib();
  return r;
}

void PrintLatencyTable(const std::vector<PhaseResult>& phases) {
  std::printf("\n| phase | reconciles | p50 ms | p90 ms | p99 ms | max ms | mean ms | errors |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const PhaseResult& r : phases) {
    double sum = 0;
    for (double x : r.latencies_ms) sum += x;
    std::printf(
        "| %s | %zu | %.2f | %.2f | %.2f | %.2f | %.2f | %d |\n", r.name.c_str(),
        r.latencies_ms.size(), Percentile(r.latencies_ms, 50), Percentile(r.latencies_ms, 90),
        Percentile(r.latencies_ms, 99), Percentile(r.latencies_ms, 100),
        r.latencies_ms.empty() ? 0 : sum / static_cast<double>(r.latencies_ms.size()), r.errors);
  }
  for (const PhaseResult& r : phases) {
    std::printf("\n%s: jobs by phase after the pass:", r.name.c_str());
    for (const auto& [phase, count] : r.phases) std::printf(" %s=%d", phase.c_str(), count);
    std::printf("\n");
    if (r.errors > 0) std::printf("  first error: %s\n", r.first_error.c_str());
  }
}

void PrintBreakdown(const PhaseResult& r) {
  const double n = static_cast<double>(std::max<size_t>(1, r.latencies_ms.size()));
  double total = 0, outside = 0;
  for (double x : r.latencies_ms) total += x;
  std::printf("\n%s: where a pass's time goes (per reconcile, mean over %zu)\n", r.name.c_str(),
              r.latencies_ms.size());
  std::printf(
      "| call | calls | ms per reconcile | mean ms per call | max ms |\n|---|---|---|---|---|\n");
  for (const auto& [call, e] : r.calls) {
    outside += e.total_ms;
    std::printf("| %s | %lld | %.3f | %.3f | %.2f |\n", call.c_str(),
                static_cast<long long>(e.count), e.total_ms / n,
                e.total_ms / static_cast<double>(std::max<int64_t>(1, e.count)), e.max_ms);
  }
  std::printf("| reconciler's own work (rest) | - | %.3f | - | - |\n", (total - outside) / n);
  std::printf("| whole pass | %zu | %.3f | - | - |\n", r.latencies_ms.size(), total / n);
}

int Run(const Flags& flags) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("reconcile-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  // The kubeconfig holds the server's token: never leave it behind.
  struct RemoveDir {
    std::filesystem::path dir;
    ~RemoveDir() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } remove_dir{dir};
  const std::string kubeconfig = (dir / "kubeconfig").string();
  const double rss_start_mib = CurrentRssMib();

  auto server_or = ServerProcess::Start(kubeconfig, flags);
  if (!server_or.ok()) {
    std::fprintf(stderr, "%s\n", server_or.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<ServerProcess> server = std::move(*server_or);
  std::printf(
      "reconcile_bench: %d TrainJobs in %d namespaces, %d pods per job, %d nodes x %d GPUs\n",
      flags.jobs, flags.namespaces, flags.pods_per_job, flags.nodes, kGpusPerNode);

  StatusOr<std::vector<double>> populated = server->Command("populate");
  if (!populated.ok()) {
    std::fprintf(stderr, "%s\n", populated.status().ToString().c_str());
    return 1;
  }
  std::printf("API server populated in %.0f ms (the server's process: %.0f MiB)\n", (*populated)[0],
              (*populated)[1]);

  StatusOr<KubeConfig> config = KubeconfigFile(kubeconfig, "", ReadWholeFile);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 1;
  }
  StatusOr<std::unique_ptr<KubeClient>> client_or = KubeClient::Create(*config);
  if (!client_or.ok()) {
    std::fprintf(stderr, "%s\n", client_or.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<KubeClient> client = std::move(*client_or);

  // As ControllerManager::Start builds them. The counter outlives the pod
  // informer that calls it.
  PodCounter pod_counter;
  InformerOptions job_options;
  job_options.resync_period = std::chrono::minutes(10);
  Informer trainjobs(client.get(), kTrainJobs, "", job_options);
  InformerOptions pod_options;
  pod_options.index_label = kJobLabel;
  pod_options.transform = TrimPodForCache;  // as the manager does
  Informer pods(client.get(), kPods, "", pod_options);
  InformerOptions node_options;
  node_options.transform = TrimNodeForCache;
  Informer nodes(client.get(), kNodes, "", node_options);
  EventRecorder events(client.get());
  KubeJobStore store(client.get(), &events);
  PodLauncher launcher(client.get(), &pods, PodTemplateOptions{});
  KubeInventory inventory(&nodes, &pods);
  // After the inventory's handler, so that when the counter sees the last
  // pod change the inventory has already been marked for a rebuild.
  pods.OnChange(
      [&pod_counter](const std::string& key, const json* pod) { pod_counter.OnChange(key, pod); });
  PrometheusMetricsSource metrics("", std::chrono::seconds(120));

  CallTimes times;
  TimedJobStore timed_store(&store, &times);
  TimedLauncher timed_launcher(&launcher, &times);
  TimedMetrics timed_metrics(&metrics, &times);
  TimedInventory timed_inventory(&inventory, &times);
  Reconciler reconciler(ReconcilerDeps{&timed_store, &timed_launcher, &timed_metrics,
                                       &timed_inventory, &SystemClock::Default()},
                        ReconcilerOptions{});
  // The informers' handlers reach the inventory and the counter: stop them
  // first on every way out.
  struct StopInformers {
    std::vector<Informer*> informers;
    ~StopInformers() {
      for (Informer* informer : informers) informer->Stop();
    }
  } stop_informers{{&trainjobs, &pods, &nodes}};

  const auto sync_start = Clock::now();
  trainjobs.Start();
  pods.Start();
  nodes.Start();
  const auto sync_timeout = std::chrono::minutes(5);
  if (!trainjobs.WaitForSync(sync_timeout) || !pods.WaitForSync(sync_timeout) ||
      !nodes.WaitForSync(sync_timeout)) {
    std::fprintf(stderr, "the informers did not sync within 5 minutes\n");
    return 1;
  }
  const double sync_ms = MillisSince(sync_start);
  const double rss_synced_mib = CurrentRssMib();

  auto rebuild_start = Clock::now();
  StatusOr<ClusterInventory> first_inventory = inventory.Current();
  const double rebuild_empty_ms = MillisSince(rebuild_start);
  if (!first_inventory.ok()) {
    std::fprintf(stderr, "inventory: %s\n", first_inventory.status().ToString().c_str());
    return 1;
  }
  auto cached_start = Clock::now();
  (void)inventory.Current();
  const double cached_inventory_ms = MillisSince(cached_start);

  // The planner alone on the same job and inventory: the part of a launch
  // pass that is neither I/O nor cache reads.
  std::vector<double> plan_ms;
  {
    json object = TrainJobObject("ns-0", "job-0", flags.pods_per_job * kGpusPerNode);
    StatusOr<planner::JobSpec> spec = ParseJobObject(object);
    if (!spec.ok()) {
      std::fprintf(stderr, "the bench's TrainJob: %s\n", spec.status().ToString().c_str());
      return 1;
    }
    planner::PlanOptions options;
    options.now_unix_seconds = SystemClock::Default().WallUnixSeconds();
    options.alternatives = 0;
    spec->deadline_unix_seconds = planner::EffectiveDeadline(*spec, options.now_unix_seconds);
    for (int i = 0; i < 20; ++i) {
      const auto start = Clock::now();
      StatusOr<planner::PlanResult> plan =
          planner::Plan(*spec, first_inventory->inventory, planner::Calibration{}, options);
      plan_ms.push_back(MillisSince(start));
      if (!plan.ok() || !plan->plan) {
        std::fprintf(stderr, "the bench's TrainJob does not plan: %s\n",
                     plan.ok() ? "no plan" : plan.status().ToString().c_str());
        return 1;
      }
    }
  }

  std::vector<std::string> keys;
  for (int j = 0; j < flags.jobs; ++j) {
    keys.push_back(JobNamespace(j, flags) + "/" + JobName(j, flags));
  }

  std::vector<PhaseResult> results;
  results.push_back(RunPhase("launch", reconciler, keys, times));
  size_t launched_pods = 0;
  for (const std::string& key : keys) {
    std::optional<JobView> view = reconciler.View(key);
    if (view && view->plan && view->attempt > 0) {
      launched_pods += static_cast<size_t>(view->plan->layout.nodes);
    }
  }
  std::printf("launch: %zu worker pods created\n", launched_pods);

  // Every pod must be in the cache before the server binds and starts them,
  // or the informer would still be catching up during the steady pass.
  const auto wait_start = Clock::now();
  if (!pod_counter.WaitFor(launched_pods, false, std::chrono::minutes(5))) {
    std::fprintf(stderr, "the pod informer did not see all %zu pods within 5 minutes\n",
                 launched_pods);
    return 1;
  }
  StatusOr<std::vector<double>> ran = server->Command("run-pods");
  if (!ran.ok()) {
    std::fprintf(stderr, "%s\n", ran.status().ToString().c_str());
    return 1;
  }
  const size_t running_pods = static_cast<size_t>((*ran)[2]);
  if (!pod_counter.WaitFor(running_pods, true, std::chrono::minutes(5))) {
    std::fprintf(stderr, "the pod informer did not see all %zu pods Running within 5 minutes\n",
                 running_pods);
    return 1;
  }
  std::printf(
      "%zu pods bound and Running in the server in %.0f ms; the informer saw them all "
      "%.0f ms after the launch pass\n",
      running_pods, (*ran)[0], MillisSince(wait_start));

  // The first reconcile after pod changes pays the inventory reassembly
  // (InventoryTracker); time it on its own so the steady passes show the
  // cached cost.
  rebuild_start = Clock::now();
  StatusOr<ClusterInventory> full_inventory = inventory.Current();
  const double rebuild_full_ms = MillisSince(rebuild_start);
  if (!full_inventory.ok()) {
    std::fprintf(stderr, "inventory: %s\n", full_inventory.status().ToString().c_str());
    return 1;
  }
  // For comparison, the rebuild from copies that the tracker replaced: deep
  // copies of both caches (under each informer's lock), then BuildInventory.
  const auto copy_start = Clock::now();
  std::vector<json> pod_copies = pods.List();
  const double copy_pods_ms = MillisSince(copy_start);
  const auto copy_nodes_start = Clock::now();
  std::vector<json> node_copies = nodes.List();
  const double copy_nodes_ms = MillisSince(copy_nodes_start);
  size_t pod_bytes = 0;
  for (const json& pod : pod_copies) pod_bytes += pod.dump().size();
  const auto build_start = Clock::now();
  json pod_list = {{"items", json::array()}};
  for (json& pod : pod_copies) pod_list["items"].push_back(std::move(pod));
  json node_list = {{"items", json::array()}};
  for (json& node : node_copies) node_list["items"].push_back(std::move(node));
  (void)BuildInventory(node_list, pod_list);
  const double build_ms = MillisSince(build_start);
  pod_list = json();
  node_list = json();

  int free_gpus = 0;
  for (const auto& [pool, pool_nodes] : full_inventory->nodes_by_pool) {
    for (const PoolNode& node : pool_nodes) free_gpus += node.free_gpus;
  }

  results.push_back(RunPhase("steady", reconciler, keys, times));
  results.push_back(RunPhase("steady-again", reconciler, keys, times));
  (void)events.Flush(std::chrono::seconds(60));

  StatusOr<std::vector<double>> server_rss = server->Command("rss");
  const double server_rss_mib = server_rss.ok() ? (*server_rss)[1] : 0;

  std::printf("\n## Results: %d TrainJobs, %zu worker pods, %d nodes (%d GPUs)\n", flags.jobs,
              running_pods, flags.nodes, flags.nodes * kGpusPerNode);
  PrintLatencyTable(results);
  for (const PhaseResult& r : results) PrintBreakdown(r);

  std::printf("\n| startup | ms |\n|---|---|\n");
  std::printf("| informers' initial sync (%d TrainJobs, 0 pods, %d nodes) | %.0f |\n", flags.jobs,
              flags.nodes, sync_ms);
  std::printf("| KubeInventory reassembly, %d nodes, 0 pods | %.1f |\n", flags.nodes,
              rebuild_empty_ms);
  std::printf("| KubeInventory reassembly, %d nodes, %zu pods (%d GPUs free) | %.1f |\n",
              flags.nodes,
              running_pods, free_gpus, rebuild_full_ms);
  std::printf("| for comparison, the rebuild it replaced: copy the pod cache (List) | %.1f |\n",
              copy_pods_ms);
  std::printf("| for comparison: copy the node cache (List) | %.1f |\n", copy_nodes_ms);
  std::printf("| for comparison: BuildInventory over the copies | %.1f |\n", build_ms);
  std::printf("| KubeInventory.Current, cached | %.2f |\n", cached_inventory_ms);
  std::printf(
      "| planner::Plan alone, the bench's job on the empty cluster (median of 20) | %.2f |\n",
      Percentile(plan_ms, 50));

  std::printf("\na worker pod as cached: %.1f KiB of JSON text on average\n",
              static_cast<double>(pod_bytes) /
                  static_cast<double>(std::max<size_t>(1, pod_copies.size())) / 1024.0);
  std::printf("\n| memory (MiB) | controller process | API server process |\n|---|---|---|\n");
  std::printf("| at start | %.0f | - |\n", rss_start_mib);
  std::printf("| informers synced | %.0f | %.0f (populated) |\n", rss_synced_mib, (*populated)[1]);
  for (const PhaseResult& r : results) {
    std::printf("| after %s | %.0f | - |\n", r.name.c_str(), r.rss_after_mib);
  }
  std::printf("| end: VmRSS | %.0f | %.0f |\n", CurrentRssMib(), server_rss_mib);
  std::printf("| peak RSS (ru_maxrss) | %.0f | - |\n", PeakRssMib());
  // RSS keeps what malloc freed but did not return (the rebuilds' copies);
  // the heap in use is what the caches and the reconciler really hold.
  std::printf("| end: heap in use (mallinfo2) | %.0f | - |\n",
              static_cast<double>(::mallinfo2().uordblks) / (1024.0 * 1024.0));
  std::printf("\nevents dropped by the recorder: %lld\n", static_cast<long long>(events.dropped()));

  int errors = 0;
  for (const PhaseResult& r : results) errors += r.errors;
  return errors == 0 && launched_pods == static_cast<size_t>(flags.jobs * flags.pods_per_job) ? 0
                                                                                              : 1;
}

}  // namespace
}  // namespace pacer::controller

int main(int argc, char** argv) {
  pacer::controller::Flags flags;
  if (!pacer::controller::ParseFlags(argc, argv, &flags)) return 2;
  return pacer::controller::Run(flags);
}
