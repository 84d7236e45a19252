#include "gpu/gpu_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/kernel_math.h"
#include "gpu/cuda_check.h"
#include "gpu/element_cast.cuh"

namespace pacer::worker {
namespace {

constexpr int kThreads = 256;

using gpu::FromF;
using gpu::ToF;

// SplitMix64: a counter-based hash, so values do not depend on launch shape.
__device__ __forceinline__ uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__device__ __forceinline__ float Uniform(uint64_t seed, uint64_t index) {
  const uint64_t h = Mix(seed ^ Mix(index));
  return static_cast<float>(h >> 40) * (2.0f / 16777216.0f) - 1.0f;  // 24 bits -> [-1, 1)
}

unsigned int GridFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min<int64_t>(blocks, 65535 * 8)));
}

#define PACER_GRID_STRIDE(i, n)                                                  \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
       i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <typename T>
__global__ void FillUniformKernel(T* p, int64_t n, uint64_t seed, int64_t offset, float scale) {
  PACER_GRID_STRIDE(i, n) {
    p[i] = FromF<T>(scale * Uniform(seed, static_cast<uint64_t>(offset + i)));
  }
}

template <typename T>
__global__ void AddKernel(const T* a, const T* b, T* out, int64_t n) {
  PACER_GRID_STRIDE(i, n) { out[i] = FromF<T>(ToF(a[i]) + ToF(b[i])); }
}

// The arithmetic is the CPU device's (core/kernel_math.h).
using kernel_math::Gelu;
using kernel_math::GeluGrad;

template <typename T>
__global__ void GeluForwardKernel(const T* in, T* out, int64_t n) {
  PACER_GRID_STRIDE(i, n) { out[i] = FromF<T>(Gelu(ToF(in[i]))); }
}
template <typename T>
__global__ void GeluBackwardKernel(const T* dout, const T* in, T* din, int64_t n) {
  PACER_GRID_STRIDE(i, n) { din[i] = FromF<T>(ToF(dout[i]) * GeluGrad(ToF(in[i]))); }
}

template <typename T>
__global__ void SwigluForwardKernel(const T* in, T* out, int64_t rows, int64_t ffn) {
  PACER_GRID_STRIDE(i, rows * ffn) {
    const int64_t r = i / ffn, c = i % ffn;
    const float gate = ToF(in[r * 2 * ffn + c]), up = ToF(in[r * 2 * ffn + ffn + c]);
    out[i] = FromF<T>(kernel_math::Swiglu(gate, up));
  }
}
template <typename T>
__global__ void SwigluBackwardKernel(const T* dout, const T* in, T* din, int64_t rows,
                                     int64_t ffn) {
  PACER_GRID_STRIDE(i, rows * ffn) {
    const int64_t r = i / ffn, c = i % ffn;
    const float gate = ToF(in[r * 2 * ffn + c]), up = ToF(in[r * 2 * ffn + ffn + c]);
    float dgate = 0, dup = 0;
    kernel_math::SwigluGrad(gate, up, ToF(dout[i]), &dgate, &dup);
    din[r * 2 * ffn + c] = FromF<T>(dgate);
    din[r * 2 * ffn + ffn + c] = FromF<T>(dup);
  }
}

// Calls `f` with a null pointer of the storage type, for template dispatch.
template <typename F>
void Dispatch(DType t, F&& f) {
  switch (t) {
    case DType::kFp32: f(static_cast<float*>(nullptr)); break;
    case DType::kFp16: f(static_cast<__half*>(nullptr)); break;
    case DType::kBf16: f(static_cast<__nv_bfloat16*>(nullptr)); break;
  }
}

template <typename T>
T* As(void* p) {
  return static_cast<T*>(p);
}
template <typename T>
const T* As(const void* p) {
  return static_cast<const T*>(p);
}

}  // namespace

int DTypeBytes(DType t) { return t == DType::kFp32 ? 4 : 2; }

Status FillUniform(void* p, DType t, int64_t n, uint64_t seed, int64_t index_offset, float scale,
                   cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    FillUniformKernel<T><<<GridFor(n), kThreads, 0, stream>>>(As<T>(p), n, seed, index_offset,
                                                               scale);
  });
  return CUDA_LAUNCH_STATUS();
}

Status Add(const void* a, const void* b, void* out, int64_t n, DType t, cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    AddKernel<T><<<GridFor(n), kThreads, 0, stream>>>(As<T>(a), As<T>(b), As<T>(out), n);
  });
  return CUDA_LAUNCH_STATUS();
}

Status GeluForward(const void* in, void* out, int64_t n, DType t, cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    GeluForwardKernel<T><<<GridFor(n), kThreads, 0, stream>>>(As<T>(in), As<T>(out), n);
  });
  return CUDA_LAUNCH_STATUS();
}

Status GeluBackward(const void* dout, const void* in, void* din, int64_t n, DType t,
                    cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    GeluBackwardKernel<T><<<GridFor(n), kThreads, 0, stream>>>(As<T>(dout), As<T>(in),
                                                                As<T>(din), n);
  });
  return CUDA_LAUNCH_STATUS();
}

Status SwigluForward(const void* in, void* out, int64_t rows, int64_t ffn, DType t,
                     cudaStream_t stream) {
  if (rows * ffn <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    SwigluForwardKernel<T><<<GridFor(rows * ffn), kThreads, 0, stream>>>(As<T>(in), As<T>(out),
                                                                          rows, ffn);
  });
  return CUDA_LAUNCH_STATUS();
}

Status SwigluBackward(const void* dout, const void* in, void* din, int64_t rows, int64_t ffn,
                      DType t, cudaStream_t stream) {
  if (rows * ffn <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    SwigluBackwardKernel<T><<<GridFor(rows * ffn), kThreads, 0, stream>>>(
        As<T>(dout), As<T>(in), As<T>(din), rows, ffn);
  });
  return CUDA_LAUNCH_STATUS();
}

}  // namespace pacer::worker
