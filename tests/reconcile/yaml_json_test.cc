// YamlToJson (controller/cli/yaml_json.h): the TrainJob file as the object
// `pacer run` hands to the reconciler. It must read what the planner's parser
// read, and no input may make it run out of memory.
#include "cli/yaml_json.h"

#include <gtest/gtest.h>

#include <string>

namespace pacer::controller {
namespace {

using cli::YamlToJson;

TEST(YamlToJsonTest, ScalarsTakeTheirYamlTypes) {
  auto doc = YamlToJson("a: 12\nb: '12'\nc: 1.5e3\nd: true\ne: ~\nf: text\n");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ((*doc)["a"], 12);
  EXPECT_EQ((*doc)["b"], "12");
  EXPECT_EQ((*doc)["c"], 1500.0);
  EXPECT_EQ((*doc)["d"], true);
  EXPECT_TRUE((*doc)["e"].is_null());
  EXPECT_EQ((*doc)["f"], "text");
}

// Anchors that repeat each other ten times a level: six levels are a
// million values from a few hundred bytes (twelve, 10^12, ran `pacer run`
// out of memory).
TEST(YamlToJsonTest, AliasesThatExpandPastTheDocumentSizeAreRefused) {
  std::string yaml = "labels:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level <= 6; ++level) {
    const std::string prev = "*a" + std::to_string(level - 1);
    yaml += "  a" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) yaml += (i > 0 ? ", " : "") + prev;
    yaml += "]\n";
  }
  auto doc = YamlToJson(yaml);
  ASSERT_FALSE(doc.ok()) << "expanded to " << doc->dump().size() << " bytes of JSON";
  EXPECT_EQ(doc.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(doc.status().message().find("aliases"), std::string::npos) << doc.status().message();
}

// A small alias is still expanded: the budget is the document's size.
TEST(YamlToJsonTest, ASmallAliasIsExpanded) {
  auto doc = YamlToJson("base: &b {cpu: 2}\nworker: *b\n");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ((*doc)["worker"]["cpu"], 2);
}

// yaml-cpp (the planner's parser) reads the first of two equal keys and
// JSON keeps the last: `pacer plan` said one name, `pacer run` ran another.
TEST(YamlToJsonTest, AKeyTwiceInOneMappingIsRefusedWithItsLine) {
  auto doc = YamlToJson("metadata:\n  name: first\n  name: second\n");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(doc.status().message().find("'name' appears twice"), std::string::npos)
      << doc.status().message();
  EXPECT_NE(doc.status().message().find("line 3"), std::string::npos) << doc.status().message();
  // The same key in two mappings is fine.
  EXPECT_TRUE(YamlToJson("a: {name: x}\nb: {name: y}\n").ok());
}

}  // namespace
}  // namespace pacer::controller
