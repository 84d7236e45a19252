#include "core/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <system_error>
#include <utility>

namespace pacer::worker {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

enum Op : uint8_t { kOpSet = 1, kOpGet = 2, kOpAdd = 3, kOpWait = 4, kOpHello = 5 };
// HELLO's key and its answer: what tells a store from another service at
// MASTER_ADDR:MASTER_PORT (docs in tcp_store.h).
constexpr std::string_view kHelloKey = "pacer-store";
constexpr std::string_view kHelloAnswer = "pacer-store/1";
enum ReplyStatus : uint8_t {
  kReplyOk = 0,
  kReplyTimeout = 1,
  kReplyTooLarge = 2,
  kReplyBadRequest = 3,
  kReplyNotACounter = 4,  // ADD on a key whose value is not 8 bytes; the connection stays open
};

constexpr std::size_t kRequestHeaderBytes = 1 + 4 + 4;  // op, timeout_ms, key_count
constexpr std::size_t kReplyHeaderBytes = 1 + 8;        // status, value_len
// A reply carries at most a value or a short message.
constexpr std::size_t kMaxReplyBytes = kMaxValueBytes + 4096;
// How often a GET/WAIT blocked in the server checks that its client is still
// there, so a rank that died mid-wait does not pin a server thread until its
// (possibly long) timeout.
constexpr milliseconds kHangupCheckInterval{1000};
// Extra time a client allows for the server's answer beyond the server-side
// wait itself (scheduling, a large value in flight).
constexpr milliseconds kReplySlack{5000};

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// "30 s", "0.25 s": seconds are what operators set timeouts in.
std::string FormatSeconds(milliseconds d) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.3f", static_cast<double>(d.count()) / 1000.0);
  std::string text = buf;
  text.erase(text.find_last_not_of('0') + 1);  // "0.250" -> "0.25", "30.000" -> "30."
  if (text.back() == '.') text.pop_back();
  return text + " s";
}

std::string JoinHostPort(const std::string& host, int port) {
  // IPv6 literals need brackets to stay readable next to the port.
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string Quote(std::string_view key) {
  std::string out = "\"";
  for (char c : key) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x",
                    static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    }
  }
  return out + "\"";
}

void PutU32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out->push_back(static_cast<char>((v >> shift) & 0xff));
}
void PutU64(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8)
    out->push_back(static_cast<char>((v >> shift) & 0xff));
}
uint64_t GetBigEndian(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}
std::string EncodeI64(int64_t v) {
  std::string out;
  PutU64(&out, static_cast<uint64_t>(v));
  return out;
}
int64_t DecodeI64(std::string_view bytes) {
  return static_cast<int64_t>(
      GetBigEndian(reinterpret_cast<const unsigned char*>(bytes.data()), 8));
}

void SetNoDelay(int fd) {
  // Requests are small and strictly request/response: Nagle would add latency.
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// ---- Server-side blocking I/O. The server's sockets block: each connection
// has its own thread, and the destructor unblocks them with shutdown(2).

bool ReadFull(int fd, void* buf, std::size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t got = recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

bool WriteFull(int fd, const void* buf, std::size_t n) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t put = send(fd, p, n, MSG_NOSIGNAL);  // a vanished peer is an error, not SIGPIPE
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    n -= static_cast<std::size_t>(put);
  }
  return true;
}

bool SendReply(int fd, ReplyStatus status, std::string_view value) {
  std::string header;
  header.push_back(static_cast<char>(status));
  PutU64(&header, value.size());
  return WriteFull(fd, header.data(), header.size()) && WriteFull(fd, value.data(), value.size());
}

// ---- Client-side I/O with a deadline. The client's socket is non-blocking
// so that no send or recv can outlive the deadline.

enum class IoResult { kOk, kDeadline, kError };

// Waits until fd is ready for `events` or the deadline passes.
IoResult PollUntil(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return IoResult::kDeadline;
    pollfd p{fd, events, 0};
    int timeout_ms = static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
    int n = poll(&p, 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoResult::kError;
    if (n > 0) return IoResult::kOk;  // ready, or an error the next call reports
  }
}

IoResult SendAllBy(int fd, std::string_view data, Clock::time_point deadline, std::string* error) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t put = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (put > 0) {
      done += static_cast<std::size_t>(put);
      continue;
    }
    if (put < 0 && errno == EINTR) continue;
    if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      IoResult r = PollUntil(fd, POLLOUT, deadline);
      if (r != IoResult::kOk) {
        if (r == IoResult::kError) *error = Errno("poll");
        return r;
      }
      continue;
    }
    *error = Errno("send");
    return IoResult::kError;
  }
  return IoResult::kOk;
}

IoResult RecvAllBy(int fd, char* buf, std::size_t n, Clock::time_point deadline,
                   std::string* error) {
  std::size_t done = 0;
  while (done < n) {
    ssize_t got = recv(fd, buf + done, n - done, 0);
    if (got > 0) {
      done += static_cast<std::size_t>(got);
      continue;
    }
    if (got == 0) {
      *error = "the store closed the connection";
      return IoResult::kError;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      IoResult r = PollUntil(fd, POLLIN, deadline);
      if (r != IoResult::kOk) {
        if (r == IoResult::kError) *error = Errno("poll");
        return r;
      }
      continue;
    }
    *error = Errno("recv");
    return IoResult::kError;
  }
  return IoResult::kOk;
}

uint32_t ClampTimeoutMs(milliseconds timeout) {
  return static_cast<uint32_t>(
      std::clamp<int64_t>(timeout.count(), 0, std::numeric_limits<uint32_t>::max()));
}

Status DeadlineExceeded(std::string message) {
  return Status(StatusCode::kDeadlineExceeded, std::move(message));
}

}  // namespace

// ============================== TcpStoreServer ==============================

StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(const std::string& host, int port,
                                                                std::size_t max_connections) {
  if (port < 0 || port > 65535) {
    return InvalidArgumentError("store port " + std::to_string(port) + " is not in 0..65535");
  }
  const std::string where = JoinHostPort(host, port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addrs = nullptr;
  const std::string port_text = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port_text.c_str(), &hints, &addrs);
  if (rc != 0) {
    return UnavailableError("store server cannot resolve " + where + ": " + gai_strerror(rc));
  }
  std::string last_error = "no address";
  int fd = -1;
  for (addrinfo* ai = addrs; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = Errno("socket");
      continue;
    }
    // A restarted job must be able to rebind its port while the previous
    // incarnation's connections linger in TIME_WAIT.
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      last_error = Errno("bind/listen");
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(addrs);
  if (fd < 0) return UnavailableError("store server cannot listen on " + where + ": " + last_error);

  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0) {
    std::string error = Errno("getsockname");
    close(fd);
    return UnavailableError("store server on " + where + ": " + error);
  }
  int bound_port = bound.ss_family == AF_INET6
                       ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    std::string error = Errno("pipe2");
    close(fd);
    return UnavailableError("store server on " + where + ": " + error);
  }
  return std::unique_ptr<TcpStoreServer>(
      new TcpStoreServer(fd, bound_port, wake[0], wake[1], max_connections));
}

TcpStoreServer::TcpStoreServer(int listen_fd, int port, int wake_read_fd, int wake_write_fd,
                               std::size_t max_connections)
    : listen_fd_(listen_fd),
      port_(port),
      max_connections_(max_connections),
      wake_read_fd_(wake_read_fd),
      wake_write_fd_(wake_write_fd),
      accept_thread_([this] { AcceptLoop(); }) {}

TcpStoreServer::~TcpStoreServer() {
  {
    std::lock_guard<std::mutex> lock(data_mu_);
    stopping_ = true;
  }
  data_cv_.notify_all();
  char byte = 1;
  while (write(wake_write_fd_, &byte, 1) < 0 && errno == EINTR) {
  }
  accept_thread_.join();
  close(listen_fd_);
  // The accept loop is gone, so nobody else erases from connections_ now.
  {
    std::lock_guard<std::mutex> lock(connections_mu_);
    for (Connection& c : connections_) {
      if (c.fd >= 0) shutdown(c.fd, SHUT_RDWR);  // unblocks recv/send in that thread
    }
  }
  for (Connection& c : connections_) c.thread.join();
  close(wake_read_fd_);
  close(wake_write_fd_);
}

void TcpStoreServer::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_fd_, POLLIN, 0}};
    int n = poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "level=error component=tcp-store event=poll-failed error=\"%s\"\n",
                   std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The pending connection stays queued, so the listening socket stays
        // readable: back off instead of spinning, still waking for shutdown.
        std::fprintf(stderr, "level=error component=tcp-store event=accept-failed error=\"%s\"\n",
                     std::strerror(errno));
        pollfd wake{wake_read_fd_, POLLIN, 0};
        poll(&wake, 1, 100);
      }
      continue;  // otherwise the peer gave up already
    }
    SetNoDelay(fd);
    ReapFinishedConnections();
    std::lock_guard<std::mutex> lock(connections_mu_);
    if (connections_.size() >= max_connections_) {
      // The peer sees the connection close (a client: Unavailable).
      if (refused_connections_++ == 0) {
        std::fprintf(stderr,
                     "level=error component=tcp-store event=connection-refused open=%zu "
                     "limit=%zu reason=\"the store's limit of open connections is reached: "
                     "something besides this job's ranks is connecting to the rendezvous "
                     "port\" (further refusals are not logged)\n",
                     connections_.size(), max_connections_);
      }
      close(fd);
      continue;
    }
    Connection& c = connections_.emplace_back();
    c.fd = fd;
    try {
      c.thread = std::thread([this, &c] { Serve(&c); });
    } catch (const std::system_error& e) {
      // Out of threads (a pids limit): this connection goes, the store stays.
      std::fprintf(stderr, "level=error component=tcp-store event=thread-failed error=\"%s\"\n",
                   e.what());
      close(fd);
      connections_.pop_back();
    }
  }
}

void TcpStoreServer::ReapFinishedConnections() {
  std::vector<std::thread> finished;
  {
    std::lock_guard<std::mutex> lock(connections_mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (it->done) {
        finished.push_back(std::move(it->thread));
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (std::thread& t : finished) t.join();
}

void TcpStoreServer::Serve(Connection* connection) {
  const int fd = connection->fd;  // stable: only this thread closes it, below
  for (;;) {
    unsigned char header[kRequestHeaderBytes];
    if (!ReadFull(fd, header, sizeof(header))) break;
    const uint8_t op = header[0];
    const milliseconds timeout(static_cast<int64_t>(GetBigEndian(header + 1, 4)));
    const uint64_t key_count = GetBigEndian(header + 5, 4);
    if (op < kOpSet || op > kOpHello) {
      SendReply(fd, kReplyBadRequest, "unknown op " + std::to_string(op));
      break;
    }
    const bool key_count_ok =
        op == kOpWait ? key_count >= 1 && key_count <= kMaxWaitKeys : key_count == 1;
    if (!key_count_ok) {
      SendReply(fd, kReplyBadRequest, "bad key count " + std::to_string(key_count));
      break;
    }
    std::vector<std::string> keys;
    bool ok = true;
    for (uint64_t i = 0; i < key_count && ok; ++i) {
      unsigned char len_bytes[4];
      if (!ReadFull(fd, len_bytes, 4)) {
        ok = false;
        break;
      }
      const uint64_t len = GetBigEndian(len_bytes, 4);
      if (len == 0) {
        // The client never sends one (CheckKey), and WaitForKeys' "" means
        // "none missing": an empty key read a GET's value through end().
        SendReply(fd, kReplyBadRequest, "empty key");
        ok = false;
        break;
      }
      if (len > kMaxKeyBytes) {
        SendReply(fd, kReplyTooLarge,
                  "key of " + std::to_string(len) + " bytes exceeds the limit of " +
                      std::to_string(kMaxKeyBytes));
        ok = false;
        break;
      }
      std::string& key = keys.emplace_back(len, '\0');
      ok = ReadFull(fd, key.data(), len);
    }
    if (!ok) break;
    unsigned char value_len_bytes[8];
    if (!ReadFull(fd, value_len_bytes, 8)) break;
    const uint64_t value_len = GetBigEndian(value_len_bytes, 8);
    if (op == kOpSet && value_len > kMaxValueBytes) {
      SendReply(fd, kReplyTooLarge,
                "value of " + std::to_string(value_len) + " bytes for key " + Quote(keys[0]) +
                    " exceeds the limit of " + std::to_string(kMaxValueBytes));
      break;
    }
    if ((op == kOpAdd && value_len != 8) ||
        ((op == kOpGet || op == kOpWait || op == kOpHello) && value_len != 0)) {
      SendReply(fd, kReplyBadRequest, "bad value length " + std::to_string(value_len));
      break;
    }
    // Grown as the bytes arrive, not allocated from the header: a peer that
    // declares 64 MiB and sends nothing (on each of many connections) holds
    // no memory for it.
    std::string value;
    bool value_read = true;
    while (value_read && value.size() < value_len) {
      const size_t at = value.size();
      const size_t chunk = static_cast<size_t>(std::min<uint64_t>(value_len - at, 1u << 20));
      value.resize(at + chunk);
      value_read = ReadFull(fd, value.data() + at, chunk);
    }
    if (!value_read) break;

    bool keep_open = false;
    switch (op) {
      case kOpSet:
        keep_open = HandleSet(fd, keys[0], std::move(value));
        break;
      case kOpGet:
        keep_open = HandleGet(fd, keys[0], timeout);
        break;
      case kOpAdd:
        keep_open = HandleAdd(fd, keys[0], value);
        break;
      case kOpHello:
        keep_open = SendReply(fd, kReplyOk, kHelloAnswer);
        break;
      case kOpWait:
        keep_open = HandleWait(fd, keys, timeout);
        break;
    }
    if (!keep_open) break;
  }
  // Closing under the lock means the destructor never shuts down a
  // descriptor number that has since been reused.
  std::lock_guard<std::mutex> lock(connections_mu_);
  close(connection->fd);
  connection->fd = -1;
  connection->done = true;
}

bool TcpStoreServer::HandleSet(int fd, const std::string& key, std::string value) {
  {
    std::lock_guard<std::mutex> lock(data_mu_);
    data_[key] = std::move(value);
  }
  data_cv_.notify_all();
  return SendReply(fd, kReplyOk, {});
}

bool TcpStoreServer::HandleGet(int fd, const std::string& key, milliseconds timeout) {
  bool abandon = false;
  std::string missing = WaitForKeys(fd, {key}, timeout, &abandon);
  if (abandon) return false;
  if (!missing.empty()) return SendReply(fd, kReplyTimeout, missing);
  std::string value;
  {
    std::lock_guard<std::mutex> lock(data_mu_);
    value = data_.find(key)->second;  // keys are never deleted
  }
  return SendReply(fd, kReplyOk, value);
}

bool TcpStoreServer::HandleAdd(int fd, const std::string& key, const std::string& delta_bytes) {
  int64_t total = 0;
  {
    std::lock_guard<std::mutex> lock(data_mu_);
    std::string& slot = data_[key];
    if (!slot.empty() && slot.size() != 8) {
      return SendReply(fd, kReplyNotACounter,
                       "key " + Quote(key) + " holds " + std::to_string(slot.size()) +
                           " bytes, not an 8-byte counter");
    }
    const uint64_t before = slot.empty() ? 0 : static_cast<uint64_t>(DecodeI64(slot));
    // Unsigned arithmetic wraps instead of overflowing; a barrier counter
    // never gets near 2^63 anyway.
    total = static_cast<int64_t>(before + static_cast<uint64_t>(DecodeI64(delta_bytes)));
    slot = EncodeI64(total);
  }
  data_cv_.notify_all();
  return SendReply(fd, kReplyOk, EncodeI64(total));
}

bool TcpStoreServer::HandleWait(int fd, const std::vector<std::string>& keys,
                                milliseconds timeout) {
  bool abandon = false;
  std::string missing = WaitForKeys(fd, keys, timeout, &abandon);
  if (abandon) return false;
  if (!missing.empty()) return SendReply(fd, kReplyTimeout, missing);
  return SendReply(fd, kReplyOk, {});
}

std::string TcpStoreServer::WaitForKeys(int fd, const std::vector<std::string>& keys,
                                        milliseconds timeout, bool* abandon) {
  const auto deadline = Clock::now() + timeout;
  std::unique_lock<std::mutex> lock(data_mu_);
  for (;;) {
    if (stopping_) {
      *abandon = true;
      return {};
    }
    auto missing = std::find_if(keys.begin(), keys.end(),
                                [this](const std::string& k) { return data_.count(k) == 0; });
    if (missing == keys.end()) return {};
    const auto now = Clock::now();
    if (now >= deadline) return *missing;
    data_cv_.wait_until(lock, std::min(deadline, now + kHangupCheckInterval));
    pollfd p{fd, POLLRDHUP, 0};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
      *abandon = true;  // the waiting rank is gone; nobody will read the answer
      return {};
    }
  }
}

// ============================== TcpStoreClient ==============================

namespace {

// What a peer that is not a store sent instead of HELLO's answer, printable
// and short, for the message (an HTTP server's "HTTP/1.1 400 ...").
std::string Printable(std::string_view bytes) {
  std::string out;
  for (char ch : bytes.substr(0, 32)) {
    out += (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\') ? ch : '.';
  }
  return out;
}

// The handshake on a fresh connection: HELLO, and the store's answer by
// `deadline`. "" when the peer is a store; else what went wrong, for
// Connect's message (it retries: the address may yet become the store's).
// *interrupted when `interrupt` said the rank is stopping while it waited.
std::string Hello(int fd, Clock::time_point deadline, const TcpStoreClient::Interrupt& interrupt,
                  bool* interrupted) {
  std::string request;
  request.push_back(static_cast<char>(kOpHello));
  PutU32(&request, 0);
  PutU32(&request, 1);
  PutU32(&request, static_cast<uint32_t>(kHelloKey.size()));
  request.append(kHelloKey);
  PutU64(&request, 0);
  std::string error;
  IoResult r = SendAllBy(fd, request, deadline, &error);
  if (r == IoResult::kError) return "handshake: " + error;
  // The answer, waited for in slices when a stop may cut the wait short.
  while (r == IoResult::kOk) {
    const auto until =
        interrupt ? std::min<Clock::time_point>(deadline, Clock::now() + kInterruptCheckInterval)
                  : deadline;
    r = PollUntil(fd, POLLIN, until);
    if (r != IoResult::kDeadline || Clock::now() >= deadline) break;
    if (interrupt()) {
      *interrupted = true;
      return "handshake: no answer yet";
    }
    r = IoResult::kOk;
  }
  if (r == IoResult::kDeadline) {
    return "connected, but no answer to the store's handshake: is it a pacer-worker store?";
  }
  if (r == IoResult::kError) return "handshake: " + Errno("poll");
  // A store answers in one small frame; read what came, up to its size.
  char answer[kReplyHeaderBytes + kHelloAnswer.size()];
  std::size_t got = 0;
  while (got < sizeof(answer)) {
    const ssize_t n = recv(fd, answer + got, sizeof(answer) - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (PollUntil(fd, POLLIN, deadline) == IoResult::kOk) continue;
    }
    break;
  }
  std::string expected;
  expected.push_back(static_cast<char>(kReplyOk));
  PutU64(&expected, kHelloAnswer.size());
  expected.append(kHelloAnswer);
  const std::string_view received(answer, got);
  if (received == expected) return "";
  if (got == 0) return "the peer closed the connection at the store's handshake";
  return "answers, but not as a pacer-worker store: it sent \"" + Printable(received) + "\"";
}

}  // namespace

StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::Connect(const std::string& host, int port,
                                                                  int rank, milliseconds timeout,
                                                                  Interrupt interrupt) {
  const std::string address = JoinHostPort(host, port);
  if (port <= 0 || port > 65535) {
    return InvalidArgumentError("rank " + std::to_string(rank) + ": store port " +
                                std::to_string(port) + " is not in 1..65535");
  }
  const auto deadline = Clock::now() + timeout;
  const std::string port_text = std::to_string(port);
  std::string last_error = "not tried";
  milliseconds backoff{10};
  const auto gave_up = [&] {
    return Status(StatusCode::kAborted, "rank " + std::to_string(rank) +
                                            " gave up connecting to the store at " + address +
                                            " (" + last_error + "): the rank is stopping");
  };
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* addrs = nullptr;
    // Resolution is retried too: a headless Service's DNS name appears only
    // once rank 0's pod is ready.
    int rc = getaddrinfo(host.c_str(), port_text.c_str(), &hints, &addrs);
    if (rc != 0) {
      last_error = std::string("resolve: ") + gai_strerror(rc);
    } else {
      int fd = -1;
      for (addrinfo* ai = addrs; ai != nullptr && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0) {
          last_error = Errno("socket");
          continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
          if (errno == EINPROGRESS) {
            // An unanswered SYN can take the whole timeout: with an interrupt,
            // wait for it in slices and check the predicate in between.
            IoResult r = IoResult::kDeadline;
            for (;;) {
              const auto until = interrupt ? std::min<Clock::time_point>(
                                                 deadline, Clock::now() + kInterruptCheckInterval)
                                           : deadline;
              r = PollUntil(fd, POLLOUT, until);
              if (r != IoResult::kDeadline || Clock::now() >= deadline) break;
              if (interrupt()) {
                close(fd);
                freeaddrinfo(addrs);
                last_error = "connect: no answer yet";
                return gave_up();
              }
            }
            int error = 0;
            socklen_t len = sizeof(error);
            if (r == IoResult::kOk && getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 &&
                error == 0) {
              break;  // connected
            }
            last_error = r == IoResult::kDeadline ? "connect: no answer"
                                                  : std::string("connect: ") + std::strerror(error);
          } else {
            last_error = Errno("connect");
          }
          close(fd);
          fd = -1;
        }
      }
      freeaddrinfo(addrs);
      if (fd >= 0) {
        SetNoDelay(fd);
        // Whatever listens there must be a store: an HTTP server or a
        // listener that never answers failed the first request (exit 4, "lost
        // its connection"), or held it for twice the timeout.
        bool interrupted = false;
        std::string refused = Hello(fd, deadline, interrupt, &interrupted);
        if (refused.empty()) {
          return std::unique_ptr<TcpStoreClient>(
              new TcpStoreClient(fd, rank, address, timeout, std::move(interrupt)));
        }
        close(fd);
        last_error = std::move(refused);
        if (interrupted) return gave_up();
      }
    }
    // Only after an attempt failed: a stopping rank still connects to a
    // store that is there (it may have a clean stop to announce through it).
    if (interrupt && interrupt()) return gave_up();
    // Backoff between attempts; the deadline still bounds the total, and an
    // interrupt is checked at least every kInterruptCheckInterval. No
    // attempt once the deadline has passed: one with no time left would
    // replace the last real error with "no answer".
    const auto now = Clock::now();
    if (now < deadline)
      std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    if (Clock::now() >= deadline) {
      return DeadlineExceeded("rank " + std::to_string(rank) + " waited " + FormatSeconds(timeout) +
                              " for the store at " + address + " (" + last_error +
                              "); check that rank 0 is running and MASTER_ADDR/MASTER_PORT "
                              "point at it");
    }
    backoff = std::min(backoff * 2, interrupt ? kInterruptCheckInterval : milliseconds(500));
  }
}

TcpStoreClient::TcpStoreClient(int fd, int rank, std::string address, milliseconds io_timeout,
                               Interrupt interrupt)
    : rank_(rank),
      address_(std::move(address)),
      io_timeout_(io_timeout),
      fd_(fd),
      interrupt_(std::move(interrupt)) {}

void TcpStoreClient::SetInterrupt(Interrupt interrupt) {
  std::lock_guard<std::mutex> lock(interrupt_mu_);
  interrupt_ = std::move(interrupt);
}

bool TcpStoreClient::Interrupted() const {
  std::lock_guard<std::mutex> lock(interrupt_mu_);
  return interrupt_ && interrupt_();
}

milliseconds TcpStoreClient::NextWaitSlice(Clock::time_point deadline) const {
  // Rounded up: a slice of 0 ms for a deadline still a fraction of a
  // millisecond away would come back at once, and again, until it passed.
  const milliseconds left =
      std::max(milliseconds(0), std::chrono::ceil<milliseconds>(deadline - Clock::now()));
  std::lock_guard<std::mutex> lock(interrupt_mu_);
  return interrupt_ ? std::min(left, kInterruptCheckInterval) : left;
}

Status TcpStoreClient::InterruptedWait(const std::string& what) const {
  return Status(StatusCode::kAborted, "rank " + std::to_string(rank_) + " gave up waiting for " +
                                          what + " in the store at " + address_ +
                                          ": the rank is stopping");
}

TcpStoreClient::~TcpStoreClient() {
  if (fd_ >= 0) close(fd_);
}

Status TcpStoreClient::Broken(const std::string& what) {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  broken_ = "rank " + std::to_string(rank_) + " lost its connection to the store at " + address_ +
            ": " + what;
  return UnavailableError(broken_);
}

Status TcpStoreClient::CheckKey(std::string_view key) const {
  if (key.empty()) {
    return InvalidArgumentError("rank " + std::to_string(rank_) + ": store keys must not be empty");
  }
  if (key.size() > kMaxKeyBytes) {
    return ResourceExhaustedError("rank " + std::to_string(rank_) + ": store key of " +
                                  std::to_string(key.size()) + " bytes exceeds the limit of " +
                                  std::to_string(kMaxKeyBytes));
  }
  return Status::Ok();
}

StatusOr<TcpStoreClient::Reply> TcpStoreClient::RoundTripLocked(
    uint8_t op, const std::vector<std::string_view>& keys, std::string_view value,
    milliseconds server_wait) {
  if (fd_ < 0) return UnavailableError(broken_);
  std::string head;
  head.push_back(static_cast<char>(op));
  PutU32(&head, ClampTimeoutMs(server_wait));
  PutU32(&head, static_cast<uint32_t>(keys.size()));
  for (std::string_view key : keys) {
    PutU32(&head, static_cast<uint32_t>(key.size()));
    head.append(key);
  }
  PutU64(&head, value.size());

  const auto deadline = Clock::now() + server_wait + io_timeout_ + kReplySlack;
  std::string error;
  IoResult r = SendAllBy(fd_, head, deadline, &error);
  if (r == IoResult::kOk) r = SendAllBy(fd_, value, deadline, &error);
  char reply_head[kReplyHeaderBytes];
  if (r == IoResult::kOk) r = RecvAllBy(fd_, reply_head, sizeof(reply_head), deadline, &error);
  Reply reply;
  if (r == IoResult::kOk) {
    reply.status = static_cast<uint8_t>(reply_head[0]);
    const uint64_t len = GetBigEndian(reinterpret_cast<const unsigned char*>(reply_head + 1), 8);
    if (len > kMaxReplyBytes) return Broken("malformed reply (" + std::to_string(len) + " bytes)");
    reply.value.resize(len);
    r = RecvAllBy(fd_, reply.value.data(), len, deadline, &error);
  }
  if (r == IoResult::kDeadline) {
    // The stream is out of step with the server now; never reuse it.
    static_cast<void>(Broken("no reply within the deadline"));
    return DeadlineExceeded("rank " + std::to_string(rank_) + " got no reply from the store at " +
                            address_ + " within " +
                            FormatSeconds(server_wait + io_timeout_ + kReplySlack));
  }
  if (r == IoResult::kError) return Broken(error);
  return reply;
}

Status TcpStoreClient::ReplyErrorLocked(const Reply& reply) {
  const std::string where = "rank " + std::to_string(rank_) + ", store at " + address_ + ": ";
  if (reply.status == kReplyNotACounter) return FailedPreconditionError(where + reply.value);
  // The server closes the connection after any other refusal.
  static_cast<void>(Broken("the store refused a request and closed the connection"));
  if (reply.status == kReplyTooLarge) return ResourceExhaustedError(where + reply.value);
  if (reply.status == kReplyBadRequest) {
    return InternalError(where + "the store refused a request: " + reply.value);
  }
  return InternalError(where + "unexpected reply status " + std::to_string(reply.status));
}

Status TcpStoreClient::Set(std::string_view key, std::string_view value) {
  RETURN_IF_ERROR(CheckKey(key));
  if (value.size() > kMaxValueBytes) {
    return ResourceExhaustedError("rank " + std::to_string(rank_) + ": value of " +
                                  std::to_string(value.size()) + " bytes for key " + Quote(key) +
                                  " exceeds the store's limit of " +
                                  std::to_string(kMaxValueBytes));
  }
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Reply reply, RoundTripLocked(kOpSet, {key}, value, milliseconds(0)));
  if (reply.status != kReplyOk) return ReplyErrorLocked(reply);
  return Status::Ok();
}

StatusOr<std::string> TcpStoreClient::Get(std::string_view key, milliseconds timeout) {
  RETURN_IF_ERROR(CheckKey(key));
  std::lock_guard<std::mutex> lock(mu_);
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    // Without an interrupt: one slice, the whole timeout, which the server
    // waits out from a later start, so the deadline has passed on TIMEOUT.
    ASSIGN_OR_RETURN(Reply reply, RoundTripLocked(kOpGet, {key}, {}, NextWaitSlice(deadline)));
    if (reply.status == kReplyOk) return std::move(reply.value);
    if (reply.status != kReplyTimeout) return ReplyErrorLocked(reply);
    if (Clock::now() >= deadline) {
      return DeadlineExceeded("rank " + std::to_string(rank_) + " waited " +
                              FormatSeconds(timeout) + " for key " + Quote(key) +
                              " in the store at " + address_ +
                              "; the rank that sets it may have failed or not started");
    }
    if (Interrupted()) return InterruptedWait("key " + Quote(key));
  }
}

StatusOr<int64_t> TcpStoreClient::Add(std::string_view key, int64_t delta) {
  RETURN_IF_ERROR(CheckKey(key));
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Reply reply, RoundTripLocked(kOpAdd, {key}, EncodeI64(delta), milliseconds(0)));
  if (reply.status != kReplyOk) return ReplyErrorLocked(reply);
  if (reply.value.size() != 8) {
    return Broken("malformed ADD reply of " + std::to_string(reply.value.size()) + " bytes");
  }
  return DecodeI64(reply.value);
}

Status TcpStoreClient::Wait(const std::vector<std::string>& keys, milliseconds timeout) {
  if (keys.empty()) {
    return InvalidArgumentError("rank " + std::to_string(rank_) + ": Wait needs at least one key");
  }
  if (keys.size() > kMaxWaitKeys) {
    return ResourceExhaustedError("rank " + std::to_string(rank_) + ": Wait on " +
                                  std::to_string(keys.size()) + " keys exceeds the limit of " +
                                  std::to_string(kMaxWaitKeys));
  }
  std::vector<std::string_view> views;
  views.reserve(keys.size());
  for (const std::string& key : keys) {
    RETURN_IF_ERROR(CheckKey(key));
    views.emplace_back(key);
  }
  std::lock_guard<std::mutex> lock(mu_);
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    ASSIGN_OR_RETURN(Reply reply, RoundTripLocked(kOpWait, views, {}, NextWaitSlice(deadline)));
    if (reply.status == kReplyOk) return Status::Ok();
    if (reply.status != kReplyTimeout) return ReplyErrorLocked(reply);
    if (Clock::now() >= deadline) {
      return DeadlineExceeded("rank " + std::to_string(rank_) + " waited " +
                              FormatSeconds(timeout) + " for " + std::to_string(keys.size()) +
                              " key(s) in the store at " + address_ +
                              "; still missing: " + Quote(reply.value));
    }
    if (Interrupted()) return InterruptedWait("key " + Quote(reply.value));
  }
}

Status TcpStoreClient::Barrier(std::string_view name, int world_size, milliseconds timeout) {
  if (world_size <= 0) {
    return InvalidArgumentError("rank " + std::to_string(rank_) + ": barrier " + Quote(name) +
                                " needs a positive world size, not " + std::to_string(world_size));
  }
  const std::string arrived_key = "barrier/" + std::string(name) + "/arrived";
  const std::string open_key = "barrier/" + std::string(name) + "/open";
  ASSIGN_OR_RETURN(int64_t arrived, Add(arrived_key, 1));
  if (arrived > world_size) {
    return FailedPreconditionError("rank " + std::to_string(rank_) + ": barrier " + Quote(name) +
                                   " saw " + std::to_string(arrived) + " arrivals for a world of " +
                                   std::to_string(world_size) + "; barrier names are single-use");
  }
  // The last to arrive opens the barrier for everyone, itself included.
  if (arrived == world_size) RETURN_IF_ERROR(Set(open_key, ""));
  Status waited = Wait({open_key}, timeout);
  if (waited.code() != StatusCode::kDeadlineExceeded) return waited;
  StatusOr<int64_t> now_arrived = Add(arrived_key, 0);
  const std::string count =
      now_arrived.ok() ? std::to_string(*now_arrived) : std::string("an unknown number");
  return DeadlineExceeded("rank " + std::to_string(rank_) + " waited " + FormatSeconds(timeout) +
                          " at barrier " + Quote(name) + " in the store at " + address_ +
                          ": only " + count + " of " + std::to_string(world_size) +
                          " ranks arrived");
}

}  // namespace pacer::worker
