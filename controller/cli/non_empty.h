// A CLI11 check for path flags: given means not empty.
//
// `--cluster "$INVENTORY"` with the variable unset passes "": read as "left
// out", a script planned against the built-in example inventory and exited
// 0, `--svg ""` wrote nothing, and `pacer run --work-dir ""` used the
// default. Refused instead, as `--now ""` is.
// Thread-safety: the returned validator holds no state.
#ifndef PACER_CLI_NON_EMPTY_H_
#define PACER_CLI_NON_EMPTY_H_

#include <CLI/CLI.hpp>
#include <string>

namespace pacer::cli {

inline CLI::Validator NonEmpty() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        if (!input.empty()) return "";
        return "is empty (an unset variable?): give a path, or leave the flag out for the default";
      },
      "");
}

}  // namespace pacer::cli

#endif  // PACER_CLI_NON_EMPTY_H_
