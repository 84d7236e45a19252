// The search: every feasible layout of a job on an inventory, the best by the
// job's objective, the runners-up, and why the rest lost.
//
// Deterministic: the same inputs give the same result (ties broken by a total
// order on layouts). No clocks: `now_unix_seconds` is passed in.
// Thread-safety: pure; Plan() may run concurrently on different inputs.
#ifndef PACER_PLANNER_SEARCH_H_
#define PACER_PLANNER_SEARCH_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pacer/planner/calibration.h"
#include "pacer/planner/cost_model.h"
#include "pacer/planner/inventory.h"
#include "pacer/planner/job_spec.h"
#include "pacer/status.h"

namespace pacer::planner {

// Why a candidate lost. Counted per reason for `pacer explain`.
enum class RejectReason {
  kGpuTypeNotAllowed,     // not in spec.resources.gpuTypes
  kPrecisionUnsupported,  // the GPU cannot run spec.training.precision
  kGpuCountLimits,        // outside spec.resources.minGPUs..maxGPUs
  kNotEnoughFreeGpus,     // the pool lacks free GPUs for this many nodes
  kLayoutIndivisible,     // t must divide heads and GPUs per node; p layers
  kBatchIndivisible,      // no micro-batch b with b x k x d = GBS
  kOutOfMemory,           // predicted memory exceeds the GPU's
  kMissesDeadline,        // fits, but finishes after the deadline
  kDominated,             // meets everything, but another plan is better
};
inline constexpr int kRejectReasonCount = 9;
const char* RejectReasonName(RejectReason r);  // "out-of-memory", ...

struct RejectionSummary {
  RejectReason reason = RejectReason::kDominated;
  int64_t count = 0;
  // The best candidate rejected for this reason (by the objective), when one
  // was evaluated far enough to have predictions, and a one-line detail
  // ("needs 93.1 GiB of 74.5 GiB usable").
  std::optional<Evaluation> best;
  std::string detail;
};

// What would make an infeasible job feasible.
struct InfeasibleAdvice {
  double late_seconds = 0;  // earliest_completion_unix_seconds - deadline (whole seconds)
  int64_t earliest_completion_unix_seconds = 0;  // with the GPUs available
  std::optional<int> gpus_needed;      // total GPUs (of the best type) that would meet it
  std::optional<std::string> gpus_needed_type;
  // Global batch sizes near the requested one that divide better (more
  // layouts possible), closest first.
  std::vector<int64_t> nearby_global_batch_sizes;
  std::string summary;  // one paragraph for humans
};

struct PlanOptions {
  int64_t now_unix_seconds = 0;
  int alternatives = 5;  // runners-up to return
  // For sweeps: consider only layouts with exactly this many GPUs and ignore
  // free-GPU limits (what the job would need, not what is free now).
  std::optional<int> exact_gpus;
  bool ignore_free_gpus = false;
  // A job that has already run plans on when its deadline has passed: the
  // fastest plan, feasible = false, instead of InvalidArgument ("in the
  // past"), which is an error in a new job's spec but would fail a job
  // that only restarts late (a worker failure, a drained node).
  bool deadline_may_have_passed = false;
  ModelConstants constants;
};

struct SearchStats {
  int64_t layouts_considered = 0;  // enumerated (t, p, pool, nodes, ...) tuples
  int64_t evaluated = 0;           // full cost-model evaluations
  int64_t pruned = 0;              // skipped by a bound without evaluation
};

struct PlanResult {
  bool feasible = false;           // a plan meets the deadline (or there is none)
  std::optional<Evaluation> plan;  // the chosen plan (the fastest when infeasible)
  std::vector<Evaluation> alternatives;
  std::vector<RejectionSummary> rejections;  // one per reason with count > 0
  std::optional<InfeasibleAdvice> advice;    // when !feasible and a plan exists
  std::optional<int64_t> deadline_unix_seconds;
  int64_t now_unix_seconds = 0;
  std::vector<std::string> warnings;  // e.g. the Chinchilla data warning
  SearchStats stats;

  // plan->total.total_seconds after now, as a timestamp.
  int64_t predicted_completion_unix_seconds() const;
};

// Checks what only the inventory and the clock can tell about a job, before
// any search: the deadline (or creation + maxDuration) must be in the future,
// spec.resources.gpuTypes must name catalog types, and pinned tensor /
// pipeline sizes must divide the heads / layers. InvalidArgument naming the
// field and the fix. Plan() and Sweep() call it first. With
// `deadline_may_have_passed` (PlanOptions), a past deadline is no error.
Status ValidateForPlanning(const JobSpec& job, const Inventory& inventory, int64_t now_unix_seconds,
                           bool deadline_may_have_passed = false);

// Plans `job` on `inventory`. Errors: InvalidArgument from
// ValidateForPlanning;
// FailedPrecondition when no layout fits at all (the message says the
// tightest constraint and how to relax it). A job that fits but cannot meet
// its deadline is not an error: feasible = false and the fastest plan.
StatusOr<PlanResult> Plan(const JobSpec& job, const Inventory& inventory,
                          const Calibration& calibration, const PlanOptions& options);

// One row of a sweep: the best plan using exactly `gpus` GPUs (fastest under
// the `time` objective, cheapest meeting the deadline under `cost`), with free
// GPU limits ignored. Counts outside the job's spec.resources minGPUs..maxGPUs
// are not planned: they get no plan and rejected_by kGpuCountLimits.
struct SweepPoint {
  int gpus = 0;
  std::optional<Evaluation> best;  // nullopt when no layout of that size fits
  bool meets_deadline = false;
  // Why there is no plan, when best is empty: the constraint to blame
  // (kGpuCountLimits, kLayoutIndivisible: no TP x PP divides the count,
  // kBatchIndivisible: the global batch does not divide by data parallel x
  // micro-batch, kOutOfMemory, ...) and a sentence naming the numbers.
  std::optional<RejectReason> rejected_by;
  std::string reason;
};

// Sweeps GPU counts `gpu_counts` (ascending). Errors: ValidateForPlanning's.
StatusOr<std::vector<SweepPoint>> Sweep(const JobSpec& job, const Inventory& inventory,
                              const Calibration& calibration, const std::vector<int>& gpu_counts,
                              const PlanOptions& options);

}  // namespace pacer::planner

#endif  // PACER_PLANNER_SEARCH_H_
