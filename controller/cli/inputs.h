// Reading what the CLI commands take as input: the TrainJob, the cluster
// inventory and the calibration files, the --now timestamp, and sweep's
// --gpus list. Every error is a Status whose message names the file (or the
// flag) and, for documents, the field path the parser reported, so the
// caller can print it as is.
//
// Files larger than kMaxDocumentBytes, and files that are not UTF-8, are
// refused before parsing. The wall clock is read here, and only when no --now
// is given.
// Thread-safety: stateless functions.
#ifndef PACER_CLI_INPUTS_H_
#define PACER_CLI_INPUTS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pacer/planner/calibration.h"
#include "pacer/planner/inventory.h"
#include "pacer/planner/job_parser.h"
#include "pacer/planner/job_spec.h"
#include "pacer/status.h"

namespace pacer::cli {

// Paths and flags shared by plan, explain and sweep; empty = not given.
struct InputFlags {
  std::string job_path;
  std::string cluster_path;                // empty: DefaultInventory()
  std::string calibration_path;            // empty: no calibration
  std::optional<std::string> now_rfc3339;  // nullopt: the system clock
};

// Everything a planning command needs, validated.
struct LoadedInputs {
  planner::JobSpec job;
  planner::Inventory inventory;
  planner::Calibration calibration;
  int64_t now_unix_seconds = 0;
  std::optional<int64_t> deadline_unix_seconds;  // EffectiveDeadline at now
};

// The whole file; InvalidArgument when it cannot be read or is not UTF-8
// (anywhere, comments included: YAML and JSON are Unicode, and the API
// server takes UTF-8 only; the message gives the line, column and byte
// offset), ResourceExhausted when it is larger than `max_bytes`. Messages
// start with the path.
StatusOr<std::string> ReadDocument(const std::string& path,
                                   std::size_t max_bytes = planner::kMaxDocumentBytes);

// Writes `text` to `path` (replacing it). InvalidArgument naming `what`
// (the flag), the path and the system's reason (a directory, no such
// folder, permission denied, no space left) when it cannot, and before
// writing when `path` is one of the command's `inputs` (the same file by
// any name: `--svg job.yaml` replaced the TrainJob with a chart).
Status WriteOutputFile(const std::string& path, const std::string& text, const std::string& what,
                       const std::vector<std::string>& inputs = {});

// The offset of the first byte of `text` that is not part of well-formed
// UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above
// U+10FFFF), or nullopt when all of it is.
std::optional<std::size_t> FirstInvalidUtf8Byte(std::string_view text);

// A TrainJob file read the one way `pacer plan` (and explain, sweep) and
// `pacer run` read it: ReadDocument, the planner's parser, then the
// document as the object the API server would store (YamlToJson), so that
// both refuse the same files: also what the parser never reads, such as
// aliases under metadata.labels that expand to a billion values.
struct TrainJobFile {
  planner::JobSpec spec;
  nlohmann::json object;  // a JSON object; its strings dump as UTF-8
};
// Errors are ReadDocument's, or InvalidArgument; messages start with the path.
StatusOr<TrainJobFile> ReadTrainJob(const std::string& path);

// --now: an RFC 3339 timestamp, or the system clock when it was not given
// (nullopt). Given empty, it is refused: `--now "$UNSET_VARIABLE"` planned at
// the system clock without a word.
StatusOr<int64_t> ResolveNow(const std::optional<std::string>& text);

// Reads and parses all inputs, then refuses a deadline that is not after now
// (InvalidArgument naming spec.deadline or spec.maxDuration).
StatusOr<LoadedInputs> LoadInputs(const InputFlags& flags);

// sweep's --gpus: "8..1024" (doubling from 8 up to 1024), "8..64:8" (linear
// step), or a comma list "8,24,64". The result is ascending and free of
// duplicates; at most kMaxSweepPoints counts, each >= 1.
inline constexpr std::size_t kMaxSweepPoints = 256;
StatusOr<std::vector<int>> ParseGpuCounts(std::string_view text);

}  // namespace pacer::cli

#endif  // PACER_CLI_INPUTS_H_
