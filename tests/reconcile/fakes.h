// In-memory stand-ins for the reconciler's interfaces (reconcile/interfaces.h):
// a job store with events and conflict injection, a launcher whose workers the
// test moves between phases, a settable metrics source and a fixed inventory.
// Thread-safety: none; the tests drive them from one thread.
#ifndef PACER_TESTS_RECONCILE_FAKES_H_
#define PACER_TESTS_RECONCILE_FAKES_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "reconcile/interfaces.h"

namespace pacer::controller::testing {

struct RecordedEvent {
  std::string key, type, reason, message;
};

class FakeJobStore : public JobStore {
 public:
  std::map<std::string, nlohmann::json> jobs;
  std::vector<RecordedEvent> events;
  int status_writes = 0;
  int fail_next_status_writes = 0;                     // answered with fail_status_code
  StatusCode fail_status_code = StatusCode::kAborted;  // a conflict; InvalidArgument: a 422

  void Put(const nlohmann::json& job) {
    const auto& m = job["metadata"];
    jobs[NamespaceOf(m) + "/" + m["name"].get<std::string>()] = job;
  }
  StatusOr<nlohmann::json> Get(const std::string& key) override {
    auto it = jobs.find(key);
    if (it == jobs.end()) return NotFoundError("trainjobs \"" + key + "\" not found");
    return it->second;
  }
  Status WriteStatus(const nlohmann::json& job, const nlohmann::json& status) override {
    if (fail_next_status_writes > 0) {
      --fail_next_status_writes;
      return Status(fail_status_code, fail_status_code == StatusCode::kAborted
                                          ? "conflict"
                                          : "TrainJob.pacer.dev \"llama\" is invalid");
    }
    ++status_writes;
    jobs[Key(job)]["status"] = status;
    return Status::Ok();
  }
  StatusOr<nlohmann::json> SetFinalizer(const nlohmann::json& job, const std::string& finalizer,
                                        bool present) override {
    nlohmann::json& stored = jobs[Key(job)];
    nlohmann::json list = nlohmann::json::array();
    if (stored["metadata"].contains("finalizers")) {
      for (const auto& f : stored["metadata"]["finalizers"]) {
        if (f != finalizer) list.push_back(f);
      }
    }
    if (present) list.push_back(finalizer);
    stored["metadata"]["finalizers"] = list;
    if (!present && stored["metadata"].contains("deletionTimestamp") && list.empty()) {
      nlohmann::json copy = stored;
      jobs.erase(Key(job));
      return copy;
    }
    return stored;
  }
  void RecordEvent(const nlohmann::json& job, const std::string& type, const std::string& reason,
                   const std::string& message) override {
    events.push_back({Key(job), type, reason, message});
  }
  int CountEvents(const std::string& reason) const {
    int n = 0;
    for (const auto& e : events) n += e.reason == reason ? 1 : 0;
    return n;
  }
  // The message of the last event with `reason`; "" when none.
  std::string LastEventMessage(const std::string& reason) const {
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
      if (it->reason == reason) return it->message;
    }
    return "";
  }
  nlohmann::json StatusOf(const std::string& key) const {
    return jobs.at(key).value("status", nlohmann::json::object());
  }
  // metadata.namespace, "default" when absent. (json::value() with a string
  // default trips GCC 12's -Wnull-dereference once inlined into some tests.)
  static std::string NamespaceOf(const nlohmann::json& metadata) {
    auto it = metadata.find("namespace");
    return it != metadata.end() && it->is_string() ? it->get<std::string>() : "default";
  }
  static std::string Key(const nlohmann::json& job) {
    return NamespaceOf(job["metadata"]) + "/" + job["metadata"]["name"].get<std::string>();
  }
};

class FakeLauncher : public Launcher {
 public:
  std::map<std::string, WorkerGroup> groups;
  std::vector<LaunchSpec> launches;
  std::vector<std::pair<std::string, StopMode>> stops;
  std::optional<Status> refuse;            // every Launch answers this (an API server's 403)
  int fail_next_stops = 0;                 // answered Unavailable, nothing stopped
  std::map<std::string, int> terminating;  // deleted workers not gone yet, by job key

  Status Launch(const LaunchSpec& spec) override {
    launches.push_back(spec);
    if (refuse) return *refuse;
    auto it = groups.find(spec.job.key());
    if (it != groups.end() && it->second.attempt == spec.attempt) return Status::Ok();
    WorkerGroup g;
    g.attempt = spec.attempt;
    g.expected_workers = spec.plan.layout.nodes;
    g.layout = spec.plan.layout;
    g.spec_hash = spec.spec_hash;
    g.total_steps = spec.total_steps;
    if (spec.plan_unix_seconds > 0) g.launch_unix_seconds = spec.plan_unix_seconds;
    for (int n = 0; n < spec.plan.layout.nodes; ++n)
      g.workers.push_back({n, WorkerPhase::kPending, std::nullopt, "", ""});
    groups[spec.job.key()] = g;
    return Status::Ok();
  }
  StatusOr<std::optional<WorkerGroup>> Observe(const JobRef& job) override {
    auto it = groups.find(job.key());
    if (it == groups.end()) return std::optional<WorkerGroup>();
    return std::optional<WorkerGroup>(it->second);
  }
  Status Stop(const JobRef& job, StopMode mode) override {
    if (fail_next_stops > 0) {
      --fail_next_stops;
      return UnavailableError("the API server did not answer the pod deletion");
    }
    stops.emplace_back(job.key(), mode);
    auto it = groups.find(job.key());
    if (it == groups.end()) return Status::Ok();
    if (mode == StopMode::kRemove) {
      groups.erase(it);
    } else {
      it->second.stopping = true;
    }
    return Status::Ok();
  }
  int TerminatingWorkers(const JobRef& job) override {
    auto it = terminating.find(job.key());
    return it == terminating.end() ? 0 : it->second;
  }
  // Test helpers: every worker of `key` to `phase` (with an exit code).
  void SetAll(const std::string& key, WorkerPhase phase, std::optional<int> exit_code = {}) {
    for (WorkerState& w : groups.at(key).workers) {
      w.phase = phase;
      w.exit_code = exit_code;
    }
  }
  int CountStops(StopMode mode) const {
    int n = 0;
    for (const auto& s : stops) n += s.second == mode ? 1 : 0;
    return n;
  }
};

class FakeMetrics : public MetricsSource {
 public:
  std::map<std::string, Measurement> measurements;
  std::optional<Status> error;
  std::vector<JobRef> asked;  // every Measure call's job, in order
  StatusOr<Measurement> Measure(const JobRef& job) override {
    asked.push_back(job);
    if (error) return *error;
    auto it = measurements.find(job.key());
    if (it == measurements.end()) return Measurement{};
    return it->second;
  }
};

class FakeInventory : public InventorySource {
 public:
  ClusterInventory inventory;
  StatusOr<ClusterInventory> Current() override { return inventory; }
};

}  // namespace pacer::controller::testing

#endif  // PACER_TESTS_RECONCILE_FAKES_H_
