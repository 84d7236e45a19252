#include "core/tiled_attention.h"

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

// The fp32 buffers a tile's GEMMs (TileGemmsFor) read and write; dP and dS
// share one scratch (dS is computed in place over dP). A null buffer is an
// operand this pass has none of.
struct TileBuffers {
  const float* qkv = nullptr;
  const float* dctx = nullptr;
  float* ctx = nullptr;
  float* dqkv = nullptr;
  float* probs = nullptr;
  float* probs_grad = nullptr;
};

const float* Read(const TileBuffers& b, TileOperand o) {
  switch (o) {
    case TileOperand::kQuery:
    case TileOperand::kKey:
    case TileOperand::kValue:
      return b.qkv;
    case TileOperand::kContextGrad:
      return b.dctx;
    case TileOperand::kProbs:
      return b.probs;
    case TileOperand::kProbsGrad:
    case TileOperand::kScoresGrad:
      return b.probs_grad;
    case TileOperand::kContext:
    case TileOperand::kQueryGrad:
    case TileOperand::kKeyGrad:
    case TileOperand::kValueGrad:
      break;
  }
  return nullptr;
}

float* Write(const TileBuffers& b, TileOperand o) {
  switch (o) {
    case TileOperand::kContext:
      return b.ctx;
    case TileOperand::kQueryGrad:
    case TileOperand::kKeyGrad:
    case TileOperand::kValueGrad:
      return b.dqkv;
    case TileOperand::kProbs:
      return b.probs;
    case TileOperand::kProbsGrad:
    case TileOperand::kScoresGrad:
      return b.probs_grad;
    case TileOperand::kQuery:
    case TileOperand::kKey:
    case TileOperand::kValue:
    case TileOperand::kContextGrad:
      break;
  }
  return nullptr;
}

// A forward pass's buffers: Q, K and V read, the context written, P in `probs`.
TileBuffers ForwardBuffers(const float* qkv, float* ctx, float* probs) {
  TileBuffers b;
  b.qkv = qkv;
  b.ctx = ctx;
  b.probs = probs;
  return b;
}

// A backward pass's buffers: Q, K, V and dC read, dQ, dK and dV
// accumulated, P and dP (dS in place over it).
TileBuffers BackwardBuffers(const float* qkv, const float* dctx, float* dqkv, float* probs,
                            float* probs_grad) {
  TileBuffers b;
  b.qkv = qkv;
  b.dctx = dctx;
  b.dqkv = dqkv;
  b.probs = probs;
  b.probs_grad = probs_grad;
  return b;
}

// What every GEMM of a pass reads and none writes: Q, K, V and, in a
// backward pass (dctx not null), dC.
std::vector<Device::ReadOnlyRegion> InputRegions(const AttentionShape& s, const float* qkv,
                                                 const float* dctx = nullptr) {
  std::vector<Device::ReadOnlyRegion> r = {{qkv, static_cast<size_t>(s.QkvElements())}};
  if (dctx != nullptr) r.push_back({dctx, static_cast<size_t>(s.CtxElements())});
  return r;
}

Status Run(Device* dev, const TileGemm& g, const TileBuffers& buffers, int64_t count) {
  const float* a = Read(buffers, g.a.operand);
  const float* b = Read(buffers, g.b.operand);
  float* c = Write(buffers, g.c.operand);
  if (a == nullptr || b == nullptr || c == nullptr) {
    return InternalError("tiled attention: a tile GEMM reads or writes an operand it has not");
  }
  return dev->BatchedGemm(g.trans_a, g.trans_b, g.m, g.n, g.k, 1.0f, a + g.a.offset, g.a.ld,
                          g.a.stride, b + g.b.offset, g.b.ld, g.b.stride, g.beta, c + g.c.offset,
                          g.c.ld, g.c.stride, count);
}

}  // namespace

Status TiledAttentionForward(Device* dev, const AttentionShape& s, const float* qkv, float* ctx,
                             const TiledAttentionOptions& o) {
  RETURN_IF_ERROR(CheckShape(s, o));
  const int64_t tile = LargestTileScores(s, o.tile_rows);
  const int64_t most = PairsPerCall(s, tile, o.max_scratch_bytes, sizeof(float));  // P
  DeviceBuffer p(dev, BufferClass::kWorkspace);
  RETURN_IF_ERROR(p.Assign(static_cast<size_t>(most * tile), Fill::kUndefined));
  // Q, K and V are read by every tile's GEMMs and written by none.
  return WithReadOnly(dev, InputRegions(s, qkv), [&] {
    const TileBuffers buffers = ForwardBuffers(qkv, ctx, p.data());
    return ForAttentionTiles(
        s, o.tile_rows, most, [&](const AttentionBatch& b, const AttentionTile& t) -> Status {
          const TileGemms g = TileGemmsFor(s, b, t);
          // S = Q_tile K^T, then P = softmax(S / sqrt(d)) in place; ctx_tile = P V.
          RETURN_IF_ERROR(Run(dev, g.scores, buffers, b.count));
          RETURN_IF_ERROR(
              dev->SoftmaxRows(p.data(), b.count * t.rows, t.keys, s.SoftmaxScale(), t.mask));
          return Run(dev, g.context, buffers, b.count);
        });
  });
}

Status TiledAttentionBackward(Device* dev, const AttentionShape& s, const float* qkv,
                              const float* dctx, float* dqkv, const TiledAttentionOptions& o) {
  RETURN_IF_ERROR(CheckShape(s, o));
  const int64_t tile = LargestTileScores(s, o.tile_rows);
  // The items of one call have distinct K/V heads (ForAttentionBatches), so
  // their dK and dV accumulations never collide.
  const int64_t most = PairsPerCall(s, tile, o.max_scratch_bytes, 2 * sizeof(float));  // P, dP
  DeviceBuffer p(dev, BufferClass::kWorkspace), dp(dev, BufferClass::kWorkspace);
  RETURN_IF_ERROR(p.Assign(static_cast<size_t>(most * tile), Fill::kUndefined));
  RETURN_IF_ERROR(dp.Assign(static_cast<size_t>(most * tile), Fill::kUndefined));
  // Q, K, V and dC are read by every tile's GEMMs and written by none.
  return WithReadOnly(dev, InputRegions(s, qkv, dctx), [&] {
    const TileBuffers buffers = BackwardBuffers(qkv, dctx, dqkv, p.data(), dp.data());
    return ForAttentionTiles(
        s, o.tile_rows, most, [&](const AttentionBatch& b, const AttentionTile& t) -> Status {
          const TileGemms g = TileGemmsFor(s, b, t);
          // Recompute the tile's probabilities: P = softmax(Q_tile K^T / sqrt(d)).
          RETURN_IF_ERROR(Run(dev, g.scores, buffers, b.count));
          RETURN_IF_ERROR(
              dev->SoftmaxRows(p.data(), b.count * t.rows, t.keys, s.SoftmaxScale(), t.mask));
          // context = P V: dV += P^T dC_tile, dP = dC_tile V^T.
          RETURN_IF_ERROR(Run(dev, g.value_grad, buffers, b.count));
          RETURN_IF_ERROR(Run(dev, g.probs_grad, buffers, b.count));
          // dS (the unscaled scores' gradient), in place over dP. Each row of
          // the tile holds every key the row sees, so the softmax's row sums
          // are exact; a masked key's P is 0, so is its dS.
          RETURN_IF_ERROR(dev->SoftmaxBackward(p.data(), dp.data(), b.count * t.rows, t.keys,
                                               s.SoftmaxScale()));
          // scores = Q K^T: dQ_tile += dS K, dK += dS^T Q_tile.
          RETURN_IF_ERROR(Run(dev, g.query_grad, buffers, b.count));
          return Run(dev, g.key_grad, buffers, b.count);
        });
  });
}

Status UnfusedAttentionForward(Device* dev, const AttentionShape& s, const float* qkv, float* probs,
                               float* ctx) {
  RETURN_IF_ERROR(CheckShape(s, TiledAttentionOptions{}));
  return WithReadOnly(dev, InputRegions(s, qkv), [&] {
    const TileBuffers buffers = ForwardBuffers(qkv, ctx, probs);
    const CausalRows mask = WholeSequenceTile(s).mask;
    return ForAttentionBatches(s, s.kv_heads, [&](const AttentionBatch& b) -> Status {
      const TileGemms g = StashedGemmsFor(s, b);
      // S = Q K^T into the batch's stash blocks, P = softmax(S / sqrt(d))
      // in place (masked: the scores above the diagonal are computed, then
      // get probability 0); ctx = P V.
      RETURN_IF_ERROR(Run(dev, g.scores, buffers, b.count));
      RETURN_IF_ERROR(dev->SoftmaxRows(probs + g.scores.c.offset, b.count * s.seq, s.seq,
                                       s.SoftmaxScale(), mask));
      return Run(dev, g.context, buffers, b.count);
    });
  });
}

Status UnfusedAttentionBackward(Device* dev, const AttentionShape& s, const float* qkv,
                                const float* probs, const float* dctx, float* dqkv,
                                size_t max_scratch_bytes) {
  RETURN_IF_ERROR(CheckShape(s, TiledAttentionOptions{}));
  const int64_t ss = s.seq * s.seq;
  // dP (dS in place) of at most the pairs the bound allows, one pair always.
  const int64_t most = PairsPerCall(s, ss, max_scratch_bytes, sizeof(float));
  DeviceBuffer dp(dev, BufferClass::kWorkspace);
  RETURN_IF_ERROR(dp.Assign(static_cast<size_t>(most * ss), Fill::kUndefined));
  // Q, K, V and dC are read by every batch's GEMMs and written by none. P
  // is not declared: each pair's block is read by one GEMM, so a device's
  // copy of it would save no conversion, and the CPU device would hash
  // the whole s x s stash twice to check the promise.
  return WithReadOnly(dev, InputRegions(s, qkv, dctx), [&] {
    // P only read: the backward runs no GEMM that writes it (g.scores).
    const TileBuffers buffers =
        BackwardBuffers(qkv, dctx, dqkv, const_cast<float*>(probs), dp.data());
    return ForAttentionBatches(s, most, [&](const AttentionBatch& b) -> Status {
      const TileGemms g = StashedGemmsFor(s, b);
      // context = P V: dV += P^T dC, dP = dC V^T.
      RETURN_IF_ERROR(Run(dev, g.value_grad, buffers, b.count));
      RETURN_IF_ERROR(Run(dev, g.probs_grad, buffers, b.count));
      // dS in place over dP; scores = Q K^T: dQ += dS K, dK += dS^T Q.
      RETURN_IF_ERROR(dev->SoftmaxBackward(probs + g.value_grad.a.offset, dp.data(),
                                           b.count * s.seq, s.seq, s.SoftmaxScale()));
      RETURN_IF_ERROR(Run(dev, g.query_grad, buffers, b.count));
      return Run(dev, g.key_grad, buffers, b.count);
    });
  });
}

}  // namespace pacer::worker
