// Internal: typed, path-carrying readers for Pacer's YAML/JSON documents
// (TrainJobs, inventories, calibrations), so that the three parsers share one
// way of loading a document and one style of error message:
//   "<path>: <what is wrong>, got <value>"
// e.g. "spec.training.globalBatchSize: must be a positive integer, got -4".
//
// yaml-cpp throws; nothing here does: every yaml-cpp call that can throw is
// made inside a try block, and Load refuses oversized input before parsing.
// Thread-safety: Field is a value wrapping a yaml-cpp node; do not share one
// document's nodes between threads.
#ifndef PACER_PLANNER_SRC_YAML_FIELDS_H_
#define PACER_PLANNER_SRC_YAML_FIELDS_H_

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pacer/status.h"

namespace pacer::planner::yaml_fields {

// A node and the path that names it in messages ("spec.model.layers",
// "nodePools[1].gpusPerNode"). A Field for a missing key is "absent".
class Field {
 public:
  Field(YAML::Node node, std::string path) : node_(std::move(node)), path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  const YAML::Node& node() const { return node_; }

  // Present: given and not null (JSON null and an empty YAML value count as
  // not given, as the API server and kubectl treat them).
  bool present() const;
  bool is_map() const;
  bool is_list() const;
  bool is_scalar() const;

  // The value under `key` of a map (absent when the key is missing or this
  // is not a map), and the elements and entries of a list and a map.
  Field Get(std::string_view key) const;
  std::vector<Field> Elements() const;
  std::vector<std::pair<std::string, Field>> Entries() const;

  // How the value shows after "got": numbers as written, other scalars
  // quoted, "a map", "a list", "null".
  std::string Describe() const;

  // "<path>: <what>" and "<path>: <what>, got <value>".
  Status Error(std::string_view what) const;
  Status ErrorGot(std::string_view what) const;

  // Must be a map whose keys are all in `allowed` (no duplicates, no
  // non-string keys); an unknown key is reported with the nearest allowed one.
  Status CheckMap(std::initializer_list<std::string_view> allowed) const;
  Status CheckMap(const std::vector<std::string_view>& allowed) const;
  // Must be a list of at most `max_entries` elements.
  Status CheckList(std::size_t max_entries = SIZE_MAX) const;

  // Scalars. The bounds are inclusive and are stated in the message.
  // At most `max_chars` characters (the CRD's maxLength: UTF-8 sequences,
  // each stray byte one), or an error saying so.
  StatusOr<std::string> String(std::size_t max_chars = SIZE_MAX) const;
  StatusOr<std::string> NonEmptyString(std::size_t max_chars = SIZE_MAX) const;
  // A name printed in plans and messages (a pool, a GPU type): a non-empty
  // string without control characters or leading or trailing spaces.
  StatusOr<std::string> Name(std::size_t max_chars = SIZE_MAX) const;
  StatusOr<bool> Bool() const;
  StatusOr<int64_t> Integer(int64_t min, int64_t max) const;
  StatusOr<int> Int(int min, int max) const;
  StatusOr<double> Number() const;  // finite
  StatusOr<double> Number(double min, double max) const;
  StatusOr<double> Count(double min, double max) const;  // "6.7B", 6.7e9
  StatusOr<double> DurationSeconds() const;              // "72h", 3600
  // One of `names` (case-insensitive); returns the index into `names`.
  StatusOr<std::size_t> OneOf(std::initializer_list<std::string_view> names) const;

 private:
  YAML::Node node_;
  std::string path_;
};

// Parses a whole document. Oversized input is ResourceExhausted; malformed
// YAML names yaml-cpp's line and column; an empty document and a stream of
// several documents are errors. `what` names the document kind for messages
// ("TrainJob", "inventory").
StatusOr<YAML::Node> Load(const std::string& document, std::string_view what);

// Runs `parse` and turns any exception that escapes it (yaml-cpp's, or
// bad_alloc) into an error, so that public parsers never throw.
template <typename T, typename F>
StatusOr<T> Guard(std::string_view what, F&& parse) {
  try {
    return parse();
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(std::string(what) + ": " + e.what());
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string(what) + ": cannot be read: " + e.what());
  }
}

// The allowed key nearest to `key` (edit distance with transpositions, case
// ignored), or "" when none is close enough to be a likely typo.
std::string NearestName(std::string_view key, const std::vector<std::string_view>& allowed);

// Formats a number for messages: integers without a decimal point.
std::string FormatNumber(double value);

// A number in [min, max], min > 0: "must be a positive number" for what is
// not one (NaN, text, <= 0), else the bound it passes. A lower bound keeps
// tiny rates and bandwidths from making a step take "forever" (1e-300 GB/s
// printed NaN plans and looped an SVG axis forever).
StatusOr<double> NumberInRange(const Field& f, double min, double max);

}  // namespace pacer::planner::yaml_fields

#endif  // PACER_PLANNER_SRC_YAML_FIELDS_H_
