#include "selectors.h"

#include <gtest/gtest.h>

namespace pacer::testing {
namespace {

using nlohmann::json;

json LabelledPod(json labels, std::string phase) {
  return {{"metadata", {{"name", "p"}, {"namespace", "ns"}, {"labels", labels}}},
          {"spec", {{"nodeName", "node-1"}}},
          {"status", {{"phase", phase}}}};
}

bool LabelsMatch(const std::string& selector, const json& object) {
  auto parsed = Selector::ParseLabels(selector);
  EXPECT_TRUE(parsed.ok()) << selector;
  return parsed.ok() && parsed.value().Matches(object);
}

bool FieldsMatch(const std::string& selector, const json& object) {
  auto parsed = Selector::ParseFields(selector);
  EXPECT_TRUE(parsed.ok()) << selector;
  return parsed.ok() && parsed.value().Matches(object);
}

TEST(LabelSelectorTest, EqualityForms) {
  json pod = LabelledPod({{"app", "train"}, {"tier", "worker"}}, "Running");
  EXPECT_TRUE(LabelsMatch("app=train", pod));
  EXPECT_TRUE(LabelsMatch("app==train", pod));
  EXPECT_FALSE(LabelsMatch("app=serve", pod));
  EXPECT_TRUE(LabelsMatch("app!=serve", pod));
  EXPECT_FALSE(LabelsMatch("app!=train", pod));
  EXPECT_TRUE(LabelsMatch("missing!=x", pod));  // absent label differs from any value
  EXPECT_TRUE(LabelsMatch("app=train,tier=worker", pod));
  EXPECT_FALSE(LabelsMatch("app=train,tier=ps", pod));
  EXPECT_TRUE(LabelsMatch("", pod));
}

TEST(LabelSelectorTest, ExistenceAndSets) {
  json pod = LabelledPod({{"app", "train"}, {"env", "prod"}}, "Running");
  EXPECT_TRUE(LabelsMatch("app", pod));
  EXPECT_FALSE(LabelsMatch("!app", pod));
  EXPECT_TRUE(LabelsMatch("!canary", pod));
  EXPECT_FALSE(LabelsMatch("canary", pod));
  EXPECT_TRUE(LabelsMatch("env in (prod,staging)", pod));
  EXPECT_FALSE(LabelsMatch("env in (dev,staging)", pod));
  EXPECT_TRUE(LabelsMatch("env notin (dev, staging)", pod));
  EXPECT_FALSE(LabelsMatch("env notin (prod)", pod));
  EXPECT_TRUE(LabelsMatch("canary notin (yes)", pod));
  EXPECT_TRUE(LabelsMatch("env in (prod,staging),app=train,!canary", pod));
}

TEST(LabelSelectorTest, RejectsMalformed) {
  EXPECT_FALSE(Selector::ParseLabels("env in prod").ok());
  EXPECT_FALSE(Selector::ParseLabels("a=b,,c=d").ok());
  EXPECT_EQ(Selector::ParseLabels("=x").error().code, 400);
}

TEST(FieldSelectorTest, DottedPaths) {
  json pod = LabelledPod(json::object(), "Running");
  EXPECT_TRUE(FieldsMatch("metadata.name=p", pod));
  EXPECT_TRUE(FieldsMatch("metadata.name=p,metadata.namespace=ns", pod));
  EXPECT_FALSE(FieldsMatch("metadata.namespace=other", pod));
  EXPECT_TRUE(FieldsMatch("spec.nodeName=node-1", pod));
  EXPECT_TRUE(FieldsMatch("status.phase!=Failed", pod));
  EXPECT_FALSE(FieldsMatch("status.phase!=Running", pod));
  EXPECT_TRUE(FieldsMatch("spec.missing=", pod));
  json event = {{"involvedObject", {{"kind", "TrainJob"}, {"name", "j"}, {"uid", "u1"}}}};
  EXPECT_TRUE(FieldsMatch("involvedObject.kind=TrainJob,involvedObject.name=j", event));
  EXPECT_FALSE(FieldsMatch("involvedObject.uid=u2", event));
  EXPECT_FALSE(Selector::ParseFields("metadata.name").ok());
}

}  // namespace
}  // namespace pacer::testing
