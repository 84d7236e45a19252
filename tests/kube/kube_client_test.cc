// KubeClient against the test API server: CRUD and /status, the HTTP ->
// Status mapping, TLS and auth failures, paging, watch.
#include "kube/kube_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "http/bounded_body.h"
#include "kube_test_env.h"

namespace pacer::controller {
namespace {

using nlohmann::json;

class KubeClientTest : public KubeTest {};

TEST_F(KubeClientTest, TrainJobCrudAndStatusRoundTrip) {
  auto created = client_->Create(kTrainJobs, "default", TrainJob("llama"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_FALSE((*created)["metadata"]["uid"].get<std::string>().empty());

  auto got = client_->Get(kTrainJobs, "default", "llama");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)["spec"]["model"], "llama-7b");

  json changed = *got;
  changed["spec"]["training"]["totalSteps"] = 2000;
  auto updated = client_->Update(kTrainJobs, "default", changed);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_EQ((*updated)["spec"]["training"]["totalSteps"], 2000);
  EXPECT_NE((*updated)["metadata"]["resourceVersion"], (*got)["metadata"]["resourceVersion"]);

  json with_status = *updated;
  with_status["status"] = {{"phase", "Planning"}};
  auto status_written = client_->UpdateStatus(kTrainJobs, "default", with_status);
  ASSERT_TRUE(status_written.ok()) << status_written.status().ToString();
  EXPECT_EQ((*status_written)["status"]["phase"], "Planning");

  auto patched = client_->MergePatch(kTrainJobs, "default", "llama",
                                     {{"status", {{"phase", "Running"}}}}, true);
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  auto stored = server_->GetObject(TrainJobsPath() + "/llama");
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ((*stored)["status"]["phase"], "Running");
  EXPECT_EQ((*stored)["spec"]["training"]["totalSteps"], 2000);

  ASSERT_TRUE(client_->Delete(kTrainJobs, "default", "llama").ok());
  EXPECT_EQ(client_->Get(kTrainJobs, "default", "llama").status().code(), StatusCode::kNotFound);
}

// After FenceWrites (the controller lost its lease) no write but a Lease's
// reaches the server; reads go on.
TEST_F(KubeClientTest, FencedWritesNeverReachTheServer) {
  auto created = client_->Create(kTrainJobs, "default", TrainJob("llama"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  client_->FenceWrites("this controller lost the leader lease");
  const int64_t writes_before =
      server_->RequestCount("POST", "") + server_->RequestCount("PUT", "") +
      server_->RequestCount("PATCH", "") + server_->RequestCount("DELETE", "");
  const std::vector<Status> refused = {
      client_->Create(kTrainJobs, "default", TrainJob("other")).status(),
      client_->Update(kTrainJobs, "default", *created).status(),
      client_->UpdateStatus(kTrainJobs, "default", *created).status(),
      client_
          ->MergePatch(kTrainJobs, "default", "llama", {{"metadata", {{"labels", {{"a", "b"}}}}}})
          .status(),
      client_->Delete(kTrainJobs, "default", "llama")};
  for (const Status& status : refused) {
    EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
    EXPECT_NE(status.message().find("lost the leader lease"), std::string::npos)
        << status.ToString();
  }
  EXPECT_EQ(server_->RequestCount("POST", "") + server_->RequestCount("PUT", "") +
                server_->RequestCount("PATCH", "") + server_->RequestCount("DELETE", ""),
            writes_before);
  EXPECT_TRUE(client_->Get(kTrainJobs, "default", "llama").ok());
  const nlohmann::json lease = {
      {"apiVersion", "coordination.k8s.io/v1"},
      {"kind", "Lease"},
      {"metadata", {{"name", "pacer-controller"}, {"namespace", "default"}}},
      {"spec", {{"holderIdentity", "someone"}}}};
  EXPECT_TRUE(client_->Create(kLeases, "default", lease).ok());
}

TEST_F(KubeClientTest, StaleUpdateIsAbortedAndDuplicateCreateIsAlreadyExists) {
  auto created = client_->Create(kTrainJobs, "default", TrainJob("a"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  json first = *created;
  first["spec"]["model"] = "gpt-1";
  ASSERT_TRUE(client_->Update(kTrainJobs, "default", first).ok());
  json stale = *created;  // still the old resourceVersion
  stale["spec"]["model"] = "gpt-2";
  Status conflict = client_->Update(kTrainJobs, "default", stale).status();
  EXPECT_EQ(conflict.code(), StatusCode::kAborted) << conflict.ToString();
  EXPECT_TRUE(conflict.retryable());
  EXPECT_NE(conflict.message().find("PUT " + TrainJobsPath() + "/a: 409"), std::string::npos)
      << conflict.message();

  Status duplicate = client_->Create(kTrainJobs, "default", TrainJob("a")).status();
  EXPECT_EQ(duplicate.code(), StatusCode::kAlreadyExists) << duplicate.ToString();
}

TEST_F(KubeClientTest, NotFoundNamesVerbPathAndServerMessage) {
  Status missing = client_->Get(kPods, "x", "y").status();
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.message().rfind("GET /api/v1/namespaces/x/pods/y: 404 NotFound: ", 0), 0u)
      << missing.message();
  EXPECT_NE(missing.message().find("\"y\""), std::string::npos) << missing.message();
  EXPECT_EQ(client_->Delete(kPods, "x", "y").code(), StatusCode::kNotFound);
}

TEST_F(KubeClientTest, WrongTokenIsUnauthenticatedAndNotEchoed) {
  KubeConfig config = Config();
  config.bearer_token = "wrong-token-7f3a9c";
  auto client = NewClient(config);
  ASSERT_NE(client, nullptr);
  Status denied = client->Get(kTrainJobs, "default", "any").status();
  EXPECT_EQ(denied.code(), StatusCode::kUnauthenticated) << denied.ToString();
  EXPECT_EQ(denied.message().find(config.bearer_token), std::string::npos);
  EXPECT_EQ(denied.message().find(server_->token()), std::string::npos);
}

TEST_F(KubeClientTest, ServerCertificateFromAnotherCaFailsTls) {
  auto other = pacer::testing::TestApiServer::Start();
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  KubeConfig config = Config();
  config.ca_pem = (*other)->ca_pem();  // a CA that did not sign this server's certificate
  auto client = NewClient(config);
  ASSERT_NE(client, nullptr);
  Status refused = client->Get(kTrainJobs, "default", "any").status();
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();
  EXPECT_NE(refused.message().find("certificate"), std::string::npos) << refused.message();
  EXPECT_EQ(refused.message().find(server_->token()), std::string::npos);
  // The request never reached the handler: no token was sent to an unverified server.
  EXPECT_EQ(server_->RequestCount("GET", "trainjobs/any"), 0);
}

TEST_F(KubeClientTest, ConfigWithoutCaOrHttpsIsRefused) {
  KubeConfig no_ca = Config();
  no_ca.ca_pem = "not a certificate";
  EXPECT_EQ(KubeClient::Create(no_ca).status().code(), StatusCode::kInvalidArgument);
  KubeConfig plain = Config();
  plain.server = "http://127.0.0.1:1";
  EXPECT_EQ(KubeClient::Create(plain).status().code(), StatusCode::kInvalidArgument);
}

// A hint from the header or the Status' details is at most an hour: the
// work queue converts it to nanoseconds, which 1e10 s and more overflowed.
TEST(RetryAfterTest, AnAbsurdHintIsAnHour) {
  for (const std::optional<int64_t> header :
       {std::optional<int64_t>(99999999999999), std::optional<int64_t>()}) {
    const Status throttled = StatusFromHttp(
        "GET", "/api/v1/pods", 429,
        R"({"kind":"Status","reason":"TooManyRequests","details":{"retryAfterSeconds":9223372036854775807}})",
        header);
    ASSERT_TRUE(RetryAfter(throttled).has_value()) << throttled.message();
    EXPECT_EQ(*RetryAfter(throttled), std::chrono::seconds(kMaxRetryAfterSeconds))
        << throttled.message();
  }
  const Status modest = StatusFromHttp("GET", "/api/v1/pods", 503, "", int64_t{7});
  EXPECT_EQ(RetryAfter(modest), std::chrono::seconds(7)) << modest.message();
}

TEST_F(KubeClientTest, InjectedServerErrorsAndThrottlingAreUnavailable) {
  ASSERT_TRUE(client_->Create(kTrainJobs, "default", TrainJob("j")).ok());
  server_->FailNextRequests("GET", "trainjobs/j", 503, 1);
  Status unavailable = client_->Get(kTrainJobs, "default", "j").status();
  EXPECT_EQ(unavailable.code(), StatusCode::kUnavailable) << unavailable.ToString();
  EXPECT_TRUE(unavailable.retryable());

  server_->FailNextRequests("GET", "trainjobs/j", 429, 1);
  Status throttled = client_->Get(kTrainJobs, "default", "j").status();
  EXPECT_EQ(throttled.code(), StatusCode::kUnavailable) << throttled.ToString();
  ASSERT_TRUE(RetryAfter(throttled).has_value()) << throttled.message();
  EXPECT_EQ(*RetryAfter(throttled), std::chrono::seconds(1));

  server_->FailNextRequests("GET", "trainjobs/j", 500, 1);
  EXPECT_EQ(client_->Get(kTrainJobs, "default", "j").status().code(), StatusCode::kUnavailable);
  // The faults are spent: the object is there.
  EXPECT_TRUE(client_->Get(kTrainJobs, "default", "j").ok());
}

TEST_F(KubeClientTest, PagingReturnsEveryObjectExactlyOnce) {
  constexpr int kObjects = 50;
  for (int i = 0; i < kObjects; ++i) {
    ASSERT_TRUE(server_->CreateObject(TrainJobsPath(), TrainJob("job-" + std::to_string(i))).ok());
  }
  const int64_t lists_before = server_->RequestCount("GET", "trainjobs");
  ListOptions options;
  options.limit = 7;
  auto all = client_->ListAll(kTrainJobs, "default", options);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  std::multiset<std::string> names;
  for (const json& item : all->items) names.insert(item["metadata"]["name"].get<std::string>());
  EXPECT_EQ(names.size(), static_cast<size_t>(kObjects));
  for (int i = 0; i < kObjects; ++i) {
    EXPECT_EQ(names.count("job-" + std::to_string(i)), 1u) << i;
  }
  EXPECT_FALSE(all->resource_version.empty());
  EXPECT_EQ(server_->RequestCount("GET", "trainjobs") - lists_before, (kObjects + 6) / 7);

  auto first = client_->ListPage(kTrainJobs, "default", options);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->items.size(), 7u);
  EXPECT_FALSE(first->continue_token.empty());
}

// A request deadline (the leader elector's renewals) bounds the whole
// answer: a server that stalls before answering, or after sending the
// headers and part of the body, ends the request at the deadline, not at the
// longer inactivity timeout.
TEST_F(KubeClientTest, ARequestDeadlineBoundsTheBodyAsWellAsTheHeaders) {
  using HangPoint = pacer::testing::TestApiServer::HangPoint;
  ASSERT_TRUE(server_->CreateObject(TrainJobsPath(), TrainJob("stalled")).ok());
  KubeClientOptions options;
  // Far above the deadlines, so that what ends a wait is the deadline.
  options.request_timeout = std::chrono::seconds(30);
  const std::unique_ptr<void, std::function<void(void*)>> release(
      this, [this](void*) { server_->StopHanging(); });
  for (HangPoint at : {HangPoint::kBeforeAnswer, HangPoint::kAfterHeadersOnSignal}) {
    const bool body = at == HangPoint::kAfterHeadersOnSignal;
    SCOPED_TRACE(body ? "after the headers" : "before the answer");
    auto client = NewClient(Config(), options);
    ASSERT_NE(client, nullptr);
    server_->HangRequests("GET", "/trainjobs/stalled", "", at);
    const StatusOr<json> got = [&]() -> StatusOr<json> {
      if (!body) {
        // No answer ever comes: whenever it passes, the deadline ends the
        // wait for the headers.
        client->SetRequestDeadline(std::chrono::steady_clock::now() +
                                   std::chrono::milliseconds(300));
        return client->Get(kTrainJobs, "default", "stalled");
      }
      // The deadline is set while the server holds the request and before
      // it sends the headers, so Get's read of it for the body comes after
      // it is set. (Set once the server had sent them, the client could
      // start reading the body before it was set, with no deadline: that
      // read waited out the whole timeout in CI.) One set before the
      // request would have to outlast a new TLS connection, which no fixed
      // figure does on a loaded machine.
      std::future<StatusOr<json>> pending = std::async(
          std::launch::async, [&] { return client->Get(kTrainJobs, "default", "stalled"); });
      EXPECT_TRUE(server_->WaitFor([&] { return server_->HungRequestCount() >= 1; }, kWait))
          << "the request never reached the server";
      // 5 s, not less: should the calling thread read the deadline for the
      // headers only now (descheduled since its request left), the headers
      // must still arrive by it.
      client->SetRequestDeadline(std::chrono::steady_clock::now() +
                                 std::chrono::milliseconds(5000));
      server_->SendHeldHeaders();
      return pending.get();  // by the deadline, or at worst the 30 s timeout
    }();
    EXPECT_EQ(got.status().code(), StatusCode::kDeadlineExceeded) << got.status().ToString();
    // Which wait the deadline ended: for the headers, or for the body.
    EXPECT_NE(got.status().message().find(body ? "did not arrive whole by the request deadline"
                                               : "no answer from the API server by the request "
                                                 "deadline"),
              std::string::npos)
        << got.status().message();
    EXPECT_TRUE(server_->WaitFor([&] { return server_->HungRequestCount() >= 1; }, kWait))
        << "the server held it";
    if (body) {
      EXPECT_EQ(AbandonedBodyReadsInFlight(), 1u) << "the body read is left running";
    }
    server_->StopHanging();
    // The released request leaves the count only when its server thread
    // wakes: without this wait, the next pass's HungRequestCount() >= 1
    // could count it and set the deadline before its own request hung.
    EXPECT_TRUE(server_->WaitFor([&] { return server_->HungRequestCount() == 0; }, kWait));
    // The abandoned read ends once the server answers: it neither leaks nor
    // outlives the test.
    EXPECT_TRUE(Eventually([] { return AbandonedBodyReadsInFlight() == 0; }))
        << AbandonedBodyReadsInFlight() << " abandoned body reads still pending";
  }
}

TEST_F(KubeClientTest, AnswerOverTheLimitIsResourceExhausted) {
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(server_->CreateObject(TrainJobsPath(), TrainJob("big-" + std::to_string(i))).ok());
  }
  KubeClientOptions options;
  options.max_response_bytes = 2048;
  auto small = NewClient(Config(), options);
  ASSERT_NE(small, nullptr);
  ListOptions list;
  list.limit = 0;
  EXPECT_EQ(small->ListAll(kTrainJobs, "default", list).status().code(),
            StatusCode::kResourceExhausted);
}

// Collects watch events on a thread of its own.
class Watcher {
 public:
  Watcher(KubeClient* client, WatchOptions options) {
    thread_ = std::thread([this, client, options] {
      Status s = client->Watch(
          kTrainJobs, "default", options,
          [this](const WatchEvent& e) {
            std::lock_guard<std::mutex> lock(mu_);
            if (e.type != WatchEvent::Type::kBookmark) events_.push_back(e);
            cv_.notify_all();
          },
          cancel_);
      std::lock_guard<std::mutex> lock(mu_);
      result_ = s;
      done_ = true;
      cv_.notify_all();
    });
  }
  ~Watcher() { Cancel(); }

  bool WaitForEvents(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return events_.size() >= n || done_; }) &&
           events_.size() >= n;
  }
  bool WaitDone() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return done_; });
  }
  void Cancel() {
    cancel_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<WatchEvent> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  Status result() {
    std::lock_guard<std::mutex> lock(mu_);
    return result_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<WatchEvent> events_;
  Status result_;
  bool done_ = false;
  std::atomic<bool> cancel_{false};
  std::thread thread_;
};

TEST_F(KubeClientTest, WatchSeesAddedModifiedDeletedInOrderAndCancelsPromptly) {
  auto list = client_->ListAll(kTrainJobs, "default", {});
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  WatchOptions options;
  options.resource_version = list->resource_version;
  // The stream would run for an hour: only the cancel ends it within the
  // test (see the end).
  options.timeout_seconds = 3600;
  Watcher watcher(client_.get(), options);
  ASSERT_TRUE(server_->WaitFor([&] { return server_->OpenWatchCount() == 1; }, kWait));

  auto created = client_->Create(kTrainJobs, "default", TrainJob("w"));
  ASSERT_TRUE(created.ok());
  json changed = *created;
  changed["spec"]["model"] = "changed";
  ASSERT_TRUE(client_->Update(kTrainJobs, "default", changed).ok());
  ASSERT_TRUE(client_->Delete(kTrainJobs, "default", "w").ok());

  ASSERT_TRUE(watcher.WaitForEvents(3)) << watcher.result().ToString();
  const std::vector<WatchEvent> events = watcher.events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].type, WatchEvent::Type::kAdded);
  EXPECT_EQ(events[1].type, WatchEvent::Type::kModified);
  EXPECT_EQ(events[1].object["spec"]["model"], "changed");
  EXPECT_EQ(events[2].type, WatchEvent::Type::kDeleted);
  for (const WatchEvent& e : events) EXPECT_EQ(e.object["metadata"]["name"], "w");

  // The watch polls the cancel every 50 ms; the bound is a minute so that a
  // loaded machine never reaches it, and still far below the stream's hour:
  // the cancel, not the stream's end, is what stopped the watch.
  const auto cancelled_at = std::chrono::steady_clock::now();
  watcher.Cancel();
  EXPECT_LT(std::chrono::steady_clock::now() - cancelled_at, std::chrono::seconds(60));
  EXPECT_TRUE(watcher.result().ok()) << watcher.result().ToString();
}

TEST_F(KubeClientTest, WatchFromACompactedVersionIsGone) {
  auto created = client_->Create(kTrainJobs, "default", TrainJob("old"));
  ASSERT_TRUE(created.ok());
  const std::string old_version = (*created)["metadata"]["resourceVersion"];
  json changed = *created;
  changed["spec"]["model"] = "newer";
  ASSERT_TRUE(client_->Update(kTrainJobs, "default", changed).ok());
  server_->CompactHistory();
  WatchOptions options;
  options.resource_version = old_version;
  Watcher watcher(client_.get(), options);
  ASSERT_TRUE(watcher.WaitDone());
  EXPECT_TRUE(IsGone(watcher.result())) << watcher.result().ToString();
  EXPECT_EQ(watcher.result().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(watcher.result().message().rfind("Gone:", 0), 0u) << watcher.result().message();
}

}  // namespace
}  // namespace pacer::controller
