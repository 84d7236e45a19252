// YAML (a TrainJob file) to JSON (the object the reconciler reads, as the API
// server would store it). Plain scalars become numbers, booleans or null when
// they read as such (YAML 1.2 core schema); quoted scalars stay strings.
//
// Here, not in local mode, so that `pacer plan` refuses what `pacer run`
// refuses (cli::ReadTrainJob): an alias bomb under metadata.labels, which
// the planner's parser never reads, was planned by one and refused by the
// other.
//
// Thread-safety: pure function.
#ifndef PACER_CLI_YAML_JSON_H_
#define PACER_CLI_YAML_JSON_H_

#include <nlohmann/json.hpp>
#include <string>

#include "pacer/status.h"

namespace pacer::cli {

// InvalidArgument for malformed YAML, nesting deeper than 64 levels, a key
// that appears twice in one mapping, a key that is not a scalar, or aliases
// that expand the document to more values than it has bytes.
StatusOr<nlohmann::json> YamlToJson(const std::string& document);

}  // namespace pacer::cli

#endif  // PACER_CLI_YAML_JSON_H_
