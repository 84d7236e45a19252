// The CPU backend with several ranks in one process (one thread per rank,
// each with its own store client and backend): data-parallel gradients are
// really summed, weights stay identical across data-parallel ranks, the
// FLOPs and bus bytes issued are the schedule's, and a peer that never
// steps makes the others fail within the timeout instead of hanging.
#include "cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <latch>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/step_schedule.h"
#include "core/tcp_store.h"
#include "core/worker_config.h"
#include "cpu/calibrate_cpu.h"
#include "cpu/gloo_comms.h"
#include "test_plans.h"

namespace pacer::worker {
namespace {

using std::chrono::milliseconds;

using testing::Plan;
using testing::TinyConfig;

// What one rank leaves behind for the checks.
struct RankResult {
  Status status;
  std::vector<StepTiming> timings;
  std::vector<float> first_local, first_reduced;  // after step 0
  std::vector<float> parameters;                  // after the last step
  std::vector<std::pair<size_t, size_t>> owned;
  StepSchedule schedule;
  double seconds = 0;  // of the failing step, for the timeout test
};

// Runs `world` ranks as threads against one store. A rank in `idle` only
// initializes, then waits (on a latch, not a clock) until every other rank
// has returned from RunStep. Aborts the binary if the ranks do not finish
// within the watchdog, so a hang fails loudly instead of stalling CI.
std::vector<RankResult> RunRanks(const WorkerConfig& config, int steps, milliseconds timeout,
                                 int idle = -1) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  if (!server.ok()) return {};
  const int port = (*server)->port();
  const int world = config.world_size;
  std::vector<RankResult> results(static_cast<size_t>(world));
  std::latch stepped(idle >= 0 ? world - 1 : 0);
  std::vector<std::future<void>> done;
  for (int rank = 0; rank < world; ++rank) {
    done.push_back(std::async(std::launch::async, [&, rank] {
      RankResult& r = results[static_cast<size_t>(rank)];
      auto client = TcpStoreClient::Connect("127.0.0.1", port, rank, milliseconds(10'000));
      if (!client.ok()) {
        r.status = client.status();
        if (idle >= 0 && rank != idle) stepped.count_down();
        return;
      }
      auto schedule = BuildStepSchedule(config, rank);
      if (!schedule.ok()) {
        r.status = schedule.status();
        if (idle >= 0 && rank != idle) stepped.count_down();
        return;
      }
      r.schedule = *schedule;
      cpu::CpuBackend backend;
      BackendContext context;
      context.config = &config;
      context.schedule = &r.schedule;
      context.global_rank = rank;
      context.local_rank = rank;
      context.store = client->get();
      context.timeout = timeout;
      r.status = backend.Initialize(context, 1234);
      if (rank == idle) {
        if (r.status.ok()) stepped.wait();
        return;
      }
      for (int step = 0; r.status.ok() && step < steps; ++step) {
        const auto start = std::chrono::steady_clock::now();
        auto timing = backend.RunStep(step);
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (!timing.ok()) {
          r.status = timing.status();
          break;
        }
        r.timings.push_back(*timing);
        if (step == 0) {
          r.first_local = backend.local_gradients_before_reduce();
          r.first_reduced = backend.gradients_after_reduce();
        }
      }
      r.parameters = backend.parameters();
      r.owned = backend.owned_ranges();
      if (idle >= 0) stepped.count_down();
    }));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (auto& f : done) {
    if (f.wait_until(deadline) != std::future_status::ready) {
      std::fprintf(stderr, "cpu_backend_test: ranks still running after 120 s; aborting\n");
      std::abort();
    }
  }
  return results;
}

// The global ranks of each data-parallel group.
std::vector<std::vector<int>> DataGroups(const WorkerConfig& c) {
  std::vector<std::vector<int>> groups;
  for (int pp = 0; pp < c.pipeline_parallel; ++pp) {
    for (int tp = 0; tp < c.tensor_parallel; ++tp) {
      std::vector<int> g;
      for (int dp = 0; dp < c.data_parallel; ++dp) g.push_back(GlobalRankOf(c, {tp, dp, pp}));
      groups.push_back(g);
    }
  }
  return groups;
}

void ExpectReducedIsSum(const WorkerConfig& c, const std::vector<RankResult>& results) {
  for (const auto& group : DataGroups(c)) {
    const size_t n = results[static_cast<size_t>(group[0])].first_local.size();
    ASSERT_GT(n, 0u);
    // Different data-parallel ranks saw different tokens: different gradients.
    if (group.size() > 1) {
      EXPECT_NE(results[static_cast<size_t>(group[0])].first_local,
                results[static_cast<size_t>(group[1])].first_local);
    }
    std::vector<double> sum(n, 0), magnitude(n, 0);
    for (int r : group) {
      const auto& local = results[static_cast<size_t>(r)].first_local;
      ASSERT_EQ(local.size(), n);
      for (size_t i = 0; i < n; ++i) {
        sum[i] += local[i];
        magnitude[i] += std::fabs(local[i]);
      }
    }
    double total = 0;
    for (double m : magnitude) total += m;
    EXPECT_GT(total, 0) << "the GEMMs produced no gradient";
    for (int r : group) {
      const RankResult& result = results[static_cast<size_t>(r)];
      ASSERT_EQ(result.first_reduced.size(), n);
      for (const auto& [offset, length] : result.owned) {
        for (size_t i = offset; i < offset + length; ++i) {
          ASSERT_NEAR(result.first_reduced[i], sum[i], 1e-5 * magnitude[i] + 1e-9)
              << "rank " << r << " element " << i;
        }
      }
    }
  }
}

void ExpectDataParallelWeightsIdentical(const WorkerConfig& c,
                                        const std::vector<RankResult>& results) {
  for (const auto& group : DataGroups(c)) {
    for (int r : group) {
      EXPECT_EQ(results[static_cast<size_t>(r)].parameters,
                results[static_cast<size_t>(group[0])].parameters)
          << "rank " << r << " diverged from rank " << group[0];
    }
  }
}

void ExpectScheduleCounts(const std::vector<RankResult>& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    const StepSchedule& s = results[r].schedule;
    const double bytes = s.BusBytesPerStep(Group::kTensor) + s.BusBytesPerStep(Group::kData) +
                         s.BusBytesPerStep(Group::kPipeline);
    for (const StepTiming& t : results[r].timings) {
      EXPECT_NEAR(t.gemm_flops, s.GemmFlopsPerStep(), 1e-9 * s.GemmFlopsPerStep()) << "rank " << r;
      EXPECT_NEAR(t.collective_bus_bytes, bytes, 1e-9 * bytes + 1e-9) << "rank " << r;
      EXPECT_GT(t.step_seconds, 0);
      EXPECT_NEAR(t.compute_seconds + t.collective_seconds, t.step_seconds, 1e-6);
    }
  }
}

void RunAndCheck(const WorkerConfig& config, bool weights_identical) {
  ASSERT_TRUE(ValidateConfig(config).ok()) << ValidateConfig(config).ToString();
  const std::vector<RankResult> results = RunRanks(config, 3, milliseconds(30'000));
  ASSERT_EQ(results.size(), static_cast<size_t>(config.world_size));
  for (size_t r = 0; r < results.size(); ++r) {
    ASSERT_TRUE(results[r].status.ok()) << "rank " << r << ": " << results[r].status.ToString();
    ASSERT_EQ(results[r].timings.size(), 3u);
  }
  ExpectReducedIsSum(config, results);
  if (weights_identical) ExpectDataParallelWeightsIdentical(config, results);
  ExpectScheduleCounts(results);
}

void RunAndCheck(const Plan& plan, bool weights_identical = true) {
  RunAndCheck(TinyConfig(plan), weights_identical);
}

TEST(CpuBackendTest, FourDataParallelRanksSumGradients) { RunAndCheck({1, 1, 4, 0}); }

TEST(CpuBackendTest, TensorAndDataParallel) { RunAndCheck({2, 1, 2, 0}); }

TEST(CpuBackendTest, PipelineAndDataParallel) { RunAndCheck({1, 2, 2, 0}); }

TEST(CpuBackendTest, ZeroOneShardsTheOptimizer) { RunAndCheck({1, 1, 4, 1}); }

TEST(CpuBackendTest, ZeroTwoSelectiveRecomputeSwiglu) {
  RunAndCheck({2, 1, 2, 2, planner::Recompute::kSelective, planner::FfnKind::kSwiglu, 2});
}

TEST(CpuBackendTest, ZeroThreeFullRecomputeWithPipeline) {
  // Under ZeRO 3 the full weights are refreshed by the next micro-batch's
  // all-gather, so only the sums and the counts are checked.
  RunAndCheck({2, 2, 1, 3, planner::Recompute::kFull}, /*weights_identical=*/false);
}

TEST(CpuBackendTest, ZeroThreeShardsWeightsAcrossDataParallelRanksWithTensorAndPipeline) {
  // d = 2 shards the weights (FSDP units, gathered per pass): the gradient
  // sums and the gather and reduce-scatter bytes must still be the
  // schedule's. A rank's parameters() holds only its shards, so they differ.
  RunAndCheck({2, 2, 2, 3, planner::Recompute::kFull}, /*weights_identical=*/false);
}

TEST(CpuBackendTest, ZeroThreeWithInterleavedPipelineChunks) {
  // Two chunks per stage: each chunk's layers are gathered in its own
  // passes, the tables in the first and last chunk's.
  WorkerConfig config = TinyConfig({1, 2, 2, 3});
  config.model.layers = 4;
  config.virtual_stages = 2;
  RunAndCheck(config, /*weights_identical=*/false);
}

TEST(CpuBackendTest, SilentPeerFailsTheOthersWithinTheTimeout) {
  const WorkerConfig config = TinyConfig({1, 1, 4, 0});
  const milliseconds timeout(2'000);
  const std::vector<RankResult> results = RunRanks(config, 1, timeout, /*idle=*/3);
  ASSERT_EQ(results.size(), 4u);
  for (int r = 0; r < 3; ++r) {
    const RankResult& result = results[static_cast<size_t>(r)];
    ASSERT_FALSE(result.status.ok()) << "rank " << r << " finished a step without rank 3";
    // The message is what an operator reads in the pod log: show it.
    std::fprintf(stderr, "rank %d: %s\n", r, result.status.ToString().c_str());
    EXPECT_TRUE(result.status.code() == StatusCode::kDeadlineExceeded ||
                result.status.code() == StatusCode::kUnavailable)
        << result.status.ToString();
    EXPECT_NE(result.status.message().find("global rank 3"), std::string::npos)
        << result.status.ToString();
    // Within the 2 s timeout, not Gloo's own 30 s default wait (what a
    // timeout not passed down would give): the 18 s between are slack for
    // two busy cores under a sanitizer, not a speed target.
    EXPECT_LT(result.seconds, 2.0 + 18.0) << result.status.ToString();
  }
}

// The backend pacer-worker runs keeps none of the test hooks' host copies:
// they were 12 bytes per parameter outside the memory tracker (the process
// used ~1.7x the peak_memory_bytes it reported) and copies inside the step.
TEST(CpuBackendTest, TheWorkersBackendKeepsNoHostCopies) {
  const WorkerConfig config = TinyConfig({1, 1, 1, 0});
  auto schedule = BuildStepSchedule(config, 0);
  ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
  // One rank, one step, against its own store.
  const auto run_one_step = [&](StepBackend& backend) {
    auto server = TcpStoreServer::Start("127.0.0.1", 0);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    auto client = TcpStoreClient::Connect("127.0.0.1", (*server)->port(), 0, milliseconds(10'000));
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    const BackendContext context{.config = &config,
                                 .schedule = &*schedule,
                                 .store = client->get(),
                                 .timeout = milliseconds(30'000)};
    ASSERT_TRUE(backend.Initialize(context, 1234).ok());
    ASSERT_TRUE(backend.RunStep(0).ok());
  };
  std::unique_ptr<StepBackend> backend = MakeCpuBackend();
  run_one_step(*backend);
  const auto* executor = dynamic_cast<const StepExecutor*>(backend.get());
  ASSERT_NE(executor, nullptr);
  EXPECT_TRUE(executor->local_gradients_before_reduce().empty());
  EXPECT_TRUE(executor->gradients_after_reduce().empty());
  // The tests' backend keeps them (the checks above are not vacuous).
  cpu::CpuBackend with_copies;
  run_one_step(with_copies);
  EXPECT_FALSE(with_copies.local_gradients_before_reduce().empty());
}

TEST(CpuBackendTest, RejectsMissingSchedule) {
  cpu::CpuBackend backend;
  BackendContext context;
  EXPECT_EQ(backend.Initialize(context, 1).code(), StatusCode::kInvalidArgument);
}

TEST(CpuBackendTest, ScaledGptShapeShrinksAndRunsItsSteps) {
  // A 1.3B-parameter GPT shape at --scale 0.05, two data-parallel ranks.
  // How fast the steps are is printed, not checked: a unit test on shared CI
  // cores, under sanitizers too, cannot hold a speed target.
  WorkerConfig config = TinyConfig({1, 1, 2, 0});
  config.model.layers = 24;
  config.model.hidden_size = 2048;
  config.model.attention_heads = 16;
  config.model.kv_heads = 16;
  config.model.ffn_hidden_size = 8192;
  config.model.vocab_size = 32000;
  config.model.sequence_length = 2048;
  config.micro_batch_size = 1;
  config.gradient_accumulation_steps = 2;
  config.global_batch_size = 4;
  config.scale = 0.05;
  std::optional<WorkerConfig> scaled = config;
  ASSERT_TRUE(ApplyScale(&*scaled).ok());
  EXPECT_EQ(scaled->model.hidden_size, 96);  // 16 heads of 6 (128 x 0.05)
  EXPECT_EQ(scaled->model.sequence_length, 102);
  EXPECT_EQ(scaled->model.layers, 5);
  EXPECT_EQ(scaled->model.vocab_size, 1600);
  const std::vector<RankResult> results = RunRanks(*scaled, 2, milliseconds(60'000));
  for (const RankResult& r : results) {
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    ASSERT_EQ(r.timings.size(), 2u);
    std::fprintf(stderr, "scaled step: %.3f s (%.3f compute, %.3f collective), %.2f GFLOP\n",
                 r.timings[1].step_seconds, r.timings[1].compute_seconds,
                 r.timings[1].collective_seconds, r.timings[1].gemm_flops / 1e9);
  }
  ExpectReducedIsSum(*scaled, results);
  ExpectDataParallelWeightsIdentical(*scaled, results);
}

TEST(CpuBackendTest, ScaleOutsideTheUnitIntervalIsRejected) {
  WorkerConfig config = TinyConfig({});
  config.scale = 0;
  EXPECT_EQ(ApplyScale(&config).code(), StatusCode::kInvalidArgument);
  config.scale = 1;
  ASSERT_TRUE(ApplyScale(&config).ok());
  EXPECT_EQ(config.model.hidden_size, 32);
}

TEST(CpuCalibrationTest, MeasuresGemmMemoryAndAllReduce) {
  const WorkerConfig config = TinyConfig({1, 1, 2, 0});
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  cpu::CpuCalibrationOptions options;
  options.gemm_sizes = {64, 128};
  options.all_reduce_bytes = {4 << 10, 64 << 10};
  options.memcpy_bytes = 1 << 20;
  options.iterations = 2;
  std::vector<StatusOr<cpu::CpuCalibrationReport>> reports(
      2, StatusOr<cpu::CpuCalibrationReport>(InternalError("not run")));
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      auto client =
          TcpStoreClient::Connect("127.0.0.1", (*server)->port(), rank, milliseconds(10'000));
      if (!client.ok()) {
        reports[static_cast<size_t>(rank)] = client.status();
        return;
      }
      auto comms = cpu::GlooComms::Connect(config, rank, client->get(), milliseconds(10'000));
      if (!comms.ok()) {
        reports[static_cast<size_t>(rank)] = comms.status();
        return;
      }
      reports[static_cast<size_t>(rank)] = cpu::CalibrateCpu(options, comms->get());
    });
  }
  for (std::thread& t : ranks) t.join();
  for (const auto& report : reports) {
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    ASSERT_EQ(report->gemm.size(), 2u);
    for (const cpu::GemmPoint& g : report->gemm) EXPECT_GT(g.gflops, 0);
    EXPECT_GT(report->memcpy_gbps, 0);
    EXPECT_EQ(report->ranks, 2);
    ASSERT_EQ(report->all_reduce.size(), 2u);
    for (const cpu::AllReducePoint& a : report->all_reduce) {
      EXPECT_GT(a.algbw_gbps, 0);
      EXPECT_DOUBLE_EQ(a.busbw_gbps, a.algbw_gbps);  // 2(n-1)/n = 1 for n = 2
    }
  }
}

}  // namespace
}  // namespace pacer::worker
