// CudnnAttention: cuDNN's fused scaled-dot-product attention, the GPU
// device's on-chip attention kernel (Device::HasOnChipAttention) under a
// bf16 plan. It uses the SDPA forward and backward operations of cuDNN's
// graph API (the backend descriptors CUDNN_BACKEND_OPERATION_SDPA_FWD,
// cuDNN 9.13 or newer, and _BWD, 9.17 or newer), planned once per shape, so
// the scores stay on chip and the backward recomputes them from Q, K and
// the forward's logsumexp. The forward is required; the backward is
// planned where cuDNN has an engine for it on this GPU (has_backward):
// without one (on an H100, cuDNN refuses the operation's graph) the
// device pairs cuDNN's forward with its bf16 backward on probabilities
// recomputed from the logsumexp (gpu_device.cu).
//
// Layout: the executor's buffers as they are, read through strides
// (sdpa_layout.h: Megatron's qkv rows as [sequence, head, row, dim];
// cuDNN's grouped-query rule is the executor's; the logsumexp statistics,
// which only the device reads, packed in cuDNN's order). Shapes
// AttentionShape::Valid refuses are refused by Create.
// Data: bf16 (cuDNN's SDPA has no fp32 path), fp32 statistics, scale
// 1/sqrt(head_dim), no mask. dQ, dK and dV are written, not accumulated;
// a group's query heads sum into their K/V head's gradient.
//
// Errors: Create returns FailedPrecondition with cuDNN's reason when the
// header or the loaded library is older than 9.13, the head dimension is
// not a multiple of 8, or no engine runs the forward of the shape on this
// GPU (the device then runs the tiled path); Forward and Backward return
// Internal with the file:line of the failed call and cuDNN's last error
// text (Backward FailedPrecondition without a backward plan).
// Units: elements; workspace in bytes.
// Thread-safety: one rank's thread (the handle is bound to its stream).
#ifndef PACER_WORKER_GPU_CUDNN_ATTENTION_H_
#define PACER_WORKER_GPU_CUDNN_ATTENTION_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "core/device.h"
#include "pacer/status.h"

namespace pacer::worker::gpu {

class CudnnAttention {
 public:
  // Plans the forward and backward pass of `shape`, to run on `stream`.
  static StatusOr<std::unique_ptr<CudnnAttention>> Create(const AttentionShape& shape,
                                                          cudaStream_t stream);
  // The loaded library's version, "9.19.0".
  static std::string LibraryVersion();
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // The larger of the two passes' workspaces.
  size_t workspace_bytes() const;
  // Whether the backward was planned; if not, why (cuDNN's reason).
  bool has_backward() const;
  const std::string& backward_refusal() const;

  // Pointers as sdpa_layout.h: q the qkv buffer, k and v it plus the K and
  // V offsets (bf16; dq, dk, dv alike in a buffer of qkv's layout), o and
  // d_o in the context's layout (bf16), lse (fp32).
  Status Forward(const void* q, const void* k, const void* v, void* o, float* lse, void* workspace);
  Status Backward(const void* q, const void* k, const void* v, const void* o, const void* d_o,
                  const float* lse, void* dq, void* dk, void* dv, void* workspace);

  // The cuDNN handle and descriptors (cudnn_attention.cc).
  struct Plans;

 private:
  explicit CudnnAttention(std::unique_ptr<Plans> plans);
  std::unique_ptr<Plans> plans_;
};

}  // namespace pacer::worker::gpu

#endif  // PACER_WORKER_GPU_CUDNN_ATTENTION_H_
