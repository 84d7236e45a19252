// `pacer plan`: the JSON/YAML contract fields and their invariants, the
// human table, exit codes 0 / 3 / 4, and deterministic output.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <ctime>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli_test_util.h"

namespace pacer::cli {
namespace {

using nlohmann::json;
using testing::CliRun;
using testing::CliTestData;
using testing::kNow;
using testing::RunPacer;

const std::vector<std::string> kPlanFields = {"gpuType",
                                              "pool",
                                              "nodes",
                                              "gpusPerNode",
                                              "tensorParallel",
                                              "pipelineParallel",
                                              "dataParallel",
                                              "virtualStages",
                                              "sequenceParallel",
                                              "zeroStage",
                                              "microBatchSize",
                                              "gradientAccumulationSteps",
                                              "activationCheckpointing",
                                              "predictedStepSeconds",
                                              "predictedTotalSeconds",
                                              "predictedMemoryGiB",
                                              "predictedCompletionTime",
                                              "gpuHours",
                                              "cost",
                                              "mfu"};

json PlanJson(const std::vector<std::string>& args) {
  const CliRun run = RunPacer(args);
  EXPECT_TRUE(run.err.empty()) << run.err;
  return json::parse(run.out);
}

void ExpectPlanInvariants(const json& plan, int64_t global_batch_size) {
  for (const std::string& field : kPlanFields) {
    EXPECT_TRUE(plan.contains(field)) << "missing plan." << field << " in " << plan.dump();
  }
  const int64_t b = plan["microBatchSize"].get<int64_t>();
  const int64_t k = plan["gradientAccumulationSteps"].get<int64_t>();
  const int64_t t = plan["tensorParallel"].get<int64_t>();
  const int64_t p = plan["pipelineParallel"].get<int64_t>();
  const int64_t d = plan["dataParallel"].get<int64_t>();
  EXPECT_EQ(b * k * d, global_batch_size) << plan.dump();
  EXPECT_EQ(plan["nodes"].get<int64_t>() * plan["gpusPerNode"].get<int64_t>(), t * p * d)
      << plan.dump();
  const std::string recompute = plan["activationCheckpointing"].get<std::string>();
  EXPECT_TRUE(recompute == "none" || recompute == "selective" || recompute == "full") << recompute;
  EXPECT_GT(plan["predictedStepSeconds"].get<double>(), 0);
  EXPECT_GE(plan["predictedTotalSeconds"].get<double>(),
            plan["predictedStepSeconds"].get<double>());
  EXPECT_GT(plan["predictedMemoryGiB"].get<double>(), 0);
  EXPECT_GT(plan["gpuHours"].get<double>(), 0);
  EXPECT_GT(plan["mfu"].get<double>(), 0);
  EXPECT_LT(plan["mfu"].get<double>(), 1);
  EXPECT_TRUE(plan["cost"].is_null() || plan["cost"].get<double>() > 0);
}

TEST(PlanCommandTest, JsonHasTheContractFields) {
  const CliRun run = RunPacer({"plan", CliTestData("llama-7b.yaml"), "--cluster",
                               CliTestData("cluster.yaml"), "-o", "json", "--now", kNow});
  ASSERT_EQ(run.exit_code, kExitOk) << run.out << run.err;
  const json doc = json::parse(run.out);
  for (const char* key :
       {"plan", "feasible", "alternatives", "breakdown", "deadline", "now", "warnings", "search"}) {
    EXPECT_TRUE(doc.contains(key)) << key;
  }
  EXPECT_FALSE(doc.contains("advice"));
  EXPECT_TRUE(doc["feasible"].get<bool>());
  EXPECT_EQ(doc["now"], kNow);
  EXPECT_EQ(doc["deadline"], "2026-07-01T00:00:00Z");
  ExpectPlanInvariants(doc["plan"], 1024);
  // The fixture cluster has prices.
  EXPECT_TRUE(doc["plan"]["cost"].is_number());
  for (const json& alternative : doc["alternatives"]) ExpectPlanInvariants(alternative, 1024);

  for (const char* key : {"weightsGiB", "gradientsGiB", "optimizerGiB", "activationsGiB",
                          "logitsGiB", "reserveGiB", "totalGiB", "capacityGiB"}) {
    EXPECT_TRUE(doc["breakdown"]["memory"].contains(key)) << key;
  }
  for (const char* key :
       {"computeSeconds", "recomputeSeconds", "tensorParallelCommSeconds", "pipelineBubbleSeconds",
        "pipelineP2PSeconds", "dataParallelCommSeconds", "dataParallelExposedSeconds",
        "optimizerSeconds", "calibrationRatio", "stepSeconds"}) {
    EXPECT_TRUE(doc["breakdown"]["stepTime"].contains(key)) << key;
  }
  for (const char* key :
       {"optimizerSteps", "trainingSeconds", "startupSeconds", "checkpointIntervalSeconds",
        "checkpointWriteSeconds", "checkpointOverheadSeconds", "jobMTBFSeconds",
        "failureReworkSeconds", "totalSeconds"}) {
    EXPECT_TRUE(doc["breakdown"]["totalTime"].contains(key)) << key;
  }
  for (const char* key : {"layoutsConsidered", "evaluated", "pruned"}) {
    EXPECT_TRUE(doc["search"][key].is_number_integer()) << key;
  }
  // The breakdown is the plan's, and memory fits.
  EXPECT_EQ(doc["breakdown"]["memory"]["totalGiB"], doc["plan"]["predictedMemoryGiB"]);
  EXPECT_LE(doc["breakdown"]["memory"]["totalGiB"].get<double>(),
            doc["breakdown"]["memory"]["capacityGiB"].get<double>());
  EXPECT_EQ(doc["breakdown"]["stepTime"]["stepSeconds"], doc["plan"]["predictedStepSeconds"]);
  EXPECT_EQ(doc["breakdown"]["totalTime"]["totalSeconds"], doc["plan"]["predictedTotalSeconds"]);
  // It completes before the deadline.
  EXPECT_LE(doc["plan"]["predictedCompletionTime"].get<std::string>(),
            doc["deadline"].get<std::string>());
}

TEST(PlanCommandTest, ExampleManifestHasTheContractFields) {
  const std::string example = testing::SourcePath("manifests/examples/llama-7b-h100.yaml");
  if (!std::filesystem::exists(example)) GTEST_SKIP() << example << " not written yet";
  const CliRun run = RunPacer({"plan", example, "-o", "json", "--now", kNow});
  ASSERT_TRUE(run.exit_code == kExitOk || run.exit_code == kExitInfeasible)
      << run.exit_code << run.err;
  const json doc = json::parse(run.out);
  const YAML::Node manifest = YAML::LoadFile(example);
  ExpectPlanInvariants(doc["plan"], manifest["spec"]["training"]["globalBatchSize"].as<int64_t>());
}

TEST(PlanCommandTest, CompletionTimeIsNowPlusTotalSeconds) {
  const json doc = PlanJson({"plan", CliTestData("llama-7b.yaml"), "-o", "json", "--now", kNow});
  const double total = doc["plan"]["predictedTotalSeconds"].get<double>();
  // 2026-06-01T00:00:00Z; the JSON total is rounded to 6 digits.
  const int64_t now = 1780272000;
  const std::string completion = doc["plan"]["predictedCompletionTime"];
  std::tm tm = {};
  ASSERT_NE(strptime(completion.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm), nullptr) << completion;
  const int64_t completion_unix = timegm(&tm);
  EXPECT_NEAR(static_cast<double>(completion_unix - now), total, 1 + total * 1e-5);
}

TEST(PlanCommandTest, YamlCarriesTheSameValuesAsJson) {
  const std::vector<std::string> base = {"plan",      CliTestData("llama-7b.yaml"),
                                         "--cluster", CliTestData("cluster.yaml"),
                                         "--now",     kNow};
  std::vector<std::string> json_args = base;
  json_args.insert(json_args.end(), {"-o", "json"});
  std::vector<std::string> yaml_args = base;
  yaml_args.insert(yaml_args.end(), {"-o", "yaml"});
  const CliRun json_run = RunPacer(json_args);
  const CliRun yaml_run = RunPacer(yaml_args);
  ASSERT_EQ(json_run.exit_code, kExitOk) << json_run.err;
  ASSERT_EQ(yaml_run.exit_code, kExitOk) << yaml_run.err;
  const json doc = json::parse(json_run.out);
  const YAML::Node yaml = YAML::Load(yaml_run.out);

  // Walk the JSON tree and compare every scalar with the YAML one.
  std::function<void(const json&, const YAML::Node&, const std::string&)> compare =
      [&](const json& j, const YAML::Node& y, const std::string& where) {
        SCOPED_TRACE(where);
        if (j.is_object()) {
          ASSERT_TRUE(y.IsMap());
          EXPECT_EQ(y.size(), j.size());
          for (const auto& [key, value] : j.items()) compare(value, y[key], where + "." + key);
        } else if (j.is_array()) {
          ASSERT_TRUE(y.IsSequence());
          ASSERT_EQ(y.size(), j.size());
          for (std::size_t i = 0; i < j.size(); ++i) {
            compare(j[i], y[i], where + "[" + std::to_string(i) + "]");
          }
        } else if (j.is_null()) {
          EXPECT_TRUE(y.IsNull());
        } else if (j.is_boolean()) {
          EXPECT_EQ(y.as<bool>(), j.get<bool>());
        } else if (j.is_number_integer()) {
          EXPECT_EQ(y.as<int64_t>(), j.get<int64_t>());
        } else if (j.is_number()) {
          EXPECT_EQ(y.as<double>(), j.get<double>());
        } else {
          EXPECT_EQ(y.as<std::string>(), j.get<std::string>());
        }
      };
  compare(doc, yaml, "");
}

TEST(PlanCommandTest, TableShowsThePlanAgainstTheDeadline) {
  const CliRun run = RunPacer({"plan", CliTestData("llama-7b.yaml"), "--cluster",
                               CliTestData("cluster.yaml"), "--now", kNow});
  ASSERT_EQ(run.exit_code, kExitOk) << run.err;
  for (const char* text : {"Plan for research/llama-7b-pretrain", "Layout", "Step time",
                           "Total time", "Completion", "Deadline", "2026-07-01T00:00:00Z",
                           "slack +", "Memory", "GPU-hours", "Cost", "Alternatives"}) {
    EXPECT_NE(run.out.find(text), std::string::npos) << text << "\n" << run.out;
  }
  EXPECT_EQ(run.out.find("INFEASIBLE"), std::string::npos);
  // Evaluations outnumber layouts (micro-batch and recompute variants): the
  // wording says so instead of "270 layouts (507 evaluated)".
  EXPECT_TRUE(std::regex_search(
      run.out,
      std::regex(
          R"(Searched [0-9,]+ layouts: [0-9,]+ cost-model evaluations \(micro-batch and recompute variants\), [0-9,]+ skipped by a bound)")))
      << run.out;
}

TEST(PlanCommandTest, AlternativesFlagLimitsTheRunnersUp) {
  json doc = PlanJson(
      {"plan", CliTestData("llama-7b.yaml"), "-o", "json", "--alternatives", "2", "--now", kNow});
  EXPECT_LE(doc["alternatives"].size(), 2u);
  doc = PlanJson(
      {"plan", CliTestData("llama-7b.yaml"), "-o", "json", "--alternatives", "0", "--now", kNow});
  EXPECT_TRUE(doc["alternatives"].empty());
}

TEST(PlanCommandTest, CalibrationChangesThePrediction) {
  const std::vector<std::string> base = {"plan",      CliTestData("llama-7b.yaml"),
                                         "--cluster", CliTestData("cluster.yaml"),
                                         "-o",        "json",
                                         "--now",     kNow};
  std::vector<std::string> calibrated = base;
  calibrated.insert(calibrated.end(), {"--calibration", CliTestData("calibration.json")});
  const json plain = PlanJson(base);
  const json with_calibration = PlanJson(calibrated);
  if (with_calibration["plan"]["gpuType"] == "H100-SXM") {
    EXPECT_EQ(with_calibration["breakdown"]["stepTime"]["calibrationRatio"].get<double>(), 1.05);
  }
  EXPECT_NE(plain.dump(), with_calibration.dump());
}

TEST(PlanCommandTest, ImpossibleDeadlineExitsWithThreeAndPrintsTheFastestPlan) {
  const CliRun run =
      RunPacer({"plan", CliTestData("impossible.yaml"), "-o", "json", "--now", kNow});
  ASSERT_EQ(run.exit_code, kExitInfeasible) << run.out << run.err;
  const json doc = json::parse(run.out);
  EXPECT_FALSE(doc["feasible"].get<bool>());
  ASSERT_TRUE(doc["plan"].is_object());
  ExpectPlanInvariants(doc["plan"], 1024);
  ASSERT_TRUE(doc.contains("advice"));
  const json& advice = doc["advice"];
  for (const char* key : {"lateSeconds", "earliestCompletionTime", "gpusNeeded", "gpusNeededType",
                          "nearbyGlobalBatchSizes", "summary"}) {
    EXPECT_TRUE(advice.contains(key)) << key;
  }
  EXPECT_GT(advice["lateSeconds"].get<double>(), 0);
  EXPECT_GT(doc["plan"]["predictedCompletionTime"].get<std::string>(),
            doc["deadline"].get<std::string>());
}

TEST(PlanCommandTest, ImpossibleDeadlineTableSaysInfeasible) {
  const CliRun run = RunPacer({"plan", CliTestData("impossible.yaml"), "--now", kNow});
  ASSERT_EQ(run.exit_code, kExitInfeasible) << run.err;
  EXPECT_EQ(run.out.rfind("INFEASIBLE: finishes ", 0), 0u) << run.out;
  EXPECT_NE(run.out.find("after the deadline"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Fastest plan"), std::string::npos) << run.out;
}

TEST(PlanCommandTest, NothingFitsExitsWithFour) {
  const CliRun run = RunPacer({"plan", CliTestData("too-big.yaml"), "--now", kNow});
  EXPECT_EQ(run.exit_code, kExitNothingFits) << run.out << run.err;
  EXPECT_EQ(run.err.rfind("error: ", 0), 0u) << run.err;
  EXPECT_NE(run.err.find("memory"), std::string::npos) << "the tightest constraint: " << run.err;
  EXPECT_TRUE(run.out.empty()) << run.out;
}

TEST(PlanCommandTest, OutputIsDeterministic) {
  for (const char* format : {"table", "json", "yaml"}) {
    SCOPED_TRACE(format);
    const std::vector<std::string> args = {"plan",      CliTestData("llama-7b.yaml"),
                                           "--cluster", CliTestData("cluster.yaml"),
                                           "-o",        format,
                                           "--now",     kNow};
    const CliRun first = RunPacer(args);
    const CliRun second = RunPacer(args);
    EXPECT_EQ(first.exit_code, second.exit_code);
    EXPECT_EQ(first.out, second.out);
    EXPECT_EQ(first.err, second.err);
  }
}

}  // namespace
}  // namespace pacer::cli

namespace pacer::cli {
namespace {

TEST(PlanCommandTest, JobWithoutDeadlineIsFeasibleWithNullDeadline) {
  const CliRun run = testing::RunPacer(
      {"plan", testing::CliTestData("no-deadline.yaml"), "-o", "json", "--now", testing::kNow});
  ASSERT_EQ(run.exit_code, kExitOk) << run.err;
  const nlohmann::json doc = nlohmann::json::parse(run.out);
  EXPECT_TRUE(doc["feasible"].get<bool>());
  EXPECT_TRUE(doc["deadline"].is_null());
  EXPECT_FALSE(doc.contains("advice"));
  // The default inventory has no prices: cost is unknown, not zero.
  EXPECT_TRUE(doc["plan"]["cost"].is_null());
  ExpectPlanInvariants(doc["plan"], 256);

  const CliRun table =
      testing::RunPacer({"plan", testing::CliTestData("no-deadline.yaml"), "--now", testing::kNow});
  EXPECT_NE(table.out.find("Deadline     none"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("Cost         unknown"), std::string::npos) << table.out;
}

}  // namespace
}  // namespace pacer::cli
