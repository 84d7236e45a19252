#include "json_patch.h"

#include <gtest/gtest.h>

namespace pacer::testing {
namespace {

using nlohmann::json;

TEST(MergePatchTest, Rfc7386Examples) {
  // From RFC 7386 appendix A.
  EXPECT_EQ(MergePatch({{"a", "b"}}, {{"a", "c"}}), json({{"a", "c"}}));
  EXPECT_EQ(MergePatch({{"a", "b"}}, {{"b", "c"}}), json({{"a", "b"}, {"b", "c"}}));
  EXPECT_EQ(MergePatch({{"a", "b"}}, {{"a", nullptr}}), json::object());
  EXPECT_EQ(MergePatch({{"a", {"b"}}}, {{"a", "c"}}), json({{"a", "c"}}));
  EXPECT_EQ(MergePatch({{"a", {{"b", "c"}}}}, {{"a", {{"b", "d"}, {"c", nullptr}}}}),
            json({{"a", {{"b", "d"}}}}));
  EXPECT_EQ(MergePatch({{"a", json::array({1, 2})}}, {{"a", json::array({3})}}),
            json({{"a", json::array({3})}}));
}

TEST(StrategicMergePatchTest, MergesNamedListsByName) {
  json pod = {
      {"spec",
       {{"containers", {{{"name", "a"}, {"image", "a:1"}}, {{"name", "b"}, {"image", "b:1"}}}}}}};
  json patch = {
      {"spec",
       {{"$setElementOrder/containers", {{{"name", "a"}}, {{"name", "b"}}}},
        {"containers", {{{"name", "b"}, {"image", "b:2"}}, {{"name", "c"}, {"image", "c:1"}}}}}}};
  json out = StrategicMergePatch(pod, patch);
  ASSERT_EQ(out["spec"]["containers"].size(), 3u);
  EXPECT_EQ(out["spec"]["containers"][0]["image"], "a:1");
  EXPECT_EQ(out["spec"]["containers"][1]["image"], "b:2");
  EXPECT_EQ(out["spec"]["containers"][2]["name"], "c");
  EXPECT_FALSE(out["spec"].contains("$setElementOrder/containers"));

  json removal = {{"spec", {{"containers", {{{"name", "a"}, {"$patch", "delete"}}}}}}};
  json removed = StrategicMergePatch(out, removal);
  ASSERT_EQ(removed["spec"]["containers"].size(), 2u);
  EXPECT_EQ(removed["spec"]["containers"][0]["name"], "b");
}

TEST(StrategicMergePatchTest, PrimitiveListsReplaceAndDirectivesDelete) {
  json obj = {{"metadata", {{"finalizers", {"x", "y"}}}}, {"spec", {{"args", {"1", "2"}}}}};
  json out =
      StrategicMergePatch(obj, {{"spec", {{"args", {"3"}}}},
                                {"metadata", {{"$deleteFromPrimitiveList/finalizers", {"x"}}}}});
  EXPECT_EQ(out["spec"]["args"], json({"3"}));
  EXPECT_EQ(out["metadata"]["finalizers"], json({"y"}));
}

TEST(JsonPatchTest, AddRemoveReplaceTest) {
  json doc = {{"spec", {{"replicas", 1}, {"args", {"a"}}}}};
  auto out = JsonPatch(doc, json::parse(R"([
      {"op":"test","path":"/spec/replicas","value":1},
      {"op":"replace","path":"/spec/replicas","value":3},
      {"op":"add","path":"/spec/args/-","value":"b"},
      {"op":"add","path":"/spec/new","value":{"x":1}},
      {"op":"remove","path":"/spec/args/0"}])"));
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out.value()["spec"]["replicas"], 3);
  EXPECT_EQ(out.value()["spec"]["args"], json({"b"}));
  EXPECT_EQ(out.value()["spec"]["new"]["x"], 1);
}

TEST(JsonPatchTest, FailuresAreInvalid) {
  json doc = {{"spec", {{"replicas", 1}}}};
  auto failed_test =
      JsonPatch(doc, json::parse(R"([{"op":"test","path":"/spec/replicas","value":2}])"));
  ASSERT_FALSE(failed_test.ok());
  EXPECT_EQ(failed_test.error().code, 422);
  EXPECT_FALSE(JsonPatch(doc, json::parse(R"([{"op":"remove","path":"/spec/nope"}])")).ok());
  EXPECT_FALSE(JsonPatch(doc, json::parse(R"([{"op":"replace","path":"/x","value":1}])")).ok());
  EXPECT_FALSE(JsonPatch(doc, json::parse(R"([{"op":"frobnicate","path":"/x"}])")).ok());
  EXPECT_FALSE(JsonPatch(doc, json::object()).ok());
}

}  // namespace
}  // namespace pacer::testing
