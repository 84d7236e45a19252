#include "cli/inputs.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <utility>

#include "cli/yaml_json.h"
#include "pacer/planner/job_parser.h"
#include "pacer/planner/layout.h"
#include "pacer/planner/units.h"
#include "pacer/strings.h"

namespace pacer::cli {
namespace {

// A whole decimal integer >= 1 (GPU counts and steps); no sign, no spaces.
StatusOr<int> ParsePositiveInt(std::string_view text, std::string_view what) {
  int value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec == std::errc::result_out_of_range && ptr == end) {
    return InvalidArgumentError("--gpus: " + std::string(what) + " \"" + std::string(text) +
                                "\" is too large; GPU counts go up to " +
                                std::to_string(planner::kMaxLayoutGpus));
  }
  if (text.empty() || ec != std::errc() || ptr != end || value < 1) {
    return InvalidArgumentError("--gpus: " + std::string(what) +
                                " must be a positive integer, got \"" + std::string(text) + "\"");
  }
  return value;
}

// Where the byte at `offset` is, for a person with an editor: line and
// column (1-based, columns in bytes) and the offset itself.
std::string WhereIs(std::string_view text, std::size_t offset) {
  std::size_t line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(offset - line_start + 1) +
         " (byte offset " + std::to_string(offset) + ")";
}

Status TooManyPoints() {
  return InvalidArgumentError("--gpus: more than " + std::to_string(kMaxSweepPoints) +
                              " GPU counts; use a larger step or a shorter range");
}

}  // namespace

Status WriteOutputFile(const std::string& path, const std::string& text, const std::string& what,
                       const std::vector<std::string>& inputs) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgumentError(what + ": cannot write " + path +
                                ": is a directory; give a file name");
  }
  for (const std::string& input : inputs) {
    if (input.empty()) continue;
    std::error_code same_ec;
    if (std::filesystem::equivalent(path, input, same_ec)) {
      return InvalidArgumentError(what + ": " + path + " is the input file " + input +
                                  "; writing it would replace it; give another file name");
    }
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) {
    return InvalidArgumentError(what + ": cannot write " + path + ": " + std::strerror(errno));
  }
  file << text;
  file.close();  // a full disk shows here, at the flush
  if (!file) {
    return InvalidArgumentError(what + ": cannot write " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

StatusOr<std::string> ReadDocument(const std::string& path, std::size_t max_bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgumentError(path + ": cannot read: is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgumentError(path + ": cannot read: " + std::strerror(errno));
  }
  // Read one byte past the limit to tell "exactly at the limit" from "over".
  std::string document(max_bytes + 1, '\0');
  in.read(document.data(), static_cast<std::streamsize>(document.size()));
  if (in.bad()) {
    return InvalidArgumentError(path + ": cannot read: I/O error");
  }
  document.resize(static_cast<std::size_t>(in.gcount()));
  if (document.size() > max_bytes) {
    return ResourceExhaustedError(path + ": larger than the " + std::to_string(max_bytes) +
                                  "-byte limit for input documents");
  }
  // Checked on the bytes, comments included: yaml-cpp takes any byte, so a
  // Latin-1 comment was planned and run, and a Latin-1 label was planned by
  // `pacer plan` but refused by `pacer run` (JSON, for the API server, is
  // UTF-8 only).
  if (const std::optional<std::size_t> bad = FirstInvalidUtf8Byte(document)) {
    char byte[8];
    std::snprintf(byte, sizeof(byte), "0x%02X", static_cast<unsigned char>(document[*bad]));
    return InvalidArgumentError(path + ": the file is not valid UTF-8: byte " + byte + " at " +
                                WhereIs(document, *bad) +
                                "; save it as UTF-8 (from Latin-1: iconv -f latin1 -t utf-8)");
  }
  // YAML and JSON allow no control character but tab, line feed and
  // carriage return, not even in a comment; yaml-cpp took a NUL in a comment
  // and misread one elsewhere ("unknown escape character" a line later), and
  // kubectl refuses them.
  const auto control = std::find_if(document.begin(), document.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return (byte < 0x20 && byte != '\t' && byte != '\n' && byte != '\r') || byte == 0x7F;
  });
  if (control != document.end()) {
    const auto offset = static_cast<std::size_t>(control - document.begin());
    char byte[8];
    std::snprintf(byte, sizeof(byte), "0x%02X", static_cast<unsigned char>(*control));
    return InvalidArgumentError(path + ": the file holds the control character " + byte + " at " +
                                WhereIs(document, offset) +
                                "; YAML and JSON allow only tab, line feed and carriage return: "
                                "delete it");
  }
  return document;
}

std::optional<std::size_t> FirstInvalidUtf8Byte(std::string_view text) {
  const auto at = [&text](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  std::size_t i = 0;
  while (i < text.size()) {
    const unsigned char lead = at(i);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // The sequence's length, and the range of its second byte: narrower
    // after E0 and F0 (overlong forms), ED (surrogates) and F4 (> U+10FFFF).
    std::size_t length = 0;
    unsigned char low = 0x80;
    unsigned char high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      return i;  // a continuation byte alone, C0, C1 or F5..FF
    }
    if (i + length > text.size() || at(i + 1) < low || at(i + 1) > high) return i;
    for (std::size_t k = 2; k < length; ++k) {
      if ((at(i + k) & 0xC0) != 0x80) return i;
    }
    i += length;
  }
  return std::nullopt;
}

StatusOr<TrainJobFile> ReadTrainJob(const std::string& path) {
  ASSIGN_OR_RETURN(std::string document, ReadDocument(path));
  TrainJobFile job;
  // The planner's parser first: it says exactly what is wrong with a field.
  StatusOr<planner::JobSpec> spec = planner::ParseTrainJob(document);
  if (!spec.ok()) return spec.status().WithContext(path);
  job.spec = std::move(spec).value();
  StatusOr<nlohmann::json> object = YamlToJson(document);
  if (!object.ok()) return object.status().WithContext(path);
  if (!object->is_object()) return InvalidArgumentError(path + ": not a YAML mapping");
  // The bytes are UTF-8, but an escape can still make a string that is not
  // (a lone surrogate written as an escape): the reconciler writes the
  // object out as JSON, which threw "invalid UTF-8 byte" as an internal error
  // mid-run.
  try {
    (void)object->dump();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(path + ": a string is not valid UTF-8 once its escapes are read (" +
                                e.what() + "); write the characters themselves, in UTF-8");
  }
  job.object = std::move(object).value();
  return job;
}

StatusOr<int64_t> ResolveNow(const std::optional<std::string>& text) {
  if (!text) {
    return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count());
  }
  if (text->empty()) {
    return InvalidArgumentError(
        "--now is empty; give an RFC 3339 time such as 2026-01-01T00:00:00Z, or leave the flag "
        "out");
  }
  StatusOr<int64_t> now = planner::ParseRfc3339(*text);
  if (!now.ok()) {
    // ParseRfc3339's message already says what the time should look like.
    return InvalidArgumentError("--now: " + now.status().message());
  }
  // A deadline up to 100 years on (maxDuration's limit) must be writable as
  // a date: near year 9999 every deadline and completion was written as
  // 9999-12-31T23:59:59Z, and the advice contradicted itself.
  constexpr int64_t kLatestNow = planner::kLatestRfc3339UnixSeconds - 36500LL * 86400;
  if (*now > kLatestNow) {
    return InvalidArgumentError("--now: must be at most " + planner::FormatRfc3339(kLatestNow) +
                                " (deadlines up to 100 years later must be writable as dates), "
                                "got \"" +
                                *text + "\"");
  }
  return now;
}

StatusOr<LoadedInputs> LoadInputs(const InputFlags& flags) {
  LoadedInputs inputs;
  ASSIGN_OR_RETURN(inputs.now_unix_seconds, ResolveNow(flags.now_rfc3339));

  ASSIGN_OR_RETURN(TrainJobFile job, ReadTrainJob(flags.job_path));
  inputs.job = std::move(job.spec);

  if (flags.cluster_path.empty()) {
    inputs.inventory = planner::DefaultInventory();
  } else {
    ASSIGN_OR_RETURN(std::string document, ReadDocument(flags.cluster_path));
    StatusOr<planner::Inventory> inventory = planner::ParseInventory(document);
    if (!inventory.ok()) return inventory.status().WithContext(flags.cluster_path);
    inputs.inventory = std::move(inventory).value();
  }

  if (!flags.calibration_path.empty()) {
    ASSIGN_OR_RETURN(std::string document, ReadDocument(flags.calibration_path));
    StatusOr<planner::Calibration> calibration = planner::ParseCalibration(document);
    if (!calibration.ok()) return calibration.status().WithContext(flags.calibration_path);
    RETURN_IF_ERROR(planner::CheckCalibrationGpuTypes(*calibration, inputs.inventory.catalog)
                        .WithContext(flags.calibration_path));
    inputs.calibration = std::move(calibration).value();
  }

  inputs.deadline_unix_seconds = planner::EffectiveDeadline(inputs.job, inputs.now_unix_seconds);
  return inputs;
}

namespace {

// Past the largest layout the planner searches: such a point only ever got a
// false reason ("layout-indivisible").
StatusOr<std::vector<int>> WithinLayoutLimit(const std::set<int>& counts) {
  if (!counts.empty() && *counts.rbegin() > planner::kMaxLayoutGpus) {
    return InvalidArgumentError("--gpus: " + std::to_string(*counts.rbegin()) + " is above the " +
                                std::to_string(planner::kMaxLayoutGpus) +
                                " GPUs one layout may use; give smaller counts");
  }
  return std::vector<int>(counts.begin(), counts.end());
}

}  // namespace

StatusOr<std::vector<int>> ParseGpuCounts(std::string_view text) {
  std::set<int> counts;
  const std::size_t dots = text.find("..");
  if (dots == std::string_view::npos) {
    // A comma list (or a single count).
    for (std::string_view item : SplitOn(text, ',')) {
      ASSIGN_OR_RETURN(int count, ParsePositiveInt(item, "each GPU count"));
      counts.insert(count);
      if (counts.size() > kMaxSweepPoints) return TooManyPoints();
    }
    return WithinLayoutLimit(counts);
  }

  const std::string_view lo_text = text.substr(0, dots);
  std::string_view hi_text = text.substr(dots + 2);
  std::string_view step_text;
  const std::size_t colon = hi_text.find(':');
  if (colon != std::string_view::npos) {
    step_text = hi_text.substr(colon + 1);
    hi_text = hi_text.substr(0, colon);
  }
  ASSIGN_OR_RETURN(int lo, ParsePositiveInt(lo_text, "the range start"));
  ASSIGN_OR_RETURN(int hi, ParsePositiveInt(hi_text, "the range end"));
  if (lo > hi) {
    return InvalidArgumentError("--gpus: the range start " + std::to_string(lo) +
                                " is larger than its end " + std::to_string(hi));
  }
  if (colon == std::string_view::npos) {
    // Doubling: 8..1024 -> 8, 16, ..., 1024. int64 so the last doubling
    // cannot overflow.
    for (int64_t gpus = lo; gpus <= hi; gpus *= 2) {
      counts.insert(static_cast<int>(gpus));
    }
  } else {
    ASSIGN_OR_RETURN(int step, ParsePositiveInt(step_text, "the step"));
    if ((static_cast<int64_t>(hi) - lo) / step + 1 > static_cast<int64_t>(kMaxSweepPoints)) {
      return TooManyPoints();
    }
    for (int64_t gpus = lo; gpus <= hi; gpus += step) {
      counts.insert(static_cast<int>(gpus));
    }
  }
  return WithinLayoutLimit(counts);
}

}  // namespace pacer::cli
