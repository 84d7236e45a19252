// The health server never keeps a request body (nothing it serves takes
// one): it answers once the headers are in, and what the client sends after
// is dropped as it arrives, so a client cannot make the controller hold a
// body in memory. (The cpprestsdk listener it replaced kept every body
// whole: a 600 MB POST to /healthz grew the controller by 464 MiB.) Raw
// sockets, so that the client declares a huge body and then sends 256 MiB of
// it; the server runs in this process, whose resident memory is measured.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "observe/health_server.h"
#include "observe/log.h"

namespace pacer::controller {
namespace {

// Both ports chosen by the system, on `address`.
HealthServerOptions ChosenPorts(const std::string& address) {
  HealthServerOptions options;
  options.bind_address = address;
  options.metrics_port = 0;
  options.probe_port = 0;
  return options;
}

// A connected socket whose blocking calls give up after 30 s (a server that
// neither reads nor answers fails the test instead of hanging it).
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval timeout{};
  timeout.tv_sec = 30;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// The answer's status line, read up to its end.
std::string StatusLine(int fd) {
  std::string line;
  char c = 0;
  while (line.size() < 256 && recv(fd, &c, 1, 0) == 1 && c != '\n') line += c;
  return line;
}

// This process's resident memory (VmRSS), in bytes; 0 when unknown.
size_t ResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // kB
  }
  return 0;
}

class HealthServerBodyTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    SetLogSink([](std::string_view) {});
  }
  void TearDown() override { SetLogSink({}); }
};

TEST_P(HealthServerBodyTest, TheAnswerComesAfterTheHeadersAndTheBodyIsNotKept) {
  HealthServer server(ChosenPorts("127.0.0.1"), nullptr);
  ASSERT_TRUE(server.Start().ok());
  const int fd = Connect(server.probe_port());
  ASSERT_GE(fd, 0);

  // A body far larger than memory is announced and a first piece sent.
  const bool chunked = std::string(GetParam()).find("chunked") != std::string::npos;
  // A piece of the body, framed as a chunk when the body is chunked.
  const auto piece = [chunked](size_t bytes) {
    std::string data(bytes, 'x');
    if (!chunked) return data;
    char size[32];
    std::snprintf(size, sizeof(size), "%zx\r\n", bytes);
    return size + data + "\r\n";
  };
  ASSERT_TRUE(SendAll(fd, std::string("POST /healthz HTTP/1.1\r\nHost: x\r\n") + GetParam() +
                              "\r\n\r\n" + piece(1024)));
  // The answer comes without the body: a server that waited for it would
  // wait forever (the receive times out after 30 s).
  EXPECT_EQ(StatusLine(fd), "HTTP/1.1 405 Method Not Allowed\r");

  // The rest of the body goes nowhere: the server's resident memory grows
  // by far less than the 256 MiB sent (a server that kept it would grow by
  // all of it). Sending stops early if the server hangs up instead.
  constexpr size_t kMiB = size_t{1} << 20;
  const size_t before_bytes = ResidentBytes();
  ASSERT_GT(before_bytes, 0u);
  const std::string block = piece(kMiB);
  size_t sent_bytes = 0;
  while (sent_bytes < 256 * kMiB && SendAll(fd, block)) sent_bytes += block.size();
  close(fd);
  const size_t after_bytes = ResidentBytes();
  EXPECT_LT(after_bytes, before_bytes + 64 * kMiB)
      << "resident memory grew by " << (after_bytes - before_bytes) / kMiB << " MiB while "
      << sent_bytes / kMiB << " MiB of body were sent";

  // The server still serves.
  const int probe = Connect(server.probe_port());
  ASSERT_GE(probe, 0);
  ASSERT_TRUE(SendAll(probe, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(StatusLine(probe), "HTTP/1.1 200 OK\r");
  close(probe);
}

// Clients that hold every thread of the metrics port (each streaming a body
// without end) leave the probe port's threads free: the probe is answered.
// (With one server for both ports, /healthz went unanswered and the
// kubelet would restart the controller.)
TEST(HealthServerThreadsTest, ClientsHoldingTheMetricsPortDoNotDelayAProbe) {
  SetLogSink([](std::string_view) {});
  HealthServer server(ChosenPorts("127.0.0.1"), nullptr);
  ASSERT_TRUE(server.Start().ok());

  // As many as the metrics port has threads (health_server.h): each is
  // being served once the server has taken more of its body than the
  // socket buffers hold (a few MiB on loopback).
  constexpr int kHolders = 4;
  constexpr size_t kServedBytes = size_t{32} << 20;
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable cv;
  int served = 0;  // guarded by mu
  std::vector<std::thread> holders;
  for (int i = 0; i < kHolders; ++i) {
    holders.emplace_back([&, port = server.metrics_port()] {
      const int fd = Connect(port);
      if (fd < 0) return;
      timeval timeout{};
      timeout.tv_sec = 2;  // a blocked send gives up, so that the thread can see `stop`
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
      SendAll(fd, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1099511627776\r\n\r\n");
      const std::string block(64 << 10, 'x');
      size_t sent = 0;
      bool counted = false;
      while (!stop.load()) {
        const ssize_t n = send(fd, block.data(), block.size(), MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) break;  // the server hung up
        if (n > 0) sent += static_cast<size_t>(n);
        if (!counted && sent > kServedBytes) {
          counted = true;
          std::lock_guard<std::mutex> lock(mu);
          ++served;
          cv.notify_all();
        }
      }
      close(fd);
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    // The bound only turns a server that serves none of them into a failure.
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return served == kHolders; }))
        << served << " of " << kHolders << " holders are being served";
  }
  // The probe: its receive waits up to 30 s (Connect), far past any answer
  // from a server with a free thread.
  const int probe = Connect(server.probe_port());
  ASSERT_GE(probe, 0);
  ASSERT_TRUE(SendAll(probe, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(StatusLine(probe), "HTTP/1.1 200 OK\r");
  close(probe);
  stop = true;
  for (std::thread& t : holders) t.join();
  SetLogSink({});
}

// Debian's civetweb has no IPv6: an IPv6 bind address is refused as such,
// not as a port that cannot be listened on.
TEST(HealthServerThreadsTest, AnIpv6AddressSaysWhyItCannotBeUsed) {
  SetLogSink([](std::string_view) {});
  HealthServer server(ChosenPorts("::1"), nullptr);
  const Status started = server.Start();
  if (started.ok()) {
    EXPECT_GT(server.probe_port(), 0) << "a civetweb with IPv6 listens";
  } else {
    EXPECT_EQ(started.code(), StatusCode::kInvalidArgument) << started.ToString();
    EXPECT_NE(started.message().find("IPv6"), std::string::npos) << started.ToString();
  }
  SetLogSink({});
}

INSTANTIATE_TEST_SUITE_P(DeclaredOrChunked, HealthServerBodyTest,
                         ::testing::Values("Content-Length: 1099511627776",
                                           "Transfer-Encoding: chunked"),
                         [](const ::testing::TestParamInfo<const char*>& param) {
                           return param.index == 0 ? std::string("ContentLength")
                                                   : std::string("Chunked");
                         });

}  // namespace
}  // namespace pacer::controller
