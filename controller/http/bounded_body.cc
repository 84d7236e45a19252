#include "http/bounded_body.h"

#include <cpprest/http_msg.h>
#include <cpprest/streams.h>
#include <pplx/pplxtasks.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "http/task_wait.h"

namespace pacer::controller {
namespace {

std::atomic<std::size_t> abandoned_reads{0};

}  // namespace

std::size_t AbandonedBodyReadsInFlight() { return abandoned_reads.load(); }

void AnswerLimit::StopReadingPast(web::http::http_request& request) const {
  // cpprestsdk calls the progress handler on its network thread with the
  // body bytes read so far: for a chunk before it is written to the
  // response's buffer, for a Content-Length body before the next 64 KiB
  // block. A throw there fails the request and ends the read.
  request.set_progress_handler(
      [max_bytes = max_bytes_, passed = passed_, armed = armed_](
          web::http::message_direction::direction direction, utility::size64_t so_far_bytes) {
        if (direction != web::http::message_direction::download || so_far_bytes <= max_bytes ||
            !armed->load()) {
          return;
        }
        passed->store(true);
        throw std::length_error("the answer is over " + std::to_string(max_bytes) + " bytes");
      });
}

Status RedirectNotFollowed(const web::http::http_response& response, std::string_view what,
                           std::string_view remedy) {
  const auto location = response.headers().find(web::http::header_names::location);
  return FailedPreconditionError(
      std::string(what) + " answered HTTP " + std::to_string(response.status_code()) +
      ", a redirect" +
      (location != response.headers().end() ? " to " + location->second : std::string()) +
      "; redirects are not followed" + std::string(remedy));
}

StatusOr<std::string> ReadBoundedBody(
    web::http::http_response& response, const AnswerLimit& limit, std::string_view what,
    std::string_view remedy, std::optional<std::chrono::steady_clock::time_point> deadline) {
  const std::size_t max_bytes = limit.max_bytes();
  // The request is not cancelled: the progress handler StopReadingPast
  // installs ends cpprestsdk's read within one block past the limit.
  // Cancelling too raced with that read on TLS connections: a SIGSEGV in
  // boost::asio's SSL read in about 1 of 20 runs of a client refused several
  // answers in a row (InformerTest.ListsInSmallerPagesWhileAPageIsOverTheAnswerLimit;
  // none in 90 runs without the cancel).
  const auto too_big = [&] {
    return ResourceExhaustedError(std::string(what) + ": the answer is over " +
                                  std::to_string(max_bytes) + " bytes" + std::string(remedy));
  };
  // content_length() is 0 when the header is absent (a chunked answer).
  if (response.headers().content_length() > max_bytes) return too_big();
  // Read into a buffer of our own: a container_buffer sink grows its vector
  // by each read's whole request, so after the last (short or empty) read the
  // vector is longer than what was written.
  concurrency::streams::streambuf<uint8_t> body = response.body().streambuf();
  // Shared with a read abandoned at the deadline, which may still write it.
  const auto block = std::make_shared<std::vector<uint8_t>>(64 * 1024);
  std::string out;
  while (true) {
    pplx::task<size_t> read = body.getn(block->data(), block->size());
    if (deadline && !FinishedBy(read, *deadline)) {
      abandoned_reads.fetch_add(1);
      read.then([block](pplx::task<size_t> done) {
        try {
          done.wait();
        } catch (...) {
        }
        abandoned_reads.fetch_sub(1);  // `block` goes with this continuation
      });
      return Status(
          StatusCode::kDeadlineExceeded,
          std::string(what) + ": the answer did not arrive whole by the request deadline");
    }
    size_t n = 0;
    try {
      n = read.get();
    } catch (...) {
      // The stop StopReadingPast made fails the read with its own error.
      if (limit.passed()) return too_big();
      throw;
    }
    if (n == 0) break;
    if (out.size() + n > max_bytes) return too_big();
    out.append(reinterpret_cast<const char*>(block->data()), n);
  }
  if (limit.passed()) return too_big();
  return out;
}

}  // namespace pacer::controller
