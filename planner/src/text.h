// Internal to the planner: small text helpers shared by the parsers and the
// catalog, so that names compare and user text is quoted the same way
// everywhere. Thread-safety: pure functions.
#ifndef PACER_PLANNER_SRC_TEXT_H_
#define PACER_PLANNER_SRC_TEXT_H_

#include <string>
#include <string_view>

namespace pacer::planner::text {

// User text quoted for an error message: escapes quotes, backslashes and
// control characters, and shortens it to 64 characters so that a huge value
// cannot flood a log line.
std::string QuoteForMessage(std::string_view text);
inline constexpr std::size_t kMaxQuotedChars = 64;

// Whether `name` can stand in a table row and a one-line message as it is:
// not empty, no control characters (a line feed or an escape sequence
// written as a YAML/JSON escape split the plan's lines and reached the
// terminal), no leading or trailing spaces (" " printed as no name).
bool IsPrintableName(std::string_view name);

// Case-insensitive equality for names (GPU types, enum values), and the key
// to use for sets of such names.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);
std::string Lowercase(std::string_view s);

}  // namespace pacer::planner::text

#endif  // PACER_PLANNER_SRC_TEXT_H_
