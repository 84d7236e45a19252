#include "http/bounded_body.h"

#include <cpprest/http_msg.h>
#include <pplx/pplxtasks.h>

#include <cstdint>
#include <vector>

namespace pacer::controller {

StatusOr<std::string> ReadBoundedBody(web::http::http_response& response, std::size_t max_bytes,
                                      std::string_view what, std::string_view remedy,
                                      pplx::cancellation_token_source& cancel) {
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
  std::vector<uint8_t> block(64 * 1024);
  std::string out;
  while (true) {
    const size_t n = body.getn(block.data(), block.size()).get();
    if (n == 0) break;
    if (out.size() + n > max_bytes) return too_big();
    out.append(reinterpret_cast<const char*>(block.data()), n);
  }
  return out;
}

}  // namespace pacer::controller
