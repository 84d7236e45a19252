#include "cli/yaml_output.h"

#include <yaml-cpp/yaml.h>

namespace pacer::cli {
namespace {

void Emit(YAML::Emitter& emitter, const Json& json) {
  switch (json.type()) {
    case Json::value_t::object:
      if (json.empty()) {
        emitter << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      emitter << YAML::BeginMap;
      for (const auto& [key, value] : json.items()) {
        emitter << YAML::Key << key << YAML::Value;
        Emit(emitter, value);
      }
      emitter << YAML::EndMap;
      return;
    case Json::value_t::array:
      if (json.empty()) {
        emitter << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      emitter << YAML::BeginSeq;
      for (const Json& item : json) Emit(emitter, item);
      emitter << YAML::EndSeq;
      return;
    case Json::value_t::string:
      emitter << YAML::DoubleQuoted << json.get<std::string>();
      return;
    case Json::value_t::null:
      emitter << YAML::Null;
      return;
    case Json::value_t::boolean:
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      // JSON's spelling of these scalars is valid plain YAML with the same
      // meaning ("true", "7.9", "1e-07"), and avoids yaml-cpp printing
      // 7.9000000000000004 for 7.9.
      emitter << json.dump();
      return;
    case Json::value_t::binary:
    case Json::value_t::discarded:
      emitter << YAML::Null;
      return;
  }
}

}  // namespace

std::string JsonToYaml(const Json& json) {
  YAML::Emitter emitter;
  emitter.SetNullFormat(YAML::LowerNull);
  Emit(emitter, json);
  std::string text = emitter.c_str();
  text += '\n';
  return text;
}

}  // namespace pacer::cli
