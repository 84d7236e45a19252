#include "http/bounded_body.h"

#include <cpprest/http_msg.h>
#include <pplx/pplxtasks.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "http/task_wait.h"

namespace pacer::controller {
namespace {

std::atomic<std::size_t> abandoned_reads{0};

}  // namespace

std::size_t AbandonedBodyReadsInFlight() { return abandoned_reads.load(); }

StatusOr<std::string> ReadBoundedBody(
    web::http::http_response& response, std::size_t max_bytes, std::string_view what,
    std::string_view remedy, pplx::cancellation_token_source& cancel,
    std::optional<std::chrono::steady_clock::time_point> deadline) {
  const auto too_big = [&] {
    cancel.cancel();
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
    const size_t n = read.get();
    if (n == 0) break;
    if (out.size() + n > max_bytes) return too_big();
    out.append(reinterpret_cast<const char*>(block->data()), n);
  }
  return out;
}

}  // namespace pacer::controller
