// Renders the CLI's JSON trees as YAML (block style), so that `-o yaml` and
// `-o json` always carry the same fields and values: numbers keep JSON's
// shortest round-trip spelling, strings are double-quoted (a timestamp or a
// pool named "yes" stays a string), null is `null`, key order is kept.
// Thread-safety: pure functions.
#ifndef PACER_CLI_YAML_OUTPUT_H_
#define PACER_CLI_YAML_OUTPUT_H_

#include <string>

#include "cli/plan_output.h"

namespace pacer::cli {

// A YAML document (ending in a newline) with the content of `json`.
std::string JsonToYaml(const Json& json);

}  // namespace pacer::cli

#endif  // PACER_CLI_YAML_OUTPUT_H_
