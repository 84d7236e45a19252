#include "gpu/gpu_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "gpu/cuda_check.h"

namespace pacer::worker {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float ToF(float v) { return v; }
__device__ __forceinline__ float ToF(__half v) { return __half2float(v); }
__device__ __forceinline__ float ToF(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T FromF(float v);
template <>
__device__ __forceinline__ float FromF<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half FromF<__half>(float v) { return __float2half(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 FromF<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}

// Atomic adds in the storage type (16-bit atomics need sm_70 / sm_80; the
// library is built for sm_80 and sm_90).
__device__ __forceinline__ void AtomicAddT(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void AtomicAddT(__half* p, float v) { atomicAdd(p, __float2half(v)); }
__device__ __forceinline__ void AtomicAddT(__nv_bfloat16* p, float v) {
  atomicAdd(p, __float2bfloat16(v));
}

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

// Sum over the block; every thread gets the result. `shared` holds 32 floats.
__device__ float BlockSum(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // `shared` may still be read from a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? shared[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float BlockMax(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? shared[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
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
__global__ void FillConstantKernel(T* p, int64_t n, float value) {
  PACER_GRID_STRIDE(i, n) { p[i] = FromF<T>(value); }
}

template <typename T>
__global__ void ToFloatKernel(const T* src, float* dst, int64_t n) {
  PACER_GRID_STRIDE(i, n) { dst[i] = ToF(src[i]); }
}

template <typename T>
__global__ void AddKernel(const T* a, const T* b, T* out, int64_t n) {
  PACER_GRID_STRIDE(i, n) { out[i] = FromF<T>(ToF(a[i]) + ToF(b[i])); }
}

constexpr float kNormEpsilon = 1e-5f;

template <typename T>
__global__ void RmsNormForwardKernel(const T* x, const T* gain, T* y, int64_t cols) {
  __shared__ float shared[32];
  const T* row = x + blockIdx.x * cols;
  T* out = y + blockIdx.x * cols;
  float sum = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = ToF(row[c]);
    sum += v * v;
  }
  const float rstd = rsqrtf(BlockSum(sum, shared) / static_cast<float>(cols) + kNormEpsilon);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    out[c] = FromF<T>(ToF(row[c]) * rstd * ToF(gain[c]));
  }
}

template <typename T>
__global__ void RmsNormBackwardKernel(const T* dy, const T* x, const T* gain, const T* residual,
                                      T* dx, float* rstd_out, int64_t cols) {
  __shared__ float shared[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols;
  float sum_sq = 0, dot = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = ToF(x[base + c]);
    sum_sq += v * v;
    dot += ToF(dy[base + c]) * ToF(gain[c]) * v;
  }
  const float n = static_cast<float>(cols);
  const float rstd = rsqrtf(BlockSum(sum_sq, shared) / n + kNormEpsilon);
  dot = BlockSum(dot, shared);
  if (threadIdx.x == 0) rstd_out[blockIdx.x] = rstd;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = ToF(x[base + c]);
    float g = rstd * ToF(gain[c]) * ToF(dy[base + c]) - v * rstd * rstd * rstd * dot / n;
    if (residual != nullptr) g += ToF(residual[base + c]);
    dx[base + c] = FromF<T>(g);
  }
}

// One thread per column over a tile of rows, one atomic per (column, tile).
constexpr int64_t kGainRowsPerTile = 256;
template <typename T>
__global__ void RmsNormGainGradKernel(const T* dy, const T* x, const float* rstd, T* gain_grad,
                                      int64_t rows, int64_t cols) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * kGainRowsPerTile;
  const int64_t last = min(rows, first + kGainRowsPerTile);
  float sum = 0;
  for (int64_t r = first; r < last; ++r) sum += ToF(dy[r * cols + c]) * ToF(x[r * cols + c]) * rstd[r];
  AtomicAddT(gain_grad + c, sum);
}

__device__ __forceinline__ float Gelu(float x) {
  const float k = 0.7978845608f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float GeluGrad(float x) {
  const float k = 0.7978845608f;
  const float u = k * (x + 0.044715f * x * x * x);
  const float th = tanhf(u);
  return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * k * (1.0f + 3.0f * 0.044715f * x * x);
}

template <typename T>
__global__ void GeluForwardKernel(const T* in, T* out, int64_t n) {
  PACER_GRID_STRIDE(i, n) { out[i] = FromF<T>(Gelu(ToF(in[i]))); }
}
template <typename T>
__global__ void GeluBackwardKernel(const T* dout, const T* in, T* din, int64_t n) {
  PACER_GRID_STRIDE(i, n) { din[i] = FromF<T>(ToF(dout[i]) * GeluGrad(ToF(in[i]))); }
}

__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + __expf(-x)); }

template <typename T>
__global__ void SwigluForwardKernel(const T* in, T* out, int64_t rows, int64_t ffn) {
  PACER_GRID_STRIDE(i, rows * ffn) {
    const int64_t r = i / ffn, c = i % ffn;
    const float gate = ToF(in[r * 2 * ffn + c]), up = ToF(in[r * 2 * ffn + ffn + c]);
    out[i] = FromF<T>(gate * Sigmoid(gate) * up);
  }
}
template <typename T>
__global__ void SwigluBackwardKernel(const T* dout, const T* in, T* din, int64_t rows,
                                     int64_t ffn) {
  PACER_GRID_STRIDE(i, rows * ffn) {
    const int64_t r = i / ffn, c = i % ffn;
    const float gate = ToF(in[r * 2 * ffn + c]), up = ToF(in[r * 2 * ffn + ffn + c]);
    const float s = Sigmoid(gate), g = ToF(dout[i]);
    din[r * 2 * ffn + c] = FromF<T>(g * up * s * (1.0f + gate * (1.0f - s)));
    din[r * 2 * ffn + ffn + c] = FromF<T>(g * gate * s);
  }
}

template <typename T>
__global__ void CausalSoftmaxKernel(T* scores, int64_t seq) {
  __shared__ float shared[32];
  T* row = scores + static_cast<int64_t>(blockIdx.x) * seq;
  const int64_t query = static_cast<int64_t>(blockIdx.x) % seq;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j <= query; j += blockDim.x) m = fmaxf(m, ToF(row[j]));
  m = BlockMax(m, shared);
  float sum = 0;
  for (int64_t j = threadIdx.x; j <= query; j += blockDim.x) sum += __expf(ToF(row[j]) - m);
  const float inv = 1.0f / BlockSum(sum, shared);
  for (int64_t j = threadIdx.x; j < seq; j += blockDim.x) {
    row[j] = FromF<T>(j <= query ? __expf(ToF(row[j]) - m) * inv : 0.0f);
  }
}

template <typename T>
__global__ void SoftmaxBackwardKernel(const T* prob, T* dprob, int64_t seq) {
  __shared__ float shared[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * seq;
  float dot = 0;
  for (int64_t j = threadIdx.x; j < seq; j += blockDim.x) {
    dot += ToF(prob[base + j]) * ToF(dprob[base + j]);
  }
  dot = BlockSum(dot, shared);
  for (int64_t j = threadIdx.x; j < seq; j += blockDim.x) {
    dprob[base + j] = FromF<T>(ToF(prob[base + j]) * (ToF(dprob[base + j]) - dot));
  }
}

template <typename T>
__global__ void SumKeyValueGroupsKernel(const T* dk, const T* dv, T* dqkv, int64_t tokens,
                                        int64_t heads, int64_t kv_heads, int64_t head_dim) {
  const int64_t group = heads / kv_heads;
  const int64_t width = (heads + 2 * kv_heads) * head_dim;
  PACER_GRID_STRIDE(i, tokens * kv_heads * head_dim) {
    const int64_t token = i / (kv_heads * head_dim);
    const int64_t g = (i / head_dim) % kv_heads, j = i % head_dim;
    float sk = 0, sv = 0;
    for (int64_t q = g * group; q < (g + 1) * group; ++q) {
      sk += ToF(dk[(token * heads + q) * head_dim + j]);
      sv += ToF(dv[(token * heads + q) * head_dim + j]);
    }
    dqkv[token * width + (heads + g) * head_dim + j] = FromF<T>(sk);
    dqkv[token * width + (heads + kv_heads + g) * head_dim + j] = FromF<T>(sv);
  }
}

__global__ void FillBatchPointersKernel(const void** pointers, BatchedOperand a,
                                        BatchedOperand b, BatchedOperand c, int64_t batch,
                                        int64_t heads) {
  PACER_GRID_STRIDE(i, batch * heads) {
    const int64_t sample = i / heads, head = i % heads;
    const BatchedOperand ops[3] = {a, b, c};
    for (int k = 0; k < 3; ++k) {
      const char* base = static_cast<const char*>(ops[k].base);
      pointers[k * batch * heads + i] = base + sample * ops[k].batch_stride_bytes +
                                        (head / ops[k].head_divisor) * ops[k].head_stride_bytes;
    }
  }
}

__device__ __forceinline__ int64_t TokenId(uint64_t seed, int64_t token, int64_t vocab) {
  return static_cast<int64_t>(Mix(seed ^ Mix(static_cast<uint64_t>(token))) %
                              static_cast<uint64_t>(vocab));
}

template <typename T>
__global__ void CrossEntropyGradientKernel(T* logits, float* scratch, int64_t rows, int64_t vocab,
                                           uint64_t seed) {
  __shared__ float shared[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * vocab;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    const float v = ToF(logits[base + j]);
    scratch[base + j] = v;
    m = fmaxf(m, v);
  }
  m = BlockMax(m, shared);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) sum += __expf(scratch[base + j] - m);
  const float inv = 1.0f / BlockSum(sum, shared);
  const int64_t target = TokenId(seed, blockIdx.x, vocab);
  const float scale = 1.0f / static_cast<float>(rows);
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    const float p = __expf(scratch[base + j] - m) * inv;
    logits[base + j] = FromF<T>((p - (j == target ? 1.0f : 0.0f)) * scale);
  }
}

template <typename T>
__global__ void EmbeddingForwardKernel(const T* table, T* out, int64_t rows, int64_t cols,
                                       int64_t vocab, uint64_t seed, int64_t offset) {
  PACER_GRID_STRIDE(i, rows * cols) {
    const int64_t r = i / cols, c = i % cols;
    out[i] = table[TokenId(seed, offset + r, vocab) * cols + c];
  }
}
template <typename T>
__global__ void EmbeddingBackwardKernel(const T* dout, T* table_grad, int64_t rows, int64_t cols,
                                        int64_t vocab, uint64_t seed, int64_t offset) {
  PACER_GRID_STRIDE(i, rows * cols) {
    const int64_t r = i / cols, c = i % cols;
    AtomicAddT(table_grad + TokenId(seed, offset + r, vocab) * cols + c, ToF(dout[i]));
  }
}

template <typename T>
__global__ void OptimizerKernel(OptimizerHyper h, const T* grads, T* weights, float* master,
                                float* m1, float* m2, int64_t n, float bias1, float bias2) {
  PACER_GRID_STRIDE(i, n) {
    float p = master != nullptr ? master[i] : ToF(weights[i]);
    const float g = ToF(grads[i]) * h.grad_scale;
    switch (h.kind) {
      case OptimizerKind::kAdamW: {
        const float a = h.beta1 * m1[i] + (1.0f - h.beta1) * g;
        const float b = h.beta2 * m2[i] + (1.0f - h.beta2) * g * g;
        m1[i] = a;
        m2[i] = b;
        p -= h.learning_rate *
             ((a / bias1) / (sqrtf(b / bias2) + h.epsilon) + h.weight_decay * p);
        break;
      }
      case OptimizerKind::kSgdMomentum: {
        const float a = h.momentum * m1[i] + g;
        m1[i] = a;
        p -= h.learning_rate * a;
        break;
      }
      case OptimizerKind::kSgd: p -= h.learning_rate * g; break;
    }
    if (master != nullptr) master[i] = p;
    weights[i] = FromF<T>(p);
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

Status LaunchResult() {
  CUDACHECK(cudaGetLastError());
  return Status::Ok();
}

unsigned int RowGrid(int64_t rows) { return static_cast<unsigned int>(std::max<int64_t>(rows, 1)); }

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
  return LaunchResult();
}

Status FillConstant(void* p, DType t, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    FillConstantKernel<T><<<GridFor(n), kThreads, 0, stream>>>(As<T>(p), n, value);
  });
  return LaunchResult();
}

Status ConvertToFloat(const void* src, DType t, float* dst, int64_t n, cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    ToFloatKernel<T><<<GridFor(n), kThreads, 0, stream>>>(As<T>(src), dst, n);
  });
  return LaunchResult();
}

Status RmsNormForward(const void* x, const void* gain, void* y, int64_t rows, int64_t cols,
                      DType t, cudaStream_t stream) {
  if (rows <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    RmsNormForwardKernel<T><<<RowGrid(rows), kThreads, 0, stream>>>(As<T>(x), As<T>(gain),
                                                                     As<T>(y), cols);
  });
  return LaunchResult();
}

Status RmsNormBackward(const void* dy, const void* x, const void* gain, const void* residual_grad,
                       void* dx, void* gain_grad, float* rstd, int64_t rows, int64_t cols,
                       DType t, cudaStream_t stream) {
  if (rows <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    RmsNormBackwardKernel<T><<<RowGrid(rows), kThreads, 0, stream>>>(
        As<T>(dy), As<T>(x), As<T>(gain), As<T>(residual_grad), As<T>(dx), rstd, cols);
    const dim3 grid(static_cast<unsigned int>((cols + kThreads - 1) / kThreads),
                    static_cast<unsigned int>((rows + kGainRowsPerTile - 1) / kGainRowsPerTile));
    RmsNormGainGradKernel<T><<<grid, kThreads, 0, stream>>>(As<T>(dy), As<T>(x), rstd,
                                                            As<T>(gain_grad), rows, cols);
  });
  return LaunchResult();
}

Status Add(const void* a, const void* b, void* out, int64_t n, DType t, cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    AddKernel<T><<<GridFor(n), kThreads, 0, stream>>>(As<T>(a), As<T>(b), As<T>(out), n);
  });
  return LaunchResult();
}

Status GeluForward(const void* in, void* out, int64_t n, DType t, cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    GeluForwardKernel<T><<<GridFor(n), kThreads, 0, stream>>>(As<T>(in), As<T>(out), n);
  });
  return LaunchResult();
}

Status GeluBackward(const void* dout, const void* in, void* din, int64_t n, DType t,
                    cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    GeluBackwardKernel<T><<<GridFor(n), kThreads, 0, stream>>>(As<T>(dout), As<T>(in),
                                                                As<T>(din), n);
  });
  return LaunchResult();
}

Status SwigluForward(const void* in, void* out, int64_t rows, int64_t ffn, DType t,
                     cudaStream_t stream) {
  if (rows * ffn <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    SwigluForwardKernel<T><<<GridFor(rows * ffn), kThreads, 0, stream>>>(As<T>(in), As<T>(out),
                                                                          rows, ffn);
  });
  return LaunchResult();
}

Status SwigluBackward(const void* dout, const void* in, void* din, int64_t rows, int64_t ffn,
                      DType t, cudaStream_t stream) {
  if (rows * ffn <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    SwigluBackwardKernel<T><<<GridFor(rows * ffn), kThreads, 0, stream>>>(
        As<T>(dout), As<T>(in), As<T>(din), rows, ffn);
  });
  return LaunchResult();
}

Status CausalSoftmax(void* scores, int64_t rows, int64_t seq, DType t, cudaStream_t stream) {
  if (rows <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    CausalSoftmaxKernel<T><<<RowGrid(rows), kThreads, 0, stream>>>(As<T>(scores), seq);
  });
  return LaunchResult();
}

Status SoftmaxBackward(const void* prob, void* dprob, int64_t rows, int64_t seq, DType t,
                       cudaStream_t stream) {
  if (rows <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    SoftmaxBackwardKernel<T><<<RowGrid(rows), kThreads, 0, stream>>>(As<T>(prob), As<T>(dprob),
                                                                      seq);
  });
  return LaunchResult();
}

Status SumKeyValueGroups(const void* dk_expanded, const void* dv_expanded, void* dqkv,
                         int64_t tokens, int64_t heads, int64_t kv_heads, int64_t head_dim,
                         DType t, cudaStream_t stream) {
  const int64_t n = tokens * kv_heads * head_dim;
  if (n <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    SumKeyValueGroupsKernel<T><<<GridFor(n), kThreads, 0, stream>>>(
        As<T>(dk_expanded), As<T>(dv_expanded), As<T>(dqkv), tokens, heads, kv_heads, head_dim);
  });
  return LaunchResult();
}

Status FillBatchPointers(const void** pointers, BatchedOperand a, BatchedOperand b,
                         BatchedOperand c, int64_t batch, int64_t heads, cudaStream_t stream) {
  FillBatchPointersKernel<<<GridFor(batch * heads), kThreads, 0, stream>>>(pointers, a, b, c,
                                                                           batch, heads);
  return LaunchResult();
}

Status CrossEntropyGradient(void* logits, float* scratch, int64_t rows, int64_t vocab,
                            uint64_t seed, DType t, cudaStream_t stream) {
  if (rows <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    CrossEntropyGradientKernel<T><<<RowGrid(rows), kThreads, 0, stream>>>(As<T>(logits), scratch,
                                                                           rows, vocab, seed);
  });
  return LaunchResult();
}

Status EmbeddingForward(const void* table, void* out, int64_t rows, int64_t cols, int64_t vocab,
                        uint64_t seed, int64_t token_offset, DType t, cudaStream_t stream) {
  if (rows * cols <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    EmbeddingForwardKernel<T><<<GridFor(rows * cols), kThreads, 0, stream>>>(
        As<T>(table), As<T>(out), rows, cols, vocab, seed, token_offset);
  });
  return LaunchResult();
}

Status EmbeddingBackward(const void* dout, void* table_grad, int64_t rows, int64_t cols,
                         int64_t vocab, uint64_t seed, int64_t token_offset, DType t,
                         cudaStream_t stream) {
  if (rows * cols <= 0) return Status::Ok();
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    EmbeddingBackwardKernel<T><<<GridFor(rows * cols), kThreads, 0, stream>>>(
        As<T>(dout), As<T>(table_grad), rows, cols, vocab, seed, token_offset);
  });
  return LaunchResult();
}

Status OptimizerUpdate(const OptimizerHyper& hyper, const void* grads, void* weights,
                       float* master, float* moment1, float* moment2, int64_t n, DType t,
                       cudaStream_t stream) {
  if (n <= 0) return Status::Ok();
  if (hyper.kind == OptimizerKind::kAdamW && (moment1 == nullptr || moment2 == nullptr)) {
    return InternalError("AdamW update without moment buffers");
  }
  if (hyper.kind == OptimizerKind::kSgdMomentum && moment1 == nullptr) {
    return InternalError("SGD-momentum update without a momentum buffer");
  }
  const float step = static_cast<float>(std::max<int64_t>(hyper.step, 1));
  const float bias1 = 1.0f - std::pow(hyper.beta1, step);
  const float bias2 = 1.0f - std::pow(hyper.beta2, step);
  Dispatch(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    OptimizerKernel<T><<<GridFor(n), kThreads, 0, stream>>>(hyper, As<T>(grads), As<T>(weights),
                                                            master, moment1, moment2, n, bias1,
                                                            bias2);
  });
  return LaunchResult();
}

}  // namespace pacer::worker
