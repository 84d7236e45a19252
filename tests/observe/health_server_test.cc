// HealthServer over real HTTP on loopback: /healthz and /readyz answer 200
// or 500/503 naming the failing checks, /metrics serves the controller's
// registry, the ports are the ones reported, and after Stop nothing answers.
#include "observe/health_server.h"

// cpprestsdk's U() macro would break GoogleTest's templates.
#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/http_client.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "observe/controller_metrics.h"
#include "observe/log.h"

namespace pacer::controller {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

struct Reply {
  int status = 0;
  std::string body;
  std::string content_type;
};

// One GET with a fresh client (no pooled connection outlives the call);
// nullopt when no HTTP answer came (refused, reset, timed out).
std::optional<Reply> Request(int port, const std::string& path,
                             const web::http::method& method = web::http::methods::GET,
                             std::chrono::seconds timeout = std::chrono::seconds(30)) {
  web::http::client::http_client_config config;
  config.set_timeout(timeout);  // 30 s: generous for a loaded 2-core machine
  try {
    web::http::client::http_client client("http://127.0.0.1:" + std::to_string(port), config);
    web::http::http_response response = client.request(method, path).get();
    Reply reply;
    reply.status = response.status_code();
    reply.content_type = response.headers().content_type();
    reply.body = response.extract_utf8string(true).get();
    return reply;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

HealthServerOptions Loopback(int metrics_port = 0, int probe_port = 0) {
  HealthServerOptions options;
  options.bind_address = "127.0.0.1";
  options.metrics_port = metrics_port;
  options.probe_port = probe_port;
  return options;
}

// Keeps the server's own log lines out of the test output.
class HealthServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetLogSink([](std::string_view) {});
  }
  void TearDown() override { SetLogSink({}); }
};

TEST_F(HealthServerTest, ServesProbesAndMetricsOnSeparateChosenPorts) {
  ControllerMetrics metrics("9.9.9-test");
  HealthServer server(Loopback(), metrics.registry());
  EXPECT_FALSE(server.running());
  EXPECT_EQ(server.metrics_port(), 0);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_TRUE(server.running());
  const int probe = server.probe_port();
  const int scrape = server.metrics_port();
  ASSERT_GT(probe, 0);
  ASSERT_GT(scrape, 0);
  EXPECT_NE(probe, scrape);

  std::optional<Reply> healthz = Request(probe, "/healthz");
  ASSERT_TRUE(healthz.has_value());
  EXPECT_EQ(healthz->status, 200);
  EXPECT_EQ(healthz->body, "ok");
  EXPECT_THAT(healthz->content_type, StartsWith("text/plain"));
  std::optional<Reply> readyz = Request(probe, "/readyz");
  ASSERT_TRUE(readyz.has_value());
  EXPECT_EQ(readyz->status, 200) << "no readiness checks: nothing to wait for";
  EXPECT_EQ(readyz->body, "ok");

  metrics.SetQueueDepth(3);
  metrics.SetLeader(true);
  std::optional<Reply> scraped = Request(scrape, "/metrics");
  ASSERT_TRUE(scraped.has_value());
  EXPECT_EQ(scraped->status, 200);
  EXPECT_THAT(scraped->content_type, HasSubstr("version=0.0.4"));
  EXPECT_THAT(scraped->body, HasSubstr("pacer_controller_build_info{version=\"9.9.9-test\"} 1"));
  EXPECT_THAT(scraped->body, HasSubstr("\npacer_controller_workqueue_depth 3\n"));
  EXPECT_THAT(scraped->body, HasSubstr("\npacer_controller_leader 1\n"));

  // Live values: the next scrape sees the change.
  metrics.SetQueueDepth(11);
  scraped = Request(scrape, "/metrics");
  ASSERT_TRUE(scraped.has_value());
  EXPECT_THAT(scraped->body, HasSubstr("\npacer_controller_workqueue_depth 11\n"));

  // Each port serves only its own paths.
  std::optional<Reply> wrong = Request(probe, "/metrics");
  ASSERT_TRUE(wrong.has_value());
  EXPECT_EQ(wrong->status, 404);
  wrong = Request(scrape, "/healthz");
  ASSERT_TRUE(wrong.has_value());
  EXPECT_EQ(wrong->status, 404);
  wrong = Request(probe, "/nope");
  ASSERT_TRUE(wrong.has_value());
  EXPECT_EQ(wrong->status, 404);
  EXPECT_THAT(wrong->body, HasSubstr("/healthz"));
}

TEST_F(HealthServerTest, LivenessFailsWithTheFailingCheckNameAndMessage) {
  HealthServer server(Loopback(), nullptr);
  std::atomic<bool> loop_alive{true};
  ASSERT_TRUE(server
                  .AddLivenessCheck("reconcile-loop",
                                    [&loop_alive] {
                                      return loop_alive ? Status::Ok()
                                                        : UnavailableError(
                                                              "no reconcile finished in 300 s");
                                    })
                  .ok());
  ASSERT_TRUE(server.AddLivenessCheck("ping", [] { return Status::Ok(); }).ok());
  ASSERT_TRUE(server.Start().ok());
  const int port = server.probe_port();

  std::optional<Reply> reply = Request(port, "/healthz");
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->body, "ok");

  loop_alive = false;
  reply = Request(port, "/healthz");
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 500);
  EXPECT_THAT(reply->body,
              HasSubstr("[-]reconcile-loop failed: UNAVAILABLE: no reconcile finished in 300 s\n"));
  EXPECT_THAT(reply->body, HasSubstr("[+]ping ok\n"));
  EXPECT_THAT(reply->body, HasSubstr("healthz check failed"));

  loop_alive = true;
  reply = Request(port, "/healthz");
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 200);

  reply = Request(port, "/healthz?verbose");
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->body, "[+]reconcile-loop ok\n[+]ping ok\nhealthz check passed\n");
}

TEST_F(HealthServerTest, ReadinessWaitsForEveryCheckAndListsTheFailingOnes) {
  HealthServer server(Loopback(), nullptr);
  std::atomic<bool> synced{false};
  std::atomic<bool> leader_known{false};
  ASSERT_TRUE(server.Start().ok());  // checks may come after Start
  ASSERT_TRUE(server
                  .AddReadinessCheck("informers-synced",
                                     [&synced] {
                                       return synced ? Status::Ok()
                                                     : UnavailableError("trainjobs not synced");
                                     })
                  .ok());
  ASSERT_TRUE(server
                  .AddReadinessCheck("leader-election",
                                     [&leader_known] {
                                       return leader_known ? Status::Ok()
                                                           : UnavailableError("no lease read yet");
                                     })
                  .ok());
  const int port = server.probe_port();

  std::optional<Reply> reply = Request(port, "/readyz");
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 503);
  EXPECT_THAT(reply->body,
              HasSubstr("[-]informers-synced failed: UNAVAILABLE: trainjobs not synced"));
  EXPECT_THAT(reply->body, HasSubstr("[-]leader-election failed: UNAVAILABLE: no lease read yet"));
  EXPECT_THAT(reply->body, HasSubstr("readyz check failed"));

  synced = true;
  reply = Request(port, "/readyz");
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 503);
  EXPECT_THAT(reply->body, HasSubstr("[+]informers-synced ok"));
  EXPECT_THAT(reply->body, HasSubstr("[-]leader-election failed"));

  leader_known = true;
  reply = Request(port, "/readyz");
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->body, "ok");

  // Readiness checks are not liveness checks.
  synced = false;
  reply = Request(port, "/healthz");
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 200);
}

TEST_F(HealthServerTest, AThrowingCheckFailsItsProbe) {
  HealthServer server(Loopback(), nullptr);
  ASSERT_TRUE(
      server.AddLivenessCheck("throws", []() -> Status { throw std::runtime_error("kaput"); })
          .ok());
  ASSERT_TRUE(server.Start().ok());
  std::optional<Reply> reply = Request(server.probe_port(), "/healthz");
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 500);
  EXPECT_THAT(reply->body, HasSubstr("[-]throws failed: INTERNAL: check threw: kaput"));
}

TEST_F(HealthServerTest, OnlyGetIsServed) {
  HealthServer server(Loopback(), nullptr);
  ASSERT_TRUE(server.Start().ok());
  std::optional<Reply> reply = Request(server.probe_port(), "/healthz", web::http::methods::POST);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 405);
}

TEST_F(HealthServerTest, EqualPortsServeAllPathsOnOnePort) {
  ControllerMetrics metrics("test");
  // Find a free port by letting a first server pick one.
  int port = 0;
  {
    HealthServer picker(Loopback(0, 0), nullptr);
    ASSERT_TRUE(picker.Start().ok());
    port = picker.probe_port();
  }
  HealthServer server(Loopback(port, port), metrics.registry());
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(server.metrics_port(), port);
  EXPECT_EQ(server.probe_port(), port);
  for (const char* path : {"/healthz", "/readyz", "/metrics"}) {
    std::optional<Reply> reply = Request(port, path);
    ASSERT_TRUE(reply.has_value()) << path;
    EXPECT_EQ(reply->status, 200) << path;
  }
}

TEST_F(HealthServerTest, AfterStopRequestsFailAndStartWorksAgain) {
  ControllerMetrics metrics("test");
  HealthServer server(Loopback(), metrics.registry());
  ASSERT_TRUE(server.Start().ok());
  const int probe = server.probe_port();
  const int scrape = server.metrics_port();
  ASSERT_TRUE(Request(probe, "/healthz").has_value());
  ASSERT_TRUE(Request(scrape, "/metrics").has_value());

  server.Stop();
  EXPECT_FALSE(server.running());
  EXPECT_EQ(server.probe_port(), 0);
  EXPECT_EQ(server.metrics_port(), 0);
  EXPECT_FALSE(Request(probe, "/healthz").has_value());
  EXPECT_FALSE(Request(scrape, "/metrics").has_value());
  server.Stop();  // idempotent

  ASSERT_TRUE(server.Start().ok());
  std::optional<Reply> reply = Request(server.probe_port(), "/healthz");
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, 200);
}

TEST_F(HealthServerTest, StartErrorsSayWhatIsWrong) {
  HealthServer first(Loopback(), nullptr);
  ASSERT_TRUE(first.Start().ok());
  Status again = first.Start();
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition) << again.ToString();

  HealthServer clash(Loopback(0, first.probe_port()), nullptr);
  Status taken = clash.Start();
  EXPECT_EQ(taken.code(), StatusCode::kFailedPrecondition) << taken.ToString();
  EXPECT_THAT(taken.message(), HasSubstr(std::to_string(first.probe_port())));
  EXPECT_FALSE(clash.running());

  HealthServer bad_port(Loopback(70000, 0), nullptr);
  EXPECT_EQ(bad_port.Start().code(), StatusCode::kInvalidArgument);
  HealthServer negative(Loopback(0, -1), nullptr);
  EXPECT_EQ(negative.Start().code(), StatusCode::kInvalidArgument);
}

TEST_F(HealthServerTest, CheckRegistrationIsValidated) {
  HealthServer server(Loopback(), nullptr);
  EXPECT_TRUE(server.AddLivenessCheck("loop", [] { return Status::Ok(); }).ok());
  EXPECT_EQ(server.AddLivenessCheck("loop", [] { return Status::Ok(); }).code(),
            StatusCode::kAlreadyExists);
  EXPECT_TRUE(server.AddReadinessCheck("loop", [] { return Status::Ok(); }).ok())
      << "the lists are separate";
  EXPECT_EQ(server.AddLivenessCheck("", [] { return Status::Ok(); }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(server.AddReadinessCheck("empty", nullptr).code(), StatusCode::kInvalidArgument);
}

// Probes keep arriving while two threads Stop the server at once: every
// probe gets a whole answer or none, Stop waits for the ones in flight, and
// once Stop has returned nothing is served and no check runs.
TEST_F(HealthServerTest, ConcurrentProbesAndStopsAreSafe) {
  HealthServer server(Loopback(), nullptr);
  std::atomic<int> checks_run{0};
  ASSERT_TRUE(server
                  .AddLivenessCheck("count",
                                    [&checks_run] {
                                      ++checks_run;
                                      return Status::Ok();
                                    })
                  .ok());
  ASSERT_TRUE(server.Start().ok());
  const int port = server.probe_port();

  // What one client saw. Acceptable while the server stops: 200 "ok" (served
  // before it closed), 503 (refused as unavailable) or no answer (refused or
  // reset). Anything else (a 404 or 500, a garbled body) is a failure.
  struct Outcomes {
    int ok = 0;
    int unavailable = 0;
    int no_answer = 0;
    std::vector<std::string> malformed;
    bool after_stop_answered = false;  // a request begun after Stop returned
  };
  constexpr int kClients = 4;
  std::vector<Outcomes> outcomes(kClients);
  std::atomic<bool> stopped{false};
  // The clients each report their first 200 before the stops begin, so the
  // stops race probes that are really in flight.
  std::mutex mu;
  std::condition_variable cv;
  int clients_answered = 0;  // guarded by mu

  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      Outcomes& mine = outcomes[t];
      for (;;) {
        const bool after_stop = stopped.load();
        // A connection the stopping server accepted but will not serve is
        // never answered (civetweb drops it unclosed): a shorter wait than
        // Request's keeps such a probe from holding the test for 30 s. A
        // slow answer cut short only counts as no answer.
        const std::optional<Reply> reply =
            Request(port, "/healthz", web::http::methods::GET, std::chrono::seconds(5));
        if (!reply.has_value()) {
          ++mine.no_answer;
        } else if (reply->status == 200 && reply->body == "ok") {
          if (++mine.ok == 1) {
            std::lock_guard<std::mutex> lock(mu);
            ++clients_answered;
            cv.notify_all();
          }
        } else if (reply->status == 503) {
          ++mine.unavailable;
        } else {
          mine.malformed.push_back(std::to_string(reply->status) + " " + reply->body);
        }
        if (after_stop) {
          mine.after_stop_answered = reply.has_value();
          return;
        }
      }
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    // A bound only so that a server that never answers fails instead of
    // hanging; no ASSERT, which would return with the clients running.
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] {
      return clients_answered == kClients;
    })) << "not every client was answered before the stops";
  }

  std::thread a([&server] { server.Stop(); });
  std::thread b([&server] { server.Stop(); });
  a.join();
  b.join();
  EXPECT_FALSE(server.running());
  const int checks_at_stop = checks_run.load();
  stopped = true;
  for (std::thread& c : clients) c.join();

  int ok_total = 0;
  for (int t = 0; t < kClients; ++t) {
    const Outcomes& o = outcomes[t];
    EXPECT_GE(o.ok, 1) << "client " << t << " (503: " << o.unavailable
                       << ", no answer: " << o.no_answer << ")";
    EXPECT_TRUE(o.malformed.empty())
        << "client " << t << " got " << o.malformed.size() << " answers such as "
        << (o.malformed.empty() ? "" : o.malformed.front());
    EXPECT_FALSE(o.after_stop_answered) << "client " << t << ": served after Stop returned";
    ok_total += o.ok;
  }
  // Each 200 ran the check (a check may also run for a reply that the
  // closing connection then lost, hence at least).
  EXPECT_GE(checks_at_stop, ok_total);
  EXPECT_EQ(checks_run.load(), checks_at_stop) << "no check runs after Stop";
}

}  // namespace
}  // namespace pacer::controller
