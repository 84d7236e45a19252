// GpuDevice: the Device (core/device.h) of one NVIDIA GPU, so that the GPU
// backend is the one step executor (core/step_executor.h) over it, as the
// CPU backend is the executor over the CPU device. cuBLAS for the GEMMs
// (attention's batched GEMMs as strided-batched calls), CUDA kernels for the
// elementwise work (device_kernels.h, gpu_kernels.h), NCCL for the
// collectives (nccl_comms.h), stream-ordered cudaMallocAsync for memory.
//
// One rank, one GPU: Connect binds the calling thread to GPU LOCAL_RANK and
// refuses (InvalidArgument, exit code 2) when fewer GPUs are visible than
// ranks per node, before touching any GPU. Everything runs in order on one
// compute stream, except pipeline sends, which run on one stream per
// direction from a staging copy (so the executor may reuse its buffer at
// once, and a send never blocks the compute stream's receives).
//
// Precision: storage is fp32 except Storage::kCompute buffers under bf16
// activations (below). The GEMMs run as
// ExecutedPrecision reports, never the plan's wish:
//   fp32 plan  fp32 GEMMs (CUBLAS_COMPUTE_32F)                  -> "fp32"
//   tf32 plan  TF32 tensor cores, fp32 accumulate                -> "tf32"
//   bf16 plan  bf16 tensor cores on bf16 copies of the operands,
//              fp32 accumulate and fp32 output (CUBLAS_COMPUTE_32F
//              on CUDA_R_16BF inputs)                            -> "bf16"
//   fp16 plan  TF32 (fp16 inputs without loss scaling would flush
//              the 1/tokens-scaled logit gradients to zero)      -> "tf32"
//   fp8 plan   refused at Connect (InvalidArgument): no fp8 GEMM path.
// The bf16 copies: each weights buffer (BufferClass::kWeights) gets one
// bf16 copy, charged as weights, re-converted at the first GEMM after any
// write to the buffer (the optimizer step, a parameter all-gather), so once
// per step rather than per GEMM; fp32-stored activation operands are
// converted per GEMM into two scratch buffers (workspace). cuBLAS' own bf16 mode on fp32
// operands (CUBLAS_COMPUTE_32F_FAST_16BF) rounds the same way but runs at
// about TF32 speed (calibrate's "bf16-on-fp32" row), which is why the
// device converts. Elementwise kernels compute and reduce in fp32. With
// fp32 storage a bf16 plan's activations take twice the bytes the planner
// predicts for them, and its weights 6 bytes per parameter (fp32 + the
// bf16 copy) where the planner counts 2 (docs/worker.md).
// bf16 activations (PACER_GPU_BF16_ACTIVATIONS=1 under a bf16 plan,
// WorkerConfig::gpu, taken at Connect; off by default until a GPU has measured it):
// Storage::kCompute buffers are bf16, handed out as StorageMap handles (core/storage_map.h) that
// every entry point resolves; GEMMs read them directly and write them in bf16, cuDNN reads and
// writes them in place, RMS norm, GELU, SwiGLU, Add and Copy have kernels for any mix of fp32 and
// bf16 operands, and the other entry points (embedding, loss, AdamW, the tiled softmax, collectives
// over more than one rank, pipeline receives) take fp32 views (Fp32Views: convert in, run, convert
// back). ElementBytes is 2 for them, so the tracker charges what they take.

// Attention: a fused bf16 plan under a causal mask runs the device's causal
// tiles (CausalAttentionForwardBf16: tiles of kAttentionTileRows query rows
// against the keys up to their last row, in bf16; PACER_GPU_CAUSAL_TILES=0
// turns them off). A fused bf16 plan with full attention runs cuDNN's SDPA (HasOnChipAttention,
// cudnn_attention.h) when the build has cuDNN 9.13 or newer, cuDNN has an
// engine for the shape's forward and a trial run on zeros succeeds
// (PACER_CUDNN_ATTENTION=0 turns it off; without a backward engine, or
// before 9.17, the backward is the tiled one); Q, K, V, the
// context and dC are converted to bf16 per call into operand scratch and
// workspace where stored in fp32 (read in place where bf16), dQ, dK, dV
// added into the gradient in its storage. Other fused plans
// run the executor's tiled attention
// (core/tiled_attention.h) over BatchedGemm (cuBLAS strided-batched) and the
// softmax kernels; an unfused plan runs AttentionForward, which stores the
// s x s probabilities of every (sequence, head) pair, as the executor's
// stash expects: under an fp32 or tf32 plan Device's default walk
// (core/tiled_attention.h, UnfusedAttentionForward), which the CPU device
// runs in CI; the bf16 path runs the same GEMM description
// (core/attention_tiles.h, StashedGemmsFor) on its own storage (in bf16
// under a bf16 plan: AttentionStashElements is half the fp32 count, and
// the softmax and the GEMMs that read P or dS work on bf16 directly), and
// the backward pass takes a dP (and, for bf16, dS) scratch of at most
// kAttentionScratchBytes.
//
// Errors: cudaErrorMemoryAllocation is ResourceExhausted (with what was
// asked and what was free); NCCL failures abort every communicator first,
// then return Unavailable (DeadlineExceeded on a timeout) with
// ncclGetLastError's text and the file:line of the call, or Internal for
// NCCL's invalid usage (a bug); other CUDA and cuBLAS errors are Internal.
// Every wait (Synchronize, host copies, FlushSends) polls NCCL for
// asynchronous errors against BackendContext::timeout, so none can hang.
//
// Counters: FLOPs as the GEMMs are enqueued; collective seconds from CUDA
// events around each collective and point-to-point operation, summed at
// Synchronize (so counters() is complete only after Synchronize).
//
// Per-operation timing: with PACER_GPU_OP_TIMES=1 in the environment
// (WorkerConfig::gpu, taken at Connect), CUDA events around every operation on the compute stream
// are summed by kind at Synchronize, after the first step, and printed to
// stderr when the device is destroyed (docs/worker.md).
//
// Units and thread-safety: as Device; every call from the thread that
// called Connect (the CUDA device binding is per thread).
#ifndef PACER_WORKER_GPU_GPU_DEVICE_H_
#define PACER_WORKER_GPU_GPU_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/attention_tiles.h"
#include "core/device.h"

namespace pacer::worker::gpu {

// The largest dP scratch the attention backward takes at once, bytes: pairs
// are processed in groups that fit (at least one pair).
inline constexpr size_t kAttentionScratchBytes = size_t{256} << 20;
// The fused attention's backward on recomputed probabilities (cuDNN's
// forward without cuDNN's backward) takes 8 bytes per score of at least
// one whole (sequence, head) pair: beyond the scratch bound (sequences
// longer than 5,792) the device runs the tiled backward instead, whose
// scratch is bounded by tiles of query rows, as the fused plan's memory
// model (no s x s buffer) assumes.
inline constexpr size_t kRecomputedBackwardBytesPerScore = 8;
inline bool RecomputedBackwardFits(int64_t seq) {
  return seq > 0 &&
         static_cast<double>(seq) * static_cast<double>(seq) * kRecomputedBackwardBytesPerScore <=
             static_cast<double>(kAttentionScratchBytes);
}
// The causal tiles (a causal bf16 plan's fused attention) take P in bf16,
// dP in fp32 and dS in bf16 (8 bytes a score) for tiles of
// kAttentionTileRows query rows of at least one pair: up to sequences of
// 262,144 tokens; beyond, the device runs the executor's tiled attention.
inline bool CausalTilesFit(const AttentionShape& s) {
  return s.seq > 0 && static_cast<double>(LargestTileScores(s, kAttentionTileRows)) *
                              static_cast<double>(kRecomputedBackwardBytesPerScore) <=
                          static_cast<double>(kAttentionScratchBytes);
}
// Host copies of a bf16-stored buffer widen it through an fp32 temporary
// of at most this many bytes at a time: a checkpoint of a 7B model's bf16
// weights would otherwise take a 28 GB temporary beside the model state.
inline constexpr size_t kHostCopyStagingBytes = size_t{64} << 20;
// cuBLAS' workspace, owned by the device and tracked as workspace (32 MiB
// is what cuBLAS documents for Hopper).
inline constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

std::unique_ptr<Device> MakeGpuDevice();

}  // namespace pacer::worker::gpu

#endif  // PACER_WORKER_GPU_GPU_DEVICE_H_
