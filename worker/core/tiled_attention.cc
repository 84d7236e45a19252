#include "core/tiled_attention.h"

#include <algorithm>
#include <cmath>

namespace pacer::worker {
namespace {

using KeyValue = AttentionKeyValue;

Status CheckShape(const AttentionShape& s, const TiledAttentionOptions& o) {
  if (s.seq <= 0 || s.head_dim <= 0 || s.head_batches <= 0 || s.kv_blocks < 0 || o.tile_rows <= 0) {
    return InternalError("tiled attention: an empty or negative shape");
  }
  return Status::Ok();
}

// Pairs per batched call: within `round` consecutive pairs (which read
// consecutive K/V blocks), as many tiles of `tile_floats` each as
// `tiles_per_pair` x that fits in the scratch bound, at least one.
int64_t GroupSize(int64_t round, int64_t tile_floats, int64_t tiles_per_pair,
                  const TiledAttentionOptions& o) {
  const int64_t fit =
      static_cast<int64_t>(o.max_scratch_bytes / sizeof(float)) / (tiles_per_pair * tile_floats);
  return std::max<int64_t>(1, std::min(round, fit));
}

// Runs body(i0, count, kv) over groups of at most `group` pairs, never
// across a round of `round` pairs.
template <typename Body>
Status ForGroups(const AttentionShape& s, int64_t round, int64_t group, Body&& body) {
  for (int64_t r0 = 0; r0 < s.head_batches; r0 += round) {
    const int64_t round_end = std::min(r0 + round, s.head_batches);
    for (int64_t i0 = r0; i0 < round_end; i0 += group) {
      RETURN_IF_ERROR(body(i0, std::min(group, round_end - i0), s.KeyValueAt(i0)));
    }
  }
  return Status::Ok();
}

float Scale(const AttentionShape& s) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
}

}  // namespace

Status TiledAttentionForward(Device* dev, const AttentionShape& s, const float* qkv, float* ctx,
                             const TiledAttentionOptions& o) {
  RETURN_IF_ERROR(CheckShape(s, o));
  const int64_t block = s.seq * s.head_dim, d = s.head_dim;
  const int64_t rows = std::min(o.tile_rows, s.seq);
  const int64_t tile = rows * s.seq;  // scores of one pair's tile
  // Forward writes only ctx (one block per pair): any pairs may share a
  // call, as long as their K/V blocks are consecutive.
  const int64_t round = s.kv_blocks > 0 ? s.kv_blocks : s.head_batches;
  const int64_t group = GroupSize(round, tile, 1, o);  // P
  DeviceBuffer p(dev, BufferClass::kWorkspace);
  RETURN_IF_ERROR(p.Assign(static_cast<size_t>(group * tile), Fill::kUndefined));
  return ForGroups(s, round, group, [&](int64_t i0, int64_t count, const KeyValue& kv) -> Status {
    for (int64_t t0 = 0; t0 < s.seq; t0 += rows) {
      const int64_t tr = std::min(rows, s.seq - t0);
      const float* q = qkv + i0 * block + t0 * d;
      // S = Q_tile K^T, then P = softmax(S / sqrt(d)) in place.
      RETURN_IF_ERROR(dev->BatchedGemm(false, true, tr, s.seq, d, 1.0f, q, d, block, qkv + kv.k, d,
                                       kv.stride, 0.0f, p.data(), s.seq, tr * s.seq, count));
      RETURN_IF_ERROR(dev->SoftmaxRows(p.data(), count * tr, s.seq, Scale(s)));
      // ctx_tile = P V.
      RETURN_IF_ERROR(dev->BatchedGemm(false, false, tr, d, s.seq, 1.0f, p.data(), s.seq,
                                       tr * s.seq, qkv + kv.v, d, kv.stride, 0.0f,
                                       ctx + i0 * block + t0 * d, d, block, count));
    }
    return Status::Ok();
  });
}

Status TiledAttentionBackward(Device* dev, const AttentionShape& s, const float* qkv,
                              const float* dctx, float* dqkv, const TiledAttentionOptions& o) {
  RETURN_IF_ERROR(CheckShape(s, o));
  const int64_t block = s.seq * s.head_dim, d = s.head_dim;
  const int64_t rows = std::min(o.tile_rows, s.seq);
  const int64_t tile = rows * s.seq;
  // Backward accumulates into dK and dV: the pairs of one call need
  // distinct K/V blocks (with kv_blocks == 0 all share block 0: one pair).
  const int64_t round = s.kv_blocks > 0 ? s.kv_blocks : 1;
  const int64_t group = GroupSize(round, tile, 2, o);  // P and dP
  DeviceBuffer p(dev, BufferClass::kWorkspace), dp(dev, BufferClass::kWorkspace);
  RETURN_IF_ERROR(p.Assign(static_cast<size_t>(group * tile), Fill::kUndefined));
  RETURN_IF_ERROR(dp.Assign(static_cast<size_t>(group * tile), Fill::kUndefined));
  return ForGroups(s, round, group, [&](int64_t i0, int64_t count, const KeyValue& kv) -> Status {
    for (int64_t t0 = 0; t0 < s.seq; t0 += rows) {
      const int64_t tr = std::min(rows, s.seq - t0);
      const int64_t stride_p = tr * s.seq;
      const float* q = qkv + i0 * block + t0 * d;
      const float* dc = dctx + i0 * block + t0 * d;
      // Recompute the tile's probabilities: P = softmax(Q_tile K^T / sqrt(d)).
      RETURN_IF_ERROR(dev->BatchedGemm(false, true, tr, s.seq, d, 1.0f, q, d, block, qkv + kv.k, d,
                                       kv.stride, 0.0f, p.data(), s.seq, stride_p, count));
      RETURN_IF_ERROR(dev->SoftmaxRows(p.data(), count * tr, s.seq, Scale(s)));
      // context = P V: dV += P^T dC_tile, dP = dC_tile V^T.
      RETURN_IF_ERROR(dev->BatchedGemm(true, false, s.seq, d, tr, 1.0f, p.data(), s.seq, stride_p,
                                       dc, d, block, 1.0f, dqkv + kv.v, d, kv.stride, count));
      RETURN_IF_ERROR(dev->BatchedGemm(false, true, tr, s.seq, d, 1.0f, dc, d, block, qkv + kv.v, d,
                                       kv.stride, 0.0f, dp.data(), s.seq, stride_p, count));
      // dS (the unscaled scores' gradient), in place over dP. Each row of
      // the tile is a whole row of the s x s matrix, so the softmax's
      // row sums are exact.
      RETURN_IF_ERROR(dev->SoftmaxBackward(p.data(), dp.data(), count * tr, s.seq, Scale(s)));
      // scores = Q K^T: dQ_tile += dS K, dK += dS^T Q_tile.
      RETURN_IF_ERROR(dev->BatchedGemm(false, false, tr, d, s.seq, 1.0f, dp.data(), s.seq, stride_p,
                                       qkv + kv.k, d, kv.stride, 1.0f, dqkv + i0 * block + t0 * d,
                                       d, block, count));
      RETURN_IF_ERROR(dev->BatchedGemm(true, false, s.seq, d, tr, 1.0f, dp.data(), s.seq, stride_p,
                                       q, d, block, 1.0f, dqkv + kv.k, d, kv.stride, count));
    }
    return Status::Ok();
  });
}

}  // namespace pacer::worker
