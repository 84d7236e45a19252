// How an answer of the Kubernetes API server becomes a Status: the HTTP code
// picks the StatusCode (so callers know whether to retry, see
// pacer/status.h), the message names the verb, the path and the server's own
// message (from its metav1.Status body):
//   GET /api/v1/namespaces/x/pods/y: 404 NotFound: pods "y" not found
//
// Units: Retry-After in whole seconds.
// Thread-safety: pure functions.
#ifndef PACER_CONTROLLER_KUBE_API_ERRORS_H_
#define PACER_CONTROLLER_KUBE_API_ERRORS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pacer/status.h"

namespace pacer::controller {

// `body` is the answer (a metav1.Status when the server wrote one);
// `retry_after_seconds` is the Retry-After header when present (the Status'
// details.retryAfterSeconds is used otherwise). `http_code` must be >= 400.
Status StatusFromHttp(std::string_view verb, std::string_view path, int http_code,
                      std::string_view body, std::optional<int64_t> retry_after_seconds);

// The same for a metav1.Status carried in a watch's ERROR event.
Status StatusFromWatchError(std::string_view path, const std::string& status_json);

// The server's "retry after" hint in a 429/5xx Status ("... (retry after 3 s)"),
// at most kMaxRetryAfterSeconds (an hour: past any server's real hint).
inline constexpr int64_t kMaxRetryAfterSeconds = 3600;
std::optional<std::chrono::seconds> RetryAfter(const Status& status);

// A 410 Gone: the resourceVersion asked for is too old; list again.
bool IsGone(const Status& status);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_KUBE_API_ERRORS_H_
