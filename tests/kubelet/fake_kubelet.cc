#include "fake_kubelet.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <utility>

#include "local/child_process.h"
#include "pod_scheduling.h"

extern char** environ;

namespace pacer::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// How often the kubelet thread looks at its children when nothing on the
// server changes: waitpid has no timeout, so reaping is polling.
constexpr std::chrono::milliseconds kPollInterval{100};

std::string Rfc3339Now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

const json& Sub(const json& object, const char* key) {
  static const json kNull;
  if (!object.is_object() || !object.contains(key)) return kNull;
  return object[key];
}

std::string Str(const json& object, const char* key) {
  const std::string* s = Sub(object, key).get_ptr<const std::string*>();
  return s != nullptr ? *s : "";
}

std::string PodPath(const std::string& ns, const std::string& name) {
  return "/api/v1/namespaces/" + ns + "/pods/" + name;
}

// The container the kubelet runs: "worker", else the first.
const json& WorkerContainer(const json& pod) {
  const json& containers = Sub(Sub(pod, "spec"), "containers");
  static const json kEmpty = json::object();
  if (!containers.is_array() || containers.empty()) return kEmpty;
  for (const json& c : containers) {
    if (Str(c, "name") == "worker") return c;
  }
  return containers[0];
}

// Names of the worker's contract: taken from the pod only, never inherited
// from the test process's own environment.
bool IsContractName(const std::string& name) {
  static const std::set<std::string> kTorchrun = {
      "RANK",      "WORLD_SIZE", "LOCAL_RANK",  "LOCAL_WORLD_SIZE",
      "NODE_RANK", "NNODES",     "MASTER_ADDR", "MASTER_PORT"};
  return name.rfind("PACER_", 0) == 0 || name.rfind("PET_", 0) == 0 || kTorchrun.count(name) > 0;
}

// A fieldRef's value as the kubelet's downward API resolves it.
std::string FieldRef(const json& pod, const std::string& path, const std::string& node) {
  const json& md = Sub(pod, "metadata");
  if (path == "metadata.name") return Str(md, "name");
  if (path == "metadata.namespace") return Str(md, "namespace");
  if (path == "metadata.uid") return Str(md, "uid");
  if (path == "spec.nodeName") return node;
  if (path == "status.podIP" || path == "status.hostIP") return "127.0.0.1";
  const std::string labels = "metadata.labels['";
  if (path.rfind(labels, 0) == 0 && path.size() > labels.size() + 2) {
    return Str(Sub(md, "labels"),
               path.substr(labels.size(), path.size() - labels.size() - 2).c_str());
  }
  return "";
}

std::string FormatScale(double scale) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.17g", scale);
  return buffer;
}

json RunningStatus(const json& pod, const std::string& now) {
  const json& c = WorkerContainer(pod);
  json conditions = json::array();
  for (const char* type : {"PodScheduled", "Initialized", "ContainersReady", "Ready"}) {
    conditions.push_back({{"type", type}, {"status", "True"}, {"lastTransitionTime", now}});
  }
  return {{"phase", "Running"},
          {"podIP", "127.0.0.1"},
          {"podIPs", json::array({{{"ip", "127.0.0.1"}}})},
          {"hostIP", "127.0.0.1"},
          {"startTime", now},
          {"conditions", conditions},
          {"containerStatuses",
           json::array({{{"name", Str(c, "name").empty() ? "worker" : Str(c, "name")},
                         {"image", Str(c, "image")},
                         {"imageID", ""},
                         {"ready", true},
                         {"started", true},
                         {"restartCount", 0},
                         {"state", {{"running", {{"startedAt", now}}}}}}})}};
}

}  // namespace

FakeKubelet::FakeKubelet(TestApiServer* server, FakeKubeletOptions options)
    : server_(server), options_(std::move(options)) {}

FakeKubelet::~FakeKubelet() {
  Stop();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [uid, w] : workers_) {
    if (w.exited || w.pid <= 0) continue;
    // The group holds the supervisor and its ranks; the ranks also die
    // with their supervisor, but killing the group does not depend on that.
    ::kill(-w.pid, SIGKILL);
    ::kill(w.pid, SIGKILL);
    int status = 0;
    while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
    }
    w.exited = true;
    w.exit_code = 128 + SIGKILL;
  }
}

Status FakeKubelet::AddNodes(const std::vector<FakeNode>& nodes) {
  const std::string now = Rfc3339Now();
  for (const FakeNode& n : nodes) {
    if (n.name.empty()) return InvalidArgumentError("FakeNode.name: must not be empty");
    const std::string gpus = std::to_string(n.gpus);
    const json resources = {
        {kGpuResource, gpus}, {"cpu", "64"}, {"memory", "512Gi"}, {"pods", "110"}};
    json node = {{"apiVersion", "v1"},
                 {"kind", "Node"},
                 {"metadata",
                  {{"name", n.name},
                   {"labels",
                    {{kGpuProductLabel, n.gpu_product},
                     {"nvidia.com/gpu.count", gpus},
                     {"kubernetes.io/hostname", n.name},
                     {"kubernetes.io/os", "linux"}}}}},
                 {"spec", json::object()},
                 {"status",
                  {{"capacity", resources},
                   {"allocatable", resources},
                   {"addresses", json::array({{{"type", "InternalIP"}, {"address", "127.0.0.1"}},
                                              {{"type", "Hostname"}, {"address", n.name}}})},
                   {"conditions", json::array({{{"type", "Ready"},
                                                {"status", "True"},
                                                {"reason", "KubeletReady"},
                                                {"message", "fake kubelet is posting ready status"},
                                                {"lastHeartbeatTime", now},
                                                {"lastTransitionTime", now}}})}}}};
    StatusOr<json> created = server_->CreateObject("/api/v1/nodes", std::move(node));
    if (!created.ok()) return created.status().WithContext("creating fake node " + n.name);
  }
  return Status::Ok();
}

void FakeKubelet::Start() {
  std::lock_guard<std::mutex> lock(thread_mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void FakeKubelet::Stop() {
  std::lock_guard<std::mutex> lock(thread_mu_);
  if (!thread_.joinable()) return;
  stop_ = true;
  thread_.join();
}

void FakeKubelet::Loop() {
  while (!stop_) {
    Reap();
    Sync();
    const std::string seen = Fingerprint();
    // Wakes on every change of a pod or node (and every request); the
    // timeout bounds how late an exited child is noticed.
    server_->WaitFor([&] { return stop_.load() || Fingerprint() != seen; }, kPollInterval);
  }
}

std::string FakeKubelet::Fingerprint() const {
  std::string out;
  for (const char* collection : {"/api/v1/pods", "/api/v1/nodes"}) {
    for (const json& o : server_->ListObjects(collection)) {
      const json& md = Sub(o, "metadata");
      out += Str(md, "uid");
      out += ':';
      out += Str(md, "resourceVersion");
      out += ',';
    }
  }
  return out;
}

void FakeKubelet::Reap() {
  std::vector<Worker> exited;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [uid, w] : workers_) {
      if (w.exited || w.pid <= 0) continue;
      int status = 0;
      const pid_t r = ::waitpid(w.pid, &status, WNOHANG);
      if (r == 0 || (r < 0 && errno != ECHILD)) continue;
      w.exited = true;
      if (r < 0) {
        w.exit_code = 1;  // reaped by someone else: the code is lost
      } else {
        w.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      for (int p = w.metrics_port; p < w.metrics_port + w.ranks; ++p) reserved_ports_.erase(p);
      exited.push_back(w);
    }
    if (!exited.empty()) {
      WriteFileSdLocked();
      NotifyLocked();
    }
  }
  for (const Worker& w : exited) {
    if (!w.pod_gone) ReportExit(w);
  }
}

void FakeKubelet::Terminate(Worker& w, const json* pod) {
  std::chrono::seconds grace = options_.termination_grace;
  if (pod != nullptr) {
    const json& g = Sub(Sub(*pod, "spec"), "terminationGracePeriodSeconds");
    if (g.is_number_integer() && g.get<int64_t>() >= 0)
      grace = std::chrono::seconds(g.get<int64_t>());
  }
  // Only the supervisor: it forwards SIGTERM to its ranks, which checkpoint.
  ::kill(w.pid, SIGTERM);
  w.kill_at = std::chrono::steady_clock::now() + grace;
}

void FakeKubelet::Sync() {
  const std::vector<json> pods = server_->ListObjects("/api/v1/pods");
  const std::vector<json> nodes = server_->ListObjects("/api/v1/nodes");
  std::map<std::string, const json*> by_uid;
  for (const json& pod : pods) by_uid[Str(Sub(pod, "metadata"), "uid")] = &pod;
  std::set<std::string> node_names;
  for (const json& node : nodes) node_names.insert(Str(Sub(node, "metadata"), "name"));

  std::set<std::string> known;
  std::vector<Worker> unreported;  // running, but the pod does not say so yet
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    for (auto& [uid, w] : workers_) {
      known.insert(uid);
      if (w.exited) continue;
      auto it = by_uid.find(uid);
      if (it == by_uid.end()) {
        w.pod_gone = true;
        if (!w.kill_at) Terminate(w, nullptr);
      } else {
        if (!Sub(Sub(*it->second, "metadata"), "deletionTimestamp").is_null() && !w.kill_at) {
          Terminate(w, it->second);
        }
        if (!w.running_reported) unreported.push_back(w);
      }
      if (w.kill_at && now >= *w.kill_at && !w.sigkilled) {
        ::kill(-w.pid, SIGKILL);
        ::kill(w.pid, SIGKILL);
        w.sigkilled = true;
      }
    }
    for (auto it = unschedulable_.begin(); it != unschedulable_.end();) {
      it = by_uid.count(it->first) > 0 ? std::next(it) : unschedulable_.erase(it);
    }
  }

  for (const Worker& w : unreported) ReportRunning(w);

  std::map<std::string, int> gpus_in_use = GpusInUse(pods);
  for (const json& pod : pods) {
    const json& md = Sub(pod, "metadata");
    if (!Sub(md, "deletionTimestamp").is_null() || PodTerminated(pod)) continue;
    if (known.count(Str(md, "uid")) > 0) continue;  // restartPolicy Never: one run per pod
    const std::string node = Str(Sub(pod, "spec"), "nodeName");
    if (node.empty()) {
      Schedule(pod, nodes, gpus_in_use);
    } else if (node_names.count(node) > 0) {
      RunPod(pod, node);  // bound by someone else to one of our nodes
    }
  }
}

void FakeKubelet::Schedule(const json& pod, const std::vector<json>& nodes,
                           std::map<std::string, int>& gpus_in_use) {
  const json& md = Sub(pod, "metadata");
  const std::string uid = Str(md, "uid"), ns = Str(md, "namespace"), name = Str(md, "name");
  const ScheduleDecision decision = ChooseNode(pod, nodes, gpus_in_use);
  if (decision.node) {
    gpus_in_use[*decision.node] += PodGpuRequest(pod);
    RunPod(pod, *decision.node);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = unschedulable_.find(uid);
    if (it != unschedulable_.end() && it->second == decision.message) return;  // already said
  }
  const std::string now = Rfc3339Now();
  const Status s = UpdatePod(ns, name, uid, [&](json& p) {
    p["status"] = {{"phase", "Pending"},
                   {"conditions", json::array({{{"type", "PodScheduled"},
                                                {"status", "False"},
                                                {"reason", "Unschedulable"},
                                                {"message", decision.message},
                                                {"lastTransitionTime", now}}})}};
    return true;
  });
  if (s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    unschedulable_[uid] = decision.message;
  }
}

void FakeKubelet::RunPod(const json& pod, const std::string& node) {
  const json& md = Sub(pod, "metadata");
  const std::string uid = Str(md, "uid"), ns = Str(md, "namespace"), name = Str(md, "name");
  const std::string now = Rfc3339Now();
  // Bind first, as kube-scheduler does; the pod turns Running only once its
  // worker exists, so whoever sees Running also finds its metrics targets.
  if (Str(Sub(pod, "spec"), "nodeName") != node) {
    const Status bound = UpdatePod(ns, name, uid, [&](json& p) {
      p["spec"]["nodeName"] = node;
      p["status"] = {
          {"phase", "Pending"},
          {"conditions",
           json::array(
               {{{"type", "PodScheduled"}, {"status", "True"}, {"lastTransitionTime", now}}})}};
      return true;
    });
    if (!bound.ok()) {
      if (bound.code() != StatusCode::kNotFound) {
        std::fprintf(stderr, "fake-kubelet: cannot bind pod %s/%s to %s (will retry): %s\n",
                     ns.c_str(), name.c_str(), node.c_str(), bound.ToString().c_str());
      }
      return;
    }
  }
  json bound_pod = pod;
  bound_pod["spec"]["nodeName"] = node;
  Worker w;
  w.uid = uid;
  w.ns = ns;
  w.pod = name;
  w.started_at = now;
  Status started;
  {
    std::lock_guard<std::mutex> lock(mu_);
    started = StartWorker(bound_pod, w);
    if (!started.ok()) {
      w.exited = true;
      w.exit_code = 128;  // what Kubernetes reports for a container that never started
    }
    if (started.ok() && kill_when_started_.erase(ns + "/" + name) > 0) {
      ::kill(-w.pid, SIGKILL);
      ::kill(w.pid, SIGKILL);
      w.sigkilled = true;
    }
    workers_[uid] = w;
    started_pod_names_.push_back(name);
    WriteFileSdLocked();
    NotifyLocked();
  }
  if (!started.ok()) {
    std::fprintf(stderr, "fake-kubelet: pod %s/%s: %s\n", ns.c_str(), name.c_str(),
                 started.ToString().c_str());
    std::ofstream(w.log_path, std::ios::app) << started.ToString() << "\n";
    ReportExit(w);
    return;
  }
  ReportRunning(w);
}

void FakeKubelet::ReportRunning(const Worker& w) {
  const Status s = UpdatePod(w.ns, w.pod, w.uid, [&](json& p) {
    if (PodTerminated(p)) return false;  // its exit is already reported
    p["status"] = RunningStatus(p, w.started_at);
    return true;
  });
  if (!s.ok() && s.code() != StatusCode::kNotFound) {
    std::fprintf(stderr, "fake-kubelet: cannot report pod %s/%s Running (will retry): %s\n",
                 w.ns.c_str(), w.pod.c_str(), s.ToString().c_str());
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(w.uid);
  if (it != workers_.end()) it->second.running_reported = true;
}

Status FakeKubelet::StartWorker(const json& pod, Worker& w) {
  const json& md = Sub(pod, "metadata");
  const json& labels = Sub(md, "labels");
  const std::string node = Str(Sub(pod, "spec"), "nodeName");
  const fs::path work_dir(options_.work_dir);
  w.log_path = (work_dir / "logs" / (w.ns + "_" + w.pod + ".log")).string();

  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || IsContractName(entry.substr(0, eq))) continue;
    env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  const json& container_env = Sub(WorkerContainer(pod), "env");
  if (container_env.is_array()) {
    for (const json& e : container_env) {
      const std::string name = Str(e, "name");
      if (name.empty()) continue;
      const std::string field = Str(Sub(Sub(e, "valueFrom"), "fieldRef"), "fieldPath");
      env[name] = !field.empty() ? FieldRef(pod, field, node) : Str(e, "value");
    }
  }
  w.job = Str(labels, "pacer.dev/job");
  if (w.job.empty()) w.job = env.count("PACER_JOB_NAME") > 0 ? env["PACER_JOB_NAME"] : w.pod;
  if (env["PACER_JOB_NAME"].empty()) env["PACER_JOB_NAME"] = w.job;
  w.attempt = Str(labels, "pacer.dev/attempt");
  if (env["PACER_JOB_NAMESPACE"].empty()) env["PACER_JOB_NAMESPACE"] = w.ns;

  w.ranks = 1;
  if (auto it = env.find("LOCAL_WORLD_SIZE"); it != env.end()) {
    try {
      w.ranks = std::max(1, std::stoi(it->second));
    } catch (const std::exception&) {
      w.ranks = 1;  // the worker itself rejects it with exit code 2
    }
  }
  if (w.ranks > options_.max_ranks_per_pod) {
    std::fprintf(stderr,
                 "fake-kubelet: pod %s/%s runs %d ranks on this machine (max_ranks_per_pod %d); "
                 "plan for nodes with fewer GPUs to keep the tests fast\n",
                 w.ns.c_str(), w.pod.c_str(), w.ranks, options_.max_ranks_per_pod);
  }

  // All pods of one attempt must meet at the same store.
  const std::string attempt_key = w.ns + "/" + w.job + "/" + Str(labels, "pacer.dev/attempt");
  auto master = master_ports_.find(attempt_key);
  if (master == master_ports_.end()) {
    ASSIGN_OR_RETURN(int port, controller::FindFreePortRun(1, reserved_ports_));
    reserved_ports_.insert(port);
    master = master_ports_.emplace(attempt_key, port).first;
  }
  ASSIGN_OR_RETURN(w.metrics_port, controller::FindFreePortRun(w.ranks, reserved_ports_));
  for (int p = w.metrics_port; p < w.metrics_port + w.ranks; ++p) reserved_ports_.insert(p);

  const fs::path checkpoints = work_dir / w.ns / w.job / "checkpoints";
  std::error_code ec;
  fs::create_directories(work_dir / "logs", ec);
  if (!ec) fs::create_directories(checkpoints, ec);
  if (ec) {
    return UnavailableError("cannot create " + checkpoints.string() + ": " + ec.message() +
                            " (check FakeKubeletOptions::work_dir)");
  }
  env["MASTER_ADDR"] = "127.0.0.1";
  env["MASTER_PORT"] = std::to_string(master->second);
  env["PACER_METRICS_PORT"] = std::to_string(w.metrics_port);
  env["PACER_CHECKPOINT_DIR"] = checkpoints.string();
  env["PACER_BACKEND"] = "cpu";
  // A pod that sets its own scale keeps it (a test that needs CPU steps as
  // slow as the full model's); otherwise the kubelet's shrinks the model.
  if (env["PACER_SCALE"].empty()) env["PACER_SCALE"] = FormatScale(options_.scale);
  for (const auto& [name, value] : options_.extra_env) env[name] = value;

  StatusOr<pid_t> pid = controller::SpawnProcess(options_.worker_binary, {"run"}, env, w.log_path);
  if (!pid.ok()) {
    for (int p = w.metrics_port; p < w.metrics_port + w.ranks; ++p) reserved_ports_.erase(p);
    return Status(pid.status().code(),
                  pid.status().message() +
                      " (set FakeKubeletOptions::worker_binary to the pacer-worker program)");
  }
  w.pid = *pid;
  return Status::Ok();
}

void FakeKubelet::ReportExit(const Worker& w) {
  const std::string now = Rfc3339Now();
  const std::string message = controller::LastLogLine(w.log_path);
  const Status s = UpdatePod(w.ns, w.pod, w.uid, [&](json& p) {
    json& status = p["status"];
    status["phase"] = w.exit_code == 0 ? "Succeeded" : "Failed";
    json conditions = json::array();
    for (const json& c :
         Sub(status, "conditions").is_array() ? status["conditions"] : json::array()) {
      json copy = c;
      const std::string type = Str(c, "type");
      if (type == "Ready" || type == "ContainersReady") {
        copy["status"] = "False";
        copy["reason"] = "PodCompleted";
        copy["lastTransitionTime"] = now;
      }
      conditions.push_back(std::move(copy));
    }
    status["conditions"] = std::move(conditions);
    const json& c = WorkerContainer(p);
    status["containerStatuses"] = json::array(
        {{{"name", Str(c, "name").empty() ? "worker" : Str(c, "name")},
          {"image", Str(c, "image")},
          {"imageID", ""},
          {"ready", false},
          {"started", false},
          {"restartCount", 0},
          {"state",
           {{"terminated",
             {{"exitCode", w.exit_code},
              {"reason", w.exit_code == 0 ? "Completed" : (w.pid <= 0 ? "StartError" : "Error")},
              {"message", message},
              {"startedAt", w.started_at},
              {"finishedAt", now}}}}}}});
    return true;
  });
  if (!s.ok() && s.code() != StatusCode::kNotFound) {
    std::fprintf(stderr, "fake-kubelet: cannot report the exit of pod %s/%s: %s\n", w.ns.c_str(),
                 w.pod.c_str(), s.ToString().c_str());
  }
}

Status FakeKubelet::UpdatePod(const std::string& ns, const std::string& name,
                              const std::string& uid, const std::function<bool(json&)>& edit) {
  const std::string path = PodPath(ns, name);
  // Read-modify-write: the controller may change the pod in between, which
  // the resourceVersion turns into a conflict we retry.
  for (int attempt = 0; attempt < 50; ++attempt) {
    StatusOr<json> current = server_->GetObject(path);
    if (!current.ok()) return current.status();
    json pod = std::move(current).value();
    if (Str(Sub(pod, "metadata"), "uid") != uid) {
      return NotFoundError("pod " + ns + "/" + name + " was replaced by a new pod of that name");
    }
    if (!edit(pod)) return Status::Ok();
    StatusOr<json> updated = server_->UpdateObject(path, std::move(pod));
    if (updated.ok()) return Status::Ok();
    if (updated.status().code() != StatusCode::kAborted) return updated.status();
  }
  return Status(StatusCode::kAborted,
                "pod " + ns + "/" + name + " kept changing under 50 updates in a row; retry");
}

void FakeKubelet::NotifyLocked() {
  ++change_seq_;
  changed_.notify_all();
}

std::vector<FakeKubelet::Target> FakeKubelet::TargetsLocked() const {
  std::vector<Target> targets;
  for (const auto& [uid, w] : workers_) {
    if (w.exited || w.pid <= 0) continue;
    for (int r = 0; r < w.ranks; ++r)
      targets.push_back(Target{w.metrics_port + r, w.ns, w.pod, w.job, w.attempt});
  }
  return targets;
}

void FakeKubelet::WriteFileSdLocked() {
  if (file_sd_path_.empty()) return;
  json groups = json::array();
  for (const Target& t : TargetsLocked()) {
    json labels = {{"namespace", t.ns}, {"pod", t.pod}, {"trainjob", t.job}};
    if (!t.attempt.empty()) labels["attempt"] = t.attempt;
    groups.push_back({{"targets", json::array({"127.0.0.1:" + std::to_string(t.port)})},
                      {"labels", std::move(labels)}});
  }
  // Prometheus may read the file at any moment: never let it see half of one.
  const std::string tmp = file_sd_path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << groups.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "fake-kubelet: cannot write %s\n", tmp.c_str());
      return;
    }
  }
  std::error_code ec;
  fs::rename(tmp, file_sd_path_, ec);
  if (ec) {
    std::fprintf(stderr, "fake-kubelet: cannot rename %s: %s\n", tmp.c_str(), ec.message().c_str());
  }
}

std::vector<FakeKubelet::Target> FakeKubelet::Targets() const {
  std::lock_guard<std::mutex> lock(mu_);
  return TargetsLocked();
}

void FakeKubelet::SetFileSdPath(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  file_sd_path_ = path;
  WriteFileSdLocked();
}

Status FakeKubelet::KillWorker(const std::string& ns, const std::string& pod) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [uid, w] : workers_) {
    if (w.ns != ns || w.pod != pod || w.exited || w.pid <= 0) continue;
    ::kill(-w.pid, SIGKILL);
    ::kill(w.pid, SIGKILL);
    w.sigkilled = true;
    return Status::Ok();
  }
  return NotFoundError("pod " + ns + "/" + pod +
                       " has no running worker; wait until it is Running before killing it");
}

void FakeKubelet::KillWorkerWhenStarted(const std::string& ns, const std::string& pod) {
  std::lock_guard<std::mutex> lock(mu_);
  kill_when_started_.insert(ns + "/" + pod);
}

int FakeKubelet::RunningWorkers() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& [uid, w] : workers_) n += !w.exited && w.pid > 0 ? 1 : 0;
  return n;
}

int FakeKubelet::StartedWorkers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(started_pod_names_.size());
}

std::vector<std::string> FakeKubelet::StartedPodNames() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_pod_names_;
}

std::optional<int> FakeKubelet::WorkerExitCode(const std::string& ns,
                                               const std::string& pod) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<int> code;
  bool running = false;
  for (const auto& [uid, w] : workers_) {
    if (w.ns != ns || w.pod != pod) continue;
    if (!w.exited)
      running = true;
    else
      code = w.exit_code;
  }
  return running ? std::nullopt : code;
}

std::string FakeKubelet::LogPath(const std::string& ns, const std::string& pod) const {
  return (fs::path(options_.work_dir) / "logs" / (ns + "_" + pod + ".log")).string();
}

bool FakeKubelet::WaitFor(const std::function<bool()>& pred,
                          std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const uint64_t seen = change_seq_;
    lock.unlock();
    if (pred()) return true;
    lock.lock();
    if (change_seq_ != seen) continue;
    if (!changed_.wait_until(lock, deadline, [&] { return change_seq_ != seen; })) {
      lock.unlock();
      return pred();
    }
  }
}

}  // namespace pacer::testing
