#include "cli/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdlib>
#include <regex>
#include <string>

namespace pacer::cli {
namespace {

constexpr int kMaxDepth = 64;

// What one conversion has produced so far. yaml-cpp shares an aliased node
// (*name) instead of copying it, but JSON has no sharing: each alias is
// expanded, and a few lines of anchors that repeat each other ten times a
// level (a "billion laughs") expand to 10^12 values. Every value of an
// alias-free document takes at least one byte of it, so more values than
// bytes can only come from aliases repeating large anchors.
struct Budget {
  std::size_t values_left;
};

nlohmann::json Scalar(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted: a string whatever it looks like
  static const std::regex integer("[-+]?[0-9]+");
  static const std::regex real("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  if (text == "null" || text == "~" || text.empty()) return nullptr;
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  if (std::regex_match(text, integer)) {
    errno = 0;
    const long long v = std::strtoll(text.c_str(), nullptr, 10);
    if (errno == 0) return v;
  }
  if (std::regex_match(text, real)) return std::strtod(text.c_str(), nullptr);
  return text;
}

StatusOr<nlohmann::json> Convert(const YAML::Node& node, int depth, Budget& budget) {
  if (depth > kMaxDepth) {
    return InvalidArgumentError("the document nests deeper than " + std::to_string(kMaxDepth) +
                                " levels");
  }
  if (budget.values_left == 0) {
    return InvalidArgumentError(
        "the document expands to more values than it has bytes: YAML aliases (*name) repeat "
        "large anchors (&name); write the values out instead");
  }
  --budget.values_left;
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nlohmann::json(nullptr);
    case YAML::NodeType::Scalar:
      return Scalar(node);
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const YAML::Node& item : node) {
        ASSIGN_OR_RETURN(nlohmann::json v, Convert(item, depth + 1, budget));
        out.push_back(std::move(v));
      }
      return out;
    }
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& entry : node) {
        if (!entry.first.IsScalar()) {
          return InvalidArgumentError("a mapping key is a list or a mapping (line " +
                                      std::to_string(entry.first.Mark().line + 1) +
                                      "); keys must be plain names");
        }
        const std::string key = entry.first.Scalar();
        // yaml-cpp looks up the first of two equal keys, JSON keeps the
        // last: the planner's parser and the reconciler would read
        // different values. The API server refuses them too.
        if (out.contains(key)) {
          return InvalidArgumentError("the key '" + key + "' appears twice in one mapping (line " +
                                      std::to_string(entry.first.Mark().line + 1) + "); keep one");
        }
        ASSIGN_OR_RETURN(nlohmann::json v, Convert(entry.second, depth + 1, budget));
        out[key] = std::move(v);
      }
      return out;
    }
  }
  return nlohmann::json(nullptr);
}

}  // namespace

StatusOr<nlohmann::json> YamlToJson(const std::string& document) {
  try {
    Budget budget{document.size() + 1};
    return Convert(YAML::Load(document), 0, budget);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("malformed YAML: ") + e.what());
  }
}

}  // namespace pacer::cli
