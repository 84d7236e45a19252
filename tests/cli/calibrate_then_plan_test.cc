// What `pacer-worker calibrate` writes, `pacer plan --calibration` takes:
// with --gpu-type naming a catalog type it is used; named after the device
// (no --gpu-type) it is refused with a clear error, and calibrate says so.
#include <gtest/gtest.h>

#include <string>

#include "cli_test_util.h"

namespace pacer::cli {
namespace {

using testing::CliRun;
using testing::CliTestData;
using testing::RunBinary;

constexpr char kNowRfc3339[] = "2026-06-01T00:00:00Z";

TEST(CalibrateThenPlanTest, AFileNamedByCatalogTypeIsUsedAndOneNamedByDeviceIsRefused) {
  testing::TempDir dir;
  const std::string named = dir.File("h100.json");
  CliRun calibrate =
      RunBinary({"calibrate", "--backend", "cpu", "--quick", "--gpu-type", "H100-SXM", "-o", named},
                PACER_WORKER_BINARY);
  ASSERT_EQ(calibrate.exit_code, 0) << calibrate.err;
  EXPECT_EQ(calibrate.out.find("note:"), std::string::npos) << calibrate.out;
  CliRun plan = RunBinary({"plan", CliTestData("llama-7b.yaml"), "--calibration", named, "--now",
                           kNowRfc3339, "-o", "json"});
  EXPECT_EQ(plan.exit_code, 0) << plan.err;

  const std::string unnamed = dir.File("cpu.json");
  calibrate =
      RunBinary({"calibrate", "--backend", "cpu", "--quick", "-o", unnamed}, PACER_WORKER_BINARY);
  ASSERT_EQ(calibrate.exit_code, 0) << calibrate.err;
  EXPECT_NE(calibrate.out.find("note: \"cpu\" is not a GPU type of the planner's catalog"),
            std::string::npos)
      << calibrate.out;
  plan = RunBinary(
      {"plan", CliTestData("llama-7b.yaml"), "--calibration", unnamed, "--now", kNowRfc3339});
  EXPECT_EQ(plan.exit_code, 2);
  EXPECT_NE(plan.err.find("gpuTypes.cpu: unknown GPU type \"cpu\""), std::string::npos) << plan.err;
}

}  // namespace
}  // namespace pacer::cli
