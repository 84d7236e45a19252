// Drives the test API server with the real kubectl (KUBECTL_BINARY); skipped
// when kubectl was not found at configure time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "apiserver_test_fixture.h"

namespace pacer::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

class KubectlTest : public ApiServerTest {
 protected:
  void SetUp() override {
#ifndef KUBECTL_BINARY
    GTEST_SKIP() << "kubectl was not found when the build was configured";
#else
    ApiServerTest::SetUp();
    char pattern[] = "/tmp/pacer-kubectl-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    ASSERT_TRUE(server_->WriteKubeconfig(dir_ + "/kubeconfig", "research").ok());
#endif
  }

  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Runs kubectl with this server's kubeconfig and a private cache.
  CommandResult Kubectl(const std::string& args) const {
#ifdef KUBECTL_BINARY
    const std::string command = std::string(KUBECTL_BINARY) + " --kubeconfig " + dir_ +
                                "/kubeconfig --cache-dir " + dir_ +
                                "/cache --request-timeout 60s " + args + " 2>&1";
    CommandResult result;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) return result;
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
    const int status = ::pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
#else
    (void)args;
    return {};
#endif
  }

  std::string WriteFile(const std::string& name, const std::string& text) const {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  std::string dir_;
};

constexpr char kJobYaml[] = R"(apiVersion: pacer.dev/v1alpha1
kind: TrainJob
metadata:
  name: llama
  labels:
    team: research
spec:
  deadline: "2030-01-01T00:00:00Z"
  model:
    parameters: MODEL_SIZE
)";

std::string JobYaml(const std::string& size) {
  std::string yaml = kJobYaml;
  yaml.replace(yaml.find("MODEL_SIZE"), std::string("MODEL_SIZE").size(), size);
  return yaml;
}

const std::string kJobPath = std::string(kTrainJobs) + "/llama";

TEST_F(KubectlTest, ApplyTwiceBumpsTheGeneration) {
  const std::string file = WriteFile("job.yaml", JobYaml("1.3B"));
  CommandResult created = Kubectl("apply -f " + file);
  ASSERT_EQ(created.exit_code, 0) << created.output;
  EXPECT_THAT(created.output, HasSubstr("trainjob.pacer.dev/llama created"));
  auto job = server_->GetObject(kJobPath);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ((*job)["metadata"]["generation"], 1);
  EXPECT_EQ((*job)["metadata"]["labels"]["team"], "research");

  CommandResult unchanged = Kubectl("apply -f " + file);
  ASSERT_EQ(unchanged.exit_code, 0) << unchanged.output;
  EXPECT_THAT(unchanged.output, HasSubstr("unchanged"));

  WriteFile("job.yaml", JobYaml("7B"));
  CommandResult configured = Kubectl("apply -f " + file);
  ASSERT_EQ(configured.exit_code, 0) << configured.output;
  EXPECT_THAT(configured.output, HasSubstr("configured"));
  job = server_->GetObject(kJobPath);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ((*job)["metadata"]["generation"], 2);
  EXPECT_EQ((*job)["spec"]["model"]["parameters"], "7B");
  EXPECT_GE(server_->RequestCount("PATCH", "/trainjobs/llama"), 1);
}

TEST_F(KubectlTest, GetShowsPrinterColumnsAndPods) {
  ASSERT_EQ(Kubectl("apply -f " + WriteFile("job.yaml", JobYaml("1.3B"))).exit_code, 0);
  json job = server_->GetObject(kJobPath).value();
  job["status"] = {{"phase", "Running"},
                   {"plan", {{"gpus", 16}}},
                   {"progress", {{"percent", 37.5}}},
                   {"deadline", "2030-01-01T00:00:00Z"},
                   {"deadlineSlackSeconds", 7200},
                   {"deadlineSlack", "+2h0m"}};
  ASSERT_TRUE(server_->UpdateObject(kJobPath, job).ok());

  CommandResult get = Kubectl("get trainjobs");
  ASSERT_EQ(get.exit_code, 0) << get.output;
  for (const char* header :
       {"NAME", "PHASE", "GPUS", "PROGRESS", "ETA", "DEADLINE", "SLACK", "AGE"}) {
    EXPECT_THAT(get.output, HasSubstr(header));
  }
  EXPECT_THAT(get.output, HasSubstr("llama"));
  EXPECT_THAT(get.output, HasSubstr("Running"));
  EXPECT_THAT(get.output, HasSubstr("16"));
  EXPECT_THAT(get.output, HasSubstr("37.5"));
  EXPECT_THAT(get.output, HasSubstr("+2h0m"));  // SLACK: a duration, not seconds
  EXPECT_THAT(get.output, HasSubstr("2030-01-01T00:00:00Z"));
  CommandResult short_name = Kubectl("get tj llama");
  ASSERT_EQ(short_name.exit_code, 0) << short_name.output;
  EXPECT_THAT(short_name.output, HasSubstr("Running"));

  json pod = Pod("llama-worker-0");
  pod["status"] = {{"phase", "Running"}};
  ASSERT_TRUE(server_->CreateObject(kPods, pod).ok());
  CommandResult pods = Kubectl("get pods");
  ASSERT_EQ(pods.exit_code, 0) << pods.output;
  EXPECT_THAT(pods.output, HasSubstr("STATUS"));
  EXPECT_THAT(pods.output, HasSubstr("llama-worker-0"));
  CommandResult as_json = Kubectl("get pod llama-worker-0 -o jsonpath={.status.phase}");
  EXPECT_EQ(as_json.output, "Running");
  CommandResult missing = Kubectl("get tj nope");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.output, HasSubstr("trainjobs.pacer.dev \"nope\" not found"));
}

TEST_F(KubectlTest, DescribeListsEvents) {
  ASSERT_EQ(Kubectl("apply -f " + WriteFile("job.yaml", JobYaml("1.3B"))).exit_code, 0);
  json job = server_->GetObject(kJobPath).value();
  json event = {{"apiVersion", "v1"},
                {"kind", "Event"},
                {"metadata", {{"name", "llama.planned"}}},
                {"involvedObject",
                 {{"apiVersion", "pacer.dev/v1alpha1"},
                  {"kind", "TrainJob"},
                  {"name", "llama"},
                  {"namespace", "research"},
                  {"uid", job["metadata"]["uid"]}}},
                {"reason", "Planned"},
                {"message", "16 x H100 meets the deadline"},
                {"type", "Normal"},
                {"count", 1},
                {"firstTimestamp", job["metadata"]["creationTimestamp"]},
                {"lastTimestamp", job["metadata"]["creationTimestamp"]},
                {"source", {{"component", "pacer-controller"}}}};
  ASSERT_TRUE(server_->CreateObject("/api/v1/namespaces/research/events", event).ok());
  CommandResult describe = Kubectl("describe trainjob llama");
  ASSERT_EQ(describe.exit_code, 0) << describe.output;
  EXPECT_THAT(describe.output, HasSubstr("Name:         llama"));
  EXPECT_THAT(describe.output, HasSubstr("Events:"));
  EXPECT_THAT(describe.output, HasSubstr("Planned"));
  EXPECT_THAT(describe.output, HasSubstr("16 x H100 meets the deadline"));
  EXPECT_THAT(describe.output, HasSubstr("1.3B"));
}

TEST_F(KubectlTest, DeleteRemovesTheJobAndItsPods) {
  const std::string file = WriteFile("job.yaml", JobYaml("1.3B"));
  ASSERT_EQ(Kubectl("apply -f " + file).exit_code, 0);
  json job = server_->GetObject(kJobPath).value();
  for (const char* name : {"llama-0", "llama-1"}) {
    json pod = Pod(name);
    pod["metadata"]["ownerReferences"] = {{{"apiVersion", "pacer.dev/v1alpha1"},
                                           {"kind", "TrainJob"},
                                           {"name", "llama"},
                                           {"uid", job["metadata"]["uid"]},
                                           {"controller", true}}};
    ASSERT_TRUE(server_->CreateObject(kPods, pod).ok());
  }
  ASSERT_TRUE(server_->CreateObject(kPods, Pod("bystander")).ok());
  CommandResult deleted = Kubectl("delete -f " + file);
  ASSERT_EQ(deleted.exit_code, 0) << deleted.output;
  EXPECT_THAT(deleted.output, HasSubstr("trainjob.pacer.dev \"llama\" deleted"));
  EXPECT_EQ(server_->GetObject(kJobPath).status().code(), StatusCode::kNotFound);
  std::vector<json> pods = server_->ListObjects(kPods);
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0]["metadata"]["name"], "bystander");

  ASSERT_EQ(Kubectl("apply -f " + file).exit_code, 0);
  CommandResult by_name = Kubectl("delete trainjob llama");
  ASSERT_EQ(by_name.exit_code, 0) << by_name.output;
  EXPECT_EQ(server_->GetObject(kJobPath).status().code(), StatusCode::kNotFound);
}

TEST_F(KubectlTest, DeleteWaitsForTheFinalizer) {
  std::string yaml = JobYaml("1.3B");
  yaml.replace(yaml.find("  labels:"), 0, "  finalizers:\n  - pacer.dev/cleanup\n");
  ASSERT_EQ(Kubectl("apply -f " + WriteFile("job.yaml", yaml)).exit_code, 0);
  ASSERT_EQ(server_->GetObject(kJobPath).value()["metadata"]["finalizers"].size(), 1u);

  std::atomic<bool> done{false};
  CommandResult deleted;
  std::thread deleter([&] {
    deleted = Kubectl("delete trainjob llama --timeout=120s");
    done = true;
  });
  // kubectl marks the job for deletion, then watches it until it is gone.
  const bool waiting = server_->WaitFor(
      [&] {
        auto job = server_->GetObject(kJobPath);
        return job.ok() && (*job)["metadata"].contains("deletionTimestamp") &&
               server_->OpenWatchCount() > 0;
      },
      kWaitTimeout);
  EXPECT_TRUE(waiting);
  EXPECT_FALSE(done.load()) << "kubectl returned before the finalizer was removed: "
                            << deleted.output;
  json job = server_->GetObject(kJobPath).value();
  job["metadata"]["finalizers"] = json::array();
  ASSERT_TRUE(server_->UpdateObject(kJobPath, job).ok());
  deleter.join();
  EXPECT_EQ(deleted.exit_code, 0) << deleted.output;
  EXPECT_THAT(deleted.output, HasSubstr("deleted"));
  EXPECT_EQ(server_->GetObject(kJobPath).status().code(), StatusCode::kNotFound);
}

TEST_F(KubectlTest, CustomResourceDefinitionThroughKubectl) {
  const std::string crd = R"(apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: gadgets
    singular: gadget
    kind: Gadget
    shortNames: [gd]
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color:
                type: string
    additionalPrinterColumns:
    - name: Color
      type: string
      jsonPath: .spec.color
)";
  CommandResult applied = Kubectl("apply -f " + WriteFile("crd.yaml", crd));
  ASSERT_EQ(applied.exit_code, 0) << applied.output;
  const std::string gadget = R"(apiVersion: example.com/v1
kind: Gadget
metadata:
  name: g1
spec:
  color: teal
)";
  CommandResult created = Kubectl("apply -f " + WriteFile("gadget.yaml", gadget));
  ASSERT_EQ(created.exit_code, 0) << created.output;
  CommandResult get = Kubectl("get gd");
  ASSERT_EQ(get.exit_code, 0) << get.output;
  EXPECT_THAT(get.output, HasSubstr("COLOR"));
  EXPECT_THAT(get.output, HasSubstr("teal"));
}

// A TrainJob CRD with a small schema, for the validation tests below.
constexpr char kTrainJobCrd[] = R"(apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: trainjobs.pacer.dev
spec:
  group: pacer.dev
  scope: Namespaced
  names:
    plural: trainjobs
    singular: trainjob
    kind: TrainJob
    shortNames: [tj]
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources:
      status: {}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              deadline:
                type: string
                format: date-time
              gpus:
                type: integer
                minimum: 1
              model:
                type: object
                properties:
                  parameters:
                    x-kubernetes-int-or-string: true
)";

TEST_F(KubectlTest, ApplyRefusesUnknownFieldsAndInvalidValues) {
  ASSERT_EQ(Kubectl("apply -f " + WriteFile("crd.yaml", kTrainJobCrd)).exit_code, 0);
  std::string typo = JobYaml("1.3B");
  typo += "  gpuz: 8\n";
  // kubectl apply asks for fieldValidation=Strict: the unknown field fails
  // the request and nothing is created.
  CommandResult strict = Kubectl("apply -f " + WriteFile("typo.yaml", typo));
  EXPECT_NE(strict.exit_code, 0);
  EXPECT_THAT(strict.output,
              HasSubstr("TrainJob in version \"v1alpha1\" cannot be handled as a TrainJob: "
                        "strict decoding error: unknown field \"spec.gpuz\""));
  EXPECT_EQ(server_->GetObject(kJobPath).status().code(), StatusCode::kNotFound);

  // --validate=warn: created without the field, and kubectl prints the warning.
  CommandResult warned = Kubectl("apply --validate=warn -f " + WriteFile("typo.yaml", typo));
  ASSERT_EQ(warned.exit_code, 0) << warned.output;
  EXPECT_THAT(warned.output, HasSubstr("Warning: unknown field \"spec.gpuz\""));
  auto job = server_->GetObject(kJobPath);
  ASSERT_TRUE(job.ok());
  EXPECT_FALSE((*job)["spec"].contains("gpuz"));
  EXPECT_EQ((*job)["spec"]["model"]["parameters"], "1.3B");

  // An invalid value on an existing object: the patch is refused.
  std::string zero = JobYaml("1.3B");
  zero += "  gpus: 0\n";
  CommandResult invalid = Kubectl("apply -f " + WriteFile("zero.yaml", zero));
  EXPECT_NE(invalid.exit_code, 0);
  EXPECT_THAT(invalid.output,
              HasSubstr("The TrainJob \"llama\" is invalid: spec.gpus: Invalid value: 0: "
                        "spec.gpus in body should be greater than or equal to 1"));
  EXPECT_FALSE(server_->GetObject(kJobPath).value()["spec"].contains("gpus"));
}

#ifdef PACER_SOURCE_DIR
std::string ReadSource(const std::string& relative) {
  std::ifstream in(std::string(PACER_SOURCE_DIR) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The project's CRD (manifests/crd/pacer.dev_trainjobs.yaml) takes every
// example and refuses broken TrainJobs at the broken field.
TEST_F(KubectlTest, TheProjectCrdAcceptsTheExamplesAndRefusesBrokenJobs) {
  const std::string crd = std::string(PACER_SOURCE_DIR) + "/manifests/crd/pacer.dev_trainjobs.yaml";
  if (!std::filesystem::exists(crd)) GTEST_SKIP() << crd << " does not exist";
  CommandResult registered = Kubectl("apply -f " + crd);
  ASSERT_EQ(registered.exit_code, 0) << registered.output;
  EXPECT_THAT(registered.output,
              HasSubstr("customresourcedefinition.apiextensions.k8s.io/trainjobs.pacer.dev"));

  int examples = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(PACER_SOURCE_DIR) + "/manifests/examples")) {
    if (entry.path().extension() != ".yaml") continue;
    ++examples;
    CommandResult applied = Kubectl("apply -f " + entry.path().string());
    EXPECT_EQ(applied.exit_code, 0) << entry.path() << ": " << applied.output;
    EXPECT_THAT(applied.output, HasSubstr("created")) << entry.path();
  }
  EXPECT_GE(examples, 5);
  EXPECT_EQ(server_->ListObjects("/apis/pacer.dev/v1alpha1/trainjobs").size(),
            static_cast<size_t>(examples));
  // The CRD's category: `kubectl get pacer` lists TrainJobs. kubectl's
  // discovery cache still holds the built-in TrainJob it saw before the CRD
  // (found, so never refreshed), which has no categories: start afresh.
  std::filesystem::remove_all(dir_ + "/cache");
  CommandResult category = Kubectl("get pacer -A");
  EXPECT_EQ(category.exit_code, 0) << category.output;
  EXPECT_THAT(category.output, HasSubstr("quickstart"));
  // The fully qualified name (docs/getting-started.md), which never means
  // Kubeflow Trainer's TrainJob.
  CommandResult qualified = Kubectl("get trainjobs.pacer.dev -A");
  EXPECT_EQ(qualified.exit_code, 0) << qualified.output;
  EXPECT_THAT(qualified.output, HasSubstr("quickstart"));

  const std::string quickstart = ReadSource("manifests/examples/quickstart.yaml");
  ASSERT_FALSE(quickstart.empty());
  struct Broken {
    std::string from;
    std::string to;
    std::string error;
  };
  const Broken broken[] = {
      {"objective: time", "objective: speed",
       "spec.objective: Unsupported value: \"speed\": supported values: \"cost\", \"time\""},
      {"precision: fp32", "precision: fp64",
       "spec.training.precision: Unsupported value: \"fp64\""},
      {"layers: 2", "layers: 0",
       "spec.model.layers: Invalid value: 0: spec.model.layers in body should be greater than "
       "or equal to 1"},
      {"globalBatchSize: 16", "globalBatchSize: \"16\"",
       "spec.training.globalBatchSize: Invalid value: \"string\": "
       "spec.training.globalBatchSize in body must be of type integer: \"string\""},
      {"  maxDuration: 10m", "  maxDuration: 10m\n  gpuz: 8",
       "strict decoding error: unknown field \"spec.gpuz\""},
      // A zero amount and a sub-second re-plan interval: refused at apply
      // time, not by the controller's InvalidSpec condition once created.
      {"maxDuration: 10m", "maxDuration: \"0s\"",
       "spec.maxDuration: Invalid value: \"0s\": spec.maxDuration in body should match"},
      {"interval: 10s", "interval: 500ms",
       "spec.replan.interval: Invalid value: \"500ms\": spec.replan.interval in body should "
       "match"},
  };
  int n = 0;
  for (const Broken& b : broken) {
    std::string yaml = quickstart;
    const size_t at = yaml.find(b.from);
    ASSERT_NE(at, std::string::npos) << b.from;
    yaml.replace(at, b.from.size(), b.to);
    yaml.replace(yaml.find("name: quickstart"), 16, "name: broken-" + std::to_string(n));
    CommandResult refused =
        Kubectl("apply -f " + WriteFile("broken-" + std::to_string(n++) + ".yaml", yaml));
    EXPECT_NE(refused.exit_code, 0) << b.to;
    EXPECT_THAT(refused.output, HasSubstr(b.error)) << b.to;
  }
  EXPECT_EQ(server_->ListObjects("/apis/pacer.dev/v1alpha1/trainjobs").size(),
            static_cast<size_t>(examples));
}
#endif

}  // namespace
}  // namespace pacer::testing
