#include "reconcile/job_object.h"

#include <algorithm>
#include <cmath>

#include "cli/format.h"
#include "cli/plan_output.h"
#include "core/node_inventory.h"
#include "pacer/planner/calibration.h"
#include "pacer/planner/gpu_catalog.h"
#include "pacer/planner/job_parser.h"
#include "pacer/planner/layer_shapes.h"
#include "pacer/planner/units.h"

namespace pacer::controller {
namespace {

template <typename T>
std::optional<T> Field(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key)) return std::nullopt;
  const nlohmann::json& v = object[key];
  if constexpr (std::is_same_v<T, std::string>) {
    if (v.is_string()) return v.get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (v.is_boolean()) return v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (v.is_number_integer()) return v.get<T>();
  } else {
    if (v.is_number()) return v.get<T>();
  }
  return std::nullopt;
}

std::optional<int64_t> TimeField(const nlohmann::json& object, const char* key) {
  std::optional<std::string> text = Field<std::string>(object, key);
  if (!text) return std::nullopt;
  StatusOr<int64_t> t = planner::ParseRfc3339(*text);
  if (!t.ok()) return std::nullopt;
  return *t;
}

std::optional<planner::Recompute> RecomputeFromName(const std::string& name) {
  for (planner::Recompute r :
       {planner::Recompute::kNone, planner::Recompute::kSelective, planner::Recompute::kFull}) {
    if (name == planner::RecomputeName(r)) return r;
  }
  return std::nullopt;
}

}  // namespace

StatusOr<planner::JobSpec> ParseJobObject(const nlohmann::json& trainjob) {
  if (!trainjob.is_object()) return InvalidArgumentError("a TrainJob must be a JSON object");
  // The status is the controller's, not the user's: the parser must not see it.
  nlohmann::json document = trainjob;
  document.erase("status");
  if (document.contains("metadata") && document["metadata"].is_object()) {
    document["metadata"].erase("managedFields");
    if (document["metadata"].contains("annotations") &&
        document["metadata"]["annotations"].is_object()) {
      document["metadata"]["annotations"].erase("kubectl.kubernetes.io/last-applied-configuration");
    }
  }
  // JSON is YAML: the planner's parser reads it as is.
  return planner::ParseTrainJob(document.dump());
}

JobRef JobRefOf(const nlohmann::json& object) {
  JobRef ref;
  const nlohmann::json metadata = object.value("metadata", nlohmann::json::object());
  ref.namespace_name = Field<std::string>(metadata, "namespace").value_or("default");
  ref.name = Field<std::string>(metadata, "name").value_or("");
  ref.uid = Field<std::string>(metadata, "uid").value_or("");
  return ref;
}

bool HasFinalizer(const nlohmann::json& object, const std::string& finalizer) {
  if (!object.contains("metadata") || !object["metadata"].contains("finalizers")) return false;
  const nlohmann::json& list = object["metadata"]["finalizers"];
  if (!list.is_array()) return false;
  return std::any_of(list.begin(), list.end(), [&](const nlohmann::json& f) {
    return f.is_string() && f.get<std::string>() == finalizer;
  });
}

std::optional<planner::Layout> LayoutFromPlanJson(const nlohmann::json& plan) {
  planner::Layout l;
  auto gpu_type = Field<std::string>(plan, "gpuType");
  auto pool = Field<std::string>(plan, "pool");
  auto nodes = Field<int>(plan, "nodes");
  auto gpn = Field<int>(plan, "gpusPerNode");
  auto t = Field<int>(plan, "tensorParallel");
  auto p = Field<int>(plan, "pipelineParallel");
  auto d = Field<int>(plan, "dataParallel");
  auto b = Field<int>(plan, "microBatchSize");
  auto k = Field<int64_t>(plan, "gradientAccumulationSteps");
  auto recompute = Field<std::string>(plan, "activationCheckpointing");
  if (!gpu_type || !pool || !nodes || !gpn || !t || !p || !d || !b || !k || !recompute) {
    return std::nullopt;
  }
  std::optional<planner::Recompute> r = RecomputeFromName(*recompute);
  if (!r || *nodes <= 0 || *gpn <= 0 || *t <= 0 || *p <= 0 || *d <= 0 || *b <= 0 || *k <= 0) {
    return std::nullopt;
  }
  l.gpu_type = *gpu_type;
  l.pool = *pool;
  l.nodes = *nodes;
  l.gpus_per_node = *gpn;
  l.tensor_parallel = *t;
  l.pipeline_parallel = *p;
  l.data_parallel = *d;
  l.virtual_stages = std::max(1, Field<int>(plan, "virtualStages").value_or(1));
  l.sequence_parallel = Field<bool>(plan, "sequenceParallel").value_or(*t > 1);
  l.zero_stage = std::clamp(Field<int>(plan, "zeroStage").value_or(0), 0, 3);
  l.micro_batch_size = *b;
  l.gradient_accumulation_steps = *k;
  l.recompute = *r;
  return l;
}

std::optional<int64_t> ProjectedCompletionOf(const nlohmann::json& status) {
  if (!status.is_object()) return std::nullopt;
  const auto it = status.find("projectedCompletionTime");
  if (it == status.end() || !it->is_string()) return std::nullopt;
  StatusOr<int64_t> when = planner::ParseRfc3339(it->get<std::string>());
  if (!when.ok()) return std::nullopt;
  return *when;
}

PersistedState ReadPersistedState(const nlohmann::json& status) {
  PersistedState s;
  s.attempt = std::max(0, Field<int>(status, "attempt").value_or(0));
  s.replans = std::max(0, Field<int>(status, "replans").value_or(0));
  s.restarts = std::max(0, Field<int>(status, "restarts").value_or(0));
  s.failure_counted_attempt = std::max(0, Field<int>(status, "failureCountedAttempt").value_or(0));
  s.stopped_externally_attempt =
      std::max(0, Field<int>(status, "stoppedExternallyAttempt").value_or(0));
  s.last_replan_unix_seconds = TimeField(status, "lastReplanTime");
  s.plan_unix_seconds = TimeField(status, "launchTime").value_or(0);
  if (status.is_object() && status.contains("plan")) s.layout = LayoutFromPlanJson(status["plan"]);
  if (status.is_object() && status.contains("nextPlan")) {
    s.next_layout = LayoutFromPlanJson(status["nextPlan"]);
  }
  if (status.is_object() && status.contains("calibration") && status["calibration"].is_object()) {
    for (const auto& [gpu_type, entry] : status["calibration"].items()) {
      std::optional<double> ratio = Field<double>(entry, "stepTimeRatio");
      // Bounded: a 1e300 written into the status would make every later
      // plan of the job take "forever".
      if (ratio && *ratio > 0) {
        s.calibration.by_gpu_type[gpu_type].step_time_ratio = std::clamp(
            *ratio, planner::kMinMeasuredStepTimeRatio, planner::kMaxMeasuredStepTimeRatio);
      }
    }
  }
  if (status.is_object() && status.contains("progress")) {
    s.steps_completed =
        std::max<int64_t>(0, Field<int64_t>(status["progress"], "stepsCompleted").value_or(0));
    s.total_steps =
        std::max<int64_t>(0, Field<int64_t>(status["progress"], "totalSteps").value_or(0));
  }
  if (status.is_object() && status.contains("stepUnit")) {
    const int64_t batch = Field<int64_t>(status["stepUnit"], "globalBatchSize").value_or(0);
    const int sequence = Field<int>(status["stepUnit"], "sequenceLength").value_or(0);
    if (batch > 0 && sequence > 0) s.step_unit = PersistedState::StepUnit{batch, sequence};
  }
  s.measured_step_seconds = Field<double>(status, "measuredStepSeconds");
  s.failures.memory_margin_fraction = std::clamp(
      Field<double>(status, "memoryMarginFraction").value_or(0.0), 0.0, kMaxMemoryMarginFraction);
  if (status.is_object() && status.contains("collectiveFailuresByNode") &&
      status["collectiveFailuresByNode"].is_object()) {
    for (const auto& [node, count] : status["collectiveFailuresByNode"].items()) {
      if (count.is_number_integer() && count.get<int>() > 0) {
        s.failures.collective_failures_by_node[node] = count.get<int>();
      }
    }
  }
  if (status.is_object() && status.contains("excludedNodes") &&
      status["excludedNodes"].is_array()) {
    for (const nlohmann::json& node : status["excludedNodes"]) {
      if (node.is_string()) s.failures.excluded_nodes.push_back(node.get<std::string>());
    }
    std::sort(s.failures.excluded_nodes.begin(), s.failures.excluded_nodes.end());
  }
  return s;
}

void WritePersistedState(const PersistedState& state, nlohmann::ordered_json* status) {
  (*status)["attempt"] = state.attempt;
  if (state.failure_counted_attempt > 0) {
    (*status)["failureCountedAttempt"] = state.failure_counted_attempt;
  }
  if (state.stopped_externally_attempt > 0) {
    (*status)["stoppedExternallyAttempt"] = state.stopped_externally_attempt;
  }
  if (state.plan_unix_seconds > 0) {
    (*status)["launchTime"] = planner::FormatRfc3339(state.plan_unix_seconds);
  }
  if (state.last_replan_unix_seconds) {
    (*status)["lastReplanTime"] = planner::FormatRfc3339(*state.last_replan_unix_seconds);
  }
  if (state.step_unit) {
    (*status)["stepUnit"] = {{"globalBatchSize", state.step_unit->global_batch_size},
                             {"sequenceLength", state.step_unit->sequence_length}};
  }
  if (state.next_layout) (*status)["nextPlan"] = cli::LayoutJson(*state.next_layout);
  nlohmann::ordered_json calibration = nlohmann::ordered_json::object();
  for (const auto& [gpu_type, entry] : state.calibration.by_gpu_type) {
    if (entry.step_time_ratio) calibration[gpu_type]["stepTimeRatio"] = *entry.step_time_ratio;
  }
  if (!calibration.empty()) (*status)["calibration"] = calibration;
  if (state.failures.memory_margin_fraction > 0) {
    (*status)["memoryMarginFraction"] = state.failures.memory_margin_fraction;
  }
  if (!state.failures.collective_failures_by_node.empty()) {
    nlohmann::ordered_json strikes = nlohmann::ordered_json::object();
    for (const auto& [node, count] : state.failures.collective_failures_by_node) {
      strikes[node] = count;
    }
    (*status)["collectiveFailuresByNode"] = std::move(strikes);
  }
  if (!state.failures.excluded_nodes.empty()) {
    (*status)["excludedNodes"] = state.failures.excluded_nodes;
  }
}

std::optional<planner::Evaluation> EvaluateLayout(const planner::JobSpec& job,
                                                  const planner::Layout& layout,
                                                  const planner::Inventory& inventory,
                                                  const planner::Calibration& calibration,
                                                  const planner::ModelConstants& constants) {
  const planner::GpuType* gpu = inventory.catalog.Find(layout.gpu_type);
  if (gpu == nullptr) return std::nullopt;
  planner::NodePool pool;
  auto found = std::find_if(inventory.node_pools.begin(), inventory.node_pools.end(),
                            [&](const planner::NodePool& p) { return p.name == layout.pool; });
  if (found != inventory.node_pools.end()) {
    pool = *found;
  } else {
    pool.name = layout.pool;
    pool.gpu_type = layout.gpu_type;
    pool.nodes = layout.nodes;
    pool.gpus_per_node = layout.gpus_per_node;
    pool.network_gbps_per_node = kDefaultNetworkGbpsPerGpu * layout.gpus_per_node;
    pool.nvlink_gbps = gpu->nvlink_gbps;
  }
  return planner::Evaluate(job, layout, pool, *gpu, calibration.Find(layout.gpu_type), constants);
}

StatusOr<planner::Evaluation> RecheckLayout(const planner::JobSpec& job,
                                            const planner::Layout& layout,
                                            const planner::Inventory& inventory,
                                            const planner::Calibration& calibration,
                                            const planner::ModelConstants& constants) {
  const planner::GpuType* gpu = inventory.catalog.Find(layout.gpu_type);
  if (gpu == nullptr) {
    return FailedPreconditionError("the GPU catalog no longer has " + layout.gpu_type);
  }
  if (!planner::AllowsGpuType(job.resources, inventory.catalog, layout.gpu_type)) {
    return FailedPreconditionError("spec.resources.gpuTypes no longer allows " + layout.gpu_type);
  }
  if (std::string why = planner::TensorParallelSplitError(job.model, layout.tensor_parallel);
      !why.empty()) {
    // A layout an older controller saved: the workers would refuse it.
    return FailedPreconditionError("tensor parallel " + std::to_string(layout.tensor_parallel) +
                                   " " + why + " of the model");
  }
  const int gpus = layout.gpus();
  if (gpus < job.resources.min_gpus || (job.resources.max_gpus && gpus > *job.resources.max_gpus)) {
    return FailedPreconditionError(std::to_string(gpus) +
                                   " GPUs are outside spec.resources minGPUs..maxGPUs now");
  }
  if (layout.global_batch() != job.training.global_batch_size) {
    return FailedPreconditionError("spec.training.globalBatchSize is " +
                                   std::to_string(job.training.global_batch_size) + " now, not " +
                                   std::to_string(layout.global_batch()));
  }
  auto pool = std::find_if(inventory.node_pools.begin(), inventory.node_pools.end(),
                           [&](const planner::NodePool& p) { return p.name == layout.pool; });
  if (pool == inventory.node_pools.end()) {
    return FailedPreconditionError("node pool " + layout.pool + " has no ready node now");
  }
  if (pool->NodesWithFreeGpus(layout.gpus_per_node) < layout.nodes) {
    return FailedPreconditionError("node pool " + layout.pool + " has " +
                                   std::to_string(pool->free_gpus) + " free GPUs now; " +
                                   std::to_string(layout.nodes) + " nodes with " +
                                   std::to_string(layout.gpus_per_node) + " free each are needed");
  }
  const planner::Evaluation e =
      planner::Evaluate(job, layout, *pool, *gpu, calibration.Find(layout.gpu_type), constants);
  if (!e.memory.fits()) {
    return FailedPreconditionError("it needs " + cli::FormatGiB(e.memory.total_bytes()) +
                                   " per GPU now, with the job's memory margin, more than the "
                                   "GPU's " +
                                   cli::FormatGiB(e.memory.capacity_bytes));
  }
  return e;
}

// What of the step unit (status.stepUnit) `spec` changes after steps were
// done, in words; nullopt when nothing.
std::optional<std::string> StepUnitChange(const PersistedState& state,
                                          const planner::JobSpec& spec) {
  if (!state.step_unit || state.steps_completed <= 0) return std::nullopt;
  std::string changed;
  if (state.step_unit->global_batch_size != spec.training.global_batch_size) {
    changed = "spec.training.globalBatchSize changed from " +
              std::to_string(state.step_unit->global_batch_size) + " to " +
              std::to_string(spec.training.global_batch_size);
  }
  if (state.step_unit->sequence_length != spec.model.sequence_length) {
    if (!changed.empty()) changed += " and ";
    changed += "spec.model.sequenceLength changed from " +
               std::to_string(state.step_unit->sequence_length) + " to " +
               std::to_string(spec.model.sequence_length);
  }
  if (changed.empty()) return std::nullopt;
  return changed;
}

std::string StepUnitChangedMessage(const std::string& change, int64_t steps) {
  return change + " after " + std::to_string(steps) +
         " steps were trained at the old value: checkpoints count optimizer steps, which would "
         "then count as steps of the new batch.";
}

}  // namespace pacer::controller
