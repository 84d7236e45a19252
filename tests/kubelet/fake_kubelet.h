// FakeKubelet: kube-scheduler and kubelet for the controller's end-to-end
// tests. It watches a TestApiServer's pods, binds each unscheduled pod to a
// fake GPU node, and runs it as the REAL pacer-worker program in a local
// process (every "node" is this machine), reporting the pod's phase and
// container state back to the server as a kubelet would. A real Prometheus
// can scrape the workers through Targets() or a file_sd file. See the
// section "The fake kubelet" of docs/testing.md.
//
// What it runs: `<worker_binary> run` with the pod's first container's env
// (value and fieldRef entries), and these overrides: MASTER_ADDR=127.0.0.1,
// MASTER_PORT one free port per (namespace, job, attempt), PACER_METRICS_PORT
// the first of LOCAL_WORLD_SIZE consecutive free ports, PACER_CHECKPOINT_DIR
// <work_dir>/<ns>/<job>/checkpoints (shared by the job's pods, like a PVC),
// PACER_BACKEND=cpu, PACER_SCALE and extra_env. It never changes the plan:
// every rank is a CPU process, so tests must use plans with few GPUs per node.
//
// Units: ports are TCP ports on 127.0.0.1; durations are std::chrono types.
// Thread-safety: every public method is thread-safe. One thread (started by
// Start) schedules pods, starts and reaps workers and writes pod status; the
// destructor stops it, SIGKILLs and reaps every worker.
#ifndef PACER_TESTS_KUBELET_FAKE_KUBELET_H_
#define PACER_TESTS_KUBELET_FAKE_KUBELET_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pacer/status.h"
#include "test_api_server.h"

namespace pacer::testing {

struct FakeNode {
  std::string name;
  std::string gpu_product = "NVIDIA-H100-80GB-HBM3";
  int gpus = 8;
};

struct FakeKubeletOptions {
  std::string worker_binary;  // path to pacer-worker
  // Logs (<work_dir>/logs/<ns>_<pod>.log) and checkpoints
  // (<work_dir>/<ns>/<job>/checkpoints, shared by a job's pods).
  std::string work_dir;
  double scale = 0.001;  // PACER_SCALE for workers: CPU steps take milliseconds
  std::map<std::string, std::string> extra_env;  // added to every worker (wins over the pod's)
  // Advisory: the kubelet never changes a plan (the worker checks t x p x d
  // = world size), so a pod with more ranks than this still runs them all,
  // with a warning on stderr. Tests should plan for nodes of 1 or 2 GPUs.
  int max_ranks_per_pod = 2;
  // SIGTERM-to-SIGKILL grace for deleted pods when the pod does not set
  // spec.terminationGracePeriodSeconds (Kubernetes' default is 30 s).
  std::chrono::seconds termination_grace{30};
};

class FakeKubelet {
 public:
  FakeKubelet(TestApiServer* server, FakeKubeletOptions options);
  ~FakeKubelet();  // stops the thread, SIGKILLs and reaps every worker

  FakeKubelet(const FakeKubelet&) = delete;
  FakeKubelet& operator=(const FakeKubelet&) = delete;

  // Creates the Node objects: labels nvidia.com/gpu.product and
  // kubernetes.io/hostname; status.capacity/allocatable with nvidia.com/gpu,
  // cpu and memory; condition Ready=True.
  Status AddNodes(const std::vector<FakeNode>& nodes);

  void Start();  // starts the scheduling/kubelet thread; no-op when running
  void Stop();   // stops it (running workers keep running until destruction)

  // The metrics endpoints of running workers, one per rank. job: the pod's
  // pacer.dev/job label (else PACER_JOB_NAME, else the pod's name); attempt:
  // its pacer.dev/attempt label, "" when it has none.
  struct Target {
    int port;
    std::string ns, pod, job, attempt;
  };
  std::vector<Target> Targets() const;

  // Writes Prometheus file_sd JSON
  // ([{"targets":["127.0.0.1:P"],"labels":{"namespace","pod","trainjob","attempt"}}])
  // to `path` atomically (tmp + rename) now and whenever the targets change;
  // "" turns it off. The labels are the ones the Helm chart's PodMonitor
  // gives a worker pod's targets (attempt only when the pod has one), so a
  // scrape with honor_labels: false sees what a cluster's Prometheus sees.
  void SetFileSdPath(const std::string& path);

  // SIGKILLs the worker (its whole process group) of the pod; the pod then
  // fails with exit code 137. NotFound when the pod has no running worker.
  Status KillWorker(const std::string& ns, const std::string& pod);
  // SIGKILLs the next worker started for the pod as soon as it starts: a
  // worker that dies running, however fast its steps are (KillWorker on a
  // short job races the job's end).
  void KillWorkerWhenStarted(const std::string& ns, const std::string& pod);

  int RunningWorkers() const;
  int StartedWorkers() const;  // total ever started (duplicate detection in tests)
  std::vector<std::string> StartedPodNames() const;  // pod names (no namespace), in start order

  // The exit code of the pod's most recent worker once it exited (128 +
  // signal when killed), also for pods deleted meanwhile; nullopt while it
  // runs or when none was started.
  std::optional<int> WorkerExitCode(const std::string& ns, const std::string& pod) const;
  std::string LogPath(const std::string& ns, const std::string& pod) const;

  // Blocks until pred() holds, re-evaluated whenever a worker starts or
  // exits, or until `timeout`; returns pred()'s final value. For tests that
  // wait on workers rather than on the server (a deleted pod's exit).
  bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) const;

 private:
  struct Worker {
    std::string uid, ns, pod, job, attempt;
    pid_t pid = -1;
    int metrics_port = 0;
    int ranks = 1;
    std::string log_path;
    std::string started_at;  // RFC 3339
    bool exited = false;
    int exit_code = 0;
    bool pod_gone = false;  // deleted from the server: report nothing
    bool sigkilled = false;
    bool running_reported = false;                                 // the pod's status says Running
    std::optional<std::chrono::steady_clock::time_point> kill_at;  // after SIGTERM
  };

  void Loop();
  // One pass: reap exited workers, then act on the server's pods.
  void Reap();
  void Sync();
  void Terminate(Worker& w, const nlohmann::json* pod);  // SIGTERM + SIGKILL deadline
  void Schedule(const nlohmann::json& pod, const std::vector<nlohmann::json>& nodes,
                std::map<std::string, int>& gpus_in_use);
  void RunPod(const nlohmann::json& pod, const std::string& node);
  Status StartWorker(const nlohmann::json& pod, Worker& w);
  void ReportRunning(const Worker& w);
  void ReportExit(const Worker& w);
  // Read-modify-write of a pod with retries on conflict; `edit` returns
  // false to skip the write. Gives up when the pod is gone or its uid changed.
  Status UpdatePod(const std::string& ns, const std::string& name, const std::string& uid,
                   const std::function<bool(nlohmann::json&)>& edit);
  std::string Fingerprint() const;
  void NotifyLocked();
  void WriteFileSdLocked();
  std::vector<Target> TargetsLocked() const;

  TestApiServer* const server_;
  const FakeKubeletOptions options_;

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  uint64_t change_seq_ = 0;
  std::map<std::string, Worker> workers_;    // by pod uid
  std::map<std::string, int> master_ports_;  // by "ns/job/attempt"
  std::set<int> reserved_ports_;             // handed out and not yet released
  std::vector<std::string> started_pod_names_;
  std::string file_sd_path_;
  std::map<std::string, std::string> unschedulable_;  // pod uid -> last message written
  std::set<std::string> kill_when_started_;           // "ns/pod"

  std::mutex thread_mu_;  // guards thread_ (Start/Stop from any thread)
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace pacer::testing

#endif  // PACER_TESTS_KUBELET_FAKE_KUBELET_H_
