// The GPU device's bf16 operand copies under a bf16 plan on fp32 storage,
// on the CPU (bf16_operand_device.h): a GEMM reads a weights buffer's
// rounded copy, rounded again only after a write the GPU device marks
// (Wrote), so a write to the weights through an unmarked entry point would
// leave GEMMs reading the old weights, on the GPU only and silently. Here
// every plan shape the executor runs (data parallelism under each ZeRO
// stage, tensor and pipeline parallelism, both attention kernels,
// recomputation) takes three steps with the copies and three rounding every
// operand afresh, and must reach the same parameters bit for bit.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bf16_operand_device.h"
#include "core/step_executor.h"
#include "cpu/cpu_device.h"
#include "step_runs.h"
#include "test_plans.h"

namespace pacer::worker {
namespace {

using testing::Bf16OperandCounts;
using testing::Bf16OperandDevice;
using testing::Plan;
using testing::TinyConfig;

struct ThreeStepRun {
  std::vector<std::vector<float>> parameters;  // by rank, after three steps
  std::shared_ptr<Bf16OperandCounts> counts = std::make_shared<Bf16OperandCounts>();
};

enum class Operands { kFp32, kFresh, kCopies };

// Three steps of `config`, the GEMMs reading fp32 operands (the plain CPU
// device), bf16 roundings made afresh, or the GPU's copies (with the
// writes of the entry points `unmarked` not marking them stale).
ThreeStepRun ThreeSteps(const WorkerConfig& config, Operands operands,
                        const std::set<std::string>& unmarked = {}) {
  ThreeStepRun run;
  run.parameters.resize(static_cast<size_t>(config.world_size));
  const auto counts = run.counts;
  testing::ExpectAllOk(testing::OnRanks(
      config,
      [&](int rank, StepExecutor& b) -> Status {
        for (int step = 0; step < 3; ++step) {
          ASSIGN_OR_RETURN(StepTiming t, b.RunStep(step));
          (void)t;
        }
        run.parameters[static_cast<size_t>(rank)] = b.parameters();
        return Status::Ok();
      },
      [&]() -> std::unique_ptr<Device> {
        if (operands == Operands::kFp32) return cpu::MakeCpuDevice();
        return std::make_unique<Bf16OperandDevice>(cpu::MakeCpuDevice(),
                                                   operands == Operands::kCopies, counts, unmarked);
      }));
  return run;
}

struct Shape {
  const char* name;
  Plan plan;
};

std::vector<Shape> Shapes() {
  std::vector<Shape> shapes;
  for (int zero = 0; zero <= 3; ++zero) {
    Plan plan;
    plan.d = 2;
    plan.zero = zero;
    shapes.push_back({zero == 0   ? "d=2 ZeRO 0"
                      : zero == 1 ? "d=2 ZeRO 1"
                      : zero == 2 ? "d=2 ZeRO 2"
                                  : "d=2 ZeRO 3",
                      plan});
  }
  Plan tensor;
  tensor.t = 2;
  shapes.push_back({"t=2", tensor});
  Plan pipeline;
  pipeline.p = 2;
  shapes.push_back({"p=2", pipeline});
  Plan unfused = testing::SwigluGqa(planner::Recompute::kFull);
  unfused.attention = planner::AttentionKernel::kUnfused;
  shapes.push_back({"unfused, SwiGLU/GQA, full recomputation", unfused});
  return shapes;
}

TEST(Bf16OperandCopiesTest, CopiesTakeTheStepsFreshRoundingTakes) {
  for (const Shape& shape : Shapes()) {
    const WorkerConfig config = TinyConfig(shape.plan);
    const ThreeStepRun copies = ThreeSteps(config, Operands::kCopies);
    const ThreeStepRun fresh = ThreeSteps(config, Operands::kFresh);
    const ThreeStepRun fp32 = ThreeSteps(config, Operands::kFp32);
    EXPECT_EQ(copies.parameters, fresh.parameters) << shape.name;
    // The rounding is in effect (else the equality above says nothing).
    EXPECT_NE(copies.parameters, fp32.parameters) << shape.name;
    if (shape.plan.zero == 3) {
      // ZeRO 3's GEMMs read the gathered layer (workspace), which the
      // GPU converts at every GEMM: no weights copy is read.
      EXPECT_EQ(copies.counts->weight_reads, 0) << shape.name;
    } else {
      // The copies were read, more often than made: every GEMM of a step
      // reads its weights' copy, made once after the step's update.
      EXPECT_GT(copies.counts->weight_roundings, 0) << shape.name;
      EXPECT_GT(copies.counts->weight_reads, copies.counts->weight_roundings) << shape.name;
    }
    EXPECT_EQ(fresh.counts->weight_reads + fresh.counts->scope_reads, 0) << shape.name;
    if (shape.plan.attention == planner::AttentionKernel::kFused) {
      EXPECT_GT(copies.counts->scope_reads, 0) << shape.name << ": the tiled attention's Q, K, V";
    }
  }
}

// The comparison sees the copies miss a write: the optimizer's update of
// the weights under ZeRO 0, or under ZeRO 1 the update of a rank's shard
// together with the parameter all-gather that brings the other ranks'
// shards (either one alone marks the copy stale before the next GEMM).
TEST(Bf16OperandCopiesTest, AnUnmarkedWriteToTheWeightsChangesTheSteps) {
  struct Case {
    int zero;
    std::set<std::string> unmarked;
  };
  for (const Case& c : {Case{0, {"optimizer"}}, Case{1, {"optimizer", "all-gather"}}}) {
    Plan plan;
    plan.d = 2;
    plan.zero = c.zero;
    const WorkerConfig config = TinyConfig(plan);
    const ThreeStepRun missed = ThreeSteps(config, Operands::kCopies, c.unmarked);
    const ThreeStepRun fresh = ThreeSteps(config, Operands::kFresh);
    EXPECT_NE(missed.parameters, fresh.parameters) << "ZeRO " << c.zero;
  }
}

}  // namespace
}  // namespace pacer::worker
