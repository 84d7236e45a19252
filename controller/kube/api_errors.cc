#include "kube/api_errors.h"

#include <nlohmann/json.hpp>

namespace pacer::controller {
namespace {

constexpr std::string_view kGonePrefix = "Gone: ";
constexpr std::string_view kRetryAfterMarker = "(retry after ";

std::string ReasonPhrase(int http_code) {
  switch (http_code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 413:
      return "RequestEntityTooLarge";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "HTTP" + std::to_string(http_code);
  }
}

StatusCode CodeFor(int http_code, const std::string& reason) {
  switch (http_code) {
    case 400:
    case 422:
      return StatusCode::kInvalidArgument;
    case 401:
      return StatusCode::kUnauthenticated;
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    case 409:
      return reason == "AlreadyExists" ? StatusCode::kAlreadyExists : StatusCode::kAborted;
    case 410:
      return StatusCode::kFailedPrecondition;
    case 429:
      return StatusCode::kUnavailable;
    case 408:
    case 504:
      return StatusCode::kDeadlineExceeded;
    default:
      break;
  }
  if (http_code >= 500) return StatusCode::kUnavailable;
  return StatusCode::kInvalidArgument;  // other 4xx: the request is wrong
}

Status Build(std::string_view verb, std::string_view path, int http_code,
             const nlohmann::json& server_status, std::string_view raw_body,
             std::optional<int64_t> retry_after_seconds) {
  std::string reason;
  std::string message;
  if (server_status.is_object()) {
    if (auto it = server_status.find("reason"); it != server_status.end() && it->is_string()) {
      reason = it->get<std::string>();
    }
    if (auto it = server_status.find("message"); it != server_status.end() && it->is_string()) {
      message = it->get<std::string>();
    }
    if (!retry_after_seconds) {
      auto details = server_status.find("details");
      if (details != server_status.end() && details->is_object()) {
        auto it = details->find("retryAfterSeconds");
        if (it != details->end() && it->is_number_integer())
          retry_after_seconds = it->get<int64_t>();
      }
    }
  } else if (!raw_body.empty()) {
    // Not a Status (a proxy's page, say): quote its start.
    message = std::string(raw_body.substr(0, 200));
  }
  if (reason.empty()) reason = ReasonPhrase(http_code);
  const StatusCode code = CodeFor(http_code, reason);
  std::string text;
  if (code == StatusCode::kFailedPrecondition && http_code == 410) text = std::string(kGonePrefix);
  if (!verb.empty()) text += std::string(verb) + " ";
  text += std::string(path) + ": " + std::to_string(http_code) + " " + reason;
  if (!message.empty()) text += ": " + message;
  if (retry_after_seconds && *retry_after_seconds >= 0 && code == StatusCode::kUnavailable) {
    text += " " + std::string(kRetryAfterMarker) + std::to_string(*retry_after_seconds) + " s)";
  }
  return Status(code, std::move(text));
}

}  // namespace

Status StatusFromHttp(std::string_view verb, std::string_view path, int http_code,
                      std::string_view body, std::optional<int64_t> retry_after_seconds) {
  nlohmann::json doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) doc = nullptr;
  return Build(verb, path, http_code, doc, body, retry_after_seconds);
}

Status StatusFromWatchError(std::string_view path, const std::string& status_json) {
  nlohmann::json doc = nlohmann::json::parse(status_json, nullptr, /*allow_exceptions=*/false);
  int code = 500;
  if (doc.is_object()) {
    auto it = doc.find("code");
    if (it != doc.end() && it->is_number_integer()) code = it->get<int>();
  } else {
    doc = nullptr;
  }
  if (code < 400) code = 500;
  return Build("WATCH", path, code, doc, status_json, std::nullopt);
}

std::optional<std::chrono::seconds> RetryAfter(const Status& status) {
  const std::string& m = status.message();
  const size_t at = m.rfind(kRetryAfterMarker);
  if (at == std::string::npos) return std::nullopt;
  const char* start = m.c_str() + at + kRetryAfterMarker.size();
  char* end = nullptr;
  const long long seconds = std::strtoll(start, &end, 10);
  if (end == start || seconds < 0) return std::nullopt;
  // Callers convert it to finer units (the work queue's nanoseconds): a
  // hint of 1e10 s or more overflowed that conversion before their caps.
  return std::chrono::seconds(std::min<long long>(seconds, kMaxRetryAfterSeconds));
}

bool IsGone(const Status& status) {
  return status.code() == StatusCode::kFailedPrecondition &&
         std::string_view(status.message()).substr(0, kGonePrefix.size()) == kGonePrefix;
}

}  // namespace pacer::controller
