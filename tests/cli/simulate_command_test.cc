// `pacer simulate`: the replay of a trace through the scheduler (invariants
// of its report, not hard-coded ratios), the SVG, and bad input.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli_test_util.h"

namespace pacer::cli {
namespace {

using testing::CliRun;
using testing::ReadFile;
using testing::RunPacer;
using testing::SourcePath;
using testing::TempDir;

std::string Trace(const std::string& name) {
  return SourcePath("tests/testdata/elasticflow/" + name);
}

TEST(SimulateCommandTest, JsonReportIsConsistentForEveryPolicy) {
  const CliRun run = RunPacer(
      {"simulate", Trace("elasticVpollux_e.csv"), "--gpus", "64", "--policy", "all", "-o", "json"});
  ASSERT_EQ(run.exit_code, kExitOk) << run.err;
  const nlohmann::json doc = nlohmann::json::parse(run.out);
  EXPECT_EQ(doc["gpuType"], "T4");  // the only type with curves for every model
  EXPECT_EQ(doc["jobs"], 195);
  ASSERT_EQ(doc["results"].size(), 3u);
  for (const nlohmann::json& result : doc["results"]) {
    const int met = result["metDeadline"];
    const int with_deadline = result["jobsWithDeadline"];
    EXPECT_EQ(with_deadline, 195);
    EXPECT_LE(met, with_deadline);
    EXPECT_DOUBLE_EQ(result["deadlineRatio"].get<double>(),
                     static_cast<double>(met) / with_deadline);
    EXPECT_EQ(result["admitted"].get<int>() + result["rejected"].get<int>(), 195);
    EXPECT_GT(result["gpuUtilisation"].get<double>(), 0);
    EXPECT_LE(result["gpuUtilisation"].get<double>(), 1.0 + 1e-9);
    if (result["policy"] != "pacer") {
      EXPECT_EQ(result["rejected"], 0);  // no admission control
    }
  }
}

TEST(SimulateCommandTest, PerJobOutcomesAddUp) {
  const CliRun run = RunPacer({"simulate", Trace("cluster10.csv"), "--gpus", "256", "-o", "json"});
  ASSERT_EQ(run.exit_code, kExitOk) << run.err;
  const nlohmann::json result = nlohmann::json::parse(run.out)["results"][0];
  ASSERT_EQ(result["jobs"].size(), 260u);
  int met = 0;
  int late = 0;
  for (const nlohmann::json& job : result["jobs"]) {
    if (job["metDeadline"].get<bool>()) ++met;
    if (job["admitted"].get<bool>()) {
      EXPECT_TRUE(job["finished"].get<bool>()) << job["id"];  // never dropped
      if (!job["metDeadline"].get<bool>()) ++late;
    } else {
      EXPECT_FALSE(job["metDeadline"].get<bool>());
      EXPECT_FALSE(job["rejectReason"].get<std::string>().empty());
    }
  }
  EXPECT_EQ(met, result["metDeadline"]);
  EXPECT_EQ(late, result["admittedLate"]);
}

TEST(SimulateCommandTest, TableAndSvg) {
  TempDir dir;
  const std::string svg = dir.File("gpus.svg");
  const CliRun run = RunPacer(
      {"simulate", Trace("cluster10.csv"), "--gpus", "32", "--policy", "edf", "--svg", svg});
  ASSERT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_NE(run.out.find("edf"), std::string::npos);
  EXPECT_NE(run.out.find("deadlines met"), std::string::npos);
  const std::string chart = ReadFile(svg);
  EXPECT_EQ(chart.rfind("<svg", 0), 0u);
  EXPECT_NE(chart.find("<rect x="), std::string::npos);
  EXPECT_NE(chart.find("pool: 32 GPUs"), std::string::npos);
}

TEST(SimulateCommandTest, SameInputSameOutput) {
  const std::vector<std::string> args = {
      "simulate", Trace("elasticVpollux_e.csv"), "--gpus", "64", "-o", "json"};
  EXPECT_EQ(RunPacer(args).out, RunPacer(args).out);
}

TEST(SimulateCommandTest, BadInputExitsWithTwoAndSaysWhere) {
  TempDir dir;
  const std::string trace = dir.File("trace.csv");
  {
    std::ofstream out(trace);
    out << "job_id,submit_time,iteration,model_name,ddl,batch_size\n"
           "a,0,100,bert,50,64\n"
           "b,0,100,bert,oops,64\n";
  }
  CliRun run = RunPacer({"simulate", trace, "--gpus", "8"});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);
  EXPECT_NE(run.err.find("trace.csv:3: column 'ddl': 'oops'"), std::string::npos) << run.err;

  {
    std::ofstream out(trace);
    out << "job_id,submit_time,iteration,model_name,ddl,batch_size\na,0,100,llama,50,64\n";
  }
  run = RunPacer({"simulate", trace, "--gpus", "8", "--gpu-type", "A100"});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);
  EXPECT_NE(run.err.find("no curve for llama (batch 64) on A100"), std::string::npos) << run.err;

  run = RunPacer({"simulate", Trace("cluster10.csv"), "--gpus", "8", "--policy", "sjf"});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);
  EXPECT_NE(run.err.find("unknown policy 'sjf'"), std::string::npos);

  run = RunPacer({"simulate", dir.File("missing.csv"), "--gpus", "8"});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);

  // A NaN factor passed CLI11's range and ran a whole replay on NaN plans.
  for (const char* flag : {"--hysteresis", "--headroom"}) {
    run = RunPacer({"simulate", Trace("cluster10.csv"), "--gpus", "8", flag, "nan"});
    EXPECT_EQ(run.exit_code, kExitInvalidInput) << flag;
    EXPECT_NE(run.err.find("Value nan is not a finite number (FLOAT in [0"), std::string::npos)
        << run.err;
  }
}

}  // namespace
}  // namespace pacer::cli
