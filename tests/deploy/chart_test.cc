// The Helm chart with the real helm 3.17: lint, the values schema, what each
// value turns on and off, and that the chart's copies of the CRD, the
// controller's rights, the alert rules and the dashboard are the files under
// manifests/ (the chart reads them through links, and `helm package` must
// carry their contents).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <regex>

#include "cli/yaml_json.h"
#include "core/node_inventory.h"
#include "daemon/worker_pods.h"
#include "deploy_util.h"

namespace pacer::deploy {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

// Every optional part of the chart on, every value set to something other
// than its default.
constexpr char kAllOn[] = R"(replicaCount: 2
crds: {install: true, keep: true}
rbac: {create: true, aggregateToDefaultRoles: true}
serviceAccount: {create: true, name: pacer-sa, annotations: {example.com/role: trainer}}
image: {repository: registry.example.com/pacer-controller, tag: "9.9.9", pullPolicy: Always}
imagePullSecrets: [{name: regcred}]
workerImage: {repository: registry.example.com/pacer-worker, tag: "9.9.8"}
leaderElection: {enabled: true, leaseName: pacer-lease}
prometheus: {url: "http://prometheus.example:9090"}
controller:
  watchNamespace: research
  workers: 8
  maxRestarts: 5
  relaunchSeconds: 120
  podTerminationGraceSeconds: 600
  workerCpuPerGpu: 2.5
  workerMemoryPerGpuGiB: 8
  pendingRetrySeconds: 45
  gangCompletionSeconds: 90
  gangSchedulingSeconds: 0
  replan: {minImprovementSeconds: 300, minIntervalSeconds: 900}
  metricsPort: 9080
  healthProbePort: 9081
  logFormat: text
  logLevel: debug
  extraArgs: ["--bind-address=0.0.0.0"]
resources: {requests: {cpu: 200m, memory: 512Mi}, limits: {memory: 2Gi}}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: control-plane, effect: NoSchedule}]
affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: []}}
priorityClassName: system-cluster-critical
podAnnotations: {example.com/team: ml-platform}
podLabels: {team: ml-platform}
service: {port: 9080}
serviceMonitor: {enabled: true, additionalLabels: {release: kube-prometheus-stack}, interval: 15s, scrapeTimeout: 10s}
podMonitor: {enabled: true, additionalLabels: {release: kube-prometheus-stack}, interval: 10s, scrapeTimeout: 5s, namespaces: [research]}
prometheusRule: {enabled: true, additionalLabels: {release: kube-prometheus-stack}}
grafanaDashboard: {enabled: true, namespace: monitoring, additionalLabels: {team: ml-platform}, annotations: {grafana_folder: Pacer}}
)";

class ChartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    std::optional<std::string> helm = Helm(&why);
    if (!helm) GTEST_SKIP() << why;
    helm_ = *helm;
    char pattern[] = "/tmp/pacer-chart-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    all_on_ = (dir_ / "all-on.yaml").string();
    WriteFile(all_on_, kAllOn);
  }
  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) fs::remove_all(dir_, ignored);
  }

  // The rendered objects; fails the test when helm fails.
  std::vector<json> Render(const std::string& args = "") {
    CommandResult r = HelmTemplate(helm_, args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return YamlDocuments(r.out);
  }

  std::string helm_;
  fs::path dir_;
  std::string all_on_;
};

TEST_F(ChartTest, LintPassesWithDefaultsAndWithEveryOptionOn) {
  const std::string chart = SourcePath("charts/pacer");
  CommandResult defaults = RunCommand(helm_ + " lint --strict " + chart);
  EXPECT_EQ(defaults.exit_code, 0) << defaults.out << defaults.err;
  EXPECT_THAT(defaults.out, HasSubstr("0 chart(s) failed"));
  CommandResult all_on = RunCommand(helm_ + " lint --strict " + chart + " -f " + all_on_);
  EXPECT_EQ(all_on.exit_code, 0) << all_on.out << all_on.err;
  EXPECT_THAT(all_on.out, HasSubstr("0 chart(s) failed"));
}

TEST_F(ChartTest, ValuesTheSchemaDoesNotKnowAreRefused) {
  for (const char* unknown : {"--set notAValue=1", "--set serviceMonitor.enable=true",
                              "--set crds.instal=false", "--set controller.replan.slack=5",
                              "--set podMonitor.honorLabels=false"}) {
    CommandResult r = HelmTemplate(helm_, unknown);
    EXPECT_NE(r.exit_code, 0) << unknown;
    EXPECT_THAT(r.err, HasSubstr("Additional property")) << unknown;
  }
  // Wrong types and values are refused too, not only unknown keys.
  for (const char* wrong : {"--set controller.logFormat=yaml", "--set controller.workers=0",
                            "--set-string replicaCount=two", "--set image.pullPolicy=Sometimes",
                            // A selector label would part the pods from their Deployment.
                            R"(--set 'podLabels.app\.kubernetes\.io/component=x')",
                            // A password would be written into TrainJob conditions.
                            "--set prometheus.url=http://alice:s3cret@prometheus:9090"}) {
    CommandResult r = HelmTemplate(helm_, wrong);
    EXPECT_NE(r.exit_code, 0) << wrong;
    EXPECT_THAT(r.err, HasSubstr("values don't meet the specifications")) << wrong;
  }
}

TEST_F(ChartTest, EveryValueIsCommentedInValuesYaml) {
  // A comment directly above a key documents it and everything nested in it
  // (resources: {requests: ...} is one value); a key of a block without a
  // comment (crds:) must have its own.
  const std::string values = ReadFile(SourcePath("charts/pacer/values.yaml"));
  std::istringstream lines(values);
  std::string line;
  bool comment_above = false;
  std::vector<std::pair<size_t, bool>> open_blocks;  // indent, documented
  int leaves = 0;
  while (std::getline(lines, line)) {
    const size_t indent = line.find_first_not_of(' ');
    if (indent == std::string::npos) {
      comment_above = false;
      continue;
    }
    if (line[indent] == '#') {
      comment_above = true;
      continue;
    }
    while (!open_blocks.empty() && open_blocks.back().first >= indent) open_blocks.pop_back();
    bool covered = comment_above;
    for (const auto& [block_indent, documented] : open_blocks) covered = covered || documented;
    if (line.back() == ':') {
      open_blocks.emplace_back(indent, comment_above);
    } else {
      ++leaves;
      EXPECT_TRUE(covered) << "value without a comment: " << line;
    }
    comment_above = false;
  }
  EXPECT_GT(leaves, 40);
}

TEST_F(ChartTest, TheCrdIsInstalledAndKeptByDefaultAndLeftOutOnRequest) {
  json crd = FindObject(Render(), "CustomResourceDefinition", "trainjobs.pacer.dev");
  ASSERT_TRUE(crd.is_object());
  EXPECT_EQ(crd["metadata"]["annotations"]["helm.sh/resource-policy"], "keep");

  json unkept = FindObject(Render("--set crds.keep=false"), "CustomResourceDefinition");
  ASSERT_TRUE(unkept.is_object());
  EXPECT_FALSE(unkept["metadata"].contains("annotations"));

  const std::vector<json> without = Render("--set crds.install=false");
  EXPECT_TRUE(FindObject(without, "CustomResourceDefinition").is_null());
  EXPECT_TRUE(FindObject(without, "Deployment").is_object()) << "the rest is still there";
}

TEST_F(ChartTest, TheChartsCrdIsTheManifestsCrd) {
  json from_chart = FindObject(Render(), "CustomResourceDefinition", "trainjobs.pacer.dev");
  ASSERT_TRUE(from_chart.is_object());
  from_chart["metadata"].erase("annotations");
  const std::vector<json> manifest =
      YamlDocuments(ReadFile(SourcePath("manifests/crd/pacer.dev_trainjobs.yaml")));
  ASSERT_EQ(manifest.size(), 1u);
  EXPECT_EQ(from_chart, manifest[0]);
}

TEST_F(ChartTest, RbacIsOptionalAndTheLeaseRoleNamesOnlyTheLease) {
  const std::vector<json> off = Render("--set rbac.create=false");
  for (const char* kind : {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}) {
    EXPECT_TRUE(FindObject(off, kind).is_null()) << kind;
  }
  const std::vector<json> on = Render("-f " + all_on_);
  const json role = FindObject(on, "Role");
  ASSERT_TRUE(role.is_object());
  EXPECT_EQ(role["metadata"]["namespace"], "pacer-system");
  ASSERT_EQ(role["rules"].size(), 2u);
  EXPECT_EQ(role["rules"][0]["verbs"], json({"create"}));
  EXPECT_FALSE(role["rules"][0].contains("resourceNames"));
  EXPECT_EQ(role["rules"][1]["resourceNames"], json({"pacer-lease"}));
  const json deployment = FindObject(on, "Deployment");
  const json args = deployment["spec"]["template"]["spec"]["containers"][0]["args"];
  EXPECT_NE(std::find(args.begin(), args.end(), "--leader-election-id=pacer-lease"), args.end());
  const json binding = FindObject(on, "ClusterRoleBinding");
  EXPECT_EQ(binding["subjects"][0]["name"], "pacer-sa");
  EXPECT_EQ(FindObject(on, "ServiceAccount")["metadata"]["name"], "pacer-sa");
}

// With controller.watchNamespace, the rights on TrainJobs and on what the
// controller creates hold in that namespace only; cluster-wide it only reads
// (the inventory's nodes and pods).
TEST_F(ChartTest, AWatchedNamespaceBindsTheJobRightsThereOnly) {
  const std::vector<json> all = Render();
  const json everywhere = FindObject(all, "ClusterRoleBinding", "pacer-controller-jobs");
  ASSERT_TRUE(everywhere.is_object());
  EXPECT_EQ(everywhere["roleRef"]["name"], "pacer-controller-jobs");
  EXPECT_TRUE(FindObject(all, "RoleBinding", "pacer-controller-jobs").is_null());

  const std::vector<json> one = Render("--set controller.watchNamespace=research");
  EXPECT_TRUE(FindObject(one, "ClusterRoleBinding", "pacer-controller-jobs").is_null());
  const json binding = FindObject(one, "RoleBinding", "pacer-controller-jobs");
  ASSERT_TRUE(binding.is_object());
  EXPECT_EQ(binding["metadata"]["namespace"], "research");
  EXPECT_EQ(binding["roleRef"], json({{"apiGroup", "rbac.authorization.k8s.io"},
                                      {"kind", "ClusterRole"},
                                      {"name", "pacer-controller-jobs"}}));
  EXPECT_EQ(binding["subjects"][0]["name"], "pacer-controller");
  EXPECT_EQ(binding["subjects"][0]["namespace"], "pacer-system");
  // The ClusterRole bound cluster-wide grants reads only.
  const json cluster_role = FindObject(one, "ClusterRole", "pacer-controller");
  ASSERT_TRUE(cluster_role.is_object());
  ASSERT_FALSE(cluster_role["rules"].empty());
  for (const json& rule : cluster_role["rules"]) {
    for (const json& verb : rule["verbs"]) {
      EXPECT_TRUE(verb == "list" || verb == "watch") << rule.dump();
    }
  }
  const json jobs = FindObject(one, "ClusterRole", "pacer-controller-jobs");
  ASSERT_TRUE(jobs.is_object());
  EXPECT_FALSE(jobs["rules"].empty());
}

TEST_F(ChartTest, ControllerFlagsComeFromValues) {
  const json defaults = FindObject(Render(), "Deployment");
  const json c = defaults["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(c["image"], "ghcr.io/pacer-dev/pacer-controller:0.1.0") << "tag = appVersion";
  std::vector<std::string> args = c["args"].get<std::vector<std::string>>();
  for (const char* flag :
       {"--leader-elect", "--leader-election-namespace=pacer-system", "--metrics-port=8080",
        "--health-probe-port=8081", "--log-format=json", "--max-restarts=3",
        "--prometheus-url=http://prometheus-operated.monitoring.svc:9090",
        "--worker-image=ghcr.io/pacer-dev/pacer-worker:0.1.0"}) {
    EXPECT_NE(std::find(args.begin(), args.end(), flag), args.end()) << flag;
  }

  const json on = FindObject(Render("-f " + all_on_), "Deployment");
  const json pod = on["spec"]["template"]["spec"];
  const json d = pod["containers"][0];
  EXPECT_EQ(on["spec"]["replicas"], 2);
  EXPECT_EQ(d["image"], "registry.example.com/pacer-controller:9.9.9");
  EXPECT_EQ(d["imagePullPolicy"], "Always");
  args = d["args"].get<std::vector<std::string>>();
  for (const char* flag :
       {"--workers=8", "--max-restarts=5", "--relaunch-seconds=120",
        "--pod-termination-grace-seconds=600", "--worker-cpu-per-gpu=2.5",
        "--worker-memory-per-gpu-gib=8", "--pending-retry-seconds=45",
        "--gang-completion-seconds=90", "--gang-scheduling-seconds=0",
        "--replan-min-improvement-seconds=300", "--replan-min-interval-seconds=900",
        "--metrics-port=9080", "--health-probe-port=9081", "--log-format=text", "--log-level=debug",
        "--namespace=research", "--prometheus-url=http://prometheus.example:9090",
        "--worker-image=registry.example.com/pacer-worker:9.9.8", "--bind-address=0.0.0.0"}) {
    EXPECT_NE(std::find(args.begin(), args.end(), flag), args.end()) << flag;
  }
  EXPECT_EQ(d["ports"][0]["containerPort"], 9080);
  EXPECT_EQ(d["resources"]["limits"]["memory"], "2Gi");
  EXPECT_EQ(pod["priorityClassName"], "system-cluster-critical");
  EXPECT_EQ(pod["nodeSelector"]["kubernetes.io/os"], "linux");
  EXPECT_EQ(pod["tolerations"][0]["key"], "dedicated");
  EXPECT_TRUE(pod["affinity"].contains("podAntiAffinity"));
  EXPECT_EQ(pod["imagePullSecrets"][0]["name"], "regcred");
  EXPECT_EQ(on["spec"]["template"]["metadata"]["annotations"]["example.com/team"], "ml-platform");
  EXPECT_EQ(on["spec"]["template"]["metadata"]["labels"]["team"], "ml-platform");

  // Without Prometheus the flag is left out (the controller then runs jobs
  // on predictions), and leader election can be turned off for one replica
  // only.
  const json bare = FindObject(Render("--set prometheus.url= --set leaderElection.enabled=false"),
                               "Deployment");
  args = bare["spec"]["template"]["spec"]["containers"][0]["args"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(args.begin(), args.end(), "--no-leader-elect"), args.end());
  for (const std::string& a : args) EXPECT_EQ(a.rfind("--prometheus-url", 0), std::string::npos);
  // Nor may an upgrade overlap the old and the new controller: a rolling
  // update ran both, each launching every job.
  EXPECT_EQ(bare["spec"]["strategy"]["type"], "Recreate") << bare.dump(2);
  EXPECT_FALSE(defaults["spec"].contains("strategy")) << defaults.dump(2);
  CommandResult two = HelmTemplate(helm_, "--set leaderElection.enabled=false --set replicaCount=2");
  EXPECT_NE(two.exit_code, 0);
  EXPECT_THAT(two.err, HasSubstr("needs leaderElection.enabled"));
}

// A digest pins what every node runs: a tag can be moved to other bytes, a
// digest cannot. The controller's image and the workers' default are pulled
// by digest when one is set (a tag given with it stays, for people), and
// anything but "sha256:" and 64 hex digits is refused at install.
TEST_F(ChartTest, ImagesCanBePinnedByDigest) {
  const std::string digest = "sha256:" + std::string(63, 'a') + "7";
  const auto images = [&](const std::string& args) {
    const json c =
        FindObject(Render(args), "Deployment")["spec"]["template"]["spec"]["containers"][0];
    std::string worker;
    for (const std::string& a : c["args"].get<std::vector<std::string>>()) {
      if (a.rfind("--worker-image=", 0) == 0)
        worker = a.substr(std::string("--worker-image=").size());
    }
    return std::pair<std::string, std::string>{c["image"].get<std::string>(), worker};
  };
  EXPECT_EQ(images("--set image.digest=" + digest + " --set workerImage.digest=" + digest),
            (std::pair<std::string, std::string>{"ghcr.io/pacer-dev/pacer-controller@" + digest,
                                                 "ghcr.io/pacer-dev/pacer-worker@" + digest}));
  EXPECT_EQ(
      images("--set image.tag=1.2.3 --set image.digest=" + digest + " --set workerImage.tag=1.2.4"),
      (std::pair<std::string, std::string>{"ghcr.io/pacer-dev/pacer-controller:1.2.3@" + digest,
                                           "ghcr.io/pacer-dev/pacer-worker:1.2.4"}));
  for (const std::string& wrong :
       {std::string("--set image.digest=latest"), "--set workerImage.digest=" + digest.substr(7),
        "--set workerImage.digest=sha256:" + std::string(64, 'A'),
        "--set image.digest=" + digest + "0"}) {
    CommandResult r = HelmTemplate(helm_, wrong);
    EXPECT_NE(r.exit_code, 0) << wrong;
    EXPECT_THAT(r.err, HasSubstr("digest: Does not match pattern")) << wrong;
  }
}

// extraArgs may override a rendered flag (the last value wins), but not
// the ones the chart's checks and RBAC follow: `--no-leader-elect` with
// replicaCount 2 rendered two active controllers, `--namespace` kept the
// cluster-wide rights.
TEST_F(ChartTest, ExtraArgsCannotOverrideTheFlagsTheChartsChecksFollow) {
  for (const auto& [arg, value] :
       {std::pair<std::string, std::string>{"--no-leader-elect", "leaderElection.enabled"},
        {"--leader-elect=false", "leaderElection.enabled"},
        {"--namespace=team-a", "controller.watchNamespace"},
        {"--leader-election-id=other", "leaderElection.leaseName"}}) {
    CommandResult r = HelmTemplate(
        helm_, "--set replicaCount=2 --set-json 'controller.extraArgs=[\"" + arg + "\"]'");
    EXPECT_NE(r.exit_code, 0) << arg;
    const std::string flag =
        arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
    EXPECT_THAT(r.err,
                HasSubstr("controller.extraArgs: --" + flag + " is set by the chart from " + value))
        << arg;
  }
}

// The longest name, the metrics Service's, stays a DNS label for a long
// release name (it was 65 characters: the install failed), and a prefix no
// Service may carry (a leading digit, a dot: Helm allows both in release
// names) fails the render saying what to set.
TEST_F(ChartTest, TheMetricsServicesNameIsAValidServiceName) {
  const std::vector<json> long_name =
      Render("--set fullnameOverride=ml-platform-production-training-cluster1-pacer");
  const json service = FindObject(long_name, "Service");
  ASSERT_TRUE(service.is_object());
  const std::string name = service["metadata"]["name"];
  EXPECT_LE(name.size(), 63u) << name;
  EXPECT_EQ(name.substr(name.size() - std::string("-controller-metrics").size()),
            "-controller-metrics");
  EXPECT_EQ(FindObject(Render(), "Service")["metadata"]["name"], "pacer-controller-metrics");
  for (const char* prefix : {"1pacer", "pacer.prod"}) {
    CommandResult r = HelmTemplate(helm_, std::string("--set fullnameOverride=") + prefix);
    EXPECT_NE(r.exit_code, 0) << prefix;
    EXPECT_THAT(r.err, HasSubstr("is not a valid Service name")) << prefix;
  }
}

TEST_F(ChartTest, MonitorsAreOptInAndFollowTheLabelContract) {
  const std::vector<json> defaults = Render();
  for (const char* kind : {"ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap"}) {
    EXPECT_TRUE(FindObject(defaults, kind).is_null()) << kind << " is opt-in";
  }
  const std::vector<json> on = Render("-f " + all_on_);
  const json service_monitor = FindObject(on, "ServiceMonitor");
  ASSERT_TRUE(service_monitor.is_object());
  EXPECT_EQ(service_monitor["metadata"]["labels"]["release"], "kube-prometheus-stack");
  const json endpoint = service_monitor["spec"]["endpoints"][0];
  EXPECT_EQ(endpoint["port"], "metrics");
  EXPECT_EQ(endpoint["honorLabels"], true);
  EXPECT_EQ(endpoint["interval"], "15s");
  EXPECT_EQ(endpoint["relabelings"],
            json::parse(R"([{"action":"replace","targetLabel":"job","replacement":"pacer-controller"}])"));
  // It selects the metrics Service, which selects the controller's pods.
  const json service = FindObject(on, "Service");
  for (const auto& [key, value] : service_monitor["spec"]["selector"]["matchLabels"].items()) {
    EXPECT_EQ(service["metadata"]["labels"][key], value) << key;
  }
  const json pod_labels = FindObject(on, "Deployment")["spec"]["template"]["metadata"]["labels"];
  for (const auto& [key, value] : service["spec"]["selector"].items()) {
    EXPECT_EQ(pod_labels[key], value) << key;
  }

  const json pod_monitor = FindObject(on, "PodMonitor");
  ASSERT_TRUE(pod_monitor.is_object());
  EXPECT_EQ(pod_monitor["metadata"]["labels"]["release"], "kube-prometheus-stack");
  EXPECT_EQ(pod_monitor["spec"]["namespaceSelector"]["matchNames"], json({"research"}));
  EXPECT_EQ(pod_monitor["spec"]["selector"]["matchExpressions"][0],
            json::parse(R"({"key":"pacer.dev/job","operator":"Exists"})"));
  const json pod_endpoint = pod_monitor["spec"]["podMetricsEndpoints"][0];
  // Every local rank's port ("metrics", "metrics-1", ...), not the rendezvous.
  EXPECT_FALSE(pod_endpoint.contains("port")) << "a port would keep rank 0's only";
  // A worker image is the user's: the pod's namespace and the labels the
  // controller set on it, not the series' own, say whose job a series is.
  EXPECT_EQ(pod_endpoint["honorLabels"], false);
  EXPECT_EQ(pod_endpoint["relabelings"], json::parse(R"([
      {"action":"keep","sourceLabels":["__meta_kubernetes_pod_container_port_name"],
       "regex":"metrics(-[0-9]+)?"},
      {"action":"replace","sourceLabels":["__meta_kubernetes_pod_label_pacer_dev_job"],
       "targetLabel":"trainjob"},
      {"action":"replace","sourceLabels":["__meta_kubernetes_pod_label_pacer_dev_attempt"],
       "targetLabel":"attempt"},
      {"action":"replace","targetLabel":"job","replacement":"pacer-workers"}])"));
  // The pod labels it reads are the ones the controller puts on worker pods,
  // as Prometheus names them (every character outside [A-Za-z0-9_] -> '_').
  const auto meta_label = [](std::string key) {
    for (char& c : key) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    return "__meta_kubernetes_pod_label_" + key;
  };
  EXPECT_EQ(pod_endpoint["relabelings"][1]["sourceLabels"][0], meta_label(controller::kJobLabel));
  EXPECT_EQ(pod_endpoint["relabelings"][2]["sourceLabels"][0],
            meta_label(controller::kAttemptLabel));
  const std::regex kept(pod_endpoint["relabelings"][0]["regex"].get<std::string>());
  for (const char* port : {"metrics", "metrics-1", "metrics-15"}) {
    EXPECT_TRUE(std::regex_match(port, kept)) << port;
  }
  for (const char* port : {"rendezvous", "metrics-", "metrics-x", "health"}) {
    EXPECT_FALSE(std::regex_match(port, kept)) << port;
  }
  // By default every namespace's workers are scraped.
  const json any = FindObject(Render("--set podMonitor.enabled=true"), "PodMonitor");
  EXPECT_EQ(any["spec"]["namespaceSelector"], json::parse(R"({"any":true})"));
  // An installation that watches one namespace scrapes that one's workers
  // only (docs/operations.md splits work across such installations), unless
  // told otherwise.
  const json watched = FindObject(
      Render("--set podMonitor.enabled=true --set controller.watchNamespace=team-a"), "PodMonitor");
  EXPECT_EQ(watched["spec"]["namespaceSelector"], json::parse(R"({"matchNames":["team-a"]})"));
  const json told = FindObject(Render("--set podMonitor.enabled=true --set "
                                      "controller.watchNamespace=team-a --set "
                                      "podMonitor.namespaces={team-b}"),
                               "PodMonitor");
  EXPECT_EQ(told["spec"]["namespaceSelector"], json::parse(R"({"matchNames":["team-b"]})"));
}

TEST_F(ChartTest, ThePrometheusRuleCarriesTheRulesFileGroupsUnchanged) {
  const json rule = FindObject(Render("-f " + all_on_), "PrometheusRule");
  ASSERT_TRUE(rule.is_object());
  EXPECT_EQ(rule["metadata"]["labels"]["release"], "kube-prometheus-stack");
  StatusOr<json> file =
      cli::YamlToJson(ReadFile(SourcePath("manifests/prometheus/pacer-rules.yaml")));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_TRUE((*file)["groups"].is_array());
  EXPECT_FALSE((*file)["groups"].empty());
  EXPECT_EQ(rule["spec"]["groups"], (*file)["groups"]);
}

TEST_F(ChartTest, TheDashboardConfigMapCarriesTheDashboardUnchanged) {
  const json map = FindObject(Render("-f " + all_on_), "ConfigMap");
  ASSERT_TRUE(map.is_object());
  EXPECT_EQ(map["metadata"]["namespace"], "monitoring");
  EXPECT_EQ(map["metadata"]["labels"]["grafana_dashboard"], "1");
  EXPECT_EQ(map["metadata"]["annotations"]["grafana_folder"], "Pacer");
  const std::string file = ReadFile(SourcePath("manifests/grafana/pacer.json"));
  ASSERT_FALSE(file.empty());
  // A literal block drops trailing newlines: compare the JSON, then the text.
  EXPECT_EQ(json::parse(map["data"]["pacer.json"].get<std::string>()), json::parse(file));
}

TEST_F(ChartTest, ThePackageCarriesTheLinkedFilesContents) {
  CommandResult packaged =
      RunCommand(helm_ + " package " + SourcePath("charts/pacer") + " --destination " + dir_.string());
  ASSERT_EQ(packaged.exit_code, 0) << packaged.out << packaged.err;
  const std::string tgz = (dir_ / "pacer-0.1.0.tgz").string();
  ASSERT_TRUE(fs::exists(tgz)) << packaged.out;
  for (const auto& [in_chart, in_repo] : std::vector<std::pair<std::string, std::string>>{
           {"files/crd.yaml", "manifests/crd/pacer.dev_trainjobs.yaml"},
           {"files/cluster_role.yaml", "manifests/rbac/cluster_role.yaml"},
           {"files/job_role.yaml", "manifests/rbac/job_role.yaml"},
           {"files/pacer-rules.yaml", "manifests/prometheus/pacer-rules.yaml"},
           {"files/pacer.json", "manifests/grafana/pacer.json"}}) {
    CommandResult extracted = RunCommand("tar -xzOf " + tgz + " pacer/" + in_chart);
    EXPECT_EQ(extracted.exit_code, 0) << in_chart << ": " << extracted.err;
    EXPECT_EQ(extracted.out, ReadFile(SourcePath(in_repo))) << in_chart;
  }
  // The packaged chart renders on its own, away from the repository.
  CommandResult rendered = RunCommand(helm_ + " template pacer " + tgz + " -f " + all_on_);
  EXPECT_EQ(rendered.exit_code, 0) << rendered.err;
  EXPECT_TRUE(FindObject(YamlDocuments(rendered.out), "CustomResourceDefinition").is_object());
}

}  // namespace
}  // namespace pacer::deploy
