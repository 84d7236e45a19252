// The strides cuDNN's SDPA reads the executor's attention buffers with
// (gpu/sdpa_layout.h): every element cuDNN addresses as [batch, head, row,
// column] of Q, K and V must be the element the executor's pair layout puts
// there (core/device.h, AttentionShape), the query head must read the K/V
// block the executor's round-robin gives its pair, and the statistics must
// fill the executor's RowElements() floats exactly once each.
// Checked here on the CPU because the GPU path itself runs only on a GPU.
#include "gpu/sdpa_layout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

namespace pacer::worker::gpu {
namespace {

int64_t Offset(const SdpaTensorLayout& t, int64_t b, int64_t h, int64_t r, int64_t c) {
  return b * t.strides[0] + h * t.strides[1] + r * t.strides[2] + c * t.strides[3];
}

TEST(SdpaLayoutTest, CudnnIndicesAddressTheExecutorsPairLayout) {
  // Multi-head (one K/V block per pair), grouped-query (4 and 2 pairs per
  // K/V block), one K/V block for all.
  for (const AttentionShape s : {AttentionShape{6, 4, 8, 8}, AttentionShape{5, 8, 16, 4},
                                 AttentionShape{3, 2, 6, 3}, AttentionShape{4, 2, 4, 1}}) {
    const std::string what =
        "pairs " + std::to_string(s.head_batches) + ", K/V blocks " + std::to_string(s.kv_blocks);
    const StatusOr<SdpaLayout> l = SdpaLayoutFor(s);
    ASSERT_TRUE(l.ok()) << what << ": " << l.status().ToString();
    const SdpaTensorLayout& q = l->query;
    const SdpaTensorLayout& kv = l->key_value;
    const SdpaTensorLayout& st = l->stats;
    // cuDNN's grouped-query attention: the K/V heads divide the query heads.
    ASSERT_EQ(q.dims[0], kv.dims[0]) << what;
    ASSERT_EQ(q.dims[1] % kv.dims[1], 0) << what;
    ASSERT_EQ(q.dims[0] * q.dims[1], s.head_batches) << what;
    ASSERT_EQ(st.dims[3], 1) << what;
    const int64_t group = q.dims[1] / kv.dims[1];
    std::set<int64_t> pairs_seen, stats_seen;
    for (int64_t b = 0; b < q.dims[0]; ++b) {
      for (int64_t h = 0; h < q.dims[1]; ++h) {
        // The pair whose Q block cuDNN reads as (b, h).
        const int64_t pair = Offset(q, b, h, 0, 0) / (s.seq * s.head_dim);
        pairs_seen.insert(pair);
        const AttentionKeyValue expect = s.KeyValueAt(pair);
        for (int64_t r = 0; r < s.seq; ++r) {
          stats_seen.insert(Offset(st, b, h, r, 0));
          for (int64_t c = 0; c < s.head_dim; ++c) {
            ASSERT_EQ(Offset(q, b, h, r, c), pair * s.seq * s.head_dim + r * s.head_dim + c)
                << what << " Q[" << b << "," << h << "," << r << "," << c << "]";
            // The K/V head cuDNN gives query head h: h / group.
            const int64_t within = r * s.head_dim + c;
            ASSERT_EQ(l->key_offset + Offset(kv, b, h / group, r, c), expect.k + within) << what;
            ASSERT_EQ(l->value_offset + Offset(kv, b, h / group, r, c), expect.v + within) << what;
          }
        }
      }
    }
    EXPECT_EQ(static_cast<int64_t>(pairs_seen.size()), s.head_batches) << what;
    ASSERT_EQ(static_cast<int64_t>(stats_seen.size()), s.RowElements()) << what;
    EXPECT_EQ(*stats_seen.begin(), 0) << what;
    EXPECT_EQ(*stats_seen.rbegin(), s.RowElements() - 1) << what;
  }
}

TEST(SdpaLayoutTest, ShapesWithoutOneKeyValueBlockPerGroupAreRefused) {
  // Q serving as K and V (kv_blocks 0), and 6 pairs over 4 K/V blocks.
  for (const AttentionShape s : {AttentionShape{4, 2, 4, 0}, AttentionShape{4, 2, 6, 4}}) {
    const StatusOr<SdpaLayout> l = SdpaLayoutFor(s);
    ASSERT_FALSE(l.ok());
    EXPECT_EQ(l.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(l.status().message().find("K/V block"), std::string::npos) << l.status().message();
  }
}

}  // namespace
}  // namespace pacer::worker::gpu
