// The controller's structured logs: every text line parses back into exactly
// the fields that were logged (whatever the values contain), ObjectLogger
// lines name their object, token-like keys are redacted, the JSON format is
// valid JSON with typed values, and levels filter.
#include "observe/log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace pacer::controller {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

// A text line split back into its parts, the way a log processor reads it.
struct ParsedLine {
  std::string timestamp;
  std::vector<std::pair<std::string, std::string>> fields;  // in line order, incl. level, msg

  std::optional<std::string> Get(const std::string& key) const {
    for (const auto& [k, v] : fields) {
      if (k == key) return v;
    }
    return std::nullopt;
  }
};

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Parses "<ts> k=v k="quoted \"v\"" ..."; nullopt when the line is malformed.
std::optional<ParsedLine> ParseTextLine(const std::string& line) {
  ParsedLine parsed;
  size_t pos = line.find(' ');
  if (pos == std::string::npos) return std::nullopt;
  parsed.timestamp = line.substr(0, pos);
  while (pos < line.size()) {
    if (line[pos] != ' ') return std::nullopt;
    ++pos;
    const size_t eq = line.find('=', pos);
    if (eq == std::string::npos || eq == pos) return std::nullopt;
    std::string key = line.substr(pos, eq - pos);
    if (key.find_first_of(" \"") != std::string::npos) return std::nullopt;
    pos = eq + 1;
    std::string value;
    if (pos < line.size() && line[pos] == '"') {
      ++pos;
      bool closed = false;
      while (pos < line.size()) {
        const char c = line[pos++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c != '\\') {
          value.push_back(c);
          continue;
        }
        if (pos >= line.size()) return std::nullopt;
        const char e = line[pos++];
        switch (e) {
          case 'n':
            value.push_back('\n');
            break;
          case 'r':
            value.push_back('\r');
            break;
          case 't':
            value.push_back('\t');
            break;
          case '"':
          case '\\':
            value.push_back(e);
            break;
          case 'x': {
            if (pos + 2 > line.size()) return std::nullopt;
            const int hi = HexDigit(line[pos]);
            const int lo = HexDigit(line[pos + 1]);
            if (hi < 0 || lo < 0) return std::nullopt;
            value.push_back(static_cast<char>(hi * 16 + lo));
            pos += 2;
            break;
          }
          default:
            return std::nullopt;
        }
      }
      if (!closed) return std::nullopt;
    } else {
      const size_t end = std::min(line.find(' ', pos), line.size());
      value = line.substr(pos, end - pos);
      if (value.find_first_of("\"=") != std::string::npos) return std::nullopt;
      pos = end;
    }
    parsed.fields.emplace_back(std::move(key), std::move(value));
  }
  return parsed;
}

// Whether `ts` is "YYYY-MM-DDTHH:MM:SS.mmmZ". (No std::regex: g++ 12 warns
// inside it under the sanitizers.)
bool IsUtcMillisTimestamp(const std::string& ts) {
  const std::string shape = "0000-00-00T00:00:00.000Z";
  if (ts.size() != shape.size()) return false;
  for (size_t i = 0; i < shape.size(); ++i) {
    const bool ok = shape[i] == '0' ? (ts[i] >= '0' && ts[i] <= '9') : ts[i] == shape[i];
    if (!ok) return false;
  }
  return true;
}

// Collects lines in memory; restores the defaults afterwards.
class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogLevel(LogLevel::kInfo);
    SetLogFormat(LogFormat::kText);
    SetLogSink([this](std::string_view line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.emplace_back(line);
    });
  }
  void TearDown() override {
    SetLogSink({});
    SetLogFormat(LogFormat::kText);
    SetLogLevel(LogLevel::kInfo);
  }

  std::vector<std::string> Lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

  // The single line logged so far, parsed; fails the test otherwise.
  ParsedLine OnlyLine() {
    const std::vector<std::string> lines = Lines();
    EXPECT_EQ(lines.size(), 1u);
    if (lines.empty()) return {};
    std::optional<ParsedLine> parsed = ParseTextLine(lines.front());
    EXPECT_TRUE(parsed.has_value()) << "does not parse: " << lines.front();
    return parsed.value_or(ParsedLine{});
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST_F(LogTest, TextLineParsesBackIntoTheLoggedFields) {
  const std::vector<std::pair<std::string, std::string>> tricky = {
      {"plain", "value"},
      {"spaces", "two words here"},
      {"quotes", "say \"hi\""},
      {"equals", "a=b"},
      {"newline", "line1\nline2\r\n"},
      {"tab", "a\tb"},
      {"backslash", "C:\\path\\"},
      {"empty", ""},
      {"control", std::string("bell\x01\x7f", 6)},
      {"utf8", "Zürich ✓"},
      {"everything", "k=\"v w\"\\\n="},
  };
  Log(LogLevel::kInfo, "a \"quoted\" message\nwith a newline",
      {{tricky[0].first, tricky[0].second},
       {tricky[1].first, tricky[1].second},
       {tricky[2].first, tricky[2].second},
       {tricky[3].first, tricky[3].second},
       {tricky[4].first, tricky[4].second},
       {tricky[5].first, tricky[5].second},
       {tricky[6].first, tricky[6].second},
       {tricky[7].first, tricky[7].second},
       {tricky[8].first, tricky[8].second},
       {tricky[9].first, tricky[9].second},
       {tricky[10].first, tricky[10].second}});

  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].find('\n'), std::string::npos) << "one event, one line";
  EXPECT_EQ(lines[0].find('\r'), std::string::npos);
  const ParsedLine parsed = OnlyLine();
  ASSERT_GE(parsed.fields.size(), 2u + tricky.size());
  EXPECT_THAT(parsed.fields[0], Pair("level", "info"));
  EXPECT_THAT(parsed.fields[1], Pair("msg", "a \"quoted\" message\nwith a newline"));
  for (size_t i = 0; i < tricky.size(); ++i) {
    EXPECT_EQ(parsed.fields[2 + i], tricky[i]) << "field " << tricky[i].first;
  }
  EXPECT_EQ(parsed.fields.size(), 2u + tricky.size());
}

TEST_F(LogTest, TimestampIsUtcWithMillisecondsAndCurrent) {
  Log(LogLevel::kInfo, "tick");
  const ParsedLine parsed = OnlyLine();
  const std::string& ts = parsed.timestamp;
  ASSERT_TRUE(IsUtcMillisTimestamp(ts)) << ts;
  std::tm tm{};
  tm.tm_year = std::stoi(ts.substr(0, 4)) - 1900;
  tm.tm_mon = std::stoi(ts.substr(5, 2)) - 1;
  tm.tm_mday = std::stoi(ts.substr(8, 2));
  tm.tm_hour = std::stoi(ts.substr(11, 2));
  tm.tm_min = std::stoi(ts.substr(14, 2));
  tm.tm_sec = std::stoi(ts.substr(17, 2));
  const std::time_t logged = timegm(&tm);
  const std::time_t now = std::time(nullptr);
  // UTC, not local time: within a few minutes of now even on a loaded machine.
  EXPECT_LE(std::abs(static_cast<long>(now - logged)), 300L) << parsed.timestamp;
}

TEST_F(LogTest, NumbersBoolsAndStatusesAreWrittenReadably) {
  Log(LogLevel::kInfo, "values",
      {{"gpus", 16},
       {"bytes", uint64_t{1} << 40},
       {"negative", -3L},
       {"slack_seconds", 12.5},
       {"tenth", 0.1},
       {"leader", true},
       {"synced", false},
       {"error", UnavailableError("apiserver answered 503")},
       {"ok", Status::Ok()}});
  const ParsedLine parsed = OnlyLine();
  EXPECT_EQ(parsed.Get("gpus"), "16");
  EXPECT_EQ(parsed.Get("bytes"), "1099511627776");
  EXPECT_EQ(parsed.Get("negative"), "-3");
  EXPECT_EQ(parsed.Get("slack_seconds"), "12.5");
  EXPECT_EQ(std::stod(parsed.Get("tenth").value_or("0")), 0.1) << "shortest exact form";
  EXPECT_EQ(parsed.Get("leader"), "true");
  EXPECT_EQ(parsed.Get("synced"), "false");
  EXPECT_EQ(parsed.Get("error"), "UNAVAILABLE: apiserver answered 503");
  EXPECT_EQ(parsed.Get("ok"), "OK");
}

TEST_F(LogTest, KeysThatWouldBreakTheLineAreCleaned) {
  Log(LogLevel::kInfo, "keys", {{"bad key=x\"", "v"}, {"", "w"}, {"good.key-1/x_y", "z"}});
  const ParsedLine parsed = OnlyLine();
  EXPECT_EQ(parsed.Get("bad_key_x_"), "v");
  EXPECT_EQ(parsed.Get("_"), "w");
  EXPECT_EQ(parsed.Get("good.key-1/x_y"), "z");
}

TEST_F(LogTest, ObjectLoggerNamesKindAndObjectOnEveryLine) {
  SetLogLevel(LogLevel::kDebug);
  const ObjectLogger log("TrainJob", "research/llama-70b");
  EXPECT_EQ(log.kind(), "TrainJob");
  EXPECT_EQ(log.key(), "research/llama-70b");
  log.Debug("observed", {{"generation", 3}});
  log.Info("planned job", {{"gpus", 16}});
  log.Warning("deadline at risk", {{"slack_seconds", -60.0}});
  log.Error("launch failed", {{"error", InternalError("boom")}});
  log.Log(LogLevel::kInfo, "direct");

  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 5u);
  const std::vector<std::pair<std::string, std::string>> expected_own = {
      {"generation", "3"},
      {"gpus", "16"},
      {"slack_seconds", "-60"},
      {"error", "INTERNAL: boom"},
  };
  const char* levels[] = {"debug", "info", "warning", "error", "info"};
  for (size_t i = 0; i < lines.size(); ++i) {
    std::optional<ParsedLine> parsed = ParseTextLine(lines[i]);
    ASSERT_TRUE(parsed.has_value()) << lines[i];
    ASSERT_GE(parsed->fields.size(), 4u) << lines[i];
    EXPECT_THAT(parsed->fields[0], Pair("level", levels[i]));
    EXPECT_THAT(parsed->fields[2], Pair("kind", "TrainJob"));
    EXPECT_THAT(parsed->fields[3], Pair("object", "research/llama-70b"));
    if (i < expected_own.size()) {
      ASSERT_EQ(parsed->fields.size(), 5u) << lines[i];
      EXPECT_EQ(parsed->fields[4], expected_own[i]);
    } else {
      EXPECT_EQ(parsed->fields.size(), 4u) << lines[i];
    }
  }
}

TEST_F(LogTest, TokenLikeKeysAreRedactedInTextAndJson) {
  const std::string secret = "eyJhbGciOiJSUzI1NiJ9.secret-bearer-value";
  for (LogFormat format : {LogFormat::kText, LogFormat::kJson}) {
    SetLogFormat(format);
    Log(LogLevel::kInfo, "connecting",
        {{"token", secret},
         {"BearerToken", secret},
         {"db_password", secret},
         {"client-Secret", secret},
         {"Authorization", "Bearer " + secret},
         {"server", "https://10.0.0.1:6443"}});
  }
  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 2u);
  for (const std::string& line : lines) {
    EXPECT_THAT(line, Not(HasSubstr("secret-bearer-value")));
  }
  const ParsedLine text = ParseTextLine(lines[0]).value_or(ParsedLine{});
  for (const char* key :
       {"token", "BearerToken", "db_password", "client-Secret", "Authorization"}) {
    EXPECT_EQ(text.Get(key), "[redacted]") << key;
  }
  EXPECT_EQ(text.Get("server"), "https://10.0.0.1:6443") << "other keys are left alone";

  const auto json = nlohmann::json::parse(lines[1].substr(0), nullptr, false);
  ASSERT_TRUE(json.is_object()) << lines[1];
  for (const char* key :
       {"token", "BearerToken", "db_password", "client-Secret", "Authorization"}) {
    EXPECT_EQ(json.value(key, ""), "[redacted]") << key;
  }
  EXPECT_EQ(json.value("server", ""), "https://10.0.0.1:6443");
}

TEST_F(LogTest, JsonFormatIsOneValidObjectPerLineWithTypedFields) {
  SetLogFormat(LogFormat::kJson);
  const ObjectLogger log("TrainJob", "ns/job");
  log.Warning("deadline \"at risk\"\n", {{"gpus", 16},
                                         {"slack_seconds", -12.25},
                                         {"leader", true},
                                         {"note", "a=b \"c\""},
                                         {"msg", "shadow"},
                                         {"nan", std::nan("")},
                                         {"bad_utf8", std::string("\xff\xfe ok")}});
  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].find('\n'), std::string::npos);
  const auto json = nlohmann::ordered_json::parse(lines[0], nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << lines[0];
  ASSERT_TRUE(json.is_object());
  std::vector<std::string> keys;
  for (const auto& item : json.items()) keys.push_back(item.key());
  EXPECT_THAT(keys, ElementsAre("ts", "level", "msg", "kind", "object", "gpus", "slack_seconds",
                                "leader", "note", "_msg", "nan", "bad_utf8"));
  EXPECT_TRUE(IsUtcMillisTimestamp(json["ts"].get<std::string>())) << json["ts"];
  EXPECT_EQ(json["level"], "warning");
  EXPECT_EQ(json["msg"], "deadline \"at risk\"\n");
  EXPECT_EQ(json["kind"], "TrainJob");
  EXPECT_EQ(json["object"], "ns/job");
  EXPECT_TRUE(json["gpus"].is_number_integer());
  EXPECT_EQ(json["gpus"], 16);
  EXPECT_TRUE(json["slack_seconds"].is_number_float());
  EXPECT_EQ(json["slack_seconds"], -12.25);
  EXPECT_EQ(json["leader"], true);
  EXPECT_EQ(json["note"], "a=b \"c\"");
  EXPECT_EQ(json["_msg"], "shadow") << "a field cannot replace the message";
  EXPECT_TRUE(json["nan"].is_string()) << "NaN is no JSON number";
  EXPECT_THAT(json["bad_utf8"].get<std::string>(), HasSubstr(" ok"));
}

TEST_F(LogTest, LevelFiltersLowerLevels) {
  auto log_all = [] {
    Log(LogLevel::kDebug, "d");
    Log(LogLevel::kInfo, "i");
    Log(LogLevel::kWarning, "w");
    Log(LogLevel::kError, "e");
  };
  auto messages = [this] {
    std::vector<std::string> out;
    for (const std::string& line : Lines()) {
      out.push_back(ParseTextLine(line).value_or(ParsedLine{}).Get("msg").value_or("?"));
    }
    return out;
  };

  log_all();  // default: info
  EXPECT_THAT(messages(), ElementsAre("i", "w", "e"));
  EXPECT_FALSE(LogEnabled(LogLevel::kDebug));

  SetLogLevel(LogLevel::kWarning);
  EXPECT_EQ(GetLogLevel(), LogLevel::kWarning);
  log_all();
  EXPECT_THAT(messages(), ElementsAre("i", "w", "e", "w", "e"));

  SetLogLevel(LogLevel::kError);
  log_all();
  EXPECT_THAT(messages(), ElementsAre("i", "w", "e", "w", "e", "e"));

  SetLogLevel(LogLevel::kDebug);
  EXPECT_TRUE(LogEnabled(LogLevel::kDebug));
  log_all();
  EXPECT_THAT(messages(), ElementsAre("i", "w", "e", "w", "e", "e", "d", "i", "w", "e"));
}

TEST_F(LogTest, ReplacedSinkGetsNoMoreLines) {
  Log(LogLevel::kInfo, "first");
  std::vector<std::string> second;
  SetLogSink([&second](std::string_view line) { second.emplace_back(line); });
  Log(LogLevel::kInfo, "second");
  SetLogSink({});  // `second` must not be written after this returns
  EXPECT_EQ(Lines().size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_THAT(second[0], HasSubstr("msg=\"second\""));
}

TEST_F(LogTest, ConcurrentLinesNeverInterleave) {
  constexpr int kThreads = 4;
  constexpr int kLinesPerThread = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      const ObjectLogger log("TrainJob", "ns/job-" + std::to_string(t));
      for (int i = 0; i < kLinesPerThread; ++i) {
        log.Info("step", {{"thread", t}, {"i", i}, {"text", "some words with = and \"quotes\""}});
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), static_cast<size_t>(kThreads * kLinesPerThread));
  std::vector<int> next(kThreads, 0);
  for (const std::string& line : lines) {
    std::optional<ParsedLine> parsed = ParseTextLine(line);
    ASSERT_TRUE(parsed.has_value()) << line;
    const int t = std::stoi(parsed->Get("thread").value_or("-1"));
    ASSERT_GE(t, 0);
    ASSERT_LT(t, kThreads);
    EXPECT_EQ(parsed->Get("object"), "ns/job-" + std::to_string(t));
    EXPECT_EQ(parsed->Get("text"), "some words with = and \"quotes\"");
    // Each thread's lines arrive in its own order.
    EXPECT_EQ(std::stoi(parsed->Get("i").value_or("-1")), next[t]++);
  }
}

}  // namespace
}  // namespace pacer::controller
