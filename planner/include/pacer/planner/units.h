// Human units in TrainJob documents: counts ("6.7B", "350M", "1.5T", 6.7e9),
// durations in Go/Kubernetes style ("72h", "1h30m", "90s", "500ms", plus "d"
// for days), percentages ("5%" or a fraction such as 0.05), and RFC 3339
// timestamps ("2026-12-24T00:00:00Z", offsets allowed).
//
// All functions are pure; errors are InvalidArgument with a message that says
// what was expected (callers prefix the field path).
// Thread-safety: stateless.
#ifndef PACER_PLANNER_UNITS_H_
#define PACER_PLANNER_UNITS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pacer/status.h"

namespace pacer::planner {

// "6.7B" -> 6.7e9. Suffixes K (1e3), M (1e6), B or G (1e9), T (1e12),
// case-insensitive; a plain number is taken as is. Must be finite and >= 0.
StatusOr<double> ParseCount(std::string_view text);

// "72h" -> 259200. Units ms, s, m, h, d; several may be chained ("1h30m").
// A bare number is seconds. Must be finite and >= 0.
StatusOr<double> ParseDurationSeconds(std::string_view text);

// "5%" -> 0.05; "0.05" -> 0.05.
StatusOr<double> ParseFraction(std::string_view text);

// RFC 3339 -> Unix seconds (fractional seconds truncated).
StatusOr<int64_t> ParseRfc3339(std::string_view text);

// Unix seconds -> "2026-12-24T00:00:00Z". RFC 3339 has four-digit years:
// times after 9999-12-31T23:59:59Z (a plan on absurdly slow hardware takes
// millennia) are written as that, and times before year 0 as
// 0000-01-01T00:00:00Z, so every string is one an API server and ParseRfc3339
// accept.
std::string FormatRfc3339(int64_t unix_seconds);
// The last instant FormatRfc3339 writes as itself: 9999-12-31T23:59:59Z.
inline constexpr int64_t kLatestRfc3339UnixSeconds = 253402300799;

// When a run of `total_seconds` started at `now_unix_seconds` finishes,
// rounded up to whole seconds: the instant every message shows, and what
// "late" is measured from, so that "N after the deadline" and "at T" agree.
int64_t CompletionUnixSeconds(int64_t now_unix_seconds, double total_seconds);

// A time in Unix seconds as a double (a projection from a measured step
// time, a scheduler's finish), rounded up or down to whole seconds. Beyond
// a million years either side it is clamped there, and NaN counts as the
// far future: converting a double past int64's range (a broken metric's
// 1e300 s step) to an integer is undefined and gave dates in year 0.
int64_t CeilUnixSeconds(double unix_seconds);
int64_t FloorUnixSeconds(double unix_seconds);

// The largest count read from a sample: 2^53. Every integer up to it is
// exact in a double, and it is far past any real step or rank count.
inline constexpr int64_t kMaxSampleCount = int64_t{1} << 53;

// A count read as a double (a Prometheus sample of steps or ranks): its
// whole part, or none when it is not a finite number in [0, kMaxSampleCount]. A
// broken or hostile exporter's 1e30 or -5 is no count: converting it to an
// integer would be undefined, and a clamped one would pass for progress.
std::optional<int64_t> CountFromSample(double value);

// 259200 -> "3d0h", 5400 -> "1h30m", 42 -> "42s" (for humans, not parsing).
std::string FormatDurationHuman(double seconds);

}  // namespace pacer::planner

#endif  // PACER_PLANNER_UNITS_H_
