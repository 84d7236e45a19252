// `pacer explain`: bars for memory and step time, and why other layouts
// lost, in human and JSON form.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "cli/commands.h"
#include "cli_test_util.h"

namespace pacer::cli {
namespace {

using nlohmann::json;
using testing::CliRun;
using testing::CliTestData;
using testing::kNow;
using testing::RunPacer;

TEST(ExplainCommandTest, ShowsBarsAndRejectionReasons) {
  const CliRun run = RunPacer({"explain", CliTestData("llama-7b.yaml"), "--cluster",
                               CliTestData("cluster.yaml"), "--now", kNow});
  ASSERT_EQ(run.exit_code, kExitOk) << run.out << run.err;
  for (const char* text : {"Plan for research/llama-7b-pretrain", "Memory per GPU", "weights",
                           "optimizer state", "activations", "capacity", "Step time (", "compute",
                           "Why other layouts lost", "\u2588" /* full block */}) {
    EXPECT_NE(run.out.find(text), std::string::npos) << text << "\n" << run.out;
  }
}

TEST(ExplainCommandTest, JsonReasonsCountAtLeastOneCandidate) {
  const CliRun run = RunPacer({"explain", CliTestData("llama-7b.yaml"), "--cluster",
                               CliTestData("cluster.yaml"), "-o", "json", "--now", kNow});
  ASSERT_EQ(run.exit_code, kExitOk) << run.err;
  const json doc = json::parse(run.out);
  ASSERT_TRUE(doc["reasons"].is_array());
  int64_t total = 0;
  for (const json& reason : doc["reasons"]) {
    EXPECT_TRUE(reason["reason"].is_string());
    EXPECT_GT(reason["count"].get<int64_t>(), 0);
    EXPECT_TRUE(reason.contains("detail"));
    EXPECT_TRUE(reason["best"].is_null() || reason["best"].contains("gpuType"));
    total += reason["count"].get<int64_t>();
  }
  EXPECT_GE(total, 1);
  // The explanation is of the same plan `pacer plan` chooses.
  const CliRun plan = RunPacer({"plan", CliTestData("llama-7b.yaml"), "--cluster",
                                CliTestData("cluster.yaml"), "-o", "json", "--now", kNow});
  EXPECT_EQ(json::parse(plan.out)["plan"], doc["plan"]);
}

TEST(ExplainCommandTest, EveryReasonInJsonIsListedInTheTable) {
  const std::vector<std::string> base = {"explain", CliTestData("llama-7b.yaml"), "--now", kNow};
  const CliRun table = RunPacer(base);
  std::vector<std::string> json_args = base;
  json_args.insert(json_args.end(), {"-o", "json"});
  const json doc = json::parse(RunPacer(json_args).out);
  for (const json& reason : doc["reasons"]) {
    EXPECT_NE(table.out.find(reason["reason"].get<std::string>()), std::string::npos)
        << reason.dump();
  }
}

TEST(ExplainCommandTest, InfeasibleJobExitsWithThree) {
  const CliRun run = RunPacer({"explain", CliTestData("impossible.yaml"), "--now", kNow});
  EXPECT_EQ(run.exit_code, kExitInfeasible) << run.err;
  EXPECT_NE(run.out.find("INFEASIBLE"), std::string::npos);
  EXPECT_NE(run.out.find("misses-deadline"), std::string::npos) << run.out;
}

TEST(ExplainCommandTest, AdviceBeyondMaxGpusNamesTheLimit) {
  // impossible.yaml allows at most 64 GPUs; the advice may need more, and
  // must then say that maxGPUs forbids them.
  const CliRun run = RunPacer({"explain", CliTestData("impossible.yaml"), "--now", kNow});
  ASSERT_EQ(run.exit_code, kExitInfeasible) << run.err;
  const std::string prefix = "GPUs that would meet the deadline: ";
  const size_t at = run.out.find(prefix);
  ASSERT_NE(at, std::string::npos) << run.out;
  const int needed = std::stoi(run.out.substr(at + prefix.size()));
  ASSERT_GT(needed, 64) << run.out;
  EXPECT_NE(run.out.find("more than spec.resources.maxGPUs (64): raise maxGPUs to " +
                         std::to_string(needed)),
            std::string::npos)
      << run.out;
}

TEST(ExplainCommandTest, SmallModelTimesNeverReadZero) {
  // The quickstart's tensor-parallel and optimizer times are microseconds.
  const CliRun run =
      RunPacer({"explain", std::string(PACER_SOURCE_DIR) + "/manifests/examples/quickstart.yaml",
                "--now", kNow});
  ASSERT_NE(run.out.find("Step time ("), std::string::npos) << run.out << run.err;
  EXPECT_EQ(run.out.find(" 0.0 ms"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find(" 0.0 GiB"), std::string::npos) << run.out;
}

TEST(ExplainCommandTest, SaysWhenTheBuiltInInventoryIsUsed) {
  const CliRun built_in = RunPacer({"explain", CliTestData("llama-7b.yaml"), "--now", kNow});
  EXPECT_NE(built_in.out.find("Inventory: the built-in example"), std::string::npos)
      << built_in.out;
  const CliRun own = RunPacer({"explain", CliTestData("llama-7b.yaml"), "--cluster",
                               CliTestData("cluster.yaml"), "--now", kNow});
  EXPECT_EQ(own.out.find("built-in"), std::string::npos) << own.out;
}

TEST(ExplainCommandTest, NothingFitsAdvisesOnlyWhatTheClosestLayoutLacks) {
  const CliRun run = RunPacer({"explain", CliTestData("too-big.yaml"), "--now", kNow});
  ASSERT_EQ(run.exit_code, kExitNothingFits) << run.out << run.err;
  std::smatch closest;
  ASSERT_TRUE(std::regex_search(run.err, closest, std::regex(R"(the closest, ([^,]+),)")))
      << run.err;
  const std::string layout = closest[1];
  // The closest layout already recomputes everything: advising it is a contradiction.
  if (layout.find(" full") != std::string::npos) {
    EXPECT_EQ(run.err.find("full activation checkpointing"), std::string::npos) << run.err;
  }
  if (layout.find(" z3 ") != std::string::npos) {
    EXPECT_EQ(run.err.find("ZeRO stage 3"), std::string::npos) << run.err;
  }
  EXPECT_NE(run.err.find("GPUs with more memory"), std::string::npos) << run.err;
}

TEST(ExplainCommandTest, NothingFitsExitsWithFour) {
  const CliRun run = RunPacer({"explain", CliTestData("too-big.yaml"), "--now", kNow});
  EXPECT_EQ(run.exit_code, kExitNothingFits) << run.out << run.err;
}

TEST(ExplainCommandTest, OutputIsDeterministic) {
  const std::vector<std::string> args = {"explain", CliTestData("llama-7b.yaml"), "--now", kNow};
  EXPECT_EQ(RunPacer(args).out, RunPacer(args).out);
}

}  // namespace
}  // namespace pacer::cli
