// SdpaLayoutFor: how the executor's attention buffers (AttentionShape,
// core/device.h: Megatron's qkv rows, query heads then K heads then V heads
// per token; the context one head_dim block per query head per token) read
// as cuDNN's SDPA tensors, [batch, heads, seq, dim] with free strides, so
// that cuDNN runs on them without a copy: batch = sequence, and cuDNN's
// grouped-query rule (query head j reads K/V head j / (heads / kv_heads))
// is the executor's. The logsumexp statistics, which only the device reads,
// are packed in cuDNN's own order. Pure arithmetic, kept apart from
// cudnn_attention.cc (which needs cuDNN) so that CI checks it on the CPU.
// Units: elements. Thread-safety: a pure function.
#ifndef PACER_WORKER_GPU_SDPA_LAYOUT_H_
#define PACER_WORKER_GPU_SDPA_LAYOUT_H_

#include <array>
#include <cstdint>
#include <string>

#include "core/attention_tiles.h"
#include "core/device.h"
#include "core/host_device.h"
#include "pacer/status.h"

namespace pacer::worker::gpu {

struct SdpaTensorLayout {
  std::array<int64_t, 4> dims{}, strides{};
};

struct SdpaLayout {
  SdpaTensorLayout query;      // Q and dQ, from the qkv base
  SdpaTensorLayout key_value;  // K, V, dK and dV, from their offsets below
  SdpaTensorLayout output;     // O and dO: the context's layout
  SdpaTensorLayout stats;      // logsumexp per query row (fp32), packed
  int64_t key_offset = 0;      // where K and V start in a qkv row
  int64_t value_offset = 0;
};

// FailedPrecondition for a shape AttentionShape::Valid refuses.
inline StatusOr<SdpaLayout> SdpaLayoutFor(const AttentionShape& s) {
  if (!s.Valid()) {
    return FailedPreconditionError(
        "attention shape without whole K/V groups (" + std::to_string(s.heads) +
        " query heads, " + std::to_string(s.kv_heads) + " K/V heads, " +
        std::to_string(s.sequences) + " sequences of " + std::to_string(s.seq) +
        ", head dim " + std::to_string(s.head_dim) + ")");
  }
  const int64_t w = s.qkv_ld(), c = s.ctx_ld(), d = s.head_dim;
  SdpaLayout l;
  l.query = {{s.sequences, s.heads, s.seq, d}, {s.seq * w, d, w, 1}};
  l.key_value = {{s.sequences, s.kv_heads, s.seq, d}, {s.seq * w, d, w, 1}};
  l.output = {{s.sequences, s.heads, s.seq, d}, {s.seq * c, d, c, 1}};
  l.stats = {{s.sequences, s.heads, s.seq, 1}, {s.heads * s.seq, s.seq, 1, 1}};
  l.key_offset = s.heads * d;
  l.value_offset = (s.heads + s.kv_heads) * d;
  return l;
}

// Where the rows of one AttentionBatch's scores (ForAttentionBatches:
// item i is pair first + i x group, seq query rows each, the items' rows
// one after another) find their logsumexp in the statistics (layout.stats:
// seq values per pair, in pair order): row r reads element
// offset + (r / rows_per_item) x item_stride + r % rows_per_item. What the
// GPU device's kernels that write or read the logsumexp index with
// (device_kernels.h: SoftmaxRowsBf16, ProbsFromLseBf16).
struct StatsRows {
  int64_t offset = 0, rows_per_item = 0, item_stride = 0;
  // Host and device: the kernels call it per row.
  PACER_HD int64_t Index(int64_t r) const {
    return offset + (r / rows_per_item) * item_stride + r % rows_per_item;
  }
  // The rows of one tile of the batch (ForAttentionTiles): query rows
  // [t.first_row, t.first_row + t.rows) of every item, t.rows per item.
  StatsRows Tile(const AttentionTile& t) const {
    return {offset + t.first_row, t.rows, item_stride};
  }
};
inline StatsRows StatsRowsFor(const AttentionShape& s, const AttentionBatch& b) {
  return {b.first * s.seq, s.seq, s.group() * s.seq};
}

}  // namespace pacer::worker::gpu

#endif  // PACER_WORKER_GPU_SDPA_LAYOUT_H_
