#include "pacer/planner/calibration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "pacer/planner/job_parser.h"

namespace pacer::planner {
namespace {

using ::testing::HasSubstr;

std::string CalibrationErrorOf(const std::string& doc) {
  StatusOr<Calibration> c = ParseCalibration(doc);
  if (c.ok()) return "OK";
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status().ToString();
  return c.status().message();
}

TEST(CalibrationTest, ParsesEveryField) {
  StatusOr<Calibration> c = ParseCalibration(
      R"({"gpuTypes": {"H100-SXM": {"gemmEfficiency": 0.81,
                                   "intraNodeBusBandwidthGBps": 360,
                                   "interNodeBusBandwidthGBps": 45,
                                   "memoryBandwidthGBps": 3000,
                                   "stepTimeRatio": 1.07},
                      "a100-80gb": {"gemmEfficiency": 1}}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const GpuCalibration* h100 = c->Find("h100-sxm");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->gemm_efficiency, 0.81);
  EXPECT_EQ(h100->intra_node_busbw_gbps, 360);
  EXPECT_EQ(h100->inter_node_busbw_gbps, 45);
  EXPECT_EQ(h100->memory_bandwidth_gbps, 3000);
  EXPECT_EQ(h100->step_time_ratio, 1.07);
  const GpuCalibration* a100 = c->Find("A100-80GB");
  ASSERT_NE(a100, nullptr);
  EXPECT_EQ(a100->gemm_efficiency, 1);
  EXPECT_FALSE(a100->step_time_ratio.has_value());
  EXPECT_EQ(c->by_gpu_type.count("a100-80gb"), 1u);  // kept as written
  EXPECT_EQ(c->Find("H200"), nullptr);
}

TEST(CalibrationTest, AcceptsKubernetesStyleWrapper) {
  StatusOr<Calibration> c = ParseCalibration(R"(apiVersion: pacer.dev/v1alpha1
kind: Calibration
metadata: {name: h100-run-1}
gpuTypes:
  H100-SXM: {stepTimeRatio: 0.95}
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->Find("H100-SXM")->step_time_ratio, 0.95);
}

TEST(CalibrationTest, EmptyGpuTypesIsFine) {
  StatusOr<Calibration> c = ParseCalibration("{}");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->by_gpu_type.empty());
}

TEST(CalibrationTest, Errors) {
  EXPECT_EQ(CalibrationErrorOf(R"({"gpuTypes": {"H100-SXM": {"gemmEfficiency": 1.5}}})"),
            "gpuTypes.H100-SXM.gemmEfficiency: must be at most 1, got 1.5");
  EXPECT_EQ(CalibrationErrorOf(R"({"gpuTypes": {"H100-SXM": {"gemmEfficiency": 0}}})"),
            "gpuTypes.H100-SXM.gemmEfficiency: must be a positive number, got 0");
  EXPECT_EQ(CalibrationErrorOf(R"({"gpuTypes": {"H100-SXM": {"stepTimeRatio": 101}}})"),
            "gpuTypes.H100-SXM.stepTimeRatio: must be at most 100, got 101");
  // Tiny but positive: a 14-day job was planned as 5 minutes (ratio), a NaN
  // step time (bandwidth), and `pacer sweep --svg` looped on an infinite axis.
  EXPECT_EQ(CalibrationErrorOf(R"({"gpuTypes": {"H100-SXM": {"stepTimeRatio": 1e-300}}})"),
            "gpuTypes.H100-SXM.stepTimeRatio: must be at least 0.01, got 1e-300");
  EXPECT_EQ(CalibrationErrorOf(R"({"gpuTypes": {"H100-SXM": {"gemmEfficiency": 0.001}}})"),
            "gpuTypes.H100-SXM.gemmEfficiency: must be at least 0.01, got 0.001");
  EXPECT_EQ(CalibrationErrorOf(R"({"gpuTypes": {"H100-SXM": {"memoryBandwidthGBps": 1e-320}}})"),
            "gpuTypes.H100-SXM.memoryBandwidthGBps: must be at least 0.001, got 1e-320");
  EXPECT_EQ(CalibrationErrorOf(R"({"gpuTypes": {"H100-SXM": {"intraNodeBusBandwidthGBps": 2e6}}})"),
            "gpuTypes.H100-SXM.intraNodeBusBandwidthGBps: must be at most 1e6, got 2e6");
  EXPECT_EQ(CalibrationErrorOf(R"({"gpuTypes": {"H100-SXM": {"memoryBandwidthGBps": -3}}})"),
            "gpuTypes.H100-SXM.memoryBandwidthGBps: must be a positive number, got -3");
  EXPECT_EQ(
      CalibrationErrorOf(R"({"gpuTypes": {"H100-SXM": {"interNodeBusBandwidthGBps": "fast"}}})"),
      "gpuTypes.H100-SXM.interNodeBusBandwidthGBps: must be a positive number, got "
      "\"fast\"");
  EXPECT_EQ(CalibrationErrorOf(R"({"gpuTypes": {"H100-SXM": {"gemmEfficiency": .nan}}})"),
            "gpuTypes.H100-SXM.gemmEfficiency: must be a positive number, got \".nan\"");
  EXPECT_EQ(CalibrationErrorOf(R"({"gpuTypes": {"H100-SXM": {"gemEfficiency": 0.5}}})"),
            "gpuTypes.H100-SXM.gemEfficiency: unknown field; did you mean gemmEfficiency?");
  EXPECT_THAT(CalibrationErrorOf(R"({"gpuType": {}})"),
              HasSubstr("gpuType: unknown field; did you mean "
                        "gpuTypes?"));
  EXPECT_THAT(CalibrationErrorOf(R"({"gpuTypes": [1, 2]})"), HasSubstr("gpuTypes: must be a map"));
  EXPECT_THAT(CalibrationErrorOf(R"({"gpuTypes": {"H100-SXM": {}, "h100-sxm": {}}})"),
              HasSubstr("given more than once"));
  EXPECT_THAT(CalibrationErrorOf(R"({"gpuTypes": {)"), HasSubstr("malformed YAML"));
  EXPECT_EQ(CalibrationErrorOf(""), "calibration: the document is empty");
  EXPECT_EQ(CalibrationErrorOf(R"({"gpuTypes": {"H100\n\u001b[2J": {}}})"),
            "gpuTypes: GPU type names must be non-empty, without control characters or leading "
            "or trailing spaces, got \"H100\\x0a\\x1b[2J\"");
}

// A calibration applies only to the type it names: a misspelt one would be
// ignored without a word, so it is refused, naming the known types; a type
// a cluster file adds to the catalog is known.
TEST(CalibrationTest, ATypeNoCatalogKnowsIsRefused) {
  StatusOr<Calibration> c = ParseCalibration(R"({"gpuTypes": {"h100-sxm": {"gemmEfficiency": 0.8},
                                                              "H100-SMX": {"gemmEfficiency": 0.8}}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const Status checked = CheckCalibrationGpuTypes(*c, GpuCatalog::BuiltIn());
  EXPECT_EQ(checked.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(checked.message(), HasSubstr("gpuTypes.H100-SMX: unknown GPU type \"H100-SMX\""));
  EXPECT_THAT(checked.message(), HasSubstr("H100-SXM"));  // the known ones

  c->by_gpu_type.erase("H100-SMX");
  EXPECT_TRUE(CheckCalibrationGpuTypes(*c, GpuCatalog::BuiltIn()).ok()) << "case is ignored";
}

TEST(CalibrationTest, OversizedIsResourceExhausted) {
  StatusOr<Calibration> c = ParseCalibration(std::string(kMaxDocumentBytes + 1, ' '));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace pacer::planner
