#include "core/tcp_store.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace pacer::worker {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Long enough never to fire on a loaded machine when the wait should succeed.
constexpr milliseconds kGenerous = seconds(20);

std::unique_ptr<TcpStoreServer> StartServer() {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

std::unique_ptr<TcpStoreClient> ConnectClient(int port, int rank) {
  auto client = TcpStoreClient::Connect("127.0.0.1", port, rank, kGenerous);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(client).value() : nullptr;
}

std::string Address(int port) { return "127.0.0.1:" + std::to_string(port); }

// A plain socket, for speaking malformed protocol to the server.
int RawConnect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

void SendRaw(int fd, const std::string& bytes) {
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// Reads until the server closes the connection; false if it is still open
// when the deadline passes. Returns what was read in *received.
bool ReadUntilClosed(int fd, std::string* received) {
  const auto deadline = std::chrono::steady_clock::now() + kGenerous;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;  // EOF or reset: closed either way
    received->append(buf, static_cast<std::size_t>(n));
  }
}

std::string U32(uint32_t v) {
  std::string out;
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
  return out;
}
std::string U64(uint64_t v) {
  return U32(static_cast<uint32_t>(v >> 32)) + U32(static_cast<uint32_t>(v));
}

TEST(TcpStoreTest, SetThenGetFromAnotherClient) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->port(), 0);
  auto writer = ConnectClient(server->port(), 0);
  auto reader = ConnectClient(server->port(), 1);
  ASSERT_NE(writer, nullptr);
  ASSERT_NE(reader, nullptr);

  // Binary values with NULs survive, and a later Set replaces the value.
  std::string nccl_id(128, '\0');
  for (std::size_t i = 0; i < nccl_id.size(); ++i) nccl_id[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(writer->Set("nccl/unique-id", "first").ok());
  ASSERT_TRUE(writer->Set("nccl/unique-id", nccl_id).ok());
  auto got = reader->Get("nccl/unique-id", kGenerous);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, nccl_id);

  ASSERT_TRUE(writer->Set("empty", "").ok());
  auto empty = reader->Get("empty", kGenerous);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, "");
}

TEST(TcpStoreTest, LargeValueRoundTrips) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = ConnectClient(server->port(), 0);
  ASSERT_NE(client, nullptr);
  std::string value(8 << 20, 'x');
  value[12345] = '\0';
  ASSERT_TRUE(client->Set("big", value).ok());
  auto got = client->Get("big", kGenerous);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, value);
  // The longest allowed key works.
  ASSERT_TRUE(client->Set(std::string(kMaxKeyBytes, 'k'), "v").ok());
}

TEST(TcpStoreTest, GetBlocksUntilAnotherClientSets) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto waiter = ConnectClient(server->port(), 1);
  auto setter = ConnectClient(server->port(), 0);
  ASSERT_NE(waiter, nullptr);
  ASSERT_NE(setter, nullptr);

  StatusOr<std::string> got = InternalError("not run");
  std::thread waiting([&] {
    // Announce through the store that the Get is about to start, so the
    // setter sets the key only after the waiter asked for it.
    if (!waiter->Set("waiter/ready", "1").ok()) return;
    got = waiter->Get("master/value", kGenerous);
  });
  ASSERT_TRUE(setter->Get("waiter/ready", kGenerous).ok());
  ASSERT_TRUE(setter->Set("master/value", "hello").ok());
  waiting.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "hello");
}

TEST(TcpStoreTest, GetOfMissingKeyTimesOutNamingKeyRankAndAddress) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = ConnectClient(server->port(), 5);
  ASSERT_NE(client, nullptr);

  auto got = client->Get("nccl/unique-id", milliseconds(200));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kDeadlineExceeded);
  const std::string message = got.status().message();
  EXPECT_NE(message.find("\"nccl/unique-id\""), std::string::npos) << message;
  EXPECT_NE(message.find("rank 5"), std::string::npos) << message;
  EXPECT_NE(message.find(Address(server->port())), std::string::npos) << message;
  EXPECT_NE(message.find("0.2 s"), std::string::npos) << message;

  // A timeout is an answer, not a broken connection: the client goes on.
  ASSERT_TRUE(client->Set("after", "ok").ok());
  auto after = client->Get("after", kGenerous);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(*after, "ok");
}

TEST(TcpStoreTest, ConnectToPortWithoutServerTimesOutNamingAddress) {
  // Bound but not listening: connections are refused, and no other test can
  // take the port while we hold it.
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);

  auto client = TcpStoreClient::Connect("127.0.0.1", port, 3, milliseconds(300));
  close(fd);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kDeadlineExceeded);
  const std::string message = client.status().message();
  EXPECT_NE(message.find("rank 3 waited 0.3 s for the store at " + Address(port)),
            std::string::npos)
      << message;
}

// A listening socket on a free loopback port that is not a store.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd, 64), 0);
    EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port = ntohs(addr.sin_port);
  }
  ~Listener() { close(fd); }
};

TEST(TcpStoreTest, ConnectToAServiceThatIsNotAStoreTimesOutNamingWhatItSaid) {
  // An HTTP server at MASTER_ADDR:MASTER_PORT: every connection gets its
  // error page. The client kept the connection as a store's, and its first
  // request failed as a lost connection (the worker's exit 4).
  Listener http;
  std::atomic<bool> done{false};
  std::thread server([&] {
    while (!done.load()) {
      pollfd p{http.fd, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int conn = accept4(http.fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) continue;
      const std::string page = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
      static_cast<void>(send(conn, page.data(), page.size(), MSG_NOSIGNAL));
      close(conn);
    }
  });
  auto client = TcpStoreClient::Connect("127.0.0.1", http.port, 1, milliseconds(500));
  done = true;
  server.join();
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kDeadlineExceeded);
  const std::string message = client.status().message();
  EXPECT_NE(message.find("rank 1 waited 0.5 s for the store at " + Address(http.port) +
                         " (answers, but not as a pacer-worker store: it sent \"HTTP/1.1 400 Bad "),
            std::string::npos)
      << message;
}

TEST(TcpStoreTest, ConnectToAListenerThatNeverAnswersEndsAtTheTimeoutOrTheStop) {
  // The kernel completes the connection; nobody ever reads it. The client
  // took it for the store and its first request waited twice the timeout.
  Listener silent;
  auto client = TcpStoreClient::Connect("127.0.0.1", silent.port, 2, milliseconds(500));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(client.status().message().find("no answer to the store's handshake"), std::string::npos)
      << client.status().message();

  // A stopping rank does not wait out a long timeout for the answer.
  auto stopping =
      TcpStoreClient::Connect("127.0.0.1", silent.port, 2, seconds(600), [] { return true; });
  ASSERT_FALSE(stopping.ok());
  EXPECT_EQ(stopping.status().code(), StatusCode::kAborted) << stopping.status().ToString();
}

TEST(TcpStoreTest, ConnectRejectsInvalidPort) {
  auto client = TcpStoreClient::Connect("127.0.0.1", 0, 0, milliseconds(100));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);
}

TEST(TcpStoreTest, AddIsAtomicUnderConcurrentClients) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 8;
  constexpr int kIncrements = 1000;
  std::vector<std::vector<int64_t>> seen(kClients);
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto client = TcpStoreClient::Connect("127.0.0.1", server->port(), c, kGenerous);
      if (!client.ok()) return;
      for (int i = 0; i < kIncrements; ++i) {
        auto total = (*client)->Add("counter", 1);
        if (!total.ok()) return;
        seen[static_cast<std::size_t>(c)].push_back(*total);
      }
    });
  }
  for (std::thread& t : threads) t.join();

  // Every increment saw a distinct total: together exactly 1..8000.
  std::vector<int64_t> all;
  for (const auto& s : seen) all.insert(all.end(), s.begin(), s.end());
  ASSERT_EQ(all.size(), static_cast<std::size_t>(kClients * kIncrements));
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(all.size());
  std::iota(expected.begin(), expected.end(), 1);
  EXPECT_EQ(all, expected);

  auto client = ConnectClient(server->port(), 0);
  ASSERT_NE(client, nullptr);
  auto total = client->Add("counter", 0);
  ASSERT_TRUE(total.ok());
  EXPECT_EQ(*total, kClients * kIncrements);
  auto down = client->Add("counter", -8001);
  ASSERT_TRUE(down.ok());
  EXPECT_EQ(*down, -1);
}

TEST(TcpStoreTest, AddOnNonCounterFailsAndConnectionStaysUsable) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = ConnectClient(server->port(), 0);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Set("name", "not a counter").ok());
  auto total = client->Add("name", 1);
  ASSERT_FALSE(total.ok());
  EXPECT_EQ(total.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(client->Set("still", "works").ok());
}

TEST(TcpStoreTest, WaitReturnsWhenAllKeysExistAndNamesTheMissingOne) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = ConnectClient(server->port(), 2);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Set("a", "1").ok());
  ASSERT_TRUE(client->Set("b", "2").ok());
  EXPECT_TRUE(client->Wait({"a", "b"}, kGenerous).ok());

  Status missing = client->Wait({"a", "c"}, milliseconds(150));
  EXPECT_EQ(missing.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(missing.message().find("still missing: \"c\""), std::string::npos) << missing.message();
  EXPECT_NE(missing.message().find("rank 2"), std::string::npos) << missing.message();
  EXPECT_EQ(client->Wait({}, kGenerous).code(), StatusCode::kInvalidArgument);
}

TEST(TcpStoreTest, BarrierReleasesParticipantsOnlyAfterAllArrive) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  constexpr int kWorld = 4;
  std::atomic<bool> last_has_arrived{false};
  std::atomic<int> released_early{0};
  std::atomic<int> released{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      auto client = TcpStoreClient::Connect("127.0.0.1", server->port(), r, kGenerous);
      if (!client.ok()) return;
      TcpStoreClient& store = **client;
      if (r == kWorld - 1) {
        // The last rank holds back until the other three are at the
        // barrier, so they are provably waiting when it arrives.
        if (!store.Get("three-arrived", kGenerous).ok()) return;
        last_has_arrived = true;
      } else {
        auto before = store.Add("entered", 1);
        if (!before.ok()) return;
        if (*before == kWorld - 1 && !store.Set("three-arrived", "").ok()) return;
      }
      if (!store.Barrier("init", kWorld, kGenerous).ok()) return;
      if (!last_has_arrived) ++released_early;
      ++released;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(released, kWorld);
  EXPECT_EQ(released_early, 0);
}

TEST(TcpStoreTest, BarrierTimeoutSaysHowManyArrived) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = ConnectClient(server->port(), 1);
  ASSERT_NE(client, nullptr);
  Status status = client->Barrier("step/7", 2, milliseconds(150));
  EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(status.message().find("only 1 of 2 ranks arrived"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("\"step/7\""), std::string::npos) << status.message();
  EXPECT_EQ(client->Barrier("x", 0, kGenerous).code(), StatusCode::kInvalidArgument);
}

TEST(TcpStoreTest, OversizedRequestsAreRefusedAndServerServesOthers) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = ConnectClient(server->port(), 0);
  ASSERT_NE(client, nullptr);

  // The client refuses before sending, and its connection stays usable.
  Status too_big = client->Set("big", std::string(kMaxValueBytes + 1, 'x'));
  EXPECT_EQ(too_big.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.message().find("\"big\""), std::string::npos) << too_big.message();
  EXPECT_EQ(client->Set(std::string(kMaxKeyBytes + 1, 'k'), "v").code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(client->Set("small", "ok").ok());

  // A peer that declares a too-large value gets an error reply (status 2,
  // TOO_LARGE) and the connection closed, without the server reading 1 GiB.
  int fd = RawConnect(server->port());
  SendRaw(fd, std::string("\x01", 1) + U32(0) + U32(1) + U32(3) + "big" + U64(uint64_t{1} << 30));
  std::string reply;
  EXPECT_TRUE(ReadUntilClosed(fd, &reply));
  close(fd);
  ASSERT_GE(reply.size(), 9u);
  EXPECT_EQ(reply[0], 2);
  EXPECT_NE(reply.find("exceeds the limit"), std::string::npos) << reply;

  // Same for an oversized key.
  fd = RawConnect(server->port());
  SendRaw(fd, std::string("\x02", 1) + U32(0) + U32(1) + U32(5000));
  reply.clear();
  EXPECT_TRUE(ReadUntilClosed(fd, &reply));
  close(fd);
  ASSERT_GE(reply.size(), 1u);
  EXPECT_EQ(reply[0], 2);

  auto got = client->Get("small", kGenerous);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "ok");
}

// An empty key from the network (the client refuses to send one): a GET
// of "" timed out with "" as the missing key, which also means "none
// missing", and read data_.find("")->second through end(). Refused as a
// bad request now; the server serves others.
// Connections beyond the limit are closed at once, so whatever reaches the
// rendezvous port cannot take a thread per connection without bound; the
// ranks already connected are served, and a closed connection frees a slot.
TEST(TcpStoreTest, ConnectionsBeyondTheLimitAreClosedAndTheOthersServed) {
  auto started = TcpStoreServer::Start("127.0.0.1", 0, /*max_connections=*/2);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  const int port = (*started)->port();
  auto a = ConnectClient(port, 0);
  auto b = ConnectClient(port, 1);
  ASSERT_TRUE(a && b);
  // A round trip each: both connections are accepted and being served.
  ASSERT_TRUE(a->Set("a", "1").ok());
  ASSERT_TRUE(b->Set("b", "2").ok());

  const int third = RawConnect(port);
  std::string received;
  EXPECT_TRUE(ReadUntilClosed(third, &received)) << "the third connection is closed";
  EXPECT_EQ(received, "") << "without an answer";
  close(third);
  auto got = a->Get("b", kGenerous);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "2");

  // Once a rank's connection is gone, a new one is served (the server notices
  // the close on its own schedule: try until it has).
  b.reset();
  const auto deadline = std::chrono::steady_clock::now() + kGenerous;
  bool served = false;
  while (!served && std::chrono::steady_clock::now() < deadline) {
    auto c = ConnectClient(port, 1);
    served = c != nullptr && c->Set("c", "3").ok();
  }
  EXPECT_TRUE(served);
}

TEST(TcpStoreTest, AnEmptyKeyIsABadRequest) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  for (const char op : {'\x02', '\x04'}) {  // GET, WAIT
    int fd = RawConnect(server->port());
    SendRaw(fd, std::string(1, op) + U32(1) + U32(1) + U32(0) + U64(0));
    std::string reply;
    EXPECT_TRUE(ReadUntilClosed(fd, &reply));
    close(fd);
    ASSERT_GE(reply.size(), 9u);
    EXPECT_EQ(reply[0], 3) << "BAD_REQUEST";
    EXPECT_NE(reply.find("empty key"), std::string::npos) << reply;
  }
  auto client = ConnectClient(server->port(), 0);
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(client->Set("k", "v").ok());
  auto got = client->Get("k", kGenerous);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "v");
}

TEST(TcpStoreTest, GarbageClosesThatConnectionOnly) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = ConnectClient(server->port(), 0);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Set("k", "v").ok());

  // Something that is not our protocol at all.
  int fd = RawConnect(server->port());
  SendRaw(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string reply;
  EXPECT_TRUE(ReadUntilClosed(fd, &reply));
  close(fd);

  // A well-formed header with an impossible key count.
  fd = RawConnect(server->port());
  SendRaw(fd, std::string("\x04", 1) + U32(0) + U32(0xffffffffu));
  reply.clear();
  EXPECT_TRUE(ReadUntilClosed(fd, &reply));
  close(fd);

  // A frame cut short by a peer that goes away.
  fd = RawConnect(server->port());
  SendRaw(fd, std::string("\x01", 1) + U32(0) + U32(1) + U32(10) + "abc");
  close(fd);

  // The well-behaved client never noticed.
  auto got = client->Get("k", kGenerous);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "v");
  auto other = ConnectClient(server->port(), 1);
  ASSERT_NE(other, nullptr);
  EXPECT_TRUE(other->Get("k", kGenerous).ok());
}

TEST(TcpStoreTest, StoppingServerFailsBlockedGetAsUnavailable) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = ConnectClient(server->port(), 4);
  ASSERT_NE(client, nullptr);
  StatusOr<std::string> got = InternalError("not run");
  // The Get may be blocked in the server or not yet sent when the server
  // stops; either way it must fail at once with Unavailable rather than
  // wait out its minute.
  std::thread waiting([&] { got = client->Get("never", seconds(60)); });
  server.reset();
  waiting.join();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status().ToString();
  EXPECT_NE(got.status().message().find("rank 4"), std::string::npos);
  // The connection is gone for good; later calls say so.
  EXPECT_EQ(client->Set("k", "v").code(), StatusCode::kUnavailable);
}

// Interrupts (tcp_store.h): a rank that is stopping gives up a wait whose key
// is missing within about kInterruptCheckInterval instead of waiting out its
// timeout (a SIGTERM while the peers of a start-up gather was answered by the
// supervisor's SIGKILL 25 s later). The predicate here is already true, so
// nothing is timed: only the outcome, and a generous bound far below the
// minute the wait would otherwise take.
TEST(TcpStoreInterruptTest, AGetOrWaitForAMissingKeyGivesUpOnceTheRankIsStopping) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = ConnectClient(server->port(), 3);
  ASSERT_NE(client, nullptr);
  client->SetInterrupt([] { return true; });
  EXPECT_TRUE(client->Interrupted());
  const auto start = std::chrono::steady_clock::now();
  StatusOr<std::string> got = client->Get("peer/never", seconds(60));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kAborted) << got.status().ToString();
  EXPECT_NE(got.status().message().find("rank 3 gave up waiting for key \"peer/never\""),
            std::string::npos)
      << got.status().message();
  EXPECT_NE(got.status().message().find("the rank is stopping"), std::string::npos);
  const Status waited = client->Wait({"peer/never", "peer/either"}, seconds(60));
  EXPECT_EQ(waited.code(), StatusCode::kAborted) << waited.ToString();
  const Status barrier = client->Barrier("never-full", 2, seconds(60));
  EXPECT_EQ(barrier.code(), StatusCode::kAborted) << barrier.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(30));

  // The connection stayed in step, and what is there is still read: a
  // stopping rank can announce its stop and read its peers' answers.
  ASSERT_TRUE(client->Set("k", "v").ok());
  auto present = client->Get("k", seconds(60));
  ASSERT_TRUE(present.ok()) << present.status().ToString();
  EXPECT_EQ(*present, "v");
  EXPECT_TRUE(client->Wait({"k"}, seconds(60)).ok());

  // Cleared, a wait runs to its timeout again.
  client->SetInterrupt(nullptr);
  EXPECT_FALSE(client->Interrupted());
  EXPECT_EQ(client->Get("peer/never", milliseconds(300)).status().code(),
            StatusCode::kDeadlineExceeded);
}

// The predicate is asked again while the wait goes on, not once at its
// start: a stop that arrives in the middle of a wait ends it.
TEST(TcpStoreInterruptTest, AWaitAsksAgainUntilTheStopArrives) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  std::atomic<int> asked{0};
  auto connected = TcpStoreClient::Connect("127.0.0.1", server->port(), 1, kGenerous,
                                           [&asked] { return ++asked >= 3; });
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  StatusOr<std::string> got = (*connected)->Get("runner/resume-step", seconds(60));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kAborted) << got.status().ToString();
  EXPECT_EQ(asked.load(), 3);
}

// Connecting to a store that is not (yet) there retries until the timeout,
// unless the rank is stopping.
TEST(TcpStoreInterruptTest, ConnectingGivesUpOnceTheRankIsStopping) {
  int port = 0;
  {
    auto gone = StartServer();  // a port where nothing listens once it is gone
    ASSERT_NE(gone, nullptr);
    port = gone->port();
  }
  const auto start = std::chrono::steady_clock::now();
  auto connected = TcpStoreClient::Connect("127.0.0.1", port, 2, seconds(60), [] { return true; });
  ASSERT_FALSE(connected.ok());
  EXPECT_EQ(connected.status().code(), StatusCode::kAborted) << connected.status().ToString();
  EXPECT_NE(connected.status().message().find("rank 2 gave up connecting to the store at " +
                                              Address(port)),
            std::string::npos)
      << connected.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(30));
}

}  // namespace
}  // namespace pacer::worker
