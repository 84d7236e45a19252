// Every PromQL expression of the Grafana dashboard and of the alert rules,
// run on a real Prometheus that scrapes a real pacer-controller (job
// "pacer-controller", honor_labels, as the Helm chart's ServiceMonitor) and
// real pacer-worker processes started by the fake kubelet (target labels
// from the pod and no honor_labels, as the PodMonitor), while a TrainJob runs. An expression fails
// on a parse or evaluation error, or when it returns no finite value. Alert conditions (and the
// re-plan annotation) are empty in a healthy run by design: for them, the parts without the
// threshold must return data instead, so a typo in a metric or label name still fails. The rules
// are also loaded into Prometheus, which must evaluate every one without error.

// cpprestsdk's U() macro would break GoogleTest's templates.
#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/base_uri.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "e2e_fixture.h"
#include "monitoring_files.h"

namespace pacer::e2e {
namespace {

using monitoring::Expression;
using monitoring::NormalizeSpace;
using nlohmann::json;
using std::chrono::seconds;

const char kNamespace[] = "research";
const char kJob[] = "watched";

// Expressions that are empty in a healthy run by design, with the parts of
// each that must return data: the condition without its threshold, and the
// guards it is joined with. The parts are verbatim pieces of the expression
// (compared without regard to whitespace), so changing an expression fails
// this test until the table follows. Any expression not listed must itself
// return data.
const std::map<std::string, std::vector<std::string>>& EmptyWhenHealthy() {
  static const auto* table = new std::map<std::string, std::vector<std::string>>{
      {"alert TrainJobDeadlineAtRisk",
       {R"(max by (namespace, trainjob) (pacer_trainjob_deadline_slack_seconds{job="pacer-controller"}))",
        R"(max by (namespace, trainjob) (pacer_trainjob_phase{job="pacer-controller", phase=~"Pending|Running|Replanning"}))"}},
      // A healthy run is never Failed, Infeasible or stuck Planning: the
      // alerts are empty, their phase gauges (0 for this job) are not.
      {"alert TrainJobFailed",
       {R"(max by (namespace, trainjob) (pacer_trainjob_phase{job="pacer-controller", phase="Failed"}))"}},
      {"alert TrainJobRejected",
       {R"(max by (namespace, trainjob) (pacer_trainjob_phase{job="pacer-controller", phase="Infeasible"}))"}},
      {"alert TrainJobStuckPlanning",
       {R"(max by (namespace, trainjob) (pacer_trainjob_phase{job="pacer-controller", phase="Planning"}))"}},
      {"alert TrainJobStalled",
       {R"pql(time() - max by (namespace, trainjob) (pacer_worker_last_step_timestamp_seconds{trainjob!=""}))pql",
        R"pql(clamp_min(3 * max by (namespace, trainjob) (pacer_worker_last_step_seconds{trainjob!=""}), 600))pql",
        R"pql(sum by (namespace, trainjob) (changes(pacer_worker_step{trainjob!=""}[10m])))pql",
        R"pql(clamp_max(3 * max by (namespace, trainjob) (pacer_worker_predicted_step_seconds{trainjob!=""}), 21600))pql",
        R"pql(max by (namespace, trainjob) (pacer_worker_last_step_seconds{trainjob!=""}))pql",
        R"pql(sum by (namespace, trainjob) (changes(pacer_worker_step{trainjob!=""}[10m]) or label_replace(changes(pacer_worker_step{trainjob=""}[10m]), "trainjob", "$1", "job", "(.+)")))pql",
        R"(max by (namespace, trainjob) (pacer_trainjob_phase{job="pacer-controller", phase="Running"}))",
        R"pql((pacer_worker_step{trainjob!=""} or label_replace(pacer_worker_step{trainjob=""}, "trainjob", "$1", "job", "(.+)")))pql",
        R"(max by (namespace, trainjob) (min_over_time(pacer_trainjob_phase{job="pacer-controller", phase="Running"}[10m])))"}},
      {"alert TrainJobWorkerStraggler",
       {R"pql(max by (namespace, trainjob, rank) ((avg_over_time(pacer_worker_last_step_seconds{trainjob!=""}[5m]) - avg_over_time(pacer_worker_exposed_communication_seconds{trainjob!=""}[5m])) or label_replace(avg_over_time(pacer_worker_last_step_seconds{trainjob=""}[5m]) - avg_over_time(pacer_worker_exposed_communication_seconds{trainjob=""}[5m]), "trainjob", "$1", "job", "(.+)")) / on (namespace, trainjob) group_left quantile by (namespace, trainjob) (0.5, max by (namespace, trainjob, rank) ((avg_over_time(pacer_worker_last_step_seconds{trainjob!=""}[5m]) - avg_over_time(pacer_worker_exposed_communication_seconds{trainjob!=""}[5m])) or label_replace(avg_over_time(pacer_worker_last_step_seconds{trainjob=""}[5m]) - avg_over_time(pacer_worker_exposed_communication_seconds{trainjob=""}[5m]), "trainjob", "$1", "job", "(.+)"))))pql"}},
      // A healthy worker saves on time (or only when stopped): the age and
      // the step time it is compared with still answer.
      {"alert TrainJobCheckpointOverdue",
       {R"pql((time() - pacer_worker_last_checkpoint_timestamp_seconds{trainjob!=""}))pql",
        R"pql(avg_over_time(pacer_worker_last_step_seconds{trainjob!=""}[10m]))pql",
        R"(max by (namespace, trainjob) (pacer_trainjob_phase{job="pacer-controller", phase="Running"}))"}},
      {"alert PacerControllerDown", {R"(max by (job, namespace) (up{job="pacer-controller"}))"}},
      {"alert PacerControllerNoLeader",
       {R"(sum by (job, namespace) (pacer_controller_leader{job="pacer-controller"}))"}},
      {"alert PacerControllerReconcileErrors",
       {R"(sum by (job) (rate(pacer_controller_reconcile_total{job="pacer-controller", result="error"}[10m])))",
        R"(sum by (job) (rate(pacer_controller_reconcile_total{job="pacer-controller"}[10m])))"}},
      // No deadline job has finished yet: the deadline ratio is 0 / 0, no
      // answer rather than 0%; its denominator (0 finished) still answers.
      {"record pacer:scheduler_deadline_ratio",
       {R"(max by (job) (sum without (outcome) (pacer_scheduler_deadline_jobs{job="pacer-controller"})))"}},
      {"panel 32 A",
       {R"(max(sum without (outcome) (pacer_scheduler_deadline_jobs{job="pacer-controller"})))"}},
      {"annotation Re-plans",
       {R"(max by (namespace, trainjob) (changes(pacer_trainjob_replans_total{job="pacer-controller", namespace=~"$namespace", trainjob=~"$trainjob"}[2m])))"}},
  };
  return *table;
}

// What one query answered.
struct Answer {
  bool reached = false;  // Prometheus answered with JSON
  bool ok = false;       // status "success"
  std::string error;     // errorType: error, when !ok
  int series = 0;        // samples in the result (vector) or 1 (scalar)
  int finite = 0;        // of which with a finite value
  json result;
};

class PromqlTest : public E2eTest {
 protected:
  json Get(const std::string& path) const {
    const std::string response = HttpGet(prometheus_port_, path);
    const size_t body = response.find("\r\n\r\n");
    if (body == std::string::npos) return json();
    return json::parse(response.substr(body + 4), nullptr, false);
  }

  Answer Query(const std::string& expr) const {
    Answer a;
    const json j = Get("/api/v1/query?query=" + web::uri::encode_data_string(expr));
    if (!j.is_object()) return a;
    a.reached = true;
    a.ok = j.value("status", "") == "success";
    if (!a.ok) {
      a.error = j.value("errorType", "") + ": " + j.value("error", "");
      return a;
    }
    const json& data = j["data"];
    a.result = data["result"];
    auto count = [&](const json& value_pair) {
      ++a.series;
      const double v = std::strtod(value_pair[1].get<std::string>().c_str(), nullptr);
      if (std::isfinite(v)) ++a.finite;
    };
    if (data.value("resultType", "") == "scalar") {
      count(a.result);
    } else {
      for (const json& sample : a.result) {
        if (sample.contains("value")) count(sample["value"]);
      }
    }
    return a;
  }
};

std::string Describe(const Answer& a) {
  if (!a.reached) return "no answer from Prometheus";
  if (!a.ok) return a.error;
  return std::to_string(a.series) + " series, " + std::to_string(a.finite) + " finite";
}

TEST_F(PromqlTest, EveryDashboardAndAlertExpressionReturnsDataFromARealRun) {
  PrometheusOptions prometheus;
  prometheus.scrape_controllers = true;
  prometheus.rule_files = {monitoring::RulesPath()};
  if (!StartPrometheus(prometheus))
    GTEST_SKIP() << "no prometheus binary (scripts/install-deps.sh)";
  StartController("c1");
  // One conflict on a status write makes a reconcile fail, so the
  // errors-by-reason panel has a series to show.
  server_->FailNextRequests("PUT", "/status", 409, 1);
  // Four GPUs (two pods of two ranks) so that the ranks run collectives;
  // re-planning off so the job stays Running on one plan.
  // Ten million steps keep it Running for the whole test; at the model's
  // latency floor (about 1.4 ms a step on H100) they need a day's deadline.
  std::string yaml = TinyJobYaml(kJob, 10000000, "24h");
  yaml = std::regex_replace(yaml, std::regex(R"(gpuTypes: \[H100-SXM\]\})"),
                            "gpuTypes: [H100-SXM], minGPUs: 4}");
  yaml = std::regex_replace(yaml, std::regex("enabled: true"), "enabled: false");
  Apply(yaml);
  ASSERT_TRUE(WaitFor(
      [&] {
        const json j = Job(kNamespace, kJob);
        return j["status"].value("phase", "") == "Running" &&
               j["status"]["progress"].value("stepsCompleted", 0) > 0 &&
               j["status"].contains("measuredStepSeconds");
      },
      seconds(180)))
      << Job(kNamespace, kJob).dump(2);

  // Grafana's variables as the dashboard would fill them for this job; the
  // ranges are a few scrapes (1 s apart) long.
  const std::map<std::string, std::string> variables = {
      {"namespace", kNamespace}, {"trainjob", kJob}, {"__rate_interval", "30s"},
      {"__interval", "15s"},     {"__range", "5m"},  {"datasource", "prometheus"}};
  const nlohmann::json dashboard = monitoring::LoadDashboard();
  std::vector<Expression> expressions = monitoring::DashboardExpressions(dashboard);
  for (const Expression& e : monitoring::RuleExpressions(monitoring::LoadRules())) {
    expressions.push_back(e);
  }
  ASSERT_GE(expressions.size(), 30u);
  // The parts that must return data instead of an expression empty by design.
  std::map<std::string, std::vector<std::string>> parts;
  for (const Expression& e : expressions) {
    auto listed = EmptyWhenHealthy().find(e.where);
    if (listed == EmptyWhenHealthy().end()) continue;
    for (const std::string& part : listed->second) {
      EXPECT_NE(NormalizeSpace(e.expr).find(NormalizeSpace(part)), std::string::npos)
          << e.where << ": the table's part is not in the expression any more: " << part;
      parts[e.where].push_back(monitoring::Substitute(part, variables));
    }
  }
  for (const auto& [where, unused] : EmptyWhenHealthy()) {
    EXPECT_TRUE(parts.count(where)) << "listed but gone: " << where;
  }
  for (Expression& e : expressions) {
    e.expr = monitoring::Substitute(e.expr, variables);
    ASSERT_FALSE(monitoring::HasVariable(e.expr)) << e.where << ": " << e.expr;
  }

  // The variables' label_values(selector, label) as PromQL: the job's
  // namespace and name must be among the values offered.
  struct VariableCheck {
    std::string name, expr, label, expected;
  };
  std::vector<VariableCheck> variable_checks;
  for (const auto& v : monitoring::LabelValuesVariables(dashboard)) {
    const std::string expected = v.label == "namespace" ? kNamespace : kJob;
    variable_checks.push_back(
        {v.name,
         "count by (" + v.label + ") (" + monitoring::Substitute(v.selector, variables) + ")",
         v.label, expected});
  }
  ASSERT_EQ(variable_checks.size(), 2u);

  // Wait until everything has data (rates need two scrapes, histograms a
  // few observations, rules one evaluation), or until Prometheus rejects an
  // expression, which waiting does not fix.
  std::map<std::string, Answer> answers;
  std::map<std::string, std::string> missing, rejected;
  auto evaluate = [&] {
    missing.clear();
    auto record = [&](const std::string& key, const std::string& expr, bool need_data) {
      const Answer a = Query(expr);
      answers[key] = a;
      if (a.reached && !a.ok) rejected[key] = expr + "\n    -> " + Describe(a);
      if (!a.ok || (need_data && a.finite == 0)) missing[key] = expr + "\n    -> " + Describe(a);
    };
    for (const Expression& e : expressions) {
      const bool empty_by_design = parts.count(e.where) > 0;
      record(e.where, e.expr, !empty_by_design);
      if (!empty_by_design) continue;
      for (size_t i = 0; i < parts[e.where].size(); ++i) {
        record(e.where + " part " + std::to_string(i + 1), parts[e.where][i], true);
      }
    }
    for (const VariableCheck& v : variable_checks) {
      const Answer a = Query(v.expr);
      bool found = false;
      for (const json& s : a.result) found = found || s["metric"].value(v.label, "") == v.expected;
      if (!found) missing["variable " + v.name] = v.expr + " lacks " + v.expected;
    }
    const json rules = Get("/api/v1/rules");
    size_t healthy = 0;
    if (rules.is_object() && rules.value("status", "") == "success") {
      for (const json& g : rules["data"]["groups"]) {
        for (const json& r : g["rules"]) {
          const std::string health = r.value("health", "");
          const std::string why = health + " " + r.value("lastError", "");
          if (health == "ok") ++healthy;
          if (health == "err") rejected["rule " + r.value("name", "")] = why;
        }
      }
    }
    if (healthy != monitoring::LoadRules().size()) {
      missing["rules evaluated"] = std::to_string(healthy) + " healthy";
    }
    // The progress panel has data from the controller's first scrape, which
    // may predate the first completed step (the status said steps > 0, the
    // scrape a second earlier did not): wait for a scrape that shows them.
    const Answer& progress = answers["panel 4 A"];
    if (!progress.result.empty() &&
        !(std::stod(progress.result[0]["value"][1].get<std::string>()) > 0.0)) {
      missing["panel 4 A progress"] = "0: no scrape since the first step yet";
    }
    return missing.empty() || !rejected.empty();
  };
  WaitFor(evaluate, seconds(120));
  auto list = [](const std::map<std::string, std::string>& m) {
    std::string out;
    for (const auto& [key, why] : m) out += "  " + key + ": " + why + "\n";
    return out;
  };
  ASSERT_TRUE(rejected.empty()) << "rejected by Prometheus:\n" << list(rejected);
  ASSERT_TRUE(missing.empty()) << "no data after 120 s:\n" << list(missing);

  // Spot checks that the answers are the run's, not just any data: the
  // controller's series keep the TrainJob's namespace (honor_labels), the
  // workers' the TrainJob's name as job, per rank.
  EXPECT_EQ(answers["panel 4 A"].result.size(), 1u);
  if (!answers["panel 4 A"].result.empty()) {
    const json& progress = answers["panel 4 A"].result[0];
    EXPECT_EQ(progress["metric"].value("namespace", ""), kNamespace);
    EXPECT_EQ(progress["metric"].value("trainjob", ""), kJob);
    const double ratio = std::stod(progress["value"][1].get<std::string>());
    EXPECT_GT(ratio, 0.0);
    EXPECT_LT(ratio, 1.0);
  }
  EXPECT_EQ(answers["panel 20 A"].result.size(), 4u) << "one step-time series per rank";
  EXPECT_EQ(answers["panel 14 A"].result.size(), 1u);
  if (!answers["panel 14 A"].result.empty()) {
    EXPECT_EQ(answers["panel 14 A"].result[0]["value"][1], "4") << "GPUs held";
  }
  EXPECT_EQ(answers["panel 28 A"].result.size(), 1u);
  if (!answers["panel 28 A"].result.empty()) {
    EXPECT_EQ(answers["panel 28 A"].result[0]["value"][1], "1") << "one leader";
  }
}

}  // namespace
}  // namespace pacer::e2e
