// CpuDevice: the Device (core/device.h) of the host: OpenBLAS sgemm for the
// GEMMs, the fp32 kernels of cpu_kernels.h, Gloo over TCP for the
// collectives (gloo_comms.h), host memory from the C++ allocator. It is
// what CI, the tests and the local quickstart run, and what pacer-worker
// picks when no GPU is present (or with --backend cpu).
//
// Precision: every GEMM runs in fp32. A bf16, fp16 or tf32 plan runs in
// fp32 and the worker reports fp32 (ExecutedPrecision); an fp8 plan is
// refused with InvalidArgument at Connect, because fp8 changes the
// numerics the plan was made for and the host has no fp8 GEMM.
//
// Units, thread-safety: as Device. OpenBLAS's thread count is process-wide
// and set to cores / local ranks at Connect.
#ifndef PACER_WORKER_CPU_CPU_DEVICE_H_
#define PACER_WORKER_CPU_CPU_DEVICE_H_

#include <memory>

#include "core/device.h"

namespace pacer::worker::cpu {

std::unique_ptr<Device> MakeCpuDevice();

}  // namespace pacer::worker::cpu

#endif  // PACER_WORKER_CPU_CPU_DEVICE_H_
