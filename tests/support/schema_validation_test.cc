// The structural-schema rules (schema_validation.h) one by one: each accepts
// a valid value and rejects an invalid one with kube-apiserver's message.
#include "schema_validation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pacer::testing {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A root schema whose spec.x is `field`.
json SchemaWith(const json& field) {
  return {{"type", "object"},
          {"properties", {{"spec", {{"type", "object"}, {"properties", {{"x", field}}}}}}}};
}

json ObjectWith(const json& x) {
  return {{"apiVersion", "example.com/v1"},
          {"kind", "Gadget"},
          {"metadata", {{"name", "g"}}},
          {"spec", {{"x", x}}}};
}

// What kube-apiserver says about spec.x = `x` under `field`: "" when valid.
std::string Check(const json& field, const json& x) {
  const std::vector<FieldError> errors = ValidateObject(ObjectWith(x), SchemaWith(field));
  return errors.empty() ? "" : AggregateMessage(errors);
}

struct SchemaRuleCase {
  const char* rule;
  json field;
  json valid;
  json invalid;
  const char* message;
};

class RuleTest : public ::testing::TestWithParam<SchemaRuleCase> {};

TEST_P(RuleTest, AcceptsTheValidAndRejectsTheInvalidValue) {
  const SchemaRuleCase& c = GetParam();
  EXPECT_EQ(Check(c.field, c.valid), "") << c.rule;
  EXPECT_EQ(Check(c.field, c.invalid), c.message) << c.rule;
}

const SchemaRuleCase kRules[] = {
    {"type integer",
     {{"type", "integer"}},
     3,
     "3",
     R"(spec.x: Invalid value: "string": spec.x in body must be of type integer: "string")"},
    {"integer refuses a fraction",
     {{"type", "integer"}},
     2e9,
     2.5,
     R"(spec.x: Invalid value: "number": spec.x in body must be of type integer: "number")"},
    {"integer refuses what no int64 holds",
     {{"type", "integer"}},
     9007199254740992.0,
     1e20,
     R"(spec.x: Invalid value: "number": spec.x in body must be of type integer: "number")"},
    {"number takes an integer",
     {{"type", "number"}},
     3,
     true,
     R"(spec.x: Invalid value: "boolean": spec.x in body must be of type number: "boolean")"},
    {"type string",
     {{"type", "string"}},
     "a",
     5,
     R"(spec.x: Invalid value: "integer": spec.x in body must be of type string: "integer")"},
    {"type boolean",
     {{"type", "boolean"}},
     false,
     "false",
     R"(spec.x: Invalid value: "string": spec.x in body must be of type boolean: "string")"},
    {"type object",
     {{"type", "object"}},
     json::object(),
     json::array(),
     R"(spec.x: Invalid value: "array": spec.x in body must be of type object: "array")"},
    {"type array",
     {{"type", "array"}, {"items", {{"type", "string"}}}},
     json::array({"a"}),
     json::object(),
     R"(spec.x: Invalid value: "object": spec.x in body must be of type array: "object")"},
    {"array items",
     {{"type", "array"}, {"items", {{"type", "string"}}}},
     json::array({"a", "b"}),
     json::array({"a", 1}),
     R"(spec.x[1]: Invalid value: "integer": spec.x[1] in body must be of type string: "integer")"},
    {"int-or-string",
     {{"x-kubernetes-int-or-string", true}},
     "6.7B",
     1.5,
     R"(spec.x: Invalid value: "number": spec.x in body must be of type integer,string: "number")"},
    {"int-or-string takes an integer",
     {{"x-kubernetes-int-or-string", true}},
     7,
     true,
     R"(spec.x: Invalid value: "boolean": spec.x in body must be of type integer,string: "boolean")"},
    {"nullable",
     {{"type", "string"}, {"nullable", true}},
     nullptr,
     1,
     R"(spec.x: Invalid value: "integer": spec.x in body must be of type string: "integer")"},
    {"null in a list of strings",
     {{"type", "array"}, {"items", {{"type", "string"}}}},
     json::array({"a"}),
     json::array({nullptr}),
     R"(spec.x[0]: Invalid value: "null": spec.x[0] in body must be of type string: "null")"},
    {"enum",
     {{"type", "string"}, {"enum", {"time", "cost"}}},
     "cost",
     "speed",
     R"(spec.x: Unsupported value: "speed": supported values: "time", "cost")"},
    {"enum of numbers",
     {{"type", "integer"}, {"enum", {1, 2}}},
     2,
     3,
     R"(spec.x: Unsupported value: 3: supported values: "1", "2")"},
    {"minimum",
     {{"type", "integer"}, {"minimum", 1}},
     1,
     0,
     "spec.x: Invalid value: 0: spec.x in body should be greater than or equal to 1"},
    {"maximum",
     {{"type", "integer"}, {"maximum", 1024}},
     1024,
     1025,
     "spec.x: Invalid value: 1025: spec.x in body should be less than or equal to 1024"},
    {"exclusiveMinimum",
     {{"type", "number"}, {"minimum", 0}, {"exclusiveMinimum", true}},
     0.5,
     0.0,
     "spec.x: Invalid value: 0: spec.x in body should be greater than 0"},
    {"exclusiveMaximum",
     {{"type", "number"}, {"maximum", 1}, {"exclusiveMaximum", true}},
     0.5,
     1.0,
     "spec.x: Invalid value: 1: spec.x in body should be less than 1"},
    {"minimum of a float",
     {{"type", "number"}, {"minimum", 0.5}},
     0.5,
     0.25,
     "spec.x: Invalid value: 0.25: spec.x in body should be greater than or equal to 0.5"},
    {"large bounds print as Go does",
     {{"type", "number"}, {"maximum", 1e14}},
     1e14,
     2e14,
     "spec.x: Invalid value: 2e+14: spec.x in body should be less than or equal to 1e+14"},
    {"multipleOf",
     {{"type", "integer"}, {"multipleOf", 8}},
     16,
     12,
     "spec.x: Invalid value: 12: spec.x in body should be a multiple of 8"},
    {"minLength",
     {{"type", "string"}, {"minLength", 1}},
     "a",
     "",
     R"(spec.x: Invalid value: "": spec.x in body should be at least 1 chars long)"},
    {"maxLength",
     {{"type", "string"}, {"maxLength", 3}},
     "abc",
     "abcd",
     "spec.x: Too long: may not be more than 3 bytes"},
    {"maxLength counts characters",
     {{"type", "string"}, {"maxLength", 2}},
     "\xc3\xa9\xc3\xa9",
     "abc",
     "spec.x: Too long: may not be more than 2 bytes"},
    {"pattern",
     {{"type", "string"}, {"pattern", "^[a-z]+$"}},
     "abc",
     "ab1",
     R"(spec.x: Invalid value: "ab1": spec.x in body should match '^[a-z]+$')"},
    {"minItems",
     {{"type", "array"}, {"minItems", 1}, {"items", {{"type", "string"}}}},
     json::array({"a"}),
     json::array(),
     "spec.x: Invalid value: 0: spec.x in body should have at least 1 items"},
    {"maxItems",
     {{"type", "array"}, {"maxItems", 2}, {"items", {{"type", "string"}}}},
     json::array({"a", "b"}),
     json::array({"a", "b", "c"}),
     "spec.x: Too many: 3: must have at most 2 items"},
    {"minProperties",
     {{"type", "object"}, {"minProperties", 1}, {"additionalProperties", {{"type", "string"}}}},
     json{{"a", "1"}},
     json::object(),
     "spec.x: Invalid value: 0: spec.x in body should have at least 1 properties"},
    {"maxProperties",
     {{"type", "object"}, {"maxProperties", 1}, {"additionalProperties", {{"type", "string"}}}},
     json{{"a", "1"}},
     json{{"a", "1"}, {"b", "2"}},
     "spec.x: Too many: 2: must have at most 1 items"},
    {"additionalProperties schema",
     {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}},
     json{{"a", "1"}},
     json{{"a", 1}},
     R"(spec.x.a: Invalid value: "integer": spec.x.a in body must be of type string: "integer")"},
    {"additionalProperties false",
     {{"type", "object"}, {"additionalProperties", false}},
     json::object(),
     json{{"a", 1}},
     R"(spec.x: Invalid value: "a": spec.x.a in body is a forbidden property)"},
    {"required",
     {{"type", "object"},
      {"required", {"gpus"}},
      {"properties", {{"gpus", {{"type", "integer"}}}}}},
     json{{"gpus", 1}},
     json::object(),
     "spec.x.gpus: Required value"},
    {"date-time",
     {{"type", "string"}, {"format", "date-time"}},
     "2030-01-01T00:00:00Z",
     "tomorrow",
     R"(spec.x: Invalid value: "tomorrow": spec.x in body must be of type date-time: "tomorrow")"},
    {"date-time with an offset and a fraction",
     {{"type", "string"}, {"format", "date-time"}},
     "2030-01-01t12:30:00.5+02:00",
     "2030-02-30T00:00:00Z",
     R"(spec.x: Invalid value: "2030-02-30T00:00:00Z": spec.x in body must be of type date-time: "2030-02-30T00:00:00Z")"},
    {"date-time refuses a number",
     {{"type", "string"}, {"format", "date-time"}},
     "2030-01-01T00:00:00Z",
     5,
     R"(spec.x: Invalid value: "int64": spec.x in body must be of type date-time: "int64")"},
    {"date",
     {{"type", "string"}, {"format", "date"}},
     "2024-02-29",
     "2023-02-29",
     R"(spec.x: Invalid value: "2023-02-29": spec.x in body must be of type date: "2023-02-29")"},
    {"oneOf",
     {{"type", "object"},
      {"properties", {{"a", {{"type", "string"}}}, {"b", {{"type", "string"}}}}},
      {"oneOf", {{{"required", {"a"}}}, {{"required", {"b"}}}}}},
     json{{"a", "1"}},
     json{{"a", "1"}, {"b", "2"}},
     R"(<nil>: Invalid value: "": "spec.x" must validate one and only one schema (oneOf). Found 2 valid alternatives)"},
    {"anyOf",
     {{"type", "object"},
      {"properties", {{"a", {{"type", "string"}}}}},
      {"anyOf", {{{"required", {"a"}}}}}},
     json{{"a", "1"}},
     json::object(),
     R"([<nil>: Invalid value: "": "spec.x" must validate at least one schema (anyOf), spec.x.a: Required value])"},
};

INSTANTIATE_TEST_SUITE_P(EveryRule, RuleTest, ::testing::ValuesIn(kRules));

// kube-apiserver strips the int32/int64/float/double formats before it
// validates (only string formats stay), so an int32 field takes 2^31 and an
// int64 field anything an int64 holds.
TEST(SchemaValidationTest, NumberFormatsAreNotRangeChecked) {
  EXPECT_EQ(Check({{"type", "integer"}, {"format", "int32"}}, int64_t{1} << 31), "");
  EXPECT_EQ(Check({{"type", "integer"}, {"format", "int64"}}, INT64_MAX), "");
  EXPECT_EQ(Check({{"type", "integer"}, {"format", "int64"}}, 1e20),
            R"(spec.x: Invalid value: "number": spec.x in body must be of type integer: "number")");
}

TEST(SchemaValidationTest, SeveralErrorsAreListedInBrackets) {
  const json schema = {{"type", "object"},
                       {"properties",
                        {{"spec",
                          {{"type", "object"},
                           {"required", {"deadline"}},
                           {"properties",
                            {{"gpus", {{"type", "integer"}, {"minimum", 1}}},
                             {"deadline", {{"type", "string"}}}}}}}}}};
  const json object = {{"spec", {{"gpus", 0}}}};
  EXPECT_EQ(AggregateMessage(ValidateObject(object, schema)),
            "[spec.gpus: Invalid value: 0: spec.gpus in body should be greater than or equal to "
            "1, spec.deadline: Required value]");
}

TEST(SchemaValidationTest, PruningDropsUnknownFieldsAndKeepsKnownOnes) {
  const json schema = {
      {"type", "object"},
      {"properties",
       {{"spec",
         {{"type", "object"},
          {"properties",
           {{"gpus", {{"type", "integer"}}},
            {"pins",
             {{"type", "array"},
              {"items", {{"type", "object"}, {"properties", {{"name", {{"type", "string"}}}}}}}}},
            {"free", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}},
            {"labels", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}}}}}},
        {"status", {{"type", "object"}, {"properties", {{"phase", {{"type", "string"}}}}}}}}}};
  json object = {{"apiVersion", "example.com/v1"},
                 {"kind", "Gadget"},
                 {"metadata", {{"name", "g"}, {"labels", {{"a", "b"}}}, {"colour", "red"}}},
                 {"spec",
                  {{"gpus", 8},
                   {"gpuz", 8},
                   {"pins", {{{"name", "a"}, {"size", 1}}}},
                   {"free", {{"anything", {{"goes", true}}}}},
                   {"labels", {{"team", "research"}}}}},
                 {"status", {{"phase", "Running"}, {"eta", "soon"}}},
                 {"extra", 1}};
  const std::vector<std::string> pruned = PruneUnknownFields(object, schema);
  EXPECT_THAT(pruned, ElementsAre("extra", "spec.gpuz", "spec.pins[0].size", "status.eta",
                                  "metadata.colour"));
  const json expected = {{"apiVersion", "example.com/v1"},
                         {"kind", "Gadget"},
                         {"metadata", {{"name", "g"}, {"labels", {{"a", "b"}}}}},
                         {"spec",
                          {{"gpus", 8},
                           {"pins", {{{"name", "a"}}}},
                           {"free", {{"anything", {{"goes", true}}}}},
                           {"labels", {{"team", "research"}}}}},
                         {"status", {{"phase", "Running"}}}};
  EXPECT_EQ(object, expected);
  EXPECT_THAT(PruneUnknownFields(object, schema), IsEmpty());
}

TEST(SchemaValidationTest, NullsOfNonNullableFieldsGoAndDefaultsFillIn) {
  const json schema = {{"type", "object"},
                       {"properties",
                        {{"spec",
                          {{"type", "object"},
                           {"default", json::object()},
                           {"properties",
                            {{"objective", {{"type", "string"}, {"default", "time"}}},
                             {"note", {{"type", "string"}, {"nullable", true}}},
                             {"gpus", {{"type", "integer"}}},
                             {"mode", {{"type", "string"}, {"default", "auto"}}}}}}}}}};
  json object = {{"metadata", {{"name", "g"}}},
                 {"spec", {{"note", nullptr}, {"gpus", nullptr}, {"mode", nullptr}}}};
  PruneNullsAndDefault(object, schema);
  EXPECT_EQ(object["spec"], json({{"note", nullptr}, {"mode", "auto"}, {"objective", "time"}}));
  json empty = {{"metadata", {{"name", "g"}}}};
  PruneNullsAndDefault(empty, schema);
  EXPECT_EQ(empty["spec"], json({{"mode", "auto"}, {"objective", "time"}}));
}

TEST(SchemaValidationTest, FieldValidationValues) {
  EXPECT_EQ(ParseFieldValidation(""), FieldValidation::kWarn);
  EXPECT_EQ(ParseFieldValidation("Warn"), FieldValidation::kWarn);
  EXPECT_EQ(ParseFieldValidation("Strict"), FieldValidation::kStrict);
  EXPECT_EQ(ParseFieldValidation("Ignore"), FieldValidation::kIgnore);
  EXPECT_EQ(ParseFieldValidation("strict"), std::nullopt);
}

TEST(SchemaValidationTest, NamesMustBeDnsSubdomains) {
  EXPECT_THAT(ValidateObjectName("llama-7b.v2"), IsEmpty());
  const std::vector<FieldError> errors = ValidateObjectName("Llama_7B");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].Error(),
            "metadata.name: Invalid value: \"Llama_7B\": a lowercase RFC 1123 subdomain must "
            "consist of lower case alphanumeric characters, '-' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
}

// Pacer's Service and pods as kube-apiserver's core validation sees them:
// a Service name is a DNS-1035 label, a pod's hostname and subdomain are
// DNS-1123 labels, label values are at most 63 characters.
TEST(SchemaValidationTest, CoreObjectNamesFollowKubeApiserversRules) {
  EXPECT_THAT(ValidateCoreObjectNames(
                  "services", {{"metadata", {{"name", "j7b-fine-12ab34-workers"},
                                             {"labels", {{"pacer.dev/job", "7b.fine"}}}}}}),
              IsEmpty());
  std::vector<FieldError> errors =
      ValidateCoreObjectNames("services", {{"metadata", {{"name", "7b.fine-workers"}}}});
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].Error().rfind(
                "metadata.name: Invalid value: \"7b.fine-workers\": a DNS-1035 label must consist",
                0),
            0u)
      << errors[0].Error();
  errors = ValidateCoreObjectNames(
      "pods", {{"metadata", {{"name", "p"}, {"labels", {{"pacer.dev/job", std::string(64, 'a')}}}}},
               {"spec", {{"hostname", "a.b"}, {"subdomain", "s"}}}});
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].field, "metadata.labels");
  EXPECT_NE(errors[0].body.find("must be no more than 63 characters"), std::string::npos);
  EXPECT_EQ(errors[1].field, "spec.hostname");
  EXPECT_NE(errors[1].body.find("RFC 1123 label"), std::string::npos);
  EXPECT_THAT(ValidateCoreObjectNames("configmaps", {{"metadata", {{"name", "A.B"}}}}), IsEmpty());
}

TEST(SchemaValidationTest, CelRulesAreListedNotEvaluated) {
  const json schema = {
      {"type", "object"},
      {"properties",
       {{"spec",
         {{"type", "object"},
          {"x-kubernetes-validations",
           {{{"rule", "self.minGPUs <= self.maxGPUs"}, {"message", "min above max"}}}},
          {"properties",
           {{"minGPUs", {{"type", "integer"}}}, {"maxGPUs", {{"type", "integer"}}}}}}}}}};
  const std::vector<CelRule> rules = ListCelRules(schema);
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules[0].path, "spec");
  EXPECT_EQ(rules[0].rule, "self.minGPUs <= self.maxGPUs");
  EXPECT_EQ(rules[0].message, "min above max");
  EXPECT_THAT(ValidateObject({{"spec", {{"minGPUs", 8}, {"maxGPUs", 1}}}}, schema), IsEmpty());
}

json V1Crd(const json& schema) {
  json version = {{"name", "v1"}, {"served", true}, {"storage", true}};
  if (!schema.is_null()) version["schema"] = {{"openAPIV3Schema", schema}};
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", "gadgets.example.com"}}},
          {"spec",
           {{"group", "example.com"},
            {"scope", "Namespaced"},
            {"names", {{"plural", "gadgets"}, {"kind", "Gadget"}}},
            {"versions", {version}}}}};
}

std::string CrdErrors(const json& schema) {
  const std::vector<FieldError> errors = ValidateCustomResourceDefinition(V1Crd(schema));
  return errors.empty() ? "" : AggregateMessage(errors);
}

TEST(SchemaValidationTest, StructuralSchemasAreAccepted) {
  EXPECT_EQ(CrdErrors(SchemaWith({{"type", "string"}})), "");
  EXPECT_EQ(CrdErrors(SchemaWith({{"x-kubernetes-int-or-string", true},
                                  {"anyOf", {{{"type", "integer"}}, {{"type", "string"}}}}})),
            "");
  EXPECT_EQ(CrdErrors(SchemaWith({{"x-kubernetes-preserve-unknown-fields", true}})), "");
  EXPECT_EQ(CrdErrors(SchemaWith({{"type", "object"},
                                  {"properties", {{"a", {{"type", "string"}}}}},
                                  {"oneOf", {{{"required", {"a"}}}}}})),
            "");
  EXPECT_EQ(CrdErrors(SchemaWith({{"type", "string"}, {"default", "x"}})), "");
}

TEST(SchemaValidationTest, NonStructuralSchemasAreRejected) {
  const std::string root = "spec.versions[0].schema.openAPIV3Schema";
  EXPECT_EQ(CrdErrors(nullptr), root + ": Required value: schemas are required");
  EXPECT_EQ(CrdErrors(SchemaWith({{"description", "no type"}})),
            root +
                ".properties[spec].properties[x].type: Required value: must not be empty for "
                "specified object fields");
  EXPECT_EQ(CrdErrors(SchemaWith({{"type", "array"}})),
            root + ".properties[spec].properties[x].items: Required value: must be specified");
  EXPECT_EQ(CrdErrors(SchemaWith({{"type", "array"}, {"items", json::object()}})),
            root +
                ".properties[spec].properties[x].items.type: Required value: must not be "
                "empty for specified array items");
  EXPECT_EQ(CrdErrors({{"properties", {{"spec", {{"type", "object"}}}}}}),
            root + ".type: Required value: must not be empty at the root");
  EXPECT_EQ(CrdErrors(SchemaWith({{"type", "object"},
                                  {"properties", {{"a", {{"type", "string"}}}}},
                                  {"additionalProperties", {{"type", "string"}}}})),
            root +
                ".properties[spec].properties[x].additionalProperties: Forbidden: "
                "additionalProperties and properties are mutual exclusive");
  EXPECT_EQ(CrdErrors(SchemaWith({{"type", "object"},
                                  {"properties", {{"a", {{"type", "string"}}}}},
                                  {"anyOf", {{{"type", "object"}}}}})),
            root +
                ".properties[spec].properties[x].anyOf[0].type: Forbidden: must be empty to "
                "be structural");
  EXPECT_EQ(CrdErrors(SchemaWith({{"type", "object"},
                                  {"properties", {{"a", {{"type", "string"}}}}},
                                  {"oneOf", {{{"properties", {{"b", {{"minLength", 1}}}}}}}}})),
            root +
                ".properties[spec].properties[x].properties[b]: Required value: because it "
                "is defined in " +
                root + ".properties[spec].properties[x].oneOf[0].properties[b]");
  EXPECT_EQ(CrdErrors(SchemaWith({{"type", "integer"}, {"minimum", 1}, {"default", 0}})),
            root +
                ".properties[spec].properties[x].default: Invalid value: 0:  in body should "
                "be greater than or equal to 1");
  json misnamed = V1Crd(SchemaWith({{"type", "string"}}));
  misnamed["metadata"]["name"] = "gadgets";
  EXPECT_EQ(
      AggregateMessage(ValidateCustomResourceDefinition(misnamed)),
      "metadata.name: Invalid value: \"gadgets\": must be spec.names.plural+\".\"+spec.group");
}

}  // namespace
}  // namespace pacer::testing
