// Elementwise kernels in the storage types the GPU code uses (fp32, fp16,
// bf16): GELU, SwiGLU and the residual add, which the GPU device runs in
// their fp32 instantiation (the same formulas as the CPU device's), and the
// hashed uniform fill the calibration's GEMM operands use. The kernels whose
// arithmetic must match the CPU device exactly are in device_kernels.h.
//
// Every launcher enqueues on `stream` and returns the launch error (as a
// Status with host, file and line); none synchronises. Tensors are row-major;
// `rows` x `cols` are elements. Arithmetic is fp32 whatever the storage type.
// Thread-safety: stateless; streams carry the ordering.
#ifndef PACER_WORKER_GPU_GPU_KERNELS_H_
#define PACER_WORKER_GPU_GPU_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "pacer/status.h"

namespace pacer::worker {

// Storage type of a tensor.
enum class DType { kFp32, kFp16, kBf16 };
int DTypeBytes(DType t);

// p[i] = scale x uniform(-1, 1) from a hash of (seed, index_offset + i):
// the same element gets the same value whichever shard fills it.
Status FillUniform(void* p, DType t, int64_t n, uint64_t seed, int64_t index_offset, float scale,
                   cudaStream_t stream);

// out = a + b (out may alias either).
Status Add(const void* a, const void* b, void* out, int64_t n, DType t, cudaStream_t stream);

// GELU (tanh approximation) and its backward: din = dout * gelu'(in).
Status GeluForward(const void* in, void* out, int64_t n, DType t, cudaStream_t stream);
Status GeluBackward(const void* dout, const void* in, void* din, int64_t n, DType t,
                    cudaStream_t stream);
// SwiGLU over rows of [gate | up] (2 x `ffn` wide): out = silu(gate) * up;
// the backward writes din = [dgate | dup].
Status SwigluForward(const void* in, void* out, int64_t rows, int64_t ffn, DType t,
                     cudaStream_t stream);
Status SwigluBackward(const void* dout, const void* in, void* din, int64_t rows, int64_t ffn,
                      DType t, cudaStream_t stream);

}  // namespace pacer::worker

#endif  // PACER_WORKER_GPU_GPU_KERNELS_H_
