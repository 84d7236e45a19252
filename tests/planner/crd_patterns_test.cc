// The CRD's string patterns (manifests/crd/pacer.dev_trainjobs.yaml) against
// the job parser the controller runs: a pattern is a first check at `kubectl
// apply` time, so it must never refuse a value the controller takes, and it
// should refuse the common values the controller refuses (a zero amount, a
// replan interval under a second) with the schema's error instead of an
// InvalidSpec condition after the job was created.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "pacer/planner/job_parser.h"

namespace pacer::planner {
namespace {

// The schema node at `path` (property names) under spec.
YAML::Node SpecProperty(const std::vector<std::string>& path) {
  const YAML::Node crd =
      YAML::LoadFile(std::string(PACER_SOURCE_DIR) + "/manifests/crd/pacer.dev_trainjobs.yaml");
  YAML::Node node = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
  for (const std::string& name : path) node = node["properties"][name];
  return node;
}

struct PatternedField {
  std::vector<std::string> path;  // under spec
  // The document with the field set to `value` (a quoted YAML string).
  std::string (*job)(const std::string& value);
  std::vector<std::string> refused_at_apply;  // values the pattern must refuse
};

// "replan.interval", for messages.
std::string NameOf(const std::vector<std::string>& path) {
  std::string name;
  for (const std::string& p : path) name += (name.empty() ? "" : ".") + p;
  return name;
}

std::string Quoted(const std::string& value) { return "\"" + value + "\""; }

// A job the parser takes, with one field's line replaced: global batch 1,
// so that no small amount fails a cross-field check instead of its own.
std::string JobWith(const std::string& model, const std::string& data, const std::string& rest) {
  return "apiVersion: pacer.dev/v1alpha1\nkind: TrainJob\nmetadata:\n  name: j\nspec:\n"
         "  model:\n" +
         model + "  data:\n" + data + "  training:\n    globalBatchSize: 1\n" + rest;
}

const std::string kModel = "    parameters: 1.3B\n";
const std::string kData = "    tokens: 2e9\n";
const std::string kDuration = "  maxDuration: 72h\n";

const PatternedField kFields[] = {
    {{"model", "parameters"},
     [](const std::string& v) {
       return JobWith("    parameters: " + Quoted(v) + "\n", kData, kDuration);
     },
     {"0", "0B", "0.0M", "00", ".0G", "0e9"}},
    {{"data", "tokens"},
     [](const std::string& v) {
       return JobWith(kModel, "    tokens: " + Quoted(v) + "\n", kDuration);
     },
     {"0", "0B", "0.0", "0e12"}},
    {{"data", "samples"},
     [](const std::string& v) {
       return JobWith(kModel, "    samples: " + Quoted(v) + "\n", kDuration);
     },
     {"0", "0M", "0.000"}},
    {{"maxDuration"},
     [](const std::string& v) {
       return JobWith(kModel, kData, "  maxDuration: " + Quoted(v) + "\n");
     },
     {"0", "0s", "0h0m", "0.0", "00ms", "0d0h0m0s", "0e5"}},
    {{"checkpoint", "interval"},
     [](const std::string& v) {
       return JobWith(kModel, kData,
                      kDuration + "  checkpoint:\n    interval: " + Quoted(v) + "\n");
     },
     {"0", "0s", "0m0s", ".0", "0e3"}},
    {{"replan", "interval"},
     [](const std::string& v) {
       return JobWith(kModel, kData, kDuration + "  replan:\n    interval: " + Quoted(v) + "\n");
     },
     {"0", "0s", "500ms", "999ms", "999.9ms", "0.5", "0.5s", ".9s", "0999ms"}},
};

// Strings near the grammar: amounts with and without units, chained,
// signs, exponents, and stray characters.
std::vector<std::string> Corpus() {
  std::vector<std::string> corpus = {
      "1",    "1s",    "1000ms",     "60s",      "72h",  "1h30m", "14d",  "1.5", "0.5m", "5e-1",
      "1e0",  "10e-1", "+2h",        "auto",     "AUTO", "6.7B",  "350M", "1e9", ".5G",  "2e9",
      "0s1s", "1s0s",  "500ms500ms", "0.5s0.5s", "1.",   "-1s",   "1 s",  ""};
  const char* const amounts[] = {"0",    "00",   "1",   "5",  "0.5",   ".5",  "5.",  "999",
                                 "1000", "0999", "0.0", "10", "0.001", "1.5", "0.9", "2e9"};
  const char* const units[] = {"ms", "s", "m", "h", "d", "", "e1", "e-1", "B", "M", "x"};
  std::mt19937 random(20261204);  // fixed: the same corpus on every run
  for (int i = 0; i < 1500; ++i) {
    std::string s = random() % 5 == 0 ? "+" : "";
    const int terms = 1 + static_cast<int>(random() % 3);
    for (int t = 0; t < terms; ++t) {
      s += amounts[random() % std::size(amounts)];
      s += units[random() % std::size(units)];
    }
    corpus.push_back(s);
  }
  return corpus;
}

TEST(CrdPatternsTest, NoPatternRefusesWhatTheControllerTakes) {
  const std::vector<std::string> corpus = Corpus();
  for (const PatternedField& field : kFields) {
    const YAML::Node node = SpecProperty(field.path);
    ASSERT_TRUE(node["pattern"]) << NameOf(field.path) << " has no pattern";
    const std::regex pattern(node["pattern"].as<std::string>());
    int taken = 0;
    for (const std::string& value : corpus) {
      const bool parsed = ParseTrainJob(field.job(value)).ok();
      taken += parsed ? 1 : 0;
      if (parsed) {
        EXPECT_TRUE(std::regex_search(value, pattern))
            << NameOf(field.path) << " = \"" << value
            << "\": the controller takes it, the CRD's pattern refuses it";
      }
    }
    // The property above holds trivially if the jobs are broken elsewhere.
    EXPECT_GE(taken, 50) << NameOf(field.path);
    std::printf("%s: %d of %zu values taken by the controller\n", NameOf(field.path).c_str(), taken,
                corpus.size());
  }
}

TEST(CrdPatternsTest, ZeroAmountsAndSubSecondReplansAreRefusedAtApply) {
  for (const PatternedField& field : kFields) {
    const std::regex pattern(SpecProperty(field.path)["pattern"].as<std::string>());
    for (const std::string& value : field.refused_at_apply) {
      EXPECT_FALSE(ParseTrainJob(field.job(value)).ok())
          << NameOf(field.path) << " = \"" << value << "\": the controller takes it";
      EXPECT_FALSE(std::regex_search(value, pattern))
          << NameOf(field.path) << " = \"" << value << "\": the CRD's pattern lets it through";
    }
  }
}

}  // namespace
}  // namespace pacer::planner
