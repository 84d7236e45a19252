// Plan() and Sweep(): input checks that need the inventory or the clock,
// the search, and the advice for jobs that cannot meet their deadline.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "pacer/planner/job_parser.h"
#include "pacer/planner/layer_shapes.h"
#include "pacer/planner/model_math.h"
#include "pacer/planner/search.h"
#include "pacer/planner/units.h"
#include "search_internal.h"
#include "text.h"

namespace pacer::planner {

const char* RejectReasonName(RejectReason r) {
  switch (r) {
    case RejectReason::kGpuTypeNotAllowed:
      return "gpu-type-not-allowed";
    case RejectReason::kPrecisionUnsupported:
      return "precision-unsupported";
    case RejectReason::kGpuCountLimits:
      return "outside-gpu-limits";
    case RejectReason::kNotEnoughFreeGpus:
      return "not-enough-free-gpus";
    case RejectReason::kLayoutIndivisible:
      return "layout-indivisible";
    case RejectReason::kBatchIndivisible:
      return "batch-indivisible";
    case RejectReason::kOutOfMemory:
      return "out-of-memory";
    case RejectReason::kMissesDeadline:
      return "misses-deadline";
    case RejectReason::kDominated:
      return "dominated";
  }
  return "unknown";
}

int64_t PlanResult::predicted_completion_unix_seconds() const {
  if (!plan) return now_unix_seconds;
  return CompletionUnixSeconds(now_unix_seconds, plan->total.total_seconds);
}

namespace internal {

std::vector<int64_t> NearbyGlobalBatchSizes(int64_t gbs, int64_t max_gbs) {
  int64_t current = 1;  // the largest power of two dividing gbs
  while (gbs % (current * 2) == 0) current *= 2;
  const int64_t lo =
      std::max<int64_t>(1, static_cast<int64_t>(std::floor(static_cast<double>(gbs) * 0.8)));
  // Never one the parser would refuse: at most its limit, and at most the
  // samples in one epoch (job_parser.cc).
  const int64_t hi =
      std::min<int64_t>({kMaxGlobalBatchSize, max_gbs,
                         static_cast<int64_t>(std::ceil(static_cast<double>(gbs) * 1.25))});
  // Most divisible first (they open the most data-parallel sizes), then
  // nearest, then smaller: the values divisible by exactly f are the odd
  // multiples of f, so each f from the largest down gives its nearest few
  // without a scan of the whole range (45 million values near 1e8).
  const int64_t min_f = std::max<int64_t>(2 * current, 8);
  int64_t f = 1;
  while (f * 2 <= hi) f *= 2;
  std::vector<int64_t> out;
  for (; f >= min_f && out.size() < 3; f /= 2) {
    std::vector<std::pair<int64_t, int64_t>> scored;  // (distance, value)
    const int64_t k0 = gbs / f;
    for (int64_t k = std::max<int64_t>(1, k0 - 6); k <= k0 + 6; ++k) {
      const int64_t g = k * f;
      if (k % 2 == 1 && g >= lo && g <= hi && g != gbs) scored.push_back({std::llabs(g - gbs), g});
    }
    std::sort(scored.begin(), scored.end());
    for (size_t i = 0; i < scored.size() && out.size() < 3; ++i) out.push_back(scored[i].second);
  }
  return out;
}

}  // namespace internal

namespace {

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

std::string Format(const char* fmt, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), fmt, value);
  return buffer;
}

// Pools whose GPU type the job allows (types already validated).
StatusOr<std::vector<int>> AllowedPools(const JobSpec& job, const Inventory& inventory,
                                        int64_t* not_allowed) {
  std::vector<std::string> allowed;
  for (const std::string& name : job.resources.gpu_types) {
    if (const GpuType* gpu = inventory.catalog.Find(name)) allowed.push_back(gpu->name);
  }
  std::vector<int> pools;
  for (size_t i = 0; i < inventory.node_pools.size(); ++i) {
    if (AllowsGpuType(job.resources, inventory.catalog, inventory.node_pools[i].gpu_type)) {
      pools.push_back(static_cast<int>(i));
    } else {
      ++*not_allowed;
    }
  }
  if (pools.empty()) {
    std::vector<std::string> have;
    for (const NodePool& p : inventory.node_pools) have.push_back(p.name + " (" + p.gpu_type + ")");
    return FailedPreconditionError(
        "no node pool has an allowed GPU type (spec.resources.gpuTypes: " + Join(allowed) +
        "); the cluster has " + (have.empty() ? std::string("no pools") : Join(have)) +
        ": allow one of those types or add a pool");
  }
  return pools;
}

// Explains, when nothing fits at all, which constraint bit hardest;
// `*blamed` (when given) gets that constraint.
Status NothingFits(const JobSpec& job, const internal::SearchOutcome& outcome,
                   std::optional<RejectReason>* blamed) {
  const auto& r = outcome.rejections;
  auto count = [&r](RejectReason reason) { return r[static_cast<int>(reason)].count; };
  const RejectionSummary& oom = r[static_cast<int>(RejectReason::kOutOfMemory)];
  if (oom.best) {
    // Only what the closest layout does not do already: advising ZeRO-3 or
    // full recomputation to a layout that uses them contradicts the job.
    const Layout& closest = oom.best->layout;
    // More GPUs only where a limit kept larger layouts out of the search:
    // otherwise they were tried and did not fit either (or the global
    // batch and the model's shape allow no larger layout).
    std::vector<std::string> fixes;
    // (The GPU-count rejections also count layouts below minGPUs: only a
    // maxGPUs can have kept larger ones out.)
    if (job.resources.max_gpus && count(RejectReason::kGpuCountLimits) > 0) {
      fixes.push_back("allow more GPUs (spec.resources.maxGPUs is " +
                      std::to_string(*job.resources.max_gpus) + ")");
    }
    if (count(RejectReason::kNotEnoughFreeGpus) > 0) {
      fixes.push_back("more GPUs (" + r[static_cast<int>(RejectReason::kNotEnoughFreeGpus)].detail +
                      ")");
    }
    fixes.push_back("GPUs with more memory");
    if (closest.zero_stage < 3) fixes.push_back("ZeRO stage 3");
    if (closest.recompute != Recompute::kFull) fixes.push_back("full activation checkpointing");
    fixes.push_back(closest.micro_batch_size > 1 ? "a smaller micro-batch or sequence length"
                                                 : "a shorter sequence length");
    if (blamed != nullptr) *blamed = RejectReason::kOutOfMemory;
    return FailedPreconditionError("no layout fits in GPU memory: the closest, " +
                                   closest.ToString() + ", " + oom.detail + "; " + Join(fixes));
  }
  for (RejectReason reason :
       {RejectReason::kNotEnoughFreeGpus, RejectReason::kGpuCountLimits,
        RejectReason::kPrecisionUnsupported, RejectReason::kLayoutIndivisible}) {
    if (count(reason) > 0) {
      if (blamed != nullptr) *blamed = reason;
      return FailedPreconditionError(std::string("no layout is possible (") +
                                     RejectReasonName(reason) +
                                     "): " + r[static_cast<int>(reason)].detail);
    }
  }
  return FailedPreconditionError("no layout is possible for this job on this inventory");
}

void AddAdvice(const JobSpec& job, const Inventory& inventory, const Calibration& calibration,
               const std::vector<int>& pools, int64_t deadline, const PlanOptions& options,
               PlanResult* result) {
  const Evaluation& fastest = *result->plan;
  InfeasibleAdvice advice;
  advice.earliest_completion_unix_seconds =
      CompletionUnixSeconds(options.now_unix_seconds, fastest.total.total_seconds);
  advice.late_seconds = static_cast<double>(advice.earliest_completion_unix_seconds - deadline);
  if (deadline <= options.now_unix_seconds) {
    // A job that already ran, planned on past its deadline: no number of
    // GPUs or batch size meets a deadline that has passed.
    advice.summary = "The deadline passed at " + FormatRfc3339(deadline) + "; the fastest plan (" +
                     fastest.layout.ToString() + ") finishes " +
                     FormatDurationHuman(advice.late_seconds) + " after it, at " +
                     FormatRfc3339(advice.earliest_completion_unix_seconds) + ".";
    result->advice = std::move(advice);
    return;
  }

  // How many GPUs would it take, ignoring what is free now and maxGPUs?
  JobSpec relaxed = job;
  relaxed.resources.max_gpus.reset();
  relaxed.objective = Objective::kCost;
  PlanOptions wide = options;
  wide.ignore_free_gpus = true;
  wide.alternatives = 0;
  const internal::SearchOutcome unlimited =
      internal::RunSearch(relaxed, inventory, calibration, pools, deadline, wide);
  if (unlimited.best) {
    advice.gpus_needed = unlimited.best->layout.gpus();
    advice.gpus_needed_type = unlimited.best->layout.gpu_type;
  }
  // The parser refuses a global batch above the samples in one epoch, so no
  // suggestion exceeds them (a job built without data has no such limit;
  // the min keeps the conversion in range when the data is far larger).
  const double samples_per_epoch = SamplesPerEpoch(job);
  const int64_t max_gbs = samples_per_epoch >= 1
                              ? static_cast<int64_t>(std::floor(std::min(
                                    samples_per_epoch, static_cast<double>(kMaxGlobalBatchSize))))
                              : kMaxGlobalBatchSize;
  advice.nearby_global_batch_sizes =
      internal::NearbyGlobalBatchSizes(job.training.global_batch_size, max_gbs);

  // A completion no date can hold (absurdly slow hardware: millennia) was
  // written as 9999-12-31T23:59:59Z, and the advice moved the deadline to
  // that instant, before the completion.
  const bool beyond_dates = advice.earliest_completion_unix_seconds > kLatestRfc3339UnixSeconds;
  const std::string when =
      (beyond_dates ? "after " : "at ") + FormatRfc3339(advice.earliest_completion_unix_seconds);
  std::string s = "The fastest plan (" + fastest.layout.ToString() + ") finishes " +
                  FormatDurationHuman(advice.late_seconds) + " after the deadline, " + when +
                  ". To meet it: ";
  std::vector<std::string> fixes;
  if (advice.gpus_needed) {
    fixes.push_back("make " + std::to_string(*advice.gpus_needed) + " " + *advice.gpus_needed_type +
                    " GPUs available (the chosen plan uses " +
                    std::to_string(fastest.layout.gpus()) + ")");
  } else {
    // Why more GPUs do not help: the fastest layout on any number of them
    // already splits the batch as far as it goes (data parallelism is capped
    // by the global batch), or it stops short of that
    // because more replicas would be slower (their collectives outgrow the
    // work split: the network, not the batch, is the limit). It blamed the
    // batch in both cases, also for a one-node plan on a slow network.
    const Evaluation& widest = unlimited.fastest ? *unlimited.fastest : fastest;
    const Layout& w = widest.layout;
    // One sequence per pass, and no more passes than it takes to keep the
    // pipeline's stages busy: more replicas would leave a stage idle.
    const bool batch_bound = w.micro_batch_size == 1 &&
                             w.gradient_accumulation_steps <= std::max(1, w.pipeline_parallel);
    fixes.push_back(
        "no number of GPUs of the allowed types meets it at global batch " +
        std::to_string(job.training.global_batch_size) +
        (batch_bound
             ? std::string(" (data parallelism is capped by the global batch)")
             : " (the fastest layout on any number of them, " + w.ToString() + " on " +
                   std::to_string(w.gpus()) +
                   " GPUs, stops there: more replicas would spend more time in collectives than "
                   "they save; a faster network or interconnect, or a larger global batch, "
                   "would help)"));
  }
  if (!beyond_dates) {
    fixes.push_back("move the deadline to " +
                    FormatRfc3339(advice.earliest_completion_unix_seconds) + " or later");
  }
  if (!advice.nearby_global_batch_sizes.empty()) {
    std::vector<std::string> sizes;
    for (int64_t g : advice.nearby_global_batch_sizes) sizes.push_back(std::to_string(g));
    fixes.push_back("or use a global batch that divides into more layouts (" + Join(sizes) + ")");
  }
  advice.summary = s + Join(fixes) + ".";
  result->advice = std::move(advice);
}

}  // namespace

Status ValidateForPlanning(const JobSpec& job, const Inventory& inventory, int64_t now_unix_seconds,
                           bool deadline_may_have_passed) {
  if (auto deadline = EffectiveDeadline(job, now_unix_seconds);
      !deadline_may_have_passed && deadline && *deadline <= now_unix_seconds) {
    const std::string when = FormatRfc3339(*deadline);
    const std::string now = FormatRfc3339(now_unix_seconds);
    if (job.deadline_unix_seconds) {
      return InvalidArgumentError("spec.deadline: " + when + " is in the past (now is " + now +
                                  "); set a later deadline");
    }
    return InvalidArgumentError("spec.maxDuration: the job's deadline " + when +
                                " (creation time + maxDuration) is in the past (now is " + now +
                                "); set a longer maxDuration");
  }
  for (size_t i = 0; i < job.resources.gpu_types.size(); ++i) {
    if (inventory.catalog.Find(job.resources.gpu_types[i]) == nullptr) {
      return InvalidArgumentError("spec.resources.gpuTypes[" + std::to_string(i) +
                                  "]: unknown GPU type " +
                                  text::QuoteForMessage(job.resources.gpu_types[i]) +
                                  "; known types: " + inventory.catalog.NamesForMessage());
    }
  }
  const ModelSpec& m = job.model;
  if (auto t = job.parallelism.tensor_parallel) {
    if (std::string why = TensorParallelSplitError(m, *t); !why.empty()) {
      return InvalidArgumentError("spec.parallelism.tensorParallel: " + why + ", got " +
                                  std::to_string(*t));
    }
  }
  if (auto p = job.parallelism.pipeline_parallel) {
    if (m.layers % *p != 0) {
      return InvalidArgumentError("spec.parallelism.pipelineParallel: must divide the layers (" +
                                  std::to_string(m.layers) + "), got " + std::to_string(*p));
    }
  }
  return Status::Ok();
}

namespace {

// `*blamed` (when given) gets the constraint an error blames, if any.
StatusOr<PlanResult> PlanImpl(const JobSpec& job, const Inventory& inventory,
                              const Calibration& calibration, const PlanOptions& options,
                              bool with_advice, std::optional<RejectReason>* blamed = nullptr) {
  PlanResult result;
  result.now_unix_seconds = options.now_unix_seconds;
  result.deadline_unix_seconds = EffectiveDeadline(job, options.now_unix_seconds);
  RETURN_IF_ERROR(ValidateForPlanning(job, inventory, options.now_unix_seconds,
                                      options.deadline_may_have_passed));
  int64_t not_allowed = 0;
  StatusOr<std::vector<int>> allowed = AllowedPools(job, inventory, &not_allowed);
  if (!allowed.ok()) {
    if (blamed != nullptr) *blamed = RejectReason::kGpuTypeNotAllowed;
    return allowed.status();
  }
  const std::vector<int>& pools = *allowed;

  internal::SearchOutcome outcome = internal::RunSearch(job, inventory, calibration, pools,
                                                        result.deadline_unix_seconds, options);
  outcome.rejections[static_cast<int>(RejectReason::kGpuTypeNotAllowed)].count += not_allowed;
  if (not_allowed > 0) {
    outcome.rejections[static_cast<int>(RejectReason::kGpuTypeNotAllowed)].detail =
        "node pools whose GPU type is not in spec.resources.gpuTypes";
  }
  result.stats = outcome.stats;
  for (auto& r : outcome.rejections) {
    if (r.count > 0) result.rejections.push_back(r);
  }
  if (!outcome.fastest) return NothingFits(job, outcome, blamed);

  if (outcome.best) {
    result.feasible = true;
    result.plan = std::move(outcome.best);
    result.alternatives = std::move(outcome.alternatives);
  } else {
    result.feasible = false;
    result.plan = std::move(outcome.fastest);
    if (with_advice) {
      AddAdvice(job, inventory, calibration, pools, *result.deadline_unix_seconds, options,
                &result);
    }
  }

  if (job.data.tokens || job.data.samples) {
    const double tokens = TotalSequences(job) * job.model.sequence_length;
    const double params = TotalParameters(job.model);
    if (tokens < kChinchillaTokensPerParameter * params) {
      result.warnings.push_back("training on " + Format("%.3g", tokens) + " tokens is " +
                                Format("%.1f", tokens / params) +
                                " tokens per parameter; Chinchilla's compute-optimal "
                                "is ~20 (" +
                                Format("%.3g", kChinchillaTokensPerParameter * params) +
                                " tokens for this model): the model may be under-trained");
    }
  }
  if (job.training.precision == Precision::kFp8 && job.worker.image.empty()) {
    // The planner times fp8 GEMMs; Pacer's own pacer-worker refuses fp8
    // plans (neither its CPU nor its GPU backend runs fp8 GEMMs yet).
    result.warnings.push_back(
        "precision fp8: Pacer's pacer-worker does not run fp8 GEMMs and refuses the plan; give "
        "spec.worker.image a training image that does (for example TransformerEngine)");
  }
  if (IsMixedPrecision(job.training.precision) && !job.training.stack.fp32_gradients &&
      job.worker.image.empty()) {
    // The plan counts 16-bit gradients; Pacer's worker keeps fp32 ones.
    result.warnings.push_back(
        "spec.training.stack.fp32Gradients is false: planned with 16-bit gradients (2 bytes per "
        "parameter held and reduced), but Pacer's pacer-worker keeps fp32 gradients (4 bytes) and "
        "may not fit this plan; leave fp32Gradients at true, or give spec.worker.image a training "
        "image that reduces gradients in 16 bits");
  }
  if (job.model.architecture_inferred) {
    const ModelSpec& m = job.model;
    result.warnings.push_back(
        "spec.model gives only parameters; planned for an inferred Llama-style shape (" +
        std::to_string(m.layers) + " layers, hidden " + std::to_string(m.hidden_size) + ", " +
        std::to_string(m.attention_heads) + " heads, " + std::to_string(m.kv_heads) +
        " KV heads, SwiGLU " + std::to_string(m.ffn_hidden_size) + ", vocabulary " +
        std::to_string(m.vocab_size) + "): give the architecture for better estimates");
  }
  return result;
}

}  // namespace

StatusOr<PlanResult> Plan(const JobSpec& job, const Inventory& inventory,
                          const Calibration& calibration, const PlanOptions& options) {
  return PlanImpl(job, inventory, calibration, options, /*with_advice=*/true);
}

StatusOr<std::vector<SweepPoint>> Sweep(const JobSpec& job, const Inventory& inventory,
                                        const Calibration& calibration,
                                        const std::vector<int>& gpu_counts,
                                        const PlanOptions& options) {
  RETURN_IF_ERROR(ValidateForPlanning(job, inventory, options.now_unix_seconds,
                                      options.deadline_may_have_passed));
  int64_t not_allowed = 0;
  const StatusOr<std::vector<int>> pools = AllowedPools(job, inventory, &not_allowed);
  const int min_gpus = job.resources.min_gpus;
  const std::optional<int> max_gpus = job.resources.max_gpus;
  std::vector<SweepPoint> points;
  for (int gpus : gpu_counts) {
    SweepPoint point;
    point.gpus = gpus;
    if (gpus < min_gpus || (max_gpus && gpus > *max_gpus)) {
      // The job could never run at this count: planning it anyway would show
      // a what-if the controller never launches.
      point.rejected_by = RejectReason::kGpuCountLimits;
      point.reason = "outside the job's GPU limits (spec.resources minGPUs " +
                     std::to_string(min_gpus) +
                     (max_gpus ? ", maxGPUs " + std::to_string(*max_gpus) : std::string()) + ")";
      points.push_back(std::move(point));
      continue;
    }
    if (pools.ok()) {
      if (auto diagnosis = internal::DiagnoseGpuCount(job, inventory, *pools, gpus)) {
        point.rejected_by = diagnosis->reason;
        point.reason = std::move(diagnosis->message);
        points.push_back(std::move(point));
        continue;
      }
    }
    PlanOptions at = options;
    at.exact_gpus = gpus;
    at.ignore_free_gpus = true;
    at.alternatives = 0;
    std::optional<RejectReason> blamed;
    StatusOr<PlanResult> r = PlanImpl(job, inventory, calibration, at, false, &blamed);
    if (r.ok()) {
      point.best = r->plan;
      point.meets_deadline = r->feasible;
    } else {
      point.reason = r.status().message();
      point.rejected_by = blamed;
    }
    points.push_back(std::move(point));
  }
  return points;
}

}  // namespace pacer::planner
