#include "core/gloo_store.h"

#include <gloo/allreduce.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/tcp_store.h"

namespace pacer::worker {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kGenerous = seconds(30);

std::shared_ptr<gloo::transport::Device> LoopbackDevice() {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  return gloo::transport::tcp::CreateDevice(attr);
}

// What rank r contributes at position i; the sum over ranks is known.
float Contribution(int rank, std::size_t i) {
  return static_cast<float>(rank + 1) * static_cast<float>(i % 97 + 1);
}

// Real Gloo collectives rendezvous through our store: four ranks, each with
// its own store connection and TCP device, all-reduce a vector.
TEST(GlooStoreTest, FourRanksAllReduceThroughTheStore) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const int port = (*server)->port();

  constexpr int kWorld = 4;
  constexpr std::size_t kElements = 4099;  // not a multiple of the world: uneven ring chunks
  std::vector<std::vector<float>> data(kWorld);
  std::vector<std::string> errors(kWorld);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kWorld; ++rank) {
    ranks.emplace_back([&, rank] {
      const auto r = static_cast<std::size_t>(rank);
      try {
        auto client = TcpStoreClient::Connect("127.0.0.1", port, rank, kGenerous);
        if (!client.ok()) {
          errors[r] = client.status().ToString();
          return;
        }
        GlooStore store(**client, kGenerous);
        // A prefix keeps this group's keys apart from anything else in the
        // job's store (the NCCL id, barriers, a second group).
        gloo::rendezvous::PrefixStore group_store("gloo/cpu-group", store);
        auto device = LoopbackDevice();
        auto context = std::make_shared<gloo::rendezvous::Context>(rank, kWorld);
        context->setTimeout(kGenerous);
        context->connectFullMesh(group_store, device);

        std::vector<float>& mine = data[r];
        mine.resize(kElements);
        for (std::size_t i = 0; i < kElements; ++i) mine[i] = Contribution(rank, i);
        gloo::AllreduceOptions options(context);
        options.setOutput(mine.data(), mine.size());
        void (*sum)(void*, const void*, const void*, std::size_t) = &gloo::sum<float>;
        options.setReduceFunction(sum);
        gloo::allreduce(options);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (std::thread& t : ranks) t.join();

  for (int rank = 0; rank < kWorld; ++rank) {
    const auto r = static_cast<std::size_t>(rank);
    ASSERT_EQ(errors[r], "") << "rank " << rank;
    ASSERT_EQ(data[r].size(), kElements);
    for (std::size_t i = 0; i < kElements; ++i) {
      float expected = 0;
      for (int other = 0; other < kWorld; ++other) expected += Contribution(other, i);
      ASSERT_EQ(data[r][i], expected) << "rank " << rank << " element " << i;
    }
  }
}

TEST(GlooStoreTest, SetGetRoundTripBytes) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto client = TcpStoreClient::Connect("127.0.0.1", (*server)->port(), 0, kGenerous);
  ASSERT_TRUE(client.ok());
  GlooStore store(**client, kGenerous);
  const std::vector<char> address = {'\0', '\x7f', 'a', '\xff'};
  store.set("0", address);
  store.wait({"0"});
  EXPECT_EQ(store.get("0"), address);
}

TEST(GlooStoreTest, TimeoutsBecomeGlooIoExceptionsWithOurMessage) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  const int port = (*server)->port();
  auto client = TcpStoreClient::Connect("127.0.0.1", port, 2, kGenerous);
  ASSERT_TRUE(client.ok());
  GlooStore store(**client, milliseconds(150));

  try {
    store.get("missing");
    FAIL() << "get of a missing key returned";
  } catch (const gloo::IoException& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("DEADLINE_EXCEEDED"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 2"), std::string::npos) << message;
    EXPECT_NE(message.find("\"missing\""), std::string::npos) << message;
    EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << message;
  }
  // Gloo's "no timeout" still gets our bounded default.
  EXPECT_THROW(store.wait({"missing"}, gloo::kNoTimeout), gloo::IoException);
  // An empty key is the caller's mistake, not an I/O error.
  try {
    store.set("", {});
    FAIL() << "set of an empty key returned";
  } catch (const gloo::IoException&) {
    FAIL() << "an invalid argument is not an I/O error";
  } catch (const gloo::Exception& e) {
    EXPECT_NE(std::string(e.what()).find("INVALID_ARGUMENT"), std::string::npos) << e.what();
  }
}

// A rank whose peer never shows up fails within its timeout, with an error
// that Gloo surfaces as an exception rather than a hang.
TEST(GlooStoreTest, ConnectFullMeshFailsWhenAPeerNeverArrives) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto client = TcpStoreClient::Connect("127.0.0.1", (*server)->port(), 0, kGenerous);
  ASSERT_TRUE(client.ok());
  GlooStore store(**client, milliseconds(300));
  auto device = LoopbackDevice();
  auto context = std::make_shared<gloo::rendezvous::Context>(0, 2);
  context->setTimeout(milliseconds(300));
  try {
    context->connectFullMesh(store, device);
    FAIL() << "connectFullMesh returned without its peer";
  } catch (const gloo::Exception& e) {
    // The message is ours: who waited, for which key, at which store.
    const std::string message = e.what();
    EXPECT_NE(message.find("rank 0 waited 0.3 s"), std::string::npos) << message;
    EXPECT_NE(message.find("127.0.0.1:" + std::to_string((*server)->port())), std::string::npos)
        << message;
  }
}

}  // namespace
}  // namespace pacer::worker
