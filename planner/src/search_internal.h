// Internal to the planner: the layout search shared by Plan(), Sweep() and
// the infeasibility advice (which re-runs it with relaxed limits).
// Thread-safety: a Searcher is used by one thread; different Searchers share
// nothing mutable.
#ifndef PACER_PLANNER_SRC_SEARCH_INTERNAL_H_
#define PACER_PLANNER_SRC_SEARCH_INTERNAL_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pacer/planner/search.h"

namespace pacer::planner::internal {

// Everything the search found, before advice and formatting.
struct SearchOutcome {
  std::optional<Evaluation> best;     // by the objective among plans meeting the deadline
  std::optional<Evaluation> fastest;  // earliest finish among plans that fit
  std::vector<Evaluation> alternatives;
  std::array<RejectionSummary, kRejectReasonCount> rejections{};
  SearchStats stats;
};

// Searches `pools` (indices into inventory.node_pools, already filtered to
// allowed GPU types) for `job`. `deadline` is absolute Unix seconds.
SearchOutcome RunSearch(const JobSpec& job, const Inventory& inventory,
                        const Calibration& calibration, const std::vector<int>& pools,
                        std::optional<int64_t> deadline, const PlanOptions& options);

// Whether `a` finishes before `b` (ties broken deterministically).
bool FasterThan(const Evaluation& a, const Evaluation& b);
// Whether `a` is better than `b` under the objective (cost uses money when
// `use_money`, else GPU-hours).
bool BetterThan(const Evaluation& a, const Evaluation& b, Objective objective, bool use_money);

// Global batch sizes within [0.8, 1.25] x `gbs` that split over more data-
// parallel sizes (a larger power-of-two factor), most divisible first, then
// nearest; at most 3. None above `max_gbs` (the samples in one epoch: the
// parser refuses a global batch larger than that) or kMaxGlobalBatchSize.
std::vector<int64_t> NearbyGlobalBatchSizes(int64_t gbs, int64_t max_gbs);

// Why no layout uses exactly `gpus` GPUs when the arithmetic of the layout
// is to blame (sweep_diagnosis.cc): kLayoutIndivisible when no allowed
// TP x PP divides the count, kBatchIndivisible when some does but the global
// batch does not divide by data-parallel degree x micro-batch for any of
// them. nullopt when the arithmetic allows a layout (memory or the GPU type
// is then to blame, and the search says so). `pools` as for RunSearch.
struct CountDiagnosis {
  RejectReason reason;
  std::string message;
};
std::optional<CountDiagnosis> DiagnoseGpuCount(const JobSpec& job, const Inventory& inventory,
                                               const std::vector<int>& pools, int gpus);

}  // namespace pacer::planner::internal

#endif  // PACER_PLANNER_SRC_SEARCH_INTERNAL_H_
