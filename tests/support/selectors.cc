#include "selectors.h"

#include <algorithm>
#include <sstream>

namespace pacer::testing {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// Splits on commas outside parentheses ("a in (x,y),b=c" -> two terms).
std::vector<std::string> SplitTerms(const std::string& text) {
  std::vector<std::string> terms;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      terms.push_back(Trim(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (!Trim(current).empty() || !terms.empty()) terms.push_back(Trim(current));
  return terms;
}

std::vector<std::string> SplitValues(const std::string& inside) {
  std::vector<std::string> values;
  std::stringstream in(inside);
  std::string v;
  while (std::getline(in, v, ',')) values.push_back(Trim(v));
  return values;
}

}  // namespace

const nlohmann::json* FieldAt(const nlohmann::json& object, const std::string& dotted_path) {
  const nlohmann::json* node = &object;
  std::stringstream in(dotted_path);
  std::string part;
  while (std::getline(in, part, '.')) {
    if (part.empty()) continue;
    if (!node->is_object()) return nullptr;
    auto it = node->find(part);
    if (it == node->end()) return nullptr;
    node = &*it;
  }
  return node;
}

std::string FieldAsString(const nlohmann::json& object, const std::string& dotted_path) {
  const nlohmann::json* value = FieldAt(object, dotted_path);
  if (value == nullptr || value->is_null()) return "";
  if (value->is_string()) return value->get<std::string>();
  return value->dump();
}

ApiResult<Selector> Selector::ParseLabels(const std::string& text) {
  Selector selector;
  for (const std::string& term : SplitTerms(text)) {
    if (term.empty())
      return BadRequest("unable to parse requirement: empty term in \"" + text + "\"");
    Requirement r;
    size_t paren = term.find('(');
    size_t space = term.find(' ');
    if (paren != std::string::npos && space != std::string::npos && space < paren) {
      std::string key = Trim(term.substr(0, space));
      std::string op = Trim(term.substr(space, paren - space));
      if (term.back() != ')' || (op != "in" && op != "notin")) {
        return BadRequest("unable to parse requirement: \"" + term +
                          "\": expected key in (v1,v2) or key notin (v1,v2)");
      }
      r.key = key;
      r.op = op == "in" ? Op::kIn : Op::kNotIn;
      r.values = SplitValues(term.substr(paren + 1, term.size() - paren - 2));
    } else if (size_t ne = term.find("!="); ne != std::string::npos) {
      r.key = Trim(term.substr(0, ne));
      r.op = Op::kNotEquals;
      r.values = {Trim(term.substr(ne + 2))};
    } else if (size_t eq2 = term.find("=="); eq2 != std::string::npos) {
      r.key = Trim(term.substr(0, eq2));
      r.values = {Trim(term.substr(eq2 + 2))};
    } else if (size_t eq = term.find('='); eq != std::string::npos) {
      r.key = Trim(term.substr(0, eq));
      r.values = {Trim(term.substr(eq + 1))};
    } else if (term[0] == '!') {
      r.key = Trim(term.substr(1));
      r.op = Op::kNotExists;
    } else {
      r.key = term;
      r.op = Op::kExists;
    }
    if (r.key.empty() || r.key.find_first_of(" ()!=,") != std::string::npos) {
      return BadRequest("unable to parse requirement: \"" + term +
                        "\": a label key is a name like app or example.com/tier");
    }
    selector.requirements_.push_back(std::move(r));
  }
  return selector;
}

ApiResult<Selector> Selector::ParseFields(const std::string& text) {
  Selector selector;
  selector.fields_ = true;
  for (const std::string& term : SplitTerms(text)) {
    if (term.empty()) continue;
    Requirement r;
    if (size_t ne = term.find("!="); ne != std::string::npos) {
      r.key = Trim(term.substr(0, ne));
      r.op = Op::kNotEquals;
      r.values = {Trim(term.substr(ne + 2))};
    } else if (size_t eq2 = term.find("=="); eq2 != std::string::npos) {
      r.key = Trim(term.substr(0, eq2));
      r.values = {Trim(term.substr(eq2 + 2))};
    } else if (size_t eq = term.find('='); eq != std::string::npos) {
      r.key = Trim(term.substr(0, eq));
      r.values = {Trim(term.substr(eq + 1))};
    } else {
      return BadRequest("invalid field selector \"" + term +
                        "\": expected field=value or field!=value");
    }
    selector.requirements_.push_back(std::move(r));
  }
  return selector;
}

bool Selector::Matches(const nlohmann::json& object) const {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  const nlohmann::json* labels = nullptr;
  if (!fields_) {
    labels = FieldAt(object, "metadata.labels");
    if (labels == nullptr || !labels->is_object()) labels = &kEmpty;
  }
  for (const Requirement& r : requirements_) {
    bool present = false;
    std::string value;
    if (fields_) {
      value = FieldAsString(object, r.key);
      present = true;
    } else {
      auto it = labels->find(r.key);
      present = it != labels->end();
      if (present && it->is_string()) value = it->get<std::string>();
    }
    const bool in_values = std::find(r.values.begin(), r.values.end(), value) != r.values.end();
    switch (r.op) {
      case Op::kEquals:
        if (!present || value != r.values[0]) return false;
        break;
      case Op::kNotEquals:
        if (present && value == r.values[0]) return false;
        break;
      case Op::kExists:
        if (!present) return false;
        break;
      case Op::kNotExists:
        if (present) return false;
        break;
      case Op::kIn:
        if (!present || !in_values) return false;
        break;
      case Op::kNotIn:
        if (present && in_values) return false;
        break;
    }
  }
  return true;
}

}  // namespace pacer::testing
