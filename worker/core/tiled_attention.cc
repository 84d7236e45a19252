#include "core/tiled_attention.h"

#include <cmath>
#include <vector>

#include "core/attention_tiles.h"

namespace pacer::worker {
namespace {

Status CheckShape(const AttentionShape& s, const TiledAttentionOptions& o) {
  if (!s.Valid() || o.tile_rows <= 0) {
    return InternalError("tiled attention: an empty, negative or ungrouped shape");
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
  const int64_t d = s.head_dim, w = s.qkv_ld(), c = s.ctx_ld();
  const int64_t tile = LargestTileScores(s, o.tile_rows);
  const int64_t most = PairsPerCall(s, tile, o.max_scratch_bytes, sizeof(float));  // P
  DeviceBuffer p(dev, BufferClass::kWorkspace);
  RETURN_IF_ERROR(p.Assign(static_cast<size_t>(most * tile), Fill::kUndefined));
  // Q, K and V are read by every tile's GEMMs and written by none.
  const std::vector<Device::ReadOnlyRegion> read_only = {
      {qkv, static_cast<size_t>(s.QkvElements())}};
  return WithReadOnly(dev, read_only, [&] {
    return ForAttentionTiles(
        s, o.tile_rows, most, [&](const AttentionBatch& b, const AttentionTile& t) -> Status {
          const int64_t tr = t.rows, keys = t.keys;  // the tile's scores: tr x keys
          const float* q = qkv + s.Q(b.first) + t.first_row * w;
          // S = Q_tile K^T, then P = softmax(S / sqrt(d)) in place.
          RETURN_IF_ERROR(dev->BatchedGemm(false, true, tr, keys, d, 1.0f, q, w, b.q_stride,
                                           qkv + s.K(b.first), w, b.kv_stride, 0.0f, p.data(), keys,
                                           tr * keys, b.count));
          RETURN_IF_ERROR(dev->SoftmaxRows(p.data(), b.count * tr, keys, Scale(s), t.mask));
          // ctx_tile = P V.
          return dev->BatchedGemm(false, false, tr, d, keys, 1.0f, p.data(), keys, tr * keys,
                                  qkv + s.V(b.first), w, b.kv_stride, 0.0f,
                                  ctx + s.Ctx(b.first) + t.first_row * c, c, b.q_stride, b.count);
        });
  });
}

Status TiledAttentionBackward(Device* dev, const AttentionShape& s, const float* qkv,
                              const float* dctx, float* dqkv, const TiledAttentionOptions& o) {
  RETURN_IF_ERROR(CheckShape(s, o));
  const int64_t d = s.head_dim, w = s.qkv_ld(), c = s.ctx_ld();
  const int64_t tile = LargestTileScores(s, o.tile_rows);
  // The items of one call have distinct K/V heads (ForAttentionBatches), so
  // their dK and dV accumulations never collide.
  const int64_t most = PairsPerCall(s, tile, o.max_scratch_bytes, 2 * sizeof(float));  // P, dP
  DeviceBuffer p(dev, BufferClass::kWorkspace), dp(dev, BufferClass::kWorkspace);
  RETURN_IF_ERROR(p.Assign(static_cast<size_t>(most * tile), Fill::kUndefined));
  RETURN_IF_ERROR(dp.Assign(static_cast<size_t>(most * tile), Fill::kUndefined));
  // Q, K, V and dC are read by every tile's GEMMs and written by none.
  const std::vector<Device::ReadOnlyRegion> read_only = {
      {qkv, static_cast<size_t>(s.QkvElements())}, {dctx, static_cast<size_t>(s.CtxElements())}};
  return WithReadOnly(dev, read_only, [&] {
    return ForAttentionTiles(
        s, o.tile_rows, most, [&](const AttentionBatch& b, const AttentionTile& t) -> Status {
          const int64_t tr = t.rows, keys = t.keys, stride_p = tr * keys;
          const float* k = qkv + s.K(b.first);
          const float* v = qkv + s.V(b.first);
          const float* q = qkv + s.Q(b.first) + t.first_row * w;
          const float* dc = dctx + s.Ctx(b.first) + t.first_row * c;
          // Recompute the tile's probabilities: P = softmax(Q_tile K^T / sqrt(d)).
          RETURN_IF_ERROR(dev->BatchedGemm(false, true, tr, keys, d, 1.0f, q, w, b.q_stride, k, w,
                                           b.kv_stride, 0.0f, p.data(), keys, stride_p, b.count));
          RETURN_IF_ERROR(dev->SoftmaxRows(p.data(), b.count * tr, keys, Scale(s), t.mask));
          // context = P V: dV += P^T dC_tile, dP = dC_tile V^T (the keys
          // beyond the tile's last row get no gradient from it).
          RETURN_IF_ERROR(dev->BatchedGemm(true, false, keys, d, tr, 1.0f, p.data(), keys, stride_p,
                                           dc, c, b.q_stride, 1.0f, dqkv + s.V(b.first), w,
                                           b.kv_stride, b.count));
          RETURN_IF_ERROR(dev->BatchedGemm(false, true, tr, keys, d, 1.0f, dc, c, b.q_stride, v, w,
                                           b.kv_stride, 0.0f, dp.data(), keys, stride_p, b.count));
          // dS (the unscaled scores' gradient), in place over dP. Each row of
          // the tile holds every key the row sees, so the softmax's row sums
          // are exact; a masked key's P is 0, so is its dS.
          RETURN_IF_ERROR(dev->SoftmaxBackward(p.data(), dp.data(), b.count * tr, keys, Scale(s)));
          // scores = Q K^T: dQ_tile += dS K, dK += dS^T Q_tile.
          RETURN_IF_ERROR(dev->BatchedGemm(
              false, false, tr, d, keys, 1.0f, dp.data(), keys, stride_p, k, w, b.kv_stride, 1.0f,
              dqkv + s.Q(b.first) + t.first_row * w, w, b.q_stride, b.count));
          return dev->BatchedGemm(true, false, keys, d, tr, 1.0f, dp.data(), keys, stride_p, q, w,
                                  b.q_stride, 1.0f, dqkv + s.K(b.first), w, b.kv_stride, b.count);
        });
  });
}

}  // namespace pacer::worker
