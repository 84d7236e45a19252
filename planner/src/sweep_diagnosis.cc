// Why a sweep's GPU count has no plan: the constraint to blame, found from
// the layout arithmetic alone. The search skips layouts of other sizes
// silently when asked for an exact count, so its own rejection counts would
// blame whatever happened to be rejected first (often a tensor-parallel size
// that does not divide the heads, true at every count and never the reason).
#include <string>
#include <vector>

#include "pacer/planner/layer_shapes.h"
#include "search_internal.h"

namespace pacer::planner::internal {
namespace {

std::vector<int> DivisorsOf(int64_t n) {
  std::vector<int> out;
  for (int64_t i = 1; i <= n; ++i) {
    if (n % i == 0) out.push_back(static_cast<int>(i));
  }
  return out;
}

std::string JoinInts(const std::vector<int64_t>& values, std::size_t max_shown) {
  std::string out;
  for (std::size_t i = 0; i < values.size() && i < max_shown; ++i) {
    out += (i ? ", " : "") + std::to_string(values[i]);
  }
  if (values.size() > max_shown) out += ", ...";
  return out;
}

bool Contains(const std::vector<int64_t>& values, int64_t v) {
  for (int64_t x : values) {
    if (x == v) return true;
  }
  return false;
}

}  // namespace

std::optional<CountDiagnosis> DiagnoseGpuCount(const JobSpec& job, const Inventory& inventory,
                                               const std::vector<int>& pools, int gpus) {
  const ModelSpec& m = job.model;
  const int64_t gbs = job.training.global_batch_size;
  std::vector<int64_t> tp_sizes, pp_sizes, dp_sizes;  // what was tried, for the message
  bool layout_divides = false;
  for (int index : pools) {
    const NodePool& pool = inventory.node_pools[index];
    const GpuType* gpu = inventory.catalog.Find(pool.gpu_type);
    if (gpu == nullptr || gpu->PeakFlops(job.training.precision) <= 0) continue;
    for (int t : DivisorsOf(pool.gpus_per_node)) {
      if (job.parallelism.tensor_parallel && *job.parallelism.tensor_parallel != t) continue;
      if (!TensorParallelSplitError(m, t).empty()) continue;
      if (!Contains(tp_sizes, t)) tp_sizes.push_back(t);
      for (int p : DivisorsOf(m.layers)) {
        if (job.parallelism.pipeline_parallel && *job.parallelism.pipeline_parallel != p) continue;
        if (!Contains(pp_sizes, p)) pp_sizes.push_back(p);
        if (gpus % (static_cast<int64_t>(t) * p) != 0) continue;
        layout_divides = true;
        const int64_t d = gpus / (static_cast<int64_t>(t) * p);
        if (!Contains(dp_sizes, d)) dp_sizes.push_back(d);
        // Any allowed micro-batch b with b x d dividing the global batch makes
        // the batch arithmetic work; the search decides the rest.
        if (job.training.micro_batch_sizes.empty()) {
          if (gbs % d == 0) return std::nullopt;
        } else {
          for (int b : job.training.micro_batch_sizes) {
            if (gbs % (static_cast<int64_t>(b) * d) == 0) return std::nullopt;
          }
        }
      }
    }
  }
  if (tp_sizes.empty() || pp_sizes.empty()) return std::nullopt;  // the search says why
  const std::string n = std::to_string(gpus);
  if (!layout_divides) {
    return CountDiagnosis{
        RejectReason::kLayoutIndivisible,
        "the layout does not divide " + n + " GPUs: no tensor parallel x pipeline parallel " +
            "(TP x PP) product divides it (TP " + JoinInts(tp_sizes, 8) + "; PP " +
            JoinInts(pp_sizes, 8) + ")"};
  }
  std::string micro = job.training.micro_batch_sizes.empty() ? "any micro-batch" : "micro-batch ";
  if (!job.training.micro_batch_sizes.empty()) {
    std::vector<int64_t> sizes(job.training.micro_batch_sizes.begin(),
                               job.training.micro_batch_sizes.end());
    micro += JoinInts(sizes, 8);
  }
  return CountDiagnosis{
      RejectReason::kBatchIndivisible,
      "the global batch (" + std::to_string(gbs) +
          ") is not divisible by data-parallel degree x micro-batch at " + n +
          " GPUs: data-parallel degrees " + JoinInts(dp_sizes, 8) + " (GPUs / (TP x PP)), " +
          micro};
}

}  // namespace pacer::planner::internal
