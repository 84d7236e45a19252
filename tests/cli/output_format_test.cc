// The building blocks of the CLI's output: rounding, tables, bars, human
// number formats, XML escaping, JSON -> YAML, and the SVG chart on
// hand-made sweep points (no planner involved).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli/explain_output.h"
#include "cli/format.h"
#include "cli/plan_output.h"
#include "cli/svg_chart.h"
#include "cli/table.h"
#include "cli/yaml_output.h"
#include "pacer/planner/units.h"

namespace pacer::cli {
namespace {

TEST(RoundSignificantTest, KeepsSixDigits) {
  EXPECT_EQ(RoundSignificant(7.912345678), 7.91235);
  EXPECT_EQ(RoundSignificant(123456789.0), 123457000.0);
  EXPECT_EQ(RoundSignificant(0.000123456789), 0.000123457);
  EXPECT_EQ(RoundSignificant(-2.5e-3, 1), -0.003);
  EXPECT_EQ(RoundSignificant(0.0), 0.0);
}

TEST(TableTest, AlignsColumnsAndTrimsTrailingBlanks) {
  Table table({"A", "NUMBER", "C"}, {Table::Align::kLeft, Table::Align::kRight});
  table.AddRow({"x", "1", ""});
  table.AddRow({"longer", "12345", "z"});
  std::ostringstream out;
  table.Write(out, "  ");
  EXPECT_EQ(out.str(),
            "  A       NUMBER  C\n"
            "  ------  ------  -\n"
            "  x            1\n"
            "  longer   12345  z\n");
}

TEST(TableTest, CountsCodePointsNotBytes) {
  EXPECT_EQ(DisplayWidth("\u2588\u2588a"), 3u);
  EXPECT_EQ(DisplayWidth(""), 0u);
}

TEST(HorizontalBarTest, FillsByEighths) {
  EXPECT_EQ(HorizontalBar(0, 4), "    ");
  EXPECT_EQ(HorizontalBar(1, 4), "\u2588\u2588\u2588\u2588");
  EXPECT_EQ(HorizontalBar(0.5, 4), "\u2588\u2588  ");
  EXPECT_EQ(HorizontalBar(1.0 / 32, 4), "\u258F   ");  // one eighth of a cell
  EXPECT_EQ(HorizontalBar(7, 2), "\u2588\u2588");      // clamped
  EXPECT_EQ(HorizontalBar(-1, 2), "  ");
  for (double f : {0.0, 0.13, 0.5, 0.77, 0.999, 1.0}) {
    EXPECT_EQ(DisplayWidth(HorizontalBar(f, 40)), 40u) << f;
  }
}

TEST(FormatTest, HumanNumbers) {
  EXPECT_EQ(FormatFixed(3.14159, 2), "3.14");
  EXPECT_EQ(FormatFixed(-0.001, 2), "0.00");
  EXPECT_EQ(FormatGrouped(1234567.8), "1,234,568");
  EXPECT_EQ(FormatGrouped(-1234), "-1,234");
  EXPECT_EQ(FormatGrouped(999), "999");
  EXPECT_EQ(FormatSeconds(7.912), "7.91 s");
  EXPECT_EQ(FormatSeconds(0.412), "0.412 s");
  EXPECT_EQ(FormatSeconds(0.0123), "12.3 ms");
  // Small models: never "0.0 ms" for a time that is not zero.
  EXPECT_EQ(FormatSeconds(0.00421), "4.21 ms");
  EXPECT_EQ(FormatSeconds(3.85e-5), "38.5 \u00b5s");
  EXPECT_EQ(FormatSeconds(4.2e-6), "4.20 \u00b5s");
  EXPECT_EQ(FormatSeconds(5.5e-7), "550.0 ns");
  EXPECT_EQ(FormatSeconds(0), "0 s");
  EXPECT_EQ(FormatGiB(61.25 * kBytesPerGiB), "61.2 GiB");
  EXPECT_EQ(FormatGiB(12.4 * 1024 * 1024), "12.4 MiB");
  EXPECT_EQ(FormatGiB(3000), "2.9 KiB");
  EXPECT_EQ(FormatGiB(0), "0.0 GiB");
  EXPECT_EQ(FormatGpuHours(6340.4), "6,340");
  EXPECT_EQ(FormatGpuHours(12.46), "12.5");
  EXPECT_EQ(FormatCost(15800.456), "15,800.46");
  EXPECT_EQ(FormatCost(1999.999), "2,000.00");
  EXPECT_EQ(FormatCost(0), "unknown");
  EXPECT_EQ(FormatPercent(0.4512), "45.1%");
}

TEST(XmlEscapeTest, EscapesMarkup) {
  EXPECT_EQ(XmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
}

TEST(JsonToYamlTest, KeepsValuesAndTypes) {
  Json json;
  json["step"] = 7.9;
  json["cost"] = nullptr;
  json["feasible"] = false;
  json["when"] = "2026-06-01T00:00:00Z";
  json["pool"] = "yes";  // must stay a string
  json["sizes"] = {1020, 1032};
  json["empty"] = Json::array();
  json["nested"]["n"] = 3;
  const std::string yaml = JsonToYaml(json);
  EXPECT_NE(yaml.find("step: 7.9\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("cost: null\n"), std::string::npos) << yaml;
  const YAML::Node node = YAML::Load(yaml);
  EXPECT_EQ(node["step"].as<double>(), 7.9);
  EXPECT_TRUE(node["cost"].IsNull());
  EXPECT_FALSE(node["feasible"].as<bool>());
  EXPECT_EQ(node["when"].as<std::string>(), "2026-06-01T00:00:00Z");
  EXPECT_EQ(node["pool"].as<std::string>(), "yes");
  EXPECT_EQ(node["sizes"][1].as<int>(), 1032);
  EXPECT_EQ(node["empty"].size(), 0u);
  EXPECT_EQ(node["nested"]["n"].as<int>(), 3);
}

planner::SweepPoint Point(int gpus, double hours, bool meets) {
  planner::SweepPoint point;
  point.gpus = gpus;
  planner::Evaluation e;
  e.layout.gpu_type = "H100-SXM";
  e.layout.nodes = gpus / 8;
  e.layout.gpus_per_node = 8;
  e.total.total_seconds = hours * 3600;
  e.gpu_hours = hours * gpus;
  point.best = e;
  point.meets_deadline = meets;
  return point;
}

TEST(SweepChartTest, MarkersDeadlineAndTitle) {
  std::vector<planner::SweepPoint> points = {Point(8, 400, false), Point(16, 200, true),
                                             Point(32, 100, true)};
  planner::SweepPoint none;
  none.gpus = 64;
  none.reason = "layout-indivisible";
  points.push_back(none);
  const std::string svg = SweepChartSvg("a<b", points, 250 * 3600.0);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("a&lt;b: predicted"), std::string::npos);
  EXPECT_NE(svg.find("class=\"deadline\""), std::string::npos);
  EXPECT_NE(svg.find("(days)"), std::string::npos);  // 400 h is long: days
  std::size_t markers = 0;
  for (std::size_t at = svg.find("class=\"marker time\""); at != std::string::npos;
       at = svg.find("class=\"marker time\"", at + 1)) {
    ++markers;
  }
  EXPECT_EQ(markers, 3u);
  // One hollow marker: the plan that misses the deadline.
  EXPECT_NE(svg.find("fill=\"white\"><title>8 GPUs"), std::string::npos) << svg;
}

TEST(SweepChartTest, WideRangesUseALogAxisAndTheChosenPlanIsRinged) {
  // 1 GPU: 40 days; 256 GPUs: 4 hours. Cheapest meeting the deadline: 32.
  std::vector<planner::SweepPoint> points;
  planner::SweepPoint none;
  none.gpus = 1;
  none.reason = "out-of-memory: needs 110 GiB of 80 GiB";
  points.push_back(none);
  points.push_back(Point(8, 960, false));
  points.push_back(Point(32, 100, true));
  points.push_back(Point(256, 4, true));
  points[2].best->gpu_hours = 3000;
  points[3].best->gpu_hours = 4000;
  const std::string svg =
      SweepChartSvg("wide", points, 200 * 3600.0,
                    {*planner::ParseRfc3339("2026-06-09T08:00:00Z"), planner::Objective::kCost});
  EXPECT_NE(svg.find("(days, log scale)"), std::string::npos) << svg;
  EXPECT_NE(svg.find("chosen: 32 GPUs"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("chosen: 256 GPUs"), std::string::npos);
  EXPECT_NE(svg.find("deadline 2026-06-09T08:00:00Z</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("H100-SXM GPUs (log2 scale)"), std::string::npos) << svg;
  // The count without a plan is marked, its reason in the tooltip.
  EXPECT_NE(svg.find("class=\"no-plan\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("1 GPUs: no plan: out-of-memory"), std::string::npos) << svg;
  // By objective time the fastest meeting the deadline is chosen instead.
  const std::string fastest =
      SweepChartSvg("wide", points, 200 * 3600.0, {std::nullopt, planner::Objective::kTime});
  EXPECT_NE(fastest.find("chosen: 256 GPUs"), std::string::npos);
}

TEST(SweepChartTest, ShortJobsInMinutesAndPricesAsCost) {
  std::vector<planner::SweepPoint> points = {Point(8, 2, true), Point(16, 1, true)};
  points[0].best->cost = 160;
  points[1].best->cost = 170;
  const std::string svg = SweepChartSvg("short", points, std::nullopt);
  EXPECT_NE(svg.find("(minutes)"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">Cost</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("class=\"marker cost\""), std::string::npos) << svg;
  EXPECT_EQ(svg.find("class=\"no-plan\""), std::string::npos);
}

TEST(SweepChartTest, SinglePointAndNoDeadline) {
  const std::string svg = SweepChartSvg("one", {Point(8, 5, true)}, std::nullopt);
  EXPECT_EQ(svg.find("class=\"deadline\""), std::string::npos);
  EXPECT_NE(svg.find("(hours)"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

TEST(SweepChartTest, NoPlanAtAll) {
  planner::SweepPoint none;
  none.gpus = 8;
  none.reason = "out-of-memory";
  const std::string svg = SweepChartSvg("none", {none}, 3600.0);
  EXPECT_NE(svg.find("no layout fits"), std::string::npos);
  EXPECT_EQ(svg.find("class=\"marker"), std::string::npos);
}

}  // namespace
}  // namespace pacer::cli
