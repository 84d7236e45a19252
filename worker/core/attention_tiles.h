// How the attention paths walk one layer's attention: batches of
// (sequence, head) pairs (ForAttentionBatches) as large as a scratch bound
// allows, and in each batch tiles of query rows, each against the keys its
// rows see (all of them, or under a causal mask those up to the tile's last
// row). Written once so that the executor's tiled attention
// (tiled_attention.h), which the CPU device runs in CI, and the GPU
// device's own bf16 causal tiles visit the same tiles with the same keys
// and masks, and the FLOPs they issue are the step schedule's
// (AttentionShape::ScoreFraction).
//
// Units: rows, keys and scores in elements; scratch in bytes.
// Thread-safety: pure functions; ForAttentionTiles runs its body on the
// calling thread.
#ifndef PACER_WORKER_CORE_ATTENTION_TILES_H_
#define PACER_WORKER_CORE_ATTENTION_TILES_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/causal_mask.h"
#include "core/device.h"
#include "pacer/status.h"

namespace pacer::worker {

// Query rows [first_row, first_row + rows) of every item of a batch,
// against keys [0, keys): each item's scores are rows x keys; `mask` is the
// softmax's mask for those rows (none without a causal mask).
struct AttentionTile {
  int64_t first_row = 0;
  int64_t rows = 0;
  int64_t keys = 0;
  CausalRows mask;
};

// Scores of the largest tile of one pair: min(tile_rows, seq) x seq.
inline int64_t LargestTileScores(const AttentionShape& s, int64_t tile_rows) {
  return std::min(tile_rows, s.seq) * s.seq;
}

// Pairs per batched call when each pair takes `scores_per_pair` scores of
// `bytes_per_score` bytes and a call's scratch holds at most `scratch_bytes`:
// at least 1 (one pair's scratch is always allowed, whatever the bound) and
// at most one pair per K/V head (ForAttentionBatches' constant strides).
inline int64_t PairsPerCall(const AttentionShape& s, int64_t scores_per_pair, size_t scratch_bytes,
                            size_t bytes_per_score) {
  if (scores_per_pair <= 0 || bytes_per_score == 0) return 1;
  const int64_t fit = static_cast<int64_t>(scratch_bytes / bytes_per_score) / scores_per_pair;
  return std::max<int64_t>(1, std::min(fit, s.kv_heads));
}

// Runs body(batch, tile) over every tile of `tile_rows` query rows (the
// last one shorter when tile_rows does not divide seq) of every batch of
// at most `max_count` pairs, batch by batch and within a batch tile by
// tile from the first query row. tile_rows must be positive.
template <typename Body>
Status ForAttentionTiles(const AttentionShape& s, int64_t tile_rows, int64_t max_count,
                         Body&& body) {
  if (tile_rows <= 0) return InternalError("attention tiles of no query rows");
  const int64_t rows = std::min(tile_rows, s.seq);
  return ForAttentionBatches(s, max_count, [&](const AttentionBatch& b) -> Status {
    for (int64_t t0 = 0; t0 < s.seq; t0 += rows) {
      AttentionTile tile;
      tile.first_row = t0;
      tile.rows = std::min(rows, s.seq - t0);
      tile.keys = s.KeysFor(t0, tile.rows);
      tile.mask = s.MaskFor(t0, tile.rows);
      RETURN_IF_ERROR(body(b, tile));
    }
    return Status::Ok();
  });
}

// The matrix products of one tile, described once for every device that
// runs tiles (the tiled path over Device::BatchedGemm, the GPU's bf16
// causal tiles over cuBLAS) and for the unfused path (one whole-sequence
// tile, StashedGemmsFor below): which operand, where it starts, its leading
// dimension and the stride between a batch's items, in elements of that
// operand's buffer. Q, K, V live in the qkv buffer (and dQ, dK, dV at the
// same offsets in its gradient), the context and dC in the context's; the
// tile's scores are a scratch of `rows x keys` per item (P, in the
// unfused path, the stash). A device maps
// each operand to its own storage (fp32 or bf16; dP and dS one buffer on
// the tiled path, two on the GPU).
enum class TileOperand {
  kQuery,        // Q rows of the tile (qkv)
  kKey,          // K of the sequence (qkv)
  kValue,        // V of the sequence (qkv)
  kContext,      // the tile's context rows (output of the forward)
  kContextGrad,  // dC rows of the tile
  kProbs,        // S = Q K^T, then P in place (scratch; the unfused path's stash)
  kProbsGrad,    // dP = dC V^T (scratch)
  kScoresGrad,   // dS, the softmax's backward of dP (scratch)
  kQueryGrad,    // dQ rows of the tile (qkv gradient)
  kKeyGrad,      // dK of the sequence (qkv gradient)
  kValueGrad,    // dV of the sequence (qkv gradient)
};

struct TileMatrix {
  TileOperand operand = TileOperand::kQuery;
  int64_t offset = 0;  // of the batch's first item
  int64_t ld = 0;
  int64_t stride = 0;  // between items
};

// c = op(a) op(b) + beta c, row-major, for each of the batch's items.
struct TileGemm {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  TileMatrix a, b;
  float beta = 0;
  TileMatrix c;
};

// The tile's GEMMs for batch `b`, in the order they run:
//   forward:  S = Q K^T; (softmax in place: P); context = P V
//   backward: S = Q K^T; (P from S); dV += P^T dC; dP = dC V^T;
//             (dS from P and dP); dQ += dS K; dK += dS^T Q
struct TileGemms {
  TileGemm scores, context, value_grad, probs_grad, query_grad, key_grad;
};

inline TileGemms TileGemmsFor(const AttentionShape& s, const AttentionBatch& b,
                              const AttentionTile& t) {
  const int64_t d = s.head_dim, w = s.qkv_ld(), c = s.ctx_ld();
  const int64_t tr = t.rows, keys = t.keys, per_item = tr * keys;
  const TileMatrix q{TileOperand::kQuery, s.Q(b.first) + t.first_row * w, w, b.q_stride};
  const TileMatrix k{TileOperand::kKey, s.K(b.first), w, b.kv_stride};
  const TileMatrix v{TileOperand::kValue, s.V(b.first), w, b.kv_stride};
  const TileMatrix ctx{TileOperand::kContext, s.Ctx(b.first) + t.first_row * c, c, b.q_stride};
  const TileMatrix dc{TileOperand::kContextGrad, ctx.offset, c, b.q_stride};
  const TileMatrix p{TileOperand::kProbs, 0, keys, per_item};
  const TileMatrix dp{TileOperand::kProbsGrad, 0, keys, per_item};
  const TileMatrix ds{TileOperand::kScoresGrad, 0, keys, per_item};
  const TileMatrix dq{TileOperand::kQueryGrad, q.offset, w, b.q_stride};
  const TileMatrix dk{TileOperand::kKeyGrad, k.offset, w, b.kv_stride};
  const TileMatrix dv{TileOperand::kValueGrad, v.offset, w, b.kv_stride};
  TileGemms g;
  g.scores = {false, true, tr, keys, d, q, k, 0.0f, p};
  g.context = {false, false, tr, d, keys, p, v, 0.0f, ctx};
  // The keys beyond the tile's last row get no gradient from it.
  g.value_grad = {true, false, keys, d, tr, p, dc, 1.0f, dv};
  g.probs_grad = {false, true, tr, keys, d, dc, v, 0.0f, dp};
  g.query_grad = {false, false, tr, d, keys, ds, k, 1.0f, dq};
  g.key_grad = {true, false, keys, d, tr, ds, q, 1.0f, dk};
  return g;
}

// The unfused attention (Device::AttentionForward, a plan's `attention:
// unfused`) is one tile per pair holding every query row against every
// key: the whole s x s matrix, masked in the softmax only (so it computes
// the scores above the diagonal too, as an unfused kernel does).
inline AttentionTile WholeSequenceTile(const AttentionShape& s) {
  AttentionTile t;
  t.rows = s.seq;
  t.keys = s.seq;
  t.mask = s.MaskFor(0, s.seq);
  return t;
}

// The unfused attention's GEMMs for batch `b`: those of the whole-sequence
// tile, with P kept from the forward to the backward pass in the stash
// (AttentionShape::ProbsElements, each pair's s x s block at its slot, so
// a batch's blocks lie side by side whatever the batch size); dP and dS in
// a scratch of b.count blocks, as the tiles'.
inline TileGemms StashedGemmsFor(const AttentionShape& s, const AttentionBatch& b) {
  TileGemms g = TileGemmsFor(s, b, WholeSequenceTile(s));
  const int64_t at = b.slot * s.seq * s.seq;
  for (TileGemm* x :
       {&g.scores, &g.context, &g.value_grad, &g.probs_grad, &g.query_grad, &g.key_grad}) {
    for (TileMatrix* m : {&x->a, &x->b, &x->c}) {
      if (m->operand == TileOperand::kProbs) m->offset += at;
    }
  }
  return g;
}

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_ATTENTION_TILES_H_
