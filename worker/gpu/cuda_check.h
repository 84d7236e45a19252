// CUDACHECK / CUBLASCHECK / NCCLCHECK: GPU calls that fail loudly. On error they return a
// pacer::Status naming the host, file, line and the library's error string up
// the stack (nccl-tests style, but without aborting the process), so a caller
// can clean up (ncclCommAbort) and exit with a code that says why.
// Use inside functions returning pacer::Status or pacer::StatusOr<T>.
// Thread-safety: the macros are stateless.
#ifndef PACER_WORKER_GPU_CUDA_CHECK_H_
#define PACER_WORKER_GPU_CUDA_CHECK_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <string>

#include "pacer/status.h"

namespace pacer::worker {

inline std::string GpuErrorWhere(const char* file, int line) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + " " + file + ":" + std::to_string(line);
}

// The error of the kernel launch just made (a bad launch configuration, no
// kernel image for this GPU), naming the launch site `file`:`line`; use
// through CUDA_LAUNCH_STATUS(). A fault while an earlier kernel ran (an
// illegal address) is sticky: it shows at the next call that waits for the
// stream, or at the next launch, whichever comes first, so the message
// says the launch is where it was seen, not its cause.
inline ::pacer::Status LaunchStatus(const char* file, int line) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return ::pacer::Status::Ok();
  return ::pacer::Status(::pacer::StatusCode::kInternal,
                         GpuErrorWhere(file, line) + ": CUDA error: " + cudaGetErrorString(err) +
                             " (seen at this kernel launch: its own launch error, or a fault "
                             "of a kernel run before it)");
}

}  // namespace pacer::worker

#define CUDA_LAUNCH_STATUS() ::pacer::worker::LaunchStatus(__FILE__, __LINE__)

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

#define CUBLASCHECK(cmd)                                                                         \
  do {                                                                                           \
    cublasStatus_t pacer_cublas_err_ = (cmd);                                                    \
    if (pacer_cublas_err_ != CUBLAS_STATUS_SUCCESS) {                                            \
      return ::pacer::Status(::pacer::StatusCode::kInternal,                                     \
                             ::pacer::worker::GpuErrorWhere(__FILE__, __LINE__) +                \
                                 ": cuBLAS error: " + cublasGetStatusString(pacer_cublas_err_) + \
                                 " (" #cmd ")");                                                 \
    }                                                                                            \
  } while (0)

// NCCL errors carry ncclGetLastError's text (what NCCL says went wrong, as
// nccl-tests prints it). A system, remote or internal error is Unavailable:
// a peer died or the network failed, which a restart from the last
// checkpoint may fix (step_backend.h maps it onto kExitCollectiveFailure).
// Invalid usage or an invalid argument is a bug in this program, which a
// restart would only repeat: Internal (kExitInternalError), not Unavailable
// (a collective failure, whose exit code puts a strike on the node). The
// controller still relaunches exit 1 until the job's restarts run out.
// ncclInProgress is not an error for nonblocking communicators: callers
// that use them wait on it (nccl_comms.h).
namespace pacer::worker {
inline ::pacer::Status NcclError(ncclResult_t result, const char* file, int line,
                                 const char* call) {
  const bool bug = result == ncclInvalidUsage || result == ncclInvalidArgument;
  const char* last = ncclGetLastError(nullptr);
  std::string message = GpuErrorWhere(file, line) + ": NCCL error: " + ncclGetErrorString(result);
  if (last != nullptr && last[0] != '\0') message += std::string(" (") + last + ")";
  message += std::string(" in ") + call;
  if (bug) message += "; invalid use of NCCL is a bug in pacer-worker (please report it)";
  return ::pacer::Status(bug ? ::pacer::StatusCode::kInternal : ::pacer::StatusCode::kUnavailable,
                         message);
}
}  // namespace pacer::worker

#define NCCLCHECK(cmd)                                                              \
  do {                                                                              \
    ncclResult_t pacer_nccl_err_ = (cmd);                                           \
    if (pacer_nccl_err_ != ncclSuccess && pacer_nccl_err_ != ncclInProgress) {      \
      return ::pacer::worker::NcclError(pacer_nccl_err_, __FILE__, __LINE__, #cmd); \
    }                                                                               \
  } while (0)

#endif  // PACER_WORKER_GPU_CUDA_CHECK_H_
