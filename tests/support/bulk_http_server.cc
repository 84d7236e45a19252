#include "bulk_http_server.h"

#include <netinet/in.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

namespace pacer::testing {
namespace {

// All of `data`, or false once the peer is gone (MSG_NOSIGNAL: no SIGPIPE).
bool SendAll(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// An accepted connection, plain or TLS (after its handshake).
class Link {
 public:
  Link(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {}
  bool Send(const char* data, std::size_t size) {
    if (ssl_ == nullptr) return SendAll(fd_, data, size);
    while (size > 0) {
      const int chunk = static_cast<int>(std::min<std::size_t>(size, 1 << 20));
      const int n = SSL_write(ssl_, data, chunk);
      if (n <= 0) return false;
      data += n;
      size -= static_cast<std::size_t>(n);
    }
    return true;
  }
  ssize_t Recv(char* buffer, std::size_t size) {
    if (ssl_ == nullptr) return ::recv(fd_, buffer, size, 0);
    return SSL_read(ssl_, buffer, static_cast<int>(size));
  }

 private:
  int fd_;
  SSL* ssl_;
};

// A server context with `cert_pem` and `key_pem`, or nullptr.
SSL_CTX* ServerContext(const std::string& cert_pem, const std::string& key_pem) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return nullptr;
  BIO* cert_bio = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  BIO* key_bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  X509* cert =
      cert_bio != nullptr ? PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr) : nullptr;
  EVP_PKEY* key =
      key_bio != nullptr ? PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr) : nullptr;
  const bool ok = cert != nullptr && key != nullptr && SSL_CTX_use_certificate(ctx, cert) == 1 &&
                  SSL_CTX_use_PrivateKey(ctx, key) == 1;
  X509_free(cert);
  EVP_PKEY_free(key);
  BIO_free(cert_bio);
  BIO_free(key_bio);
  if (!ok) {
    SSL_CTX_free(ctx);
    return nullptr;
  }
  return ctx;
}

std::string StatusLine(const BulkHttpServer::Options& options) {
  if (!options.redirect_to.empty()) {
    return "HTTP/1.1 307 Temporary Redirect\r\nLocation: " + options.redirect_to + "\r\n";
  }
  return "HTTP/1.1 " + std::to_string(options.status_code) +
         (options.status_code == 200 ? " OK" : " Error") + "\r\n";
}

}  // namespace

BulkHttpServer::BulkHttpServer(std::size_t body_bytes, Framing framing, std::string redirect_to)
    : BulkHttpServer(body_bytes, framing, Options{std::move(redirect_to), 200, "", ""}) {}

BulkHttpServer::BulkHttpServer(std::size_t body_bytes, Framing framing, Options options)
    : body_bytes_(body_bytes), framing_(framing), options_(std::move(options)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 4) != 0) {
    std::perror("BulkHttpServer: listen");
    done_ = true;
    return;
  }
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { Serve(); });
}

BulkHttpServer::~BulkHttpServer() {
  // Wakes a blocked accept() (no client came).
  if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::size_t BulkHttpServer::WaitForBodyBytesSent() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  return sent_;
}

void BulkHttpServer::Serve() {
  // SSL_write has no MSG_NOSIGNAL: a client that hangs up raises SIGPIPE on
  // this thread, blocked here (the write fails with EPIPE instead).
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  const bool tls = !options_.tls_cert_pem.empty() && !options_.tls_key_pem.empty();
  SSL_CTX* ctx = tls ? ServerContext(options_.tls_cert_pem, options_.tls_key_pem) : nullptr;
  const int fd = tls && ctx == nullptr ? -1 : ::accept(listen_fd_, nullptr, nullptr);
  std::size_t sent = 0;
  SSL* ssl = nullptr;
  if (fd >= 0) {
    // A safety net, not a synchronisation: a client that neither reads nor
    // closes cannot hold the test forever.
    // A small send buffer: what the client took is close to what was sent.
    const int send_buffer_bytes = 64 * 1024;
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &send_buffer_bytes, sizeof(send_buffer_bytes));
    timeval timeout{60, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    bool open = true;
    if (tls) {
      ssl = SSL_new(ctx);
      open = ssl != nullptr && SSL_set_fd(ssl, fd) == 1 && SSL_accept(ssl) == 1;
    }
    Link link(fd, ssl);
    std::string request;
    char buf[4096];
    while (open && request.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = link.Recv(buf, sizeof(buf));
      if (n <= 0) break;
      request.append(buf, static_cast<std::size_t>(n));
    }
    std::string head = StatusLine(options_);
    head += "Content-Type: text/plain\r\n";
    head += framing_ == Framing::kChunked
                ? std::string("Transfer-Encoding: chunked\r\n")
                : "Content-Length: " + std::to_string(body_bytes_) + "\r\n";
    head += "\r\n";
    open = open && link.Send(head.data(), head.size());
    const std::string block(64 * 1024, 'x');
    while (open && sent < body_bytes_) {
      const std::size_t n = std::min(block.size(), body_bytes_ - sent);
      if (framing_ == Framing::kChunked) {
        char size_line[32];
        const int k = std::snprintf(size_line, sizeof(size_line), "%zx\r\n", n);
        open = link.Send(size_line, static_cast<std::size_t>(k));
      }
      open = open && link.Send(block.data(), n);
      if (open) sent += n;
      if (open && framing_ == Framing::kChunked) open = link.Send("\r\n", 2);
    }
    if (open && framing_ == Framing::kChunked) open = link.Send("0\r\n\r\n", 5);
    if (ssl != nullptr && open) SSL_shutdown(ssl);  // close_notify: the body is whole
    ::shutdown(fd, SHUT_WR);
    // The client's close ends the connection (recv 0); what it sends is
    // not read as a request.
    while (open && ::recv(fd, buf, sizeof(buf), 0) > 0) {
    }
    SSL_free(ssl);
    ::close(fd);
  }
  SSL_CTX_free(ctx);
  std::lock_guard<std::mutex> lock(mu_);
  sent_ = sent;
  done_ = true;
  cv_.notify_all();
}

}  // namespace pacer::testing
