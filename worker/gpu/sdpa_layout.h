// SdpaLayoutFor: how the executor's attention layout (AttentionShape,
// core/device.h) reads as cuDNN's SDPA tensors, [batch, heads, seq, dim]
// with free strides, so that cuDNN runs on the executor's buffers without
// a copy. Pair i reads Q block i and K/V block i % kv_blocks; writing
// i = h * kv_blocks + b makes it batch b, query head h of a grouped-query
// attention with one K/V head per batch. The logsumexp statistics, which
// only the device reads, are packed in cuDNN's own order. Pure arithmetic,
// kept apart from
// cudnn_attention.cc (which needs cuDNN) so that CI checks it on the CPU.
// Units: elements. Thread-safety: a pure function.
#ifndef PACER_WORKER_GPU_SDPA_LAYOUT_H_
#define PACER_WORKER_GPU_SDPA_LAYOUT_H_

#include <array>
#include <cstdint>
#include <string>

#include "core/device.h"
#include "pacer/status.h"

namespace pacer::worker::gpu {

struct SdpaTensorLayout {
  std::array<int64_t, 4> dims{}, strides{};
};

struct SdpaLayout {
  SdpaTensorLayout query;      // Q, O, dO, dQ, from the Q (context) base
  SdpaTensorLayout key_value;  // K, V, dK, dV, from their own bases
  SdpaTensorLayout stats;      // logsumexp per query row (fp32), packed
  int64_t key_offset = 0;      // where K and V start in the qkv output
  int64_t value_offset = 0;
};

// FailedPrecondition when the shape has no such form: kv_blocks == 0 (Q
// serves as K and V) or head_batches not a multiple of kv_blocks.
inline StatusOr<SdpaLayout> SdpaLayoutFor(const AttentionShape& s) {
  if (s.kv_blocks <= 0 || s.head_batches % s.kv_blocks != 0 || s.seq <= 0 || s.head_dim <= 0) {
    return FailedPreconditionError(
        "attention shape without one K/V block per query group (" + std::to_string(s.head_batches) +
        " query blocks, " + std::to_string(s.kv_blocks) + " K/V blocks, sequence " +
        std::to_string(s.seq) + ", head dim " + std::to_string(s.head_dim) + ")");
  }
  const int64_t block = s.seq * s.head_dim, b = s.kv_blocks, h = s.head_batches / s.kv_blocks;
  SdpaLayout l;
  l.query = {{b, h, s.seq, s.head_dim}, {block, b * block, s.head_dim, 1}};
  l.key_value = {{b, 1, s.seq, s.head_dim}, {block, block, s.head_dim, 1}};
  // The statistics are the device's own (the executor only keeps them):
  // cuDNN's packed [batch, heads, seq, 1], the layout its examples use.
  l.stats = {{b, h, s.seq, 1}, {h * s.seq, s.seq, 1, 1}};
  l.key_offset = s.head_batches * block;
  l.value_offset = l.key_offset + s.kv_blocks * block;
  return l;
}

}  // namespace pacer::worker::gpu

#endif  // PACER_WORKER_GPU_SDPA_LAYOUT_H_
