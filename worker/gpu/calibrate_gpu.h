// CalibrateGpu: measurements of this machine's GPUs that replace the
// planner's default efficiencies (`pacer-worker calibrate`, which prints them
// as a table and writes the calibration JSON of planner/calibration.h):
//   - dense GEMM throughput over square sizes and dtypes (fp16, bf16, tf32,
//     fp32, and fp8 through cublasLt where the GPU has fp8 tensor cores),
//     warmed up and then timed with CUDA events;
//   - device-to-device copy bandwidth (memoryBandwidthGBps, read + write);
//   - NCCL all-reduce over all local GPUs in one process (ncclCommInitAll)
//     over message sizes, reported as nccl-tests defines them: algbw =
//     bytes / time, busbw = algbw x 2 (n - 1) / n.
// The report is plain data; JSON and table formatting belong to the caller.
// gemmEfficiency = BestTflops(dtype) / the catalog's dense peak for it.
//
// Units: sizes in elements (GEMM n) and bytes (messages); seconds; TFLOP/s
// (1e12, multiply-add = 2); GB/s (1e9 bytes). Thread-safety: uses every
// visible GPU; run one calibration at a time per machine.
#ifndef PACER_WORKER_GPU_CALIBRATE_GPU_H_
#define PACER_WORKER_GPU_CALIBRATE_GPU_H_

#include <cstdint>
#include <string>
#include <vector>

#include "pacer/status.h"

namespace pacer::worker {

struct GpuCalibrationOptions {
  std::vector<int64_t> gemm_sizes = {1024, 2048, 4096, 8192, 16384};
  std::vector<std::string> gemm_dtypes = {"fp16", "bf16", "bf16-on-fp32", "tf32",
                                              "fp32", "fp8"};
  int gemm_warmup_iterations = 3;
  int gemm_timed_iterations = 10;
  int64_t copy_bytes = int64_t{1} << 30;
  int copy_iterations = 20;
  int64_t all_reduce_min_bytes = int64_t{1} << 20;
  int64_t all_reduce_max_bytes = int64_t{1} << 30;
  int all_reduce_warmup_iterations = 5;
  int all_reduce_timed_iterations = 20;
  int device = 0;  // the GPU for GEMMs and copies
};

struct GemmMeasurement {
  std::string dtype;
  int64_t size = 0;  // m = n = k
  double seconds = 0;  // one GEMM
  double tflops = 0;
};

struct AllReduceMeasurement {
  int64_t bytes = 0;
  double seconds = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
};

struct GpuCalibrationReport {
  std::string device_name;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int device_count = 0;
  std::vector<GemmMeasurement> gemms;
  double memory_bandwidth_gbps = 0;
  int all_reduce_ranks = 0;  // 0: no collective measured (see notes)
  std::vector<AllReduceMeasurement> all_reduce;
  std::vector<std::string> notes;  // skipped measurements and why

  // The best TFLOP/s of `dtype` over the measured sizes (0 if none).
  double BestTflops(const std::string& dtype) const {
    double best = 0;
    for (const GemmMeasurement& g : gemms) {
      if (g.dtype == dtype && g.tflops > best) best = g.tflops;
    }
    return best;
  }
  // The largest message's busbw: what intraNodeBusBandwidthGBps means.
  double LargeMessageBusbwGbps() const {
    return all_reduce.empty() ? 0 : all_reduce.back().busbw_gbps;
  }
};

// FailedPrecondition when no GPU is visible; CUDA errors carry host, file
// and line. A dtype the GPU cannot run (fp8 before sm_89) is skipped with a
// note, not an error.
StatusOr<GpuCalibrationReport> CalibrateGpu(const GpuCalibrationOptions& options);

}  // namespace pacer::worker

#endif  // PACER_WORKER_GPU_CALIBRATE_GPU_H_
