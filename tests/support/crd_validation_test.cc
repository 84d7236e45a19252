// CustomResourceDefinitions with schemas over HTTP: non-structural CRDs are
// refused, custom objects are pruned, defaulted and validated with
// kube-apiserver's messages, fieldValidation decides what unknown fields do,
// and a CRD for trainjobs.pacer.dev replaces the built-in TrainJob.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "apiserver_test_fixture.h"
#include "schema_validation.h"

namespace pacer::testing {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kCrds[] = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

// A TrainJob CRD for these tests, with one field per rule.
json TestSchema() {
  return json::parse(R"({
    "type": "object",
    "properties": {
      "spec": {
        "type": "object",
        "required": ["deadline"],
        "x-kubernetes-validations": [
          {"rule": "!has(self.minGPUs) || self.minGPUs <= self.gpus", "message": "minGPUs above gpus"}
        ],
        "properties": {
          "deadline": {"type": "string", "format": "date-time"},
          "gpus": {"type": "integer", "minimum": 1, "maximum": 1024},
          "minGPUs": {"type": "integer"},
          "objective": {"type": "string", "enum": ["time", "cost"], "default": "time"},
          "tag": {"type": "string", "minLength": 1, "maxLength": 8, "pattern": "^[a-z]+$"},
          "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": true,
                    "maximum": 1, "exclusiveMaximum": true},
          "gpuTypes": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
          "labels": {"type": "object", "minProperties": 1, "maxProperties": 2,
                     "additionalProperties": {"type": "string"}},
          "parameters": {"x-kubernetes-int-or-string": true},
          "note": {"type": "string", "nullable": true},
          "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
          "model": {"type": "object", "properties": {"parameters": {"type": "string"}}}
        }
      },
      "status": {
        "type": "object",
        "properties": {
          "phase": {"type": "string", "enum": ["Pending", "Running"]},
          "plan": {"type": "object", "properties": {"gpus": {"type": "integer", "minimum": 0}}}
        }
      }
    }
  })");
}

json Crd(const json& schema) {
  json version = {{"name", "v1alpha1"},
                  {"served", true},
                  {"storage", true},
                  {"subresources", {{"status", json::object()}}},
                  {"additionalPrinterColumns",
                   {{{"name", "Gpus"}, {"type", "integer"}, {"jsonPath", ".spec.gpus"}}}}};
  if (!schema.is_null()) version["schema"] = {{"openAPIV3Schema", schema}};
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", "trainjobs.pacer.dev"}}},
          {"spec",
           {{"group", "pacer.dev"},
            {"scope", "Namespaced"},
            {"names",
             {{"plural", "trainjobs"},
              {"singular", "trainjob"},
              {"kind", "TrainJob"},
              {"shortNames", {"tj"}}}},
            {"versions", {version}}}}};
}

json Job(const std::string& name, const json& spec) {
  return {{"apiVersion", "pacer.dev/v1alpha1"},
          {"kind", "TrainJob"},
          {"metadata", {{"name", name}}},
          {"spec", spec}};
}

const json kValidSpec = {{"deadline", "2030-01-01T00:00:00Z"}};

class CrdValidationTest : public ApiServerTest {
 protected:
  void SetUp() override {
    ApiServerTest::SetUp();
    MustCreate(kCrds, Crd(TestSchema()));
  }

  // spec = kValidSpec plus `field` = `value`.
  static json SpecWith(const std::string& field, const json& value) {
    json spec = kValidSpec;
    spec[field] = value;
    return spec;
  }
};

TEST_F(CrdValidationTest, NonStructuralCrdsAreRejected) {
  ASSERT_EQ(Call("DELETE", std::string(kCrds) + "/trainjobs.pacer.dev").status, 200);
  HttpResponse no_schema = Call("POST", kCrds, Crd(nullptr));
  EXPECT_EQ(no_schema.status, 422);
  const json status = no_schema.Json();
  EXPECT_EQ(status["reason"], "Invalid");
  EXPECT_EQ(status["message"],
            "CustomResourceDefinition.apiextensions.k8s.io \"trainjobs.pacer.dev\" is invalid: "
            "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required");
  EXPECT_EQ(status["details"]["kind"], "CustomResourceDefinition");
  EXPECT_EQ(status["details"]["group"], "apiextensions.k8s.io");
  EXPECT_EQ(status["details"]["causes"],
            json::parse(
                R"([{"reason":"FieldValueRequired","message":"Required value: schemas are required",
                             "field":"spec.versions[0].schema.openAPIV3Schema"}])"));

  json untyped = TestSchema();
  untyped["properties"]["spec"]["properties"]["gpus"].erase("type");
  HttpResponse no_type = Call("POST", kCrds, Crd(untyped));
  EXPECT_EQ(no_type.status, 422);
  EXPECT_EQ(no_type.Json()["message"],
            "CustomResourceDefinition.apiextensions.k8s.io \"trainjobs.pacer.dev\" is invalid: "
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[gpus].type: "
            "Required value: must not be empty for specified object fields");
  // Nothing was registered: the built-in TrainJob (no schema) still serves.
  EXPECT_EQ(Call("POST", kTrainJobs, Job("j", {{"anything", 1}})).status, 201);

  // An update must keep the schema structural too.
  json crd = MustCreate(kCrds, Crd(TestSchema()));
  crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = untyped;
  EXPECT_EQ(Call("PUT", std::string(kCrds) + "/trainjobs.pacer.dev", crd).status, 422);
}

struct RuleCase {
  const char* field;
  json valid;
  json invalid;
  const char* error;  // after `TrainJob.pacer.dev "j" is invalid: `
  const char* cause_reason;
};

TEST_F(CrdValidationTest, EveryRuleAcceptsTheValidAndRejectsTheInvalidValue) {
  const RuleCase cases[] = {
      {"gpus", 1, 0,
       "spec.gpus: Invalid value: 0: spec.gpus in body should be greater than or equal to 1",
       "FieldValueInvalid"},
      {"gpus", 1024, 1025,
       "spec.gpus: Invalid value: 1025: spec.gpus in body should be less than or equal to 1024",
       "FieldValueInvalid"},
      {"gpus", 8, "8",
       R"(spec.gpus: Invalid value: "string": spec.gpus in body must be of type integer: "string")",
       "FieldValueTypeInvalid"},
      {"gpus", 8.0, 8.5,
       R"(spec.gpus: Invalid value: "number": spec.gpus in body must be of type integer: "number")",
       "FieldValueTypeInvalid"},
      {"objective", "cost", "speed",
       R"(spec.objective: Unsupported value: "speed": supported values: "time", "cost")",
       "FieldValueNotSupported"},
      {"tag", "abc", "",
       R"(spec.tag: Invalid value: "": spec.tag in body should be at least 1 chars long)",
       "FieldValueInvalid"},
      {"tag", "abcdefgh", "abcdefghi", "spec.tag: Too long: may not be more than 8 bytes",
       "FieldValueTooLong"},
      {"tag", "abc", "ab1",
       R"(spec.tag: Invalid value: "ab1": spec.tag in body should match '^[a-z]+$')",
       "FieldValueInvalid"},
      {"ratio", 0.5, 0, "spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0",
       "FieldValueInvalid"},
      {"ratio", 0.5, 1, "spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1",
       "FieldValueInvalid"},
      {"gpuTypes",
       {"H100"},
       json::array(),
       "spec.gpuTypes: Invalid value: 0: spec.gpuTypes in body should have at least 1 items",
       "FieldValueInvalid"},
      {"gpuTypes",
       {"H100", "H200"},
       {"H100", "H200", "A100"},
       "spec.gpuTypes: Too many: 3: must have at most 2 items",
       "FieldValueTooMany"},
      {"gpuTypes",
       {"H100"},
       {7},
       R"(spec.gpuTypes[0]: Invalid value: "integer": spec.gpuTypes[0] in body must be of type string: "integer")",
       "FieldValueTypeInvalid"},
      {"labels",
       {{"team", "a"}},
       json::object(),
       "spec.labels: Invalid value: 0: spec.labels in body should have at least 1 properties",
       "FieldValueInvalid"},
      {"labels",
       {{"a", "1"}, {"b", "2"}},
       {{"a", "1"}, {"b", "2"}, {"c", "3"}},
       "spec.labels: Too many: 3: must have at most 2 items",
       "FieldValueTooMany"},
      {"labels",
       {{"a", "1"}},
       {{"a", 1}},
       R"(spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer")",
       "FieldValueTypeInvalid"},
      {"parameters", "6.7B", true,
       R"(spec.parameters: Invalid value: "boolean": spec.parameters in body must be of type integer,string: "boolean")",
       "FieldValueTypeInvalid"},
      {"parameters", 6700000000, 6.5,
       R"(spec.parameters: Invalid value: "number": spec.parameters in body must be of type integer,string: "number")",
       "FieldValueTypeInvalid"},
      {"note", nullptr, 5,
       R"(spec.note: Invalid value: "integer": spec.note in body must be of type string: "integer")",
       "FieldValueTypeInvalid"},
      {"deadline", "2030-06-30T12:00:00+02:00", "next week",
       R"(spec.deadline: Invalid value: "next week": spec.deadline in body must be of type date-time: "next week")",
       "FieldValueTypeInvalid"},
  };
  int n = 0;
  for (const RuleCase& c : cases) {
    const std::string ok_name = "ok-" + std::to_string(n);
    const std::string bad_name = "bad-" + std::to_string(n++);
    HttpResponse ok = Call("POST", kTrainJobs, Job(ok_name, SpecWith(c.field, c.valid)));
    EXPECT_EQ(ok.status, 201) << c.field << " = " << c.valid.dump() << ": " << ok.body;
    HttpResponse bad = Call("POST", kTrainJobs, Job(bad_name, SpecWith(c.field, c.invalid)));
    EXPECT_EQ(bad.status, 422) << c.field << " = " << c.invalid.dump() << ": " << bad.body;
    const json status = bad.Json();
    EXPECT_EQ(status["message"], "TrainJob.pacer.dev \"" + bad_name + "\" is invalid: " + c.error);
    EXPECT_EQ(status["reason"], "Invalid");
    EXPECT_EQ(status["details"]["kind"], "TrainJob");
    EXPECT_EQ(status["details"]["group"], "pacer.dev");
    EXPECT_EQ(status["details"]["name"], bad_name);
    ASSERT_EQ(status["details"]["causes"].size(), 1u) << bad.body;
    EXPECT_EQ(status["details"]["causes"][0]["reason"], c.cause_reason);
    const std::string error = c.error;
    EXPECT_EQ(status["details"]["causes"][0]["field"], error.substr(0, error.find(": ")));
  }
  HttpResponse missing = Call("POST", kTrainJobs, Job("no-deadline", {{"gpus", 8}}));
  EXPECT_EQ(missing.Json()["message"],
            "TrainJob.pacer.dev \"no-deadline\" is invalid: spec.deadline: Required value");
  HttpResponse two = Call("POST", kTrainJobs, Job("two", {{"gpus", 0}, {"tag", "A"}}));
  EXPECT_EQ(two.Json()["message"],
            "TrainJob.pacer.dev \"two\" is invalid: [spec.gpus: Invalid value: 0: spec.gpus in "
            "body should be greater than or equal to 1, spec.tag: Invalid value: \"A\": spec.tag "
            "in body should match '^[a-z]+$', spec.deadline: Required value]");
  HttpResponse bad_name = Call("POST", kTrainJobs, Job("Llama_7B", kValidSpec));
  EXPECT_EQ(bad_name.status, 422);
  EXPECT_THAT(bad_name.Json()["message"].get<std::string>(),
              HasSubstr("TrainJob.pacer.dev \"Llama_7B\" is invalid: metadata.name: Invalid "
                        "value: \"Llama_7B\": a lowercase RFC 1123 subdomain"));
}

TEST_F(CrdValidationTest, UpdatesAndPatchesAreValidatedToo) {
  MustCreate(kTrainJobs, Job("j", kValidSpec));
  const std::string path = std::string(kTrainJobs) + "/j";
  json job = Call("GET", path).Json();
  job["spec"]["gpus"] = 0;
  HttpResponse put = Call("PUT", path, job);
  EXPECT_EQ(put.status, 422);
  EXPECT_EQ(put.Json()["message"],
            "TrainJob.pacer.dev \"j\" is invalid: spec.gpus: Invalid value: 0: spec.gpus in body "
            "should be greater than or equal to 1");
  HttpResponse patch =
      Call("PATCH", path, {{"spec", {{"objective", "speed"}}}}, "application/merge-patch+json");
  EXPECT_EQ(patch.status, 422);
  EXPECT_EQ(patch.Json()["message"],
            "TrainJob.pacer.dev \"j\" is invalid: spec.objective: Unsupported value: \"speed\": "
            "supported values: \"time\", \"cost\"");
  HttpResponse good =
      Call("PATCH", path, {{"spec", {{"gpus", 16}}}}, "application/merge-patch+json");
  ASSERT_EQ(good.status, 200) << good.body;
  EXPECT_EQ(good.Json()["spec"]["gpus"], 16);
  EXPECT_EQ(good.Json()["metadata"]["generation"], 2);
}

TEST_F(CrdValidationTest, PruningKeepsKnownFieldsAndFieldValidationDecidesTheRest) {
  const json spec = {{"deadline", "2030-01-01T00:00:00Z"},
                     {"gpus", 8},
                     {"gpuz", 8},
                     {"model", {{"parameters", "7B"}, {"layerz", 32}}},
                     {"extra", {{"free", {{"form", true}}}}},
                     {"labels", {{"team", "research"}}}};
  json job = Job("ignored", spec);
  job["metadata"]["labels"] = {{"app", "train"}};
  job["metadata"]["colour"] = "red";

  HttpResponse ignored = Call("POST", std::string(kTrainJobs) + "?fieldValidation=Ignore", job);
  ASSERT_EQ(ignored.status, 201) << ignored.body;
  EXPECT_EQ(ignored.headers.count("Warning"), 0u);
  const json stored = server_->GetObject(std::string(kTrainJobs) + "/ignored").value();
  EXPECT_EQ(stored["spec"], json({{"deadline", "2030-01-01T00:00:00Z"},
                                  {"gpus", 8},
                                  {"model", {{"parameters", "7B"}}},
                                  {"extra", {{"free", {{"form", true}}}}},
                                  {"labels", {{"team", "research"}}},
                                  {"objective", "time"}}));  // defaulted
  EXPECT_EQ(stored["metadata"]["labels"], json({{"app", "train"}}));
  EXPECT_FALSE(stored["metadata"].contains("colour"));
  EXPECT_EQ(stored["apiVersion"], "pacer.dev/v1alpha1");
  EXPECT_EQ(stored["kind"], "TrainJob");

  job["metadata"]["name"] = "warned";
  HttpResponse warned = Call("POST", kTrainJobs, job);  // Warn is the default
  ASSERT_EQ(warned.status, 201) << warned.body;
  EXPECT_EQ(warned.headers["Warning"].rfind("299 - \"unknown field \\\"", 0), 0u)
      << warned.headers["Warning"];
  EXPECT_FALSE(warned.Json()["spec"].contains("gpuz"));

  job["metadata"]["name"] = "strict";
  HttpResponse strict = Call("POST", std::string(kTrainJobs) + "?fieldValidation=Strict", job);
  EXPECT_EQ(strict.status, 400);
  EXPECT_EQ(strict.Json()["reason"], "BadRequest");
  EXPECT_EQ(strict.Json()["message"],
            "TrainJob in version \"v1alpha1\" cannot be handled as a TrainJob: strict decoding "
            "error: unknown field \"spec.gpuz\", unknown field \"spec.model.layerz\", unknown "
            "field \"metadata.colour\"");
  EXPECT_EQ(server_->GetObject(std::string(kTrainJobs) + "/strict").status().code(),
            StatusCode::kNotFound);

  HttpResponse unsupported = Call("POST", std::string(kTrainJobs) + "?fieldValidation=Sloppy", job);
  EXPECT_EQ(unsupported.status, 422);
  EXPECT_EQ(unsupported.Json()["message"],
            "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: "
            "\"Sloppy\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"");

  const std::string path = std::string(kTrainJobs) + "/ignored";
  HttpResponse strict_patch = Call("PATCH", path + "?fieldValidation=Strict",
                                   {{"spec", {{"gpuz", 2}}}}, "application/merge-patch+json");
  EXPECT_EQ(strict_patch.status, 422);
  const std::string patch_message = strict_patch.Json()["message"].get<std::string>();
  EXPECT_EQ(patch_message.rfind(" \"\" is invalid: patch: Invalid value: \"{", 0), 0u)
      << patch_message;
  EXPECT_THAT(patch_message, HasSubstr("\": strict decoding error: unknown field \"spec.gpuz\""));
  EXPECT_EQ(strict_patch.Json()["details"]["causes"][0]["field"], "patch");

  HttpResponse warn_patch =
      Call("PATCH", path, {{"spec", {{"gpuz", 2}, {"gpus", 4}}}}, "application/merge-patch+json");
  ASSERT_EQ(warn_patch.status, 200) << warn_patch.body;
  EXPECT_EQ(warn_patch.headers["Warning"], "299 - \"unknown field \\\"spec.gpuz\\\"\"");
  EXPECT_EQ(warn_patch.Json()["spec"]["gpus"], 4);
  EXPECT_FALSE(warn_patch.Json()["spec"].contains("gpuz"));

  // The test API acts like a strict client, so that a test's typo shows.
  auto direct = server_->CreateObject(kTrainJobs, Job("direct", spec));
  EXPECT_EQ(direct.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(direct.status().message(), HasSubstr("unknown field \"spec.gpuz\""));
}

TEST_F(CrdValidationTest, NullsOfNonNullableFieldsAreDroppedAndDefaultsFilledIn) {
  json spec = kValidSpec;
  spec["gpus"] = nullptr;       // not nullable: dropped
  spec["note"] = nullptr;       // nullable: kept
  spec["objective"] = nullptr;  // not nullable, defaulted: the default
  json created = MustCreate(kTrainJobs, Job("j", spec));
  EXPECT_FALSE(created["spec"].contains("gpus"));
  EXPECT_TRUE(created["spec"].contains("note"));
  EXPECT_TRUE(created["spec"]["note"].is_null());
  EXPECT_EQ(created["spec"]["objective"], "time");
}

TEST_F(CrdValidationTest, StatusSubresourceRulesStayAndStatusIsValidated) {
  json job = MustCreate(kTrainJobs, Job("j", kValidSpec));
  const std::string path = std::string(kTrainJobs) + "/j";

  // The main resource ignores .status, even an invalid one.
  job["status"] = {{"phase", "Sleeping"}};
  job["spec"]["gpus"] = 4;
  HttpResponse main = Call("PUT", path, job);
  ASSERT_EQ(main.status, 200) << main.body;
  EXPECT_FALSE(main.Json().contains("status"));

  // /status validates the status and ignores the spec.
  json update = main.Json();
  update["spec"]["gpus"] = 999999;
  update["status"] = {{"phase", "Sleeping"}};
  HttpResponse bad = Call("PUT", path + "/status", update);
  EXPECT_EQ(bad.status, 422);
  EXPECT_EQ(bad.Json()["message"],
            "TrainJob.pacer.dev \"j\" is invalid: status.phase: Unsupported value: \"Sleeping\": "
            "supported values: \"Pending\", \"Running\"");
  update["status"] = {{"phase", "Running"}, {"plan", {{"gpus", 4}, {"layout", "2x2"}}}};
  HttpResponse good = Call("PUT", path + "/status", update);
  ASSERT_EQ(good.status, 200) << good.body;
  EXPECT_EQ(good.Json()["status"], json({{"phase", "Running"}, {"plan", {{"gpus", 4}}}}));
  EXPECT_EQ(good.Json()["spec"]["gpus"], 4);  // the spec in a status write is ignored
  EXPECT_EQ(good.headers["Warning"], "299 - \"unknown field \\\"status.plan.layout\\\"\"");

  HttpResponse patched = Call("PATCH", path + "/status", {{"status", {{"plan", {{"gpus", -1}}}}}},
                              "application/merge-patch+json");
  EXPECT_EQ(patched.status, 422);
  EXPECT_EQ(patched.Json()["message"],
            "TrainJob.pacer.dev \"j\" is invalid: status.plan.gpus: Invalid value: -1: "
            "status.plan.gpus in body should be greater than or equal to 0");
}

TEST_F(CrdValidationTest, CelRulesAreKeptButNotEvaluated) {
  // minGPUs above gpus breaks the rule; a real server would refuse it.
  json spec = kValidSpec;
  spec["gpus"] = 1;
  spec["minGPUs"] = 8;
  EXPECT_EQ(Call("POST", kTrainJobs, Job("j", spec)).status, 201);
  const json crd = server_->GetObject(std::string(kCrds) + "/trainjobs.pacer.dev").value();
  const std::vector<CelRule> rules = ListCelRules(CrdVersionSchema(crd, "v1alpha1"));
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules[0].path, "spec");
  EXPECT_EQ(rules[0].rule, "!has(self.minGPUs) || self.minGPUs <= self.gpus");
}

TEST_F(CrdValidationTest, TheCrdReplacesTheBuiltInTrainJob) {
  // Registered in SetUp: the CRD's printer columns and schema apply.
  MustCreate(kTrainJobs, Job("j", SpecWith("gpus", 8)));
  auto table = client_->Request("GET", kTrainJobs, "", "",
                                {{"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"}});
  ASSERT_TRUE(table.ok());
  ASSERT_EQ(table->status, 200) << table->body;
  const json rows = table->Json();
  std::vector<std::string> columns;
  for (const json& c : rows["columnDefinitions"]) columns.push_back(c["name"].get<std::string>());
  EXPECT_THAT(columns, ElementsAre("Name", "Gpus"));
  EXPECT_EQ(rows["rows"][0]["cells"][1], 8);
  EXPECT_EQ(Call("POST", kTrainJobs, Job("k", {{"gpus", 8}})).status, 422);

  // Deleting the CRD deletes its objects and brings the built-in back: no
  // schema, its own columns.
  ASSERT_EQ(Call("DELETE", std::string(kCrds) + "/trainjobs.pacer.dev").status, 200);
  EXPECT_EQ(Call("GET", std::string(kTrainJobs) + "/j").status, 404);
  EXPECT_EQ(Call("POST", kTrainJobs, Job("k", {{"gpus", 8}, {"anything", true}})).status, 201);
  auto builtin = client_->Request("GET", kTrainJobs, "", "",
                                  {{"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"}});
  ASSERT_TRUE(builtin.ok());
  EXPECT_EQ(builtin->Json()["columnDefinitions"][1]["name"], "Phase");
}

}  // namespace
}  // namespace pacer::testing
