#include "gpu/calibrate_gpu.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "gpu/cuda_check.h"
#include "gpu/device_info.h"
#include "gpu/gpu_kernels.h"

namespace pacer::worker {
namespace {

#define CUBLASLTCHECK(cmd)                                                                \
  do {                                                                                    \
    cublasStatus_t pacer_lt_err_ = (cmd);                                                 \
    if (pacer_lt_err_ != CUBLAS_STATUS_SUCCESS) {                                         \
      return ::pacer::Status(::pacer::StatusCode::kInternal,                              \
                             ::pacer::worker::GpuErrorWhere(__FILE__, __LINE__) +         \
                                 ": cuBLASLt error: " +                                   \
                                 cublasGetStatusString(pacer_lt_err_) + " (" #cmd ")");   \
    }                                                                                     \
  } while (0)

// Device memory freed on scope exit.
struct DeviceBuffer {
  void* p = nullptr;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p != nullptr) (void)cudaFree(p);
  }
  Status Allocate(size_t bytes) {
    CUDACHECK(cudaMalloc(&p, bytes));
    return Status::Ok();
  }
};

struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  ~EventPair() {
    if (start != nullptr) (void)cudaEventDestroy(start);
    if (stop != nullptr) (void)cudaEventDestroy(stop);
  }
  Status Create() {
    CUDACHECK(cudaEventCreate(&start));
    CUDACHECK(cudaEventCreate(&stop));
    return Status::Ok();
  }
  StatusOr<double> Seconds() const {
    CUDACHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDACHECK(cudaEventElapsedTime(&ms, start, stop));
    return static_cast<double>(ms) / 1e3;
  }
};

struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  DType fill;
};

bool TypesFor(const std::string& dtype, GemmTypes* out) {
  if (dtype == "fp16") *out = {CUDA_R_16F, CUBLAS_COMPUTE_32F, DType::kFp16};
  else if (dtype == "bf16") *out = {CUDA_R_16BF, CUBLAS_COMPUTE_32F, DType::kBf16};
  else if (dtype == "tf32") *out = {CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, DType::kFp32};
  else if (dtype == "fp32") *out = {CUDA_R_32F, CUBLAS_COMPUTE_32F, DType::kFp32};
  // bf16 tensor cores on fp32 storage (cuBLAS rounds the inputs): what a
  // device that keeps fp32 tensors gets without converting them itself.
  else if (dtype == "bf16-on-fp32")
    *out = {CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_16BF, DType::kFp32};
  else return false;
  return true;
}

// Times `iterations` launches of `launch` after `warmup` untimed ones.
template <typename Launch>
StatusOr<double> TimePerIteration(cudaStream_t stream, int warmup, int iterations,
                                  Launch&& launch) {
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(launch());
  EventPair events;
  RETURN_IF_ERROR(events.Create());
  CUDACHECK(cudaEventRecord(events.start, stream));
  for (int i = 0; i < iterations; ++i) RETURN_IF_ERROR(launch());
  CUDACHECK(cudaEventRecord(events.stop, stream));
  ASSIGN_OR_RETURN(double seconds, events.Seconds());
  return seconds / std::max(1, iterations);
}

StatusOr<GemmMeasurement> MeasureCublasGemm(cublasHandle_t handle, cudaStream_t stream,
                                            const std::string& dtype, int64_t n,
                                            const GpuCalibrationOptions& o) {
  GemmTypes types{};
  TypesFor(dtype, &types);
  const size_t bytes = static_cast<size_t>(n * n * DTypeBytes(types.fill));
  DeviceBuffer a, b, c;
  RETURN_IF_ERROR(a.Allocate(bytes));
  RETURN_IF_ERROR(b.Allocate(bytes));
  RETURN_IF_ERROR(c.Allocate(bytes));
  RETURN_IF_ERROR(FillUniform(a.p, types.fill, n * n, 1, 0, 1.0f, stream));
  RETURN_IF_ERROR(FillUniform(b.p, types.fill, n * n, 2, 0, 1.0f, stream));
  const float alpha = 1.0f, beta = 0.0f;
  const int dim = static_cast<int>(n);
  ASSIGN_OR_RETURN(double seconds,
                   TimePerIteration(stream, o.gemm_warmup_iterations, o.gemm_timed_iterations,
                                    [&]() -> Status {
                                      CUBLASCHECK(cublasGemmEx(
                                          handle, CUBLAS_OP_N, CUBLAS_OP_N, dim, dim, dim, &alpha,
                                          a.p, types.data, dim, b.p, types.data, dim, &beta, c.p,
                                          types.data, dim, types.compute, CUBLAS_GEMM_DEFAULT));
                                      return Status::Ok();
                                    }));
  GemmMeasurement m;
  m.dtype = dtype;
  m.size = n;
  m.seconds = seconds;
  m.tflops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) /
             seconds / 1e12;
  return m;
}

// fp8 (e4m3 inputs, bf16 output, fp32 accumulation) through cublasLt, in the
// "TN" layout fp8 tensor-core kernels require.
StatusOr<GemmMeasurement> MeasureFp8Gemm(cudaStream_t stream, int64_t n,
                                         const GpuCalibrationOptions& o) {
  const size_t elements = static_cast<size_t>(n * n);
  DeviceBuffer a, b, d, workspace;
  RETURN_IF_ERROR(a.Allocate(elements));
  RETURN_IF_ERROR(b.Allocate(elements));
  RETURN_IF_ERROR(d.Allocate(elements * 2));
  const size_t workspace_bytes = size_t{32} << 20;
  RETURN_IF_ERROR(workspace.Allocate(workspace_bytes));
  // 0x38 is 1.0 in e4m3: finite inputs, the values do not matter for timing.
  CUDACHECK(cudaMemsetAsync(a.p, 0x38, elements, stream));
  CUDACHECK(cudaMemsetAsync(b.p, 0x38, elements, stream));

  cublasLtHandle_t lt = nullptr;
  CUBLASLTCHECK(cublasLtCreate(&lt));
  std::unique_ptr<cublasLtContext, decltype(&cublasLtDestroy)> lt_guard(lt, &cublasLtDestroy);
  cublasLtMatmulDesc_t op = nullptr;
  CUBLASLTCHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  std::unique_ptr<cublasLtMatmulDescOpaque_t, decltype(&cublasLtMatmulDescDestroy)> op_guard(
      op, &cublasLtMatmulDescDestroy);
  const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
  CUBLASLTCHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                               sizeof(transpose)));
  CUBLASLTCHECK(
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof(none)));
  const uint64_t dim = static_cast<uint64_t>(n);
  const int64_t ld = n;
  cublasLtMatrixLayout_t a_layout = nullptr, b_layout = nullptr, d_layout = nullptr;
  CUBLASLTCHECK(cublasLtMatrixLayoutCreate(&a_layout, CUDA_R_8F_E4M3, dim, dim, ld));
  std::unique_ptr<cublasLtMatrixLayoutOpaque_t, decltype(&cublasLtMatrixLayoutDestroy)> a_guard(
      a_layout, &cublasLtMatrixLayoutDestroy);
  CUBLASLTCHECK(cublasLtMatrixLayoutCreate(&b_layout, CUDA_R_8F_E4M3, dim, dim, ld));
  std::unique_ptr<cublasLtMatrixLayoutOpaque_t, decltype(&cublasLtMatrixLayoutDestroy)> b_guard(
      b_layout, &cublasLtMatrixLayoutDestroy);
  CUBLASLTCHECK(cublasLtMatrixLayoutCreate(&d_layout, CUDA_R_16BF, dim, dim, ld));
  std::unique_ptr<cublasLtMatrixLayoutOpaque_t, decltype(&cublasLtMatrixLayoutDestroy)> d_guard(
      d_layout, &cublasLtMatrixLayoutDestroy);
  cublasLtMatmulPreference_t preference = nullptr;
  CUBLASLTCHECK(cublasLtMatmulPreferenceCreate(&preference));
  std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, decltype(&cublasLtMatmulPreferenceDestroy)>
      preference_guard(preference, &cublasLtMatmulPreferenceDestroy);
  CUBLASLTCHECK(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
      sizeof(workspace_bytes)));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  CUBLASLTCHECK(cublasLtMatmulAlgoGetHeuristic(lt, op, a_layout, b_layout, d_layout, d_layout,
                                               preference, 1, &heuristic, &found));
  if (found == 0) return InternalError("cublasLt has no fp8 algorithm for this GPU");
  const float alpha = 1.0f, beta = 0.0f;
  ASSIGN_OR_RETURN(double seconds,
                   TimePerIteration(stream, o.gemm_warmup_iterations, o.gemm_timed_iterations,
                                    [&]() -> Status {
                                      CUBLASLTCHECK(cublasLtMatmul(
                                          lt, op, &alpha, a.p, a_layout, b.p, b_layout, &beta,
                                          d.p, d_layout, d.p, d_layout, &heuristic.algo,
                                          workspace.p, workspace_bytes, stream));
                                      return Status::Ok();
                                    }));
  GemmMeasurement m;
  m.dtype = "fp8";
  m.size = n;
  m.seconds = seconds;
  m.tflops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) /
             seconds / 1e12;
  return m;
}

Status MeasureCopyBandwidth(cudaStream_t stream, const GpuCalibrationOptions& o,
                            GpuCalibrationReport* report) {
  DeviceBuffer src, dst;
  const size_t bytes = static_cast<size_t>(o.copy_bytes);
  RETURN_IF_ERROR(src.Allocate(bytes));
  RETURN_IF_ERROR(dst.Allocate(bytes));
  CUDACHECK(cudaMemsetAsync(src.p, 1, bytes, stream));
  ASSIGN_OR_RETURN(double seconds, TimePerIteration(stream, 2, o.copy_iterations, [&]() -> Status {
                     CUDACHECK(cudaMemcpyAsync(dst.p, src.p, bytes, cudaMemcpyDeviceToDevice,
                                               stream));
                     return Status::Ok();
                   }));
  // A copy reads and writes every byte (CUDA's bandwidthTest convention).
  report->memory_bandwidth_gbps = 2.0 * static_cast<double>(bytes) / seconds / 1e9;
  return Status::Ok();
}

Status MeasureAllReduce(const GpuCalibrationOptions& o, GpuCalibrationReport* report) {
  const int n = report->device_count;
  if (n < 2) {
    report->notes.push_back("one GPU visible: no all-reduce measured (intraNodeBusBandwidthGBps "
                            "needs at least two)");
    return Status::Ok();
  }
  std::vector<ncclComm_t> comms(static_cast<size_t>(n), nullptr);
  std::vector<int> devices(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) devices[static_cast<size_t>(i)] = i;
  NCCLCHECK(ncclCommInitAll(comms.data(), n, devices.data()));
  struct PerDevice {
    cudaStream_t stream = nullptr;
    void* buffer = nullptr;
  };
  std::vector<PerDevice> per(static_cast<size_t>(n));
  auto cleanup = [&]() {
    for (int i = 0; i < n; ++i) {
      (void)cudaSetDevice(i);
      PerDevice& p = per[static_cast<size_t>(i)];
      if (p.buffer != nullptr) (void)cudaFree(p.buffer);
      if (p.stream != nullptr) (void)cudaStreamDestroy(p.stream);
      if (comms[static_cast<size_t>(i)] != nullptr) (void)ncclCommDestroy(comms[static_cast<size_t>(i)]);
    }
  };
  struct Cleanup {
    decltype(cleanup)& f;
    ~Cleanup() { f(); }
  } guard{cleanup};
  for (int i = 0; i < n; ++i) {
    CUDACHECK(cudaSetDevice(i));
    PerDevice& p = per[static_cast<size_t>(i)];
    CUDACHECK(cudaStreamCreateWithFlags(&p.stream, cudaStreamNonBlocking));
    CUDACHECK(cudaMalloc(&p.buffer, static_cast<size_t>(o.all_reduce_max_bytes)));
    CUDACHECK(cudaMemsetAsync(p.buffer, 0, static_cast<size_t>(o.all_reduce_max_bytes), p.stream));
  }
  auto run = [&](int64_t bytes, int iterations) -> Status {
    for (int it = 0; it < iterations; ++it) {
      NCCLCHECK(ncclGroupStart());
      for (int i = 0; i < n; ++i) {
        const PerDevice& p = per[static_cast<size_t>(i)];
        NCCLCHECK(ncclAllReduce(p.buffer, p.buffer, static_cast<size_t>(bytes / 4), ncclFloat32,
                                ncclSum, comms[static_cast<size_t>(i)], p.stream));
      }
      NCCLCHECK(ncclGroupEnd());
    }
    for (int i = 0; i < n; ++i) {
      CUDACHECK(cudaSetDevice(i));
      CUDACHECK(cudaStreamSynchronize(per[static_cast<size_t>(i)].stream));
    }
    return Status::Ok();
  };
  report->all_reduce_ranks = n;
  for (int64_t bytes = o.all_reduce_min_bytes; bytes <= o.all_reduce_max_bytes; bytes *= 2) {
    RETURN_IF_ERROR(run(bytes, o.all_reduce_warmup_iterations));
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(run(bytes, o.all_reduce_timed_iterations));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
        std::max(1, o.all_reduce_timed_iterations);
    AllReduceMeasurement m;
    m.bytes = bytes;
    m.seconds = seconds;
    m.algbw_gbps = static_cast<double>(bytes) / seconds / 1e9;
    m.busbw_gbps = m.algbw_gbps * 2.0 * (n - 1) / n;  // nccl-tests' all-reduce factor
    report->all_reduce.push_back(m);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<GpuCalibrationReport> CalibrateGpu(const GpuCalibrationOptions& o) {
  GpuCalibrationReport report;
  // A driver too old for this build says so (not "no device").
  RETURN_IF_ERROR(QueryDevices().status());
  const cudaError_t count_error = cudaGetDeviceCount(&report.device_count);
  if (count_error == cudaErrorNoDevice || count_error == cudaErrorInsufficientDriver ||
      (count_error == cudaSuccess && report.device_count == 0)) {
    (void)cudaGetLastError();
    return FailedPreconditionError("calibrate: no CUDA device visible");
  }
  CUDACHECK(count_error);
  if (o.device < 0 || o.device >= report.device_count) {
    return InvalidArgumentError("calibrate: device " + std::to_string(o.device) +
                                " is not among the " + std::to_string(report.device_count) +
                                " visible");
  }
  CUDACHECK(cudaSetDevice(o.device));
  cudaDeviceProp prop{};
  CUDACHECK(cudaGetDeviceProperties(&prop, o.device));
  report.device_name = prop.name;
  report.compute_capability_major = prop.major;
  report.compute_capability_minor = prop.minor;
  const bool has_fp8 = prop.major * 10 + prop.minor >= 89;

  cudaStream_t stream = nullptr;
  CUDACHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::unique_ptr<CUstream_st, decltype(&cudaStreamDestroy)> stream_guard(stream,
                                                                          &cudaStreamDestroy);
  cublasHandle_t handle = nullptr;
  CUBLASCHECK(cublasCreate(&handle));
  std::unique_ptr<cublasContext, decltype(&cublasDestroy)> handle_guard(handle, &cublasDestroy);
  CUBLASCHECK(cublasSetStream(handle, stream));

  for (const std::string& dtype : o.gemm_dtypes) {
    for (int64_t n : o.gemm_sizes) {
      if (dtype == "fp8") {
        if (!has_fp8) {
          if (n == o.gemm_sizes.front()) {
            report.notes.push_back("fp8 skipped: sm_" + std::to_string(prop.major) +
                                   std::to_string(prop.minor) + " has no fp8 tensor cores");
          }
          continue;
        }
        StatusOr<GemmMeasurement> m = MeasureFp8Gemm(stream, n, o);
        if (!m.ok()) {
          // A library that cannot run this shape is a note, not a failure.
          report.notes.push_back("fp8 " + std::to_string(n) + " skipped: " +
                                 m.status().ToString());
          continue;
        }
        report.gemms.push_back(*m);
        continue;
      }
      GemmTypes types{};
      if (!TypesFor(dtype, &types)) {
        return InvalidArgumentError("calibrate: unknown GEMM dtype \"" + dtype + "\"");
      }
      ASSIGN_OR_RETURN(GemmMeasurement m, MeasureCublasGemm(handle, stream, dtype, n, o));
      report.gemms.push_back(m);
    }
  }
  RETURN_IF_ERROR(MeasureCopyBandwidth(stream, o, &report));
  RETURN_IF_ERROR(MeasureAllReduce(o, &report));
  CUDACHECK(cudaSetDevice(o.device));
  return report;
}

}  // namespace pacer::worker
