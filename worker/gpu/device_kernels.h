// The fp32 kernels of the GPU device (gpu_device.h) whose arithmetic is the
// CPU device's (worker/cpu/cpu_kernels.h), so that one step executor gives
// the same model on both: RMS norm without gain (keeping 1/rms per row),
// the scaled row softmax of attention and its backward, embedding lookups
// by host-chosen token ids, the cross-entropy gradient against labels, and
// AdamW. The per-element formulas are not copies of the CPU's: both
// devices call core/kernel_math.h. GELU, SwiGLU and the residual add come
// from gpu_kernels.h (their fp32 instantiations, over the same formulas).
//
// Every launcher enqueues on `stream` and returns the launch error (host,
// file, line); none synchronises. Row-major; sizes in elements. Reductions
// accumulate in fp32 (the CPU accumulates some in double: the smoke
// comparison's tolerance covers the difference).
// Thread-safety: stateless; the stream carries the ordering.
#ifndef PACER_WORKER_GPU_DEVICE_KERNELS_H_
#define PACER_WORKER_GPU_DEVICE_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "core/device.h"
#include "gpu/gpu_kernels.h"  // DType
#include "gpu/sdpa_layout.h"  // StatsRows
#include "pacer/status.h"

namespace pacer::worker::gpu {

// y = x / rms(x) per row (eps 1e-6); inv_rms[r] = 1 / rms of row r.
Status RmsNormForward(const float* x, int64_t rows, int64_t cols, float* y, float* inv_rms,
                      cudaStream_t stream);
// dx += inv dy - x inv^3 (x . dy) / cols, per row.
Status RmsNormBackward(const float* x, const float* inv_rms, const float* dy, int64_t rows,
                       int64_t cols, float* dx, cudaStream_t stream);
// The same on any storage of x, y and dy (fp32 or bf16: the GPU device's
// narrow activations, core/device.h Storage); statistics and dx are fp32.
// Internal for fp16 storage, which nothing allocates.
Status RmsNormForward(const void* x, DType x_type, int64_t rows, int64_t cols, void* y,
                      DType y_type, float* inv_rms, cudaStream_t stream);
Status RmsNormBackward(const void* x, DType x_type, const float* inv_rms, const void* dy,
                       DType dy_type, int64_t rows, int64_t cols, float* dx, cudaStream_t stream);
// y[i] = x[i] stored in y's type (bf16: rounded to nearest even), or y[i] +
// x[i] when `add` (summed in fp32, then stored); n elements each, fp32 or
// bf16.
Status Convert(const void* x, DType x_type, size_t n, void* y, DType y_type, bool add,
               cudaStream_t stream);
// In place: each row of `cols` becomes softmax(scale * row); under `mask`
// over the row's visible keys (core/causal_mask.h), its other columns 0.
Status SoftmaxRows(float* x, int64_t rows, int64_t cols, float scale, const CausalRows& mask,
                   cudaStream_t stream);
// In place over dp: dp = scale * p * (dp - rowsum(p * dp)).
Status SoftmaxBackward(const float* p, float* dp, int64_t rows, int64_t cols, float scale,
                       cudaStream_t stream);
// out row i = table row tokens[i] (the table fp32 or bf16), zeros where
// tokens[i] < 0 (tokens on the device).
Status EmbeddingForward(const void* table, DType table_type, const int32_t* tokens, int64_t rows,
                        int64_t cols, float* out, cudaStream_t stream);
// table_grad row tokens[i] += dout row i (atomics: repeated tokens add up;
// tokens < 0 skipped).
Status EmbeddingBackward(const float* dout, const int32_t* tokens, int64_t rows, int64_t cols,
                         float* table_grad, cudaStream_t stream);
// In place: logits become (softmax - onehot(label)) * grad_scale;
// row_loss[r] = -log(max(p_label, 1e-30)), 0 for labels < 0 (labels on the
// device). The softmax is over the row when row_lse is null, else
// exp(x - row_lse[r]) (Device::CrossEntropyGradInPlace).
Status CrossEntropyGrad(float* logits, const int32_t* labels, int64_t rows, int64_t cols,
                        float grad_scale, const float* row_lse, double* row_loss,
                        cudaStream_t stream);
// stats[r] = logsumexp of row r, stats[rows + r] = logits[r, labels[r]] or
// 0 for labels < 0 (Device::LogitRowStats).
Status LogitRowStats(const float* logits, const int32_t* labels, int64_t rows, int64_t cols,
                     float* stats, cudaStream_t stream);
// Where row r of a launch keeps one float (its logsumexp): lse[rows.Index(r)]
// (sdpa_layout.h, StatsRows, which CPU tests check). lse null: nowhere.
struct LseRows {
  float* lse = nullptr;
  StatsRows rows;
};
// The attention softmax on bf16 storage (a bf16 plan's probabilities on
// the GPU device): in place, each row of `cols` __nv_bfloat16 becomes
// softmax(scale * row), computed in fp32 from the stored values; under
// `mask` over the row's visible keys, its other columns 0. With out.lse,
// each row's logsumexp of the scaled scores (natural log) is written too.
Status SoftmaxRowsBf16(void* x, int64_t rows, int64_t cols, float scale, const CausalRows& mask,
                       const LseRows& out, cudaStream_t stream);
// The probabilities of attention scores from their rows' logsumexp, in
// place on bf16 storage: x[r, j] = exp(scale * x[r, j] - lse[i]) for row
// r of `rows`, where i = lse_rows.Index(r) (a batch of items whose rows lie
// apart in the statistics: cuDNN's SDPA forward writes one value per query
// row of every pair, and AttentionBatch's items are `group` pairs apart;
// sdpa_layout.h, StatsRows); under `mask` the masked columns become 0.
Status ProbsFromLseBf16(void* x, const float* lse, const StatsRows& lse_rows, int64_t rows,
                        int64_t cols, float scale, const CausalRows& mask, cudaStream_t stream);
// ds (bf16) = scale * p * (dp - rowsum(p * dp)) with p in bf16 and dp in
// fp32; ds must not overlap dp.
Status SoftmaxBackwardBf16(const void* p, const float* dp, void* ds, int64_t rows, int64_t cols,
                           float scale, cudaStream_t stream);
// y[i] = x[i] rounded to bf16 (round to nearest even); `y` holds n
// __nv_bfloat16 (2 bytes each).
Status ToBf16(const float* x, size_t n, void* y, cudaStream_t stream);
// y[i] = x[i] (n __nv_bfloat16) widened to fp32, or y[i] += it when `add`.
Status FromBf16(const void* x, size_t n, float* y, bool add, cudaStream_t stream);
// One AdamW update, as cpu::AdamWUpdate (step 1-based).
Status AdamW(float* w, const float* g, float* m, float* v, size_t n, float grad_scale,
             int64_t step, const AdamWParams& p, cudaStream_t stream);

}  // namespace pacer::worker::gpu

#endif  // PACER_WORKER_GPU_DEVICE_KERNELS_H_
