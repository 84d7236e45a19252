// The chart's objects and the kustomize manifests, applied with the real
// kubectl to the test API server; the example TrainJobs against the CRD; and
// what both sources must agree on: the controller's rights and its hardened
// pod.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "deploy_util.h"
#include "reconcile/job_object.h"
#include "resource_table.h"

namespace pacer::deploy {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kCrdPath[] =
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/trainjobs.pacer.dev";

// Every optional object of the chart, so that all of them are applied.
constexpr char kChartAllOn[] =
    "--set serviceMonitor.enabled=true --set podMonitor.enabled=true "
    "--set prometheusRule.enabled=true --set grafanaDashboard.enabled=true";

struct Rendered {
  std::string yaml;
  std::vector<json> objects;
};

// `kubectl kustomize manifests`: needs only the client.
Rendered Kustomize() {
  CommandResult r =
      RunCommand(std::string(KUBECTL_BINARY) + " kustomize " + SourcePath("manifests"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return {r.out, YamlDocuments(r.out)};
}

class ApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (env_.skipped()) GTEST_SKIP() << "kubectl was not found when the build was configured";
  }

  // Writes `yaml` to a file and applies it; returns kubectl's result.
  CommandResult Apply(const std::string& name, const std::string& yaml) {
    const std::string path = (env_.dir() / name).string();
    WriteFile(path, yaml);
    return env_.Kubectl("apply -f " + path);
  }

  // The chart with every option on; skips the test without helm.
  std::optional<Rendered> Chart(const std::string& args = kChartAllOn) {
    std::string why;
    std::optional<std::string> helm = Helm(&why);
    if (!helm) return std::nullopt;
    CommandResult r = HelmTemplate(*helm, args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Rendered{r.out, YamlDocuments(r.out)};
  }

  // Each object of `rendered` now exists on the server.
  void ExpectAllApplied(const Rendered& rendered, const CommandResult& applied) {
    ASSERT_EQ(applied.exit_code, 0) << applied.out << applied.err;
    for (const json& o : rendered.objects) {
      // kubectl names an object <kind>.<group>/<name>, or <kind>/<name> in
      // the core group, in lower case.
      std::string kind = o["kind"];
      std::transform(kind.begin(), kind.end(), kind.begin(), ::tolower);
      const std::string api_version = o["apiVersion"];
      const size_t slash = api_version.find('/');
      const std::string group =
          slash == std::string::npos ? "" : "." + api_version.substr(0, slash);
      const std::string name = o["metadata"]["name"];
      EXPECT_THAT(applied.out, HasSubstr(kind + group + "/" + name + " created")) << applied.out;
    }
  }

  KubectlEnv env_;
};

TEST_F(ApplyTest, KustomizeManifestsAreAcceptedAndExampleJobsListWithTheirColumns) {
  const Rendered manifests = Kustomize();
  EXPECT_GE(manifests.objects.size(), 10u);
  ExpectAllApplied(manifests, Apply("manifests.yaml", manifests.yaml));
  ASSERT_TRUE(env_.server().GetObject(kCrdPath).ok());

  // Every example is accepted by the schema.
  CommandResult examples = env_.Kubectl("apply -f " + SourcePath("manifests/examples"));
  ASSERT_EQ(examples.exit_code, 0) << examples.out << examples.err;
  for (const char* name : {"gpt-350m-quick", "impossible-deadline", "llama-70b-multinode",
                           "llama-7b-h100", "quickstart"}) {
    EXPECT_THAT(examples.out, HasSubstr("trainjob.pacer.dev/" + std::string(name) + " created"));
  }

  // The controller's status, as it writes it, shows in the columns: times as
  // RFC 3339 strings (a date column would show a future time as "<invalid>").
  const std::string path = "/apis/pacer.dev/v1alpha1/namespaces/research/trainjobs/llama-7b-h100";
  json job = env_.server().GetObject(path).value();
  job["status"] = json::parse(R"({
    "phase": "Running", "plan": {"gpus": 64}, "progress": {"percent": 12.5},
    "projectedCompletionTime": "2030-01-02T03:04:05Z", "deadline": "2030-01-03T00:00:00Z",
    "deadlineSlackSeconds": 75355, "deadlineSlack": "+20h56m"})");
  ASSERT_TRUE(env_.server().UpdateObject(path, job).ok());
  CommandResult get = env_.Kubectl("get tj -A");
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_TRUE(std::regex_search(
      get.out, std::regex("NAMESPACE +NAME +PHASE +GPUS +PROGRESS +ETA +DEADLINE +SLACK +AGE\n")))
      << get.out;
  EXPECT_TRUE(std::regex_search(
      get.out, std::regex("research +llama-7b-h100 +Running +64 +12.5 +"
                          "2030-01-02T03:04:05Z +2030-01-03T00:00:00Z +\\+20h56m ")))
      << get.out;
  EXPECT_THAT(get.out, HasSubstr("quickstart"));
}

// The reconciler keeps its bookkeeping in the status (job_object.h) and reads
// it back each pass: a field the CRD's schema lacks is pruned by a real API
// server, and what it carried (the re-plan's layout, the memory margin, the
// excluded nodes) would be lost without a sign. Every persisted field, set,
// must come back unchanged through the real CRD.
TEST_F(ApplyTest, EveryStatusFieldTheReconcilerPersistsSurvivesTheCrd) {
  ASSERT_EQ(Apply("manifests.yaml", Kustomize().yaml).exit_code, 0);
  ASSERT_EQ(
      env_.Kubectl("apply -f " + SourcePath("manifests/examples/llama-7b-h100.yaml")).exit_code, 0);
  const std::string path = "/apis/pacer.dev/v1alpha1/namespaces/research/trainjobs/llama-7b-h100";
  controller::PersistedState state;
  state.attempt = 3;
  state.plan_unix_seconds = 1795000000;
  state.last_replan_unix_seconds = 1795003600;
  state.calibration.by_gpu_type["H100-SXM"].step_time_ratio = 1.25;
  planner::Layout next;
  next.gpu_type = "H100-SXM";
  next.pool = "h100";
  next.nodes = 2;
  next.gpus_per_node = 8;
  next.tensor_parallel = 2;
  next.pipeline_parallel = 2;
  next.data_parallel = 4;
  next.virtual_stages = 2;
  next.sequence_parallel = true;
  next.zero_stage = 1;
  next.micro_batch_size = 2;
  next.gradient_accumulation_steps = 64;
  next.recompute = planner::Recompute::kSelective;
  state.next_layout = next;
  state.failures.memory_margin_fraction = 0.2;
  state.failures.collective_failures_by_node = {{"gpu-3", 1}};
  state.failures.excluded_nodes = {"gpu-7"};
  nlohmann::ordered_json written = nlohmann::ordered_json::object();
  controller::WritePersistedState(state, &written);

  json job = env_.server().GetObject(path).value();
  job["status"] = json::parse(written.dump());
  ASSERT_TRUE(env_.server().UpdateObject(path, job).ok());
  const json stored = env_.server().GetObject(path).value()["status"];
  EXPECT_EQ(stored, json::parse(written.dump()));
  const controller::PersistedState read = controller::ReadPersistedState(stored);
  ASSERT_TRUE(read.next_layout.has_value());
  EXPECT_EQ(read.next_layout->ToString(), next.ToString());
  EXPECT_EQ(read.next_layout->pool, "h100");
  EXPECT_EQ(read.next_layout->virtual_stages, 2);
  EXPECT_EQ(read.failures.excluded_nodes, state.failures.excluded_nodes);
}

TEST_F(ApplyTest, KustomizeCarriesTheDashboardForTheGrafanaSidecar) {
  const json map = FindObject(Kustomize().objects, "ConfigMap", "pacer-dashboard");
  ASSERT_TRUE(map.is_object());
  EXPECT_EQ(map["metadata"]["labels"]["grafana_dashboard"], "1");
  EXPECT_EQ(json::parse(map["data"]["pacer.json"].get<std::string>()),
            json::parse(ReadFile(SourcePath("manifests/grafana/pacer.json"))));
}

TEST_F(ApplyTest, AnInvalidTrainJobIsRefusedWithTheSchemasMessage) {
  ASSERT_EQ(Apply("manifests.yaml", Kustomize().yaml).exit_code, 0);
  CommandResult refused =
      env_.Kubectl("apply -f " + SourcePath("tests/deploy/testdata/invalid-trainjob.yaml"));
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  EXPECT_THAT(refused.err, HasSubstr("is invalid"));
  EXPECT_THAT(refused.err, HasSubstr("spec.training.globalBatchSize: Invalid value: 0"));
  EXPECT_THAT(refused.err, HasSubstr("spec.training.precision: Unsupported value: \"bf32\""));
  EXPECT_FALSE(env_.server()
                   .GetObject("/apis/pacer.dev/v1alpha1/namespaces/default/trainjobs/invalid-batch")
                   .ok());
}

TEST_F(ApplyTest, ChartObjectsAreAcceptedWithEveryOptionOn) {
  std::optional<Rendered> chart = Chart();
  if (!chart) GTEST_SKIP() << "helm cannot be installed here";
  CommandResult crds =
      env_.Kubectl("apply -f " + SourcePath("tests/deploy/testdata/monitoring-crds.yaml"));
  ASSERT_EQ(crds.exit_code, 0) << crds.err;
  ExpectAllApplied(*chart, Apply("chart.yaml", chart->yaml));
  EXPECT_TRUE(
      env_.server()
          .GetObject(
              "/apis/monitoring.coreos.com/v1/namespaces/pacer-system/podmonitors/pacer-workers")
          .ok());
  CommandResult example =
      env_.Kubectl("apply -f " + SourcePath("manifests/examples/quickstart.yaml"));
  EXPECT_EQ(example.exit_code, 0) << example.err;
}

TEST_F(ApplyTest, TheCrdsPrinterColumnsAreTheOnesTheTestServerBuildsIn) {
  json crd = Kustomize().objects[0];
  for (const json& o : Kustomize().objects) {
    if (o["kind"] == "CustomResourceDefinition") crd = o;
  }
  const json columns = crd["spec"]["versions"][0]["additionalPrinterColumns"];
  const std::vector<testing::PrinterColumn> builtin = testing::TrainJobPrinterColumns();
  ASSERT_EQ(columns.size(), builtin.size());
  for (size_t i = 0; i < builtin.size(); ++i) {
    EXPECT_EQ(columns[i]["name"], builtin[i].name) << i;
    EXPECT_EQ(columns[i]["jsonPath"], builtin[i].json_path) << i;
  }
}

// --- what the chart and the manifests must agree on ------------------------

json RulesOf(const std::vector<json>& objects, const std::string& kind, const std::string& name) {
  const json o = FindObject(objects, kind, name);
  EXPECT_TRUE(o.is_object()) << kind << "/" << name;
  return o.is_object() ? o["rules"] : json();
}

TEST_F(ApplyTest, TheChartGrantsWhatTheManifestsGrant) {
  std::optional<Rendered> chart = Chart("");
  if (!chart) GTEST_SKIP() << "helm cannot be installed here";
  const Rendered manifests = Kustomize();
  for (const auto& [kind, name] :
       std::vector<std::pair<std::string, std::string>>{{"ClusterRole", "pacer-controller"},
                                                        {"ClusterRole", "pacer-controller-jobs"},
                                                        {"Role", "pacer-leader-election"},
                                                        {"ClusterRole", "pacer-trainjob-editor"},
                                                        {"ClusterRole", "pacer-trainjob-viewer"}}) {
    const json from_chart = RulesOf(chart->objects, kind, name);
    EXPECT_FALSE(from_chart.empty()) << name;
    EXPECT_EQ(from_chart, RulesOf(manifests.objects, kind, name)) << kind << "/" << name;
  }
  for (const auto& [kind, name] : std::vector<std::pair<std::string, std::string>>{
           {"ClusterRoleBinding", "pacer-controller"},
           {"ClusterRoleBinding", "pacer-controller-jobs"},
           {"RoleBinding", "pacer-leader-election"}}) {
    const json a = FindObject(chart->objects, kind, name);
    const json b = FindObject(manifests.objects, kind, name);
    ASSERT_TRUE(a.is_object() && b.is_object()) << name;
    EXPECT_EQ(a["roleRef"], b["roleRef"]) << name;
    EXPECT_EQ(a["subjects"], b["subjects"]) << name;
  }
  // Aggregation into the built-in roles, by label.
  for (const std::vector<json>* objects :
       {static_cast<const std::vector<json>*>(&chart->objects), &manifests.objects}) {
    const json editor = FindObject(*objects, "ClusterRole", "pacer-trainjob-editor");
    EXPECT_EQ(editor["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"], "true");
    const json viewer = FindObject(*objects, "ClusterRole", "pacer-trainjob-viewer");
    EXPECT_EQ(viewer["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"], "true");
  }
}

// The pod runs as a non-root user with a read-only root file system, no
// capabilities and no way to gain privileges: what the restricted Pod
// Security Standard demands.
void ExpectHardened(const json& deployment, const std::string& source) {
  SCOPED_TRACE(source);
  ASSERT_TRUE(deployment.is_object());
  const json pod = deployment["spec"]["template"]["spec"];
  EXPECT_EQ(pod["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ(pod["securityContext"]["runAsUser"], 65532);
  EXPECT_EQ(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
  EXPECT_FALSE(pod.contains("hostNetwork") || pod.contains("hostPID") || pod.contains("hostIPC"));
  ASSERT_FALSE(pod["containers"].empty());
  for (const json& c : pod["containers"]) {
    const json sc = c["securityContext"];
    EXPECT_EQ(sc["runAsNonRoot"], true);
    EXPECT_EQ(sc["runAsUser"], 65532);
    EXPECT_EQ(sc["readOnlyRootFilesystem"], true);
    EXPECT_EQ(sc["allowPrivilegeEscalation"], false);
    EXPECT_EQ(sc["capabilities"]["drop"], json({"ALL"}));
    EXPECT_FALSE(sc["capabilities"].contains("add"));
    EXPECT_FALSE(sc.contains("privileged") && sc["privileged"] == true);
    EXPECT_TRUE(c["resources"]["requests"].contains("memory"));
    EXPECT_TRUE(c["resources"]["limits"].contains("memory"));
    EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    for (const char* probe : {"livenessProbe", "readinessProbe"}) {
      const json port = c[probe]["httpGet"]["port"];
      bool serves_8081 = port == 8081;
      for (const json& p : c["ports"]) {
        if (p["name"] == port && p["containerPort"] == 8081) serves_8081 = true;
      }
      EXPECT_TRUE(serves_8081) << probe << " port " << port;
    }
    const std::vector<std::string> args = c["args"].get<std::vector<std::string>>();
    for (const char* flag : {"--leader-elect", "--metrics-port=8080", "--health-probe-port=8081",
                             "--log-format=json"}) {
      EXPECT_NE(std::find(args.begin(), args.end(), flag), args.end()) << flag;
    }
    EXPECT_TRUE(std::any_of(args.begin(), args.end(), [](const std::string& a) {
      return a.rfind("--prometheus-url=http", 0) == 0;
    }));
  }
}

TEST_F(ApplyTest, BothSourcesRunTheControllerHardened) {
  ExpectHardened(FindObject(Kustomize().objects, "Deployment", "pacer-controller"), "manifests");
  std::optional<Rendered> chart = Chart("");
  if (!chart) GTEST_SKIP() << "helm cannot be installed here";
  ExpectHardened(FindObject(chart->objects, "Deployment", "pacer-controller"), "chart");
  const json ns = FindObject(Kustomize().objects, "Namespace", "pacer-system");
  EXPECT_EQ(ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted");
}

}  // namespace
}  // namespace pacer::deploy
