// How CUDACHECK, CUBLASCHECK and NCCLCHECK classify errors, and the worker's
// exit code for each class (exit_codes.h): the controller's remedy depends on
// it (a device fault excludes the node, out of memory re-plans with memory
// held back, a bug is relaunched unchanged). Needs the CUDA headers and
// libraries only, no GPU: the errors are passed in, not provoked.
#include "gpu/cuda_check.h"

#include <gtest/gtest.h>

#include "core/exit_codes.h"
#include "core/runner.h"

namespace pacer::worker {
namespace {

Status CheckCuda(cudaError_t err) {
  CUDACHECK(err);
  return Status::Ok();
}

Status CheckCublas(cublasStatus_t status) {
  CUBLASCHECK(status);
  return Status::Ok();
}

TEST(CudaCheckTest, AFaultOfTheGpuItselfIsTheDevicesNotABug) {
  for (cudaError_t fault :
       {cudaErrorECCUncorrectable, cudaErrorNvlinkUncorrectable, cudaErrorContained,
        cudaErrorHardwareStackError, cudaErrorDevicesUnavailable, cudaErrorSystemNotReady}) {
    const Status status = CheckCuda(fault);
    EXPECT_EQ(status.code(), StatusCode::kHardwareFault) << status.ToString();
    EXPECT_EQ(ExitCodeFor(status), kExitDeviceFault) << status.ToString();
    EXPECT_NE(status.message().find("CUDA error: "), std::string::npos) << status.message();
  }
  EXPECT_EQ(CudaErrorStatusCode(cudaErrorECCUncorrectable), StatusCode::kHardwareFault);
}

TEST(CudaCheckTest, OutOfMemoryIsResourceExhaustedAndABugIsInternal) {
  EXPECT_EQ(ExitCodeFor(CheckCuda(cudaErrorMemoryAllocation)), kExitOutOfMemory);
  EXPECT_EQ(ExitCodeFor(CheckCublas(CUBLAS_STATUS_ALLOC_FAILED)), kExitOutOfMemory);
  // A bug, or "unspecified launch failure", which may be either: not the node's fault.
  for (cudaError_t bug : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorInvalidValue,
                          cudaErrorMisalignedAddress}) {
    EXPECT_EQ(ExitCodeFor(CheckCuda(bug)), kExitInternalError) << cudaGetErrorName(bug);
  }
  EXPECT_EQ(ExitCodeFor(CheckCublas(CUBLAS_STATUS_EXECUTION_FAILED)), kExitInternalError);
  EXPECT_TRUE(CheckCuda(cudaSuccess).ok());
}

TEST(CudaCheckTest, AnNcclOutOfMemoryIsNotACollectiveFailure) {
  // NCCL reports a failed device allocation as a system or internal error;
  // its last error says what it was (the text as NCCL's WARN prints it).
  EXPECT_EQ(NcclErrorStatusCode(ncclSystemError, "Cuda failure 'out of memory'"),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(NcclErrorStatusCode(ncclInternalError, "Failed to CUDA calloc 4194304 bytes"),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(
      ExitCodeFor(Status(
          NcclErrorStatusCode(ncclUnhandledCudaError, "Cuda failure 2 'out of memory'"), "x")),
      kExitOutOfMemory);
  // A peer or the network: a collective failure, retried.
  EXPECT_EQ(NcclErrorStatusCode(ncclRemoteError, "socket closed by peer"),
            StatusCode::kUnavailable);
  EXPECT_EQ(NcclErrorStatusCode(ncclSystemError, ""), StatusCode::kUnavailable);
  // Misuse is a bug whatever the text says.
  EXPECT_EQ(NcclErrorStatusCode(ncclInvalidUsage, "out of memory"), StatusCode::kInternal);
  EXPECT_EQ(NcclErrorStatusCode(ncclInvalidArgument, ""), StatusCode::kInternal);
}

}  // namespace
}  // namespace pacer::worker
