#include "kube/kube_time.h"

#include <cstdio>
#include <ctime>

namespace pacer::controller {
namespace {

using std::chrono::system_clock;

std::string Format(system_clock::time_point t, bool micro) {
  const auto seconds = std::chrono::floor<std::chrono::seconds>(t);
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(t - seconds).count();
  const std::time_t tt = system_clock::to_time_t(seconds);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char out[40];
  const size_t n = std::strftime(out, sizeof(out), "%Y-%m-%dT%H:%M:%S", &tm);
  std::string text(out, n);
  if (micro) {
    char fraction[32];
    std::snprintf(fraction, sizeof(fraction), ".%06lld", static_cast<long long>(micros));
    text += fraction;
  }
  return text + "Z";
}

}  // namespace

std::string FormatKubeTime(system_clock::time_point t) { return Format(t, false); }
std::string FormatKubeMicroTime(system_clock::time_point t) { return Format(t, true); }

std::optional<system_clock::time_point> ParseKubeTime(const std::string& text) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6 ||
      consumed != 19) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  size_t at = 19;
  int64_t micros = 0;
  if (at < text.size() && text[at] == '.') {
    int64_t scale = 100000;
    for (++at; at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])); ++at) {
      micros += (text[at] - '0') * scale;
      scale /= 10;
    }
  }
  int64_t offset_seconds = 0;
  if (at < text.size() && (text[at] == 'Z' || text[at] == 'z')) {
    ++at;
  } else if (at + 6 == text.size() && (text[at] == '+' || text[at] == '-')) {
    int hours = 0;
    int minutes = 0;
    if (std::sscanf(text.c_str() + at + 1, "%2d:%2d", &hours, &minutes) != 2) return std::nullopt;
    offset_seconds = (text[at] == '+' ? 1 : -1) * (hours * 3600 + minutes * 60);
    at += 6;
  } else {
    return std::nullopt;
  }
  if (at != text.size()) return std::nullopt;
  const std::time_t tt = timegm(&tm);
  return system_clock::from_time_t(tt) - std::chrono::seconds(offset_seconds) +
         std::chrono::microseconds(micros);
}

}  // namespace pacer::controller
