// Small text helpers every reader of line- and comma-separated input needs:
// trace and throughput CSVs, sweep's --gpus list, scraped Prometheus text,
// CUDA_VISIBLE_DEVICES and /proc files. One copy, so that blanks and empty
// pieces are treated the same everywhere.
// Thread-safety: pure functions; the views point into the caller's text.
#ifndef PACER_STRINGS_H_
#define PACER_STRINGS_H_

#include <string_view>
#include <vector>

namespace pacer {

// `text` without leading blanks (space, tab) and without trailing blanks or
// carriage returns (the end of a CRLF line).
std::string_view TrimBlanks(std::string_view text);

// The pieces of `text` between separators, as they are (not trimmed):
// "a,,b" -> {"a", "", "b"}, "" -> {""}, "a," -> {"a", ""}.
std::vector<std::string_view> SplitOn(std::string_view text, char separator);

}  // namespace pacer

#endif  // PACER_STRINGS_H_
