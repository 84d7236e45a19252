#include "kube/token_source.h"

#include <utility>

#include "observe/log.h"

namespace pacer::controller {

std::string TrimToken(std::string text) {
  const auto is_space = [](char c) { return c == '\n' || c == '\r' || c == ' ' || c == '\t'; };
  while (!text.empty() && is_space(text.back())) text.pop_back();
  size_t start = 0;
  while (start < text.size() && is_space(text[start])) ++start;
  return text.substr(start);
}

BearerTokenSource::BearerTokenSource(std::string token, std::string token_file,
                                     std::chrono::milliseconds refresh_period, ReadFileFn read_file)
    : token_file_(std::move(token_file)),
      refresh_period_(refresh_period),
      read_file_(std::move(read_file)),
      token_(std::move(token)),
      read_at_(std::chrono::steady_clock::now()) {}

bool BearerTokenSource::ReloadLocked() {
  read_at_ = std::chrono::steady_clock::now();
  StatusOr<std::string> text = read_file_(token_file_);
  if (!text.ok()) {
    // The error names the file, never its content.
    Log(LogLevel::kWarning, "cannot re-read the bearer token file; keeping the last token",
        {{"file", token_file_}, {"error", text.status()}});
    return false;
  }
  std::string token = TrimToken(std::move(text).value());
  if (token.empty()) {
    Log(LogLevel::kWarning, "the bearer token file is empty; keeping the last token",
        {{"file", token_file_}});
    return false;
  }
  if (Status usable = CheckBearerToken(token, token_file_); !usable.ok()) {
    Log(LogLevel::kWarning, "the bearer token file holds no usable token; keeping the last token",
        {{"file", token_file_}, {"error", usable}});
    return false;
  }
  if (token == token_) return false;
  token_ = std::move(token);
  Log(LogLevel::kInfo, "bearer token file changed; using the new token", {{"file", token_file_}});
  return true;
}

std::string BearerTokenSource::Token() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!token_file_.empty() && std::chrono::steady_clock::now() - read_at_ >= refresh_period_) {
    ReloadLocked();
  }
  return token_;
}

bool BearerTokenSource::RefreshAfterUnauthorized(std::string_view sent) {
  std::lock_guard<std::mutex> lock(mu_);
  if (token_file_.empty()) return false;
  (void)ReloadLocked();
  return token_ != sent;
}

}  // namespace pacer::controller
