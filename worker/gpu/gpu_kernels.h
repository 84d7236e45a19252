// The memory-bound kernels of a transformer step: RMSNorm, GELU, SwiGLU,
// residual adds, the causal softmax over attention scores, the synthetic
// loss gradient, embedding lookups, the optimizer update and deterministic
// initialisation. The GEMMs go through cuBLAS (gemm_runner.h); these are the
// elementwise work between them.
//
// Every launcher enqueues on `stream` and returns the launch error (as a
// Status with host, file and line); none synchronises. Tensors are row-major;
// `rows` x `cols` are elements. Reductions accumulate in fp32 whatever the
// storage type. Thread-safety: stateless; streams carry the ordering.
#ifndef PACER_WORKER_GPU_GPU_KERNELS_H_
#define PACER_WORKER_GPU_GPU_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "pacer/status.h"

namespace pacer::worker {

// Storage type of weights, gradients and activations.
enum class DType { kFp32, kFp16, kBf16 };
int DTypeBytes(DType t);

// p[i] = scale x uniform(-1, 1) from a hash of (seed, index_offset + i):
// the same element gets the same value whichever shard fills it.
Status FillUniform(void* p, DType t, int64_t n, uint64_t seed, int64_t index_offset, float scale,
                   cudaStream_t stream);
Status FillConstant(void* p, DType t, int64_t n, float value, cudaStream_t stream);
// dst (fp32) = src.
Status ConvertToFloat(const void* src, DType t, float* dst, int64_t n, cudaStream_t stream);

// y = x / rms(x) * gain, per row.
Status RmsNormForward(const void* x, const void* gain, void* y, int64_t rows, int64_t cols,
                      DType t, cudaStream_t stream);
// dx = residual_grad + d(norm)/dx . dy, per row; stores 1/rms per row in
// `rstd`, then gain_grad += sum over rows of dy * x * rstd (atomics).
Status RmsNormBackward(const void* dy, const void* x, const void* gain, const void* residual_grad,
                       void* dx, void* gain_grad, float* rstd, int64_t rows, int64_t cols,
                       DType t, cudaStream_t stream);

// out = a + b (out may alias either).
Status Add(const void* a, const void* b, void* out, int64_t n, DType t, cudaStream_t stream);

// GELU (tanh approximation) and its backward: din = dout * gelu'(in).
Status GeluForward(const void* in, void* out, int64_t n, DType t, cudaStream_t stream);
Status GeluBackward(const void* dout, const void* in, void* din, int64_t n, DType t,
                    cudaStream_t stream);
// SwiGLU over rows of [gate | up] (2 x `ffn` wide): out = silu(gate) * up.
Status SwigluForward(const void* in, void* out, int64_t rows, int64_t ffn, DType t,
                     cudaStream_t stream);
Status SwigluBackward(const void* dout, const void* in, void* din, int64_t rows, int64_t ffn,
                      DType t, cudaStream_t stream);

// In place over `rows` rows of `seq` scores (row r is query r % seq): causal
// mask, then softmax.
Status CausalSoftmax(void* scores, int64_t rows, int64_t seq, DType t, cudaStream_t stream);
// In place: dprob <- prob * (dprob - sum(dprob * prob)) per row.
Status SoftmaxBackward(const void* prob, void* dprob, int64_t rows, int64_t seq, DType t,
                       cudaStream_t stream);

// Grouped-query attention's key/value gradients: the per-query-head
// gradients in `dk_expanded` / `dv_expanded` (tokens x heads x head_dim)
// summed over each group into the K and V columns of `dqkv` (tokens x
// (heads + 2 kv_heads) x head_dim).
Status SumKeyValueGroups(const void* dk_expanded, const void* dv_expanded, void* dqkv,
                         int64_t tokens, int64_t heads, int64_t kv_heads, int64_t head_dim,
                         DType t, cudaStream_t stream);

// Pointer arrays for one batched attention GEMM over `batch` x `heads`
// items: item i = (sample i / heads, head i % heads) gets
//   base + sample * batch_stride + (head / head_divisor) * head_stride
// for each operand (strides in bytes; head_divisor > 1 maps query heads to
// their shared key/value head).
struct BatchedOperand {
  const void* base = nullptr;
  int64_t batch_stride_bytes = 0;
  int64_t head_stride_bytes = 0;
  int64_t head_divisor = 1;
};
Status FillBatchPointers(const void** pointers, BatchedOperand a, BatchedOperand b,
                         BatchedOperand c, int64_t batch, int64_t heads, cudaStream_t stream);

// Synthetic next-token loss over this rank's vocabulary shard: the target of
// token r is a hash of (seed, r); writes d(loss)/d(logits) = (softmax - one
// hot) / rows over `logits` in place, keeping the fp32 copy in `scratch`.
Status CrossEntropyGradient(void* logits, float* scratch, int64_t rows, int64_t vocab,
                            uint64_t seed, DType t, cudaStream_t stream);

// out[r] = table[id(r)] with id(r) a hash of (seed, token_offset + r) modulo
// `vocab`; backward scatters dout rows into table_grad (atomics).
Status EmbeddingForward(const void* table, void* out, int64_t rows, int64_t cols, int64_t vocab,
                        uint64_t seed, int64_t token_offset, DType t, cudaStream_t stream);
Status EmbeddingBackward(const void* dout, void* table_grad, int64_t rows, int64_t cols,
                         int64_t vocab, uint64_t seed, int64_t token_offset, DType t,
                         cudaStream_t stream);

// The optimizer update of `n` elements. `master` (fp32) is the parameter when
// given (mixed precision) and `weights` its 16-bit copy; otherwise `weights`
// is fp32 and the parameter itself. Gradients are multiplied by grad_scale
// (1 / (k d): the mean over micro-batches and replicas).
enum class OptimizerKind { kAdamW, kSgdMomentum, kSgd };
struct OptimizerHyper {
  OptimizerKind kind = OptimizerKind::kAdamW;
  float learning_rate = 1e-4f;
  float beta1 = 0.9f, beta2 = 0.95f, epsilon = 1e-8f, weight_decay = 0.1f;
  float momentum = 0.9f;
  float grad_scale = 1.0f;
  int64_t step = 1;  // 1-based, for Adam's bias correction
};
Status OptimizerUpdate(const OptimizerHyper& hyper, const void* grads, void* weights,
                       float* master, float* moment1, float* moment2, int64_t n, DType t,
                       cudaStream_t stream);

}  // namespace pacer::worker

#endif  // PACER_WORKER_GPU_GPU_KERNELS_H_
