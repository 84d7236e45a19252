// The GPU backend plugin: it loads where it was built, and the metrics
// server still starts once cuBLAS is in the process (with cuBLAS linked at
// start, civetweb's small thread stacks cannot hold cuBLASLt's thread-local
// storage and /metrics never came up).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

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
  EXPECT_EQ((*plugin)->layout, kGpuPluginLayout);  // compiled in the plugin, from its headers
  ASSERT_NE((*plugin)->make_backend, nullptr);
  ASSERT_NE((*plugin)->calibrate, nullptr);
  EXPECT_STREQ((*plugin)->make_backend()->name(), "gpu");
  auto metrics = WorkerMetrics::Create({"job", "ns", "0", "gpu", "H100-SXM", ""}, "127.0.0.1:0");
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  EXPECT_GT((*metrics)->port(), 0);
}
#endif

// A plugin from another build is refused before any of its code runs: by
// the interface's version, and by the layout of the types the calls pass.
// The version stayed 1 while WorkerConfig's fields changed, so a plugin of
// an earlier build would have read the plan at the wrong offsets.
TEST(GpuPluginTest, APluginOfAnotherLayoutOrVersionIsRefused) {
  const std::string path = "/opt/old/libpacer_worker_gpu.so";
  const GpuPlugin same;  // this build's version and layout
  EXPECT_TRUE(CheckGpuPlugin(&same, path).ok());

  GpuPlugin moved = same;
  moved.layout ^= 1;
  const Status layout = CheckGpuPlugin(&moved, path);
  EXPECT_EQ(layout.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(layout.message().find(path + " was built with other layouts of WorkerConfig"),
            std::string::npos)
      << layout.message();
  EXPECT_NE(layout.message().find("install the libpacer_worker_gpu.so built with this "
                                  "pacer-worker"),
            std::string::npos)
      << layout.message();

  GpuPlugin older = same;
  older.version = 1;
  const Status version = CheckGpuPlugin(&older, path);
  EXPECT_EQ(version.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(version.message().find("is version 1 of the GPU plugin interface"), std::string::npos)
      << version.message();
  EXPECT_EQ(CheckGpuPlugin(nullptr, path).code(), StatusCode::kFailedPrecondition);
}

// The names of `type`'s data members, as declared in `header` (one per line,
// as these structs declare them).
std::vector<std::string> FieldsOf(const std::string& header, const std::string& type) {
  std::ifstream in(std::string(PACER_SOURCE_DIR) + "/" + header);
  EXPECT_TRUE(in.good()) << header;
  const std::regex field(R"(^  [A-Za-z_][\w:<>, ]*[\w>]\*?\s+(\w+)(\s*(=|\{).*)?;\s*$)");
  std::vector<std::string> fields;
  bool inside = false;
  std::string line;
  while (std::getline(in, line)) {
    if (!inside) {
      inside = line.rfind("struct " + type + " {", 0) == 0;
      continue;
    }
    if (line.rfind("};", 0) == 0) break;
    line = line.substr(0, line.find("//"));  // comments may hold anything
    if (line.find('(') != std::string::npos || line.rfind("  static ", 0) == 0) continue;
    std::smatch m;
    if (std::regex_match(line, m, field)) fields.push_back(m[1]);
  }
  EXPECT_TRUE(inside) << "struct " << type << " not found in " << header;
  return fields;
}

// kGpuPluginLayout lists the structs' fields by hand: a field added to one
// of them and not to the list could move nothing the hash sees (a bool in
// padding). Every declared field must be there.
TEST(GpuPluginTest, EveryFieldOfTheSharedStructsIsInTheLayout) {
  std::ifstream in(std::string(PACER_SOURCE_DIR) + "/worker/gpu/gpu_plugin.h");
  const std::string plugin_header((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
  ASSERT_FALSE(plugin_header.empty());
  struct Shared {
    const char* header;
    const char* type;
    const char* spelled;  // as gpu_plugin.h names it in offsetof
    size_t at_least;      // fields found, against a parse that finds none
  };
  const Shared shared[] = {
      {"worker/core/worker_config.h", "WorkerConfig", "WorkerConfig", 30},
      {"worker/core/worker_config.h", "GpuSwitches", "GpuSwitches", 4},
      {"worker/core/step_backend.h", "BackendContext", "BackendContext", 6},
      {"planner/include/pacer/planner/job_spec.h", "ModelSpec", "planner::ModelSpec", 10},
  };
  for (const Shared& s : shared) {
    const std::vector<std::string> fields = FieldsOf(s.header, s.type);
    EXPECT_GE(fields.size(), s.at_least) << s.type;
    for (const std::string& f : fields) {
      EXPECT_NE(plugin_header.find("offsetof(" + std::string(s.spelled) + ", " + f + ")"),
                std::string::npos)
          << s.type << "::" << f << " is not in kGpuPluginLayout (worker/gpu/gpu_plugin.h)";
    }
  }
}

TEST(GpuPluginTest, AMissingPluginIsAClearError) {
  setenv("PACER_GPU_PLUGIN", "/nonexistent/libpacer_worker_gpu.so", 1);
  EXPECT_FALSE(GpuBackendBuilt());
  auto backend = ResolveBackend(Backend::kGpu, "PACER_BACKEND");
  ASSERT_FALSE(backend.ok());
  EXPECT_NE(backend.status().message().find("PACER_BACKEND: gpu requested but the GPU backend "
                                            "/nonexistent/libpacer_worker_gpu.so"),
            std::string::npos)
      << backend.status().message();
  EXPECT_EQ(*ResolveBackend(Backend::kAuto, "PACER_BACKEND"), Backend::kCpu);
  unsetenv("PACER_GPU_PLUGIN");
}

}  // namespace
}  // namespace pacer::worker
