// The strides cuDNN's SDPA reads the executor's attention buffers with
// (gpu/sdpa_layout.h): every element cuDNN addresses as [sequence, head,
// row, column] of Q, K, V and the output must be the element the executor
// puts there for that pair (AttentionShape::Q / K / V / Ctx, core/device.h),
// with cuDNN's grouped-query rule (query head h reads K/V head
// h / (heads / kv_heads)) choosing the executor's K/V head, and the
// statistics must fill the executor's RowElements() floats exactly once
// each. Checked here on the CPU because the GPU path itself runs only on a
// GPU.
#include "gpu/sdpa_layout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

#include "core/attention_tiles.h"
#include "gpu/gpu_device.h"

namespace pacer::worker::gpu {
namespace {

int64_t Offset(const SdpaTensorLayout& t, int64_t b, int64_t h, int64_t r, int64_t c) {
  return b * t.strides[0] + h * t.strides[1] + r * t.strides[2] + c * t.strides[3];
}

TEST(SdpaLayoutTest, CudnnIndicesAddressTheExecutorsPairLayout) {
  // seq, head_dim, sequences, heads, kv_heads: multi-head, grouped-query
  // (groups of 4 and 2), one K/V head for all.
  for (const AttentionShape s : {AttentionShape{6, 4, 2, 3, 3}, AttentionShape{5, 8, 2, 8, 2},
                                 AttentionShape{3, 2, 3, 4, 2}, AttentionShape{4, 2, 1, 4, 1}}) {
    const std::string what = std::to_string(s.heads) + " query heads, " +
                             std::to_string(s.kv_heads) + " K/V heads";
    const StatusOr<SdpaLayout> l = SdpaLayoutFor(s);
    ASSERT_TRUE(l.ok()) << what << ": " << l.status().ToString();
    ASSERT_EQ(l->query.dims[0], s.sequences) << what;
    ASSERT_EQ(l->query.dims[1], s.heads) << what;
    ASSERT_EQ(l->key_value.dims[1], s.kv_heads) << what;
    ASSERT_EQ(l->stats.dims[3], 1) << what;
    const int64_t group = l->query.dims[1] / l->key_value.dims[1];  // cuDNN's rule
    std::set<int64_t> stats_seen;
    for (int64_t b = 0; b < s.sequences; ++b) {
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t pair = b * s.heads + h;
        for (int64_t r = 0; r < s.seq; ++r) {
          stats_seen.insert(Offset(l->stats, b, h, r, 0));
          for (int64_t c = 0; c < s.head_dim; ++c) {
            const std::string at = what + " [" + std::to_string(b) + "," + std::to_string(h) +
                                   "," + std::to_string(r) + "," + std::to_string(c) + "]";
            ASSERT_EQ(Offset(l->query, b, h, r, c), s.Q(pair) + r * s.qkv_ld() + c) << at;
            ASSERT_EQ(l->key_offset + Offset(l->key_value, b, h / group, r, c),
                      s.K(pair) + r * s.qkv_ld() + c)
                << at;
            ASSERT_EQ(l->value_offset + Offset(l->key_value, b, h / group, r, c),
                      s.V(pair) + r * s.qkv_ld() + c)
                << at;
            ASSERT_EQ(Offset(l->output, b, h, r, c), s.Ctx(pair) + r * s.ctx_ld() + c) << at;
          }
        }
      }
    }
    ASSERT_EQ(static_cast<int64_t>(stats_seen.size()), s.RowElements()) << what;
    EXPECT_EQ(*stats_seen.begin(), 0) << what;
    EXPECT_EQ(*stats_seen.rbegin(), s.RowElements() - 1) << what;
  }
}

// The backward on recomputed probabilities reads row r of a batch's
// scores' logsumexp at StatsRowsFor(...).Index(r): that must be the
// statistics element cuDNN wrote for the same pair and query row, the pair
// being the one whose Q the batch's GEMMs read for that item
// (AttentionBatch: Q of item i at Q(first) + i x q_stride), for every
// batch size ForAttentionBatches is asked for; and the batches together
// read every statistics element once.
TEST(SdpaLayoutTest, BatchRowsFindTheirPairsStatistics) {
  for (const AttentionShape s : {AttentionShape{6, 4, 2, 3, 3}, AttentionShape{5, 8, 2, 8, 2},
                                 AttentionShape{3, 2, 3, 4, 2}, AttentionShape{4, 2, 1, 4, 1}}) {
    const StatusOr<SdpaLayout> l = SdpaLayoutFor(s);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    for (int64_t most = 1; most <= s.kv_heads + 1; ++most) {
      const std::string what = std::to_string(s.heads) + " query heads, " +
                               std::to_string(s.kv_heads) + " K/V heads, batches of " +
                               std::to_string(most);
      std::set<int64_t> read;
      const Status visited = ForAttentionBatches(s, most, [&](const AttentionBatch& b) {
        const StatsRows rows = StatsRowsFor(s, b);
        for (int64_t i = 0; i < b.count; ++i) {
          // The pair whose Q this item's GEMMs read.
          int64_t pair = -1;
          for (int64_t p = 0; p < s.pairs(); ++p) {
            if (s.Q(p) == s.Q(b.first) + i * b.q_stride) pair = p;
          }
          EXPECT_GE(pair, 0) << what;
          const int64_t seq_index = pair / s.heads, head = pair % s.heads;
          for (int64_t r = 0; r < s.seq; ++r) {
            const int64_t index = rows.Index(i * s.seq + r);
            EXPECT_EQ(index, Offset(l->stats, seq_index, head, r, 0))
                << what << ", item " << i << ", row " << r;
            EXPECT_TRUE(read.insert(index).second) << what << ": element " << index << " twice";
          }
        }
        return Status::Ok();
      });
      ASSERT_TRUE(visited.ok());
      EXPECT_EQ(static_cast<int64_t>(read.size()), s.RowElements()) << what;
    }
  }
}

// The causal tiles' softmax writes, and their backward reads, row i of a
// tile call's scores' logsumexp at StatsRowsFor(s, b).Tile(tile).Index(i)
// (gpu_device.cu, CausalAttentionForwardBf16 / BackwardBf16, and the
// kernels of device_kernels.cu index with exactly that function): it must
// be the statistics element of the pair whose Q the item's GEMMs read and
// of the tile's query row, and the tiles of all batches together must
// write every element once, for any tile size and batch size.
TEST(SdpaLayoutTest, TileRowsFindTheirPairsStatistics) {
  for (AttentionShape s : {AttentionShape{6, 4, 2, 3, 3}, AttentionShape{5, 8, 2, 8, 2},
                           AttentionShape{7, 2, 1, 4, 1}}) {
    s.causal = true;
    const StatusOr<SdpaLayout> l = SdpaLayoutFor(s);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    for (int64_t tile_rows = 1; tile_rows <= s.seq + 1; ++tile_rows) {
      for (int64_t most = 1; most <= s.kv_heads; ++most) {
        const std::string what = "seq " + std::to_string(s.seq) + ", tiles of " +
                                 std::to_string(tile_rows) + ", batches of " + std::to_string(most);
        std::set<int64_t> written;
        const Status walked = ForAttentionTiles(
            s, tile_rows, most, [&](const AttentionBatch& b, const AttentionTile& t) {
              const StatsRows rows = StatsRowsFor(s, b).Tile(t);
              for (int64_t i = 0; i < b.count; ++i) {
                const int64_t pair = b.first + i * s.group();
                EXPECT_EQ(s.Q(pair), s.Q(b.first) + i * b.q_stride) << what;
                for (int64_t r = 0; r < t.rows; ++r) {
                  const int64_t index = rows.Index(i * t.rows + r);
                  EXPECT_EQ(index,
                            Offset(l->stats, pair / s.heads, pair % s.heads, t.first_row + r, 0))
                      << what << ", item " << i << ", tile row " << r;
                  EXPECT_TRUE(written.insert(index).second) << what << ": " << index << " twice";
                }
              }
              return Status::Ok();
            });
        ASSERT_TRUE(walked.ok()) << walked.ToString();
        EXPECT_EQ(static_cast<int64_t>(written.size()), s.RowElements()) << what;
      }
    }
  }
}

// The recomputed backward runs only where one whole pair's scores at 8
// bytes each fit the attention scratch, so its scratch never grows past
// the bound (the fused plan's memory model has no s x s buffer); longer
// sequences take the tiled backward. The 7B-shaped jobs (sequence 2048)
// and 4096 run it; 8192 and 32768 do not.
TEST(SdpaLayoutTest, RecomputedBackwardRunsOnlyWithinTheScratchBound) {
  for (int64_t seq : {1, 128, 2048, 4096, 5000, 5792, 5793, 6000, 8192, 32768}) {
    const double one_pair_bytes =
        static_cast<double>(seq) * static_cast<double>(seq) * kRecomputedBackwardBytesPerScore;
    if (RecomputedBackwardFits(seq)) {
      EXPECT_LE(one_pair_bytes, static_cast<double>(kAttentionScratchBytes)) << seq;
    } else {
      EXPECT_GT(one_pair_bytes, static_cast<double>(kAttentionScratchBytes)) << seq;
    }
  }
  EXPECT_TRUE(RecomputedBackwardFits(2048));
  EXPECT_TRUE(RecomputedBackwardFits(4096));
  EXPECT_FALSE(RecomputedBackwardFits(8192));
  EXPECT_FALSE(RecomputedBackwardFits(32768));
  EXPECT_FALSE(RecomputedBackwardFits(0));
}

// Every element of the qkv and context buffers belongs to exactly one
// tensor element of one pair: the pairs' Q, K and V cover qkv whole.
TEST(SdpaLayoutTest, ThePairsCoverTheQkvRowsOnce) {
  const AttentionShape s{3, 2, 2, 4, 2};
  std::set<int64_t> q, kv;
  for (int64_t i = 0; i < s.pairs(); ++i) {
    for (int64_t r = 0; r < s.seq; ++r) {
      for (int64_t c = 0; c < s.head_dim; ++c) {
        EXPECT_TRUE(q.insert(s.Q(i) + r * s.qkv_ld() + c).second) << "Q read twice";
        kv.insert(s.K(i) + r * s.qkv_ld() + c);
        kv.insert(s.V(i) + r * s.qkv_ld() + c);
      }
    }
  }
  EXPECT_EQ(static_cast<int64_t>(q.size() + kv.size()), s.QkvElements());
  for (int64_t x : kv) EXPECT_EQ(q.count(x), 0u) << "K or V overlaps Q at " << x;
}

TEST(SdpaLayoutTest, ShapesWithoutWholeKeyValueGroupsAreRefused) {
  // No K/V head, and 3 query heads over 2 K/V heads.
  for (const AttentionShape s : {AttentionShape{4, 2, 1, 4, 0}, AttentionShape{4, 2, 1, 3, 2}}) {
    const StatusOr<SdpaLayout> l = SdpaLayoutFor(s);
    ASSERT_FALSE(l.ok());
    EXPECT_EQ(l.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(l.status().message().find("K/V groups"), std::string::npos)
        << l.status().message();
  }
}

}  // namespace
}  // namespace pacer::worker::gpu
