// The executor's narrow activations (Storage::kCompute, core/device.h) on
// the CPU, through narrow_storage_device.h, which rounds those buffers to
// bf16 as the GPU device stores them and checks where they go: only to
// entry points the GPU device has bf16 kernels for, never accumulated in
// bf16 by a GEMM; and a step with them stays close to the fp32-storage
// step (the bf16 GEMMs round their operands to bf16 anyway).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cpu/cpu_device.h"
#include "narrow_storage_device.h"
#include "reference_on_chip_device.h"
#include "step_runs.h"
#include "test_plans.h"

namespace pacer::worker {
namespace {

using testing::NarrowLog;
using testing::NarrowStorageDevice;
using testing::OneStepByName;
using testing::Plan;
using testing::StageResult;
using testing::SwigluGqa;
using testing::TinyConfig;

enum class Kernel { kUnfused, kTiled, kOnChip };

const char* KernelName(Kernel k) {
  switch (k) {
    case Kernel::kUnfused:
      return "unfused";
    case Kernel::kTiled:
      return "tiled";
    case Kernel::kOnChip:
      return "on-chip";
  }
  return "?";
}

struct StepRun {
  std::vector<StageResult> stages;
  std::shared_ptr<NarrowLog> log;
};

// One step of `plan` with the attention `kernel`, over narrow storage
// when `narrow`, else over the plain CPU device (or the on-chip reference).
StepRun Step(Plan plan, Kernel kernel, bool narrow) {
  plan.attention = kernel == Kernel::kUnfused ? planner::AttentionKernel::kUnfused
                                              : planner::AttentionKernel::kFused;
  WorkerConfig config = TinyConfig(plan);
  config.model.tied_embeddings = false;
  StepRun run;
  run.log = std::make_shared<NarrowLog>();
  auto log = run.log;
  auto on_chip_calls = std::make_shared<testing::OnChipCalls>();
  const auto base = [kernel, narrow, on_chip_calls]() -> std::unique_ptr<Device> {
    if (kernel == Kernel::kOnChip) {
      // A bf16-stored context is the forward's to bf16 rounding.
      return std::make_unique<testing::ReferenceOnChipDevice>(cpu::MakeCpuDevice(), on_chip_calls,
                                                              narrow ? 1e-2 : 1e-4);
    }
    return cpu::MakeCpuDevice();
  };
  run.stages = OneStepByName(config, [&]() -> std::unique_ptr<Device> {
    if (!narrow) return base();
    return std::make_unique<NarrowStorageDevice>(base(), log);
  });
  return run;
}

std::string Violations(const NarrowLog& log) {
  std::string all;
  for (const std::string& v : log.violations) all += v + "; ";
  return all;
}

// Every attention kernel and recomputation policy, SwiGLU with GQA and
// GELU: narrow buffers reach the GEMMs, norms, activations and the
// attention, and nothing that would convert them through fp32 on the GPU
// or round a running sum in bf16 (the tiled backward's dK and dV).
TEST(NarrowStorageTest, NarrowActivationsReachOnlyEntryPointsWithBf16Kernels) {
  for (const Kernel kernel : {Kernel::kUnfused, Kernel::kTiled, Kernel::kOnChip}) {
    for (const planner::Recompute r :
         {planner::Recompute::kNone, planner::Recompute::kSelective, planner::Recompute::kFull}) {
      for (const bool swiglu : {true, false}) {
        Plan plan = SwigluGqa(r);
        if (!swiglu) plan.ffn = planner::FfnKind::kGelu;
        const StepRun run = Step(plan, kernel, true);
        const std::string what = std::string(KernelName(kernel)) + ", " +
                                 planner::RecomputeName(r) + (swiglu ? ", SwiGLU" : ", GELU");
        EXPECT_TRUE(run.log->violations.empty()) << what << ": " << Violations(*run.log);
        // The feature is on: the large activations are narrow.
        EXPECT_GT(run.log->narrow_calls["gemm"], 0) << what;
        EXPECT_GT(run.log->narrow_calls["attention"] + run.log->narrow_calls["gemm"], 0) << what;
        EXPECT_GT(run.log->narrow_calls["rms-norm"], 0) << what;
        EXPECT_GT(run.log->narrow_calls[swiglu ? "swiglu" : "gelu"], 0) << what;
        // One rank: no collective needs an fp32 view.
        EXPECT_EQ(run.log->collective_views, 0) << what;
      }
    }
  }
}

// Two pipeline stages and two tensor-parallel ranks: the same rules; the
// tensor group's gathers and scatters of narrow activations are the
// collectives that go through fp32 views on the GPU (counted: the known
// cost of tensor parallelism with bf16 activations), the pipeline's
// point-to-point traffic is the fp32 residual stream.
TEST(NarrowStorageTest, PipelineAndTensorParallelRanksKeepTheRules) {
  Plan pipeline = SwigluGqa(planner::Recompute::kSelective);
  pipeline.p = 2;
  const StepRun p2 = Step(pipeline, Kernel::kOnChip, true);
  EXPECT_TRUE(p2.log->violations.empty()) << Violations(*p2.log);
  EXPECT_EQ(p2.log->collective_views, 0);

  Plan tensor = SwigluGqa(planner::Recompute::kNone);
  tensor.t = 2;
  const StepRun t2 = Step(tensor, Kernel::kTiled, true);
  EXPECT_TRUE(t2.log->violations.empty()) << Violations(*t2.log);
  EXPECT_GT(t2.log->collective_views, 0);
}

// bf16 storage of the activations changes the step by rounding only: the
// loss within 1e-3 and every gradient within 5e-3 (about bf16's 2^-8) of
// its matrix's largest element of the fp32-storage step (seen: 2.8e-6 and
// under 5e-3), and not equal to it (the rounding happened).
TEST(NarrowStorageTest, Bf16ActivationsKeepTheStepClose) {
  for (const Kernel kernel : {Kernel::kUnfused, Kernel::kTiled, Kernel::kOnChip}) {
    const Plan plan = SwigluGqa(planner::Recompute::kFull);
    const StepRun wide = Step(plan, kernel, false);
    const StepRun narrow = Step(plan, kernel, true);
    const std::string what = KernelName(kernel);
    ASSERT_EQ(wide.stages.size(), 1u);
    ASSERT_EQ(narrow.stages.size(), 1u);
    const double loss = wide.stages[0].loss;
    std::fprintf(stderr, "%s: loss %.7f with fp32 activations, %.7f with bf16 (%+.2e relative)\n",
                 what.c_str(), loss, narrow.stages[0].loss, narrow.stages[0].loss / loss - 1);
    EXPECT_NEAR(narrow.stages[0].loss, loss, 1e-3 * std::fabs(loss)) << what;
    EXPECT_NE(narrow.stages[0].loss, loss) << what;
    testing::ExpectSameGradients(narrow.stages[0], wide.stages[0], what, 5e-3);
    // Narrow activations take half the bytes.
    EXPECT_LT(narrow.stages[0].peak_memory_bytes, wide.stages[0].peak_memory_bytes) << what;
  }
}

}  // namespace
}  // namespace pacer::worker
