// Reads the monitoring files the Helm chart embeds: the Grafana dashboard
// (manifests/grafana/pacer.json) and the Prometheus rules
// (manifests/prometheus/pacer-rules.yaml), and pulls the PromQL out of them,
// for the static checks (monitoring_files_test.cc) and for the run against a
// real Prometheus (promql_e2e_test.cc).
#ifndef PACER_TESTS_MONITORING_MONITORING_FILES_H_
#define PACER_TESTS_MONITORING_MONITORING_FILES_H_

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pacer::monitoring {

// One PromQL expression and where it comes from: "panel 18 A" (panel id and
// refId), "annotation Re-plans", "alert TrainJobStalled", "record NAME".
struct Expression {
  std::string where;
  std::string expr;
};

// A query template variable: label_values(<selector>, <label>).
struct LabelValuesVariable {
  std::string name;
  std::string selector;
  std::string label;
};

struct Rule {
  std::string group;
  std::string alert;   // empty for a recording rule
  std::string record;  // empty for an alert
  std::string expr;
  std::string for_duration;  // "" when absent
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
};

std::string DashboardPath();
std::string RulesPath();
std::string RulesTestPath();
// `relative` ("docs/metrics.md") under the source tree.
std::string SourcePath(const std::string& relative);

nlohmann::json LoadDashboard();
// Every panel target and annotation query of the dashboard, in file order.
std::vector<Expression> DashboardExpressions(const nlohmann::json& dashboard);
// The dashboard's query variables; fails the calling test on one that is not
// label_values(selector, label).
std::vector<LabelValuesVariable> LabelValuesVariables(const nlohmann::json& dashboard);

std::vector<Rule> LoadRules();
std::vector<Expression> RuleExpressions(const std::vector<Rule>& rules);

// Replaces Grafana's $name and ${name} (and ${name:format}) for every name in
// `values`; names not in `values` stay.
std::string Substitute(const std::string& expr, const std::map<std::string, std::string>& values);
// True when a Grafana variable reference ($name, ${name}) is left; PromQL's
// own "$1" in label_replace replacements does not count.
bool HasVariable(const std::string& expr);

// Whitespace-insensitive form for comparing PromQL text: runs of whitespace
// become one space, and none is kept after '(' or before ')'.
std::string NormalizeSpace(const std::string& expr);

// Metric selectors of an expression: metric name -> the text between its
// braces ("" without braces), one entry per occurrence. Recognises Pacer's
// metrics and Prometheus's own `up`.
std::vector<std::pair<std::string, std::string>> Selectors(const std::string& expr);

}  // namespace pacer::monitoring

#endif  // PACER_TESTS_MONITORING_MONITORING_FILES_H_
