#include "pacer/planner/job_spec.h"

#include <algorithm>
#include <cmath>

#include "pacer/planner/gpu_catalog.h"

namespace pacer::planner {

bool IsMixedPrecision(Precision p) {
  return p == Precision::kBf16 || p == Precision::kFp16 || p == Precision::kFp8;
}

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kTf32:
      return "tf32";
    case Precision::kFp16:
      return "fp16";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp8:
      return "fp8";
  }
  return "unknown";
}

const char* OptimizerName(Optimizer o) {
  switch (o) {
    case Optimizer::kAdamW:
      return "adamw";
    case Optimizer::kAdam:
      return "adam";
    case Optimizer::kSgd:
      return "sgd";
    case Optimizer::kSgdMomentum:
      return "sgd-momentum";
    case Optimizer::kAdafactor:
      return "adafactor";
  }
  return "unknown";
}

const char* RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "unknown";
}

const char* FfnKindName(FfnKind f) {
  switch (f) {
    case FfnKind::kGelu:
      return "gelu";
    case FfnKind::kSwiglu:
      return "swiglu";
  }
  return "unknown";
}

const char* ObjectiveName(Objective o) {
  switch (o) {
    case Objective::kCost:
      return "cost";
    case Objective::kTime:
      return "time";
  }
  return "unknown";
}

const char* AttentionKernelName(AttentionKernel a) {
  switch (a) {
    case AttentionKernel::kFused:
      return "fused";
    case AttentionKernel::kUnfused:
      return "unfused";
  }
  return "unknown";
}

const char* Fp8RecipeName(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::kDelayed:
      return "delayed";
    case Fp8Recipe::kCurrent:
      return "current";
    case Fp8Recipe::kBlockwise:
      return "blockwise";
  }
  return "unknown";
}

std::optional<int64_t> EffectiveDeadline(const JobSpec& job, int64_t now_unix_seconds) {
  if (job.deadline_unix_seconds) return job.deadline_unix_seconds;
  if (!job.max_duration_seconds) return std::nullopt;
  // Counted from creation, but never from a time after now: a creation time
  // in the future (written by hand, or an API server's clock ahead of ours)
  // would move the deadline as far.
  const int64_t start =
      std::min(job.creation_unix_seconds.value_or(now_unix_seconds), now_unix_seconds);
  // The parser bounds maxDuration far below int64's range; the clamp only
  // keeps a hand-built JobSpec from overflowing.
  const double end = static_cast<double>(start) + std::floor(*job.max_duration_seconds);
  if (!(end < 9.2e18)) return INT64_MAX;
  return static_cast<int64_t>(end);
}

double TotalSequences(const JobSpec& job) {
  const double epochs = job.data.epochs;
  if (job.data.samples) return *job.data.samples * epochs;
  if (job.data.tokens && job.model.sequence_length > 0) {
    return *job.data.tokens / job.model.sequence_length * epochs;
  }
  return 0;
}

double SamplesPerEpoch(const JobSpec& job) {
  return job.data.samples ? *job.data.samples
                          : std::ceil(job.data.tokens.value_or(0) / job.model.sequence_length);
}

double OptimizerSteps(const JobSpec& job) {
  return std::ceil(SamplesPerEpoch(job) / static_cast<double>(job.training.global_batch_size)) *
         job.data.epochs;
}

bool AllowsGpuType(const ResourcesSpec& resources, const GpuCatalog& catalog,
                   const std::string& gpu_type) {
  if (resources.gpu_types.empty()) return true;
  return std::any_of(resources.gpu_types.begin(), resources.gpu_types.end(),
                     [&](const std::string& name) { return catalog.Same(name, gpu_type); });
}

}  // namespace pacer::planner
