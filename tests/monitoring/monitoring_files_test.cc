// Static checks of the Grafana dashboard and the alert rules the Helm chart
// embeds: the dashboard is importable Grafana JSON whose panels all carry a
// stable id, a description, a unit and the datasource variable; every metric
// they use is documented; selectors follow the label contract of
// docs/metrics.md ("Dashboard and alerts"); every alert has a severity,
// annotations and a runbook, and a firing and a quiet case in the promtool
// tests. promql_e2e_test.cc runs the same expressions on a real Prometheus.
#include "monitoring_files.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace pacer::monitoring {
namespace {

using nlohmann::json;

const char kRunbookBase[] = "https://github.com/pacer-dev/pacer/blob/main/docs/operations.md#";

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(MonitoringFilesTest, SubstituteReplacesGrafanaVariablesButNotLabelReplaceGroups) {
  const std::map<std::string, std::string> values = {
      {"train", "WRONG"}, {"trainjob", "tiny"}, {"namespace", "research"}};
  EXPECT_EQ(Substitute(R"(x{job=~"$trainjob", namespace=~"${namespace}"})", values),
            R"(x{job=~"tiny", namespace=~"research"})");
  EXPECT_EQ(Substitute("${namespace:regex}/$unknown", values), "research/$unknown");
  const std::string replace = R"pql(label_replace(x, "trainjob", "$1", "job", "(.+)"))pql";
  EXPECT_EQ(Substitute(replace, values), replace);
  EXPECT_FALSE(HasVariable(replace));
  EXPECT_TRUE(HasVariable("rate(x[$__rate_interval])"));
  EXPECT_TRUE(HasVariable("x{a=\"${a}\"}"));
}

TEST(MonitoringFilesTest, NormalizeSpaceIgnoresLineBreaksAndIndentation) {
  EXPECT_EQ(NormalizeSpace("max by (namespace) (\n    rate(x[5m])\n  )  > 0"),
            "max by (namespace) (rate(x[5m])) > 0");
  EXPECT_EQ(Selectors(R"(sum(up{job="a"}) / pacer_worker_step group_left)"),
            (std::vector<std::pair<std::string, std::string>>{{"up", R"(job="a")"},
                                                              {"pacer_worker_step", ""}}));
}

TEST(MonitoringFilesTest, DashboardIsGrafanaJsonWithDatasourceNamespaceAndTrainJobVariables) {
  const json d = LoadDashboard();
  EXPECT_GE(d.value("schemaVersion", 0), 36);
  EXPECT_LE(d.value("schemaVersion", 0), 41);
  EXPECT_FALSE(d.value("uid", std::string()).empty());
  EXPECT_FALSE(d.value("title", std::string()).empty());
  std::map<std::string, json> vars;
  for (const json& v : d["templating"]["list"]) vars[v.value("name", std::string())] = v;
  ASSERT_TRUE(vars.count("datasource"));
  EXPECT_EQ(vars["datasource"]["type"], "datasource");
  EXPECT_EQ(vars["datasource"]["query"], "prometheus");
  for (const std::string name : {"namespace", "trainjob"}) {
    ASSERT_TRUE(vars.count(name)) << name;
    EXPECT_EQ(vars[name]["type"], "query") << name;
    EXPECT_EQ(vars[name]["datasource"]["uid"], "${datasource}") << name;
  }
  const std::vector<LabelValuesVariable> label_vars = LabelValuesVariables(d);
  ASSERT_EQ(label_vars.size(), 2u);
  EXPECT_EQ(label_vars[0].label, "namespace");
  EXPECT_EQ(label_vars[1].label, "trainjob");
  EXPECT_TRUE(Contains(label_vars[1].selector, "$namespace")) << "TrainJobs of the chosen namespaces";
}

TEST(MonitoringFilesTest, EveryPanelHasAUniqueIdDescriptionUnitAndTheDatasourceVariable) {
  const json d = LoadDashboard();
  std::set<int> ids;
  struct Box {
    int id, x, y, w, h;
  };
  std::vector<Box> boxes;
  int graphs = 0;
  for (const json& p : d["panels"]) {
    const int id = p.value("id", 0);
    EXPECT_GT(id, 0) << p.dump();
    EXPECT_TRUE(ids.insert(id).second) << "duplicate panel id " << id;
    const json& g = p["gridPos"];
    boxes.push_back({id, g["x"], g["y"], g["w"], g["h"]});
    EXPECT_LE(g["x"].get<int>() + g["w"].get<int>(), 24) << "panel " << id;
    if (p["type"] == "row") continue;
    ++graphs;
    EXPECT_FALSE(p.value("title", std::string()).empty()) << "panel " << id;
    EXPECT_GE(p.value("description", std::string()).size(), 40u) << "panel " << id;
    EXPECT_EQ(p["datasource"]["type"], "prometheus") << "panel " << id;
    EXPECT_EQ(p["datasource"]["uid"], "${datasource}") << "panel " << id;
    EXPECT_FALSE(p["fieldConfig"]["defaults"].value("unit", std::string()).empty())
        << "panel " << id << " has no unit";
    ASSERT_FALSE(p.value("targets", json::array()).empty()) << "panel " << id;
    std::set<std::string> refs;
    for (const json& t : p["targets"]) {
      EXPECT_TRUE(refs.insert(t.value("refId", std::string())).second) << "panel " << id;
      EXPECT_FALSE(t.value("expr", std::string()).empty()) << "panel " << id;
      EXPECT_EQ(t["datasource"]["uid"], "${datasource}") << "panel " << id;
    }
  }
  EXPECT_GE(graphs, 20);
  for (size_t i = 0; i < boxes.size(); ++i) {
    for (size_t j = i + 1; j < boxes.size(); ++j) {
      const Box& a = boxes[i];
      const Box& b = boxes[j];
      const bool overlap = a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
      EXPECT_FALSE(overlap) << "panels " << a.id << " and " << b.id << " overlap";
    }
  }
}

// The units the panels must show (Grafana's unit ids), so a renamed metric or
// a copied panel cannot silently show seconds as a plain number.
TEST(MonitoringFilesTest, PanelUnitsMatchTheirMetrics) {
  const json d = LoadDashboard();
  std::map<int, std::string> units;
  for (const json& p : d["panels"]) {
    if (p["type"] != "row") units[p["id"]] = p["fieldConfig"]["defaults"]["unit"];
  }
  EXPECT_EQ(units[2], "dateTimeAsIso");  // timestamps (ms)
  EXPECT_EQ(units[3], "s");              // slack
  EXPECT_EQ(units[4], "percentunit");    // progress 0..1
  EXPECT_EQ(units[8], "s");              // step time
  EXPECT_EQ(units[10], "percentunit");   // MFU 0..1
  EXPECT_EQ(units[16], "bytes");         // memory
  EXPECT_EQ(units[21], "Bps");           // bus bandwidth, bytes/s
  EXPECT_EQ(units[26], "s");             // reconcile duration
  EXPECT_EQ(units[30], "s");             // checkpoint age
}

TEST(MonitoringFilesTest, EveryMetricUsedIsDocumentedInMetricsMd) {
  std::ifstream in(std::string(PACER_SOURCE_DIR) + "/docs/metrics.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  auto documented = [&](const std::string& name) {
    return Contains(doc, "| `" + name + "` |");
  };
  std::vector<Expression> all = DashboardExpressions(LoadDashboard());
  for (const Expression& e : RuleExpressions(LoadRules())) all.push_back(e);
  std::set<std::string> used;
  for (const Expression& e : all) {
    for (const auto& [name, matchers] : Selectors(e.expr)) {
      if (name == "up") continue;  // Prometheus's own, per target
      used.insert(name);
      std::string base = name;
      for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
        if (base.size() > suffix.size() &&
            base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0 &&
            documented(base.substr(0, base.size() - suffix.size()))) {
          base = base.substr(0, base.size() - suffix.size());
        }
      }
      EXPECT_TRUE(documented(base)) << e.where << " uses " << name
                                    << ", not in docs/metrics.md's tables";
    }
  }
  EXPECT_GE(used.size(), 25u);
}

// docs/metrics.md, "Dashboard and alerts": the controller's series carry
// job="pacer-controller"; the workers' carry trainjob (the TrainJob's name)
// and the scrape job's job. Older workers named the TrainJob in job
// instead: every worker selector reads one kind explicitly (trainjob
// non-empty, or trainjob empty and then job), and every expression over
// metrics that older workers exported reads both kinds, so that their
// series still match. Expressions joined with a metric only current workers
// export (the checkpoint age, the last step's time) cannot match older
// workers and need not try.
bool IsNewWorkerMetric(const std::string& name) {
  return name == "pacer_worker_last_checkpoint_timestamp_seconds" ||
         name == "pacer_worker_checkpoint_interval_steps" ||
         name == "pacer_worker_last_step_timestamp_seconds";
}

TEST(MonitoringFilesTest, SelectorsFollowTheLabelContract) {
  auto check = [](const Expression& e, bool dashboard) {
    bool reads_current = false, reads_legacy = false, reads_old_metric = false,
         reads_new_metric = false;
    for (const auto& [name, matchers] : Selectors(e.expr)) {
      const bool controller = StartsWith(name, "pacer_controller_") ||
                              StartsWith(name, "pacer_trainjob_") || name == "up";
      if (controller) {
        EXPECT_TRUE(Contains(matchers, R"(job="pacer-controller")")) << e.where << ": " << name;
      }
      if (dashboard && StartsWith(name, "pacer_trainjob_")) {
        EXPECT_TRUE(Contains(matchers, R"(namespace=~"$namespace")")) << e.where << ": " << name;
        EXPECT_TRUE(Contains(matchers, R"(trainjob=~"$trainjob")")) << e.where << ": " << name;
      }
      if (!StartsWith(name, "pacer_worker_")) continue;
      (IsNewWorkerMetric(name) ? reads_new_metric : reads_old_metric) = true;
      const bool legacy = Contains(matchers, R"(trainjob="")");
      reads_legacy = reads_legacy || legacy;
      reads_current = reads_current || !legacy;
      if (dashboard) {
        EXPECT_TRUE(Contains(matchers, R"(namespace=~"$namespace")")) << e.where << ": " << name;
        EXPECT_TRUE(legacy ? Contains(matchers, R"(job=~"$trainjob")")
                           : Contains(matchers, R"(trainjob=~"$trainjob")"))
            << e.where << ": " << name << "{" << matchers << "}";
      } else {
        EXPECT_TRUE(legacy || Contains(matchers, R"(trainjob!="")"))
            << e.where << ": " << name << "{" << matchers << "}";
        // Rules cover every TrainJob: no job matcher (trainjob's aside).
        std::string rest = matchers;
        for (std::size_t at; (at = rest.find("trainjob")) != std::string::npos;) rest.erase(at, 8);
        EXPECT_FALSE(Contains(rest, "job=")) << e.where << ": alerts cover every TrainJob";
      }
    }
    if (reads_current && reads_old_metric && !reads_new_metric) {
      EXPECT_TRUE(reads_legacy) << e.where << " misses the series of older workers (job label)";
    }
  };
  for (const Expression& e : DashboardExpressions(LoadDashboard())) check(e, true);
  for (const Expression& e : RuleExpressions(LoadRules())) check(e, false);
}

TEST(MonitoringFilesTest, AlertsHaveSeverityAnnotationsAndARunbookSection) {
  const std::vector<Rule> rules = LoadRules();
  std::set<std::string> names;
  for (const Rule& r : rules) {
    if (r.alert.empty()) continue;
    names.insert(r.alert);
    EXPECT_TRUE(r.labels.count("severity") &&
                (r.labels.at("severity") == "critical" || r.labels.at("severity") == "warning"))
        << r.alert;
    EXPECT_FALSE(r.for_duration.empty()) << r.alert << ": no `for`, fires on one bad sample";
    for (const std::string key : {"summary", "description", "runbook_url"}) {
      EXPECT_TRUE(r.annotations.count(key) && !r.annotations.at(key).empty())
          << r.alert << " lacks " << key;
    }
    EXPECT_EQ(r.annotations.count("runbook_url") ? r.annotations.at("runbook_url") : "",
              kRunbookBase + Lower(r.alert));
    if (StartsWith(r.alert, "TrainJob")) {
      for (const std::string key : {"summary", "description"}) {
        EXPECT_TRUE(Contains(r.annotations.count(key) ? r.annotations.at(key) : "",
                             "{{ $labels.namespace }}/{{ $labels.trainjob }}"))
            << r.alert << " " << key << " must name the TrainJob";
      }
    }
  }
  for (const std::string expected :
       {"TrainJobDeadlineAtRisk", "TrainJobStalled", "TrainJobWorkerStraggler",
        "TrainJobCheckpointOverdue", "PacerControllerDown", "PacerControllerNoLeader"}) {
    EXPECT_TRUE(names.count(expected)) << expected;
  }
}

// pacer-rules_test.yaml asserts each alert both ways: some eval_time lists it
// firing, some lists it quiet (not yet past `for`, or a near miss).
TEST(MonitoringFilesTest, EveryAlertFiresAndStaysQuietInThePromtoolTests) {
  std::map<std::string, std::pair<int, int>> cases;  // alert -> (firing, quiet)
  const YAML::Node root = YAML::LoadFile(RulesTestPath());
  for (const YAML::Node& test : root["tests"]) {
    for (const YAML::Node& c : test["alert_rule_test"]) {
      auto& counts = cases[c["alertname"].as<std::string>()];
      if (c["exp_alerts"] && c["exp_alerts"].size() > 0) {
        ++counts.first;
      } else {
        ++counts.second;
      }
    }
  }
  for (const Rule& r : LoadRules()) {
    if (r.alert.empty()) continue;
    EXPECT_GE(cases[r.alert].first, 1) << r.alert << " never fires in " << RulesTestPath();
    EXPECT_GE(cases[r.alert].second, 1) << r.alert << " has no quiet case";
  }
}

// The first ```yaml block of `markdown` that starts with "scrape_configs:".
std::string ScrapeConfigsBlock(const std::string& markdown_path) {
  std::ifstream in(markdown_path);
  EXPECT_TRUE(in.good()) << markdown_path;
  std::string line;
  std::string block;
  bool in_block = false;
  while (std::getline(in, line)) {
    if (!in_block && line == "```yaml") {
      in_block = true;
      block.clear();
    } else if (in_block && line == "```") {
      if (StartsWith(block, "scrape_configs:")) return block;
      in_block = false;
    } else if (in_block) {
      block += line + "\n";
    }
  }
  return "";
}

// Users without the Prometheus Operator copy these configs. The controller
// keeps a Succeeded job's pods until the TrainJob is deleted; a target kept
// at such a pod's address would scrape whichever pod gets the address next,
// under the finished job's namespace and trainjob labels.
TEST(MonitoringFilesTest, TheDocumentedWorkerScrapeConfigDropsFinishedPods) {
  const std::string chart_readme = ScrapeConfigsBlock(SourcePath("charts/README.md"));
  const std::string metrics_md = ScrapeConfigsBlock(SourcePath("docs/metrics.md"));
  ASSERT_FALSE(chart_readme.empty());
  EXPECT_EQ(chart_readme, metrics_md) << "the two documents show one config";
  const YAML::Node config = YAML::Load(chart_readme);
  YAML::Node workers;
  for (const YAML::Node& job : config["scrape_configs"]) {
    if (job["job_name"].as<std::string>() == "pacer-workers") workers.reset(job);
  }
  ASSERT_TRUE(workers.IsDefined());
  std::vector<std::regex> dropped_phases;
  for (const YAML::Node& rule : workers["relabel_configs"]) {
    // No action is "replace".
    if (!rule["action"] || rule["action"].as<std::string>() != "drop") continue;
    if (rule["source_labels"].size() != 1 ||
        rule["source_labels"][0].as<std::string>() != "__meta_kubernetes_pod_phase") {
      continue;
    }
    dropped_phases.emplace_back(rule["regex"].as<std::string>());
  }
  const auto dropped = [&](const std::string& phase) {
    return std::any_of(dropped_phases.begin(), dropped_phases.end(),
                       [&](const std::regex& r) { return std::regex_match(phase, r); });
  };
  EXPECT_TRUE(dropped("Succeeded"));
  EXPECT_TRUE(dropped("Failed"));
  EXPECT_FALSE(dropped("Running"));
  EXPECT_FALSE(dropped("Pending")) << "a starting worker's first steps are scraped";
}

}  // namespace
}  // namespace pacer::monitoring
