// The GPU backend plugin: it loads where it was built, and the metrics
// server still starts once cuBLAS is in the process (with cuBLAS linked at
// start, civetweb's small thread stacks cannot hold cuBLASLt's thread-local
// storage and /metrics never came up).
#include <gtest/gtest.h>

#include <cstdlib>

#include "app/backend_choice.h"
#include "core/metrics.h"

namespace pacer::worker {
namespace {

#ifdef PACER_GPU_PLUGIN_PATH
TEST(GpuPluginTest, LoadsAndTheMetricsServerStillStarts) {
  setenv("PACER_GPU_PLUGIN", PACER_GPU_PLUGIN_PATH, 1);
  EXPECT_TRUE(GpuBackendBuilt());
  auto plugin = LoadGpuPlugin();
  ASSERT_TRUE(plugin.ok()) << plugin.status().ToString();
  EXPECT_EQ((*plugin)->version, kGpuPluginVersion);
  ASSERT_NE((*plugin)->make_backend, nullptr);
  ASSERT_NE((*plugin)->calibrate, nullptr);
  EXPECT_STREQ((*plugin)->make_backend()->name(), "gpu");
  auto metrics = WorkerMetrics::Create({"job", "ns", "0", "gpu", "H100-SXM"}, "127.0.0.1:0");
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  EXPECT_GT((*metrics)->port(), 0);
}
#endif

TEST(GpuPluginTest, AMissingPluginIsAClearError) {
  setenv("PACER_GPU_PLUGIN", "/nonexistent/libpacer_worker_gpu.so", 1);
  EXPECT_FALSE(GpuBackendBuilt());
  auto backend = ResolveBackend(Backend::kGpu);
  ASSERT_FALSE(backend.ok());
  EXPECT_NE(backend.status().message().find("/nonexistent/libpacer_worker_gpu.so"),
            std::string::npos);
  EXPECT_EQ(*ResolveBackend(Backend::kAuto), Backend::kCpu);
  unsetenv("PACER_GPU_PLUGIN");
}

}  // namespace
}  // namespace pacer::worker
