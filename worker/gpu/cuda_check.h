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

#include <cctype>
#include <string>
#include <string_view>

#include "pacer/status.h"

namespace pacer::worker {

// The Status code of a CUDA runtime error, which exit_codes.h turns into the
// worker's exit code and the controller into a remedy:
//  - out of memory is ResourceExhausted (exit 5: re-plan with more memory
//    held back);
//  - a fault of the GPU itself (an uncorrectable ECC or NVLink error, an
//    error the GPU contained, a hardware exception, no usable device, the
//    fabric manager not ready) is HardwareFault (exit 9: relaunch without
//    the node). Every later CUDA call of the process fails the same way, so
//    a restart on the same GPU would too;
//  - anything else (an illegal address, a bad launch) is Internal, a bug.
//    "unspecified launch failure" may be either; it stays Internal, so a
//    bug is not blamed on a node.
inline ::pacer::StatusCode CudaErrorStatusCode(cudaError_t err) {
  switch (err) {
    case cudaErrorMemoryAllocation:
      return ::pacer::StatusCode::kResourceExhausted;
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContained:
    case cudaErrorHardwareStackError:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemNotReady:
      return ::pacer::StatusCode::kHardwareFault;
    default:
      return ::pacer::StatusCode::kInternal;
  }
}

// cuBLAS: a failed allocation of its workspace is out of memory; the rest
// are this program's (or the library's) errors. A GPU fault under cuBLAS
// shows at the next CUDA call, which CUDACHECK classifies.
inline ::pacer::StatusCode CublasErrorStatusCode(cublasStatus_t status) {
  return status == CUBLAS_STATUS_ALLOC_FAILED ? ::pacer::StatusCode::kResourceExhausted
                                              : ::pacer::StatusCode::kInternal;
}

// NCCL: invalid usage or an invalid argument is a bug in this program, which
// a restart would only repeat: Internal (exit 1), not a collective failure
// (whose exit code puts a strike on the node). A system, remote or internal
// error is Unavailable (exit 4: a peer died or the network failed, which a
// restart from the last checkpoint may fix), except when NCCL's last error
// says a CUDA allocation failed ("Cuda failure 'out of memory'", "Failed to
// CUDA calloc"): that is ResourceExhausted (exit 5), so the controller
// re-plans with memory held back instead of relaunching into the same OOM
// and striking a healthy node.
inline ::pacer::StatusCode NcclErrorStatusCode(ncclResult_t result, std::string_view last_error) {
  if (result == ncclInvalidUsage || result == ncclInvalidArgument) {
    return ::pacer::StatusCode::kInternal;
  }
  std::string lower(last_error);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("out of memory") != std::string::npos ||
      lower.find("failed to cuda calloc") != std::string::npos ||
      lower.find("failed to cuda malloc") != std::string::npos) {
    return ::pacer::StatusCode::kResourceExhausted;
  }
  return ::pacer::StatusCode::kUnavailable;
}

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
  return ::pacer::Status(CudaErrorStatusCode(err),
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
      return ::pacer::Status(::pacer::worker::CudaErrorStatusCode(pacer_cuda_err_),       \
                             ::pacer::worker::GpuErrorWhere(__FILE__, __LINE__) +         \
                                 ": CUDA error: " + cudaGetErrorString(pacer_cuda_err_) + \
                                 " (" #cmd ")");                                          \
    }                                                                                     \
  } while (0)

#define CUBLASCHECK(cmd)                                                                         \
  do {                                                                                           \
    cublasStatus_t pacer_cublas_err_ = (cmd);                                                    \
    if (pacer_cublas_err_ != CUBLAS_STATUS_SUCCESS) {                                            \
      return ::pacer::Status(::pacer::worker::CublasErrorStatusCode(pacer_cublas_err_),          \
                             ::pacer::worker::GpuErrorWhere(__FILE__, __LINE__) +                \
                                 ": cuBLAS error: " + cublasGetStatusString(pacer_cublas_err_) + \
                                 " (" #cmd ")");                                                 \
    }                                                                                            \
  } while (0)

// NCCL errors carry ncclGetLastError's text (what NCCL says went wrong, as
// nccl-tests prints it) and NcclErrorStatusCode's code; invalid usage says
// it is a bug (exit 1, which the controller relaunches until the job's
// restarts run out). ncclInProgress is not an error for nonblocking
// communicators: callers that use them wait on it (nccl_comms.h).
namespace pacer::worker {
inline ::pacer::Status NcclError(ncclResult_t result, const char* file, int line,
                                 const char* call) {
  const char* last = ncclGetLastError(nullptr);
  const ::pacer::StatusCode code = NcclErrorStatusCode(result, last != nullptr ? last : "");
  const bool bug = code == ::pacer::StatusCode::kInternal;
  std::string message = GpuErrorWhere(file, line) + ": NCCL error: " + ncclGetErrorString(result);
  if (last != nullptr && last[0] != '\0') message += std::string(" (") + last + ")";
  message += std::string(" in ") + call;
  if (bug) message += "; invalid use of NCCL is a bug in pacer-worker (please report it)";
  return ::pacer::Status(code, message);
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
