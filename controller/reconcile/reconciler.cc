#include "reconcile/reconciler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include "core/json_fields.h"
#include "pacer/planner/job_parser.h"
#include "pacer/planner/search.h"
#include "pacer/planner/units.h"
#include "reconcile/job_object.h"
#include "reconcile/worker_env.h"
#include "reconcile/worker_failure.h"

namespace pacer::controller {

using Millis = std::chrono::milliseconds;

#define RETURN_IF_ERROR_RESULT(expr)                                  \
  do {                                                                \
    Status _status = (expr);                                          \
    if (!_status.ok()) return ReconcileResult{_status, std::nullopt}; \
  } while (0)

// One pass's working state: what the previous status carried over, and what
// this pass decided.
struct Reconciler::Pass {
  std::string key;
  nlohmann::json object;
  nlohmann::json previous_status;
  JobRef ref;
  int64_t now = 0;
  std::optional<int64_t> generation;
  planner::JobSpec spec;
  std::optional<int64_t> deadline;

  // Carried over from the previous status.
  PersistedState state;

  // This pass's outcome.
  Phase phase = Phase::kPending;
  std::vector<Condition> conditions;
  std::optional<planner::Evaluation> plan;
  // status.plan carried over while no plan can be made (a refused spec, a
  // finished job): the layout a fix resumes with.
  nlohmann::json carried_plan;
  std::optional<double> measured_step_seconds;
  // Measured on a model shrunk by PACER_SCALE < 1: shown, never kept in the
  // status, where the cluster scheduler would scale the full model's curve
  // by it.
  bool measured_on_shrunk_model = false;
  std::optional<int64_t> projected;
  std::optional<double> slack;
  // The cluster scheduler's word on the job (with ReconcilerDeps::allocations).
  std::optional<Allocation> allocation;
  // Without the cluster scheduler: the inventory a launch is planned
  // against, while fifo_mu_ is held (ReconcileWithoutWorkers).
  const ClusterInventory* fifo_inventory = nullptr;
  bool deleted = false;
  bool keep_status = false;
  // A Succeeded job an edit gave more steps: the scheduler's admission from
  // before it finished does not cover them (it is a new arrival).
  bool reopened = false;

  void Set(const char* type, const char* status, std::string reason, std::string message) {
    Condition c;
    c.type = type;
    c.status = status;
    c.reason = std::move(reason);
    c.message = std::move(message);
    c.observed_generation = generation;
    conditions.push_back(std::move(c));
  }
  // Whether the previous status had condition `type` with `reason` and
  // `status` (events fire on transitions only).
  bool Had(const char* type, const std::string& reason, const char* status = kConditionTrue) const {
    std::vector<Condition> previous = ParseConditions(previous_status);
    const Condition* c = FindCondition(previous, type);
    return c != nullptr && c->status == status && c->reason == reason;
  }
  // Whether the previous status had condition `type` True, for any reason.
  bool HadTrue(const char* type) const {
    std::vector<Condition> previous = ParseConditions(previous_status);
    const Condition* c = FindCondition(previous, type);
    return c != nullptr && c->status == kConditionTrue;
  }
  // The unit the spec's steps are counted in (status.stepUnit).
  PersistedState::StepUnit SpecStepUnit() const {
    return PersistedState::StepUnit{spec.training.global_batch_size, spec.model.sequence_length};
  }
  // A Succeeded job an edit does not reopen stays as it finished: phase,
  // conditions (but InvalidSpec, and Failed when `drop_failed`), plan, pace.
  void KeepSucceeded(bool drop_failed) {
    phase = Phase::kSucceeded;
    for (const Condition& c : ParseConditions(previous_status)) {
      if (c.type == kConditionInvalidSpec || (drop_failed && c.type == kConditionFailed)) continue;
      conditions.push_back(c);
    }
    measured_step_seconds = state.measured_step_seconds;
    if (previous_status.contains("plan")) carried_plan = previous_status["plan"];
  }
};

namespace {

bool IsTerminal(Phase phase) {
  return phase == Phase::kSucceeded || phase == Phase::kFailed || phase == Phase::kInfeasible;
}

std::optional<Phase> PhaseFromName(const std::string& name) {
  for (Phase p : {Phase::kPending, Phase::kPlanning, Phase::kRunning, Phase::kReplanning,
                  Phase::kSucceeded, Phase::kFailed, Phase::kInfeasible}) {
    if (name == PhaseName(p)) return p;
  }
  return std::nullopt;
}

Millis Seconds(double seconds) {
  return Millis(static_cast<int64_t>(std::max(0.0, seconds) * 1000.0));
}

std::string GpuSummary(const planner::Evaluation& plan) { return plan.layout.ToString(); }

// Three significant digits: a measured 1e300 is quoted as such, not in full.
std::string ShortNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", value);
  return text;
}

// Every GPU of `gpu_type` on the inventory's nodes, busy or free.
int GpusOfType(const planner::Inventory& inventory, const std::string& gpu_type) {
  const planner::GpuType* type = inventory.catalog.Find(gpu_type);
  if (type == nullptr) return 0;
  const std::map<std::string, int> type_gpus = planner::GpusByType(inventory);
  const auto it = type_gpus.find(type->name);
  return it == type_gpus.end() ? 0 : it->second;
}

}  // namespace

Reconciler::Reconciler(ReconcilerDeps deps, ReconcilerOptions options)
    : deps_(deps), options_(std::move(options)) {}

std::optional<JobView> Reconciler::View(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = views_.find(key);
  if (it == views_.end()) return std::nullopt;
  return it->second;
}

ReconcileResult Reconciler::Reconcile(const std::string& key) {
  Pass pass;
  pass.key = key;
  pass.now = deps_.clock->WallUnixSeconds();
  StatusOr<nlohmann::json> object = deps_.store->Get(key);
  if (!object.ok()) {
    if (object.status().code() != StatusCode::kNotFound) return {object.status(), std::nullopt};
    // Gone (its finalizer was removed): no worker of it may keep running.
    const size_t slash = key.find('/');
    pass.ref.namespace_name = key.substr(0, slash);
    pass.ref.name = slash == std::string::npos ? key : key.substr(slash + 1);
    Status stopped = deps_.launcher->Stop(pass.ref, StopMode::kRemove);
    Forget(key);
    return {stopped, std::nullopt};
  }
  pass.object = std::move(*object);
  pass.ref = JobRefOf(pass.object);
  pass.previous_status = pass.object.value("status", nlohmann::json::object());
  if (!pass.previous_status.is_object()) pass.previous_status = nlohmann::json::object();
  pass.state = ReadPersistedState(pass.previous_status);
  const nlohmann::json& metadata = pass.object["metadata"];
  if (metadata.contains("generation") && metadata["generation"].is_number_integer()) {
    pass.generation = metadata["generation"].get<int64_t>();
  }

  if (metadata.contains("deletionTimestamp") && !metadata["deletionTimestamp"].is_null()) {
    return ReconcileDeleted(pass);
  }
  if (options_.use_finalizer && !HasFinalizer(pass.object, kFinalizer)) {
    StatusOr<nlohmann::json> updated = deps_.store->SetFinalizer(pass.object, kFinalizer, true);
    if (!updated.ok()) return {updated.status(), std::nullopt};
    pass.object = std::move(*updated);
  }

  StatusOr<planner::JobSpec> spec = ParseJobObject(pass.object);
  if (!spec.ok()) return ReconcileInvalidSpec(pass, "InvalidSpec", spec.status().message());
  pass.spec = std::move(*spec);
  pass.spec.namespace_name = pass.ref.namespace_name;
  pass.spec.name = pass.ref.name;
  // Raised by out-of-memory failures; every plan of the job reserves it.
  pass.spec.memory_margin_fraction = pass.state.failures.memory_margin_fraction;
  pass.deadline = planner::EffectiveDeadline(pass.spec, pass.now);
  // Whether the previous status was written for this generation of the spec.
  // Spelled out: comparing two std::optional<int64_t> here made g++ 12 -O2
  // warn -Wmaybe-uninitialized (an error under -Werror).
  const nlohmann::json* observed_generation = Member(pass.previous_status, "observedGeneration");
  const bool observed_known =
      observed_generation != nullptr && observed_generation->is_number_integer();
  const bool spec_observed =
      observed_known ? pass.generation.has_value() &&
                           observed_generation->get<int64_t>() == pass.generation.value()
                     : !pass.generation.has_value();
  const int64_t steps_recorded = pass.state.steps_completed;  // before the clamp below
  if (!pass.state.step_unit && pass.state.attempt > 0 && spec_observed) {
    // A status of a controller before stepUnit: its steps were counted at
    // the spec it last observed, which is this one.
    pass.state.step_unit = pass.SpecStepUnit();
  }
  // Only for an edit: a spec already observed was checked then (a refusal
  // is terminal until the next edit), and a later parser default must not
  // refuse a job nobody edited.
  std::optional<std::string> changed;
  if (!spec_observed) changed = StepUnitChange(pass.state, pass.spec);
  if (changed) {
    pass.state.total_steps = std::max(pass.state.total_steps, steps_recorded);
    return ReconcileInvalidSpec(
        pass, "StepUnitChanged",
        StepUnitChangedMessage(*changed, steps_recorded) +
            " Set it back (the job resumes from its checkpoint), or create a new TrainJob for the "
            "new batch");
  }
  pass.state.total_steps = TotalSteps(pass.spec);
  // A status written for a larger spec (its data shrunk since, or a copied
  // `kubectl get -o yaml`) can say more steps are done than there are now.
  pass.state.steps_completed = std::min(pass.state.steps_completed, pass.state.total_steps);

  // A finished job stays finished until its spec changes.
  const std::optional<Phase> previous_phase =
      PhaseFromName(StringMember(&pass.previous_status, "phase"));
  if (previous_phase && IsTerminal(*previous_phase) && spec_observed) {
    if (*previous_phase == Phase::kFailed && pass.state.failure_counted_attempt > 0) {
      // A failure that failed the job is written before its pods are
      // removed; a removal that failed then is retried here.
      StatusOr<std::optional<WorkerGroup>> left = deps_.launcher->Observe(pass.ref);
      if (left.ok() && left->has_value() &&
          (*left)->attempt == pass.state.failure_counted_attempt) {
        Status removed = deps_.launcher->Stop(pass.ref, StopMode::kRemove);
        if (!removed.ok()) return {removed, std::nullopt};
      }
    }
    pass.phase = *previous_phase;
    pass.conditions = ParseConditions(pass.previous_status);
    pass.measured_step_seconds = pass.state.measured_step_seconds;
    pass.keep_status = true;  // nothing changed: no write
    return Finish(pass, std::nullopt);
  }
  if (previous_phase == Phase::kSucceeded && pass.state.total_steps <= steps_recorded) {
    // Edited after it finished, with nothing left to train (fewer tokens, or
    // a field the workers never saw): finished work stays finished, with or
    // without its pods, and what it trained stays its total.
    pass.KeepSucceeded(/*drop_failed=*/true);
    pass.state.total_steps = pass.state.steps_completed = steps_recorded;
    return Finish(pass, std::nullopt);  // written: observedGeneration moves on
  }

  pass.reopened = previous_phase == Phase::kSucceeded;  // with steps added (above)
  if (deps_.allocations != nullptr && !pass.reopened) {
    pass.allocation = deps_.allocations->Get(key);
  }
  StatusOr<std::optional<WorkerGroup>> group = deps_.launcher->Observe(pass.ref);
  if (!group.ok()) return {group.status(), std::nullopt};
  RecallLostStopDecision(pass, *group);
  if (!group->has_value()) return ReconcileWithoutWorkers(pass);
  return ReconcileWithWorkers(pass, **group);
}

ReconcileResult Reconciler::ReconcileInvalidSpec(Pass& pass, const std::string& reason,
                                                 const std::string& message) {
  if (!pass.Had(kConditionInvalidSpec, reason)) {
    deps_.store->RecordEvent(pass.object, "Warning", reason, message);
  }
  if (PhaseFromName(StringMember(&pass.previous_status, "phase")) == Phase::kSucceeded) {
    // Finished work is not undone by an edit; its workers have exited.
    pass.KeepSucceeded(/*drop_failed=*/false);
    pass.Set(kConditionInvalidSpec, kConditionTrue, reason, message);
    return Finish(pass, std::nullopt);
  }
  // What the job has done stays in the status (progress, plan, pace), so
  // that the fix resumes from it instead of planning the whole job again.
  pass.measured_step_seconds = pass.state.measured_step_seconds;
  if (pass.previous_status.contains("plan")) pass.carried_plan = pass.previous_status["plan"];
  // Terminal until the user edits the spec (the edit bumps
  // metadata.generation and wakes us).
  pass.phase = Phase::kFailed;
  pass.Set(kConditionInvalidSpec, kConditionTrue, reason, message);
  pass.Set(kConditionFailed, kConditionTrue, reason, message);
  // Running workers stop at a checkpoint, not killed: removed, they lost
  // every step since the last periodic checkpoint to a typo in an edit.
  // Fixing the spec relaunches the job from that checkpoint; deleting it
  // removes them.
  RETURN_IF_ERROR_RESULT(deps_.launcher->Stop(pass.ref, StopMode::kGraceful));
  return Finish(pass, std::nullopt);
}

ReconcileResult Reconciler::ReconcileDeleted(Pass& pass) {
  pass.deleted = true;
  Status stopped = deps_.launcher->Stop(pass.ref, StopMode::kRemove);
  if (!stopped.ok()) return {stopped, std::nullopt};
  StatusOr<std::optional<WorkerGroup>> group = deps_.launcher->Observe(pass.ref);
  if (!group.ok()) return {group.status(), std::nullopt};
  if (group->has_value()) return {Status::Ok(), options_.transition_poll};  // still going
  if (HasFinalizer(pass.object, kFinalizer)) {
    StatusOr<nlohmann::json> updated = deps_.store->SetFinalizer(pass.object, kFinalizer, false);
    if (!updated.ok() && updated.status().code() != StatusCode::kNotFound) {
      return {updated.status(), std::nullopt};
    }
  }
  Forget(pass.key);
  return {Status::Ok(), std::nullopt};
}

void Reconciler::Forget(const std::string& key) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    views_.erase(key);
    refusals_.erase(key);
    partial_since_.erase(key);
    unscheduled_since_.erase(key);
    graceful_stops_.erase(key);
    stopping_since_.erase(key);
  }
  std::lock_guard<std::mutex> lock(fifo_mu_);
  fifo_launches_.erase(key);
}

void Reconciler::KeepMeasuredPace(Pass& pass) {
  // Written when the attempt's workers stop, not every pass: the plan in
  // force is evaluated with the status' calibration, so a ratio written
  // while it runs would move its own prediction.
  if (!pass.plan || !pass.state.measured_step_seconds) return;
  pass.state.calibration.by_gpu_type[pass.plan->layout.gpu_type].step_time_ratio =
      StepTimeRatio(*pass.state.measured_step_seconds, *pass.plan);
}

Status Reconciler::StopToRelaunch(const Pass& pass, int64_t attempt) {
  {
    // Before the deletions, as controllers set expectations: a stop that
    // fails half-way has deleted some pods too.
    std::lock_guard<std::mutex> lock(mu_);
    graceful_stops_[pass.key] =
        GracefulStop{attempt, pass.state.replans, pass.state.last_replan_unix_seconds,
                     pass.state.calibration, pass.state.next_layout};
  }
  Status stopped = deps_.launcher->Stop(pass.ref, StopMode::kGraceful);
  if (!stopped.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = graceful_stops_.find(pass.key);
    if (it != graceful_stops_.end() && it->second.attempt == attempt) it->second.stop_failed = true;
  }
  return stopped;
}

void Reconciler::RecallLostStopDecision(Pass& pass, const std::optional<WorkerGroup>& group) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = graceful_stops_.find(pass.key);
  if (it == graceful_stops_.end()) return;
  const GracefulStop& stop = it->second;
  if (stop.stop_failed && group && group->attempt == stop.attempt && !group->stopping) {
    // The stop failed and its workers run on: it did not happen. Kept, it
    // would be replayed by a later failure or drain of this attempt (a
    // re-plan counted that never ran, its nextPlan launched, a drain
    // reported as the controller's own stop). This pass decides afresh.
    graceful_stops_.erase(it);
    return;
  }
  // The status still says the stopped attempt and counts fewer re-plans
  // than the stop: its write was lost. (A count, not lastReplanTime: a
  // clock stepped back would hide it.)
  if (stop.attempt != pass.state.attempt || pass.state.replans >= stop.replans) return;
  // Only once the stop took effect (that attempt's pods stopping or gone,
  // or a later attempt launched): a stop that failed before deleting
  // anything left the workers running, and the next pass decides again (a
  // decision replayed then would hold the re-plan back by its minimum
  // interval and count it twice).
  const bool took_effect = !group || group->attempt > stop.attempt ||
                           (group->attempt == stop.attempt && group->stopping);
  if (!took_effect) return;
  pass.state.replans = stop.replans;
  pass.state.last_replan_unix_seconds = stop.last_replan_unix_seconds;
  pass.state.calibration = stop.calibration;
  if (stop.next_layout) pass.state.next_layout = stop.next_layout;
}

ReconcileResult Reconciler::ReconcileWithoutWorkers(Pass& pass) {
  if (const int terminating = deps_.launcher->TerminatingWorkers(pass.ref); terminating > 0) {
    // Planning now would size the job to the GPUs free this instant, without
    // the ones its own old pods still hold (it would relaunch small and stay
    // small), and old and new workers could both write the checkpoint volume.
    const std::string reason = "PreviousWorkersTerminating";
    const std::string message = std::to_string(terminating) +
                                " worker pod(s) of the previous attempt are still terminating; "
                                "the next attempt is planned once they are gone";
    pass.phase = Phase::kPending;
    if (!pass.Had(kConditionPlanned, reason, kConditionFalse)) {
      deps_.store->RecordEvent(pass.object, "Normal", reason, message);
    }
    pass.Set(kConditionPlanned, kConditionFalse, reason, message);
    return Finish(pass, options_.transition_poll);  // their deletion events wake it sooner
  }
  // Without the cluster scheduler, one launch at a time is planned against
  // the free GPUs (fifo_mu_): held from this read to the launch's record.
  std::unique_lock<std::mutex> fifo_lock(fifo_mu_, std::defer_lock);
  if (deps_.allocations == nullptr) fifo_lock.lock();
  StatusOr<ClusterInventory> inventory = deps_.inventory->Current();
  if (!inventory.ok()) return {inventory.status(), std::nullopt};
  if (fifo_lock.owns_lock()) pass.fifo_inventory = &*inventory;
  // Nodes where the job's collectives kept failing are not planned on.
  *inventory = WithoutNodes(*inventory, pass.state.failures.excluded_nodes);

  const int64_t remaining =
      std::max<int64_t>(1, pass.state.total_steps - pass.state.steps_completed);
  planner::JobSpec job = RemainingJob(pass.spec, remaining, pass.deadline.value_or(0));
  job.deadline_unix_seconds = pass.deadline;
  planner::PlanOptions plan_options;
  plan_options.now_unix_seconds = pass.now;
  plan_options.alternatives = 0;
  plan_options.constants = options_.replan.constants;
  // A job that has run finishes late on the fastest plan (below) rather
  // than fail: a past deadline failed a restart after it as InvalidSpec.
  plan_options.deadline_may_have_passed = HasRun(pass);
  const planner::Calibration calibration = pass.state.calibration;

  if (pass.state.next_layout) {
    // A re-plan chose this layout before stopping the workers: launch exactly
    // it, not whatever a fresh search prefers now. Only what makes it
    // unlaunchable (the GPUs taken meanwhile, a spec edit) plans afresh.
    const planner::Layout chosen = *pass.state.next_layout;
    StatusOr<planner::Evaluation> still =
        RecheckLayout(job, chosen, inventory->inventory, calibration, options_.replan.constants);
    if (still.ok() && deps_.allocations == nullptr) return LaunchPlan(pass, *still);
    pass.state.next_layout.reset();
    if (!still.ok()) {
      deps_.store->RecordEvent(pass.object, "Warning", "ReplanChanged",
                               "the re-plan's layout (" + chosen.ToString() +
                                   ") cannot be launched: " + still.status().message() +
                                   "; planning again");
    }
  }
  StatusOr<planner::PlanResult> result =
      planner::Plan(job, inventory->inventory, calibration, plan_options);
  // The plan if every GPU of the cluster were free (planned once, when
  // asked): tells "wait for GPUs" from "impossible", and says why.
  std::optional<StatusOr<planner::PlanResult>> idle_plan;
  auto plan_on_whole_cluster = [&]() -> const StatusOr<planner::PlanResult>& {
    if (!idle_plan) {
      planner::Inventory idle = inventory->inventory;
      for (planner::NodePool& pool : idle.node_pools) pool.MarkAllFree();
      idle_plan = planner::Plan(job, idle, calibration, plan_options);
    }
    return *idle_plan;
  };
  auto feasible_on_whole_cluster = [&]() {
    const StatusOr<planner::PlanResult>& r = plan_on_whole_cluster();
    return r.ok() && r->feasible && r->plan.has_value();
  };
  auto deadline_unreachable = [&](const std::string& message) {
    pass.phase = Phase::kInfeasible;
    if (!pass.Had(kConditionInfeasible, "DeadlineUnreachable")) {
      deps_.store->RecordEvent(pass.object, "Warning", "DeadlineUnreachable", message);
    }
    pass.Set(kConditionInfeasible, kConditionTrue, "DeadlineUnreachable", message);
  };

  if (!result.ok()) {
    const Status error = result.status();
    if (error.code() == StatusCode::kInvalidArgument) {
      pass.phase = Phase::kFailed;
      if (!pass.Had(kConditionInvalidSpec, "InvalidSpec")) {
        deps_.store->RecordEvent(pass.object, "Warning", "InvalidSpec", error.message());
      }
      pass.Set(kConditionInvalidSpec, kConditionTrue, "InvalidSpec", error.message());
      pass.Set(kConditionFailed, kConditionTrue, "InvalidSpec", error.message());
      return Finish(pass, std::nullopt);
    }
  }
  // No node of an allowed GPU type (yet): wait for one rather than give up.
  // Checked after the planner's validation: a GPU type no catalog knows, or
  // a deadline already past, is an error in the spec, not a reason to wait.
  const bool has_allowed_pool =
      std::any_of(inventory->inventory.node_pools.begin(), inventory->inventory.node_pools.end(),
                  [&](const planner::NodePool& pool) {
                    return planner::AllowsGpuType(pass.spec.resources, inventory->inventory.catalog,
                                                  pool.gpu_type);
                  });
  if (!has_allowed_pool) {
    std::string types;
    for (const std::string& t : pass.spec.resources.gpu_types)
      types += (types.empty() ? "" : ", ") + t;
    return ReconcileWaiting(
        pass, "NoMatchingNodes",
        "no ready node has " + (types.empty() ? std::string("GPUs") : "a GPU of type " + types) +
            " (nodes are matched by their nvidia.com/gpu.product label); waiting for one");
  }

  if (!result.ok() && result.status().code() != StatusCode::kFailedPrecondition) {
    return {result.status(), std::nullopt};
  }
  // Under the cluster scheduler the job waits for its allocation, unless it
  // cannot meet its deadline even with the whole cluster (then it is
  // Infeasible below, as without a scheduler). A job that has run before
  // stays with the scheduler: admitted jobs are never dropped.
  if (deps_.allocations != nullptr &&
      (pass.state.attempt > 0 || (result.ok() && result->feasible && result->plan) ||
       feasible_on_whole_cluster())) {
    return ReconcileScheduled(pass, *inventory, job);
  }

  if (!result.ok()) {
    const Status error = result.status();
    if (feasible_on_whole_cluster()) {
      return ReconcileWaiting(pass, "InsufficientGpus", error.message());
    }
    // A job that has run on more GPUs of its type than the cluster has now
    // (or whose last layout is not known: the status drops a plan that no
    // longer fits): a node it needs is gone (drained, deleted, NotReady,
    // excluded). Infeasible would be final until the spec changes, and the
    // node's return would never wake it. With its GPUs all there, no layout
    // fits for another reason (a spec edit, a raised memory margin) that no
    // node's return changes: Infeasible, as before.
    if (HasRun(pass) &&
        (!pass.state.layout || GpusOfType(inventory->inventory, pass.state.layout->gpu_type) <
                                   pass.state.layout->gpus())) {
      return ReconcileWaiting(pass, "InsufficientGpus",
                              error.message() +
                                  "; the job has run on this cluster before and waits for "
                                  "nodes to return (or for a spec change)");
    }
    // Busy GPUs are not the reason when even the idle cluster misses the
    // deadline: say that, with what would meet it.
    const StatusOr<planner::PlanResult>& idle = plan_on_whole_cluster();
    if (idle.ok() && idle->advice) {
      deadline_unreachable("even with every GPU of the cluster free: " + idle->advice->summary);
      if (idle->plan) pass.plan = *idle->plan;
      return Finish(pass, std::nullopt);
    }
    pass.phase = Phase::kInfeasible;
    if (!pass.Had(kConditionInfeasible, "NoLayoutFits")) {
      deps_.store->RecordEvent(pass.object, "Warning", "NoLayoutFits", error.message());
    }
    pass.Set(kConditionInfeasible, kConditionTrue, "NoLayoutFits", error.message());
    return Finish(pass, std::nullopt);
  }

  if (!result->feasible || !result->plan) {
    if (feasible_on_whole_cluster()) {
      return ReconcileWaiting(
          pass, "InsufficientGpus",
          "the deadline can be met on this cluster, but not with the GPUs free now; "
          "waiting for GPUs to free up");
    }
    std::string message =
        result->advice ? result->advice->summary : std::string("no plan meets the deadline");
    if (HasRun(pass) && result->plan) {
      // The job has run (a restart or a re-plan): stopping now would only
      // lose more. Run the fastest plan and say that it will be late.
      MarkRunningLate(pass, message);
      return LaunchPlan(pass, *result->plan);
    }
    deadline_unreachable(message);
    if (result->plan) pass.plan = *result->plan;
    return Finish(pass, std::nullopt);
  }

  // Aim at the re-plan policy's at-risk threshold, as a re-plan does: the
  // cheapest plan for the deadline itself (8.94 of 9 days) was at risk on its
  // own prediction and relaunched on twice the GPUs at its first pass. When
  // nothing keeps the slack, the plan that meets the deadline runs.
  if (pass.deadline) {
    const double threshold =
        AtRiskThreshold(static_cast<double>(*pass.deadline), static_cast<double>(pass.now),
                        pass.spec.replan.slack_fraction);
    const auto keeping_deadline = static_cast<int64_t>(std::floor(threshold));
    if (keeping_deadline > pass.now &&
        static_cast<double>(pass.now) + result->plan->total.total_seconds > threshold) {
      planner::JobSpec keeping = job;
      keeping.deadline_unix_seconds = keeping_deadline;
      const StatusOr<planner::PlanResult> kept =
          planner::Plan(keeping, inventory->inventory, calibration, plan_options);
      if (kept.ok() && kept->feasible && kept->plan) return LaunchPlan(pass, *kept->plan);
    }
  }
  return LaunchPlan(pass, *result->plan);
}

std::vector<std::string> Reconciler::WakeRefusedLaunches() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> keys;
  for (auto& [key, refusals] : refusals_) {
    refusals.retry_at = Clock::SteadyTime();  // due now; the count keeps growing if refused again
    keys.push_back(key);
  }
  return keys;
}

ReconcileResult Reconciler::LaunchRefused(Pass& pass, const std::string& message,
                                          std::chrono::milliseconds retry_in) {
  pass.phase = Phase::kPending;
  pass.Set(kConditionPlanned, kConditionFalse, "LaunchRefused", message);
  return Finish(pass, std::max(retry_in, Millis(1)));
}

std::optional<std::string> Reconciler::OtherLaunchOnItsWay(const Pass& pass,
                                                           const ClusterInventory& inventory,
                                                           const std::string& planned_gpu_type) {
  const Clock::SteadyTime now = deps_.clock->Now();
  auto shown_gpus = [&](const std::string& key) {
    int gpus = 0;
    for (const auto* held : {&inventory.trainjob_gpus, &inventory.unscheduled_trainjob_gpus}) {
      auto it = held->find(key);
      if (it == held->end()) continue;
      for (const auto& [type, n] : it->second) gpus += n;
    }
    return gpus;
  };
  auto competes = [&](const std::string& gpu_type) {
    // A type no catalog knows: its pods may land on any node.
    return gpu_type.empty() || gpu_type == planned_gpu_type;  // both catalog spellings
  };
  auto what = [](const std::string& key, int gpus, const std::string& gpu_type) {
    return "the " + std::to_string(gpus) + " " + (gpu_type.empty() ? "" : gpu_type + " ") +
           "GPUs of TrainJob " + key + "'s worker pods";
  };
  std::optional<std::string> blocker;
  for (auto it = fifo_launches_.begin(); it != fifo_launches_.end();) {
    const bool shown = shown_gpus(it->first) >= it->second.gpus;
    // A launch the cache never shows in full (its pods removed meanwhile)
    // stops counting after the gang's own bound.
    const bool stale = now - it->second.launched_at >= options_.gang_completion_timeout;
    if (it->first == pass.key || shown || stale) {
      it = fifo_launches_.erase(it);
      continue;
    }
    if (!blocker && competes(it->second.gpu_type)) {
      blocker = what(it->first, it->second.gpus, it->second.gpu_type) + " were just created";
    }
    ++it;
  }
  if (!blocker) {
    for (const auto& [key, by_type] : inventory.unscheduled_trainjob_gpus) {
      if (key == pass.key) continue;
      // Unscheduled for longer than a gang of this controller's may stay
      // (its gang is removed by then): pods no launch of ours is waiting for
      // (another controller's, a stray labelled pod) hold no one back.
      auto since = inventory.unscheduled_trainjob_since.find(key);
      if (options_.gang_scheduling_timeout.count() > 0 &&
          since != inventory.unscheduled_trainjob_since.end() &&
          pass.now - since->second >
              std::chrono::duration_cast<std::chrono::seconds>(options_.gang_scheduling_timeout)
                  .count()) {
        continue;
      }
      for (const auto& [type, gpus] : by_type) {
        if (!blocker && competes(type)) {
          blocker = what(key, gpus, type) + " are not scheduled onto nodes yet";
        }
      }
    }
  }
  if (!blocker) return std::nullopt;
  return *blocker +
         "; with --scheduling=fifo a job is planned against the free GPUs only once earlier "
         "launches hold theirs, so that two jobs are never placed on the same GPUs";
}

ReconcileResult Reconciler::LaunchPlan(Pass& pass, const planner::Evaluation& plan) {
  if (pass.fifo_inventory != nullptr) {
    if (std::optional<std::string> waiting =
            OtherLaunchOnItsWay(pass, *pass.fifo_inventory, plan.layout.gpu_type)) {
      return ReconcileWaiting(pass, "WaitingForOtherLaunch", *waiting);
    }
  }
  const Clock::SteadyTime now = deps_.clock->Now();
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = refusals_.find(pass.key);
    if (it != refusals_.end() && it->second.generation != pass.generation) {
      it->second.retry_at = now;  // the spec changed since: ask again now (the count stays)
    }
    if (it != refusals_.end() && now < it->second.retry_at) {
      // Refused lately: a pod event is no reason to ask again before the backoff ends.
      const std::string message = it->second.message;
      const auto wait = std::chrono::duration_cast<Millis>(it->second.retry_at - now);
      lock.unlock();
      return LaunchRefused(pass, message, wait);
    }
  }
  LaunchSpec launch;
  launch.job = pass.ref;
  launch.spec = pass.spec;
  launch.plan = plan;
  launch.attempt = pass.state.attempt + 1;
  launch.total_steps = pass.state.total_steps;
  launch.checkpoint_interval_steps = CheckpointIntervalSteps(launch.plan);
  launch.plan_unix_seconds = pass.now;
  launch.excluded_nodes = pass.state.failures.excluded_nodes;
  launch.spec_hash = WorkerSpecHash(pass.spec);
  Status launched = deps_.launcher->Launch(launch);
  if (launched.code() == StatusCode::kPermissionDenied ||
      launched.code() == StatusCode::kInvalidArgument ||
      launched.code() == StatusCode::kFailedPrecondition) {
    // 403: a ResourceQuota, an admission webhook or a policy said no; 400 or
    // 422: the server finds the objects invalid (a TrainJob value the pod API
    // does not take, or a controller bug); FailedPrecondition: something in
    // the cluster is in the way (another object holds the workers' Service
    // name). Asking again at once gets the same answer, and dropping the job
    // would leave it without a word: say why on the TrainJob and back off.
    std::unique_lock<std::mutex> lock(mu_);
    Refusals& r = refusals_[pass.key];
    ++r.count;
    Millis delay = options_.launch_refusal_base_delay;
    for (int i = 1; i < r.count && delay < options_.launch_refusal_max_delay; ++i) delay *= 2;
    delay = std::min(delay, options_.launch_refusal_max_delay);
    r.retry_at = now + delay;
    r.attempt = launch.attempt;
    r.generation = pass.generation;
    switch (launched.code()) {
      case StatusCode::kPermissionDenied:
        r.message = "the API server refused the workers: " + launched.message();
        break;
      case StatusCode::kInvalidArgument:
        r.message =
            "the API server found the workers invalid (a TrainJob value the pod API does not "
            "accept, or a controller bug): " +
            launched.message();
        break;
      default:
        r.message = "the workers cannot be launched yet: " + launched.message();
        break;
    }
    const std::string message = r.message;
    const int count = r.count;
    lock.unlock();
    deps_.store->RecordEvent(pass.object, "Warning", "LaunchRefused",
                             message + " (refusal " + std::to_string(count) + "; next try in " +
                                 std::to_string(delay.count() / 1000) + " s)");
    return LaunchRefused(pass, message, delay);
  }
  if (!launched.ok()) return {launched, std::nullopt};
  {
    // A new gang: the timers of the last one's pods start again.
    std::lock_guard<std::mutex> lock(mu_);
    refusals_.erase(pass.key);
    partial_since_.erase(pass.key);
    unscheduled_since_.erase(pass.key);
  }
  if (pass.fifo_inventory != nullptr) {  // fifo_mu_ is held
    fifo_launches_[pass.key] = LaunchOnItsWay{plan.layout.gpu_type, plan.layout.gpus(), now};
  }
  pass.state.attempt = launch.attempt;
  pass.state.next_layout.reset();
  pass.state.plan_unix_seconds = pass.now;
  pass.state.step_unit = pass.SpecStepUnit();
  pass.plan = launch.plan;
  pass.phase = Phase::kPlanning;
  const std::string message = "launched " + GpuSummary(launch.plan) + ", predicted " +
                              planner::FormatDurationHuman(launch.plan.step.step_seconds) +
                              " per step (attempt " + std::to_string(launch.attempt) + ")";
  deps_.store->RecordEvent(pass.object, "Normal", "Launched", message);
  pass.Set(kConditionPlanned, kConditionTrue, "Planned", message);
  pass.projected = planner::CompletionUnixSeconds(pass.now, launch.plan.total.total_seconds);
  if (pass.deadline) pass.slack = static_cast<double>(*pass.deadline - *pass.projected);
  return Finish(pass, options_.transition_poll);
}

void Reconciler::NoteAdmission(Pass& pass) {
  if (!pass.allocation) {
    // Reopened after it succeeded: the admission was for the finished work,
    // and the scheduler tests the added steps as a new arrival.
    if (pass.reopened) return;
    // Not in the scheduler's last pass yet: keep what the status said.
    const std::vector<Condition> previous = ParseConditions(pass.previous_status);
    if (const Condition* c = FindCondition(previous, kConditionAdmitted)) {
      pass.conditions.push_back(*c);
    }
    return;
  }
  const Allocation& a = *pass.allocation;
  if (!a.admitted) {
    if (!pass.Had(kConditionAdmitted, "Rejected", kConditionFalse)) {
      deps_.store->RecordEvent(pass.object, "Warning", "Rejected", a.message);
    }
    pass.Set(kConditionAdmitted, kConditionFalse, "Rejected", a.message);
    return;
  }
  std::string message =
      a.gpu_type.empty() ? std::string("admitted") : "admitted to the " + a.gpu_type + " pool";
  if (a.planned_finish_unix_seconds) {
    message += "; the shared schedule finishes it by " +
               planner::FormatRfc3339(*a.planned_finish_unix_seconds);
  }
  if (!pass.Had(kConditionAdmitted, "Admitted")) {
    deps_.store->RecordEvent(pass.object, "Normal", "Admitted", message);
  }
  pass.Set(kConditionAdmitted, kConditionTrue, "Admitted", message);
}

ReconcileResult Reconciler::ReconcileScheduled(Pass& pass, const ClusterInventory& inventory,
                                               const planner::JobSpec& remaining_job) {
  NoteAdmission(pass);
  if (!pass.allocation) {
    return ReconcileWaiting(pass, "AwaitingSchedule",
                            "waiting for the cluster scheduler to admit or reject the job");
  }
  const Allocation& a = *pass.allocation;
  if (!a.admitted) {
    // Not launched: launching would make an admitted job miss its deadline.
    // Every scheduler pass tests it again (GPUs free up, the spec changes).
    pass.phase = Phase::kPending;
    pass.Set(kConditionPlanned, kConditionFalse, "Rejected", a.message);
    return Finish(pass, options_.pending_retry);
  }
  if (a.gpus == 0 && !a.message.empty()) {
    // Admitted, but no node it may use is left, or no layout of its pool
    // runs it now: the scheduler says why (not "its GPUs start later").
    return ReconcileWaiting(pass, "WaitingForReservedGpus", "admitted; " + a.message);
  }
  if (a.gpus == 0) {
    std::string message = "admitted; its reserved " + a.gpu_type + " GPUs start ";
    message += a.next_start_unix_seconds
                   ? "at " + planner::FormatRfc3339(*a.next_start_unix_seconds)
                   : std::string("when GPUs free up");
    return ReconcileWaiting(pass, "WaitingForReservedGpus", message);
  }
  // Exactly the allocation: the scheduler's curve came from the same search
  // with exactly this many GPUs, so the shared plan holds.
  planner::JobSpec pinned = remaining_job;
  pinned.resources.gpu_types = {a.gpu_type};
  planner::PlanOptions options;
  options.now_unix_seconds = pass.now;
  options.alternatives = 0;
  options.exact_gpus = a.gpus;
  options.constants = options_.replan.constants;
  options.deadline_may_have_passed = HasRun(pass);
  StatusOr<planner::PlanResult> result =
      planner::Plan(pinned, inventory.inventory, pass.state.calibration, options);
  if (result.ok() && result->plan && !result->feasible && result->advice && pass.deadline &&
      *pass.deadline <= pass.now) {
    // Past its deadline (a restart after it): it runs on late, and says so,
    // as it does without the cluster scheduler.
    MarkRunningLate(pass, result->advice->summary);
  }
  if (!result.ok() || !result->plan) {
    return ReconcileWaiting(
        pass, "WaitingForAllocatedGpus",
        "admitted to " + std::to_string(a.gpus) + " " + a.gpu_type +
            " GPUs; waiting for them to be free (jobs giving them up stop at a checkpoint "
            "first, and multi-node layouts need whole free nodes)");
  }
  return LaunchPlan(pass, *result->plan);
}

std::optional<ReconcileResult> Reconciler::RemoveUnschedulableGang(Pass& pass,
                                                                   const WorkerGroup& group) {
  const int unscheduled = static_cast<int>(
      std::count_if(group.workers.begin(), group.workers.end(), [](const WorkerState& w) {
        return w.phase == WorkerPhase::kPending && w.node_name.empty();
      }));
  const Clock::SteadyTime now = deps_.clock->Now();
  Clock::SteadyTime since;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (unscheduled == 0 || options_.gang_scheduling_timeout.count() <= 0) {
      unscheduled_since_.erase(pass.key);
      return std::nullopt;
    }
    since = unscheduled_since_.try_emplace(pass.key, now).first->second;
  }
  // Not yet: the pass goes on (phase Planning, looked at again every
  // transition_poll, well within the bound).
  if (now - since < options_.gang_scheduling_timeout) return std::nullopt;
  Status removed = deps_.launcher->Stop(pass.ref, StopMode::kRemove);
  if (!removed.ok()) return ReconcileResult{removed, std::nullopt};
  {
    std::lock_guard<std::mutex> lock(mu_);
    unscheduled_since_.erase(pass.key);
  }
  deps_.store->RecordEvent(
      pass.object, "Warning", "GangUnschedulable",
      std::to_string(unscheduled) + " of " + std::to_string(group.expected_workers) +
          " worker pods of attempt " + std::to_string(group.attempt) +
          " were not scheduled onto a node within " +
          std::to_string(options_.gang_scheduling_timeout.count() / 1000) +
          " s (the GPUs they were planned on were taken meanwhile, or their node went away; "
          "`kubectl describe pod` says why); removing them and planning again");
  // Pending, not Planning: the next pass sees the removal as the
  // controller's own, not as an eviction.
  pass.phase = Phase::kPending;
  return Finish(pass, Millis(0));
}

ReconcileResult Reconciler::ReconcileWaiting(Pass& pass, const std::string& reason,
                                             const std::string& message) {
  pass.phase = Phase::kPending;
  if (!pass.Had(kConditionPlanned, reason, kConditionFalse)) {
    // Planned=False with reason: the job is valid but cannot be placed yet.
    deps_.store->RecordEvent(pass.object, "Normal", reason, message);
  }
  pass.Set(kConditionPlanned, kConditionFalse, reason, message);
  return Finish(pass, options_.pending_retry);
}

ReconcileResult Reconciler::ReconcileWithWorkers(Pass& pass, const WorkerGroup& group) {
  if (group.attempt < pass.state.attempt) {
    // An earlier launch's workers are still there: remove them first.
    Status removed = deps_.launcher->Stop(pass.ref, StopMode::kRemove);
    return {removed, options_.transition_poll};
  }
  if (group.attempt > pass.state.attempt) {
    // The pods a refused launch created before the refusal: the launcher
    // removed them, and the pod cache has not seen it yet. Not a launch to
    // adopt (that made a refused launch count as an attempt, seen in the
    // end-to-end quota test): the refusal stands until its backoff ends;
    // pods still there then (a failed removal) are removed again.
    std::optional<Refusals> refused;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = refusals_.find(pass.key);
      if (it != refusals_.end() && it->second.attempt == group.attempt) refused = it->second;
    }
    if (refused) {
      const Clock::SteadyTime now = deps_.clock->Now();
      if (now < refused->retry_at) {
        return LaunchRefused(pass, refused->message,
                             std::chrono::duration_cast<Millis>(refused->retry_at - now));
      }
      Status removed = deps_.launcher->Stop(pass.ref, StopMode::kRemove);
      if (!removed.ok()) return {removed, std::nullopt};
      return LaunchRefused(pass, refused->message, options_.transition_poll);
    }
    // A launch whose status write was lost (the controller stopped in
    // between): adopt it, with the layout its workers run.
    pass.state.attempt = group.attempt;
    if (group.layout) pass.state.layout = group.layout;
    pass.state.next_layout.reset();  // that launch used it
    // Its plan's time, not the previous attempt's launchTime still in the
    // status (its predicted completion counts from it); pods of an older
    // controller do not say: now, a pass after the launch.
    pass.state.plan_unix_seconds = group.launch_unix_seconds.value_or(pass.now);
    if (!group.spec_hash.empty() && group.spec_hash == WorkerSpecHash(pass.spec)) {
      // Launched with this spec: its steps count at this batch (the status
      // still holds the previous launch's unit, which an edit before any
      // step may have changed).
      pass.state.step_unit = pass.SpecStepUnit();
    }
  }

  StatusOr<ClusterInventory> inventory = deps_.inventory->Current();
  if (!inventory.ok()) return {inventory.status(), std::nullopt};
  *inventory = WithoutNodes(*inventory, pass.state.failures.excluded_nodes);
  if (pass.state.layout) {
    pass.plan = EvaluateLayout(pass.spec, *pass.state.layout, inventory->inventory,
                               pass.state.calibration, options_.replan.constants);
  }
  if (!pass.plan) {
    // Workers whose plan is unknown (never written to the status) cannot be
    // tracked against a prediction: start them over from their checkpoint.
    Status removed = deps_.launcher->Stop(pass.ref, StopMode::kRemove);
    return {removed, options_.transition_poll};
  }
  pass.Set(kConditionPlanned, kConditionTrue, "Planned", GpuSummary(*pass.plan));
  if (deps_.allocations != nullptr) NoteAdmission(pass);

  const int succeeded = group.Count(WorkerPhase::kSucceeded);
  const int failed = group.Count(WorkerPhase::kFailed);
  const int running = group.Count(WorkerPhase::kRunning);
  const int pending = group.Count(WorkerPhase::kPending);

  if (group.expected_workers > 0 && succeeded == group.expected_workers) {
    // What the workers trained: the total they were launched with (an edit
    // since then did not reach them).
    const int64_t trained = group.total_steps.value_or(pass.state.total_steps);
    if (trained < pass.state.total_steps) {
      pass.state.steps_completed = trained;
      RETURN_IF_ERROR_RESULT(deps_.launcher->Stop(pass.ref, StopMode::kRemove));
      const std::string message = "the workers finished the " + std::to_string(trained) +
                                  " steps attempt " + std::to_string(group.attempt) +
                                  " was launched with; the edited spec has " +
                                  std::to_string(pass.state.total_steps) +
                                  ": relaunching for the rest from the last checkpoint";
      if (!pass.Had(kConditionReplanning, "SpecChanged")) {
        deps_.store->RecordEvent(pass.object, "Normal", "SpecChanged", message);
      }
      pass.phase = Phase::kPending;
      pass.Set(kConditionReplanning, kConditionTrue, "SpecChanged", message);
      return Finish(pass, Millis(0));
    }
    pass.state.total_steps = trained;
    pass.phase = Phase::kSucceeded;
    pass.measured_step_seconds = pass.state.measured_step_seconds;
    pass.state.steps_completed = pass.state.total_steps;
    if (!pass.Had(kConditionSucceeded, "Completed")) {
      deps_.store->RecordEvent(
          pass.object, "Normal", "Completed",
          "all " + std::to_string(pass.state.total_steps) + " steps completed");
    }
    pass.Set(kConditionSucceeded, kConditionTrue, "Completed",
             std::to_string(pass.state.total_steps) + " steps completed");
    return Finish(pass, std::nullopt);
  }

  if (group.stopping) {
    // Workers are being deleted: wait until every one has checkpointed and
    // exited, then remove them; the next pass launches again. Someone other
    // than the controller deletes them (a node drain, an eviction, kubectl
    // delete pod) when they were running or starting with no stop of the
    // controller's under way: no re-plan or resize said Replanning, and it
    // is not an attempt whose failure it counted and is removing. The job
    // then relaunches, planned afresh, without counting a restart, as when
    // its workers exit stopped at a checkpoint (worker_failure.h).
    const std::optional<Phase> previous =
        PhaseFromName(StringMember(&pass.previous_status, "phase"));
    bool ours = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = graceful_stops_.find(pass.key);
      ours = it != graceful_stops_.end() && it->second.attempt == group.attempt;
    }
    const bool external = group.attempt == pass.state.stopped_externally_attempt ||
                          (!pass.HadTrue(kConditionReplanning) && !ours &&
                           group.attempt != pass.state.failure_counted_attempt &&
                           (previous == Phase::kRunning || previous == Phase::kPlanning));
    pass.phase = group.attempt == pass.state.failure_counted_attempt && !external
                     ? Phase::kPending  // a counted failure's pods, still going
                     : Phase::kReplanning;
    if (external) {
      const std::string message =
          "worker pods of attempt " + std::to_string(group.attempt) +
          " are being deleted, not by the controller (a node drain, an eviction or a manual "
          "delete): the workers stop at a checkpoint and the job relaunches without counting a "
          "restart";
      if (group.attempt != pass.state.stopped_externally_attempt) {
        deps_.store->RecordEvent(pass.object, "Normal", "StoppedExternally", message);
        pass.state.stopped_externally_attempt = group.attempt;
        KeepMeasuredPace(pass);  // the relaunch plans afresh
      }
      pass.Set(kConditionWorkerFailure, kConditionTrue, "StoppedExternally", message);
    } else if (group.attempt != pass.state.failure_counted_attempt) {
      pass.Set(kConditionReplanning, kConditionTrue, "Relaunching",
               "stopping workers at a checkpoint to relaunch on a new plan");
    }
    if (running + pending > 0) {
      NoteStuckStop(pass, group);
      return Finish(pass, options_.transition_poll);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_since_.erase(pass.key);
    }
    RETURN_IF_ERROR_RESULT(deps_.launcher->Stop(pass.ref, StopMode::kRemove));
    return Finish(pass, Millis(0));
  }

  if (failed > 0) return ReconcileFailedWorkers(pass, group);

  if (!group.spec_hash.empty() && group.spec_hash != WorkerSpecHash(pass.spec)) {
    // An edit the workers use (data, batch, model, image, env): running
    // workers never see it. Stop them at a checkpoint and relaunch with it.
    // Not a re-plan (replans unchanged) and not a failure. Workers of an
    // older controller (no hash) run on as before.
    std::string message = "the spec was edited: attempt " + std::to_string(group.attempt) +
                          "'s workers run the spec they were launched with";
    if (group.total_steps && *group.total_steps != pass.state.total_steps) {
      message += " (" + std::to_string(*group.total_steps) + " steps; the edited spec has " +
                 std::to_string(pass.state.total_steps) + ")";
    }
    message += "; stopping them at a checkpoint to relaunch with the edit";
    RETURN_IF_ERROR_RESULT(StopToRelaunch(pass, group.attempt));
    deps_.store->RecordEvent(pass.object, "Normal", "SpecChanged", message);
    pass.phase = Phase::kReplanning;
    pass.Set(kConditionReplanning, kConditionTrue, "SpecChanged", message);
    return Finish(pass, options_.transition_poll);
  }

  const int present = static_cast<int>(group.workers.size());
  if (group.expected_workers > 0 && present < group.expected_workers) {
    // A partial gang never starts (every rank waits for all the others) and
    // holds its GPUs: give the missing pods a bound, then start over.
    const Clock::SteadyTime now = deps_.clock->Now();
    Clock::SteadyTime since;
    {
      std::lock_guard<std::mutex> lock(mu_);
      since = partial_since_.try_emplace(pass.key, now).first->second;
    }
    if (now - since >= options_.gang_completion_timeout) {
      RETURN_IF_ERROR_RESULT(deps_.launcher->Stop(pass.ref, StopMode::kRemove));
      {
        std::lock_guard<std::mutex> lock(mu_);
        partial_since_.erase(pass.key);
      }
      deps_.store->RecordEvent(
          pass.object, "Warning", "GangIncomplete",
          "only " + std::to_string(present) + " of " + std::to_string(group.expected_workers) +
              " worker pods of attempt " + std::to_string(group.attempt) + " exist after " +
              std::to_string(options_.gang_completion_timeout.count() / 1000) +
              " s; removing them and launching again");
      pass.phase = Phase::kPending;
      return Finish(pass, Millis(0));
    }
    pass.phase = Phase::kPlanning;
    const auto left =
        std::chrono::duration_cast<Millis>(since + options_.gang_completion_timeout - now);
    return Finish(pass, std::min(left + Millis(1), options_.transition_poll));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    partial_since_.erase(pass.key);
  }
  if (std::optional<ReconcileResult> removed = RemoveUnschedulableGang(pass, group)) {
    return *removed;
  }

  // Starting or running: progress and projection.
  pass.phase = running == group.expected_workers ? Phase::kRunning : Phase::kPlanning;
  if (pass.phase == Phase::kRunning) {
    pass.Set(kConditionRunning, kConditionTrue, "WorkersRunning",
             std::to_string(running) + " of " + std::to_string(group.expected_workers) +
                 " workers running");
  }
  std::optional<double> usable_step_seconds;
  // No progress is known while metrics are out: an outage's stale progress
  // is no reason to relaunch.
  bool metrics_unavailable = false;
  // Of this attempt's workers only: the last attempt's (another layout) stay
  // in a metrics backend's rate window for a while after a relaunch.
  JobRef measured = pass.ref;
  measured.attempt = pass.state.attempt;
  // The prediction, not the last measurement: a window widened to 3 of a
  // slowed-down job's steps still held the fast steps before the slowdown,
  // and its mean (143 s after 20 steps of 100 s and one of 1000 s) narrowed
  // the next window again, so the readings flapped between the two paces.
  // Steps longer than the plan's window are read from the last step.
  measured.expected_step_seconds = pass.plan->step.step_seconds;
  StatusOr<Measurement> measurement = deps_.metrics->Measure(measured);
  if (measurement.ok()) {
    if (measurement->steps_completed) {
      pass.state.steps_completed =
          std::clamp<int64_t>(*measurement->steps_completed, 0, pass.state.total_steps);
    }
    // A shrunk CPU run's time is shown (local mode's progress), never
    // planned with nor kept in the status: only its upper bound applies (it
    // runs a smaller model, so any amount faster is plausible).
    const double scale = measurement->model_scale.value_or(1.0);
    if (measurement->step_seconds &&
        !planner::PlausibleStepTimeRatio(*measurement->step_seconds / pass.plan->step.step_seconds,
                                         scale)) {
      // A broken exporter's number (1e300 s) re-planned the job at that
      // ratio and was written into the status and the ETA.
      const std::string message =
          "the workers report a step time of " + ShortNumber(*measurement->step_seconds) +
          " s against " + ShortNumber(pass.plan->step.step_seconds) + " s predicted, " +
          (scale < 1.0 ? "more than 1e6 times the prediction for a model shrunk to scale " +
                             ShortNumber(scale)
                       : std::string("outside 1e-6 to 1e6 times the prediction")) +
          ": no worker takes that; check the workers' pacer_worker_step_duration_seconds; "
          "progress counts, the ETA uses the plan's predictions";
      if (!pass.Had(kConditionDegraded, "MetricsImplausible")) {
        deps_.store->RecordEvent(pass.object, "Warning", "MetricsImplausible", message);
      }
      pass.Set(kConditionDegraded, kConditionTrue, "MetricsImplausible", message);
      measurement->step_seconds.reset();
    } else if (!measurement->step_seconds && scale >= 1.0) {
      // No step time in this answer (the last-step query failed, or no step
      // ended since the window began): the attempt's last measurement, as
      // in an outage, not the prediction (a job 3 times slower than
      // predicted depends on that query at every pass).
      measurement->step_seconds = pass.state.measured_step_seconds;
    }
    pass.measured_step_seconds = measurement->step_seconds;
    // A shrunk CPU run's time says nothing about the planned model.
    if (measurement->model_scale.value_or(1.0) >= 1.0) {
      usable_step_seconds = measurement->step_seconds;
    } else {
      pass.measured_on_shrunk_model = true;
    }
  } else if (WorkersJustEnded(pass.ref)) {
    // The endpoints went away with the workers: not a metrics outage. The
    // next pass sees how they ended.
    pass.measured_step_seconds = pass.state.measured_step_seconds;
    usable_step_seconds = pass.state.measured_step_seconds;
  } else {
    // This attempt's last measurement (a launch clears it; a shrunk run's is
    // never kept): the prediction moved the ETA by days for a job measured
    // at half its predicted step.
    pass.measured_step_seconds = pass.state.measured_step_seconds;
    usable_step_seconds = pass.state.measured_step_seconds;
    metrics_unavailable = true;
    if (!pass.Had(kConditionDegraded, kReasonMetricsUnavailable)) {
      deps_.store->RecordEvent(pass.object, "Warning", kReasonMetricsUnavailable,
                               measurement.status().message());
    }
    pass.Set(kConditionDegraded, kConditionTrue, kReasonMetricsUnavailable,
             measurement.status().message() + "; progress is the last known, the ETA uses " +
                 (usable_step_seconds ? "the last measured step time"
                                      : std::string("the plan's predicted step time")) +
                 " (the projection and DeadlineAtRisk from before the outage stand), and no "
                 "re-plan is made until metrics return");
  }

  const double step_seconds = usable_step_seconds.value_or(pass.plan->step.step_seconds);
  const int64_t remaining = pass.state.total_steps - pass.state.steps_completed;
  pass.projected = planner::CeilUnixSeconds(
      ProjectCompletion(static_cast<double>(pass.now), remaining, step_seconds, *pass.plan));
  if (metrics_unavailable) {
    // Progress stays at the last known step while time moves on: a
    // projection from it slid later by the outage's length, and after two
    // days an on-track job was DeadlineAtRisk, naming a re-plan that is not
    // made. The workers run on unseen: the projection from before the outage
    // stands (not in the past: past it the job may end at any moment), and
    // so does DeadlineAtRisk, until metrics return.
    if (const auto before = ProjectedCompletionOf(pass.previous_status)) {
      pass.projected = std::max(*before, pass.now);
    }
    const std::vector<Condition> previous = ParseConditions(pass.previous_status);
    const bool deadline_passed = pass.deadline && pass.now > *pass.deadline;
    const Condition* at_risk = FindCondition(previous, kConditionDeadlineAtRisk);
    // Past the deadline DeadlineExceeded says it all: an OnTrack kept from
    // before would contradict it.
    if (at_risk != nullptr && !deadline_passed) {
      pass.Set(kConditionDeadlineAtRisk, at_risk->status.c_str(), at_risk->reason,
               at_risk->message);
    }
  }
  if (pass.deadline) pass.slack = static_cast<double>(*pass.deadline - *pass.projected);

  const Millis replan_interval = Seconds(pass.spec.replan.interval_seconds);
  // Another GPU type counts as a resize even at the same count: the
  // scheduler moves a job when no schedulable node of its type is left (all
  // cordoned), and a job left running on the old type would hold its GPUs
  // while the schedule counts it on the new type's, which it then keeps
  // from every other job.
  const bool moved =
      pass.allocation && pass.allocation->gpus > 0 &&
      !inventory->inventory.catalog.Same(pass.allocation->gpu_type, pass.plan->layout.gpu_type);
  if (pass.phase == Phase::kRunning && remaining > 0 && pass.allocation &&
      pass.allocation->admitted && (pass.allocation->gpus != pass.plan->layout.gpus() || moved)) {
    // The shared schedule resized the job (it decided the gain pays for the
    // relaunch): checkpoint, stop, and relaunch on the new allocation.
    const int from = pass.plan->layout.gpus(), to = pass.allocation->gpus;
    KeepMeasuredPace(pass);
    ++pass.state.replans;
    pass.state.last_replan_unix_seconds = pass.now;
    RETURN_IF_ERROR_RESULT(StopToRelaunch(pass, group.attempt));
    std::string message;
    if (to == 0 && !pass.allocation->message.empty()) {
      message = "it stops at a checkpoint and waits: " + pass.allocation->message;
    } else if (to == 0) {
      message = "its " + std::to_string(from) +
                " GPUs go to jobs with deadlines; it stops at a checkpoint and resumes when the "
                "schedule gives it GPUs again";
    } else if (moved) {
      message = "the cluster schedule gives it " + std::to_string(to) + " " +
                pass.allocation->gpu_type + " GPUs instead of " + std::to_string(from) + " " +
                pass.plan->layout.gpu_type + " (no schedulable " + pass.plan->layout.gpu_type +
                " node is left for it: cordoned, not ready or excluded); relaunching from a "
                "checkpoint";
    } else {
      message = "the cluster schedule gives it " + std::to_string(to) + " GPUs instead of " +
                std::to_string(from) + "; relaunching from a checkpoint";
    }
    const char* reason = moved ? "Moving" : to > from ? "Growing" : "Shrinking";
    deps_.store->RecordEvent(pass.object, "Normal", reason, message);
    pass.phase = Phase::kReplanning;
    pass.Set(kConditionReplanning, kConditionTrue, "Resizing", message);
    return Finish(pass, options_.transition_poll);
  }
  // Also with re-planning disabled: the policy then keeps the plan, and the
  // job still says whether it is at risk (DeadlineAtRisk ReplanDisabled),
  // which it never did: the check was skipped with the re-plan.
  if (pass.phase == Phase::kRunning && remaining > 0 && !metrics_unavailable) {
    ReplanInputs in;
    in.job = pass.spec;
    in.deadline_unix_seconds = pass.deadline;
    in.slack_fraction = pass.spec.replan.slack_fraction;
    in.now_unix_seconds = pass.now;
    in.total_steps = pass.state.total_steps;
    in.completed_steps = pass.state.steps_completed;
    in.measured_step_seconds = usable_step_seconds;
    in.current_plan = *pass.plan;
    in.inventory = inventory->inventory;
    in.calibration = pass.state.calibration;
    in.last_replan_unix_seconds = pass.state.last_replan_unix_seconds;
    StatusOr<Decision> decision = DecideReplan(in, options_.replan);
    if (decision.ok()) {
      pass.projected = decision->projected_completion_unix_seconds;
      if (pass.deadline) pass.slack = decision->slack_seconds;
      if (decision->at_risk) {
        // At risk and kept (no re-plan gains enough, the last one too
        // recent, re-planning disabled, or the cluster schedule decides):
        // said once, as an event, when the risk appears. A re-plan says
        // "Replanning" and an unreachable deadline its own event; this one
        // was only a condition, which `pacer run` does not print and
        // `kubectl get events` does not list.
        const bool replans_here =
            decision->action == Decision::Action::kReplan && deps_.allocations == nullptr;
        if (!replans_here && decision->action != Decision::Action::kInfeasible &&
            !pass.HadTrue(kConditionDeadlineAtRisk)) {
          deps_.store->RecordEvent(pass.object, "Warning", kConditionDeadlineAtRisk,
                                   decision->message);
        }
        pass.Set(kConditionDeadlineAtRisk, kConditionTrue, decision->reason, decision->message);
      } else {
        pass.Set(kConditionDeadlineAtRisk, kConditionFalse, decision->reason, decision->message);
      }
      // Under the cluster scheduler the shared schedule sizes jobs (from the
      // measured step time): a re-plan of one job alone could take GPUs
      // reserved for another's deadline.
      if (decision->action == Decision::Action::kReplan && decision->new_plan &&
          deps_.allocations == nullptr) {
        ++pass.state.replans;
        pass.state.last_replan_unix_seconds = pass.now;
        if (decision->step_time_ratio) {
          pass.state.calibration.by_gpu_type[pass.plan->layout.gpu_type].step_time_ratio =
              *decision->step_time_ratio;
        }
        pass.state.next_layout = decision->new_plan->layout;
        RETURN_IF_ERROR_RESULT(StopToRelaunch(pass, group.attempt));
        const std::string message = decision->message + " (from " + GpuSummary(*pass.plan) +
                                    " to " + GpuSummary(*decision->new_plan) + ")";
        deps_.store->RecordEvent(pass.object, "Normal", "Replanning", message);
        pass.phase = Phase::kReplanning;
        pass.Set(kConditionReplanning, kConditionTrue, decision->reason, message);
        return Finish(pass, options_.transition_poll);
      }
    }
  }

  if (pass.deadline && pass.now > *pass.deadline) {
    pass.Set(kConditionDeadlineExceeded, kConditionTrue, "DeadlinePassed",
             "the deadline " + planner::FormatRfc3339(*pass.deadline) + " passed with " +
                 std::to_string(remaining) + " steps left");
  }
  if (pass.phase != Phase::kRunning) return Finish(pass, options_.transition_poll);
  return Finish(pass, replan_interval);
}

ReconcileResult Reconciler::ReconcileFailedWorkers(Pass& pass, const WorkerGroup& group) {
  if (group.attempt == pass.state.failure_counted_attempt) {
    // Counted and written already; only the removal of its pods failed.
    Status removed = deps_.launcher->Stop(pass.ref, StopMode::kRemove);
    return {removed, removed.ok() ? std::optional<Millis>(Millis(0)) : std::nullopt};
  }
  std::vector<FailedWorker> failed;
  for (const WorkerState& w : group.workers) {
    if (w.phase != WorkerPhase::kFailed) continue;
    failed.push_back(FailedWorker{w.node_rank, w.exit_code, w.node_name, w.message});
  }
  const FailureAction action = DecideWorkerFailure(failed, pass.state.failures);
  pass.state.failures = action.history;
  pass.state.failure_counted_attempt = group.attempt;
  KeepMeasuredPace(pass);
  for (const std::string& node : action.newly_excluded_nodes) {
    deps_.store->RecordEvent(
        pass.object, "Warning", "NodeExcluded",
        "node " + node + " excluded from the job's plans and pods after " + action.exclusion_cause);
  }
  // The status (restarts, the memory margin, strikes) is written before the
  // failed pods are removed: with the pods gone first, a status write that
  // failed (a conflict, an outage) lost the failure, its exit codes with it,
  // and the relaunch ran on the old margin, uncounted against max_restarts.
  const auto written_then_removed = [&](ReconcileResult written) -> ReconcileResult {
    if (!written.status.ok()) return written;
    Status removed = deps_.launcher->Stop(pass.ref, StopMode::kRemove);
    if (!removed.ok()) return {removed, std::nullopt};
    return written;
  };
  if (action.kind == FailureAction::Kind::kFail) {
    deps_.store->RecordEvent(pass.object, "Warning", action.reason, action.message);
    pass.phase = Phase::kFailed;
    pass.Set(kConditionFailed, kConditionTrue, action.reason, action.message);
    return written_then_removed(Finish(pass, std::nullopt));
  }
  if (action.counts_as_restart && pass.state.restarts >= options_.max_restarts) {
    const std::string message = (action.cause.empty() ? action.message : action.cause) +
                                "; not restarted: " + std::to_string(options_.max_restarts) +
                                " restarts used (the limit)";
    deps_.store->RecordEvent(pass.object, "Warning", "RestartLimitExceeded", message);
    pass.phase = Phase::kFailed;
    pass.Set(kConditionFailed, kConditionTrue, "RestartLimitExceeded", message);
    return written_then_removed(Finish(pass, std::nullopt));
  }
  std::string message = action.message;
  if (action.counts_as_restart) {
    ++pass.state.restarts;
    message += " (restart " + std::to_string(pass.state.restarts) + " of " +
               std::to_string(options_.max_restarts) + ")";
  }
  deps_.store->RecordEvent(pass.object, action.counts_as_restart ? "Warning" : "Normal",
                           action.reason, message);
  pass.phase = Phase::kPending;
  pass.Set(kConditionWorkerFailure, kConditionTrue, action.reason, message);
  return written_then_removed(Finish(pass, Millis(0)));
}

void Reconciler::MarkRunningLate(Pass& pass, const std::string& message) {
  if (!pass.Had(kConditionDeadlineAtRisk, "DeadlineUnreachable")) {
    deps_.store->RecordEvent(pass.object, "Warning", "DeadlineUnreachable", message);
  }
  pass.Set(kConditionDeadlineAtRisk, kConditionTrue, "DeadlineUnreachable", message);
}

bool Reconciler::HasRun(const Pass& pass) const {
  return pass.state.attempt > 0 || options_.resumes_earlier_run;
}

bool Reconciler::WorkersJustEnded(const JobRef& job) {
  StatusOr<std::optional<WorkerGroup>> group = deps_.launcher->Observe(job);
  if (!group.ok()) return false;
  if (!group->has_value()) return true;
  return (*group)->Count(WorkerPhase::kRunning) + (*group)->Count(WorkerPhase::kPending) <
         (*group)->expected_workers;
}

void Reconciler::NoteStuckStop(Pass& pass, const WorkerGroup& group) {
  const Clock::SteadyTime now = deps_.clock->Now();
  bool report = false;
  Clock::SteadyTime since;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, added] = stopping_since_.try_emplace(pass.key, StoppingSince{group.attempt, now});
    if (!added && it->second.attempt != group.attempt) it->second = {group.attempt, now, false};
    since = it->second.since;
    if (now - since < options_.stuck_stop_after) return;
    report = !it->second.reported;
    it->second.reported = true;
  }
  std::string where;
  int left = 0;
  for (const WorkerState& w : group.workers) {
    if (w.phase != WorkerPhase::kRunning && w.phase != WorkerPhase::kPending) continue;
    ++left;
    if (left > 8) continue;  // a line, not a list of a thousand pods
    if (!where.empty()) where += ", ";
    where += "worker " + std::to_string(w.node_rank) +
             (w.node_name.empty() ? "" : " on node " + w.node_name);
  }
  if (left > 8) where += " and " + std::to_string(left - 8) + " more";
  const int64_t minutes = std::chrono::duration_cast<std::chrono::minutes>(now - since).count();
  const std::string message =
      std::to_string(left) + " worker(s) of attempt " + std::to_string(group.attempt) +
      " have been stopping for " + std::to_string(minutes) + " minutes (" + where +
      "): their node does not confirm they ended (a node down or unreachable keeps a deleted "
      "pod Terminating); the next attempt waits, so that two attempts never write the "
      "checkpoint volume. Once the node is known down, force-delete them (kubectl delete pod -n " +
      pass.ref.namespace_name + " -l pacer.dev/job=" + pass.ref.name +
      " --force --grace-period=0) or taint it node.kubernetes.io/out-of-service=nodeshutdown:"
      "NoExecute";
  if (report) deps_.store->RecordEvent(pass.object, "Warning", "WorkersStuckTerminating", message);
  pass.Set(kConditionDegraded, kConditionTrue, "WorkersStuckTerminating", message);
}

Status Reconciler::StatusWriteFailure(const Pass& pass, const Status& written) {
  if (written.code() != StatusCode::kInvalidArgument) return written;
  const std::string message =
      "the API server refused the TrainJob's status: " + written.message() +
      "; retrying with backoff (the message names the field refused; a CRD of another release "
      "than the controller's validates differently: kubectl apply -f manifests/crd/)";
  deps_.store->RecordEvent(pass.object, "Warning", "StatusWriteRefused", message);
  return FailedPreconditionError(message);
}

ReconcileResult Reconciler::Finish(Pass& pass, std::optional<Millis> requeue_after) {
  if (pass.measured_step_seconds && !pass.measured_on_shrunk_model)
    pass.state.measured_step_seconds = pass.measured_step_seconds;
  if (!IsTerminal(pass.phase) && !pass.deleted &&
      FindCondition(pass.conditions, kConditionWorkerFailure) == nullptr) {
    // The last failure and what was done about it stay visible while the
    // relaunched workers run.
    const std::vector<Condition> previous = ParseConditions(pass.previous_status);
    if (const Condition* c = FindCondition(previous, kConditionWorkerFailure)) {
      pass.conditions.push_back(*c);
    }
  }
  if (deps_.allocations != nullptr && !pass.deleted &&
      FindCondition(pass.conditions, kConditionAdmitted) == nullptr) {
    // Every pass under the scheduler says whether the job is admitted, also
    // the ones that return before the launch path (old workers terminating,
    // no matching nodes): the scheduler reads an admitted job's share from
    // this condition, and without it takes the job for a new arrival.
    NoteAdmission(pass);
  }
  StatusInputs in;
  in.phase = pass.phase;
  in.conditions = pass.conditions;
  in.plan = pass.plan;
  in.plan_unix_seconds = pass.state.plan_unix_seconds;
  in.steps_completed = pass.state.steps_completed;
  in.total_steps = pass.state.total_steps;
  in.measured_step_seconds =
      pass.measured_on_shrunk_model ? pass.state.measured_step_seconds : pass.measured_step_seconds;
  in.projected_completion_unix_seconds = pass.projected;
  in.deadline_slack_seconds = pass.slack;
  in.replans = pass.state.replans;
  in.restarts = pass.state.restarts;
  in.observed_generation = pass.generation;
  StatusJson built = BuildTrainJobStatus(in, pass.previous_status, pass.now);
  if (!pass.plan && pass.carried_plan.is_object()) built["plan"] = pass.carried_plan;
  if (pass.deadline) built["deadline"] = planner::FormatRfc3339(*pass.deadline);
  if (pass.allocation) {
    const Allocation& a = *pass.allocation;
    nlohmann::ordered_json schedule;
    schedule["admitted"] = a.admitted;
    schedule["allocatedGpus"] = a.gpus;
    if (!a.gpu_type.empty()) schedule["gpuType"] = a.gpu_type;  // none: no node left to it
    if (a.planned_finish_unix_seconds) {
      schedule["plannedFinishTime"] = planner::FormatRfc3339(*a.planned_finish_unix_seconds);
    }
    if (a.next_start_unix_seconds) {
      schedule["nextStartTime"] = planner::FormatRfc3339(*a.next_start_unix_seconds);
    }
    built["schedule"] = std::move(schedule);
  }
  WritePersistedState(pass.state, &built);
  const nlohmann::json status(built);  // ordered (as written) to plain JSON, no reparse

  Status written = Status::Ok();
  if (!pass.keep_status && status != pass.previous_status)
    written = deps_.store->WriteStatus(pass.object, status);

  JobView view;
  view.job = pass.ref;
  view.phase = pass.phase;
  view.plan = pass.plan;
  view.attempt = pass.state.attempt;
  view.steps_completed = pass.state.steps_completed;
  view.total_steps = pass.state.total_steps;
  view.measured_step_seconds = pass.measured_step_seconds;
  view.projected_completion_unix_seconds = pass.projected;
  view.deadline_unix_seconds = pass.deadline;
  view.slack_seconds = pass.slack;
  view.replans = pass.state.replans;
  view.restarts = pass.state.restarts;
  view.conditions = ParseConditions(status);
  {
    std::lock_guard<std::mutex> lock(mu_);
    views_[pass.key] = std::move(view);
  }
  if (!written.ok()) return {StatusWriteFailure(pass, written), std::nullopt};
  return {Status::Ok(), requeue_after};
}

}  // namespace pacer::controller
