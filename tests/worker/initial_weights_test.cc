// FillInitialWeights (core/initial_weights.h) must give every element the
// value of its definition, UniformFromHash(HashKeys(seed, 0, matrix,
// map(i), 0x77)) x scale, computed here one element at a time with
// HashKeys, whatever the thread count and at chunk borders; and
// UnsplitMap must place a tensor-parallel rank's elements where the unsplit
// matrix has them.
#include "core/initial_weights.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "core/hash_keys.h"

namespace pacer::worker {
namespace {

TEST(InitialWeightsTest, EveryElementIsItsDefinitionForAnyThreadCount) {
  // Just over four minimum chunks, so that 1, 2, 3 and 8 threads split it
  // differently and the last chunk is short.
  const size_t n = (size_t{1} << 20) + 12345;
  const UnsplitMap map = UnsplitMap::Columns({6, 2, 2}, 2, 1);
  const uint64_t seed = 42, matrix = 0x1234567890abcdefULL;
  const float scale = 0.125f;
  std::vector<float> want(n);
  for (size_t i = 0; i < n; ++i) {
    want[i] = UniformFromHash(HashKeys(seed, 0, matrix, map(i), 0x77)) * scale;
  }
  for (unsigned threads : {1u, 2u, 3u, 8u, 0u}) {
    std::vector<float> got(n, -7.0f);
    FillInitialWeights(seed, matrix, map, scale, got.data(), n, threads);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], want[i]) << "element " << i << " with " << threads << " threads";
    }
  }
}

// HashKeys is the splitmix64 chain its header names (here written out
// independently), so the prefix-and-finish split that computes it, and
// with it every initial weight and synthetic token, keeps its values.
uint64_t ReferenceSplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

TEST(InitialWeightsTest, HashKeysIsTheSplitMixChainInTwoParts) {
  for (uint64_t a : {0ULL, 1ULL, 0xffffffffffffffffULL}) {
    for (uint64_t d : {0ULL, 7ULL, 1ULL << 40}) {
      uint64_t want = ReferenceSplitMix(a);
      for (uint64_t key : {uint64_t{3}, uint64_t{5}, d, uint64_t{0x77}}) {
        want = ReferenceSplitMix(want ^ key);
      }
      EXPECT_EQ(HashKeys(a, 3, 5, d, 0x77), want) << a << " " << d;
      EXPECT_EQ(HashKeysFinish(HashKeysPrefix(a, 3, 5), d, 0x77), want) << a << " " << d;
    }
  }
}

// Two ranks' shares of a 3-row matrix of sections 4 and 2 columns wide
// (local widths 2 and 1) cover the unsplit matrix once, each element in
// its own section's columns; rows split the same way.
TEST(InitialWeightsTest, RanksCoverTheUnsplitMatrixOnce) {
  const int64_t rows = 3;
  std::set<uint64_t> seen;
  for (int64_t rank = 0; rank < 2; ++rank) {
    const UnsplitMap map = UnsplitMap::Columns({2, 1}, 2, rank);
    for (size_t i = 0; i < static_cast<size_t>(rows * 3); ++i) {
      const uint64_t u = map(i);
      EXPECT_TRUE(seen.insert(u).second) << "rank " << rank << " element " << i;
      const int64_t local_col = static_cast<int64_t>(i) % 3, col = static_cast<int64_t>(u) % 6;
      EXPECT_EQ(local_col < 2, col < 4) << "rank " << rank << " element " << i << " -> " << u;
      EXPECT_EQ(static_cast<int64_t>(u) / 6, static_cast<int64_t>(i) / 3) << "row kept";
    }
  }
  EXPECT_EQ(seen.size(), 18u);
  EXPECT_EQ(*seen.rbegin(), 17u);
  seen.clear();
  for (int64_t rank = 0; rank < 2; ++rank) {
    const UnsplitMap map = UnsplitMap::Rows(rank, 2, 5);
    for (size_t i = 0; i < 10; ++i) EXPECT_TRUE(seen.insert(map(i)).second);
  }
  EXPECT_EQ(seen.size(), 20u);
  EXPECT_EQ(*seen.rbegin(), 19u);
  EXPECT_EQ(UnsplitMap()(12345), 12345u);
}

}  // namespace
}  // namespace pacer::worker
