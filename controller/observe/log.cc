#include "observe/log.h"

#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <array>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cmath>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <shared_mutex>
#include <utility>

namespace pacer::controller {
namespace {

// UTC with milliseconds, the same in both formats. The formats put the level
// into the payload themselves rather than use spdlog's level names, so the
// names are ours ("warning", not whatever a spdlog version calls it).
constexpr const char* kTextPattern = "%Y-%m-%dT%H:%M:%S.%eZ %v";
// The payload is a JSON object without its opening brace.
constexpr const char* kJsonPattern = "{\"ts\":\"%Y-%m-%dT%H:%M:%S.%eZ\",%v";

constexpr std::string_view kRedacted = "[redacted]";
constexpr std::array<std::string_view, 4> kSecretKeyWords = {"token", "password", "secret",
                                                             "authorization"};

// Hands each formatted line to a function (tests, or a caller's own
// pipeline). base_sink's mutex serializes the calls.
class FunctionSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit FunctionSink(std::function<void(std::string_view)> fn) : fn_(std::move(fn)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    fn_(std::string_view(line.data(), line.size()));
  }
  void flush_() override {}

 private:
  std::function<void(std::string_view)> fn_;
};

// Emit holds mu shared while it formats and writes a line; the setters hold
// it exclusively, so once a setter returns no line goes to the old sink or in
// the old format (a test may then destroy what its sink wrote to).
struct LogState {
  std::shared_mutex mu;
  std::shared_ptr<spdlog::logger> logger;      // guarded by mu
  LogFormat format = LogFormat::kText;         // guarded by mu
  std::function<void(std::string_view)> sink;  // guarded by mu
  std::atomic<int> level{static_cast<int>(LogLevel::kInfo)};
};

// Rebuilds the logger from state.format and state.sink. Requires state.mu
// held exclusively.
void RebuildLocked(LogState& state) {
  spdlog::sink_ptr sink;
  const bool to_function = static_cast<bool>(state.sink);
  if (to_function) {
    sink = std::make_shared<FunctionSink>(state.sink);
  } else {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  }
  const char* pattern = state.format == LogFormat::kJson ? kJsonPattern : kTextPattern;
  // A function gets the line without its newline; stderr needs one.
  sink->set_formatter(std::make_unique<spdlog::pattern_formatter>(
      pattern, spdlog::pattern_time_type::utc, to_function ? "" : "\n"));
  // Not registered in spdlog's global registry: nothing else can reach or
  // replace it, and no name can clash with another library's logger.
  auto logger = std::make_shared<spdlog::logger>("pacer", std::move(sink));
  logger->set_level(spdlog::level::trace);  // filtering happens before formatting, in Emit
  state.logger = std::move(logger);
}

// Never destroyed: objects logging from their destructors at exit still find
// a working logger. Reachable through the static, so not a leak to LSan.
LogState& State() {
  static LogState* state = [] {
    auto* s = new LogState();
    std::unique_lock<std::shared_mutex> lock(s->mu);
    RebuildLocked(*s);
    return s;
  }();
  return *state;
}

spdlog::level::level_enum ToSpdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarning:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
  }
  return spdlog::level::err;
}

bool IsSecretKey(std::string_view key) {
  std::string lower(key);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (std::string_view word : kSecretKeyWords) {
    if (lower.find(word) != std::string::npos) return true;
  }
  return false;
}

// Keys are identifiers: a key with a space or '=' would make the line
// ambiguous, so anything outside [A-Za-z0-9_.-/] becomes '_'.
std::string CleanKey(std::string_view key) {
  if (key.empty()) return "_";
  std::string out(key);
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (!std::isalnum(u) && c != '_' && c != '.' && c != '-' && c != '/') c = '_';
  }
  return out;
}

bool IsControl(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}

bool NeedsQuotes(std::string_view value) {
  if (value.empty()) return true;
  for (char c : value) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || IsControl(c)) return true;
  }
  return false;
}

void AppendQuoted(std::string& out, std::string_view value) {
  out.push_back('"');
  for (char c : value) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (IsControl(c)) {
          static constexpr char kHex[] = "0123456789abcdef";
          const auto u = static_cast<unsigned char>(c);
          out += "\\x";
          out.push_back(kHex[u >> 4]);
          out.push_back(kHex[u & 0xf]);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

void AppendValue(std::string& out, std::string_view value) {
  if (NeedsQuotes(value)) {
    AppendQuoted(out, value);
  } else {
    out += value;
  }
}

void AppendTextFields(std::string& out, std::span<const LogField> fields) {
  for (const LogField& f : fields) {
    out.push_back(' ');
    out += CleanKey(f.key);
    out.push_back('=');
    AppendValue(out, IsSecretKey(f.key) ? kRedacted : std::string_view(f.value));
  }
}

std::string TextPayload(LogLevel level, std::string_view message,
                        std::span<const LogField> object_fields, std::span<const LogField> fields) {
  std::string out = "level=";
  out += LogLevelName(level);
  out += " msg=";
  AppendQuoted(out, message);  // always quoted, as klog does
  AppendTextFields(out, object_fields);
  AppendTextFields(out, fields);
  return out;
}

void AddJsonFields(nlohmann::ordered_json& obj, std::span<const LogField> fields) {
  for (const LogField& f : fields) {
    std::string key = CleanKey(f.key);
    if (key == "ts" || key == "level" || key == "msg") key.insert(0, "_");
    if (IsSecretKey(f.key)) {
      obj[key] = kRedacted;
      continue;
    }
    switch (f.kind) {
      case LogField::Kind::kBool:
        obj[key] = f.value == "true";
        break;
      case LogField::Kind::kNumber: {
        // nan and inf are no JSON numbers: they stay strings.
        nlohmann::json number = nlohmann::json::parse(f.value, nullptr, false);
        if (number.is_number()) {
          obj[key] = std::move(number);
        } else {
          obj[key] = f.value;
        }
        break;
      }
      case LogField::Kind::kString:
        obj[key] = f.value;
        break;
    }
  }
}

std::string JsonPayload(LogLevel level, std::string_view message,
                        std::span<const LogField> object_fields, std::span<const LogField> fields) {
  nlohmann::ordered_json obj = nlohmann::ordered_json::object();
  obj["level"] = LogLevelName(level);
  obj["msg"] = message;
  AddJsonFields(obj, object_fields);
  AddJsonFields(obj, fields);
  // Replace, not throw, on invalid UTF-8: a log line must never fail.
  std::string out = obj.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return out.substr(1);  // the pattern supplies the '{' before "ts"
}

}  // namespace

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "error";
}

LogField::LogField(std::string_view k, double v) : key(k), kind(Kind::kNumber) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  value.assign(buf, ec == std::errc() ? end : buf);
}

namespace log_internal {

void Emit(LogLevel level, std::string_view message, std::span<const LogField> object_fields,
          std::span<const LogField> fields) {
  if (!LogEnabled(level)) return;
  LogState& state = State();
  std::shared_lock<std::shared_mutex> lock(state.mu);
  const std::string payload = state.format == LogFormat::kJson
                                  ? JsonPayload(level, message, object_fields, fields)
                                  : TextPayload(level, message, object_fields, fields);
  state.logger->log(ToSpdlog(level), spdlog::string_view_t(payload.data(), payload.size()));
}

}  // namespace log_internal

void Log(LogLevel level, std::string_view message, std::initializer_list<LogField> fields) {
  log_internal::Emit(level, message, {}, std::span<const LogField>(fields.begin(), fields.size()));
}

ObjectLogger::ObjectLogger(std::string kind, std::string key)
    : object_fields_{LogField("kind", kind), LogField("object", key)} {}

void ObjectLogger::Log(LogLevel level, std::string_view message,
                       std::initializer_list<LogField> fields) const {
  log_internal::Emit(level, message, object_fields_,
                     std::span<const LogField>(fields.begin(), fields.size()));
}
void ObjectLogger::Debug(std::string_view message, std::initializer_list<LogField> fields) const {
  Log(LogLevel::kDebug, message, fields);
}
void ObjectLogger::Info(std::string_view message, std::initializer_list<LogField> fields) const {
  Log(LogLevel::kInfo, message, fields);
}
void ObjectLogger::Warning(std::string_view message, std::initializer_list<LogField> fields) const {
  Log(LogLevel::kWarning, message, fields);
}
void ObjectLogger::Error(std::string_view message, std::initializer_list<LogField> fields) const {
  Log(LogLevel::kError, message, fields);
}

void SetLogLevel(LogLevel level) {
  State().level.store(static_cast<int>(level), std::memory_order_relaxed);
}

LogLevel GetLogLevel() {
  return static_cast<LogLevel>(State().level.load(std::memory_order_relaxed));
}

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= static_cast<int>(GetLogLevel());
}

void SetLogFormat(LogFormat format) {
  LogState& state = State();
  std::unique_lock<std::shared_mutex> lock(state.mu);
  state.format = format;
  RebuildLocked(state);
}

void SetLogSink(std::function<void(std::string_view line)> sink) {
  LogState& state = State();
  std::unique_lock<std::shared_mutex> lock(state.mu);
  state.sink = std::move(sink);
  RebuildLocked(state);
}

}  // namespace pacer::controller
