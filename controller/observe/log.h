// Structured logs for the controller, one event per line, in the Kubernetes
// style (klog's key=value text, or one JSON object per line for log stacks
// such as Loki or Elasticsearch):
//
//   2026-11-22T10:00:00.123Z level=info msg="planned job" kind=TrainJob object=ns/name gpus=16
//   {"ts":"2026-11-22T10:00:00.123Z","level":"info","msg":"planned job","kind":"TrainJob",...}
//
// Timestamps are UTC with milliseconds. Levels are debug, info, warning and
// error; lines below the level set by SetLogLevel are dropped before their
// fields are formatted.
//
// Text format: the message is always quoted; a value is quoted when it is
// empty or contains a space, '"', '=', '\' or a control character, and inside
// quotes '\' '"' newline, CR and tab are escaped as \\ \" \n \r \t (other
// control characters as \xHH), so every line is one line and parses back into
// its key=value pairs. Keys are reduced to [A-Za-z0-9_.-/] (anything else
// becomes '_'). JSON format: numbers and booleans stay numbers and booleans;
// invalid UTF-8 is replaced by U+FFFD; a field named ts, level or msg is
// written as _ts, _level, _msg so it cannot shadow the line's own.
//
// Defence in depth against leaking credentials: a field whose key contains
// "token", "password", "secret" or "authorization" (any case) is always
// written as "[redacted]", whatever its value. Never put a credential in the
// message itself.
//
// Built on spdlog rather than by hand for its thread-safe sinks, level
// filtering and cheap timestamp formatting. Log lines go to stderr unless a
// sink is set with SetLogSink.
//
// Thread-safety: every function here may be called from any thread at any
// time; lines from concurrent calls never interleave. SetLogLevel,
// SetLogFormat and SetLogSink take effect for lines logged after they return.
#ifndef PACER_CONTROLLER_OBSERVE_LOG_H_
#define PACER_CONTROLLER_OBSERVE_LOG_H_

#include <concepts>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "pacer/status.h"

namespace pacer::controller {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

enum class LogFormat {
  kText,  // klog-style: <ts> level=<level> msg="..." key=value ...
  kJson,  // one JSON object per line: {"ts":...,"level":...,"msg":...,key:value,...}
};

// "debug", "info", "warning", "error".
std::string_view LogLevelName(LogLevel level);

// One key=value pair of a log line. Build it from a key and a string,
// number, bool or Status: {"gpus", 16}, {"slack_seconds", 12.5},
// {"leader", true}, {"error", status}.
struct LogField {
  // How the value is written in the JSON format (the text format is the same
  // for all kinds).
  enum class Kind { kString, kNumber, kBool };

  LogField(std::string_view k, std::string_view v) : key(k), value(v) {}
  LogField(std::string_view k, const char* v) : key(k), value(v == nullptr ? "" : v) {}
  LogField(std::string_view k, const std::string& v) : key(k), value(v) {}
  LogField(std::string_view k, bool v) : key(k), value(v ? "true" : "false"), kind(Kind::kBool) {}
  template <std::integral T>
  requires(!std::same_as<T, bool> && !std::same_as<T, char>) LogField(std::string_view k, T v)
      : key(k), value(std::to_string(v)), kind(Kind::kNumber) {}
  LogField(std::string_view k, double v);  // shortest form that reads back exactly
  LogField(std::string_view k, float v) : LogField(k, static_cast<double>(v)) {}
  // "OK" or "<CODE>: <message>".
  LogField(std::string_view k, const Status& status) : key(k), value(status.ToString()) {}

  std::string key;
  std::string value;
  Kind kind = Kind::kString;
};

// Writes one line at `level` if the level is enabled.
void Log(LogLevel level, std::string_view message, std::initializer_list<LogField> fields = {});

// Logs about one Kubernetes object: every line carries kind=<kind> and
// object=<namespace>/<name> (the key the work queue uses) before its own
// fields, so `grep object=ns/name` finds the object's whole story.
// Thread-safety: immutable after construction; use it from any thread.
class ObjectLogger {
 public:
  ObjectLogger(std::string kind, std::string key);

  void Debug(std::string_view message, std::initializer_list<LogField> fields = {}) const;
  void Info(std::string_view message, std::initializer_list<LogField> fields = {}) const;
  void Warning(std::string_view message, std::initializer_list<LogField> fields = {}) const;
  void Error(std::string_view message, std::initializer_list<LogField> fields = {}) const;
  void Log(LogLevel level, std::string_view message,
           std::initializer_list<LogField> fields = {}) const;

  const std::string& kind() const { return object_fields_[0].value; }
  const std::string& key() const { return object_fields_[1].value; }

 private:
  LogField object_fields_[2];
};

// Lines below `level` are dropped. Default kInfo.
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Whether a line at `level` would be written (to skip costly field building).
bool LogEnabled(LogLevel level);

// Default kText.
void SetLogFormat(LogFormat format);

// Sends every line (without its trailing newline) to `sink` instead of
// stderr; an empty function restores stderr. `sink` is called from the
// logging thread, one line at a time (calls are serialized), and must neither
// log nor call the setters. Once SetLogSink returns, the previous sink is
// never called again.
void SetLogSink(std::function<void(std::string_view line)> sink);

namespace log_internal {
// Writes `object_fields` then `fields`; what Log and ObjectLogger share.
void Emit(LogLevel level, std::string_view message, std::span<const LogField> object_fields,
          std::span<const LogField> fields);
}  // namespace log_internal

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_OBSERVE_LOG_H_
