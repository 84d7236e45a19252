// CUDACHECK / CUBLASCHECK: GPU calls that fail loudly. On error they return a
// pacer::Status naming the host, file, line and the library's error string up
// the stack (nccl-tests style, but without aborting the process), so a caller
// can clean up (ncclCommAbort) and exit with a code that says why.
// Use inside functions returning pacer::Status or pacer::StatusOr<T>.
// Thread-safety: the macros are stateless.
#ifndef PACER_WORKER_GPU_CUDA_CHECK_H_
#define PACER_WORKER_GPU_CUDA_CHECK_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <string>

#include "pacer/status.h"

namespace pacer::worker {

inline std::string GpuErrorWhere(const char* file, int line) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + " " + file + ":" + std::to_string(line);
}

}  // namespace pacer::worker

#define CUDACHECK(cmd)                                                                    \
  do {                                                                                    \
    cudaError_t pacer_cuda_err_ = (cmd);                                                  \
    if (pacer_cuda_err_ != cudaSuccess) {                                                 \
      return ::pacer::Status(::pacer::StatusCode::kInternal,                              \
                             ::pacer::worker::GpuErrorWhere(__FILE__, __LINE__) +         \
                                 ": CUDA error: " + cudaGetErrorString(pacer_cuda_err_) + \
                                 " (" #cmd ")");                                          \
    }                                                                                     \
  } while (0)

#define CUBLASCHECK(cmd)                                                                        \
  do {                                                                                          \
    cublasStatus_t pacer_cublas_err_ = (cmd);                                                   \
    if (pacer_cublas_err_ != CUBLAS_STATUS_SUCCESS) {                                           \
      return ::pacer::Status(::pacer::StatusCode::kInternal,                                    \
                             ::pacer::worker::GpuErrorWhere(__FILE__, __LINE__) +               \
                                 ": cuBLAS error: " + cublasGetStatusString(pacer_cublas_err_) + \
                                 " (" #cmd ")");                                                \
    }                                                                                           \
  } while (0)

#endif  // PACER_WORKER_GPU_CUDA_CHECK_H_
