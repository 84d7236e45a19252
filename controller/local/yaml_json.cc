#include "local/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <regex>

namespace pacer::controller {
namespace {

constexpr int kMaxDepth = 64;

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

StatusOr<nlohmann::json> Convert(const YAML::Node& node, int depth) {
  if (depth > kMaxDepth) {
    return InvalidArgumentError("the document nests deeper than " + std::to_string(kMaxDepth) +
                                " levels");
  }
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nlohmann::json(nullptr);
    case YAML::NodeType::Scalar:
      return Scalar(node);
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const YAML::Node& item : node) {
        ASSIGN_OR_RETURN(nlohmann::json v, Convert(item, depth + 1));
        out.push_back(std::move(v));
      }
      return out;
    }
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& entry : node) {
        ASSIGN_OR_RETURN(nlohmann::json v, Convert(entry.second, depth + 1));
        out[entry.first.as<std::string>()] = std::move(v);
      }
      return out;
    }
  }
  return nlohmann::json(nullptr);
}

}  // namespace

StatusOr<nlohmann::json> YamlToJson(const std::string& document) {
  try {
    return Convert(YAML::Load(document), 0);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("malformed YAML: ") + e.what());
  }
}

}  // namespace pacer::controller
