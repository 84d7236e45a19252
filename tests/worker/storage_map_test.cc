// StorageMap (core/storage_map.h): the handles behind which a device keeps
// narrow buffers, addressed by the executor in fp32 elements.
#include "core/storage_map.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/device.h"

namespace pacer::worker {
namespace {

TEST(StorageMapTest, InteriorPointersResolveToTheirNarrowElement) {
  StorageMap map;
  std::vector<uint16_t> physical(1000);
  StatusOr<float*> handle = map.Add(physical.size(), physical.data(), 2);
  ASSERT_TRUE(handle.ok()) << handle.status().message();
  float* h = *handle;
  // Element i of the fp32 view is element i of the 2-byte storage: the
  // executor's `base + i` lands on the right value, not on byte 4i.
  for (const size_t i : {size_t{0}, size_t{1}, size_t{517}, size_t{999}}) {
    const StorageMap::Resolved r = map.Resolve(h + i);
    ASSERT_TRUE(r.narrow) << i;
    EXPECT_EQ(r.physical, static_cast<void*>(&physical[i])) << i;
    EXPECT_EQ(r.element_bytes, 2u);
    EXPECT_EQ(r.elements_left, 1000 - i);
  }
  // One past the end is not inside the buffer.
  EXPECT_FALSE(map.Resolve(h + 1000).narrow);
}

TEST(StorageMapTest, OtherPointersPassThroughAsFp32) {
  StorageMap map;
  std::vector<uint16_t> physical(64);
  ASSERT_TRUE(map.Add(physical.size(), physical.data(), 2).ok());
  std::vector<float> plain(64);
  const StorageMap::Resolved r = map.Resolve(plain.data() + 3);
  EXPECT_FALSE(r.narrow);
  EXPECT_EQ(r.physical, static_cast<void*>(plain.data() + 3));
  EXPECT_EQ(r.element_bytes, sizeof(float));
  // The physical storage itself is not a handle either.
  EXPECT_FALSE(map.Contains(physical.data()));
}

TEST(StorageMapTest, HandlesNeverOverlapAndRemoveGivesBackThePhysicalMemory) {
  StorageMap map;
  std::vector<std::vector<uint16_t>> storage(8, std::vector<uint16_t>(4096));
  std::vector<float*> handles;
  for (auto& s : storage) {
    StatusOr<float*> h = map.Add(s.size(), s.data(), 2);
    ASSERT_TRUE(h.ok());
    handles.push_back(*h);
  }
  // The last element of each handle resolves into its own storage.
  for (size_t k = 0; k < handles.size(); ++k) {
    EXPECT_EQ(map.Resolve(handles[k] + 4095).physical, static_cast<void*>(&storage[k][4095]));
  }
  EXPECT_EQ(map.size(), 8u);
  EXPECT_EQ(map.Remove(handles[3]), static_cast<void*>(storage[3].data()));
  EXPECT_FALSE(map.Contains(handles[3]));
  EXPECT_EQ(map.Remove(handles[3]), nullptr);  // not a handle any more
  // An interior pointer is not a handle to remove.
  EXPECT_EQ(map.Remove(handles[4] + 1), nullptr);
  EXPECT_TRUE(map.Contains(handles[4] + 1));
  EXPECT_EQ(map.size(), 7u);
}

TEST(StorageMapTest, RefusesWhatIsNotNarrow) {
  StorageMap map;
  std::vector<float> fp32(16);
  EXPECT_EQ(map.Add(16, fp32.data(), 4).status().code(), StatusCode::kInternal);
  EXPECT_EQ(map.Add(0, fp32.data(), 2).status().code(), StatusCode::kInternal);
  EXPECT_EQ(map.Add(16, nullptr, 2).status().code(), StatusCode::kInternal);
}

// A handle is reserved address space without access: touching it faults,
// so a handle that reaches a kernel or the host unresolved is a crash at
// the mistake, not a silent read of someone else's memory.
TEST(StorageMapDeathTest, AHandleIsNotMemory) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  StorageMap map;
  std::vector<uint16_t> physical(16);
  StatusOr<float*> h = map.Add(physical.size(), physical.data(), 2);
  ASSERT_TRUE(h.ok());
  volatile float* p = *h;
  EXPECT_DEATH({ p[0] = 1.0f; }, "");
}

}  // namespace
}  // namespace pacer::worker
