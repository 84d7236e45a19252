// How a fused attention path walks one layer's attention: batches of
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

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_ATTENTION_TILES_H_
