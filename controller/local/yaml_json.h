// YAML (a TrainJob file) to JSON (the object the reconciler reads, as the API
// server would store it). Plain scalars become numbers, booleans or null when
// they read as such (YAML 1.2 core schema); quoted scalars stay strings.
//
// Thread-safety: pure function.
#ifndef PACER_CONTROLLER_LOCAL_YAML_JSON_H_
#define PACER_CONTROLLER_LOCAL_YAML_JSON_H_

#include <nlohmann/json.hpp>
#include <string>

#include "pacer/status.h"

namespace pacer::controller {

// InvalidArgument for malformed YAML, nesting deeper than 64 levels, a key
// that appears twice in one mapping, a key that is not a scalar, or aliases
// that expand the document to more values than it has bytes.
StatusOr<nlohmann::json> YamlToJson(const std::string& document);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_LOCAL_YAML_JSON_H_
