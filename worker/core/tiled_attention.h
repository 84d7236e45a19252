// The attention core written once over Device (device.h), so that the CPU
// device CI runs and the GPU device execute the same code: the tiled path
// of a plan with a fused attention kernel (below), and the unfused path
// (UnfusedAttentionForward, at the end). The tiled path takes query rows
// in tiles: for each tile, the scores of its rows against every key
// (tile_rows x seq per (sequence, head) pair; under a causal mask against
// the keys up to the tile's last row), their softmax and its product with
// V. Nothing of the s x s
// matrix outlives its tile: the backward pass recomputes each tile's scores
// and probabilities from Q and K (FlashAttention's recomputation, at the
// granularity of a tile in device memory rather than of an on-chip block),
// so the stash of a layer holds no attention scores at all, which is what
// the planner's fused-attention memory model assumes.
//
// Its cost against an unfused kernel: the backward pass runs one more
// GEMM (Q K^T, 2 s^2 d per pair), which the step schedule and the planner's
// hardware FLOPs count; the scores still go through device memory tile by
// tile (a kernel that keeps them on chip, as cuDNN's SDPA or FlashAttention
// does, moves fewer bytes, and is a device's own business).
//
// Layout and arithmetic are those of the unfused path: the qkv rows of
// AttentionShape, softmax scaled by 1/sqrt(head_dim), the causal
// mask when shape.causal: then a tile computes its rows' scores against
// the keys up to its last row only (causal_mask.h), which with the default
// tile of kAttentionTileRows rows is the work the step schedule counts.
// Batched calls take one pair per K/V head (ForAttentionBatches).
//
// Memory: a workspace of at most max_scratch_bytes (forward: the tiles'
// probabilities; backward: those and their gradients), from the device's
// allocator and tracker, freed before returning.
// Units: elements (fp32) for sizes, bytes for the scratch bound.
// Thread-safety: as the device: one rank's thread.
#ifndef PACER_WORKER_CORE_TILED_ATTENTION_H_
#define PACER_WORKER_CORE_TILED_ATTENTION_H_

#include <cstddef>
#include <cstdint>

#include "core/device.h"
#include "pacer/status.h"

namespace pacer::worker {

struct TiledAttentionOptions {
  int64_t tile_rows = kAttentionTileRows;       // query rows per tile (the last may be shorter)
  size_t max_scratch_bytes = size_t{64} << 20;  // at least one pair's tile is always allowed
};

// ctx ([tokens x ctx_ld()]) = softmax(Q K^T / sqrt(d)) V for every pair.
Status TiledAttentionForward(Device* device, const AttentionShape& shape, const float* qkv,
                             float* ctx, const TiledAttentionOptions& options = {});

// dqkv += the gradients of Q, K and V given dctx (dctx laid out as ctx).
Status TiledAttentionBackward(Device* device, const AttentionShape& shape, const float* qkv,
                              const float* dctx, float* dqkv,
                              const TiledAttentionOptions& options = {});

// The unfused attention (a plan's `attention: unfused`; Device's default
// AttentionForward and AttentionBackward): the same GEMMs over one tile of
// the whole sequence per pair (attention_tiles.h, StashedGemmsFor), with P
// kept for the backward pass in `probs` (shape.ProbsElements() fp32, each
// pair's s x s block at its slot), the forward in batches of one pair per
// K/V head. The backward reads P (no recomputation) in batches of as many
// pairs (at most one per K/V head) as a workspace for dP of at most
// max_scratch_bytes holds (one pair always), freed before returning.
// Under a causal mask every score is computed and the masked ones get
// probability 0, as an unfused kernel does: the step schedule counts the
// whole s x s matrix for it.
Status UnfusedAttentionForward(Device* device, const AttentionShape& shape, const float* qkv,
                               float* probs, float* ctx);
Status UnfusedAttentionBackward(Device* device, const AttentionShape& shape, const float* qkv,
                                const float* probs, const float* dctx, float* dqkv,
                                size_t max_scratch_bytes = size_t{64} << 20);

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_TILED_ATTENTION_H_
