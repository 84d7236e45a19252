// Number formatting for the CLI's human output (tables, summaries, bars):
// fixed decimals, thousands separators, seconds, GiB, cost, percentages.
// Machine output (JSON/YAML) does not use these. All functions are
// locale-independent, so output is the same on every machine.
// Thread-safety: pure functions.
#ifndef PACER_CLI_FORMAT_H_
#define PACER_CLI_FORMAT_H_

#include <cstdint>
#include <string>

namespace pacer::cli {

// 3.14159, 2 -> "3.14".
std::string FormatFixed(double x, int decimals);

// 1234567.8 -> "1,234,568" (rounded to an integer).
std::string FormatGrouped(double x);

// A step time, three significant digits down to nanoseconds: "7.91 s",
// "0.412 s", "12.3 ms", "4.21 ms", "38.5 \u00b5s" (micro sign, U+00B5), "0 s".
std::string FormatSeconds(double seconds);

// Bytes as GiB (2^30 bytes): "61.2 GiB"; below 0.05 GiB as MiB or KiB
// ("12.4 MiB"), so that a small model's memory never reads "0.0 GiB".
std::string FormatGiB(double bytes);

// GPU-hours: "6,340" or "12.5" below 100.
std::string FormatGpuHours(double gpu_hours);

// Cost in the inventory's currency: "15,800.00"; "unknown" when 0 (no price).
std::string FormatCost(double cost);

// 0.451 -> "45.1%".
std::string FormatPercent(double fraction);

// A signed duration for slack: "+3d21h" / "-5h12m" (FormatDurationHuman).
std::string FormatSignedDuration(double seconds);

}  // namespace pacer::cli

#endif  // PACER_CLI_FORMAT_H_
