// Parts of the Device contract (core/device.h) that the GPU device relies
// on and the CPU device enforces: the read-only operand promise (the GPU
// device hands out bf16 copies made at BeginReadOnly, so a write in
// between would make its GEMMs read stale values) and the tracker's
// ForgetPeaksSince (the GPU device's cuDNN trial run).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "cpu/cpu_device.h"

namespace pacer::worker {
namespace {

TEST(DeviceContractTest, TheCpuDeviceCatchesAWriteToAReadOnlyRegion) {
  std::unique_ptr<Device> dev = cpu::MakeCpuDevice();
  DeviceBuffer a(dev.get(), BufferClass::kActivations), b(dev.get(), BufferClass::kActivations);
  ASSERT_TRUE(a.Assign(64).ok());
  ASSERT_TRUE(b.Assign(64).ok());
  const std::vector<float> ones(64, 1.0f);
  ASSERT_TRUE(dev->CopyFromHost(ones.data(), ones.size(), a.data()).ok());
  ASSERT_TRUE(dev->CopyFromHost(ones.data(), ones.size(), b.data()).ok());

  // Reading a region and writing another keeps the promise.
  Status kept = WithReadOnly(dev.get(), {{a.data(), a.size()}},
                             [&] { return dev->Add(b.data(), a.data(), a.size()); });
  EXPECT_TRUE(kept.ok()) << kept.message();

  // Writing one element of one breaks the promise (b[63] goes from 2 to 3):
  // a bug, reported as such.
  Status broken = WithReadOnly(dev.get(), {{a.data(), a.size()}, {b.data(), b.size()}},
                               [&] { return dev->Add(b.data() + 63, a.data(), 1); });
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.code(), StatusCode::kInternal);
  EXPECT_NE(broken.message().find("read-only region 1 (64 elements) was written"),
            std::string::npos)
      << broken.message();

  // The failed scope ended: a new one may begin, but scopes do not nest.
  ASSERT_TRUE(dev->BeginReadOnly({{a.data(), a.size()}}).ok());
  EXPECT_EQ(dev->BeginReadOnly({{b.data(), b.size()}}).code(), StatusCode::kInternal);
  EXPECT_TRUE(dev->EndReadOnly().ok());
  // Also when the open scope holds no region.
  ASSERT_TRUE(dev->BeginReadOnly({}).ok());
  EXPECT_EQ(dev->BeginReadOnly({{b.data(), b.size()}}).code(), StatusCode::kInternal);
  EXPECT_TRUE(dev->EndReadOnly().ok());
}

// The GPU device keeps one bf16 copy per read-only region, found by
// address; overlapping regions would leave it two copies of one element.
// The CPU device refuses them as the GPU device does, so a caller that
// passes them fails in CI.
TEST(DeviceContractTest, ReadOnlyRegionsMayNotOverlap) {
  std::unique_ptr<Device> dev = cpu::MakeCpuDevice();
  DeviceBuffer a(dev.get(), BufferClass::kActivations);
  ASSERT_TRUE(a.Assign(64).ok());
  const Status overlap = dev->BeginReadOnly({{a.data(), 32}, {a.data() + 31, 8}});
  EXPECT_EQ(overlap.code(), StatusCode::kInternal);
  EXPECT_NE(overlap.message().find("regions overlap"), std::string::npos) << overlap.message();
  // Refused before it began: a scope may begin, and adjacent regions are fine.
  ASSERT_TRUE(dev->BeginReadOnly({{a.data(), 32}, {a.data() + 32, 32}}).ok());
  EXPECT_TRUE(dev->EndReadOnly().ok());
}

TEST(DeviceContractTest, ForgetPeaksSinceKeepsWhatIsStillHeld) {
  MemoryTracker m;
  m.Charge(BufferClass::kWeights, 100);
  const MemoryTracker before = m;
  // Trial work: 50 bytes freed again and 30 kept (a scratch the steps
  // reuse), so 180 was the momentary peak.
  m.Charge(BufferClass::kWorkspace, 50);
  m.Charge(BufferClass::kWorkspace, 30);
  m.Release(BufferClass::kWorkspace, 50);
  ASSERT_EQ(m.peak_bytes(), 180);
  m.ForgetPeaksSince(before);
  EXPECT_EQ(m.peak_bytes(), 130);
  EXPECT_EQ(m.class_peak_bytes(BufferClass::kWorkspace), 30);
  EXPECT_EQ(m.class_peak_bytes(BufferClass::kWeights), 100);
  EXPECT_EQ(m.current_bytes(), 130);
  // Peaks from before the trial stay.
  MemoryTracker high;
  high.Charge(BufferClass::kActivations, 500);
  high.Release(BufferClass::kActivations, 500);
  const MemoryTracker snapshot = high;
  high.Charge(BufferClass::kWorkspace, 10);
  high.ForgetPeaksSince(snapshot);
  EXPECT_EQ(high.peak_bytes(), 500);
  EXPECT_EQ(high.class_peak_bytes(BufferClass::kActivations), 500);
  EXPECT_EQ(high.class_peak_bytes(BufferClass::kWorkspace), 10);
}

}  // namespace
}  // namespace pacer::worker
