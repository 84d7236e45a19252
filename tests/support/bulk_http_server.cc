#include "bulk_http_server.h"

#include <netinet/in.h>
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

}  // namespace

BulkHttpServer::BulkHttpServer(std::size_t body_bytes, Framing framing, std::string redirect_to)
    : body_bytes_(body_bytes), framing_(framing), redirect_to_(std::move(redirect_to)) {
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
  const int fd = ::accept(listen_fd_, nullptr, nullptr);
  std::size_t sent = 0;
  if (fd >= 0) {
    // A safety net, not a synchronisation: a client that neither reads nor
    // closes cannot hold the test forever.
    // A small send buffer: what the client took is close to what was sent.
    const int send_buffer_bytes = 64 * 1024;
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &send_buffer_bytes, sizeof(send_buffer_bytes));
    timeval timeout{60, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      request.append(buf, static_cast<std::size_t>(n));
    }
    std::string head =
        redirect_to_.empty()
            ? std::string("HTTP/1.1 200 OK\r\n")
            : "HTTP/1.1 307 Temporary Redirect\r\nLocation: " + redirect_to_ + "\r\n";
    head += "Content-Type: text/plain\r\n";
    head += framing_ == Framing::kChunked
                ? std::string("Transfer-Encoding: chunked\r\n")
                : "Content-Length: " + std::to_string(body_bytes_) + "\r\n";
    head += "\r\n";
    bool open = SendAll(fd, head.data(), head.size());
    const std::string block(64 * 1024, 'x');
    while (open && sent < body_bytes_) {
      const std::size_t n = std::min(block.size(), body_bytes_ - sent);
      if (framing_ == Framing::kChunked) {
        char size_line[32];
        const int k = std::snprintf(size_line, sizeof(size_line), "%zx\r\n", n);
        open = SendAll(fd, size_line, static_cast<std::size_t>(k));
      }
      open = open && SendAll(fd, block.data(), n);
      if (open) sent += n;
      if (open && framing_ == Framing::kChunked) open = SendAll(fd, "\r\n", 2);
    }
    if (open && framing_ == Framing::kChunked) open = SendAll(fd, "0\r\n\r\n", 5);
    ::shutdown(fd, SHUT_WR);
    // The client's close ends the connection (recv 0); what it sends is
    // not read as a request.
    while (open && ::recv(fd, buf, sizeof(buf), 0) > 0) {
    }
    ::close(fd);
  }
  std::lock_guard<std::mutex> lock(mu_);
  sent_ = sent;
  done_ = true;
  cv_.notify_all();
}

}  // namespace pacer::testing
