#include "cpu/calibrate_cpu.h"

#include <chrono>
#include <cstring>
#include <new>
#include <string>

#include "cpu/cpu_kernels.h"

namespace pacer::worker::cpu {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

StatusOr<CpuCalibrationReport> CalibrateCpu(const CpuCalibrationOptions& options,
                                            GlooComms* comms) {
  if (options.iterations <= 0 || options.warmup < 0) {
    return InvalidArgumentError("calibration needs at least one timed iteration");
  }
  CpuCalibrationReport report;
  try {
    for (int n : options.gemm_sizes) {
      if (n <= 0) return InvalidArgumentError("GEMM size must be positive, got " + std::to_string(n));
      const size_t elems = static_cast<size_t>(n) * static_cast<size_t>(n);
      std::vector<float> a(elems), b(elems), c(elems);
      for (size_t i = 0; i < elems; ++i) {
        a[i] = UniformFromHash(HashKeys(1, i));
        b[i] = UniformFromHash(HashKeys(2, i));
      }
      for (int i = 0; i < options.warmup; ++i) {
        Sgemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n, nullptr);
      }
      double flops = 0;
      const Clock::time_point start = Clock::now();
      for (int i = 0; i < options.iterations; ++i) {
        Sgemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n, &flops);
      }
      const double seconds = Since(start);
      report.gemm.push_back({n, seconds / options.iterations, flops / seconds / 1e9});
    }

    if (options.memcpy_bytes > 0) {
      std::vector<char> from(options.memcpy_bytes, 1), to(options.memcpy_bytes, 0);
      for (int i = 0; i < options.warmup; ++i) std::memcpy(to.data(), from.data(), from.size());
      const Clock::time_point start = Clock::now();
      for (int i = 0; i < options.iterations; ++i) {
        from[static_cast<size_t>(i) % from.size()] = static_cast<char>(i);  // not elided
        std::memcpy(to.data(), from.data(), from.size());
      }
      report.memcpy_gbps =
          static_cast<double>(from.size()) * options.iterations / Since(start) / 1e9;
    }
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("calibration buffers do not fit in host memory");
  }

  if (comms == nullptr) return report;
  const int n = comms->size(Group::kData);
  report.ranks = n;
  for (size_t bytes : options.all_reduce_bytes) {
    if (bytes < sizeof(float)) return InvalidArgumentError("all-reduce size below one float");
    std::vector<float> data(bytes / sizeof(float), 1.0f);
    const std::string what = "calibrate-" + std::to_string(bytes);
    for (int i = 0; i < options.warmup; ++i) {
      RETURN_IF_ERROR(comms->AllReduce(Group::kData, data.data(), data.size(), what));
    }
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < options.iterations; ++i) {
      RETURN_IF_ERROR(comms->AllReduce(Group::kData, data.data(), data.size(), what));
    }
    AllReducePoint point;
    point.bytes = data.size() * sizeof(float);
    point.seconds = Since(start) / options.iterations;
    point.algbw_gbps = static_cast<double>(point.bytes) / point.seconds / 1e9;
    point.busbw_gbps = n > 1 ? point.algbw_gbps * 2.0 * (n - 1) / n : 0.0;
    report.all_reduce.push_back(point);
  }
  return report;
}

}  // namespace pacer::worker::cpu
