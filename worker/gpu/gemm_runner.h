// GemmRunner: the GEMMs of a step through cuBLAS, on row-major matrices, with
// the data and compute types the planned precision implies:
//   bf16 / fp16   16-bit A, B, C; fp32 accumulation (CUBLAS_COMPUTE_32F) on
//                 tensor cores;
//   tf32          fp32 storage, CUBLAS_COMPUTE_32F_FAST_TF32;
//   fp32          fp32 storage, CUBLAS_COMPUTE_32F (no tensor-core rounding);
//   fp8           refused (InvalidArgument at Initialize): cublasGemmEx has no
//                 fp8 types, and running bf16 under an fp8 plan would report
//                 a precision that did not run.
// It counts the FLOPs it issues (multiply-add = 2) so a step can report
// them next to the schedule's.
//
// Thread-safety: one runner per stream and thread (a cuBLAS handle is not
// safe for concurrent use).
#ifndef PACER_WORKER_GPU_GEMM_RUNNER_H_
#define PACER_WORKER_GPU_GEMM_RUNNER_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/gpu_kernels.h"
#include "pacer/planner/job_spec.h"
#include "pacer/status.h"

namespace pacer::worker {

// The storage type a precision computes in on this backend.
DType StorageTypeFor(planner::Precision precision);

class GemmRunner {
 public:
  GemmRunner() = default;
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;
  ~GemmRunner();

  // Creates the handle on the current device, bound to `stream`, with
  // `workspace` (device memory the caller owns) as cuBLAS' workspace.
  Status Initialize(planner::Precision precision, cudaStream_t stream, void* workspace,
                    std::size_t workspace_bytes);

  // C[m x n] = alpha op(A) op(B) + beta C, all row-major; op(X) = X^T when
  // the flag is set; ld* are row strides in elements.
  Status Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
              const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c,
              int64_t ldc);

  // The same over `batch` independent problems whose operands are given by
  // device arrays of pointers (attention: one per sample and head).
  Status GemmBatched(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                     float alpha, const void* const* a, int64_t lda, const void* const* b,
                     int64_t ldb, float beta, void* const* c, int64_t ldc, int64_t batch);

  DType storage_type() const { return storage_; }
  double flops() const { return flops_; }
  void ResetFlops() { flops_ = 0; }

 private:
  cublasHandle_t handle_ = nullptr;
  cudaDataType_t data_type_ = CUDA_R_16BF;
  cublasComputeType_t compute_type_ = CUBLAS_COMPUTE_32F;
  DType storage_ = DType::kBf16;
  double flops_ = 0;
};

}  // namespace pacer::worker

#endif  // PACER_WORKER_GPU_GEMM_RUNNER_H_
