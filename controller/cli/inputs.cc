#include "cli/inputs.h"

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "pacer/planner/job_parser.h"
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
  if (text.empty() || ec != std::errc() || ptr != end || value < 1) {
    return InvalidArgumentError("--gpus: " + std::string(what) +
                                " must be a positive integer, got \"" + std::string(text) + "\"");
  }
  return value;
}

Status TooManyPoints() {
  return InvalidArgumentError("--gpus: more than " + std::to_string(kMaxSweepPoints) +
                              " GPU counts; use a larger step or a shorter range");
}

}  // namespace

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
  return document;
}

StatusOr<int64_t> ResolveNow(const std::string& text) {
  if (text.empty()) {
    return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count());
  }
  StatusOr<int64_t> now = planner::ParseRfc3339(text);
  if (!now.ok()) {
    return InvalidArgumentError("--now: " + now.status().message() +
                                " (expected RFC 3339, e.g. 2026-06-01T00:00:00Z)");
  }
  return now;
}

StatusOr<LoadedInputs> LoadInputs(const InputFlags& flags) {
  LoadedInputs inputs;
  ASSIGN_OR_RETURN(inputs.now_unix_seconds, ResolveNow(flags.now_rfc3339));

  ASSIGN_OR_RETURN(std::string job_document, ReadDocument(flags.job_path));
  StatusOr<planner::JobSpec> job = planner::ParseTrainJob(job_document);
  if (!job.ok()) return job.status().WithContext(flags.job_path);
  inputs.job = std::move(job).value();

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
    return std::vector<int>(counts.begin(), counts.end());
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
  return std::vector<int>(counts.begin(), counts.end());
}

}  // namespace pacer::cli
