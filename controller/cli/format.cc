#include "cli/format.h"

#include <cmath>
#include <cstdio>

#include "cli/plan_output.h"
#include "pacer/planner/units.h"

namespace pacer::cli {

std::string FormatFixed(double x, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, x);
  std::string text = buffer;
  // "-0.00" reads as a sign error to humans.
  if (text.find_first_not_of("-0.") == std::string::npos && text[0] == '-') text.erase(0, 1);
  return text;
}

std::string FormatGrouped(double x) {
  if (!std::isfinite(x)) return FormatFixed(x, 0);
  std::string digits = FormatFixed(std::fabs(std::round(x)), 0);
  std::string grouped;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return (x < 0 && grouped != "0" ? "-" : "") + grouped;
}

std::string FormatSeconds(double seconds) {
  // Three significant digits at every scale: a small model's 40 us of
  // tensor-parallel traffic must not read "0.0 ms" next to a 2% share.
  if (seconds == 0) return "0 s";
  if (seconds < 1e-6) return FormatFixed(seconds * 1e9, seconds < 1e-8 ? 2 : 1) + " ns";
  if (seconds < 1e-4) return FormatFixed(seconds * 1e6, seconds < 1e-5 ? 2 : 1) + " \u00b5s";
  if (seconds < 1e-2) return FormatFixed(seconds * 1e3, 2) + " ms";
  if (seconds < 0.1) return FormatFixed(seconds * 1e3, 1) + " ms";
  if (seconds < 1) return FormatFixed(seconds, 3) + " s";
  if (seconds < 100) return FormatFixed(seconds, 2) + " s";
  return FormatGrouped(seconds) + " s";
}

std::string FormatGiB(double bytes) {
  // Small models' weights are megabytes: "0.0 GiB" would hide them.
  if (bytes > 0 && bytes < 0.05 * kBytesPerGiB) {
    const double mib = bytes / (1024.0 * 1024.0);
    if (mib >= 0.05) return FormatFixed(mib, 1) + " MiB";
    return FormatFixed(bytes / 1024.0, 1) + " KiB";
  }
  return FormatFixed(bytes / kBytesPerGiB, 1) + " GiB";
}

std::string FormatGpuHours(double gpu_hours) {
  return gpu_hours < 100 ? FormatFixed(gpu_hours, 1) : FormatGrouped(gpu_hours);
}

std::string FormatCost(double cost) {
  if (cost <= 0) return "unknown";
  const double whole = std::floor(cost);
  std::string cents = FormatFixed(cost - whole, 2);  // "0.57", or "1.00" after rounding
  if (cents == "1.00") return FormatGrouped(whole + 1) + ".00";
  return FormatGrouped(whole) + cents.substr(1);
}

std::string FormatPercent(double fraction) { return FormatFixed(fraction * 100, 1) + "%"; }

std::string FormatSignedDuration(double seconds) {
  return (seconds < 0 ? "-" : "+") + planner::FormatDurationHuman(std::fabs(seconds));
}

}  // namespace pacer::cli
