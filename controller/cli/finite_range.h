// A CLI11 check for floating-point flags: a finite number within [min, max].
//
// CLI::Range alone lets "nan" through: it parses (strtod accepts it) and
// every comparison with NaN is false, so neither bound refuses it. A NaN
// hysteresis, headroom or relaunch time then runs as a plan of NaN seconds
// instead of failing the command line.
// Thread-safety: the returned validator holds only its bounds.
#ifndef PACER_CLI_FINITE_RANGE_H_
#define PACER_CLI_FINITE_RANGE_H_

#include <CLI/CLI.hpp>
#include <cmath>
#include <string>

namespace pacer::cli {

inline CLI::Validator FiniteRange(double min, double max) {
  const CLI::Range range(min, max);
  return CLI::Validator(
      [range](std::string& input) -> std::string {
        double value = 0;
        if (CLI::detail::lexical_cast(input, value) && !std::isfinite(value)) {
          return "Value " + input + " is not a finite number (" + range.get_description() + ")";
        }
        return range(input);
      },
      range.get_description());
}

}  // namespace pacer::cli

#endif  // PACER_CLI_FINITE_RANGE_H_
