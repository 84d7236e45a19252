// `pacer-worker calibrate` keys its entry by --gpu-type: a CPU measurement
// must never be written under a catalog GPU's name because --backend auto
// found no GPU (the planner would then plan that GPU's jobs with a CPU's
// figures, and nothing would say so).
#include "app/calibrate_command.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include "app/backend_choice.h"
#include "core/exit_codes.h"

namespace pacer::worker {
namespace {

namespace fs = std::filesystem;

TEST(CalibrateCommandTest, CpuFiguresAreNotRecordedAsACatalogGpusWhenNoGpuIsVisible) {
  // No GPU backend to load: --backend auto resolves to the CPU here, as on a
  // host without an NVIDIA driver.
  setenv("PACER_GPU_PLUGIN", "/nonexistent/libpacer_worker_gpu.so", 1);
  ASSERT_EQ(*ResolveBackend(Backend::kAuto, "--backend"), Backend::kCpu);
  const fs::path output =
      fs::temp_directory_path() / ("pacer-calibrate-test-" + std::to_string(getpid()) + ".json");
  fs::remove(output);
  CalibrateFlags flags;
  flags.backend = Backend::kAuto;
  flags.gpu_type = "H100-SXM";
  flags.quick = true;
  flags.output_path = output.string();
  std::ostringstream out, err;
  const int code = RunCalibrate(flags, out, err);
  unsetenv("PACER_GPU_PLUGIN");
  EXPECT_EQ(code, kExitInvalidConfig) << ExitCodeName(code) << "\n" << out.str() << err.str();
  EXPECT_NE(err.str().find("--gpu-type H100-SXM: no GPU is visible"), std::string::npos)
      << err.str();
  EXPECT_NE(err.str().find("--backend gpu"), std::string::npos) << err.str();
  EXPECT_FALSE(fs::exists(output)) << "a calibration file was written";
  fs::remove(output);
}

TEST(CalibrateCommandTest, AGpuAskedForWhereThereIsNoneNamesTheFlagItWasAskedWith) {
  // calibrate reads no PACER_BACKEND: its error named that variable for a
  // --backend gpu on the command line.
  setenv("PACER_GPU_PLUGIN", "/nonexistent/libpacer_worker_gpu.so", 1);
  CalibrateFlags flags;
  flags.backend = Backend::kGpu;
  flags.quick = true;
  flags.output_path =
      (fs::temp_directory_path() / ("pacer-calibrate-gpu-" + std::to_string(getpid()) + ".json"))
          .string();
  std::ostringstream out, err;
  const int code = RunCalibrate(flags, out, err);
  unsetenv("PACER_GPU_PLUGIN");
  EXPECT_EQ(code, kExitInvalidConfig) << ExitCodeName(code) << "\n" << err.str();
  EXPECT_NE(err.str().find("--backend: gpu requested but the GPU backend "
                           "/nonexistent/libpacer_worker_gpu.so is missing"),
            std::string::npos)
      << err.str();
  EXPECT_EQ(err.str().find("PACER_BACKEND"), std::string::npos) << err.str();
  EXPECT_FALSE(fs::exists(flags.output_path));
}

TEST(CalibrateCommandTest, OnlyAnAutomaticFallBackToTheCpuUnderACatalogNameIsRefused) {
  EXPECT_EQ(CheckCalibrationTarget(Backend::kAuto, Backend::kCpu, "H100-SXM").code(),
            StatusCode::kInvalidArgument);
  // Named after the device ("cpu"), or by a name the catalog does not know.
  EXPECT_TRUE(CheckCalibrationTarget(Backend::kAuto, Backend::kCpu, "").ok());
  EXPECT_TRUE(CheckCalibrationTarget(Backend::kAuto, Backend::kCpu, "build-box").ok());
  // A GPU measured as itself.
  EXPECT_TRUE(CheckCalibrationTarget(Backend::kAuto, Backend::kGpu, "H100-SXM").ok());
  EXPECT_TRUE(CheckCalibrationTarget(Backend::kGpu, Backend::kGpu, "H100-SXM").ok());
  // --backend cpu says so in so many words (calibrate warns).
  EXPECT_TRUE(CheckCalibrationTarget(Backend::kCpu, Backend::kCpu, "H100-SXM").ok());
}

// -o is checked before the measurements: a directory, or a file in a folder
// that does not exist, is an argument error at once (it was exit 1 after
// the measurements, with no reason).
TEST(CalibrateCommandTest, AnOutputPathThatCannotBeWrittenIsRefusedBeforeMeasuring) {
  const fs::path dir = fs::temp_directory_path();
  for (const std::string& path :
       {dir.string(), (dir / "pacer-no-such-folder" / "calibration.json").string()}) {
    CalibrateFlags flags;
    flags.backend = Backend::kCpu;
    flags.quick = true;
    flags.output_path = path;
    std::ostringstream out, err;
    const int code = RunCalibrate(flags, out, err);
    EXPECT_EQ(code, kExitInvalidConfig) << path << ": " << ExitCodeName(code) << "\n" << err.str();
    EXPECT_NE(err.str().find("-o " + path), std::string::npos) << err.str();
    EXPECT_TRUE(out.str().empty()) << "measured before refusing:\n" << out.str();
  }
}

}  // namespace
}  // namespace pacer::worker
