// The executor's narrow activations (Storage::kCompute, core/device.h) on
// the CPU, through narrow_storage_device.h, which rounds those buffers to
// bf16 as the GPU device stores them and checks where they go: only to
// entry points the GPU device has bf16 kernels for, never accumulated in
// bf16 by a GEMM; and a step with them stays close to the fp32-storage
// step (the bf16 GEMMs round their operands to bf16 anyway).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/step_executor.h"
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

// The tiny plan on two data-parallel ranks under ZeRO `zero`, and its
// devices: the plain CPU device (fp32 storage) and bf16 storage over it.
struct TwoRanks {
  explicit TwoRanks(int zero) : config(TinyConfig(PlanFor(zero))) {}
  WorkerConfig config;
  testing::DeviceFactory narrow = [log = std::make_shared<NarrowLog>()] {
    return std::unique_ptr<Device>(
        std::make_unique<NarrowStorageDevice>(cpu::MakeCpuDevice(), log));
  };
  testing::DeviceFactory plain = [] { return cpu::MakeCpuDevice(); };

 private:
  static Plan PlanFor(int zero) {
    Plan plan;
    plan.d = 2;
    plan.zero = zero;
    return plan;
  }
};

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
        // The weights are bf16 too (the embedding reads its table as stored).
        EXPECT_GT(run.log->narrow_calls["embedding"], 0) << what;
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
// loss within 1e-3 (seen: 3.7e-5) and every gradient within 1.5e-2 of its
// matrix's largest element (seen: between 7e-3 and 8.5e-3; the stashed
// layer input and the mid-layer residual are bf16, as in Megatron; the
// GPU smoke test's gradient-norm tolerance is the same 1.5e-2) of the
// fp32-storage step, and not equal to it (the rounding happened).
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
    testing::ExpectSameGradients(narrow.stages[0], wide.stages[0], what, 1.5e-2);
    // Narrow activations take half the bytes. (The peak of all classes
    // need not fall: this tiny model's state outweighs its activations,
    // and bf16 weights beside fp32 master weights hold 2 bytes a parameter
    // more than the CPU device's fp32 weights alone.)
    EXPECT_LT(narrow.stages[0].activations_peak_bytes, wide.stages[0].activations_peak_bytes)
        << what;
  }
}

// With bf16 activations the executor's stash is the planner's bf16
// activation model (docs/planner.md, "Memory per GPU"): the bytes per layer
// in flight (the peak's growth from 8 to 16 layers) of a bf16 plan over
// narrow storage are the planner's plus the two fp32 RMS-norm factors per
// token the executor keeps (8 bytes per token of the rank's shard, which
// the planner's formula leaves out: 1% here at h = 32, 0.05% at h = 4096),
// to 0.1%, on one rank and on each of two tensor-parallel ranks, under no
// and selective recomputation, with the tiled attention (what the
// planner's fused model stores). With fp32 storage the same stash takes
// twice the prediction.
TEST(NarrowStorageTest, Bf16ActivationsPerLayerAreThePlannersPrediction) {
  for (auto [t, r] : {std::pair{1, planner::Recompute::kNone},
                      {1, planner::Recompute::kSelective},
                      {2, planner::Recompute::kNone},
                      {2, planner::Recompute::kSelective}}) {
    const std::string what = "t" + std::to_string(t) + " " + planner::RecomputeName(r);
    std::map<int, double> narrow, wide, predicted;
    for (const int layers : {8, 16}) {
      Plan plan;
      plan.t = t;
      plan.recompute = r;
      WorkerConfig config = TinyConfig(plan);
      config.model.layers = layers;
      ASSERT_EQ(config.precision, planner::Precision::kBf16);
      predicted[layers] = testing::PlannerMemory(config).activations_bytes;
      for (const bool bf16 : {true, false}) {
        auto log = std::make_shared<NarrowLog>();
        std::map<int, double>& measured = bf16 ? narrow : wide;
        testing::ExpectAllOk(testing::OnRanks(
            config,
            [&](int rank, StepExecutor& b) -> Status {
              ASSIGN_OR_RETURN(StepTiming timing, b.RunStep(0));
              (void)timing;
              if (rank == 0) {
                measured[layers] = b.memory().class_peak_bytes(BufferClass::kActivations);
              }
              return Status::Ok();
            },
            [&]() -> std::unique_ptr<Device> {
              if (!bf16) return cpu::MakeCpuDevice();
              return std::make_unique<NarrowStorageDevice>(cpu::MakeCpuDevice(), log);
            }));
      }
      std::fprintf(stderr,
                   "%s, %2d layers: activations bf16 %8.0f fp32 %8.0f predicted %8.0f bytes\n",
                   what.c_str(), layers, narrow[layers], wide[layers], predicted[layers]);
    }
    const double per_layer_predicted = (predicted[16] - predicted[8]) / 8;
    ASSERT_GT(per_layer_predicted, 0);
    const WorkerConfig tiny = TinyConfig(Plan{});
    const double norm_factors =
        2.0 * 4.0 * tiny.micro_batch_size * tiny.model.sequence_length / t;  // bytes per layer
    EXPECT_NEAR((narrow[16] - narrow[8]) / 8 / (per_layer_predicted + norm_factors), 1.0, 1e-3)
        << what;
    EXPECT_NEAR((wide[16] - wide[8]) / 8 / (2 * per_layer_predicted + norm_factors), 1.0, 1e-3)
        << what;
  }
}

// A bf16 plan over narrow storage holds the model state the planner counts
// (PredictMemory, docs/planner.md "Model states"): weights in bf16 (2 bytes
// a parameter; ZeRO 3 shards them), fp32 gradients (4; ZeRO 2 and 3 shard
// them) and 12 bytes of optimizer state (the fp32 master weights and both
// moments; sharded from ZeRO 1), on each of two data-parallel ranks. Before
// the master weights moved into the optimizer state, the weights were the
// fp32 master copy: twice the planner's weights and two thirds of its
// optimizer state.
TEST(NarrowStorageTest, Bf16StateIsThePlannersForEveryZeroStage) {
  for (int zero = 0; zero <= 3; ++zero) {
    const TwoRanks two(zero);
    const WorkerConfig& config = two.config;
    ASSERT_EQ(config.precision, planner::Precision::kBf16);
    const std::vector<testing::StateBytes> measured =
        testing::PeakStateBytes(config, 2, two.narrow);
    const planner::MemoryBreakdown predicted = testing::PlannerMemory(config);
    for (size_t r = 0; r < measured.size(); ++r) {
      testing::ExpectPredictedState(
          measured[r], predicted,
          "bf16 ZeRO " + std::to_string(zero) + " rank " + std::to_string(r));
    }
  }
}

// The fp32 master weights are the parameters: AdamW's small updates
// accumulate in them, not in the bf16 weights (where most would round
// away), and a checkpoint keeps them, so a run resumed from step 2 takes
// step 3 exactly as the uninterrupted run does.
TEST(NarrowStorageTest, MasterWeightsCarryTheUpdatesAndTheirCheckpoint) {
  const TwoRanks two(1);
  const WorkerConfig& config = two.config;
  const testing::DeviceFactory& narrow = two.narrow;
  std::vector<NamedBuffers> saved(2);
  std::vector<uint64_t> declared_bytes(2);
  std::vector<std::vector<float>> before(2), after(2), resumed(2);
  testing::ExpectAllOk(testing::OnRanks(
      config,
      [&](int rank, StepExecutor& b) -> Status {
        const size_t r = static_cast<size_t>(rank);
        for (int step = 0; step < 2; ++step) {
          ASSIGN_OR_RETURN(StepTiming t, b.RunStep(step));
          (void)t;
        }
        before[r] = b.parameters();
        declared_bytes[r] = b.CheckpointBufferBytes();
        ASSIGN_OR_RETURN(saved[r], b.SaveBuffers());
        ASSIGN_OR_RETURN(StepTiming t, b.RunStep(2));
        (void)t;
        after[r] = b.parameters();
        return Status::Ok();
      },
      narrow));
  testing::ExpectAllOk(testing::OnRanks(
      config,
      [&](int rank, StepExecutor& b) -> Status {
        const size_t r = static_cast<size_t>(rank);
        RETURN_IF_ERROR(b.LoadBuffers(saved[r]));
        ASSIGN_OR_RETURN(StepTiming t, b.RunStep(2));
        (void)t;
        resumed[r] = b.parameters();
        return Status::Ok();
      },
      narrow));
  for (size_t r = 0; r < 2; ++r) {
    bool has_master = false;
    uint64_t saved_bytes = 0;
    for (const auto& [name, bytes] : saved[r]) {
      has_master |= name == "optimizer/master-weights";
      saved_bytes += bytes.size();
    }
    EXPECT_TRUE(has_master) << "rank " << r;
    // What the runner checks against the 64 GiB limit before step 1.
    EXPECT_EQ(declared_bytes[r], saved_bytes) << "rank " << r;
    ASSERT_EQ(after[r].size(), resumed[r].size());
    size_t off_grid = 0, changed = 0;
    for (size_t i = 0; i < after[r].size(); ++i) {
      ASSERT_EQ(after[r][i], resumed[r][i]) << "rank " << r << " parameter " << i;
      // The step changed the master value by less than bf16 resolves for
      // most parameters: they are not all bf16 numbers.
      if (after[r][i] != before[r][i]) ++changed;
      const float rounded = testing::RoundToBf16(after[r][i]);
      off_grid += rounded != after[r][i];
    }
    EXPECT_GT(changed, after[r].size() / 2) << "rank " << r << ": the step changed parameters";
    EXPECT_GT(off_grid, after[r].size() / 4) << "rank " << r << ": fp32 parameters, not bf16";
  }
}

std::vector<float> Floats(const NamedBuffers& buffers, const std::string& name) {
  for (const auto& [key, bytes] : buffers) {
    if (key != name) continue;
    std::vector<float> out(bytes.size() / sizeof(float));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
    return out;
  }
  ADD_FAILURE() << "no checkpoint buffer " << name;
  return {};
}

// How the device stores the weights is not part of the plan's fingerprint
// (an environment switch of the GPU device, or a new worker image, changes
// it), so a checkpoint resumes under either storage: fp32 weights become
// the master weights (and their rounding the bf16 weights), and a bf16
// run's master weights become the owned shards' fp32 weights. Through both,
// nothing the fp32 run wrote is lost where this rank owns it.
TEST(NarrowStorageTest, CheckpointsResumeAcrossWeightStorage) {
  for (int zero = 0; zero <= 3; ++zero) {
    SCOPED_TRACE("ZeRO " + std::to_string(zero));
    const TwoRanks two(zero);
    const WorkerConfig& config = two.config;
    const testing::DeviceFactory &narrow = two.narrow, &plain = two.plain;
    std::vector<NamedBuffers> fp32(2), bf16(2), back(2);
    std::vector<std::vector<std::pair<size_t, size_t>>> owned(2);
    testing::ExpectAllOk(testing::OnRanks(
        config,
        [&](int rank, StepExecutor& b) -> Status {
          for (int step = 0; step < 2; ++step) {
            ASSIGN_OR_RETURN(StepTiming t, b.RunStep(step));
            (void)t;
          }
          owned[static_cast<size_t>(rank)] = b.owned_ranges();
          ASSIGN_OR_RETURN(fp32[static_cast<size_t>(rank)], b.SaveBuffers());
          return Status::Ok();
        },
        plain));
    // Resumes every rank from `from` on `make`'s devices and saves at once.
    const auto resume = [&](const std::vector<NamedBuffers>& from, std::vector<NamedBuffers>* to,
                            const testing::DeviceFactory& make) {
      testing::ExpectAllOk(testing::OnRanks(
          config,
          [&](int rank, StepExecutor& b) -> Status {
            RETURN_IF_ERROR(b.LoadBuffers(from[static_cast<size_t>(rank)]));
            ASSIGN_OR_RETURN((*to)[static_cast<size_t>(rank)], b.SaveBuffers());
            return Status::Ok();
          },
          make));
    };
    resume(fp32, &bf16, narrow);
    resume(bf16, &back, plain);
    if (::testing::Test::HasFailure()) return;
    for (size_t r = 0; r < 2; ++r) {
      const std::vector<float> written = Floats(fp32[r], "weights");
      const std::vector<float> rounded = Floats(bf16[r], "weights");
      const std::vector<float> resumed = Floats(back[r], "weights");
      ASSERT_EQ(rounded.size(), written.size());
      ASSERT_EQ(resumed.size(), written.size());
      // Under ZeRO 3 the weights are the owned shards themselves.
      std::vector<bool> is_owned(written.size(), zero == 3);
      for (const auto& [offset, length] : owned[r]) {
        for (size_t i = offset; i < offset + length && i < is_owned.size(); ++i) is_owned[i] = true;
      }
      size_t off_grid = 0;
      for (size_t i = 0; i < written.size(); ++i) {
        ASSERT_EQ(rounded[i], testing::RoundToBf16(written[i])) << "rank " << r << " weight " << i;
        ASSERT_EQ(resumed[i], is_owned[i] ? written[i] : rounded[i])
            << "rank " << r << " weight " << i << (is_owned[i] ? " (owned)" : "");
        off_grid += rounded[i] != written[i];
      }
      // Most fp32 weights are not bf16 numbers: the check above is not
      // satisfied by a rounding.
      EXPECT_GT(off_grid, written.size() / 2) << "rank " << r;
    }
  }
}

// A checkpoint that is not this rank's (a buffer missing, or sized for
// another plan) is refused with the buffer named, under either storage,
// rather than read past its end or taken in part.
TEST(NarrowStorageTest, CheckpointsOfTheWrongShapeAreRefusedByName) {
  // Two ranks under ZeRO 1: a rank's master weights and moments are its
  // shard, about half of its weights, so a size checked against the wrong
  // buffer shows.
  const TwoRanks two(1);
  const WorkerConfig& config = two.config;
  const testing::DeviceFactory &narrow = two.narrow, &plain = two.plain;
  using Ranks = std::vector<NamedBuffers>;  // one checkpoint per rank
  Ranks fp32(2), bf16(2);
  const auto save = [&](Ranks* into, const testing::DeviceFactory& make) {
    testing::ExpectAllOk(testing::OnRanks(
        config,
        [&](int rank, StepExecutor& b) -> Status {
          ASSIGN_OR_RETURN((*into)[static_cast<size_t>(rank)], b.SaveBuffers());
          return Status::Ok();
        },
        make));
  };
  save(&fp32, plain);
  save(&bf16, narrow);
  ASSERT_FALSE(::testing::Test::HasFailure());
  // Each rank's LoadBuffers status.
  const auto load = [&](const Ranks& ranks, const testing::DeviceFactory& make) {
    std::vector<Status> loaded(2);
    testing::ExpectAllOk(testing::OnRanks(
        config,
        [&](int rank, StepExecutor& b) -> Status {
          loaded[static_cast<size_t>(rank)] = b.LoadBuffers(ranks[static_cast<size_t>(rank)]);
          return Status::Ok();
        },
        make));
    return loaded;
  };
  const auto edit = [](Ranks ranks, const std::function<void(NamedBuffers*)>& f) {
    for (NamedBuffers& buffers : ranks) f(&buffers);
    return ranks;
  };
  const auto without = [&](const Ranks& ranks, const std::string& name) {
    return edit(ranks, [&](NamedBuffers* buffers) {
      buffers->erase(std::remove_if(buffers->begin(), buffers->end(),
                                    [&](const auto& named) { return named.first == name; }),
                     buffers->end());
    });
  };
  const auto truncated = [&](const Ranks& ranks, const std::string& name) {
    return edit(ranks, [&](NamedBuffers* buffers) {
      for (auto& [key, bytes] : *buffers) {
        if (key == name) bytes.resize(bytes.size() - sizeof(float));
      }
    });
  };
  const std::string master = "optimizer/master-weights";
  // Another plan's master weights: the whole weights, not this rank's shard.
  const auto unsharded_master = [&](const Ranks& ranks) {
    return edit(ranks, [&](NamedBuffers* buffers) {
      std::vector<std::byte> weights;
      for (const auto& [key, bytes] : *buffers) {
        if (key == "weights") weights = bytes;
      }
      for (auto& [key, bytes] : *buffers) {
        if (key == master) bytes = weights;
      }
    });
  };
  struct Case {
    std::string what;
    Ranks ranks;
    testing::DeviceFactory make;
    StatusCode code;
    std::string named;
  };
  const std::vector<Case> cases = {
      {"fp32 checkpoint, weights one float short", truncated(fp32, "weights"), plain,
       StatusCode::kInvalidArgument, "'weights'"},
      {"fp32 checkpoint without adamw-v", without(fp32, "optimizer/adamw-v"), plain,
       StatusCode::kNotFound, "'optimizer/adamw-v'"},
      {"bf16 checkpoint, master weights short, resumed on fp32", truncated(bf16, master), plain,
       StatusCode::kInvalidArgument, "'" + master + "'"},
      {"bf16 checkpoint, master weights short, resumed on bf16", truncated(bf16, master), narrow,
       StatusCode::kInvalidArgument, "'" + master + "'"},
      {"bf16 checkpoint, unsharded master weights, resumed on fp32", unsharded_master(bf16), plain,
       StatusCode::kInvalidArgument, "'" + master + "'"},
      {"bf16 checkpoint, unsharded master weights, resumed on bf16", unsharded_master(bf16), narrow,
       StatusCode::kInvalidArgument, "'" + master + "'"},
      {"bf16 checkpoint without its weights, resumed on bf16", without(bf16, "weights"), narrow,
       StatusCode::kNotFound, "'weights'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::vector<Status> loaded = load(c.ranks, c.make);
    for (size_t r = 0; r < loaded.size(); ++r) {
      EXPECT_EQ(loaded[r].code(), c.code) << "rank " << r << ": " << loaded[r].message();
      EXPECT_NE(loaded[r].message().find(c.named), std::string::npos)
          << "rank " << r << ": " << loaded[r].message();
    }
  }
  // The intact checkpoints load under either storage (the cases above fail
  // for their defect, not for the storage).
  for (const Status& s : load(fp32, narrow)) EXPECT_TRUE(s.ok()) << s.message();
  for (const Status& s : load(bf16, plain)) EXPECT_TRUE(s.ok()) << s.message();
}

}  // namespace
}  // namespace pacer::worker
