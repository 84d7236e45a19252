// RegionCopies (core/region_copies.h): the GPU device's tables of bf16
// copies (its weights' and the read-only scopes'), whose lookups and stale
// marks decide whether a GEMM reads a current copy. Only a GPU runs the
// device, so the table's boundaries are checked here.
#include "core/region_copies.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace pacer::worker {
namespace {

// Three regions carved from one array, so their addresses are ordered and
// two of them adjacent: [0, 10), [10, 30) and [40, 50), counted from the
// array's fifth element (so that at(-1), before every region, is inside it).
class RegionCopiesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(table_.Add(at(0), 10, 100), nullptr);
    ASSERT_NE(table_.Add(at(10), 20, 200), nullptr);
    ASSERT_NE(table_.Add(at(40), 10, 300), nullptr);
  }
  const float* at(int64_t i) const { return memory_.data() + 4 + i; }

  std::vector<float> memory_ = std::vector<float>(64);
  RegionCopies<int> table_;
};

TEST_F(RegionCopiesTest, FindsTheRegionHoldingAWholeSlice) {
  struct Case {
    int64_t first;
    size_t span;
    int copy;  // 0: none
  };
  for (const Case& c : {
           Case{0, 10, 100},   // a whole region
           Case{3, 1, 100},    // one element inside
           Case{9, 1, 100},    // its last element
           Case{10, 1, 200},   // the adjacent region's first
           Case{12, 18, 200},  // to the region's end exactly
           Case{12, 19, 0},    // one past it
           Case{5, 10, 0},     // across two adjacent regions
           Case{30, 1, 0},     // in the gap
           Case{35, 6, 0},     // from the gap into a region
           Case{49, 1, 300},   // the last region's last element
           Case{50, 1, 0},     // one past every region
           Case{4, 0, 0},      // no elements: no slice to read
       }) {
    const auto* e = table_.Find(at(c.first), c.span);
    if (c.copy == 0) {
      EXPECT_EQ(e, nullptr) << c.first << "+" << c.span;
      continue;
    }
    ASSERT_NE(e, nullptr) << c.first << "+" << c.span;
    EXPECT_EQ(e->copy, c.copy) << c.first << "+" << c.span;
    // Where the slice starts in the copy: the device reads copy + offset.
    EXPECT_EQ(e->base + e->Offset(at(c.first)), at(c.first));
  }
  EXPECT_EQ(table_.Find(nullptr, 1), nullptr);
  EXPECT_EQ(table_.Find(at(-1), 1), nullptr);  // before every region
}

TEST_F(RegionCopiesTest, AWriteMarksOnlyTheRegionItStartsIn) {
  table_.ForEach([](auto& e) { e.stale = false; });  // all copies made
  // The last element of [0, 10): that region, not its neighbour.
  ASSERT_NE(table_.Wrote(at(9)), nullptr);
  EXPECT_TRUE(table_.Find(at(0), 1)->stale);
  EXPECT_FALSE(table_.Find(at(10), 1)->stale);
  // The start of [10, 30) (one past the first region's end): that one.
  ASSERT_NE(table_.Wrote(at(10)), nullptr);
  EXPECT_TRUE(table_.Find(at(10), 1)->stale);
  EXPECT_FALSE(table_.Find(at(40), 1)->stale);
  // Outside every region: nothing marked.
  EXPECT_EQ(table_.Wrote(at(30)), nullptr);
  EXPECT_EQ(table_.Wrote(at(50)), nullptr);
  EXPECT_FALSE(table_.Find(at(40), 1)->stale);
  EXPECT_NE(table_.Wrote(at(45)), nullptr);
  EXPECT_TRUE(table_.Find(at(40), 1)->stale);
}

TEST_F(RegionCopiesTest, RefusesEmptyAndOverlappingRegions) {
  EXPECT_EQ(table_.Add(at(30), 0, 1), nullptr);
  EXPECT_EQ(table_.Add(nullptr, 5, 1), nullptr);
  EXPECT_EQ(table_.Add(at(29), 2, 1), nullptr);   // into the gap from a region's end
  EXPECT_EQ(table_.Add(at(35), 6, 1), nullptr);   // from the gap into a region's start
  EXPECT_EQ(table_.Add(at(28), 20, 1), nullptr);  // over a whole region
  EXPECT_EQ(table_.Add(at(10), 5, 1), nullptr);   // at a region's start
  EXPECT_EQ(table_.size(), 3u);
  EXPECT_EQ(table_.Find(at(10), 20)->copy, 200);  // the refused ones changed nothing
  // The gap exactly, adjacent on both sides: a region of its own.
  const auto* gap = table_.Add(at(30), 10, 400);
  ASSERT_NE(gap, nullptr);
  EXPECT_TRUE(gap->stale);  // no copy made yet
  EXPECT_EQ(table_.Find(at(39), 1)->copy, 400);
  EXPECT_EQ(table_.Find(at(29), 2), nullptr);  // still two regions
  // Overlaps says what Add refused, without adding.
  EXPECT_TRUE(table_.Overlaps(at(49), 1));
  EXPECT_FALSE(table_.Overlaps(at(50), 10));
  EXPECT_FALSE(table_.Overlaps(at(5), 0));
  EXPECT_TRUE(table_.Overlaps(at(50), SIZE_MAX / sizeof(float)));  // past the address space
  EXPECT_EQ(table_.size(), 4u);
}

TEST_F(RegionCopiesTest, RemovingARegionReturnsItsCopyOnce) {
  const auto removed = table_.Remove(at(10));
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->copy, 200);
  EXPECT_EQ(removed->elements, 20u);
  EXPECT_FALSE(table_.Remove(at(10)).has_value());
  EXPECT_FALSE(table_.Remove(at(41)).has_value());  // not a region's start
  EXPECT_EQ(table_.Find(at(15), 1), nullptr);
  EXPECT_EQ(table_.Wrote(at(15)), nullptr);
  std::vector<int> copies;
  table_.ForEach([&](const auto& e) { copies.push_back(e.copy); });
  EXPECT_EQ(copies, (std::vector<int>{100, 300}));  // in address order
}

TEST(RegionCopiesMoveOnlyTest, HoldsCopiesThatOnlyMove) {
  // The read-only scopes' copies are DeviceBuffers, which only move.
  std::vector<float> memory(8);
  RegionCopies<std::unique_ptr<int>> table;
  ASSERT_NE(table.Add(memory.data(), 8, std::make_unique<int>(7)), nullptr);
  RegionCopies<std::unique_ptr<int>> moved = std::move(table);
  ASSERT_NE(moved.Find(memory.data() + 2, 6), nullptr);
  EXPECT_EQ(*moved.Find(memory.data() + 2, 6)->copy, 7);
  moved.Clear();
  EXPECT_TRUE(moved.empty());
}

}  // namespace
}  // namespace pacer::worker
