// Numerical checks of the step executor on the CPU device: its gradients
// are the derivative of its loss (central finite differences), a pipeline
// of two stages and two tensor-parallel ranks compute the same loss and
// gradients as one rank, and ZeRO stages 0-3 reach the same parameters
// after three steps. Multi-rank runs use one thread per rank, each with its
// own store client, Gloo communicators and executor (as cpu_backend_test
// does).
#include "core/step_executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/step_schedule.h"
#include "core/tcp_store.h"
#include "cpu/cpu_backend.h"
#include "cpu/cpu_device.h"
#include "reference_on_chip_device.h"
#include "step_runs.h"
#include "test_plans.h"

namespace pacer::worker {
namespace {

using std::chrono::milliseconds;
using testing::DeviceFactory;
using testing::ExpectAllOk;
using testing::ExpectSameGradients;
using testing::LargestMagnitude;
using testing::OneStepByName;
using testing::OnRanks;
using testing::Plan;
using testing::StageResult;
using testing::SwigluGqa;
using testing::TinyConfig;

std::vector<float> Floats(const NamedBuffers& buffers, const std::string& name) {
  for (const auto& [key, bytes] : buffers) {
    if (key != name) continue;
    std::vector<float> v(bytes.size() / sizeof(float));
    std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
  return {};
}

void SetFloats(NamedBuffers* buffers, const std::string& name, const std::vector<float>& v) {
  for (auto& [key, bytes] : *buffers) {
    if (key == name) std::memcpy(bytes.data(), v.data(), bytes.size());
  }
}

// d(loss)/d(w_i) for the entry of largest |gradient| in each named matrix,
// by central differences of the step's loss (data fixed by re-running step
// 0), against the executor's gradient.
void CheckGradientByFiniteDifferences(const Plan& plan) {
  const WorkerConfig config = TinyConfig(plan);
  ASSERT_TRUE(ValidateConfig(config).ok());
  const auto statuses = OnRanks(config, [&](int, StepExecutor& b) -> Status {
    ASSIGN_OR_RETURN(NamedBuffers initial, b.SaveBuffers());
    ASSIGN_OR_RETURN(StepTiming unused, b.RunStep(0));
    (void)unused;
    // Summed over micro-batches, each the gradient of its mean token loss:
    // k times the gradient of the step's mean loss.
    const std::vector<float> gradient = b.local_gradients_before_reduce();
    const double k = static_cast<double>(config.gradient_accumulation_steps);
    const std::vector<float> w0 = Floats(initial, "weights");
    auto loss_at = [&](size_t i, float delta) -> StatusOr<double> {
      NamedBuffers buffers = initial;
      std::vector<float> w = w0;
      w[i] += delta;
      SetFloats(&buffers, "weights", w);
      RETURN_IF_ERROR(b.LoadBuffers(buffers));
      ASSIGN_OR_RETURN(StepTiming t, b.RunStep(0));
      (void)t;
      return b.last_loss();
    };
    int checked = 0;
    for (const ParameterRange& r : b.parameter_ranges()) {
      size_t best = r.offset;
      for (size_t i = r.offset; i < r.offset + r.length; ++i) {
        if (std::fabs(gradient[i]) > std::fabs(gradient[best])) best = i;
      }
      const float eps = 1e-2f;
      ASSIGN_OR_RETURN(const double up, loss_at(best, eps));
      ASSIGN_OR_RETURN(const double down, loss_at(best, -eps));
      const double numeric = (up - down) / (2.0 * eps);
      const double analytic = gradient[best] / k;
      std::fprintf(stderr, "%-16s element %5zu: analytic %+.6e numeric %+.6e\n", r.name.c_str(),
                   best - r.offset, analytic, numeric);
      EXPECT_GT(std::fabs(analytic), 1e-5) << r.name << " has no gradient";
      EXPECT_NEAR(numeric, analytic, 0.03 * std::fabs(analytic) + 2e-5) << r.name;
      ++checked;
    }
    EXPECT_GE(checked, 9);  // embedding, 2 layers x 4 matrices (output tied or its own)
    return Status::Ok();
  });
  ExpectAllOk(statuses);
}

TEST(StepExecutorTest, GradientsMatchFiniteDifferencesGelu) {
  CheckGradientByFiniteDifferences({1, 1, 1, 0});
}

TEST(StepExecutorTest, GradientsMatchFiniteDifferencesSwigluGqaFullRecompute) {
  CheckGradientByFiniteDifferences(
      {1, 1, 1, 0, planner::Recompute::kFull, planner::FfnKind::kSwiglu, 2});
}

TEST(StepExecutorTest, GradientsMatchFiniteDifferencesUnfusedAttentionSelectiveRecompute) {
  Plan plan;
  plan.recompute = planner::Recompute::kSelective;
  plan.attention = planner::AttentionKernel::kUnfused;
  CheckGradientByFiniteDifferences(plan);
}

// Per rank after one step: the loss and the local gradients by matrix name.

// The tiled (fused) attention is the unfused one computed in another order:
// the same loss and gradients, for every recomputation policy, with
// grouped-query attention.
TEST(StepExecutorTest, FusedAndUnfusedAttentionGiveTheSameStep) {
  for (planner::Recompute r :
       {planner::Recompute::kNone, planner::Recompute::kSelective, planner::Recompute::kFull}) {
    Plan plan = SwigluGqa(r);
    plan.attention = planner::AttentionKernel::kFused;
    const std::vector<StageResult> fused = OneStepByName(TinyConfig(plan));
    plan.attention = planner::AttentionKernel::kUnfused;
    const std::vector<StageResult> unfused = OneStepByName(TinyConfig(plan));
    ASSERT_EQ(fused.size(), 1u);
    ASSERT_EQ(unfused.size(), 1u);
    EXPECT_NEAR(fused[0].loss, unfused[0].loss, 1e-5 * std::fabs(unfused[0].loss));
    ExpectSameGradients(fused[0], unfused[0], planner::RecomputeName(r));
  }
}

// A device's on-chip attention kernel (here the host reference of
// reference_on_chip_device.h, which fails the step when the stashed
// logsumexp or context is not its forward's) takes the place of the tiled
// attention in a fused plan: the same loss, gradients and GEMM FLOPs, for
// every recomputation policy, with grouped-query attention, on one rank,
// on two pipeline stages (two micro-batches in flight on the first) and on
// two tensor-parallel ranks (each with half the heads).
TEST(StepExecutorTest, AnOnChipAttentionKernelGivesTheTiledStep) {
  for (auto [stages, tensor] : {std::pair{1, 1}, {2, 1}, {1, 2}}) {
    for (planner::Recompute r :
         {planner::Recompute::kNone, planner::Recompute::kSelective, planner::Recompute::kFull}) {
      Plan plan = SwigluGqa(r);
      plan.p = stages;
      plan.t = tensor;
      WorkerConfig config = TinyConfig(plan);
      config.model.tied_embeddings = false;
      const std::vector<StageResult> tiled = OneStepByName(config);
      auto calls = std::make_shared<testing::OnChipCalls>();
      const std::vector<StageResult> on_chip = OneStepByName(config, [calls] {
        return std::make_unique<testing::ReferenceOnChipDevice>(cpu::MakeCpuDevice(), calls);
      });
      const std::string what = std::to_string(stages) + " stage(s), t" + std::to_string(tensor) +
                               ", " + planner::RecomputeName(r) + " recompute";
      // 2 layers x 2 micro-batches on every tensor-parallel rank; full
      // recomputation runs each forward twice.
      EXPECT_EQ(calls->backward.load(), 4 * tensor) << what;
      EXPECT_EQ(calls->forward.load(), (r == planner::Recompute::kFull ? 8 : 4) * tensor) << what;
      ASSERT_EQ(on_chip.size(), tiled.size()) << what;
      for (size_t stage = 0; stage < tiled.size(); ++stage) {
        EXPECT_NEAR(on_chip[stage].loss, tiled[stage].loss, 1e-5 * std::fabs(tiled[stage].loss))
            << what;
        EXPECT_DOUBLE_EQ(on_chip[stage].gemm_flops, tiled[stage].gemm_flops) << what;
        ExpectSameGradients(on_chip[stage], tiled[stage], what);
      }
    }
  }
}

TEST(StepExecutorTest, TwoPipelineStagesMatchOneStage) {
  WorkerConfig one = TinyConfig({1, 1, 1, 0});
  WorkerConfig two = TinyConfig({1, 2, 1, 0});
  one.model.tied_embeddings = two.model.tied_embeddings = false;
  const std::vector<StageResult> reference = OneStepByName(one);
  const std::vector<StageResult> split = OneStepByName(two);
  ASSERT_EQ(reference.size(), 1u);
  ASSERT_EQ(split.size(), 2u);
  ASSERT_TRUE(split[1].holds_logits);
  EXPECT_NEAR(split[1].loss, reference[0].loss, 1e-6 * reference[0].loss);
  EXPECT_GT(reference[0].loss, 0);
  size_t matrices = 0;
  for (const StageResult& stage : split) {
    for (const auto& [name, g] : stage.gradients) {
      const auto it = reference[0].gradients.find(name);
      ASSERT_NE(it, reference[0].gradients.end()) << name;
      ASSERT_EQ(g.size(), it->second.size()) << name;
      for (size_t i = 0; i < g.size(); ++i) {
        ASSERT_NEAR(g[i], it->second[i], 1e-5 * std::fabs(it->second[i]) + 1e-8)
            << name << " element " << i;
      }
      ++matrices;
    }
  }
  EXPECT_EQ(matrices, reference[0].gradients.size()) << "every matrix lives on one stage";
}

// Megatron's tensor parallelism splits the model without changing it: two
// tensor-parallel ranks (heads, MLP columns and vocabulary split; sequence
// parallelism between them) give the one-rank loss, and each rank's
// gradient of each matrix is its share of the one-rank gradient, for
// grouped-query attention with SwiGLU and with GELU, under every
// recomputation policy, with fused and unfused attention, and with tied and
// untied tables.
TEST(StepExecutorTest, TwoTensorParallelRanksMatchOne) {
  struct Case {
    Plan plan;
    bool tied;
  };
  std::vector<Case> cases;
  for (planner::Recompute r :
       {planner::Recompute::kNone, planner::Recompute::kSelective, planner::Recompute::kFull}) {
    cases.push_back({SwigluGqa(r), r == planner::Recompute::kNone});
  }
  Plan gelu_unfused;
  gelu_unfused.attention = planner::AttentionKernel::kUnfused;
  cases.push_back({gelu_unfused, false});
  for (const Case& c : cases) {
    Plan one = c.plan, two = c.plan;
    two.t = 2;
    WorkerConfig one_config = TinyConfig(one), two_config = TinyConfig(two);
    one_config.model.tied_embeddings = two_config.model.tied_embeddings = c.tied;
    const std::string what = std::string(planner::RecomputeName(c.plan.recompute)) + ", " +
                             planner::AttentionKernelName(c.plan.attention) +
                             (c.tied ? ", tied" : ", untied");
    const std::vector<StageResult> reference = OneStepByName(one_config);
    const std::vector<StageResult> split = OneStepByName(two_config);
    ASSERT_EQ(reference.size(), 1u);
    ASSERT_EQ(split.size(), 2u);
    for (const StageResult& rank : split) {
      EXPECT_NEAR(rank.loss, reference[0].loss, 1e-6 * reference[0].loss) << what;
      ASSERT_EQ(rank.gradients.size(), reference[0].gradients.size()) << what;
      for (const auto& [name, g] : rank.gradients) {
        const std::vector<float>& full = reference[0].gradients.at(name);
        const std::vector<uint64_t>& at = rank.unsplit.at(name);
        ASSERT_EQ(g.size() * 2, full.size()) << name << " is half the matrix";
        const double scale = LargestMagnitude(full);
        ASSERT_GT(scale, 0) << name;
        for (size_t i = 0; i < g.size(); ++i) {
          ASSERT_LT(at[i], full.size()) << name;
          ASSERT_NEAR(g[i], full[at[i]], 1e-4 * scale)
              << name << "[" << i << "] of tensor rank " << rank.tensor_rank << ", " << what;
        }
      }
    }
    // Between them the two ranks hold every element of every matrix once.
    for (const auto& [name, full] : reference[0].gradients) {
      std::vector<int> held(full.size(), 0);
      for (const StageResult& rank : split) {
        for (uint64_t u : rank.unsplit.at(name)) ++held[u];
      }
      for (size_t u = 0; u < held.size(); ++u) ASSERT_EQ(held[u], 1) << name << "[" << u << "]";
    }
  }
}

// A vocabulary two ranks cannot split evenly (65) is padded to 2 x 33 rows,
// as Megatron pads it and the planner counts it (VocabShardRows). The rows
// of the real vocabulary are the one-rank model's (weights hash the unsplit
// element), tokens and labels come from the real 65 only, and the padding
// row is an output the softmax sees: the loss is the one-rank loss plus
// that row's share, and its gradient is what pushes it down.
TEST(StepExecutorTest, AVocabularyTwoRanksCannotSplitIsPaddedNotTruncated) {
  for (bool tied : {false, true}) {
    Plan one = SwigluGqa(planner::Recompute::kNone), two = one;
    two.t = 2;
    WorkerConfig one_config = TinyConfig(one), two_config = TinyConfig(two);
    one_config.model.vocab_size = two_config.model.vocab_size = 65;
    one_config.model.tied_embeddings = two_config.model.tied_embeddings = tied;
    const int64_t h = one_config.model.hidden_size;
    const std::vector<StageResult> reference = OneStepByName(one_config);
    const std::vector<StageResult> split = OneStepByName(two_config);
    ASSERT_EQ(reference.size(), 1u);
    ASSERT_EQ(split.size(), 2u);
    const double loss = reference[0].loss;
    const double padded_loss = split[0].loss;
    std::fprintf(stderr, "%s: loss %.9f one rank, %.9f two (padded)\n", tied ? "tied" : "untied",
                 loss, padded_loss);
    EXPECT_EQ(split[1].loss, padded_loss) << "the gathered loss";
    // One more output: the softmax's normaliser grows by that row's share,
    // about 1/65 of it when the logits are alike (log(1 + 1/65) = 0.0153;
    // untied 0.0147), less when they are peaked (tied, 0.0007). Rows that
    // were not the one-rank model's would move the loss by O(1).
    EXPECT_GT(padded_loss - loss, 0);
    EXPECT_LT(padded_loss - loss, 5 * std::log1p(1.0 / 65));
    const std::string table = tied ? "embedding" : "output";
    for (const StageResult& rank : split) {
      const std::vector<float>& g = rank.gradients.at(table);
      const std::vector<uint64_t>& at = rank.unsplit.at(table);
      ASSERT_EQ(g.size(), static_cast<size_t>(33 * h)) << "33 rows of each rank's shard";
      EXPECT_EQ(at.front(), static_cast<uint64_t>(rank.tensor_rank * 33 * h));
      EXPECT_EQ(at.back(), static_cast<uint64_t>((rank.tensor_rank + 1) * 33 * h - 1));
    }
    // Rank 1's last row is row 65, the padding: a real parameter with a
    // gradient (it takes probability from every token), never a label.
    const std::vector<float>& last = split[1].gradients.at(table);
    const double padding_row = LargestMagnitude(std::vector<float>(last.end() - h, last.end()));
    EXPECT_GT(padding_row, 0) << "the padding row's logits enter the softmax";
  }
}

// Untied and tied tables: a tied table under ZeRO 3 is one gather unit
// that the forward pass uses first and last.
class ZeroStagesTest : public ::testing::TestWithParam<bool> {};

TEST_P(ZeroStagesTest, ReachTheSameParametersAfterThreeSteps) {
  std::vector<std::vector<float>> reference;  // ZeRO 0, per rank
  for (int zero = 0; zero <= 3; ++zero) {
    WorkerConfig config = TinyConfig({1, 1, 2, zero});
    config.model.tied_embeddings = GetParam();
    std::vector<std::vector<float>> parameters(2);
    std::vector<std::vector<std::pair<size_t, size_t>>> owned(2);
    ExpectAllOk(OnRanks(config, [&](int rank, StepExecutor& b) -> Status {
      for (int step = 0; step < 3; ++step) {
        ASSIGN_OR_RETURN(StepTiming t, b.RunStep(step));
        (void)t;
      }
      parameters[static_cast<size_t>(rank)] = b.parameters();
      owned[static_cast<size_t>(rank)] = b.owned_ranges();
      return Status::Ok();
    }));
    if (zero == 0) {
      reference = parameters;
      EXPECT_EQ(reference[0], reference[1]);
      continue;
    }
    // Each rank's optimizer shard is current on that rank (under ZeRO 3 a
    // rank holds nothing else; the next pass gathers the others' shards).
    size_t compared = 0;
    for (size_t r = 0; r < 2; ++r) {
      ASSERT_EQ(parameters[r].size(), reference[0].size());
      for (const auto& [offset, length] : owned[r]) {
        for (size_t i = offset; i < offset + length; ++i) {
          ASSERT_NEAR(parameters[r][i], reference[0][i], 1e-5 * std::fabs(reference[0][i]) + 1e-7)
              << "ZeRO " << zero << " rank " << r << " element " << i;
        }
        compared += length;
      }
    }
    EXPECT_EQ(compared, reference[0].size()) << "the shards cover every parameter";
  }
}

INSTANTIATE_TEST_SUITE_P(Tables, ZeroStagesTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "Tied" : "Untied";
                         });

// The device's allocation tracker against the planner's PredictMemory for
// the state it models exactly: weights, gradients and AdamW state of an fp32
// plan (4 + 4 + 8 bytes per parameter, sharded by ZeRO), and under ZeRO 3
// the gather buffers (workspace: the unit in use and the one gathered ahead,
// one unit's unsharded gradients and its reduce-scatter output).
// Activations: the next test. Not compared: the transient bucket buffers of
// ZeRO 2 (workspace: at most a bucket or two at a time).
TEST(StepExecutorTest, PeakStateBytesArePredictedForEveryZeroStage) {
  for (int zero = 0; zero <= 3; ++zero) {
    WorkerConfig config = TinyConfig({1, 1, 2, zero});
    config.precision = planner::Precision::kFp32;
    const planner::MemoryBreakdown predicted = testing::PlannerMemory(config);
    const std::vector<testing::StateBytes> measured = testing::PeakStateBytes(config, 2);
    for (size_t r = 0; r < measured.size(); ++r) {
      const double workspace = measured[r].workspace;
      if (zero == 2) {
        // No full-size staging: the bucket buffers alive at once stay well
        // under one full gradient (fp32: the weights' bytes).
        std::fprintf(stderr, "ZeRO 2 rank %zu workspace peak %9.0f bytes\n", r, workspace);
        EXPECT_LT(workspace, 0.5 * predicted.weights_bytes);
      }
      if (zero == 3) {
        // The weights really are sharded (the check below: half of ZeRO 2's),
        // and what is gathered at once is the planner's ZeRO-3 buffers.
        std::fprintf(stderr, "ZeRO 3 rank %zu workspace measured %9.0f predicted %9.0f bytes\n", r,
                     workspace, predicted.buffers_bytes);
        ASSERT_GT(predicted.buffers_bytes, 0);
        EXPECT_NEAR(workspace / predicted.buffers_bytes, 1.0, 0.05) << "rank " << r;
      }
      testing::ExpectPredictedState(measured[r], predicted,
                                    "ZeRO " + std::to_string(zero) + " rank " + std::to_string(r));
    }
  }
}

// The activation stash against the planner's activation model, which with
// a fused attention kernel (the default) describes what the executor
// stores per layer: the layer's input, both norm outputs, Q K V, the
// context, the attention residual, the MLP's input and activation (24 s b h
// elements here: h = 32, a GELU MLP of 2h, no dropout; fp32, so 4 bytes
// each where the planner's 16-bit formula counts 2), for each layer in
// flight. The executor also keeps two 1/h-sized norm factors per layer,
// and its peak holds one layer's backward temporaries and the pass
// buffers, which the planner leaves to its fixed reserve. So: the bytes per
// layer in flight (the peak's growth from 8 to 16 layers) are the
// planner's to 1%, and the rest is under two layers' worth, on one rank and
// on each of two tensor-parallel ranks (sequence parallelism: every stashed
// tensor a rank's 1/t share).
TEST(StepExecutorTest, PeakActivationsPerLayerArePredictedWithFusedAttention) {
  for (auto [t, r] : {std::pair{1, planner::Recompute::kNone},
                      {1, planner::Recompute::kSelective},
                      {2, planner::Recompute::kNone},
                      {2, planner::Recompute::kSelective}}) {
    const std::string what = "t" + std::to_string(t) + " " + planner::RecomputeName(r);
    std::map<int, double> measured, predicted;
    for (int layers : {8, 16}) {
      Plan plan;
      plan.t = t;
      plan.recompute = r;
      WorkerConfig config = TinyConfig(plan);
      config.precision = planner::Precision::kFp32;
      config.model.layers = layers;
      predicted[layers] = testing::PlannerMemory(config).activations_bytes;
      ExpectAllOk(OnRanks(config, [&](int rank, StepExecutor& b) -> Status {
        ASSIGN_OR_RETURN(StepTiming timing, b.RunStep(0));
        (void)timing;
        if (rank == 0) measured[layers] = b.memory().class_peak_bytes(BufferClass::kActivations);
        return Status::Ok();
      }));
      std::fprintf(stderr, "%s, %2d layers: activations measured %8.0f predicted %8.0f bytes\n",
                   what.c_str(), layers, measured[layers], predicted[layers]);
    }
    const double per_layer_measured = (measured[16] - measured[8]) / 8;
    const double per_layer_predicted = (predicted[16] - predicted[8]) / 8;
    ASSERT_GT(per_layer_predicted, 0);
    EXPECT_NEAR(per_layer_measured / per_layer_predicted, 1.0, 0.01) << what;
    EXPECT_GE(measured[16], predicted[16]) << what;
    EXPECT_LT(measured[16] - predicted[16], 2 * per_layer_predicted) << what;
  }
}

// The GPU backend runs the executor without its host copies (they would
// stall every gradient bucket on a GPU): the step must be the same step,
// only the test hooks stay empty.
TEST(StepExecutorTest, WithoutHostCopiesTheStepIsTheSame) {
  const WorkerConfig config = TinyConfig({1, 1, 1, 0});
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto schedule = BuildStepSchedule(config, 0);
  ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
  std::map<bool, std::vector<double>> losses;
  std::map<bool, NamedBuffers> saved;
  for (const bool host_copies : {true, false}) {
    auto client = TcpStoreClient::Connect("127.0.0.1", (*server)->port(), 0, milliseconds(10'000));
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    StepExecutor executor(cpu::MakeCpuDevice(), host_copies);
    BackendContext context;
    context.config = &config;
    context.schedule = &*schedule;
    context.store = client->get();
    context.timeout = milliseconds(30'000);
    ASSERT_TRUE(executor.Initialize(context, 99).ok());
    for (int64_t step = 0; step < 2; ++step) {
      auto timing = executor.RunStep(step);
      ASSERT_TRUE(timing.ok()) << timing.status().ToString();
      losses[host_copies].push_back(executor.last_loss());
    }
    EXPECT_EQ(executor.parameters().empty(), !host_copies);
    EXPECT_EQ(executor.local_gradients_before_reduce().empty(), !host_copies);
    auto buffers = executor.SaveBuffers();
    ASSERT_TRUE(buffers.ok()) << buffers.status().ToString();
    uint64_t saved_bytes = 0;
    for (const auto& [name, bytes] : *buffers) saved_bytes += bytes.size();
    // What the runner checks against the 64 GiB limit before step 1.
    EXPECT_EQ(executor.CheckpointBufferBytes(), saved_bytes);
    saved[host_copies] = *buffers;
  }
  EXPECT_EQ(losses[true], losses[false]);
  EXPECT_GT(losses[false][0], 0);
  EXPECT_EQ(Floats(saved[true], "weights"), Floats(saved[false], "weights"));
}

// The executor skips zeroing buffers it says it writes whole; the CPU device
// makes such memory NaN so that a buffer read before it is written poisons
// the losses and gradients the tests above compare (zeros would hide it).
TEST(CpuDeviceTest, UndefinedAllocationsAreNanAndZeroedOnesAreZero) {
  std::unique_ptr<Device> device = cpu::MakeCpuDevice();
  DeviceBuffer undefined(device.get(), BufferClass::kActivations);
  DeviceBuffer zeroed(device.get(), BufferClass::kActivations);
  ASSERT_TRUE(undefined.Assign(64, Fill::kUndefined).ok());
  ASSERT_TRUE(zeroed.Assign(64).ok());
  std::vector<float> host(64);
  ASSERT_TRUE(device->CopyToHost(undefined.data(), host.size(), host.data()).ok());
  EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](float v) { return std::isnan(v); }));
  ASSERT_TRUE(device->CopyToHost(zeroed.data(), host.size(), host.data()).ok());
  EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](float v) { return v == 0.0f; }));
  EXPECT_EQ(device->memory().class_bytes(BufferClass::kActivations), 2 * 64 * sizeof(float));
}

TEST(RangeNormsTest, IsTheL2NormOfEachRange) {
  const std::vector<float> values = {3, 4, 0, 1, 2, 2, 1};
  const std::vector<ParameterRange> ranges = {
      {"a", 0, 2}, {"b", 2, 1}, {"c", 3, 4}, {"past the end", 5, 4}};
  const std::vector<double> norms = RangeNorms(values, ranges);
  ASSERT_EQ(norms.size(), 4u);
  EXPECT_DOUBLE_EQ(norms[0], 5.0);
  EXPECT_DOUBLE_EQ(norms[1], 0.0);
  EXPECT_DOUBLE_EQ(norms[2], std::sqrt(10.0));
  EXPECT_DOUBLE_EQ(norms[3], std::sqrt(5.0));
}

}  // namespace
}  // namespace pacer::worker
