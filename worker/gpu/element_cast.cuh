// Device-side conversions between the kernels' storage types (fp32, fp16,
// bf16) and their fp32 arithmetic: a narrowing store rounds to nearest even
// once. Header-only device functions for nvcc; no state, so thread-safe.
#ifndef PACER_WORKER_GPU_ELEMENT_CAST_CUH_
#define PACER_WORKER_GPU_ELEMENT_CAST_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace pacer::worker::gpu {

__device__ __forceinline__ float ToF(float v) { return v; }
__device__ __forceinline__ float ToF(__half v) { return __half2float(v); }
__device__ __forceinline__ float ToF(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T FromF(float v);
template <>
__device__ __forceinline__ float FromF<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half FromF<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromF<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Element i of a buffer of storage type T, in fp32, and back.
template <typename T>
__device__ __forceinline__ float Load(const T* p, int64_t i) {
  return ToF(p[i]);
}
template <typename T>
__device__ __forceinline__ void Store(T* p, int64_t i, float v) {
  p[i] = FromF<T>(v);
}

}  // namespace pacer::worker::gpu

#endif  // PACER_WORKER_GPU_ELEMENT_CAST_CUH_
