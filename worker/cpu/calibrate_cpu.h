// CalibrateCpu: what `pacer-worker calibrate` measures on a host without a
// GPU, with the same tools the CPU backend uses: OpenBLAS sgemm throughput
// over square sizes (fp32), memory bandwidth (a large memcpy), and, given
// connected communicators, Gloo all-reduce bandwidth over message sizes with
// nccl-tests' definitions: algbw = bytes / time, busbw = algbw x 2(n-1)/n.
// It returns data; printing and JSON are the caller's.
//
// Units: sizes in elements (GEMM) or bytes (messages), seconds, FLOP/s and
// bytes/s (reported as GFLOP/s and GB/s, 1e9).
// Thread-safety: call from one thread per rank; every rank of the group must
// call it with the same options (the all-reduces are collective).
#ifndef PACER_WORKER_CPU_CALIBRATE_CPU_H_
#define PACER_WORKER_CPU_CALIBRATE_CPU_H_

#include <cstddef>
#include <vector>

#include "cpu/gloo_comms.h"
#include "pacer/status.h"

namespace pacer::worker::cpu {

struct CpuCalibrationOptions {
  std::vector<int> gemm_sizes = {256, 512, 1024, 2048};  // m = n = k
  std::vector<size_t> all_reduce_bytes = {4 << 10,  16 << 10, 64 << 10, 256 << 10, 1 << 20,
                                          4 << 20,  16 << 20, 64 << 20};
  size_t memcpy_bytes = size_t{256} << 20;
  int warmup = 1;      // untimed repetitions per point
  int iterations = 5;  // timed repetitions per point (the mean is reported)
};

struct GemmPoint {
  int size = 0;
  double seconds = 0;  // one sgemm
  double gflops = 0;
};

struct AllReducePoint {
  size_t bytes = 0;
  double seconds = 0;  // one all-reduce, this rank's view
  double algbw_gbps = 0;
  double busbw_gbps = 0;
};

struct CpuCalibrationReport {
  std::vector<GemmPoint> gemm;
  double memcpy_gbps = 0;  // bytes copied per second (read once, written once)
  int ranks = 1;           // of the all-reduce group
  std::vector<AllReducePoint> all_reduce;  // empty without communicators
};

// `comms` may be null (no all-reduce measured); otherwise its data-parallel
// group is measured, so connect it with a WorkerConfig of data_parallel = n
// (t = p = 1). Errors: the collectives' (Unavailable / DeadlineExceeded),
// ResourceExhausted when the buffers cannot be allocated, InvalidArgument
// for empty or non-positive sizes.
StatusOr<CpuCalibrationReport> CalibrateCpu(const CpuCalibrationOptions& options,
                                            GlooComms* comms);

}  // namespace pacer::worker::cpu

#endif  // PACER_WORKER_CPU_CALIBRATE_CPU_H_
