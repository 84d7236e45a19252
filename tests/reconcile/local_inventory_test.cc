// Local mode's inventory read from a stand-in /proc/driver/nvidia/gpus: the
// GPUs CUDA_VISIBLE_DEVICES leaves to the workers, as CUDA reads the list.
#include "local/local_inventory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace pacer::controller {
namespace {

class LocalInventoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("pacer-proc-gpus-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    // Eight H100s, written out of bus order: the inventory sorts them.
    for (int i = 7; i >= 0; --i) {
      const std::filesystem::path gpu = dir_ / ("0000:" + std::to_string(10 + i) + ":00.0");
      std::filesystem::create_directories(gpu);
      std::ofstream(gpu / "information")
          << "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:             42\n"
          << "GPU UUID: \t GPU-" << i << "aaaaaaa-0000-0000-0000-000000000000\n"
          << "Device Minor: \t " << i << "\n";
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The pool's GPU count, 0 when it is the CPU pool.
  int VisibleGpus(const std::optional<std::string>& visible) {
    LocalInventoryOptions options;
    options.proc_nvidia_dir = dir_.string();
    options.cuda_visible_devices = visible;
    LocalInventory inventory(options);
    StatusOr<ClusterInventory> current = inventory.Current();
    EXPECT_TRUE(current.ok());
    const planner::NodePool& pool = current->inventory.node_pools.at(0);
    if (!inventory.uses_gpus()) {
      EXPECT_EQ(pool.gpu_type, kCpuDeviceType);
      return 0;
    }
    EXPECT_EQ(pool.gpu_type, "H100-SXM");
    EXPECT_EQ(pool.free_gpus, pool.gpus_per_node);
    return pool.gpus_per_node;
  }

  std::filesystem::path dir_;
};

// Two visible GPUs of eight (Slurm's --gres=gpu:2): a plan for eight failed
// ranks 2..7 with "only 2 CUDA devices visible" (exit 2, a failed job).
TEST_F(LocalInventoryTest, OnlyTheGpusCudaVisibleDevicesLeavesArePlannedFor) {
  EXPECT_EQ(VisibleGpus(std::nullopt), 8);
  EXPECT_EQ(VisibleGpus("3,5"), 2);
  EXPECT_EQ(VisibleGpus(" 0 , 1 ,2"), 3);
  EXPECT_EQ(VisibleGpus("GPU-6aaa,GPU-2"), 2);  // UUID prefixes
  EXPECT_EQ(VisibleGpus(""), 0);                // none: the CPU pool
}

// As CUDA reads the list (the rules PyTorch's torch.cuda models): it ends
// at the first entry that names no GPU, and a GPU named twice leaves none.
TEST_F(LocalInventoryTest, TheListIsReadAsCudaReadsIt) {
  EXPECT_EQ(VisibleGpus("1,8,2"), 1);      // 8 is past the last GPU
  EXPECT_EQ(VisibleGpus("2,-1,3"), 1);     // a negative ordinal ends it
  EXPECT_EQ(VisibleGpus("0,GPU-1,3"), 1);  // so does an entry of another kind
  EXPECT_EQ(VisibleGpus("GPU-6aaa,0"), 1);
  EXPECT_EQ(VisibleGpus("+2,3x"), 2);  // strtoul's reading
  EXPECT_EQ(VisibleGpus("1,1,2"), 0);  // a repeat: none visible
  EXPECT_EQ(VisibleGpus("1,8,1"), 0);
  EXPECT_EQ(VisibleGpus("GPU-6aaa,GPU-6a"), 0);  // one GPU twice
  EXPECT_EQ(VisibleGpus("GPU-,0"), 0);           // a prefix of every UUID names none
  EXPECT_EQ(VisibleGpus("GPU-1aaa,GPU-"), 1);    // ... and ends the list, later too
  EXPECT_EQ(VisibleGpus("GPU-6aaa,GPU-ffff,GPU-2"), 1);     // one that names no GPU ends it
  EXPECT_EQ(VisibleGpus("GPU-6aaa,GPU-ffff,GPU-6aaa"), 0);  // a repeat past the end still counts
  EXPECT_EQ(VisibleGpus("MIG-x,0"), 0);          // MIG slices are not planned for
  EXPECT_EQ(VisibleGpus("99999999999999999999"), 0);
}

// An L4 (or a PCIe A100) has no catalog row: it was passed over without a
// word, and `pacer run --backend gpu` then said "no NVIDIA GPU found".
TEST_F(LocalInventoryTest, GpusTheCatalogDoesNotKnowAreNamedNotPassedOver) {
  for (const char* bus : {"0000:30:00.0", "0000:31:00.0", "0000:32:00.0"}) {
    const std::filesystem::path gpu = dir_ / bus;
    std::filesystem::create_directories(gpu);
    std::ofstream(gpu / "information")
        << "Model: \t\t " << (bus[6] == '2' ? "NVIDIA A100-PCIE-40GB" : "NVIDIA L4") << "\n"
        << "GPU UUID: \t GPU-" << bus[6] << "bbbbbbb-0000-0000-0000-000000000000\n";
  }
  LocalInventoryOptions options;
  options.proc_nvidia_dir = dir_.string();
  {
    // Beside the H100s, the plan is for the H100s; the others are named.
    LocalInventory inventory(options);
    EXPECT_TRUE(inventory.uses_gpus());
    EXPECT_EQ(inventory.uncataloged_gpus(), "1 x NVIDIA-A100-PCIE-40GB, 2 x NVIDIA-L4");
  }
  options.cuda_visible_devices = "GPU-0bbb,GPU-1bbb";  // the two L4s only
  LocalInventory inventory(options);
  EXPECT_FALSE(inventory.uses_gpus());
  EXPECT_EQ(inventory.uncataloged_gpus(), "2 x NVIDIA-L4");
  EXPECT_EQ(inventory.Current()->inventory.node_pools.at(0).gpu_type, kCpuDeviceType);
  options.cuda_visible_devices = "0,1";  // H100s: nothing uncataloged
  EXPECT_EQ(LocalInventory(options).uncataloged_gpus(), "");
}

}  // namespace
}  // namespace pacer::controller
