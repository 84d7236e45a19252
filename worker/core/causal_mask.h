// The causal mask of the worker's attention (spec.model.causalAttention):
// query row r of a sequence attends to keys 0..r only. What the fused
// kernels skip (tiles of kAttentionTileRows query rows compute their rows'
// scores against the keys up to the tile's last row) and how a softmax
// call says which keys each of its rows sees (CausalRows). Shared by the
// executor's tiled attention, the devices and the step schedule's FLOPs, so
// the FLOPs a step issues and those it schedules agree by construction.
//
// Units: rows, keys and columns in elements; fractions of seq^2 scores.
// Thread-safety: pure values and functions.
#ifndef PACER_WORKER_CORE_CAUSAL_MASK_H_
#define PACER_WORKER_CORE_CAUSAL_MASK_H_

#include <algorithm>
#include <cstdint>

#include "core/host_device.h"

namespace pacer::worker {

// Query rows per tile of the fused kernels: the tiled attention's default,
// and the granularity at which every fused path skips masked work.
inline constexpr int64_t kAttentionTileRows = 128;

// The share of a seq x seq score matrix that tiles of `tile_rows` query
// rows compute under a causal mask: sum over tiles of rows x keys up to
// the tile's last row, over seq^2. (n + 1) / 2n for n whole tiles; 1 for
// a single tile.
inline double CausalScoreFraction(int64_t seq, int64_t tile_rows) {
  if (seq <= 0 || tile_rows <= 0) return 1.0;
  double scores = 0;
  for (int64_t t0 = 0; t0 < seq; t0 += tile_rows) {
    const int64_t rows = std::min(tile_rows, seq - t0);
    scores += static_cast<double>(rows) * static_cast<double>(t0 + rows);
  }
  return scores / (static_cast<double>(seq) * static_cast<double>(seq));
}

// The causal mask of a block of score rows: row i of a call holding
// rows_per_item rows for each of its items is query row first_row + i %
// rows_per_item of its sequence and sees keys 0 up to that row; its other
// columns get probability 0. rows_per_item 0: no mask.
struct CausalRows {
  int64_t first_row = 0;
  int64_t rows_per_item = 0;
  // Host and device: the GPU's softmax kernels call Keys per row.
  PACER_HD bool on() const { return rows_per_item > 0; }
  // Visible keys of row i (at most `cols`).
  PACER_HD int64_t Keys(int64_t i, int64_t cols) const {
    if (!on()) return cols;
    const int64_t keys = first_row + i % rows_per_item + 1;
    return keys < cols ? keys : cols;
  }
};

}  // namespace pacer::worker

#endif  // PACER_WORKER_CORE_CAUSAL_MASK_H_
