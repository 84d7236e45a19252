// PACER_HD: marks a small function that both the CPU code and the CUDA
// kernels call (__host__ __device__ under nvcc, plain inline elsewhere), so
// a formula or an index the GPU uses is the one CPU tests check.
// Thread-safety: a macro.
#ifndef PACER_WORKER_CORE_HOST_DEVICE_H_
#define PACER_WORKER_CORE_HOST_DEVICE_H_

#ifdef __CUDACC__
#define PACER_HD __host__ __device__ __forceinline__
#else
#define PACER_HD inline
#endif

#endif  // PACER_WORKER_CORE_HOST_DEVICE_H_
