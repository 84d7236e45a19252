// YamlToJson for local mode and its tests: the conversion lives in
// cli/yaml_json.h, where `pacer plan` reads files with it too.
#ifndef PACER_CONTROLLER_LOCAL_YAML_JSON_H_
#define PACER_CONTROLLER_LOCAL_YAML_JSON_H_

#include "cli/yaml_json.h"

namespace pacer::controller {

using cli::YamlToJson;

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_LOCAL_YAML_JSON_H_
