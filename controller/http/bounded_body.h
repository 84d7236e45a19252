// ReadBoundedBody: an HTTP answer's body, read through cpprestsdk, but never
// more than a limit. The controller's clients (the Kubernetes API, Prometheus,
// local mode's worker scrapes) all read answers from servers they do not
// control; cpprestsdk's extract_string() buffers a chunked answer (no
// Content-Length) whole before anyone can look at its size.
//
// Units: bytes. Thread-safety: one response is read by one thread; any
// number of threads may read responses at once (the count of abandoned reads
// is a process-wide atomic).
#ifndef PACER_CONTROLLER_HTTP_BOUNDED_BODY_H_
#define PACER_CONTROLLER_HTTP_BOUNDED_BODY_H_

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "pacer/status.h"

// Declared, not included: cpprestsdk's headers define a macro U that breaks
// headers included after them (GoogleTest's among them) unless
// _TURN_OFF_PLATFORM_STRING is defined first.
namespace web::http {
class http_response;
}
namespace pplx {
class cancellation_token_source;
}

namespace pacer::controller {

// The body of `response`, at most `max_bytes`: refused before reading when
// its Content-Length is larger, else read 64 KiB at a time and refused as soon
// as it passes the limit. A refusal is ResourceExhausted("<what>: the answer
// is over N bytes<remedy>") and cancels `cancel`, which the request must have
// been made with, so cpprestsdk drops the connection instead of draining it.
// With a `deadline` (steady time), a body not read whole by then is
// DeadlineExceeded: a server that sent its headers and then stalls holds the
// caller no longer than the headers could (the read is abandoned, not
// cancelled, as the request is; see KubeClient::SetRequestDeadline).
StatusOr<std::string> ReadBoundedBody(
    web::http::http_response& response, std::size_t max_bytes, std::string_view what,
    std::string_view remedy, pplx::cancellation_token_source& cancel,
    std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

// Body reads that ReadBoundedBody abandoned at their deadline and that have
// not ended yet, in this process. Thread-safe.
std::size_t AbandonedBodyReadsInFlight();

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_HTTP_BOUNDED_BODY_H_
