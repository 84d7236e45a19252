// BulkHttpServer: an HTTP/1.1 server on 127.0.0.1 that answers its first
// request with a body of `body_bytes` bytes ('x'), chunked (no
// Content-Length) or with a Content-Length, and counts how much of it the
// client took before hanging up. Tests of clients that must not read an
// answer whole (the controller's bounded bodies) assert on that count. Over
// TLS too (the Kubernetes client speaks nothing else), and with an error
// status (an answer the client reads outside its usual path).
//
// Units: bytes. Thread-safety: serves on a thread of its own; the methods
// may be called from any thread.
#ifndef PACER_TESTS_SUPPORT_BULK_HTTP_SERVER_H_
#define PACER_TESTS_SUPPORT_BULK_HTTP_SERVER_H_

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>

namespace pacer::testing {

class BulkHttpServer {
 public:
  enum class Framing { kChunked, kContentLength };

  struct Options {
    std::string redirect_to;  // non-empty: a 307 to that URL (its body as above)
    int status_code = 200;    // when not a redirect
    // Both set: HTTPS with this certificate and key (PEM).
    std::string tls_cert_pem;
    std::string tls_key_pem;
  };

  // With `redirect_to`, the answer is a 307 to that URL (its body as above).
  BulkHttpServer(std::size_t body_bytes, Framing framing, std::string redirect_to = "");
  BulkHttpServer(std::size_t body_bytes, Framing framing, Options options);
  ~BulkHttpServer();  // closes the listener and joins
  BulkHttpServer(const BulkHttpServer&) = delete;
  BulkHttpServer& operator=(const BulkHttpServer&) = delete;

  int port() const { return port_; }
  std::string url() const {
    return (options_.tls_cert_pem.empty() ? "http://" : "https://") + std::string("127.0.0.1:") +
           std::to_string(port_);
  }

  // Blocks until the first connection has ended (the client hung up, or it
  // read the whole body and closed); the body bytes the kernel accepted for
  // it. A client that stops reading without closing blocks the server until
  // the send timeout (60 s), so the count stays what it was; one that keeps
  // the connection open after reading it all, until the receive timeout.
  std::size_t WaitForBodyBytesSent();

 private:
  void Serve();

  const std::size_t body_bytes_;
  const Framing framing_;
  const Options options_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::size_t sent_ = 0;
  std::thread thread_;
};

}  // namespace pacer::testing

#endif  // PACER_TESTS_SUPPORT_BULK_HTTP_SERVER_H_
