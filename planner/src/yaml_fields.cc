#include "yaml_fields.h"

#include <yaml-cpp/depthguard.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>

#include "pacer/planner/job_parser.h"
#include "pacer/planner/units.h"
#include "text.h"

namespace pacer::planner::yaml_fields {
namespace {

// A decimal number as YAML and JSON write them ("-4", "6.7e9"); rejects YAML's
// ".inf"/".nan", hex and octal, which no Pacer field takes.
bool ParseNumber(std::string_view text, double* out) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return false;
  const char first = text.front() == '-' && text.size() > 1 ? text[1] : text.front();
  if (!(first >= '0' && first <= '9') && first != '.') return false;
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(value)) {
    return false;
  }
  *out = value;
  return true;
}

// Optimal string alignment distance (Levenshtein plus adjacent transpositions),
// so that "globalBatchSzie" is one edit from "globalBatchSize".
std::size_t EditDistance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  const auto lower = [](char c) { return std::tolower(static_cast<unsigned char>(c)); };
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1])) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::string JoinNames(std::initializer_list<std::string_view> names) {
  std::string out;
  for (std::string_view name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

// Records what the event parser saw of one document: whether it had any
// content, or only an empty (null) root and where; where its last scalar
// starts.
class DocumentProbe : public YAML::EventHandler {
 public:
  bool has_content = false;
  std::optional<YAML::Mark> null_mark;
  std::optional<YAML::Mark> last_scalar;

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override {
    if (!null_mark) null_mark = mark;
  }
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { has_content = true; }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    has_content = true;
    last_scalar = mark;
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    has_content = true;
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    has_content = true;
  }
  void OnMapEnd() override {}
};

// Whether `text` from `pos` on holds only blank lines, comments and document
// markers ("---", "..."): an empty trailing document, which is harmless.
bool OnlyMarkersAndComments(const std::string& text, int pos) {
  if (pos < 0) return true;
  std::size_t i = static_cast<std::size_t>(pos);
  if (i > text.size()) return true;
  // Start at the beginning of the line that holds `pos`.
  while (i > 0 && text[i - 1] != '\n') --i;
  while (i < text.size()) {
    std::size_t end = text.find('\n', i);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + i, end - i);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.remove_suffix(1);
    }
    std::string_view body = line;
    while (!body.empty() && (body.front() == ' ' || body.front() == '\t')) body.remove_prefix(1);
    const bool marker = line.substr(0, 3) == "---" || line.substr(0, 3) == "...";
    if (marker) {
      body = line.substr(3);
      while (!body.empty() && (body.front() == ' ' || body.front() == '\t')) body.remove_prefix(1);
    }
    if (!body.empty() && body.front() != '#') return false;
    i = end + 1;
  }
  return true;
}

// yaml-cpp accepts a quoted string left open at the end of the file when a
// line break follows it: the string takes in every line after the quote
// (`image: "trainer:1.0` swallowed the `parallelism:` block after it, which
// then planned without it). Without the trailing line break yaml-cpp refuses
// it ("illegal EOF in scalar"), so parse the document again with its trailing
// blanks cut off; an open string can only be the last scalar (it runs to the
// end).
bool QuoteOpenAtTheEnd(const std::string& document) {
  std::size_t end = document.size();
  while (end > 0 && (document[end - 1] == '\n' || document[end - 1] == '\r' ||
                     document[end - 1] == ' ' || document[end - 1] == '\t')) {
    --end;
  }
  if (end == document.size()) return false;
  try {
    (void)YAML::Load(document.substr(0, end));
    return false;
  } catch (const YAML::Exception& e) {
    return e.msg == YAML::ErrorMsg::EOF_IN_SCALAR;
  }
}

}  // namespace

StatusOr<double> NumberInRange(const Field& f, double min, double max) {
  StatusOr<double> value = f.Number();
  if (!value.ok() || !(*value > 0)) return f.ErrorGot("must be a positive number");
  if (*value < min) return f.ErrorGot("must be at least " + FormatNumber(min));
  if (*value > max) return f.ErrorGot("must be at most " + FormatNumber(max));
  return *value;
}

std::string FormatNumber(double value) {
  char buf[64];
  if (std::fabs(value) < 1e15 && value == std::floor(value)) {
    // Whole numbers as written by hand: 100000 and 1234567 in full, round
    // millions and beyond in exponent form (1e6, 2e12).
    std::snprintf(buf, sizeof buf, "%.0f", value);
    std::string digits = buf;
    std::size_t zeros = 0;
    while (zeros + 1 < digits.size() && digits[digits.size() - 1 - zeros] == '0') ++zeros;
    if (zeros < 6) return digits;
    return digits.substr(0, digits.size() - zeros) + "e" + std::to_string(zeros);
  }
  std::snprintf(buf, sizeof buf, "%.6g", value);
  // "1e+14" -> "1e14", "1e-05" -> "1e-5": how people write them in YAML.
  std::string s = buf;
  const std::size_t e = s.find('e');
  if (e == std::string::npos) return s;
  std::string mantissa = s.substr(0, e);
  std::string exponent = s.substr(e + 1);
  std::string sign;
  if (!exponent.empty() && (exponent[0] == '+' || exponent[0] == '-')) {
    if (exponent[0] == '-') sign = "-";
    exponent.erase(0, 1);
  }
  while (exponent.size() > 1 && exponent[0] == '0') exponent.erase(0, 1);
  return mantissa + "e" + sign + exponent;
}

std::string NearestName(std::string_view key, const std::vector<std::string_view>& allowed) {
  // Long keys are not typos of short field names, and the distance is
  // quadratic: skip them.
  if (key.size() > 64) return "";
  std::string best;
  std::size_t best_distance = SIZE_MAX;
  for (std::string_view name : allowed) {
    const std::size_t distance = EditDistance(key, name);
    if (distance < best_distance) {
      best_distance = distance;
      best = std::string(name);
    }
  }
  const std::size_t limit = std::clamp<std::size_t>(std::max(key.size(), best.size()) / 3, 1, 3);
  return best_distance <= limit ? best : "";
}

bool Field::present() const { return node_.IsDefined() && !node_.IsNull(); }
bool Field::is_map() const { return node_.IsDefined() && node_.IsMap(); }
bool Field::is_list() const { return node_.IsDefined() && node_.IsSequence(); }
bool Field::is_scalar() const { return node_.IsDefined() && node_.IsScalar(); }

Field Field::Get(std::string_view key) const {
  std::string child_path = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  if (is_map()) {
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == key) {
        return Field(it->second, std::move(child_path));
      }
    }
  }
  return Field(YAML::Node(YAML::NodeType::Undefined), std::move(child_path));
}

std::vector<Field> Field::Elements() const {
  std::vector<Field> out;
  if (!is_list()) return out;
  std::size_t i = 0;
  for (auto it = node_.begin(); it != node_.end(); ++it, ++i) {
    out.emplace_back(*it, path_ + "[" + std::to_string(i) + "]");
  }
  return out;
}

std::vector<std::pair<std::string, Field>> Field::Entries() const {
  std::vector<std::pair<std::string, Field>> out;
  if (!is_map()) return out;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : std::string();
    out.emplace_back(key, Field(it->second, path_.empty() ? key : path_ + "." + key));
  }
  return out;
}

std::string Field::Describe() const {
  if (!node_.IsDefined() || node_.IsNull()) return "nothing";
  if (node_.IsMap()) return "a map";
  if (node_.IsSequence()) return "a list";
  const std::string& text = node_.Scalar();
  double unused = 0;
  // Plain numbers read best as written; anything quoted or textual is quoted.
  if (node_.Tag() != "!" && text.size() <= text::kMaxQuotedChars && ParseNumber(text, &unused)) {
    return text;
  }
  return text::QuoteForMessage(text);
}

Status Field::Error(std::string_view what) const {
  return InvalidArgumentError(path_ + ": " + std::string(what));
}

Status Field::ErrorGot(std::string_view what) const {
  return InvalidArgumentError(path_ + ": " + std::string(what) + ", got " + Describe());
}

Status Field::CheckMap(std::initializer_list<std::string_view> allowed) const {
  return CheckMap(std::vector<std::string_view>(allowed));
}

Status Field::CheckMap(const std::vector<std::string_view>& allowed) const {
  if (!is_map()) return ErrorGot("must be a map (an object with fields)");
  std::set<std::string> seen;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (!it->first.IsScalar()) {
      // At the top level the path is empty: say where instead of ": ...".
      return InvalidArgumentError((path_.empty() ? std::string("the document") : path_) +
                                  ": field names must be strings, got " +
                                  Field(it->first, path_).Describe());
    }
    const std::string& key = it->first.Scalar();
    const std::string key_path = path_.empty() ? key : path_ + "." + key;
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string message = key_path + ": unknown field";
      const std::string nearest = NearestName(key, allowed);
      if (!nearest.empty()) {
        message += "; did you mean " + nearest + "?";
      } else {
        message += "; valid fields here: ";
        for (std::size_t i = 0; i < allowed.size(); ++i) {
          if (i > 0) message += ", ";
          message += allowed[i];
        }
      }
      return InvalidArgumentError(message);
    }
    if (!seen.insert(key).second) {
      return InvalidArgumentError(key_path + ": given more than once");
    }
  }
  return Status::Ok();
}

Status Field::CheckList(std::size_t max_entries) const {
  if (!is_list()) return ErrorGot("must be a list");
  if (node_.size() > max_entries) {
    return Error("must have at most " + std::to_string(max_entries) + " entries, got " +
                 std::to_string(node_.size()));
  }
  return Status::Ok();
}

namespace {

// Characters as the CRD's maxLength counts them (the API server's
// utf8.RuneCountInString): a well-formed UTF-8 sequence is one, and so is
// each byte that does not belong to one.
std::size_t CountCharacters(const std::string& value) {
  std::size_t characters = 0;
  for (std::size_t i = 0; i < value.size(); ++characters) {
    const auto lead = static_cast<unsigned char>(value[i]);
    std::size_t length = 1;
    if ((lead >> 5) == 0x6) length = 2;
    if ((lead >> 4) == 0xE) length = 3;
    if ((lead >> 3) == 0x1E) length = 4;
    bool whole = i + length <= value.size();
    for (std::size_t k = 1; whole && k < length; ++k) {
      whole = (static_cast<unsigned char>(value[i + k]) & 0xC0) == 0x80;
    }
    i += whole ? length : 1;
  }
  return characters;
}

// Not ErrorGot: the value quoted back could be 32 KiB.
Status CheckLength(const Field& f, const std::string& value, std::size_t max_chars) {
  const std::size_t characters = CountCharacters(value);
  if (characters <= max_chars) return Status::Ok();
  return f.Error("must be at most " + std::to_string(max_chars) + " characters, got " +
                 std::to_string(characters));
}

}  // namespace

StatusOr<std::string> Field::String(std::size_t max_chars) const {
  if (!is_scalar()) return ErrorGot("must be a string");
  RETURN_IF_ERROR(CheckLength(*this, node_.Scalar(), max_chars));
  return node_.Scalar();
}

StatusOr<std::string> Field::NonEmptyString(std::size_t max_chars) const {
  if (!is_scalar() || node_.Scalar().empty()) return ErrorGot("must be a non-empty string");
  RETURN_IF_ERROR(CheckLength(*this, node_.Scalar(), max_chars));
  return node_.Scalar();
}

StatusOr<std::string> Field::Name(std::size_t max_chars) const {
  if (!is_scalar() || !text::IsPrintableName(node_.Scalar())) {
    return ErrorGot(
        "must be a name: not empty, without control characters or leading or trailing spaces");
  }
  RETURN_IF_ERROR(CheckLength(*this, node_.Scalar(), max_chars));
  return node_.Scalar();
}

StatusOr<bool> Field::Bool() const {
  if (is_scalar()) {
    const std::string& text = node_.Scalar();
    if (text::EqualsIgnoreCase(text, "true")) return true;
    if (text::EqualsIgnoreCase(text, "false")) return false;
  }
  return ErrorGot("must be true or false");
}

StatusOr<int64_t> Field::Integer(int64_t min, int64_t max) const {
  std::string expected;
  if (min == 1) {
    expected = "must be a positive integer";
  } else if (min == 0) {
    expected = "must be a non-negative integer";
  } else {
    expected = "must be an integer";
  }
  double value = 0;
  if (!is_scalar() || !ParseNumber(node_.Scalar(), &value)) return ErrorGot(expected);
  if (value != std::floor(value)) return ErrorGot("must be an integer");
  if (value < static_cast<double>(min)) {
    if (min == 1 || min == 0) return ErrorGot(expected);
    return ErrorGot("must be at least " + FormatNumber(static_cast<double>(min)));
  }
  if (value > static_cast<double>(max)) {
    return ErrorGot("must be at most " + FormatNumber(static_cast<double>(max)));
  }
  return static_cast<int64_t>(value);
}

StatusOr<int> Field::Int(int min, int max) const {
  ASSIGN_OR_RETURN(const int64_t value, Integer(min, max));
  return static_cast<int>(value);
}

StatusOr<double> Field::Number() const {
  double value = 0;
  if (!is_scalar() || !ParseNumber(node_.Scalar(), &value)) return ErrorGot("must be a number");
  return value;
}

StatusOr<double> Field::Number(double min, double max) const {
  const std::string range = "[" + FormatNumber(min) + ", " + FormatNumber(max) + "]";
  double value = 0;
  if (!is_scalar() || !ParseNumber(node_.Scalar(), &value)) {
    return ErrorGot("must be a number in " + range);
  }
  if (value < min || value > max) return ErrorGot("must be in " + range);
  return value;
}

StatusOr<double> Field::Count(double min, double max) const {
  if (!is_scalar()) return ErrorGot("expected a count such as 6.7B, 350M or 2e12");
  StatusOr<double> value = ParseCount(node_.Scalar());
  if (!value.ok()) return Error(value.status().message());
  if (*value < min || *value > max) {
    return ErrorGot("must be in [" + FormatNumber(min) + ", " + FormatNumber(max) + "]");
  }
  return *value;
}

StatusOr<double> Field::DurationSeconds() const {
  if (!is_scalar()) return ErrorGot("expected a duration such as 72h or 1h30m");
  StatusOr<double> value = ParseDurationSeconds(node_.Scalar());
  if (!value.ok()) return Error(value.status().message());
  return *value;
}

StatusOr<std::size_t> Field::OneOf(std::initializer_list<std::string_view> names) const {
  if (is_scalar()) {
    std::size_t i = 0;
    for (std::string_view name : names) {
      if (text::EqualsIgnoreCase(node_.Scalar(), name)) return i;
      ++i;
    }
  }
  return ErrorGot("must be one of " + JoinNames(names));
}

StatusOr<YAML::Node> Load(const std::string& document, std::string_view what) {
  if (document.size() > kMaxDocumentBytes) {
    return ResourceExhaustedError(std::string(what) + " is " + std::to_string(document.size()) +
                                  " bytes; the limit is " + std::to_string(kMaxDocumentBytes) +
                                  " bytes");
  }
  const auto malformed = [&](const YAML::Mark& mark, const std::string& message) {
    std::string where;
    if (mark.line >= 0 && mark.column >= 0) {
      where = " at line " + std::to_string(mark.line + 1) + ", column " +
              std::to_string(mark.column + 1);
    }
    return InvalidArgumentError(std::string(what) + ": malformed YAML" + where + ": " + message);
  };
  YAML::Node root;
  DocumentProbe first;
  DocumentProbe after_first;
  try {
    root = YAML::Load(document);
    // YAML::LoadAll loops forever on some malformed input (a stray ',' after
    // a document, yaml-cpp issue 1040), so look past the first document with
    // the event parser, one document at a time and at most once.
    std::istringstream in(document);
    YAML::Parser parser(in);
    if (parser.HandleNextDocument(first)) parser.HandleNextDocument(after_first);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp says only "bad file" here.
    return malformed(e.mark, "nested too deeply (the parser stops at " + std::to_string(e.depth()) +
                                 " levels of [ ] and { }); a real document nests a few");
  } catch (const YAML::Exception& e) {
    return malformed(e.mark, e.msg);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string(what) + ": cannot be read: " + e.what());
  }
  if (after_first.has_content) {
    return InvalidArgumentError(std::string(what) +
                                ": the file holds more than one YAML document (separated by "
                                "---); give one per file");
  }
  if (after_first.null_mark && !OnlyMarkersAndComments(document, after_first.null_mark->pos)) {
    return malformed(*after_first.null_mark, "unexpected content after the document");
  }
  if (QuoteOpenAtTheEnd(document)) {
    return malformed(first.last_scalar.value_or(YAML::Mark::null_mark()),
                     "a quoted string starts here and is never closed: it runs to the end of the "
                     "file and takes in every line after it; close the quote");
  }
  if (!root.IsDefined() || root.IsNull()) {
    return InvalidArgumentError(std::string(what) + ": the document is empty");
  }
  return root;
}

}  // namespace pacer::planner::yaml_fields
