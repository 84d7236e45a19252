#include "daemon/pod_launcher.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <future>
#include <string>
#include <system_error>
#include <utility>

#include "core/json_fields.h"
#include "kube/resources.h"
#include "observe/log.h"
#include "pacer/planner/units.h"
#include "reconcile/job_object.h"

namespace pacer::controller {
namespace {

// How long an expectation may wait for the cache before it is dropped (a
// watch outage longer than this is covered by the informer's relist).
constexpr std::chrono::seconds kExpectationTimeout{120};

// A label or annotation read as a number; `fallback` when it is absent or
// was edited into something else (taken as unknown, never an exception).
template <typename Int>
Int IntOr(const std::string& text, Int fallback) {
  Int value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end && !text.empty() ? value : fallback;
}

WorkerState StateOf(const nlohmann::json& pod, const nlohmann::json* labels) {
  WorkerState w;
  w.node_rank = IntOr(StringMember(labels, kNodeRankLabel), 0);
  w.node_name = StringMember(Member(pod, "spec"), "nodeName");
  const nlohmann::json* status = Member(pod, "status");
  std::string phase = StringMember(status, "phase");
  if (phase.empty()) phase = "Pending";
  if (phase == "Running") w.phase = WorkerPhase::kRunning;
  if (phase == "Succeeded") w.phase = WorkerPhase::kSucceeded;
  if (phase == "Failed") w.phase = WorkerPhase::kFailed;
  const nlohmann::json* containers = status != nullptr ? Member(*status, "containerStatuses") : nullptr;
  if (containers != nullptr && containers->is_array()) {
    for (const nlohmann::json& c : *containers) {
      if (StringMember(&c, "name") != "worker") continue;
      const nlohmann::json* state = Member(c, "state");
      const nlohmann::json* t = state != nullptr ? Member(*state, "terminated") : nullptr;
      if (t == nullptr) continue;
      const nlohmann::json* code = Member(*t, "exitCode");
      if (code != nullptr && code->is_number_integer()) w.exit_code = code->get<int>();
      w.message = StringMember(t, "reason");
      const std::string message = StringMember(t, "message");
      if (!message.empty()) w.message += (w.message.empty() ? "" : ": ") + message;
    }
  }
  if (phase == "Failed" && w.message.empty()) {
    w.message = StringMember(status, "reason");
    if (w.message.empty()) w.message = "pod failed";
  }
  return w;
}

// What Observe and Stop need of one worker pod, read in place from the
// informer's cache (a pod is ~5 KiB of JSON; copying each job's pods on
// every pass was most of a pass's own time at 10,000 pods).
struct PodFacts {
  std::string name;
  std::string owner_uid;  // the controlling owner's (a TrainJob's); "" when none
  int attempt = 0;
  bool deleting = false;
  int nodes = 0;           // the pacer.dev/nodes annotation
  std::string layout_json;  // the pacer.dev/layout annotation
  std::string spec_hash;    // the pacer.dev/spec-hash annotation
  int64_t total_steps = 0;  // the pacer.dev/total-steps annotation; 0 when absent
  std::optional<int64_t> launch_unix_seconds;  // the pacer.dev/launch-time annotation
  WorkerState state;
};

PodFacts FactsOf(const nlohmann::json& pod) {
  PodFacts f;
  const nlohmann::json* metadata = Member(pod, "metadata");
  if (metadata == nullptr) return f;
  f.name = StringMember(metadata, "name");
  if (const nlohmann::json* owners = Member(*metadata, "ownerReferences");
      owners != nullptr && owners->is_array()) {
    for (const nlohmann::json& owner : *owners) {
      const nlohmann::json* controller = Member(owner, "controller");
      if (controller != nullptr && controller->is_boolean() && controller->get<bool>()) {
        f.owner_uid = StringMember(&owner, "uid");
      }
    }
  }
  const nlohmann::json* labels = Member(*metadata, "labels");
  f.attempt = IntOr(StringMember(labels, kAttemptLabel), 0);
  const nlohmann::json* deletion = Member(*metadata, "deletionTimestamp");
  f.deleting = deletion != nullptr && !deletion->is_null();
  const nlohmann::json* annotations = Member(*metadata, "annotations");
  f.nodes = IntOr(StringMember(annotations, kNodesAnnotation), 0);
  f.layout_json = StringMember(annotations, kLayoutAnnotation);
  f.spec_hash = StringMember(annotations, kSpecHashAnnotation);
  f.total_steps =
      std::max<int64_t>(0, IntOr<int64_t>(StringMember(annotations, kTotalStepsAnnotation), 0));
  if (StatusOr<int64_t> t = planner::ParseRfc3339(StringMember(annotations, kLaunchTimeAnnotation));
      t.ok() && *t > 0) {
    f.launch_unix_seconds = *t;
  }
  f.state = StateOf(pod, labels);
  return f;
}

// The job's pods in its namespace.
std::vector<PodFacts> JobPods(const Informer& informer, const JobRef& job) {
  std::vector<PodFacts> pods;
  informer.VisitByLabel(kJobLabel, job.name, job.namespace_name, [&pods](const nlohmann::json& pod) {
    PodFacts facts = FactsOf(pod);
    if (!facts.name.empty()) pods.push_back(std::move(facts));  // else malformed
  });
  return pods;
}

// The workers' Service was there already (AlreadyExists): fine when it is
// this TrainJob's (an earlier attempt made it), else FailedPrecondition
// saying whose it is. An earlier TrainJob of the same name, deleted and
// re-created, leaves its Service to the garbage collector, which deletes it
// a moment later: launching onto it would leave the new workers without DNS
// names once it is gone.
Status CheckExistingService(KubeClient& client, const JobRef& job, const std::string& name) {
  StatusOr<nlohmann::json> existing = client.Get(kServices, job.namespace_name, name);
  if (existing.status().code() == StatusCode::kPermissionDenied) {
    // RBAC made by hand before `get` on Services was needed: reuse it
    // unchecked, as earlier controllers did, and say what is missing.
    Log(LogLevel::kWarning,
        "cannot check whose the existing workers' Service is (no get on services); using it",
        {{"service", job.namespace_name + "/" + name}, {"error", existing.status()}});
    return Status::Ok();
  }
  if (existing.status().code() == StatusCode::kNotFound) {
    return UnavailableError("the workers' Service " + name +
                            " was there a moment ago and is gone now; creating it again");
  }
  if (!existing.ok()) return existing.status().WithContext("reading the workers' Service");
  const nlohmann::json* metadata = Member(*existing, "metadata");
  const nlohmann::json* owners =
      metadata != nullptr ? Member(*metadata, "ownerReferences") : nullptr;
  if (owners != nullptr && owners->is_array()) {
    for (const nlohmann::json& owner : *owners) {
      if (StringMember(&owner, "uid") == job.uid) return Status::Ok();
    }
    for (const nlohmann::json& owner : *owners) {
      if (StringMember(&owner, "kind") == "TrainJob") {
        return FailedPreconditionError(
            "the workers' Service " + name + " belongs to an earlier TrainJob named " +
            StringMember(&owner, "name") + " (uid " + StringMember(&owner, "uid") +
            "), deleted and not yet cleaned up; the launch waits until the garbage collector "
            "deletes it");
      }
    }
  }
  return FailedPreconditionError("Service " + name + " in namespace " + job.namespace_name +
                                 " is in the way: the workers need that name, and it is not "
                                 "this TrainJob's (no owner reference to it); delete or rename "
                                 "that Service, or rename the TrainJob");
}

}  // namespace

PodLauncher::PodLauncher(KubeClient* client, const Informer* pods, PodTemplateOptions options,
                         const Clock* clock)
    : client_(client),
      pods_(pods),
      options_(std::move(options)),
      clock_(clock != nullptr ? clock : &SystemClock::Default()) {}

void PodLauncher::SweepExpiredLocked() {
  const Clock::SteadyTime now = clock_->Now();
  if (now - last_sweep_ <= kExpectationTimeout) return;
  last_sweep_ = now;
  std::erase_if(expectations_,
                [&](const auto& entry) { return now - entry.second.since > kExpectationTimeout; });
}

std::size_t PodLauncher::TrackedJobs() {
  std::lock_guard<std::mutex> lock(mu_);
  return expectations_.size();
}

Status PodLauncher::Launch(const LaunchSpec& spec) {
  const std::string& ns = spec.job.namespace_name;
  // One live LIST of the job's pods before a gang is created: the pod cache
  // can lag (a watch whose connection died without a word is noticed only
  // at its inactivity limit, after the launch expectations expired), and a
  // launch decided on it started a second gang beside the running one, both
  // writing one checkpoint volume.
  ListOptions mine;
  mine.label_selector = std::string(kJobLabel) + "=" + spec.job.name;
  StatusOr<ListPage> live = client_->ListAll(kPods, ns, mine);
  if (!live.ok()) return live.status().WithContext("listing the job's worker pods");
  for (const nlohmann::json& pod : live->items) {
    const PodFacts facts = FactsOf(pod);
    // An earlier TrainJob of the same name (deleted and re-created) has the
    // same pod names: a Create would answer AlreadyExists, counted as
    // created below, and its pods would be taken for this job's workers.
    // FailedPrecondition, as for the earlier job's Service: the reconciler
    // says so on the TrainJob (Planned False LaunchRefused, an event) and
    // backs off, where Unavailable was a silent reconcile error.
    if (!spec.job.uid.empty() && !facts.owner_uid.empty() && facts.owner_uid != spec.job.uid) {
      return FailedPreconditionError(
          "worker pod " + facts.name + " belongs to an earlier TrainJob of this name (uid " +
          facts.owner_uid + "), deleted and not yet cleaned up; attempt " +
          std::to_string(spec.attempt) +
          " waits until the garbage collector deletes it (if it stays, delete it: kubectl "
          "delete pod -n " +
          ns + " " + facts.name + ")");
    }
    if (!facts.deleting && facts.attempt != spec.attempt) {
      return UnavailableError("worker pod " + facts.name + " of attempt " +
                              std::to_string(facts.attempt) +
                              " is still there, though the pod cache does not show it; attempt " +
                              std::to_string(spec.attempt) + " waits for the cache");
    }
  }
  const nlohmann::json service_object = WorkerServiceObject(spec, options_);
  StatusOr<nlohmann::json> service = client_->Create(kServices, ns, service_object);
  if (service.status().code() == StatusCode::kAlreadyExists) {
    RETURN_IF_ERROR(CheckExistingService(*client_, spec.job,
                                         service_object["metadata"]["name"].get<std::string>()));
  } else if (!service.ok()) {
    return service.status().WithContext("creating the workers' Service");
  }
  // Pods are created in batches of 1, 2, 4, ... in parallel (the Kubernetes
  // Job controller's slow start): a launch that cannot succeed (quota, an
  // admission webhook) fails on its first pod, not after N requests, and a
  // large gang does not wait for N round trips one after another.
  const int nodes = spec.plan.layout.nodes;
  std::vector<std::string> created;
  Status failure;
  for (int next = 0, batch = 1; next < nodes && failure.ok(); batch *= 2) {
    const int end = std::min(nodes, next + batch);
    std::vector<std::pair<std::string, std::future<StatusOr<nlohmann::json>>>> requests;
    for (int node = next; node < end; ++node) {
      nlohmann::json pod = WorkerPodObject(spec, node, options_);
      std::string name = pod["metadata"]["name"];
      requests.emplace_back(std::move(name),
                            std::async(std::launch::async, [this, &ns, pod = std::move(pod)] {
                              return client_->Create(kPods, ns, pod);
                            }));
    }
    for (auto& [name, request] : requests) {
      StatusOr<nlohmann::json> result = request.get();
      if (result.ok()) {
        created.push_back(name);
      } else if (result.status().code() != StatusCode::kAlreadyExists && failure.ok()) {
        failure = result.status().WithContext("creating worker pod " + name);
      }
    }
    next = end;
  }
  if (!failure.ok()) {
    // All or none: a partial gang would hold GPUs and never start.
    for (const std::string& done : created) (void)client_->Delete(kPods, ns, done, int64_t{0});
    return failure;
  }
  std::lock_guard<std::mutex> lock(mu_);
  SweepExpiredLocked();
  Expectations& e = expectations_[spec.job.key()];
  e.attempt = spec.attempt;
  e.nodes = spec.plan.layout.nodes;
  e.layout = spec.plan.layout;
  e.spec_hash = spec.spec_hash;
  e.total_steps = spec.total_steps;
  e.launch_unix_seconds = spec.plan_unix_seconds;
  e.created.clear();
  for (int node = 0; node < spec.plan.layout.nodes; ++node) {
    e.created.insert(WorkerPodName(spec.job.name, spec.attempt, node));
  }
  e.deleted.clear();
  e.stopping.clear();
  e.since = clock_->Now();
  return Status::Ok();
}

StatusOr<std::optional<WorkerGroup>> PodLauncher::Observe(const JobRef& job) {
  std::vector<PodFacts> pods = JobPods(*pods_, job);
  // Another TrainJob's pods (an earlier one of the same name, deleted and
  // re-created while they terminate) are no workers of this one: taken for
  // a launch whose status write was lost, finished ones made the new job
  // Succeeded with no step run. They still count as terminating
  // (TerminatingWorkers), so the launch waits for them.
  if (!job.uid.empty()) {
    std::erase_if(pods, [&](const PodFacts& pod) {
      return !pod.owner_uid.empty() && pod.owner_uid != job.uid;
    });
  }
  std::lock_guard<std::mutex> lock(mu_);
  Expectations* e = nullptr;
  if (auto it = expectations_.find(job.key()); it != expectations_.end()) {
    e = &it->second;
    if (clock_->Now() - e->since > kExpectationTimeout) {
      expectations_.erase(it);
      e = nullptr;
    }
  }
  std::set<std::string> seen;
  int attempt = 0;
  for (const PodFacts& pod : pods) {
    if (e != nullptr && e->deleted.count(pod.name) > 0) continue;  // deleted; the cache lags
    seen.insert(pod.name);
    attempt = std::max(attempt, pod.attempt);
  }
  if (e != nullptr) {
    for (auto it = e->created.begin(); it != e->created.end();) {
      it = seen.count(*it) > 0 ? e->created.erase(it) : std::next(it);
    }
    for (auto it = e->deleted.begin(); it != e->deleted.end();) {
      const bool still = std::any_of(pods.begin(), pods.end(),
                                     [&](const PodFacts& p) { return p.name == *it; });
      it = still ? std::next(it) : e->deleted.erase(it);
    }
    for (auto it = e->stopping.begin(); it != e->stopping.end();) {
      const bool lagging = std::any_of(pods.begin(), pods.end(), [&](const PodFacts& p) {
        return p.name == *it && !p.deleting;
      });
      it = lagging ? std::next(it) : e->stopping.erase(it);
    }
    if (!e->created.empty()) attempt = std::max(attempt, e->attempt);
  }
  if (seen.empty() && (e == nullptr || e->created.empty())) return std::optional<WorkerGroup>();

  WorkerGroup group;
  group.attempt = attempt;
  for (const PodFacts& pod : pods) {
    if (seen.count(pod.name) == 0 || pod.attempt != attempt) continue;
    group.workers.push_back(pod.state);
    if (pod.deleting || (e != nullptr && e->stopping.count(pod.name) > 0)) group.stopping = true;
    group.expected_workers = std::max(group.expected_workers, pod.nodes);
    if (!group.layout && !pod.layout_json.empty()) {
      try {
        group.layout = LayoutFromPlanJson(nlohmann::json::parse(pod.layout_json));
      } catch (const std::exception&) {
        // A hand-edited annotation: the status's plan is used instead.
      }
    }
    if (group.spec_hash.empty()) group.spec_hash = pod.spec_hash;
    if (!group.total_steps && pod.total_steps > 0) group.total_steps = pod.total_steps;
    if (!group.launch_unix_seconds) group.launch_unix_seconds = pod.launch_unix_seconds;
  }
  if (e != nullptr && e->attempt == attempt) {
    for (const std::string& name : e->created) {
      WorkerState w;  // created, not yet in the cache: pending
      w.node_rank = IntOr(name.substr(name.rfind("-n") + 2), 0);
      group.workers.push_back(w);
    }
    group.expected_workers = std::max(group.expected_workers, e->nodes);
    if (!group.layout) group.layout = e->layout;
    if (group.spec_hash.empty()) group.spec_hash = e->spec_hash;
    if (!group.total_steps && e->total_steps > 0) group.total_steps = e->total_steps;
    if (!group.launch_unix_seconds && e->launch_unix_seconds > 0) {
      group.launch_unix_seconds = e->launch_unix_seconds;
    }
  }
  if (group.expected_workers == 0) group.expected_workers = static_cast<int>(group.workers.size());
  return std::optional<WorkerGroup>(std::move(group));
}

int PodLauncher::TerminatingWorkers(const JobRef& job) {
  const std::vector<PodFacts> pods = JobPods(*pods_, job);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = expectations_.find(job.key());
  int terminating = 0;
  for (const PodFacts& pod : pods) {
    const bool deleted_here =
        it != expectations_.end() &&
        (it->second.deleted.count(pod.name) > 0 || it->second.stopping.count(pod.name) > 0);
    if (pod.deleting || deleted_here) ++terminating;
  }
  return terminating;
}

Status PodLauncher::Stop(const JobRef& job, StopMode mode) {
  StatusOr<std::optional<WorkerGroup>> observed = Observe(job);
  if (!observed.ok()) return observed.status();
  std::vector<std::string> names;
  for (const PodFacts& pod : JobPods(*pods_, job)) {
    if (mode == StopMode::kGraceful && observed->has_value() &&
        pod.attempt != (*observed)->attempt) {
      continue;
    }
    names.push_back(pod.name);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = expectations_.find(job.key());
    if (it != expectations_.end()) {
      // Pods created but not yet seen are deleted too.
      for (const std::string& name : it->second.created) names.push_back(name);
      it->second.created.clear();
    }
  }
  const std::optional<int64_t> grace =
      mode == StopMode::kGraceful ? std::optional<int64_t>(options_.termination_grace_seconds)
                                  : std::nullopt;
  Status result = Status::Ok();
  std::vector<std::string> stopped;  // deleted gracefully by this call
  for (const std::string& name : names) {
    Status deleted = client_->Delete(kPods, job.namespace_name, name, grace);
    if (deleted.ok()) {
      stopped.push_back(name);
    } else if (deleted.code() != StatusCode::kNotFound) {
      result = deleted;
      break;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  SweepExpiredLocked();
  Expectations& e = expectations_[job.key()];
  if (e.since == Clock::SteadyTime()) e.since = clock_->Now();
  if (mode == StopMode::kGraceful && !stopped.empty()) {
    // Until the cache shows their deletionTimestamp, these pods are
    // stopping too: a stop that failed half-way still took effect, and the
    // reconciler must not take it for one that did not (or, later, for a
    // drain).
    e.stopping.insert(stopped.begin(), stopped.end());
    e.since = clock_->Now();
  }
  if (!result.ok()) return result;
  if (mode == StopMode::kRemove) {
    // In a real cluster a deleted pod lingers while its container stops;
    // only then is it gone. Until the cache shows that, hide it.
    e.deleted.insert(names.begin(), names.end());
    e.since = clock_->Now();
  }
  return Status::Ok();
}

}  // namespace pacer::controller
