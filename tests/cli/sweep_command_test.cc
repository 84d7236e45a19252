// `pacer sweep`: one table row per GPU count, JSON points, and the SVG chart.
#include <gtest/gtest.h>

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

std::size_t Count(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size())) {
    ++count;
  }
  return count;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

TEST(SweepCommandTest, TableHasOneRowPerGpuCount) {
  const CliRun run =
      RunPacer({"sweep", CliTestData("llama-7b.yaml"), "--gpus", "8..1024", "--now", kNow});
  ASSERT_EQ(run.exit_code, kExitOk) << run.out << run.err;
  const std::vector<std::string> lines = Lines(run.out);
  // Title, header, rule, the rows, then one legend line per code and the
  // pointer to the full reasons.
  ASSERT_EQ(lines.size(), 3u + 8u + 2u) << run.out;
  EXPECT_NE(lines[1].find("GPUS"), std::string::npos);
  EXPECT_NE(lines[1].find("MEETS DEADLINE"), std::string::npos);
  const std::vector<std::string> gpus = {"8 ", "16 ", "32 ", "64 ", "128 ", "256 ", "512 ", "1024 "};
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const std::string& row = lines[3 + i];
    EXPECT_EQ(row.substr(row.find_first_not_of(' '), gpus[i].size()), gpus[i]) << row;
    EXPECT_TRUE(row.ends_with("yes") || row.ends_with("no")) << row;
  }
  // maxGPUs is 512: 1024 is shown, not planned.
  EXPECT_TRUE(std::regex_search(lines[10], std::regex(R"(^ *1024 +no plan: outside-gpu-limits +- )")))
      << lines[10];
  EXPECT_EQ(lines[11],
            "outside-gpu-limits: outside the job's GPU limits (minGPUs 8, maxGPUs 512): not "
            "planned");
}

TEST(SweepCommandTest, NoPlanRowsShowShortCodesThatWidenNoRow) {
  // 1, 2 and 4 GPUs are below minGPUs 8; 24 GPUs split the 1024-sequence
  // batch over 3, 6, 12 or 24 data-parallel ranks, none of which divides it.
  const CliRun run =
      RunPacer({"sweep", CliTestData("llama-7b.yaml"), "--gpus", "1,2,4,8,24", "--now", kNow});
  ASSERT_EQ(run.exit_code, kExitOk) << run.out << run.err;
  const std::vector<std::string> lines = Lines(run.out);
  for (std::size_t i = 1; i < lines.size(); ++i) {  // after the title
    EXPECT_LE(lines[i].size(), 100u) << lines[i];
  }
  for (const char* gpus : {"1", "2", "4"}) {
    EXPECT_TRUE(std::regex_search(
        run.out, std::regex(std::string("(^|\n) *") + gpus + " +no plan: outside-gpu-limits ")))
        << gpus << "\n"
        << run.out;
  }
  EXPECT_TRUE(std::regex_search(run.out, std::regex(R"((^|\n) *24 +no plan: batch-indivisible )")))
      << run.out;
  // One legend line per code, not per row.
  EXPECT_EQ(Count(run.out, "\noutside-gpu-limits: "), 1u) << run.out;
  EXPECT_EQ(Count(run.out, "\nbatch-indivisible: the global batch (1024) is not divisible by "
                           "data-parallel degree x micro-batch"),
            1u)
      << run.out;
}

TEST(SweepCommandTest, JsonPointsMatchTheCounts) {
  const CliRun run = RunPacer(
      {"sweep", CliTestData("llama-7b.yaml"), "--gpus", "8,24,64", "-o", "json", "--now", kNow});
  ASSERT_EQ(run.exit_code, kExitOk) << run.err;
  const json doc = json::parse(run.out);
  ASSERT_EQ(doc["points"].size(), 3u);
  const std::vector<int> expected = {8, 24, 64};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const json& point = doc["points"][i];
    EXPECT_EQ(point["gpus"], expected[i]);
    if (point["plan"].is_null()) {
      EXPECT_FALSE(point["reason"].get<std::string>().empty());
      EXPECT_FALSE(point["meetsDeadline"].get<bool>());
    } else {
      const json& plan = point["plan"];
      EXPECT_EQ(plan["nodes"].get<int>() * plan["gpusPerNode"].get<int>(), expected[i]);
      EXPECT_TRUE(point["reason"].is_null());
      EXPECT_TRUE(point["reasonCode"].is_null());
    }
  }
  // 24 GPUs: a layout divides the count, the batch does not divide over it;
  // the full sentence names the numbers.
  EXPECT_EQ(doc["points"][1]["reasonCode"], "batch-indivisible") << doc.dump(2);
  const std::string reason = doc["points"][1]["reason"].get<std::string>();
  EXPECT_NE(reason.find("global batch (1024) is not divisible by data-parallel degree x "
                        "micro-batch at 24 GPUs: data-parallel degrees 24, 12, 6, 3"),
            std::string::npos)
      << reason;
}

TEST(SweepCommandTest, YamlGivesTheFullReasonOfCountsOutsideTheLimits) {
  const CliRun run = RunPacer(
      {"sweep", CliTestData("llama-7b.yaml"), "--gpus", "4,8", "-o", "yaml", "--now", kNow});
  ASSERT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_NE(run.out.find("reasonCode: \"outside-gpu-limits\""), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("outside the job's GPU limits (spec.resources minGPUs 8, maxGPUs 512)"),
            std::string::npos)
      << run.out;
}

// An --svg that cannot be written says why (it said only "cannot write").
TEST(SweepCommandTest, AnSvgThatCannotBeWrittenSaysWhy) {
  const struct {
    const char* path;
    const char* reason;
  } cases[] = {{"/tmp", "is a directory"},
               {"/nonexistent-folder/sweep.svg", "No such file or directory"},
               {"/dev/full", "No space left on device"}};
  for (const auto& c : cases) {
    const CliRun run = RunPacer(
        {"sweep", CliTestData("llama-7b.yaml"), "--gpus", "8..16", "--svg", c.path, "--now", kNow});
    EXPECT_EQ(run.exit_code, 2) << c.path << "\n" << run.err;
    EXPECT_NE(run.err.find(std::string("--svg: cannot write ") + c.path), std::string::npos)
        << run.err;
    EXPECT_NE(run.err.find(c.reason), std::string::npos) << run.err;
  }
}

TEST(SweepCommandTest, WritesAnSvgChartWithOneMarkerPerPlan) {
  testing::TempDir dir;
  const std::string svg_path = dir.File("sweep.svg");
  const CliRun run = RunPacer({"sweep", CliTestData("llama-7b.yaml"), "--gpus", "8..1024", "--svg",
                               svg_path, "-o", "json", "--now", kNow});
  ASSERT_EQ(run.exit_code, kExitOk) << run.err;
  const json doc = json::parse(run.out);
  std::size_t with_plan = 0;
  for (const json& point : doc["points"]) with_plan += point["plan"].is_null() ? 0 : 1;
  ASSERT_GT(with_plan, 0u);

  const std::string svg = testing::ReadFile(svg_path);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_TRUE(svg.ends_with("</svg>\n"));
  EXPECT_NE(svg.find("xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(svg.find("llama-7b-pretrain"), std::string::npos);
  EXPECT_NE(svg.find("class=\"deadline\""), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
  EXPECT_NE(svg.find(">deadline</text>"), std::string::npos);
  EXPECT_EQ(Count(svg, "class=\"marker time\""), with_plan);
  EXPECT_EQ(Count(svg, "class=\"marker gpu-hours\""), with_plan);
  // Tags balance: every element opened is closed (a cheap well-formedness check).
  EXPECT_EQ(Count(svg, "<g"), Count(svg, "</g>"));
  EXPECT_EQ(Count(svg, "<text"), Count(svg, "</text>"));
  EXPECT_EQ(Count(svg, "<title>"), Count(svg, "</title>"));
  // No coordinate is NaN or infinite.
  for (const char* bad : {"\"nan", "\"-nan", "\"inf", "\"-inf", ",nan", ",inf", ",-inf"}) {
    EXPECT_EQ(svg.find(bad), std::string::npos) << bad;
  }
}

TEST(SweepCommandTest, UnwritableSvgPathExitsWithTwo) {
  const CliRun run = RunPacer({"sweep", CliTestData("llama-7b.yaml"), "--gpus", "8..16", "--svg",
                               "/nonexistent/dir/sweep.svg", "--now", kNow});
  EXPECT_EQ(run.exit_code, kExitInvalidInput);
  EXPECT_NE(run.err.find("--svg"), std::string::npos) << run.err;
}

TEST(SweepCommandTest, OutputIsDeterministic) {
  const std::vector<std::string> args = {
      "sweep", CliTestData("llama-7b.yaml"), "--gpus", "8..256", "--now", kNow};
  EXPECT_EQ(RunPacer(args).out, RunPacer(args).out);
}

TEST(SweepCommandTest, WithoutDeadlineDrawsNoDeadlineLine) {
  testing::TempDir dir;
  const std::string svg_path = dir.File("sweep.svg");
  const CliRun run = testing::RunPacer({"sweep", testing::CliTestData("no-deadline.yaml"), "--gpus",
                                        "8..64", "--svg", svg_path, "--now", testing::kNow});
  ASSERT_EQ(run.exit_code, kExitOk) << run.err;
  const std::string svg = testing::ReadFile(svg_path);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(svg.find("class=\"deadline\""), std::string::npos);
}

}  // namespace
}  // namespace pacer::cli
