// pacer-gpu-smoke: runs a tiny single-GPU plan for three steps through the
// step executor on the GPU device and prints each step's time, the GFLOP
// issued next to the schedule's, the loss, and the peak tracked memory.
// Proves that the GPU library links (cuBLAS, NCCL) and, on a machine with a
// GPU, that a step runs end to end.
//   --compare-cpu  runs the same plan with the same seed on the CPU device
//                  too and compares the losses step by step and the first
//                  step's gradient norm of every matrix: exit 1 when they
//                  differ by more than the GPU's GEMM precision allows.
//   --full-attention  the plan's model without the causal mask
//                  (spec.model.causalAttention: false), so a bf16 fused
//                  plan runs cuDNN's SDPA where it can; by default the
//                  attention is causal and runs the device's causal tiles.
//   --unfused-attention  the plan's attention: unfused (the s x s
//                  probabilities stored, in bf16 under the bf16 plan).
//   --calibrate    runs the calibration (GEMM TFLOP/s, copy bandwidth,
//                  all-reduce busbw) instead and prints its table.
// Exit 0 on success, 77 when no GPU is visible (ctest's SKIP_RETURN_CODE for
// the `gpu` label: "skipped", not "passed"), 1 on any error or mismatch.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/step_executor.h"
#include "core/step_schedule.h"
#include "core/tcp_store.h"
#include "core/worker_config.h"
#include "cpu/cpu_backend.h"
#include "gpu/calibrate_gpu.h"
#include "gpu/device_info.h"
#include "gpu/gpu_device.h"

namespace {

using namespace pacer::worker;

int Calibrate() {
  auto report = CalibrateGpu(GpuCalibrationOptions{});
  if (!report.ok()) {
    std::fprintf(stderr, "pacer-gpu-smoke: %s\n", report.status().ToString().c_str());
    return 1;
  }
  std::printf("%s (sm_%d%d), %d GPU(s)\n", report->device_name.c_str(),
              report->compute_capability_major, report->compute_capability_minor,
              report->device_count);
  std::printf("%-6s %8s %12s %10s\n", "dtype", "n", "ms", "TFLOP/s");
  for (const GemmMeasurement& g : report->gemms) {
    std::printf("%-6s %8lld %12.3f %10.1f\n", g.dtype.c_str(), static_cast<long long>(g.size),
                g.seconds * 1e3, g.tflops);
  }
  std::printf("device-to-device copy: %.0f GB/s\n", report->memory_bandwidth_gbps);
  std::printf("%12s %12s %12s %12s\n", "bytes", "us", "algbw GB/s", "busbw GB/s");
  for (const AllReduceMeasurement& a : report->all_reduce) {
    std::printf("%12lld %12.1f %12.1f %12.1f\n", static_cast<long long>(a.bytes), a.seconds * 1e6,
                a.algbw_gbps, a.busbw_gbps);
  }
  for (const std::string& note : report->notes) std::printf("note: %s\n", note.c_str());
  return 0;
}

// The tiny plan: one rank, 4 layers of a 512-wide SwiGLU model with
// grouped-query attention, two micro-batches of two 256-token sequences.
WorkerConfig TinyPlan() {
  WorkerConfig c;
  c.micro_batch_size = 2;
  c.gradient_accumulation_steps = 2;
  c.global_batch_size = 4;
  c.recompute = pacer::planner::Recompute::kSelective;
  c.model.layers = 4;
  c.model.hidden_size = 512;
  c.model.attention_heads = 8;
  c.model.kv_heads = 4;
  c.model.ffn_hidden_size = 1408;
  c.model.ffn_kind = pacer::planner::FfnKind::kSwiglu;
  c.model.vocab_size = 8192;
  c.model.sequence_length = 256;
  return c;
}

constexpr int kSteps = 3;
constexpr uint64_t kSeed = 1234;

// What a run leaves to compare: each step's loss, and the first step's
// gradient norm of each matrix (before the optimizer; empty unless the
// executor keeps host copies).
struct RunResult {
  std::vector<double> losses;
  std::vector<double> first_gradient_norms;
  std::vector<std::string> matrices;
};

// Runs the plan for kSteps steps on `backend`, printing a line per step.
// `store` may be null for the GPU (a group of one needs no rendezvous);
// the CPU device's Gloo needs one.
bool Run(const char* label, StepExecutor& backend, const WorkerConfig& c,
         const StepSchedule& schedule, TcpStoreClient* store, RunResult* result) {
  BackendContext context;
  context.config = &c;
  context.schedule = &schedule;
  context.store = store;
  context.timeout = std::chrono::milliseconds(60'000);
  if (pacer::Status s = backend.Initialize(context, kSeed); !s.ok()) {
    std::fprintf(stderr, "pacer-gpu-smoke: %s: %s\n", label, s.ToString().c_str());
    return false;
  }
  for (int64_t step = 0; step < kSteps; ++step) {
    auto timing = backend.RunStep(step);
    if (!timing.ok()) {
      std::fprintf(stderr, "pacer-gpu-smoke: %s: %s\n", label, timing.status().ToString().c_str());
      return false;
    }
    result->losses.push_back(backend.last_loss());
    if (step == 0) {
      result->first_gradient_norms =
          RangeNorms(backend.local_gradients_before_reduce(), backend.parameter_ranges());
      for (const ParameterRange& r : backend.parameter_ranges()) result->matrices.push_back(r.name);
    }
    std::printf("%s step %lld: %.3f ms, %.3f GFLOP issued (schedule %.3f), loss %.6f\n", label,
                static_cast<long long>(step), timing->step_seconds * 1e3, timing->gemm_flops / 1e9,
                schedule.GemmFlopsPerStep() / 1e9, backend.last_loss());
  }
  std::printf("%s peak memory %.1f MiB (GEMMs in %s)\n", label,
              backend.PeakMemoryBytes() / (1024.0 * 1024.0),
              pacer::planner::PrecisionName(backend.ExecutedPrecision(c.precision)));
  return true;
}

// The largest relative differences a correct GPU run may show against the
// CPU device (fp32 OpenBLAS), by the GPU's GEMM precision.
// The loss is a mean over 1,024 tokens of cross-entropy ~ ln(8192) = 9,
// computed from logits that pass through 4 layers of GEMMs; rounding
// errors of the GEMM inputs are independent across tokens and largely
// cancel in the mean, so the loss differs by much less than one unit
// roundoff u. We allow about u (a rounding error that did not cancel at
// all), plus the fp32 floor:
//   bf16 compute: u = 2^-8 = 3.9e-3   -> 5e-3
//   tf32 compute: u = 2^-11 = 4.9e-4  -> 1e-3
//   fp32:         summation order, fp32 vs double row reductions and three
//                 AdamW steps (which amplify tiny gradient differences into
//                 sign flips of near-zero updates)  -> 1e-4
// The first step's gradient norm of one matrix is a sum of squares over
// thousands of elements, each the product of backward GEMMs over 1,024
// tokens whose input roundings mostly cancel, but over fewer terms than the
// loss averages, and the softmax and norm gradients amplify differences:
// about 4 u (bf16), 4 u (tf32), the fp32 floor.
// A wrong kernel or a misplaced operand moves either by far more: after the
// first step the loss no longer falls as the CPU's does, and a wrong
// gradient kernel (a missing grouped-query sum, a transposed operand) is
// off by tens of percent.
struct Tolerances {
  double loss = 0, gradient_norm = 0;
};
Tolerances TolerancesFor(pacer::planner::Precision executed) {
  switch (executed) {
    case pacer::planner::Precision::kBf16:
    case pacer::planner::Precision::kFp16:
      return {5e-3, 1.5e-2};
    case pacer::planner::Precision::kTf32:
      return {1e-3, 2e-3};
    default:
      return {1e-4, 1e-4};
  }
}

// |a - b| / |b| <= tolerance, false for NaN.
bool Within(double a, double b, double tolerance, double* diff) {
  *diff = std::fabs(a - b) / std::max(std::fabs(b), 1e-30);
  return *diff <= tolerance;
}

int CompareWithCpu(const WorkerConfig& c, const StepSchedule& schedule, const RunResult& gpu,
                   pacer::planner::Precision gpu_precision) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  if (!server.ok()) {
    std::fprintf(stderr, "pacer-gpu-smoke: store: %s\n", server.status().ToString().c_str());
    return 1;
  }
  auto client = TcpStoreClient::Connect("127.0.0.1", (*server)->port(), 0,
                                        std::chrono::milliseconds(10'000));
  if (!client.ok()) {
    std::fprintf(stderr, "pacer-gpu-smoke: store: %s\n", client.status().ToString().c_str());
    return 1;
  }
  cpu::CpuBackend cpu_backend;
  RunResult cpu;
  if (!Run("cpu", cpu_backend, c, schedule, client->get(), &cpu)) return 1;
  bool ok = cpu.losses.size() == gpu.losses.size() &&
            cpu.first_gradient_norms.size() == gpu.first_gradient_norms.size() &&
            !cpu.first_gradient_norms.empty();
  const Tolerances tolerances = TolerancesFor(gpu_precision);
  const double loss_tolerance = tolerances.loss;
  std::printf("%-14s %12s %12s %12s\n", "step", "cpu loss", "gpu loss", "rel. diff");
  for (size_t i = 0; i < cpu.losses.size() && i < gpu.losses.size(); ++i) {
    double diff = 0;
    const bool within = Within(gpu.losses[i], cpu.losses[i], loss_tolerance, &diff);
    std::printf("%-14zu %12.6f %12.6f %12.3e%s\n", i, cpu.losses[i], gpu.losses[i], diff,
                within ? "" : "  MISMATCH");
    ok = ok && within;
  }
  const double norm_tolerance = tolerances.gradient_norm;
  std::printf("%-14s %12s %12s %12s\n", "step 0 grad", "cpu norm", "gpu norm", "rel. diff");
  for (size_t i = 0; i < cpu.first_gradient_norms.size() && i < gpu.first_gradient_norms.size();
       ++i) {
    double diff = 0;
    const double want = cpu.first_gradient_norms[i], got = gpu.first_gradient_norms[i];
    const bool within = Within(got, want, norm_tolerance, &diff);
    std::printf("%-14s %12.6e %12.6e %12.3e%s\n", cpu.matrices[i].c_str(), want, got, diff,
                within ? "" : "  MISMATCH");
    ok = ok && within;
  }
  std::printf("tolerance %.1e on losses, %.1e on gradient norms (GPU GEMMs in %s): %s\n",
              loss_tolerance, norm_tolerance, pacer::planner::PrecisionName(gpu_precision),
              ok ? "match" : "MISMATCH");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  bool compare_cpu = false, calibrate = false, full_attention = false, unfused = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--calibrate") == 0) {
      calibrate = true;
    } else if (std::strcmp(argv[i], "--compare-cpu") == 0) {
      compare_cpu = true;
    } else if (std::strcmp(argv[i], "--full-attention") == 0) {
      full_attention = true;
    } else if (std::strcmp(argv[i], "--unfused-attention") == 0) {
      unfused = true;
    } else {
      std::fprintf(stderr,
                   "usage: pacer-gpu-smoke [--compare-cpu] [--full-attention] "
                   "[--unfused-attention] | --calibrate\n");
      return 1;
    }
  }
  // The GPU switches (PACER_CUDNN_ATTENTION=0, ...) as a worker reads them,
  // checked before anything else so a misspelt one shows on any machine.
  const pacer::StatusOr<GpuSwitches> switches =
      GpuSwitchesFromEnvironment([](const char* name) { return std::getenv(name); });
  if (!switches.ok()) {
    std::fprintf(stderr, "pacer-gpu-smoke: %s\n", switches.status().ToString().c_str());
    return 1;
  }
  auto devices = QueryDevices();
  if (!devices.ok()) {
    std::fprintf(stderr, "pacer-gpu-smoke: %s\n", devices.status().ToString().c_str());
    return 1;
  }
  if (devices->empty()) {
    std::printf(
        "pacer-gpu-smoke: no CUDA device visible (no NVIDIA driver or GPU on this "
        "machine); skipped, run it where a GPU is present\n");
    return 77;
  }
  if (calibrate) return Calibrate();
  WorkerConfig c = TinyPlan();
  c.model.causal_attention = !full_attention;
  if (unfused) c.attention = pacer::planner::AttentionKernel::kUnfused;
  c.gpu = *switches;
  auto schedule = BuildStepSchedule(c, 0);
  if (!schedule.ok()) {
    std::fprintf(stderr, "pacer-gpu-smoke: %s\n", schedule.status().ToString().c_str());
    return 1;
  }
  RunResult gpu_run;
  pacer::planner::Precision gpu_precision = c.precision;
  {
    // The GPU backend without the executor's host copies, except when
    // comparing: then the gradients come back to the host each step (a
    // tiny model).
    StepExecutor backend(gpu::MakeGpuDevice(), /*host_copies=*/compare_cpu);
    if (!Run("gpu", backend, c, *schedule, nullptr, &gpu_run)) return 1;
    gpu_precision = backend.ExecutedPrecision(c.precision);
    std::printf(
        "note: fp32 storage; attention %s, %s (the device's log line above says which kernel "
        "ran)\n",
        pacer::planner::AttentionKernelName(c.attention),
        c.model.causal_attention ? "causal" : "full (no mask)");
  }
  if (!compare_cpu) return 0;
  return CompareWithCpu(c, *schedule, gpu_run, gpu_precision);
}
