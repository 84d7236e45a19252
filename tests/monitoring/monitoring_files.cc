#include "monitoring_files.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <fstream>
#include <regex>
#include <sstream>

namespace pacer::monitoring {

std::string DashboardPath() {
  return std::string(PACER_SOURCE_DIR) + "/manifests/grafana/pacer.json";
}
std::string RulesPath() {
  return std::string(PACER_SOURCE_DIR) + "/manifests/prometheus/pacer-rules.yaml";
}
std::string SourcePath(const std::string& relative) {
  return std::string(PACER_SOURCE_DIR) + "/" + relative;
}
std::string RulesTestPath() {
  return std::string(PACER_SOURCE_DIR) + "/tests/monitoring/pacer-rules_test.yaml";
}

nlohmann::json LoadDashboard() {
  std::ifstream in(DashboardPath());
  EXPECT_TRUE(in.good()) << DashboardPath();
  // Throws (failing the test with the parser's message) on invalid JSON.
  return nlohmann::json::parse(in);
}

std::vector<Expression> DashboardExpressions(const nlohmann::json& dashboard) {
  std::vector<Expression> out;
  for (const nlohmann::json& panel : dashboard.value("panels", nlohmann::json::array())) {
    for (const nlohmann::json& target : panel.value("targets", nlohmann::json::array())) {
      out.push_back({"panel " + std::to_string(panel.value("id", 0)) + " " +
                         target.value("refId", std::string("?")),
                     target.value("expr", std::string())});
    }
  }
  const nlohmann::json annotations =
      dashboard.value("annotations", nlohmann::json::object()).value("list", nlohmann::json::array());
  for (const nlohmann::json& a : annotations) {
    if (a.contains("expr")) {
      out.push_back({"annotation " + a.value("name", std::string("?")), a["expr"].get<std::string>()});
    }
  }
  return out;
}

std::vector<LabelValuesVariable> LabelValuesVariables(const nlohmann::json& dashboard) {
  std::vector<LabelValuesVariable> out;
  const nlohmann::json list =
      dashboard.value("templating", nlohmann::json::object()).value("list", nlohmann::json::array());
  static const std::regex kLabelValues(R"(^\s*label_values\(\s*(.*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$)");
  for (const nlohmann::json& v : list) {
    if (v.value("type", "") != "query") continue;
    std::string query = v.value("definition", std::string());
    if (v.contains("query") && v["query"].is_object()) query = v["query"].value("query", query);
    if (v.contains("query") && v["query"].is_string()) query = v["query"].get<std::string>();
    std::smatch m;
    if (!std::regex_match(query, m, kLabelValues)) {
      ADD_FAILURE() << "variable " << v.value("name", "?") << ": not label_values(selector, label): "
                    << query;
      continue;
    }
    out.push_back({v.value("name", std::string()), m[1].str(), m[2].str()});
  }
  return out;
}

namespace {

std::map<std::string, std::string> StringMap(const YAML::Node& node) {
  std::map<std::string, std::string> out;
  if (!node || !node.IsMap()) return out;
  for (const auto& kv : node) out[kv.first.as<std::string>()] = kv.second.as<std::string>();
  return out;
}

}  // namespace

std::vector<Rule> LoadRules() {
  std::vector<Rule> out;
  const YAML::Node root = YAML::LoadFile(RulesPath());
  for (const YAML::Node& group : root["groups"]) {
    for (const YAML::Node& r : group["rules"]) {
      Rule rule;
      rule.group = group["name"].as<std::string>();
      if (r["alert"]) rule.alert = r["alert"].as<std::string>();
      if (r["record"]) rule.record = r["record"].as<std::string>();
      rule.expr = r["expr"].as<std::string>();
      if (r["for"]) rule.for_duration = r["for"].as<std::string>();
      rule.labels = StringMap(r["labels"]);
      rule.annotations = StringMap(r["annotations"]);
      out.push_back(std::move(rule));
    }
  }
  return out;
}

std::vector<Expression> RuleExpressions(const std::vector<Rule>& rules) {
  std::vector<Expression> out;
  for (const Rule& r : rules) {
    out.push_back({r.alert.empty() ? "record " + r.record : "alert " + r.alert, r.expr});
  }
  return out;
}

std::string Substitute(const std::string& expr, const std::map<std::string, std::string>& values) {
  // ${name}, ${name:format} and $name (the longest name, so $trainjob is not
  // read as $train followed by "job").
  static const std::regex kReference(R"(\$\{([A-Za-z_][A-Za-z0-9_]*)(:[^}]*)?\}|\$([A-Za-z_][A-Za-z0-9_]*))");
  std::string out;
  auto begin = std::sregex_iterator(expr.begin(), expr.end(), kReference);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    const std::string name = m[1].matched ? m[1].str() : m[3].str();
    out += expr.substr(last, static_cast<size_t>(m.position(0)) - last);
    auto found = values.find(name);
    out += found == values.end() ? m.str(0) : found->second;
    last = static_cast<size_t>(m.position(0) + m.length(0));
  }
  return out + expr.substr(last);
}

bool HasVariable(const std::string& expr) {
  static const std::regex kReference(R"(\$\{|\$[A-Za-z_])");
  return std::regex_search(expr, kReference);
}

std::string NormalizeSpace(const std::string& expr) {
  std::string out;
  bool space = false;
  for (char c : expr) {
    if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      space = true;
      continue;
    }
    if (space && !out.empty() && out.back() != '(' && c != ')') out += ' ';
    space = false;
    out += c;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> Selectors(const std::string& expr) {
  static const std::regex kSelector(R"(\b(pacer_[a-z0-9_]+|up)\b\s*(\{([^}]*)\})?)");
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), kSelector);
       it != std::sregex_iterator(); ++it) {
    out.emplace_back((*it)[1].str(), (*it)[3].str());
  }
  return out;
}

}  // namespace pacer::monitoring
