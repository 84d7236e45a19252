#include "core/tiled_attention.h"

#include <algorithm>
#include <cmath>

namespace pacer::worker {
namespace {

// K and V of pair i0, and their stride between consecutive pairs (0 when
// every pair reads block 0: kv_blocks == 0).
struct KeyValue {
  int64_t k = 0, v = 0, stride = 0;
};

KeyValue KeyValueOf(const AttentionShape& s, int64_t i0) {
  const int64_t block = s.seq * s.head_dim;
  if (s.kv_blocks == 0) return {0, 0, 0};
  const int64_t q_elems = s.head_batches * block;
  const int64_t kv = i0 % s.kv_blocks;
  return {q_elems + kv * block, q_elems + (s.kv_blocks + kv) * block, block};
}

Status CheckShape(const AttentionShape& s, const TiledAttentionOptions& o) {
  if (s.seq <= 0 || s.head_dim <= 0 || s.head_batches <= 0 || s.kv_blocks < 0 || o.tile_rows <= 0) {
    return InternalError("tiled attention: an empty or negative shape");
  }
  return Status::Ok();
}

// Runs body(i0, count, kv) over groups of pairs that one batched call may
// take: within `round` consecutive pairs (which read consecutive K/V
// blocks), at most `fit`.
template <typename Body>
Status ForGroups(const AttentionShape& s, int64_t round, int64_t fit, Body&& body) {
  const int64_t group = std::max<int64_t>(1, std::min(round, fit));
  for (int64_t r0 = 0; r0 < s.head_batches; r0 += round) {
    const int64_t round_end = std::min(r0 + round, s.head_batches);
    for (int64_t i0 = r0; i0 < round_end; i0 += group) {
      RETURN_IF_ERROR(body(i0, std::min(group, round_end - i0), KeyValueOf(s, i0)));
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
  const int64_t fit = static_cast<int64_t>(o.max_scratch_bytes / sizeof(float)) / tile;
  const int64_t group = std::max<int64_t>(1, std::min(round, fit));
  DeviceBuffer p(dev, BufferClass::kWorkspace);
  RETURN_IF_ERROR(p.Assign(static_cast<size_t>(group * tile), Fill::kUndefined));
  return ForGroups(s, round, fit, [&](int64_t i0, int64_t count, const KeyValue& kv) -> Status {
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
  const int64_t fit = static_cast<int64_t>(o.max_scratch_bytes / sizeof(float)) / (2 * tile);
  const int64_t group = std::max<int64_t>(1, std::min(round, fit));
  DeviceBuffer p(dev, BufferClass::kWorkspace), dp(dev, BufferClass::kWorkspace);
  RETURN_IF_ERROR(p.Assign(static_cast<size_t>(group * tile), Fill::kUndefined));
  RETURN_IF_ERROR(dp.Assign(static_cast<size_t>(group * tile), Fill::kUndefined));
  return ForGroups(s, round, fit, [&](int64_t i0, int64_t count, const KeyValue& kv) -> Status {
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
