// The CPU backend's numerical kernels, all fp32: a counting sgemm wrapper
// over OpenBLAS, and the elementwise parts of a transformer layer (RMS norm,
// GELU, SwiGLU, row softmax, cross-entropy gradient, AdamW) with their
// backward passes. Plans in bf16/fp16 execute in fp32 on CPU: the point of
// the CPU backend is the schedule (shapes, collectives, order), not
// low-precision arithmetic.
//
// Matrices are row-major. Deterministic: the same inputs give the same bits
// (OpenBLAS splits sgemm over output tiles, never over the inner dimension).
// Units: elements; FLOPs count a multiply-add as 2.
// Thread-safety: free functions on caller-owned memory; a GemmCounter
// belongs to one thread.
#ifndef PACER_WORKER_CPU_CPU_KERNELS_H_
#define PACER_WORKER_CPU_CPU_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "core/causal_mask.h"
#include "core/device.h"
#include "core/hash_keys.h"

namespace pacer::worker::cpu {

// C[m x n] = alpha op(A) op(B) + beta C, op(X) = X or X^T; leading
// dimensions are the row-major storage widths. Adds 2 m n k to *flops.
void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
           double* flops);

// The input hash (core/hash_keys.h), shared with the step executor.
using ::pacer::worker::HashKeys;
using ::pacer::worker::UniformFromHash;

// y = x / rms(x) per row of `cols` (no learned gain); `inv_rms` keeps 1/rms
// per row for the backward pass.
void RmsNormForward(const float* x, int64_t rows, int64_t cols, float* y, float* inv_rms);
// dx += d(norm)/dx applied to dy.
void RmsNormBackward(const float* x, const float* inv_rms, const float* dy, int64_t rows,
                     int64_t cols, float* dx);

// GELU (tanh approximation), elementwise over n.
void GeluForward(const float* x, size_t n, float* y);
void GeluBackward(const float* x, const float* dy, size_t n, float* dx);

// SwiGLU: in is [rows x 2f] (gate | up), out is [rows x f] = silu(gate) * up.
void SwigluForward(const float* in, int64_t rows, int64_t f, float* out);
void SwigluBackward(const float* in, const float* dout, int64_t rows, int64_t f, float* din);

// Row softmax of scale * x over `cols`, in place; under `mask` over each
// row's visible keys, its other columns set to 0.
void SoftmaxRowsInPlace(float* x, int64_t rows, int64_t cols, float scale,
                        const CausalRows& mask = {});
// dx = scale * p * (dp - rowsum(dp * p)), in place over dp.
void SoftmaxBackwardInPlace(const float* p, float* dp, int64_t rows, int64_t cols, float scale);

// Softmax cross-entropy over rows of logits, in place: logits become
// (softmax - onehot(label)) * grad_scale. Returns the summed loss. With
// row_lse (a vocabulary shard: the logsumexp over the whole vocabulary per
// row) the softmax is exp(x - row_lse[r]) and labels < 0 (in another
// shard) get no one-hot and add no loss (Device::CrossEntropyGradInPlace).
double CrossEntropyGradInPlace(float* logits, const int32_t* labels, int64_t rows, int64_t cols,
                               float grad_scale, const float* row_lse);
// A shard's logsumexp and target logit per row (Device::LogitRowStats).
void LogitRowStats(const float* logits, const int32_t* labels, int64_t rows, int64_t cols,
                   float* stats);

// y += x.
void AddInPlace(float* y, const float* x, size_t n);

using ::pacer::worker::AdamWParams;  // core/device.h

// One AdamW update of n parameters from the gradient `g` times
// `grad_scale` (1 / the number of summed micro-batch gradients); `step` is
// 1-based for the bias correction.
void AdamWUpdate(float* w, const float* g, float* m, float* v, size_t n, float grad_scale,
                 int64_t step, const AdamWParams& p);

}  // namespace pacer::worker::cpu

#endif  // PACER_WORKER_CPU_CPU_KERNELS_H_
