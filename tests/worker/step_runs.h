// Runs of the step executor for the worker tests: one thread per rank,
// each with its own store client, communicators and executor over a device
// (the CPU device unless a test gives another), and the per-stage results
// of one step (loss, FLOPs, peak memory, gradients by matrix) to compare
// runs. Units: bytes for memory, FLOPs as Device counts them.
// Thread-safety: OnRanks runs `fn` on one thread per rank; the results are
// written by each rank's thread to its own slot.
#ifndef PACER_TESTS_WORKER_STEP_RUNS_H_
#define PACER_TESTS_WORKER_STEP_RUNS_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/step_executor.h"
#include "core/step_schedule.h"
#include "core/tcp_store.h"
#include "cpu/cpu_device.h"
#include "pacer/planner/cost_model.h"

namespace pacer::worker::testing {

// A rank's device: the CPU device unless a test gives another.
using DeviceFactory = std::function<std::unique_ptr<Device>()>;

// Runs fn(rank, executor) on one thread per rank after Initialize; returns
// each rank's status.
inline std::vector<Status> OnRanks(const WorkerConfig& config,
                                   const std::function<Status(int, StepExecutor&)>& fn,
                                   const DeviceFactory& make_device = nullptr) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  if (!server.ok()) return {server.status()};
  const int port = (*server)->port();
  std::vector<Status> results(static_cast<size_t>(config.world_size));
  std::vector<std::future<void>> done;
  for (int rank = 0; rank < config.world_size; ++rank) {
    done.push_back(std::async(std::launch::async, [&, rank] {
      results[static_cast<size_t>(rank)] = [&]() -> Status {
        ASSIGN_OR_RETURN(auto client, TcpStoreClient::Connect("127.0.0.1", port, rank,
                                                              std::chrono::milliseconds(10'000)));
        ASSIGN_OR_RETURN(StepSchedule schedule, BuildStepSchedule(config, rank));
        StepExecutor backend(make_device ? make_device() : cpu::MakeCpuDevice());
        BackendContext context;
        context.config = &config;
        context.schedule = &schedule;
        context.global_rank = rank;
        context.local_rank = rank;
        context.store = client.get();
        context.timeout = std::chrono::milliseconds(30'000);
        RETURN_IF_ERROR(backend.Initialize(context, 99));
        const Status status = fn(rank, backend);
        // As the runner leaves: no rank tears its communicators down while
        // another is still connecting them (an `fn` without collectives
        // returns at once, and its peer's rendezvous saw "connection closed
        // by peer").
        RETURN_IF_ERROR(
            client->Barrier("on-ranks/exit", config.world_size, std::chrono::milliseconds(30'000)));
        return status;
      }();
    }));
  }
  for (auto& f : done) f.wait();
  return results;
}

inline void ExpectAllOk(const std::vector<Status>& statuses) {
  ASSERT_FALSE(statuses.empty());
  for (size_t r = 0; r < statuses.size(); ++r) {
    ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
  }
}

// Each rank's peak bytes of the model state's buffer classes (and the
// workspace) over `steps` steps of `config`.
struct StateBytes {
  double weights = 0, gradients = 0, optimizer = 0, workspace = 0;
};
inline std::vector<StateBytes> PeakStateBytes(const WorkerConfig& config, int steps,
                                              const DeviceFactory& make_device = nullptr) {
  std::vector<StateBytes> measured(static_cast<size_t>(config.world_size));
  ExpectAllOk(OnRanks(
      config,
      [&](int rank, StepExecutor& b) -> Status {
        for (int step = 0; step < steps; ++step) {
          ASSIGN_OR_RETURN(StepTiming t, b.RunStep(step));
          (void)t;
        }
        const MemoryTracker& m = b.memory();
        measured[static_cast<size_t>(rank)] = {m.class_peak_bytes(BufferClass::kWeights),
                                               m.class_peak_bytes(BufferClass::kGradients),
                                               m.class_peak_bytes(BufferClass::kOptimizer),
                                               m.class_peak_bytes(BufferClass::kWorkspace)};
        return Status::Ok();
      },
      make_device));
  return measured;
}

// Weights, gradients and optimizer state of `measured` within 5% of the
// planner's `predicted`, each printed.
inline void ExpectPredictedState(const StateBytes& measured,
                                 const planner::MemoryBreakdown& predicted,
                                 const std::string& what) {
  const std::pair<const char*, std::pair<double, double>> classes[] = {
      {"weights", {measured.weights, predicted.weights_bytes}},
      {"gradients", {measured.gradients, predicted.gradients_bytes}},
      {"optimizer", {measured.optimizer, predicted.optimizer_bytes}}};
  for (const auto& [name, values] : classes) {
    std::fprintf(stderr, "%s %-9s measured %9.0f predicted %9.0f bytes\n", what.c_str(), name,
                 values.first, values.second);
    ASSERT_GT(values.second, 0) << what << " " << name;
    EXPECT_NEAR(values.first / values.second, 1.0, 0.05) << what << " " << name;
  }
}

struct StageResult {
  int tensor_rank = 0;
  std::map<std::string, std::vector<uint64_t>> unsplit;  // UnsplitIndex of each element
  double loss = 0;
  double gemm_flops = 0;
  double peak_memory_bytes = 0;
  double activations_peak_bytes = 0;  // BufferClass::kActivations
  bool holds_logits = false;
  std::map<std::string, std::vector<float>> gradients;
};

inline std::vector<StageResult> OneStepByName(const WorkerConfig& config,
                                              const DeviceFactory& make_device = nullptr) {
  std::vector<StageResult> results(static_cast<size_t>(config.world_size));
  ExpectAllOk(OnRanks(
      config,
      [&](int rank, StepExecutor& b) -> Status {
        ASSIGN_OR_RETURN(StepTiming t, b.RunStep(0));
        StageResult& r = results[static_cast<size_t>(rank)];
        r.gemm_flops = t.gemm_flops;
        r.peak_memory_bytes = b.PeakMemoryBytes();
        r.activations_peak_bytes = b.memory().class_peak_bytes(BufferClass::kActivations);
        r.loss = b.last_loss();
        r.tensor_rank = rank % config.tensor_parallel;
        const auto& g = b.local_gradients_before_reduce();
        for (const ParameterRange& range : b.parameter_ranges()) {
          r.gradients[range.name].assign(
              g.begin() + static_cast<std::ptrdiff_t>(range.offset),
              g.begin() + static_cast<std::ptrdiff_t>(range.offset + range.length));
          std::vector<uint64_t>& u = r.unsplit[range.name];
          for (size_t i = 0; i < range.length; ++i) u.push_back(b.UnsplitIndex(range, i));
          r.holds_logits = r.holds_logits || range.name == "output";
        }
        return Status::Ok();
      },
      make_device));
  return results;
}

inline double LargestMagnitude(const std::vector<float>& v) {
  double most = 0;
  for (float x : v) most = std::max(most, static_cast<double>(std::fabs(x)));
  return most;
}

// The same matrices with the same gradients, to `tolerance` (relative) of
// each matrix's largest element.
inline void ExpectSameGradients(const StageResult& got, const StageResult& want,
                                const std::string& what, double tolerance = 1e-4) {
  ASSERT_EQ(got.gradients.size(), want.gradients.size()) << what;
  for (const auto& [name, g] : want.gradients) {
    const std::vector<float>& o = got.gradients.at(name);
    ASSERT_EQ(o.size(), g.size()) << name;
    const double scale = LargestMagnitude(g);
    ASSERT_GT(scale, 0) << name;
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_NEAR(o[i], g[i], tolerance * scale) << name << "[" << i << "] " << what;
    }
  }
}

}  // namespace pacer::worker::testing

#endif  // PACER_TESTS_WORKER_STEP_RUNS_H_
