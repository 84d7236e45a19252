#include "reconcile/cluster_scheduler.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "core/json_fields.h"
#include "core/trainjob_status.h"
#include "pacer/planner/search.h"
#include "pacer/planner/units.h"
#include "reconcile/job_object.h"
#include "reconcile/worker_env.h"
#include "reconcile/worker_failure.h"

namespace pacer::controller {

bool Allocation::SameDecision(const Allocation& other) const {
  return admitted == other.admitted && gpus == other.gpus && gpu_type == other.gpu_type &&
         next_start_unix_seconds == other.next_start_unix_seconds;
}

std::optional<Allocation> AllocationBoard::Get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.find(key);
  if (it == allocations_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> AllocationBoard::Publish(std::map<std::string, Allocation> allocations) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> changed;
  for (const auto& [key, allocation] : allocations) {
    auto it = allocations_.find(key);
    if (it == allocations_.end() || !it->second.SameDecision(allocation)) changed.push_back(key);
  }
  for (const auto& [key, allocation] : allocations_) {
    if (allocations.count(key) == 0) changed.push_back(key);
  }
  allocations_ = std::move(allocations);
  return changed;
}

std::map<std::string, Allocation> AllocationBoard::All() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocations_;
}

namespace {

bool Terminal(const std::string& phase) {
  return phase == "Succeeded" || phase == "Failed" || phase == "Infeasible";
}

// GPU counts a job may be given on `pools` (one GPU type): 1, 2, 4 .. up to
// a node's GPUs, then whole nodes (multi-node layouts use whole nodes). At
// most ~48 counts: on big pools the node counts thin out geometrically.
std::vector<int> CandidateCounts(const std::vector<planner::NodePool>& pools, int min_gpus,
                                 std::optional<int> max_gpus) {
  std::set<int> counts;
  int total = 0;
  for (const planner::NodePool& pool : pools) {
    total += pool.nodes * pool.gpus_per_node;
    for (int g = 1; g < pool.gpus_per_node; g *= 2) counts.insert(g);
    counts.insert(pool.gpus_per_node);
    for (int k = 2; k <= pool.nodes;) {
      counts.insert(k * pool.gpus_per_node);
      k = k < 16 ? k + 1 : std::min(pool.nodes, k + std::max(1, k / 4)) + (k == pool.nodes);
    }
  }
  std::vector<int> out;
  for (int g : counts) {
    if (g < min_gpus || g > total || (max_gpus && g > *max_gpus)) continue;
    out.push_back(g);
  }
  return out;
}

// The cluster as `job` may use it: without its excluded nodes. Points at
// `cluster` itself when the job excludes none (no copy), else at `*trimmed`.
const ClusterInventory& ClusterForJob(const ClusterInventory& cluster, const ScheduledJob& job,
                                      ClusterInventory* trimmed) {
  if (job.excluded_nodes.empty()) return cluster;
  *trimmed = WithoutNodes(cluster, job.excluded_nodes);
  return *trimmed;
}

std::string AdviceText(const sched::Advice& advice, const std::string& gpu_type) {
  std::vector<std::string> parts;
  if (advice.deadline_seconds) {
    parts.push_back("a deadline of " +
                    planner::FormatRfc3339(planner::CeilUnixSeconds(*advice.deadline_seconds)) +
                    " or later");
  }
  if (advice.iterations) {
    parts.push_back(std::to_string(static_cast<int64_t>(std::floor(*advice.iterations))) +
                    " remaining steps or fewer");
  }
  if (advice.cluster_gpus) {
    parts.push_back(std::to_string(*advice.cluster_gpus) + " " + gpu_type + " GPUs in the cluster");
  }
  if (parts.empty()) return "";
  std::string text = "; it would be admitted with ";
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) text += i + 1 == parts.size() ? ", or " : ", ";
    text += parts[i];
  }
  return text;
}

}  // namespace

ClusterScheduler::ClusterScheduler(ClusterSchedulerOptions options)
    : options_(std::move(options)) {}

std::optional<ScheduledJob> ClusterScheduler::JobFromObject(const nlohmann::json& trainjob,
                                                            int64_t now_unix_seconds) {
  const nlohmann::json* metadata = Member(trainjob, "metadata");
  if (metadata == nullptr) return std::nullopt;
  if (const nlohmann::json* deleting = Member(*metadata, "deletionTimestamp");
      deleting != nullptr && !deleting->is_null()) {
    return std::nullopt;
  }
  const nlohmann::json* status = Member(trainjob, "status");
  const std::string phase = StringMember(status, "phase");
  if (Terminal(phase)) return std::nullopt;
  StatusOr<planner::JobSpec> spec = ParseJobObject(trainjob);
  if (!spec.ok()) return std::nullopt;

  ScheduledJob job;
  const JobRef ref = JobRefOf(trainjob);
  job.key = ref.key();
  job.uid = ref.uid;
  if (const nlohmann::json* g = Member(*metadata, "generation");
      g != nullptr && g->is_number_integer())
    job.generation = g->get<int64_t>();
  job.spec = std::move(*spec);
  job.spec.namespace_name = ref.namespace_name;
  job.spec.name = ref.name;
  job.arrival_unix_seconds = job.spec.creation_unix_seconds.value_or(now_unix_seconds);
  job.deadline_unix_seconds = planner::EffectiveDeadline(job.spec, now_unix_seconds);

  const nlohmann::json empty = nlohmann::json::object();
  const PersistedState state = ReadPersistedState(status != nullptr ? *status : empty);
  job.remaining_steps = std::max<int64_t>(1, TotalSteps(job.spec) - state.steps_completed);
  job.calibration = state.calibration;
  // What worker failures taught, as the reconciler plans with it: a larger
  // memory margin after out-of-memory exits, nodes to leave out.
  job.spec.memory_margin_fraction = state.failures.memory_margin_fraction;
  job.excluded_nodes = state.failures.excluded_nodes;
  const bool holds_gpus = phase == "Planning" || phase == "Running" || phase == "Replanning";
  if (holds_gpus && state.layout) {
    job.current_gpus = state.layout->gpus();
    job.current_gpu_type = state.layout->gpu_type;
  }
  // The scheduler's last decision, as the reconciler wrote it.
  if (const nlohmann::json* schedule = status != nullptr ? Member(*status, "schedule") : nullptr) {
    const nlohmann::json* gpus = Member(*schedule, "allocatedGpus");
    std::string type = StringMember(schedule, "gpuType");  // a pool's catalog name, as written
    if (gpus != nullptr && gpus->is_number_integer() && gpus->get<int64_t>() > 0 &&
        gpus->get<int64_t>() < (int64_t{1} << 20) && !type.empty()) {
      job.allocated_gpus = static_cast<int>(gpus->get<int64_t>());
    }
    // Also with no GPUs now: the pool an admitted job waits in.
    job.allocated_gpu_type = std::move(type);
  }
  bool metrics_unavailable = false;
  for (const Condition& c : ParseConditions(status != nullptr ? *status : empty)) {
    if (c.type == kConditionAdmitted && c.status == kConditionTrue) job.admitted = true;
    if (c.type == kConditionDegraded && c.status == kConditionTrue &&
        c.reason == kReasonMetricsUnavailable) {
      metrics_unavailable = true;
    }
  }
  // While metrics are out, progress stays at the last scraped step as time
  // moves on: counted from it, an on-track job looked further behind at
  // every pass, and the schedule refused others for it. The reconciler
  // keeps the projection from before the outage; the schedule takes the
  // same view: the steps that projection leaves, at the measured pace
  // (never more than the status says are left). Past that projection,
  // what the status says is left, an upper bound (Pass caps a deadline
  // job's at what its GPUs train by its deadline).
  job.progress_unseen = metrics_unavailable;
  if (metrics_unavailable && state.measured_step_seconds && *state.measured_step_seconds > 0) {
    if (const std::optional<int64_t> projected =
            ProjectedCompletionOf(status != nullptr ? *status : empty)) {
      if (*projected > now_unix_seconds) {
        const double steps = std::ceil(static_cast<double>(*projected - now_unix_seconds) /
                                       *state.measured_step_seconds);
        if (steps < static_cast<double>(job.remaining_steps)) {
          job.remaining_steps = std::max<int64_t>(1, static_cast<int64_t>(steps));
        }
      } else {
        job.past_held_projection = true;
      }
    }
  }
  // Launched before the scheduler ran (or by an older controller): it holds
  // GPUs, so it is in; admitted jobs are never dropped.
  if (job.current_gpus > 0) job.admitted = true;
  const nlohmann::json* plan = status != nullptr ? Member(*status, "plan") : nullptr;
  const nlohmann::json* predicted =
      plan != nullptr ? Member(*plan, "predictedStepSeconds") : nullptr;
  if (state.measured_step_seconds && predicted != nullptr && predicted->is_number() &&
      predicted->get<double>() > 0 && *state.measured_step_seconds > 0) {
    // Measured truth corrects the whole curve (the planner's shape, the
    // measurement's level); bounded so one bad scrape cannot evict a job.
    job.step_time_ratio =
        std::clamp(*state.measured_step_seconds / predicted->get<double>(), 0.2, 5.0);
  }
  return job;
}

StatusOr<sched::ThroughputCurve> ClusterScheduler::Curve(const ScheduledJob& job,
                                                         const ClusterInventory& cluster,
                                                         const std::string& gpu_type,
                                                         int64_t now_unix_seconds) {
  ClusterInventory trimmed;
  const planner::Inventory& inventory = ClusterForJob(cluster, job, &trimmed).inventory;
  planner::Inventory idle;
  idle.catalog = inventory.catalog;
  std::ostringstream signature;
  // The pools below carry the excluded nodes (fewer nodes); the margin
  // changes which layouts fit.
  signature << job.uid << '/' << job.generation << '/' << gpu_type << '/'
            << std::lround(job.step_time_ratio * 50) << '/'
            << std::lround(job.spec.memory_margin_fraction * 1000);
  for (const planner::NodePool& pool : inventory.node_pools) {
    if (!inventory.catalog.Same(pool.gpu_type, gpu_type)) continue;
    planner::NodePool all = pool;
    all.MarkAllFree();
    idle.node_pools.push_back(all);
    // The links too: a node annotation that corrects a pool's network
    // keeps its name, and the curves kept the old speed until a restart.
    signature << '/' << pool.name << ':' << pool.nodes << 'x' << pool.gpus_per_node << '@'
              << pool.network_gbps_per_node << ',' << pool.nvlink_gbps;
  }
  std::map<std::string, CachedCurve>& by_type = curves_[job.key];
  auto cached = by_type.find(gpu_type);
  if (cached != by_type.end() && cached->second.signature == signature.str()) {
    return cached->second.curve;
  }
  StatusOr<sched::ThroughputCurve> curve = SweepCurve(job, idle, gpu_type, now_unix_seconds);
  by_type.insert_or_assign(gpu_type, CachedCurve{signature.str(), curve});
  return curve;
}

StatusOr<sched::ThroughputCurve> ClusterScheduler::SweepCurve(const ScheduledJob& job,
                                                              const planner::Inventory& idle,
                                                              const std::string& gpu_type,
                                                              int64_t now_unix_seconds) const {
  // Throughput does not depend on the deadline: the fastest layout per count.
  planner::JobSpec fastest = job.spec;
  fastest.deadline_unix_seconds.reset();
  fastest.max_duration_seconds.reset();
  fastest.objective = planner::Objective::kTime;
  fastest.resources.gpu_types = {gpu_type};
  planner::PlanOptions options;
  options.now_unix_seconds = now_unix_seconds;
  options.ignore_free_gpus = true;
  options.alternatives = 0;
  options.constants = options_.constants;
  const std::vector<int> counts =
      CandidateCounts(idle.node_pools, job.spec.resources.min_gpus, job.spec.resources.max_gpus);
  if (counts.empty()) {
    return FailedPreconditionError("no GPU count of " + gpu_type +
                                   " lies within spec.resources.minGPUs..maxGPUs");
  }
  ASSIGN_OR_RETURN(std::vector<planner::SweepPoint> sweep,
                   planner::Sweep(fastest, idle, job.calibration, counts, options));
  std::vector<sched::ThroughputPoint> points;
  for (const planner::SweepPoint& point : sweep) {
    if (!point.best || point.best->step.step_seconds <= 0) continue;
    points.push_back({point.gpus, 1.0 / (point.best->step.step_seconds * job.step_time_ratio)});
  }
  return sched::ThroughputCurve::Create(points, counts.back(), /*drop_past_peak=*/true);
}

int ClusterScheduler::RememberedShare(const ScheduledJob& job, const std::string& gpu_type) const {
  auto last = shares_.find(job.key);
  if (last != shares_.end()) return last->second.first == gpu_type ? last->second.second : 0;
  // A new leader: the share the previous one gave, as the status says.
  return job.allocated_gpu_type == gpu_type ? job.allocated_gpus : 0;
}

StatusOr<std::map<std::string, Allocation>> ClusterScheduler::Pass(
    const std::vector<ScheduledJob>& read_jobs, const ClusterInventory& cluster,
    int64_t now_unix_seconds) {
  // Admitted by an earlier pass of this scheduler, though the status does not
  // say so yet (its write not in the informer's cache): read as an arrival,
  // it was tested again after older arrivals and could be rejected, an
  // admitted job dropped.
  std::vector<ScheduledJob> jobs = read_jobs;
  for (ScheduledJob& job : jobs) {
    if (!job.uid.empty() && admitted_uids_.count(job.uid) > 0) job.admitted = true;
  }
  const planner::Inventory& inventory = cluster.inventory;
  // Pools by catalog GPU type (canonical name), with their GPUs in all.
  const std::map<std::string, int> all_type_gpus = planner::GpusByType(inventory);

  // Each job on one type: the one it runs on, else the pool an admitted job
  // waits in, else the allowed type with the most GPUs that some layout
  // runs it on (ties by name: deterministic), counting only the nodes the
  // job may use.
  std::map<std::string, std::vector<const ScheduledJob*>> by_type;
  // By job key: the GPUs of its chosen type on the nodes it may use.
  std::map<std::string, int> usable_gpus;
  // By job key: admitted jobs that leave the pool they waited in, with why.
  // They enter the new pool through its admission test, as an arrival would:
  // entered as admitted, they took GPUs that pool's jobs were promised.
  std::map<std::string, std::pair<std::string, std::string>> moving;  // old type, why
  std::map<std::string, Allocation> out;
  for (const ScheduledJob& job : jobs) {
    std::map<std::string, int> own_type_gpus;
    if (!job.excluded_nodes.empty()) {
      own_type_gpus = planner::GpusByType(WithoutNodes(cluster, job.excluded_nodes).inventory);
    }
    const std::map<std::string, int>& type_gpus =
        job.excluded_nodes.empty() ? all_type_gpus : own_type_gpus;
    std::string chosen;
    if (job.current_gpus > 0) {
      if (const planner::GpuType* t = inventory.catalog.Find(job.current_gpu_type))
        chosen = t->name;
    }
    if (chosen.empty()) {
      // Pods launched before the status says so: the type they run on.
      auto held = cluster.trainjob_gpus.find(job.key);
      if (held != cluster.trainjob_gpus.end() && !held->second.empty()) {
        chosen = held->second.begin()->first;
      }
    }
    const bool holds_nothing = chosen.empty();
    std::string waited_in;  // the pool an admitted job waits in
    std::string left_because;
    if (chosen.empty() && job.admitted) {
      // An admitted job waiting for its reservation stays in the pool it
      // was admitted to. Picked again by the most GPUs at every pass, it
      // moved to another pool when that one grew (or this one lost a node).
      auto last = shares_.find(job.key);
      waited_in = last != shares_.end() ? last->second.first : job.allocated_gpu_type;
      // Only while some layout of that type still runs it: after
      // out-of-memory exits raised its margin (or nodes went), kept there
      // with no curve it waited forever while another pool could run it.
      if (!waited_in.empty()) {
        if (!planner::AllowsGpuType(job.spec.resources, inventory.catalog, waited_in)) {
          left_because = "spec.resources.gpuTypes no longer allows " + waited_in;
        } else if (type_gpus.count(waited_in) == 0) {
          left_because = "no node of " + waited_in + " is left to it";
        } else if (StatusOr<sched::ThroughputCurve> there =
                       Curve(job, cluster, waited_in, now_unix_seconds);
                   !there.ok()) {
          left_because = "no layout of " + waited_in + " runs it now: " + there.status().message();
        } else {
          chosen = waited_in;
        }
      }
    }
    if (chosen.empty() || type_gpus.count(chosen) == 0) {
      // Most GPUs first, but a pool no layout runs the job on (a precision
      // the GPU lacks, too little memory, fewer GPUs than minGPUs) only when
      // no allowed pool runs it: its message then says why.
      chosen.clear();
      std::vector<std::pair<int, std::string>> allowed;
      for (const auto& [type, gpus] : type_gpus) {
        if (gpus > 0 && planner::AllowsGpuType(job.spec.resources, inventory.catalog, type))
          allowed.emplace_back(-gpus, type);
      }
      std::sort(allowed.begin(), allowed.end());
      // A new job that its pool rejected is tested in the next allowed pool
      // at the next pass: tested in the largest one only, it was rejected
      // at every pass while a smaller allowed pool stood idle.
      const bool arrival = holds_nothing && !job.admitted;
      std::set<std::string>* tried = nullptr;
      if (auto it = rejected_in_.find(job.key); arrival && it != rejected_in_.end()) {
        tried = &it->second;
      }
      for (int round = 0; round < 2 && chosen.empty(); ++round) {
        for (const auto& [minus_gpus, type] : allowed) {
          if (tried != nullptr && tried->count(type) > 0) continue;
          if (type != waited_in && Curve(job, cluster, type, now_unix_seconds).ok()) {
            chosen = type;
            break;
          }
        }
        if (tried == nullptr) break;
        tried->clear();  // every pool that runs it has rejected it: again
        tried = nullptr;
      }
      if (chosen.empty() && !allowed.empty()) chosen = allowed.front().second;
    }
    if (holds_nothing && job.admitted && !waited_in.empty() && !chosen.empty() &&
        chosen != waited_in) {
      moving[job.key] = {waited_in, left_because};
    }
    if (!chosen.empty()) {
      by_type[chosen].push_back(&job);
      usable_gpus[job.key] = type_gpus.at(chosen);
    } else if (!job.excluded_nodes.empty() &&
               std::any_of(all_type_gpus.begin(), all_type_gpus.end(), [&](const auto& t) {
                 return planner::AllowsGpuType(job.spec.resources, inventory.catalog, t.first);
               })) {
      // Nodes of its types exist, but the job may use none of them.
      Allocation rejected;
      // Admitted jobs are never dropped: it waits, admitted, for a node.
      rejected.admitted = job.admitted;
      rejected.message =
          "every node of an allowed GPU type is excluded for this job after "
          "repeated collective failures (status.excludedNodes); " +
          std::string(job.admitted ? "it runs again when other nodes of those types join"
                                   : "it would be admitted with other nodes");
      out[job.key] = rejected;
    }
  }

  std::set<std::string> live;
  next_wakeup_.reset();
  sched::SchedOptions options;
  options.policy = sched::Policy::kPacer;
  options.restart = sched::RestartModel::None();
  // A resize or a start costs one relaunch: the planner's startup time.
  options.restart.keep_seconds = options_.constants.startup_seconds;
  options.hysteresis_factor = options_.hysteresis_factor;
  options.decision_interval_seconds = options_.decision_interval_seconds;
  options.stall_headroom_factor = 0;  // a pass does not stall jobs it keeps
  options.overhead_fraction = options_.plan_headroom_fraction;
  options.deadline_guard_seconds = options_.deadline_guard_seconds;
  const double now = static_cast<double>(now_unix_seconds);

  // An admitted job that could not enter the pool it would move to: still
  // admitted (never dropped), waiting in the pool it was admitted to, so
  // the next pass tests its entry again (and a new leader reads that pool
  // from status.schedule.gpuType).
  auto wait_to_move = [&](const ScheduledJob& job, const std::string& why) {
    const auto& [old_type, left_because] = moving.at(job.key);
    Allocation waiting;
    waiting.admitted = true;
    waiting.gpu_type = old_type;
    waiting.message = left_because + "; " + why;
    shares_[job.key] = {old_type, 0};
    reserved_.erase(job.key);
    out[job.key] = waiting;
  };
  for (const auto& [type, members] : by_type) {
    int free_gpus = 0;
    for (const planner::NodePool& pool : inventory.node_pools) {
      if (inventory.catalog.Same(pool.gpu_type, type)) free_gpus += pool.free_gpus;
    }
    int capacity = free_gpus;
    std::vector<sched::SchedJob> sched_jobs;
    std::vector<const ScheduledJob*> scheduled;
    std::vector<int> held_levels;  // by sched_jobs index: what the pods hold
    // Free GPUs that jobs kept without a curve are owed (kept at their plan
    // while their pods hold less, between two attempts): not the others'.
    int promised = 0;
    for (const ScheduledJob* job : members) {
      live.insert(job->key);
      // What its pods hold, not what its status says: the status lags the
      // pods both ways (a plan written after they start, and kept while
      // they stop at a checkpoint), and counting a stopped job's plan as
      // well as its freed GPUs would give the same GPUs out twice.
      const int held = cluster.TrainJobGpus(job->key, type);
      StatusOr<sched::ThroughputCurve> curve = Curve(*job, cluster, type, now_unix_seconds);
      if (!curve.ok()) {
        // Its pods' GPUs stay its own, not capacity for the others: given
        // to another job, that job waited for GPUs still in use.
        if (moving.count(job->key) > 0) {
          wait_to_move(*job, "no other allowed pool runs it either (" + type + ": " +
                                 curve.status().message() + ")");
          continue;
        }
        Allocation a;
        a.gpu_type = type;
        if (job->admitted) {
          // Admitted jobs are never dropped: kept at the size of the plan
          // it runs (what its pods hold may be less, a node gone: the
          // reconciler would take that for a resize, and no layout runs
          // it), or at what its pods hold when the status names no plan.
          a.admitted = true;
          a.gpus = job->current_gpus > 0 && inventory.catalog.Same(job->current_gpu_type, type)
                       ? job->current_gpus
                       : held;
          // Owed only while the nodes it may use have that many GPUs: a
          // plan larger than that (nodes gone or excluded) waits for them
          // to return, and the free GPUs serve the others meanwhile.
          if (a.gpus <= usable_gpus.at(job->key)) promised += std::max(0, a.gpus - held);
          shares_[job->key] = {type, a.gpus};
          a.message = "no layout of " + type + " runs this job now: " + curve.status().message();
        } else {
          a.message = "no layout of " + type + " runs this job: " + curve.status().message();
          shares_.erase(job->key);
          reserved_.erase(job->key);
        }
        out[job->key] = a;
        continue;
      }
      capacity += held;  // not free, but the job's to give
      sched::SchedJob s;
      s.id = job->key;
      s.arrival_seconds = static_cast<double>(job->arrival_unix_seconds);
      s.remaining_iterations = static_cast<double>(job->remaining_steps);
      if (job->past_held_projection && job->deadline_unix_seconds && held > 0) {
        // Unseen past its projection (ScheduledJob::past_held_projection):
        // it holds what it holds until its deadline, on time (the policy's
        // need is the work over 1 - headroom, sched/min_share.h), so no one
        // is planned onto those GPUs sooner and it is not taken for late.
        const double seconds = static_cast<double>(*job->deadline_unix_seconds) -
                               options_.deadline_guard_seconds - now;
        const double until_deadline =
            std::floor(curve->IterationsPerSecond(held) * seconds *
                       (1.0 - std::clamp(options_.plan_headroom_fraction, 0.0, 0.5))) -
            1;
        if (until_deadline >= 1 && until_deadline < s.remaining_iterations) {
          s.remaining_iterations = until_deadline;
        }
      }
      if (job->deadline_unix_seconds) {
        s.deadline_seconds = static_cast<double>(*job->deadline_unix_seconds);
      }
      // Between two attempts of a resize or a relaunch (old pods stopped,
      // new ones not yet bound) its pods hold less than its share, or
      // nothing: the share the last pass gave it is still its own. Else a
      // pass in that gap (any arrival triggers one) gives it to another job,
      // and both relaunch again.
      const bool mover = moving.count(job->key) > 0;
      const int share = job->admitted && !mover ? RememberedShare(*job, type) : 0;
      if (const int holds = std::max(held, share); job->progress_unseen && holds > 0) {
        // No growth on progress nobody has seen (ScheduledJob::progress_unseen).
        std::vector<sched::ThroughputPoint> kept;
        for (const sched::ThroughputPoint& point : curve->levels()) {
          if (point.gpus <= holds) kept.push_back(point);
        }
        StatusOr<sched::ThroughputCurve> held_curve =
            sched::ThroughputCurve::Create(std::move(kept), holds, /*drop_past_peak=*/false);
        if (held_curve.ok()) curve = std::move(held_curve);
      }
      // A count between the curve's levels (launched before the scheduler
      // ran) counts as the level below it.
      held_levels.push_back(held > 0 ? curve->FloorLevel(held) : 0);
      s.current_gpus = std::max(held, share) > 0 ? curve->FloorLevel(std::max(held, share)) : 0;
      s.curve = *std::move(curve);
      s.admitted = job->admitted && !mover;
      auto reserved = reserved_.find(job->key);
      if (reserved != reserved_.end() && !mover) s.reservation = reserved->second;
      sched_jobs.push_back(std::move(s));
      scheduled.push_back(job);
    }
    if (sched_jobs.empty()) continue;
    // Promised from the free GPUs only: never from what the others' pods
    // hold, which would stop running jobs for one that is not running.
    capacity -= std::min(promised, free_gpus);
    if (capacity <= 0) {
      // Every GPU of the type is held by pods outside these jobs (other
      // workloads, a deleted TrainJob's pods still stopping) or promised to
      // jobs kept between two attempts: no share to decide now. Admitted
      // jobs wait with none; the others stay undecided until GPUs are free.
      // A pass that failed here lost every type's decisions, for as long as
      // the other workload ran.
      for (const ScheduledJob* job : scheduled) {
        if (!job->admitted) continue;
        if (moving.count(job->key) > 0) {
          wait_to_move(*job, "it moves to the " + type + " pool once GPUs there are free");
          continue;
        }
        Allocation waiting;
        waiting.admitted = true;
        waiting.gpu_type = type;
        out[job->key] = waiting;
        shares_[job->key] = {type, 0};
      }
      continue;
    }
    // Shares are a hint for stickiness, never capacity: when they no longer
    // fit the pool (a node gone), decide from what the pods hold.
    int sized = 0;
    for (const sched::SchedJob& s : sched_jobs) sized += s.current_gpus;
    if (sized > capacity) {
      for (size_t i = 0; i < sched_jobs.size(); ++i) sched_jobs[i].current_gpus = held_levels[i];
    }
    // A mover that this pool would not admit even alone (its deadline has
    // passed, or no share of the pool meets it) is late wherever it runs:
    // it enters as the admitted job it is, and as a late job it only gets
    // what the others leave. Tested like an arrival, it waited at 0 GPUs at
    // every pass, also beside an idle pool.
    for (size_t i = 0; i < sched_jobs.size(); ++i) {
      if (!moving.count(scheduled[i]->key)) continue;
      sched::SchedOptions alone_options = options;
      alone_options.compute_advice = false;
      sched::SchedJob alone = sched_jobs[i];
      alone.current_gpus = 0;
      StatusOr<sched::ScheduleResult> alone_result =
          sched::Schedule({alone}, capacity, now, alone_options);
      if (alone_result.ok() &&
          alone_result->decisions.front().admission != sched::Admission::kAdmitted) {
        sched_jobs[i].admitted = true;
        moving.erase(scheduled[i]->key);
      }
    }
    ASSIGN_OR_RETURN(sched::ScheduleResult result,
                     sched::Schedule(sched_jobs, capacity, now, options));
    if (result.next_wakeup_seconds) {
      // A second early rather than late: a pass gives each job what its plan
      // needs before the next pass, and a reservation made as late as
      // possible has no second to lose.
      const int64_t at = planner::FloorUnixSeconds(*result.next_wakeup_seconds) - 1;
      next_wakeup_ = next_wakeup_ ? std::min(*next_wakeup_, at) : at;
    }
    for (size_t i = 0; i < result.decisions.size(); ++i) {
      const sched::JobDecision& d = result.decisions[i];
      if (d.admission != sched::Admission::kAdmitted && moving.count(d.id) > 0) {
        wait_to_move(*scheduled[i], "it moves to the " + type + " pool once that pool admits it (" +
                                        d.reason + ")");
        continue;
      }
      Allocation a;
      a.admitted = d.admission == sched::Admission::kAdmitted;
      a.gpus = d.gpus;
      a.gpu_type = type;
      if (!a.admitted) {
        sched::Advice advice = d.advice;
        if (advice.cluster_gpus) {
          // The advice is a capacity for these jobs; the cluster also has
          // the GPUs held outside them (other workloads), which a job
          // admitted with that capacity would still not get.
          auto all = all_type_gpus.find(type);
          if (all != all_type_gpus.end())
            *advice.cluster_gpus += std::max(0, all->second - capacity);
        }
        a.message = d.reason + AdviceText(advice, type);
      }
      if (d.planned_finish_seconds) {
        a.planned_finish_unix_seconds = planner::CeilUnixSeconds(*d.planned_finish_seconds);
      }
      if (a.admitted && a.gpus == 0) {
        for (const sched::ReservedSpan& span : d.reservation) {
          if (span.gpus > 0 && span.end_seconds > now) {
            a.next_start_unix_seconds =
                planner::FloorUnixSeconds(std::max(span.start_seconds, now));
            break;
          }
        }
        // No reservation to wait for: say what it waits behind instead of
        // "its reserved GPUs start when GPUs free up".
        if (!a.next_start_unix_seconds && !sched_jobs[i].deadline_seconds) {
          a.message = "best effort (no spec.deadline): it runs on the " + type +
                      " GPUs that jobs with deadlines leave free";
        } else if (!a.next_start_unix_seconds && !d.planned_finish_seconds) {
          a.message =
              "it can no longer finish by its deadline, so the jobs that still can go "
              "first: it runs on the " +
              type + " GPUs they leave free (a later spec.deadline plans it again)";
        }
      }
      reserved_[d.id] = d.reservation;
      shares_[d.id] = {type, a.gpus};
      if (a.admitted || held_levels[i] > 0) {
        rejected_in_.erase(d.id);
      } else {
        rejected_in_[d.id].insert(type);
      }
      out[scheduled[i]->key] = a;
    }
  }
  // Forget jobs that are gone or finished.
  for (auto it = reserved_.begin(); it != reserved_.end();) {
    it = live.count(it->first) ? std::next(it) : reserved_.erase(it);
  }
  for (auto it = curves_.begin(); it != curves_.end();) {
    it = live.count(it->first) ? std::next(it) : curves_.erase(it);
  }
  for (auto it = shares_.begin(); it != shares_.end();) {
    it = live.count(it->first) ? std::next(it) : shares_.erase(it);
  }
  for (auto it = rejected_in_.begin(); it != rejected_in_.end();) {
    it = live.count(it->first) ? std::next(it) : rejected_in_.erase(it);
  }
  std::set<std::string> admitted_now;
  for (const ScheduledJob& job : jobs) {
    auto a = out.find(job.key);
    // An admitted job is never dropped: one that got no allocation this pass
    // (no allowed pool has GPUs for a moment) stays remembered too.
    if (!job.uid.empty() && (job.admitted || (a != out.end() && a->second.admitted))) {
      admitted_now.insert(job.uid);
    }
  }
  admitted_uids_ = std::move(admitted_now);  // jobs gone or finished are forgotten
  return out;
}

std::optional<bool> DeadlineMet(const nlohmann::json& trainjob) {
  const nlohmann::json* status = Member(trainjob, "status");
  const std::string phase = StringMember(status, "phase");
  if (!Terminal(phase)) return std::nullopt;
  StatusOr<int64_t> deadline = planner::ParseRfc3339(StringMember(status, "deadline"));
  if (!deadline.ok()) return std::nullopt;
  if (phase != "Succeeded") return false;
  const std::vector<Condition> conditions = ParseConditions(*status);
  const Condition* done = FindCondition(conditions, kConditionSucceeded);
  if (done == nullptr) return std::nullopt;
  StatusOr<int64_t> finished = planner::ParseRfc3339(done->last_transition_time);
  if (!finished.ok()) return std::nullopt;
  return *finished <= *deadline;
}

}  // namespace pacer::controller
