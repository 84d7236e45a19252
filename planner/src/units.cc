#include "pacer/planner/units.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>

#include "pacer/strings.h"
#include "text.h"

namespace pacer::planner {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Parses all of `text` as a decimal floating-point number ("6.7", "2e12",
// "-4"). Unlike strtod it takes no locale, hex, "inf" or "nan", and unlike
// from_chars it allows a leading '+'.
bool ParseDecimal(std::string_view text, double* out) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return false;
  // Every spelling from_chars accepts that is not a plain decimal (inf, nan)
  // starts with a letter; a number must start with a digit, '.' or '-'.
  const char first = text.front() == '-' && text.size() > 1 ? text[1] : text.front();
  if (!IsDigit(first) && first != '.') return false;
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) return false;
  if (!std::isfinite(value)) return false;
  *out = value;
  return true;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
// days_from_civil), valid for every year this parser accepts.
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

struct Civil {
  int64_t year;
  int month;
  int day;
};

Civil CivilFromDays(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t d = doy - (153 * mp + 2) / 5 + 1;
  const int64_t m = mp < 10 ? mp + 3 : mp - 9;
  return Civil{yoe + era * 400 + (m <= 2 ? 1 : 0), static_cast<int>(m), static_cast<int>(d)};
}

bool IsLeapYear(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int DaysInMonth(int64_t year, int month) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month == 2 && IsLeapYear(year)) return 29;
  return kDays[month - 1];
}

// Reads exactly `width` digits at `*pos`.
bool ReadDigits(std::string_view s, std::size_t* pos, int width, int* out) {
  if (*pos + static_cast<std::size_t>(width) > s.size()) return false;
  int value = 0;
  for (int i = 0; i < width; ++i) {
    const char c = s[*pos + static_cast<std::size_t>(i)];
    if (!IsDigit(c)) return false;
    value = value * 10 + (c - '0');
  }
  *pos += static_cast<std::size_t>(width);
  *out = value;
  return true;
}

bool Expect(std::string_view s, std::size_t* pos, char c) {
  if (*pos >= s.size() || s[*pos] != c) return false;
  ++*pos;
  return true;
}

}  // namespace

StatusOr<double> ParseCount(std::string_view text) {
  const std::string_view trimmed = TrimBlanks(text);
  std::string_view number = trimmed;
  double multiplier = 1;
  if (!number.empty()) {
    switch (number.back()) {
      case 'k':
      case 'K':
        multiplier = 1e3;
        break;
      case 'm':
      case 'M':
        multiplier = 1e6;
        break;
      case 'b':
      case 'B':
      case 'g':
      case 'G':
        multiplier = 1e9;
        break;
      case 't':
      case 'T':
        multiplier = 1e12;
        break;
      default:
        break;
    }
    if (multiplier != 1) number.remove_suffix(1);
  }
  double value = 0;
  if (!ParseDecimal(TrimBlanks(number), &value)) {
    return InvalidArgumentError("expected a count such as 6.7B, 350M or 2e12, got " + text::QuoteForMessage(text));
  }
  value *= multiplier;
  if (!std::isfinite(value)) {
    return InvalidArgumentError("count is too large, got " + text::QuoteForMessage(text));
  }
  if (value < 0) {
    return InvalidArgumentError("count must not be negative, got " + text::QuoteForMessage(text));
  }
  return value;
}

StatusOr<double> ParseDurationSeconds(std::string_view text) {
  const std::string_view s = TrimBlanks(text);
  const auto bad = [&]() {
    return InvalidArgumentError("expected a duration such as 72h or 1h30m, got " + text::QuoteForMessage(text));
  };
  if (s.empty()) return bad();
  if (s.front() == '-') {
    return InvalidArgumentError("duration must not be negative, got " + text::QuoteForMessage(text));
  }
  double bare = 0;
  if (ParseDecimal(s, &bare)) return bare;  // plain seconds

  double total = 0;
  std::size_t pos = 0;
  if (s[pos] == '+') ++pos;
  if (pos == s.size()) return bad();
  while (pos < s.size()) {
    const std::size_t start = pos;
    while (pos < s.size() && (IsDigit(s[pos]) || s[pos] == '.')) ++pos;
    if (pos == start) return bad();
    double amount = 0;
    if (!ParseDecimal(s.substr(start, pos - start), &amount)) return bad();
    const std::size_t unit_start = pos;
    while (pos < s.size() && s[pos] >= 'a' && s[pos] <= 'z') ++pos;
    const std::string_view unit = s.substr(unit_start, pos - unit_start);
    double scale = 0;
    if (unit == "ms") {
      scale = 1e-3;
    } else if (unit == "s") {
      scale = 1;
    } else if (unit == "m") {
      scale = 60;
    } else if (unit == "h") {
      scale = 3600;
    } else if (unit == "d") {
      scale = 86400;
    } else {
      return bad();
    }
    total += amount * scale;
  }
  if (!std::isfinite(total)) {
    return InvalidArgumentError("duration is too large, got " + text::QuoteForMessage(text));
  }
  return total;
}

StatusOr<double> ParseFraction(std::string_view text) {
  std::string_view s = TrimBlanks(text);
  bool percent = false;
  if (!s.empty() && s.back() == '%') {
    percent = true;
    s = TrimBlanks(s.substr(0, s.size() - 1));
  }
  double value = 0;
  if (!ParseDecimal(s, &value)) {
    return InvalidArgumentError(
        "expected a percentage such as 5% or a fraction such as 0.05, got " + text::QuoteForMessage(text));
  }
  if (value < 0) {
    return InvalidArgumentError("must not be negative, got " + text::QuoteForMessage(text));
  }
  return percent ? value / 100 : value;
}

StatusOr<int64_t> ParseRfc3339(std::string_view text) {
  const std::string_view s = TrimBlanks(text);
  const auto bad = [&]() {
    return InvalidArgumentError(
        "expected an RFC 3339 time such as \"2026-12-24T00:00:00Z\" or "
        "\"2026-12-24T09:00:00+02:00\", got " +
        text::QuoteForMessage(text));
  };
  std::size_t pos = 0;
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!ReadDigits(s, &pos, 4, &year) || !Expect(s, &pos, '-') || !ReadDigits(s, &pos, 2, &month) ||
      !Expect(s, &pos, '-') || !ReadDigits(s, &pos, 2, &day)) {
    return bad();
  }
  // RFC 3339 allows 't' and, by its note on readability, a space.
  if (pos >= s.size() || (s[pos] != 'T' && s[pos] != 't' && s[pos] != ' ')) return bad();
  ++pos;
  if (!ReadDigits(s, &pos, 2, &hour) || !Expect(s, &pos, ':') || !ReadDigits(s, &pos, 2, &minute) ||
      !Expect(s, &pos, ':') || !ReadDigits(s, &pos, 2, &second)) {
    return bad();
  }
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    const std::size_t start = pos;
    while (pos < s.size() && IsDigit(s[pos])) ++pos;
    if (pos == start) return bad();  // truncated: the fraction is dropped
  }
  int64_t offset_seconds = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    const int sign = s[pos] == '-' ? -1 : 1;
    ++pos;
    int off_hour = 0, off_minute = 0;
    if (!ReadDigits(s, &pos, 2, &off_hour) || !Expect(s, &pos, ':') ||
        !ReadDigits(s, &pos, 2, &off_minute)) {
      return bad();
    }
    if (off_hour > 23 || off_minute > 59) {
      return InvalidArgumentError("time zone offset out of range in " + text::QuoteForMessage(text));
    }
    offset_seconds = sign * (off_hour * 3600 + off_minute * 60);
  } else {
    return InvalidArgumentError("time needs a time zone (Z or an offset such as +02:00), got " +
                                text::QuoteForMessage(text));
  }
  if (pos != s.size()) return bad();
  if (month < 1 || month > 12 || day < 1 || day > DaysInMonth(year, month)) {
    return InvalidArgumentError("no such date in " + text::QuoteForMessage(text));
  }
  // Second 60 is a leap second; Unix time folds it into the next minute.
  if (hour > 23 || minute > 59 || second > 60) {
    return InvalidArgumentError("time of day out of range in " + text::QuoteForMessage(text));
  }
  const int64_t days = DaysFromCivil(year, month, day);
  return days * 86400 + hour * 3600 + minute * 60 + second - offset_seconds;
}

std::string FormatRfc3339(int64_t unix_seconds) {
  constexpr int64_t kYear0 = -62167219200;        // 0000-01-01T00:00:00Z
  unix_seconds = std::clamp(unix_seconds, kYear0, kLatestRfc3339UnixSeconds);
  int64_t days = unix_seconds / 86400;
  int64_t rem = unix_seconds % 86400;
  if (rem < 0) {
    rem += 86400;
    --days;
  }
  const Civil c = CivilFromDays(days);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04lld-%02d-%02dT%02d:%02d:%02dZ", static_cast<long long>(c.year),
                c.month, c.day, static_cast<int>(rem / 3600), static_cast<int>(rem % 3600 / 60),
                static_cast<int>(rem % 60));
  return buf;
}

namespace {
// A million years: beyond any deadline, and far from int64's end (a
// near-zero bandwidth in an inventory can make a plan take "forever").
constexpr double kMaxSeconds = 1e6 * 365.25 * 86400;

double ClampedUnixSeconds(double unix_seconds) {
  return std::isnan(unix_seconds) ? kMaxSeconds
                                  : std::clamp(unix_seconds, -kMaxSeconds, kMaxSeconds);
}
}  // namespace

int64_t CeilUnixSeconds(double unix_seconds) {
  return static_cast<int64_t>(std::ceil(ClampedUnixSeconds(unix_seconds)));
}

int64_t FloorUnixSeconds(double unix_seconds) {
  return static_cast<int64_t>(std::floor(ClampedUnixSeconds(unix_seconds)));
}

std::optional<int64_t> CountFromSample(double value) {
  if (!(value >= 0 && value <= static_cast<double>(kMaxSampleCount))) {
    return std::nullopt;  // also NaN
  }
  return static_cast<int64_t>(std::floor(value));
}

int64_t CompletionUnixSeconds(int64_t now_unix_seconds, double total_seconds) {
  // A negative duration is none; NaN stays NaN, the far future.
  return now_unix_seconds + CeilUnixSeconds(total_seconds < 0 ? 0.0 : total_seconds);
}

std::string FormatDurationHuman(double seconds) {
  if (std::isnan(seconds)) return "unknown";
  if (seconds < 0) return "-" + FormatDurationHuman(-seconds);
  if (std::isinf(seconds)) return "forever";
  char buf[64];
  if (seconds > 0 && seconds < 1) {
    const double ms = std::round(seconds * 1000);
    if (ms < 1000) {
      std::snprintf(buf, sizeof buf, "%.0fms", ms);
      return buf;
    }
  }
  // Beyond ~292 billion years int64 overflows; nobody reads that precisely.
  if (seconds >= 9e18) {
    std::snprintf(buf, sizeof buf, "%.3gs", seconds);
    return buf;
  }
  const auto total = static_cast<int64_t>(std::llround(seconds));
  if (total >= 86400) {
    // Round to the hour so that "3d0h" never shows as "2d24h".
    const int64_t hours = (total + 1800) / 3600;
    std::snprintf(buf, sizeof buf, "%lldd%lldh", static_cast<long long>(hours / 24),
                  static_cast<long long>(hours % 24));
  } else if (total >= 3600) {
    const int64_t minutes = (total + 30) / 60;
    if (minutes >= 24 * 60) return "1d0h";
    std::snprintf(buf, sizeof buf, "%lldh%lldm", static_cast<long long>(minutes / 60),
                  static_cast<long long>(minutes % 60));
  } else if (total >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm%llds", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(total));
  }
  return buf;
}

}  // namespace pacer::planner
