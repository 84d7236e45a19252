// ReadBoundedBody: an HTTP answer's body, read through cpprestsdk, but never
// more than a limit. The controller's clients (the Kubernetes API, Prometheus,
// local mode's worker scrapes) all read answers from servers they do not
// control; cpprestsdk's extract_string() buffers a chunked answer (no
// Content-Length) whole before anyone can look at its size, and cpprestsdk
// reads an answer into the response's buffer as fast as the network brings
// it, whether or not anyone takes it out (no back-pressure): counting only
// what the reader took let a busy controller hold several times the limit.
// An AnswerLimit set on the request stops cpprestsdk itself.
//
// Units: bytes. Thread-safety: one response is read by one thread; any
// number of threads may read responses at once (the count of abandoned reads
// is a process-wide atomic).
#ifndef PACER_CONTROLLER_HTTP_BOUNDED_BODY_H_
#define PACER_CONTROLLER_HTTP_BOUNDED_BODY_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "pacer/status.h"

// Declared, not included: cpprestsdk's headers define a macro U that breaks
// headers included after them (GoogleTest's among them) unless
// _TURN_OFF_PLATFORM_STRING is defined first.
namespace web::http {
class http_request;
class http_response;
}  // namespace web::http

namespace pacer::controller {

// The most of one answer's body a caller takes. Copies share one flag: set
// when cpprestsdk was stopped for passing the limit.
class AnswerLimit {
 public:
  // Not `armed`: StopReadingPast stops nothing until Arm() (a watch, whose
  // answer has no end when it is 200 and is bounded as an error's).
  explicit AnswerLimit(std::size_t max_bytes, bool armed = true)
      : max_bytes_(max_bytes),
        passed_(std::make_shared<std::atomic<bool>>(false)),
        armed_(std::make_shared<std::atomic<bool>>(armed)) {}

  // Makes cpprestsdk stop reading `request`'s answer (and fail it) once more
  // than max_bytes of its body arrived, before it buffers more: what the
  // controller holds is then at most max_bytes, one read (64 KiB, or one
  // chunk of a chunked answer: cpprestsdk reads a chunk whole) and the
  // socket's buffer. Call before the request is sent; for a watch, whose
  // answer has no end, with a limit not armed, armed once its status is not
  // 200 (it counts from the body's first byte, so what was read before is
  // counted too).
  void StopReadingPast(web::http::http_request& request) const;
  void Arm() const { armed_->store(true); }

  std::size_t max_bytes() const { return max_bytes_; }
  // Whether cpprestsdk was stopped: the answer was over max_bytes.
  bool passed() const { return passed_->load(); }

 private:
  std::size_t max_bytes_;
  std::shared_ptr<std::atomic<bool>> passed_;
  std::shared_ptr<std::atomic<bool>> armed_;
};

// The body of `response`, at most `limit.max_bytes()`: refused before reading when
// its Content-Length is larger, else read 64 KiB at a time and refused as soon
// as it passes the limit. A refusal is ResourceExhausted("<what>: the answer
// is over N bytes<remedy>"; the request must have had
// limit.StopReadingPast(), which ends cpprestsdk's read of the rest within
// one block past the limit (the request is not cancelled: that raced with the
// read on TLS connections and crashed in boost::asio). A request stopped by
// StopReadingPast is refused the same way, whatever the reader had taken by
// then.
// With a `deadline` (steady time), a body not read whole by then is
// DeadlineExceeded: a server that sent its headers and then stalls holds the
// caller no longer than the headers could (the read is abandoned, not
// cancelled, as the request is; see KubeClient::SetRequestDeadline).
StatusOr<std::string> ReadBoundedBody(
    web::http::http_response& response, const AnswerLimit& limit, std::string_view what,
    std::string_view remedy,
    std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

// The error for a 3xx `response`: the controller's clients set
// max_redirects(0), since cpprestsdk's redirected request drops the
// AnswerLimit (and the Kubernetes client's would carry its token along).
// FailedPrecondition("<what> answered HTTP N, a redirect to <Location>;
// redirects are not followed<remedy>").
Status RedirectNotFollowed(const web::http::http_response& response, std::string_view what,
                           std::string_view remedy);

// Body reads that ReadBoundedBody abandoned at their deadline and that have
// not ended yet, in this process. Thread-safe.
std::size_t AbandonedBodyReadsInFlight();

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_HTTP_BOUNDED_BODY_H_
