// pacer-gpu-smoke: builds the GPU backend for a tiny single-GPU plan and runs
// three steps, printing their timings and the peak memory. Proves that the
// GPU library links (cuBLAS, NCCL) and, on a machine with a GPU, that a step
// runs end to end. `pacer-gpu-smoke --calibrate` instead runs the calibration
// (GEMM TFLOP/s, copy bandwidth, all-reduce busbw) and prints its table.
// Exit 0 on success, 77 when no GPU is visible (ctest's SKIP_RETURN_CODE for
// the `gpu` label: "skipped", not "passed"), 1 on any error.
#include <cstdio>
#include <cstring>

#include "core/step_schedule.h"
#include "core/worker_config.h"
#include "gpu/calibrate_gpu.h"
#include "gpu/device_info.h"
#include "gpu/gpu_backend.h"

namespace {

int Calibrate() {
  using namespace pacer::worker;
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

}  // namespace

int main(int argc, char** argv) {
  using namespace pacer::worker;
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
  if (argc > 1 && std::strcmp(argv[1], "--calibrate") == 0) return Calibrate();
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
  auto schedule = BuildStepSchedule(c, 0);
  if (!schedule.ok()) {
    std::fprintf(stderr, "pacer-gpu-smoke: %s\n", schedule.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<StepBackend> backend = MakeGpuBackend();
  BackendContext context;
  context.config = &c;
  context.schedule = &*schedule;
  context.timeout = std::chrono::milliseconds(60'000);
  if (pacer::Status s = backend->Initialize(context, 1234); !s.ok()) {
    std::fprintf(stderr, "pacer-gpu-smoke: %s\n", s.ToString().c_str());
    return 1;
  }
  for (int64_t step = 0; step < 3; ++step) {
    auto timing = backend->RunStep(step);
    if (!timing.ok()) {
      std::fprintf(stderr, "pacer-gpu-smoke: %s\n", timing.status().ToString().c_str());
      return 1;
    }
    std::printf("step %lld: %.3f ms, %.3f GFLOP issued (schedule %.3f)\n",
                static_cast<long long>(step), timing->step_seconds * 1e3, timing->gemm_flops / 1e9,
                schedule->GemmFlopsPerStep() / 1e9);
  }
  std::printf("peak memory %.1f MiB\n", backend->PeakMemoryBytes() / (1024.0 * 1024.0));
  return 0;
}
