#include "gpu/device_kernels.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "core/kernel_math.h"
#include "gpu/cuda_check.h"
#include "gpu/element_cast.cuh"

namespace pacer::worker::gpu {
namespace {

namespace km = ::pacer::worker::kernel_math;

constexpr int kThreads = 256;

// Sum and max over the block; every thread gets the result. `shared` holds
// 32 floats and may be reused by the next call.
__device__ float BlockSum(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
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

// One block per row: grids of up to 2^31 - 1 blocks in x.
unsigned int Rows(int64_t rows) { return static_cast<unsigned int>(std::max<int64_t>(rows, 1)); }

unsigned int GridFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min<int64_t>(blocks, 65535 * 8)));
}

Status CheckRows(int64_t rows) {
  if (rows > 0x7fffffff) {
    return InvalidArgumentError("GPU device: " + std::to_string(rows) +
                                " rows exceed one grid dimension");
  }
  return Status::Ok();
}

// Calls f with a null pointer of the storage type of `t` (fp32 or bf16):
// false for a type these kernels have no instantiation of (fp16).
template <typename F>
bool ForStorage(DType t, F&& f) {
  switch (t) {
    case DType::kFp32:
      f(static_cast<float*>(nullptr));
      return true;
    case DType::kBf16:
      f(static_cast<__nv_bfloat16*>(nullptr));
      return true;
    case DType::kFp16:
      return false;
  }
  return false;
}

// Calls f with null pointers of the storage types of `a` and `b`: false
// where either has no instantiation.
template <typename F>
bool ForStorages(DType a, DType b, F&& f) {
  bool known = false;
  ForStorage(a, [&](auto* a_tag) { known = ForStorage(b, [&](auto* b_tag) { f(a_tag, b_tag); }); });
  return known;
}

Status UnsupportedStorage(const char* what) {
  return InternalError(std::string("GPU device: ") + what + " has no fp16-storage kernel");
}

template <typename TX, typename TY>
__global__ void RmsNormForwardKernel(const TX* x, int64_t cols, TY* y, float* inv_rms) {
  __shared__ float shared[32];
  const int64_t r = blockIdx.x;
  const TX* xr = x + r * cols;
  float sum = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float v = Load(xr, j);
    sum += v * v;
  }
  sum = BlockSum(sum, shared);
  const float inv = km::InvRms(sum, cols);
  if (threadIdx.x == 0) inv_rms[r] = inv;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    Store(y, r * cols + j, Load(xr, j) * inv);
}

template <typename TX, typename TDY>
__global__ void RmsNormBackwardKernel(const TX* x, const float* inv_rms, const TDY* dy,
                                      int64_t cols, float* dx) {
  __shared__ float shared[32];
  const int64_t r = blockIdx.x;
  const TX* xr = x + r * cols;
  const TDY* dyr = dy + r * cols;
  float dot = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) dot += Load(xr, j) * Load(dyr, j);
  dot = BlockSum(dot, shared);
  const float inv = inv_rms[r];
  const float coef = km::RmsNormGradCoef(dot, cols, inv);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    dx[r * cols + j] += km::RmsNormGrad(Load(xr, j), Load(dyr, j), inv, coef);
  }
}

// y[i] = x[i] in y's storage, or y[i] + x[i] when `add` (in fp32, then
// stored). Grid-stride.
template <typename TX, typename TY>
__global__ void ConvertKernel(const TX* x, int64_t n, TY* y, bool add) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const float v = Load(x, i);
    Store(y, i, add ? Load(y, i) + v : v);
  }
}

// Masked columns (beyond the row's keys: CausalRows::Keys, the CPU's
// function) become 0.
__global__ void SoftmaxRowsKernel(float* x, int64_t cols, float scale, CausalRows mask) {
  __shared__ float shared[32];
  const int64_t r = blockIdx.x;
  float* xr = x + r * cols;
  const int64_t keys = mask.Keys(r, cols);
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) mx = fmaxf(mx, xr[j] * scale);
  mx = BlockMax(mx, shared);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
    const float e = expf(xr[j] * scale - mx);
    xr[j] = e;
    sum += e;
  }
  sum = BlockSum(sum, shared);
  const float inv = 1.0f / sum;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) xr[j] = j < keys ? xr[j] * inv : 0.0f;
}

__global__ void SoftmaxBackwardKernel(const float* p, float* dp, int64_t cols, float scale) {
  __shared__ float shared[32];
  const int64_t r = blockIdx.x;
  const float* pr = p + r * cols;
  float* dr = dp + r * cols;
  float dot = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) dot += pr[j] * dr[j];
  dot = BlockSum(dot, shared);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    dr[j] = km::SoftmaxGrad(pr[j], dr[j], dot, scale);
  }
}

// Three passes over the row (max, sum, write) so each probability is
// rounded to bf16 once, from fp32. Masked columns become 0; with `lse`,
// the row's logsumexp (max included, natural log) goes to
// lse[lse_rows.Index(r)].
__global__ void SoftmaxRowsBf16Kernel(__nv_bfloat16* x, int64_t cols, float scale, CausalRows mask,
                                      float* lse, StatsRows lse_rows) {
  __shared__ float shared[32];
  const int64_t r = blockIdx.x;
  __nv_bfloat16* xr = x + r * cols;
  const int64_t keys = mask.Keys(r, cols);
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
    mx = fmaxf(mx, __bfloat162float(xr[j]) * scale);
  }
  mx = BlockMax(mx, shared);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
    sum += expf(__bfloat162float(xr[j]) * scale - mx);
  }
  sum = BlockSum(sum, shared);
  const float inv = 1.0f / sum;
  if (lse != nullptr && threadIdx.x == 0) {
    lse[lse_rows.Index(r)] = mx + logf(sum);
  }
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    xr[j] = __float2bfloat16_rn(j < keys ? expf(__bfloat162float(xr[j]) * scale - mx) * inv : 0.0f);
  }
}

__global__ void ProbsFromLseBf16Kernel(__nv_bfloat16* x, const float* lse, StatsRows lse_rows,
                                       int64_t cols, float scale, CausalRows mask) {
  const int64_t r = blockIdx.x;
  const float l = lse[lse_rows.Index(r)];
  const int64_t keys = mask.Keys(r, cols);
  __nv_bfloat16* xr = x + r * cols;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    xr[j] = __float2bfloat16_rn(j < keys ? expf(__bfloat162float(xr[j]) * scale - l) : 0.0f);
  }
}

__global__ void SoftmaxBackwardBf16Kernel(const __nv_bfloat16* p, const float* dp,
                                          __nv_bfloat16* ds, int64_t cols, float scale) {
  __shared__ float shared[32];
  const int64_t r = blockIdx.x;
  const __nv_bfloat16* pr = p + r * cols;
  const float* dr = dp + r * cols;
  float dot = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) dot += __bfloat162float(pr[j]) * dr[j];
  dot = BlockSum(dot, shared);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    ds[r * cols + j] =
        __float2bfloat16_rn(km::SoftmaxGrad(__bfloat162float(pr[j]), dr[j], dot, scale));
  }
}

// The table in fp32 or bf16 (16-bit weights under a bf16 plan); rows out
// in fp32 (the residual stream).
template <typename TT>
__global__ void EmbeddingForwardKernel(const TT* table, const int32_t* tokens, int64_t cols,
                                       float* out) {
  const int64_t r = blockIdx.x;
  const int32_t token = tokens[r];
  if (token < 0) {  // another rank's vocabulary shard
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) out[r * cols + j] = 0.0f;
    return;
  }
  const TT* row = table + static_cast<int64_t>(token) * cols;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) out[r * cols + j] = Load(row, j);
}

__global__ void EmbeddingBackwardKernel(const float* dout, const int32_t* tokens, int64_t cols,
                                        float* table_grad) {
  const int64_t r = blockIdx.x;
  if (tokens[r] < 0) return;  // another rank's vocabulary shard
  float* row = table_grad + static_cast<int64_t>(tokens[r]) * cols;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) atomicAdd(&row[j], dout[r * cols + j]);
}

// The row's max and its sum of exp(x - max), reduced over the block.
__device__ void RowMaxAndSum(const float* lr, int64_t cols, float* shared, float* mx, float* sum) {
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, lr[j]);
  m = BlockMax(m, shared);
  float total = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) total += expf(lr[j] - m);
  *mx = m;
  *sum = BlockSum(total, shared);
}

// row_lse null: the softmax over this row's columns; else exp(x - row_lse)
// (a vocabulary shard of a row whose logsumexp is row_lse). A label < 0 is
// in another shard: no one-hot, no loss.
__global__ void CrossEntropyGradKernel(float* logits, const int32_t* labels, int64_t cols,
                                       float grad_scale, const float* row_lse, double* row_loss) {
  __shared__ float shared[32];
  const int64_t r = blockIdx.x;
  float* lr = logits + r * cols;
  float shift = 0, inv = 1;
  if (row_lse == nullptr) {
    float sum = 0;
    RowMaxAndSum(lr, cols, shared, &shift, &sum);
    inv = 1.0f / sum;
  } else {
    shift = row_lse[r];
  }
  const int64_t label = labels[r];
  if (label < 0 && threadIdx.x == 0) row_loss[r] = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float p = expf(lr[j] - shift) * inv;
    if (j == label) row_loss[r] = km::CrossEntropyLoss(p);
    lr[j] = km::CrossEntropyGrad(p, j == label, grad_scale);
  }
}

// stats[r] = logsumexp of row r; stats[rows + r] = its label's logit (0
// when the label is in another shard).
__global__ void LogitRowStatsKernel(const float* logits, const int32_t* labels, int64_t rows,
                                    int64_t cols, float* stats) {
  __shared__ float shared[32];
  const int64_t r = blockIdx.x;
  const float* lr = logits + r * cols;
  float mx = 0, sum = 0;
  RowMaxAndSum(lr, cols, shared, &mx, &sum);
  if (threadIdx.x == 0) {
    stats[r] = mx + logf(sum);
    stats[rows + r] = labels[r] >= 0 ? lr[labels[r]] : 0.0f;
  }
}

__global__ void AdamWKernel(float* w, const float* g, float* m, float* v, int64_t n,
                            float grad_scale, km::AdamWScales scales, AdamWParams p) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    km::AdamWElement(&w[i], g[i], &m[i], &v[i], grad_scale, scales, p);
  }
}

}  // namespace

Status SoftmaxRowsBf16(void* x, int64_t rows, int64_t cols, float scale, const CausalRows& mask,
                       const LseRows& out, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return Status::Ok();
  if (out.lse != nullptr && out.rows.rows_per_item <= 0) {
    return InternalError("SoftmaxRowsBf16: rows_per_item <= 0");
  }
  RETURN_IF_ERROR(CheckRows(rows));
  SoftmaxRowsBf16Kernel<<<Rows(rows), kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(x), cols,
                                                             scale, mask, out.lse, out.rows);
  return CUDA_LAUNCH_STATUS();
}

Status ProbsFromLseBf16(void* x, const float* lse, const StatsRows& lse_rows, int64_t rows,
                        int64_t cols, float scale, const CausalRows& mask, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return Status::Ok();
  if (lse_rows.rows_per_item <= 0) return InternalError("ProbsFromLseBf16: rows_per_item <= 0");
  RETURN_IF_ERROR(CheckRows(rows));
  ProbsFromLseBf16Kernel<<<Rows(rows), kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(x), lse,
                                                              lse_rows, cols, scale, mask);
  return CUDA_LAUNCH_STATUS();
}

Status SoftmaxBackwardBf16(const void* p, const float* dp, void* ds, int64_t rows, int64_t cols,
                           float scale, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return Status::Ok();
  RETURN_IF_ERROR(CheckRows(rows));
  SoftmaxBackwardBf16Kernel<<<Rows(rows), kThreads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(p), dp, static_cast<__nv_bfloat16*>(ds), cols, scale);
  return CUDA_LAUNCH_STATUS();
}

Status ToBf16(const float* x, size_t n, void* y, cudaStream_t stream) {
  return Convert(x, DType::kFp32, n, y, DType::kBf16, false, stream);
}

Status FromBf16(const void* x, size_t n, float* y, bool add, cudaStream_t stream) {
  return Convert(x, DType::kBf16, n, y, DType::kFp32, add, stream);
}

Status RmsNormForward(const float* x, int64_t rows, int64_t cols, float* y, float* inv_rms,
                      cudaStream_t stream) {
  return RmsNormForward(x, DType::kFp32, rows, cols, y, DType::kFp32, inv_rms, stream);
}

Status RmsNormForward(const void* x, DType x_type, int64_t rows, int64_t cols, void* y,
                      DType y_type, float* inv_rms, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return Status::Ok();
  RETURN_IF_ERROR(CheckRows(rows));
  const bool known = ForStorages(x_type, y_type, [&](auto* x_tag, auto* y_tag) {
    using TX = std::remove_pointer_t<decltype(x_tag)>;
    using TY = std::remove_pointer_t<decltype(y_tag)>;
    RmsNormForwardKernel<TX, TY><<<Rows(rows), kThreads, 0, stream>>>(
        static_cast<const TX*>(x), cols, static_cast<TY*>(y), inv_rms);
  });
  if (!known) return UnsupportedStorage("RMS norm");
  return CUDA_LAUNCH_STATUS();
}

Status RmsNormBackward(const float* x, const float* inv_rms, const float* dy, int64_t rows,
                       int64_t cols, float* dx, cudaStream_t stream) {
  return RmsNormBackward(x, DType::kFp32, inv_rms, dy, DType::kFp32, rows, cols, dx, stream);
}

Status RmsNormBackward(const void* x, DType x_type, const float* inv_rms, const void* dy,
                       DType dy_type, int64_t rows, int64_t cols, float* dx, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return Status::Ok();
  RETURN_IF_ERROR(CheckRows(rows));
  const bool known = ForStorages(x_type, dy_type, [&](auto* x_tag, auto* dy_tag) {
    using TX = std::remove_pointer_t<decltype(x_tag)>;
    using TDY = std::remove_pointer_t<decltype(dy_tag)>;
    RmsNormBackwardKernel<TX, TDY><<<Rows(rows), kThreads, 0, stream>>>(
        static_cast<const TX*>(x), inv_rms, static_cast<const TDY*>(dy), cols, dx);
  });
  if (!known) return UnsupportedStorage("RMS norm backward");
  return CUDA_LAUNCH_STATUS();
}

Status Convert(const void* x, DType x_type, size_t n, void* y, DType y_type, bool add,
               cudaStream_t stream) {
  if (n == 0) return Status::Ok();
  const int64_t count = static_cast<int64_t>(n);
  const bool known = ForStorages(x_type, y_type, [&](auto* x_tag, auto* y_tag) {
    using TX = std::remove_pointer_t<decltype(x_tag)>;
    using TY = std::remove_pointer_t<decltype(y_tag)>;
    ConvertKernel<TX, TY><<<GridFor(count), kThreads, 0, stream>>>(static_cast<const TX*>(x), count,
                                                                   static_cast<TY*>(y), add);
  });
  if (!known) return UnsupportedStorage("conversion");
  return CUDA_LAUNCH_STATUS();
}

Status SoftmaxRows(float* x, int64_t rows, int64_t cols, float scale, const CausalRows& mask,
                   cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return Status::Ok();
  RETURN_IF_ERROR(CheckRows(rows));
  SoftmaxRowsKernel<<<Rows(rows), kThreads, 0, stream>>>(x, cols, scale, mask);
  return CUDA_LAUNCH_STATUS();
}

Status SoftmaxBackward(const float* p, float* dp, int64_t rows, int64_t cols, float scale,
                       cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return Status::Ok();
  RETURN_IF_ERROR(CheckRows(rows));
  SoftmaxBackwardKernel<<<Rows(rows), kThreads, 0, stream>>>(p, dp, cols, scale);
  return CUDA_LAUNCH_STATUS();
}

Status EmbeddingForward(const void* table, DType table_type, const int32_t* tokens, int64_t rows,
                        int64_t cols, float* out, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return Status::Ok();
  RETURN_IF_ERROR(CheckRows(rows));
  const bool known = ForStorage(table_type, [&](auto* tag) {
    using TT = std::remove_pointer_t<decltype(tag)>;
    EmbeddingForwardKernel<TT>
        <<<Rows(rows), kThreads, 0, stream>>>(static_cast<const TT*>(table), tokens, cols, out);
  });
  if (!known) return UnsupportedStorage("the embedding");
  return CUDA_LAUNCH_STATUS();
}

Status EmbeddingBackward(const float* dout, const int32_t* tokens, int64_t rows, int64_t cols,
                         float* table_grad, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return Status::Ok();
  RETURN_IF_ERROR(CheckRows(rows));
  EmbeddingBackwardKernel<<<Rows(rows), kThreads, 0, stream>>>(dout, tokens, cols, table_grad);
  return CUDA_LAUNCH_STATUS();
}

Status CrossEntropyGrad(float* logits, const int32_t* labels, int64_t rows, int64_t cols,
                        float grad_scale, const float* row_lse, double* row_loss,
                        cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return Status::Ok();
  RETURN_IF_ERROR(CheckRows(rows));
  CrossEntropyGradKernel<<<Rows(rows), kThreads, 0, stream>>>(logits, labels, cols, grad_scale,
                                                              row_lse, row_loss);
  return CUDA_LAUNCH_STATUS();
}

Status LogitRowStats(const float* logits, const int32_t* labels, int64_t rows, int64_t cols,
                     float* stats, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return Status::Ok();
  RETURN_IF_ERROR(CheckRows(rows));
  LogitRowStatsKernel<<<Rows(rows), kThreads, 0, stream>>>(logits, labels, rows, cols, stats);
  return CUDA_LAUNCH_STATUS();
}

Status AdamW(float* w, const float* g, float* m, float* v, size_t n, float grad_scale,
             int64_t step, const AdamWParams& p, cudaStream_t stream) {
  if (n == 0) return Status::Ok();
  // The bias corrections in double on the host, as the CPU device does.
  const km::AdamWScales scales = km::AdamWBiasCorrections(step, p);
  const int64_t count = static_cast<int64_t>(n);
  AdamWKernel<<<GridFor(count), kThreads, 0, stream>>>(w, g, m, v, count, grad_scale, scales, p);
  return CUDA_LAUNCH_STATUS();
}

}  // namespace pacer::worker::gpu
