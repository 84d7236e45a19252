// Informer against the test API server: sync, following changes, surviving
// dropped watches without losing updates, re-listing after 410 Gone with
// deletions reported, backing off under errors, resync, the label index.
#include "kube/informer.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "kube_test_env.h"

namespace pacer::controller {
namespace {

using nlohmann::json;

// Records handler calls; waits on them with a condition variable.
class Recorder {
 public:
  InformerHandler Handler() {
    return [this](const std::string& key, const json* object) {
      std::lock_guard<std::mutex> lock(mu_);
      ++calls_[key];
      last_[key] = object ? std::optional<json>(*object) : std::nullopt;
      cv_.notify_all();
    };
  }
  // Waits until the last call for `key` satisfies `pred` (nullopt: deleted).
  bool WaitFor(const std::string& key,
               const std::function<bool(const std::optional<json>&)>& pred) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] {
      auto it = last_.find(key);
      return it != last_.end() && pred(it->second);
    });
  }
  bool WaitForCalls(const std::string& key, int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return calls_[key] >= n; });
  }
  int calls(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[key];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, int> calls_;
  std::map<std::string, std::optional<json>> last_;
};

bool ModelIs(const std::optional<json>& object, const std::string& model) {
  return object && (*object)["spec"]["model"] == model;
}

class InformerTest : public KubeTest {
 protected:
  json Put(const std::string& name, const std::string& model) {
    json job = TrainJob(name);
    job["spec"]["model"] = model;
    auto existing = server_->GetObject(TrainJobsPath() + "/" + name);
    if (existing.ok()) {
      job["metadata"] = (*existing)["metadata"];
      auto updated = server_->UpdateObject(TrainJobsPath() + "/" + name, job);
      EXPECT_TRUE(updated.ok()) << updated.status().ToString();
      return updated.ok() ? *updated : json();
    }
    auto created = server_->CreateObject(TrainJobsPath(), job);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    return created.ok() ? *created : json();
  }
};

TEST_F(InformerTest, SyncsThenFollowsChanges) {
  Put("a", "m1");
  Put("b", "m1");
  // Each watch would run for an hour: Stop, at the end, must cancel it
  // rather than wait for it.
  InformerOptions options;
  options.watch_timeout_seconds = 3600;
  Informer informer(client_.get(), kTrainJobs, "default", options);
  Recorder recorder;
  informer.OnChange(recorder.Handler());
  EXPECT_FALSE(informer.HasSynced());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kWait));
  EXPECT_EQ(informer.List().size(), 2u);
  EXPECT_EQ(recorder.calls("default/a"), 1);  // seen before sync was reported
  ASSERT_TRUE(informer.Get("default/b").has_value());

  Put("a", "m2");
  Put("c", "m1");
  ASSERT_TRUE(server_->DeleteObject(TrainJobsPath() + "/b").ok());
  ASSERT_TRUE(recorder.WaitFor("default/a", [](const auto& o) { return ModelIs(o, "m2"); }));
  ASSERT_TRUE(recorder.WaitFor("default/c", [](const auto& o) { return o.has_value(); }));
  ASSERT_TRUE(recorder.WaitFor("default/b", [](const auto& o) { return !o.has_value(); }));
  EXPECT_TRUE(ModelIs(informer.Get("default/a"), "m2"));
  EXPECT_FALSE(informer.Get("default/b").has_value());
  EXPECT_EQ(informer.List().size(), 2u);
  EXPECT_EQ(informer.relists(), 1);

  // A minute: never reached on a loaded machine (ThreadSanitizer included),
  // and far below the watch's hour.
  const auto stop_at = std::chrono::steady_clock::now();
  informer.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - stop_at, std::chrono::seconds(60));
}

TEST_F(InformerTest, TransformTrimsListedAndWatchedObjectsBeforeCachingThem) {
  Put("a", "m1");
  InformerOptions options;
  options.transform = [](json& object) { object["spec"].erase("model"); };
  Informer informer(client_.get(), kTrainJobs, "default", options);
  Recorder recorder;
  informer.OnChange(recorder.Handler());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kWait));
  ASSERT_TRUE(informer.Get("default/a").has_value());
  EXPECT_FALSE((*informer.Get("default/a"))["spec"].contains("model")) << "listed";
  Put("b", "m1");
  ASSERT_TRUE(recorder.WaitFor("default/b", [](const auto& o) { return o.has_value(); }));
  ASSERT_TRUE(recorder.WaitFor(
      "default/b", [](const auto& o) { return o && !(*o)["spec"].contains("model"); }))
      << "handlers see the trimmed object";
  EXPECT_FALSE((*informer.Get("default/b"))["spec"].contains("model")) << "watched";
}

TEST_F(InformerTest, DroppedWatchResumesWithoutLosingAnUpdate) {
  Put("a", "m1");
  Informer informer(client_.get(), kTrainJobs, "default");
  Recorder recorder;
  informer.OnChange(recorder.Handler());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kWait));
  ASSERT_TRUE(server_->WaitFor([&] { return server_->OpenWatchCount() == 1; }, kWait));
  const int64_t watches_before = server_->RequestCount("GET", "trainjobs");

  server_->DropWatches();
  Put("a", "changed-while-down");  // straight into the store: no watch may be open now
  ASSERT_TRUE(recorder.WaitFor("default/a",
                               [](const auto& o) { return ModelIs(o, "changed-while-down"); }));
  EXPECT_TRUE(ModelIs(informer.Get("default/a"), "changed-while-down"));
  // Resumed from its resourceVersion: a new watch, no new list.
  EXPECT_GT(server_->RequestCount("GET", "trainjobs"), watches_before);
  EXPECT_EQ(informer.relists(), 1);
}

TEST_F(InformerTest, RelistsAfterCompactionAndReportsDeletionsInTheGap) {
  Put("stays", "m1");
  Put("goes", "m1");
  InformerOptions options;
  options.min_backoff = std::chrono::milliseconds(300);
  Informer informer(client_.get(), kTrainJobs, "default", options);
  Recorder recorder;
  informer.OnChange(recorder.Handler());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kWait));
  ASSERT_TRUE(server_->WaitFor([&] { return server_->OpenWatchCount() == 1; }, kWait));

  // Hold the informer's next watch while the store changes and forgets its
  // history; released, it ends without an answer, and the watch after it
  // starts from a version the store no longer has. (Failures that made the
  // informer back off left a window of about 2 s: a test thread stalled
  // past it, 3 s, still passed, but the deletion then came as a watch event,
  // and the gap this test is about was never there.)
  server_->HangRequests("GET", "/trainjobs");
  server_->DropWatches();
  ASSERT_TRUE(server_->WaitFor([&] { return server_->OpenWatchCount() == 0; }, kWait));
  ASSERT_TRUE(server_->WaitFor([&] { return server_->HungRequestCount() == 1; }, kWait));
  ASSERT_TRUE(server_->DeleteObject(TrainJobsPath() + "/goes").ok());
  Put("stays", "m2");
  Put("new", "m1");
  server_->CompactHistory();
  server_->StopHanging();

  ASSERT_TRUE(recorder.WaitFor("default/goes", [](const auto& o) { return !o.has_value(); }));
  ASSERT_TRUE(recorder.WaitFor("default/stays", [](const auto& o) { return ModelIs(o, "m2"); }));
  ASSERT_TRUE(recorder.WaitFor("default/new", [](const auto& o) { return o.has_value(); }));
  EXPECT_EQ(informer.relists(), 2);
  EXPECT_FALSE(informer.Get("default/goes").has_value());
  EXPECT_EQ(informer.List().size(), 2u);
}

// An API server whose watch is Gone at once after every list (a watch cache
// that lags the list it serves, a proxy that drops resourceVersion) must not
// be re-listed in a hot loop: each round is a full list of the resource.
TEST_F(InformerTest, AWatchGoneAtOnceAfterEveryListIsRelistedWithBackoff) {
  Put("a", "m1");
  InformerOptions options;
  options.min_backoff = std::chrono::milliseconds(100);
  options.max_backoff = std::chrono::milliseconds(400);
  Informer informer(client_.get(), kTrainJobs, "default", options);
  server_->FailNextRequests("watch", "trainjobs", 410, 5);
  const auto started = std::chrono::steady_clock::now();
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kWait));
  ASSERT_TRUE(server_->WaitFor([&] { return server_->OpenWatchCount() == 1; }, kWait));
  // Each Gone was followed by a list: the first and one per Gone.
  EXPECT_EQ(informer.relists(), 6);
  // ...but not at once: 100 + 200 + 400 + 400 + 400 ms of backoff at least.
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(1500));
  EXPECT_TRUE(informer.Get("default/a").has_value());
}

// A pager whose continue token never changes is an error the informer backs
// off from, not a hot loop of list requests (which also never saw Stop()).
TEST_F(InformerTest, APagerThatNeverEndsIsAnErrorNotAHotLoop) {
  Put("a", "m1");
  Put("b", "m1");
  Put("c", "m1");
  InformerOptions options;
  options.page_size = 1;
  options.min_backoff = std::chrono::milliseconds(100);
  options.max_backoff = std::chrono::milliseconds(400);
  Informer informer(client_.get(), kTrainJobs, "default", options);
  server_->RepeatListContinueToken("trainjobs");
  const auto started = std::chrono::steady_clock::now();
  informer.Start();
  // Four lists of two pages each (the first page, then its token again):
  // 100 + 200 + 400 ms of backoff between them at least.
  ASSERT_TRUE(
      server_->WaitFor([&] { return server_->RequestCount("GET", "trainjobs") >= 8; }, kWait));
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(700));
  EXPECT_FALSE(informer.HasSynced());
  server_->RepeatListContinueToken("");  // the old code's loop ends on the refused token
  informer.Stop();
}

// Watches that each saw an event before the connection was cut are healthy:
// the wait before the next watch starts from min_backoff every time, not
// doubled up to max_backoff across cuts.
TEST_F(InformerTest, AWatchThatHeldBeforeItWasCutIsRetriedAfterTheShortestBackoff) {
  Put("a", "m0");
  InformerOptions options;
  options.min_backoff = std::chrono::milliseconds(100);
  options.max_backoff = std::chrono::seconds(20);
  Informer informer(client_.get(), kTrainJobs, "default", options);
  Recorder recorder;
  informer.OnChange(recorder.Handler());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kWait));
  const auto started = std::chrono::steady_clock::now();
  for (int cut = 1; cut <= 8; ++cut) {
    ASSERT_TRUE(server_->WaitFor([&] { return server_->OpenWatchCount() == 1; }, kWait));
    const std::string model = "m" + std::to_string(cut);
    Put("a", model);
    ASSERT_TRUE(recorder.WaitFor("default/a", [&](const auto& o) { return ModelIs(o, model); }));
    server_->DropWatches();
  }
  ASSERT_TRUE(server_->WaitFor([&] { return server_->OpenWatchCount() == 1; }, kWait));
  // Doubled across the cuts, the waits would sum to 100 ms x (2^8 - 1) = 25.5 s.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
}

TEST_F(InformerTest, BacksOffUnderServerErrorsAndRecovers) {
  Put("a", "m1");
  InformerOptions options;
  options.min_backoff = std::chrono::milliseconds(100);
  options.max_backoff = std::chrono::milliseconds(400);
  Informer informer(client_.get(), kTrainJobs, "default", options);
  Recorder recorder;
  informer.OnChange(recorder.Handler());
  // The first list fails 5 times: 100 + 200 + 400 + 400 + 400 ms of backoff at least.
  server_->FailNextRequests("GET", "trainjobs", 503, 5);
  const auto started = std::chrono::steady_clock::now();
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kWait));
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(1500));
  // Not hammering: 5 failed lists, the one served, perhaps the watch that followed.
  EXPECT_GE(server_->RequestCount("GET", "trainjobs"), 6);
  EXPECT_LE(server_->RequestCount("GET", "trainjobs"), 7);
  EXPECT_TRUE(informer.Get("default/a").has_value());

  Put("a", "m2");  // and it watches afterwards
  EXPECT_TRUE(recorder.WaitFor("default/a", [](const auto& o) { return ModelIs(o, "m2"); }));
}

TEST_F(InformerTest, ResyncRepeatsEveryCachedObject) {
  Put("a", "m1");
  InformerOptions options;
  options.resync_period = std::chrono::milliseconds(100);
  Informer informer(client_.get(), kTrainJobs, "default", options);
  Recorder recorder;
  informer.OnChange(recorder.Handler());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kWait));
  EXPECT_TRUE(recorder.WaitForCalls("default/a", 3));  // one from the list, two resyncs
  EXPECT_EQ(informer.relists(), 1);
}

TEST_F(InformerTest, ListByLabelUsesTheIndexAndFollowsRelabelling) {
  auto labelled = [&](const std::string& name, const std::string& job) {
    ASSERT_TRUE(server_->CreateObject(TrainJobsPath(), TrainJob(name, "default", job)).ok());
  };
  labelled("p0", "job-1");
  labelled("p1", "job-1");
  labelled("p2", "job-2");
  InformerOptions options;
  options.index_label = "pacer.dev/job";
  Informer informer(client_.get(), kTrainJobs, "default", options);
  Recorder recorder;
  informer.OnChange(recorder.Handler());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kWait));
  EXPECT_EQ(informer.ListByLabel("pacer.dev/job", "job-1").size(), 2u);
  EXPECT_EQ(informer.ListByLabel("pacer.dev/job", "job-2").size(), 1u);
  EXPECT_TRUE(informer.ListByLabel("pacer.dev/job", "job-3").empty());

  auto p1 = server_->GetObject(TrainJobsPath() + "/p1");
  ASSERT_TRUE(p1.ok());
  (*p1)["metadata"]["labels"]["pacer.dev/job"] = "job-2";
  ASSERT_TRUE(server_->UpdateObject(TrainJobsPath() + "/p1", *p1).ok());
  ASSERT_TRUE(recorder.WaitFor("default/p1", [](const auto& o) {
    return o && (*o)["metadata"]["labels"]["pacer.dev/job"] == "job-2";
  }));
  EXPECT_EQ(informer.ListByLabel("pacer.dev/job", "job-1").size(), 1u);
  EXPECT_EQ(informer.ListByLabel("pacer.dev/job", "job-2").size(), 2u);
  // Another label key scans.
  EXPECT_EQ(informer.ListByLabel("other", "x").size(), 0u);
  // A namespace narrows the answer (the same job name in two namespaces).
  EXPECT_EQ(informer.ListByLabel("pacer.dev/job", "job-2", "default").size(), 2u);
  EXPECT_TRUE(informer.ListByLabel("pacer.dev/job", "job-2", "other").empty());
  EXPECT_TRUE(informer.ListByLabel("other", "x", "default").empty());
  // Visiting in place sees the same objects as copying them out.
  std::set<std::string> visited;
  informer.VisitByLabel("pacer.dev/job", "job-2", "default", [&](const json& object) {
    visited.insert(object["metadata"]["name"].get<std::string>());
  });
  EXPECT_EQ(visited, (std::set<std::string>{"p1", "p2"}));
  visited.clear();
  informer.VisitByLabel("pacer.dev/job", "job-2", "other",
                        [&](const json& object) { visited.insert(object.dump()); });
  EXPECT_TRUE(visited.empty());
}

// 20 objects of about 20 KiB: a page of the default size (500, so all of
// them, ~400 KiB) is over a client's 100 KiB answer limit, one object is not.
// The informer halves the page size until a page fits (250, 125, 62, 31, 15,
// 7 are over; 3 fit), syncs, and starts later lists at the smaller size.
TEST_F(InformerTest, ListsInSmallerPagesWhileAPageIsOverTheAnswerLimit) {
  constexpr int kObjects = 20;
  const std::string blob(20 * 1024, 'x');
  auto create_big = [&](const std::string& name) {
    json job = TrainJob(name);
    job["metadata"]["annotations"] = {{"pacer.dev/blob", blob}};
    auto created = server_->CreateObject(TrainJobsPath(), job);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
  };
  for (int i = 0; i < kObjects; ++i) create_big("big-" + std::to_string(i));
  KubeClientOptions client_options;
  client_options.max_response_bytes = 100 * 1024;
  std::unique_ptr<KubeClient> small = NewClient(Config(), client_options);
  ASSERT_NE(small, nullptr);
  // The premise: a page of the default size is refused, one object is not.
  EXPECT_EQ(small->ListPage(kTrainJobs, "default", ListOptions{}).status().code(),
            StatusCode::kResourceExhausted);
  ListOptions one;
  one.limit = 1;
  EXPECT_TRUE(small->ListPage(kTrainJobs, "default", one).ok());

  InformerOptions options;
  options.min_backoff = std::chrono::milliseconds(300);
  Informer informer(small.get(), kTrainJobs, "default", options);
  Recorder recorder;
  informer.OnChange(recorder.Handler());
  EXPECT_EQ(informer.list_page_size(), 500);
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kWait));
  EXPECT_EQ(informer.List().size(), static_cast<size_t>(kObjects));
  for (int i = 0; i < kObjects; ++i) {
    std::optional<json> object = informer.Get("default/big-" + std::to_string(i));
    ASSERT_TRUE(object.has_value()) << i;
    EXPECT_EQ((*object)["metadata"]["annotations"]["pacer.dev/blob"], blob) << i;
    EXPECT_EQ(recorder.calls("default/big-" + std::to_string(i)), 1) << "exactly once: " << i;
  }
  EXPECT_EQ(informer.list_page_size(), 3);
  EXPECT_EQ(informer.relists(), 1);

  // A re-list (after 410 Gone) starts at 3: its pages all fit.
  auto lists = [&] {
    int64_t n = 0;
    for (const pacer::testing::AuditRecord& r : server_->AuditLog()) {
      if (r.verb == "list" && r.resource == "trainjobs") ++n;
    }
    return n;
  };
  ASSERT_TRUE(server_->WaitFor([&] { return server_->OpenWatchCount() == 1; }, kWait));
  const int64_t lists_before = lists();
  server_->HangRequests("GET", "/trainjobs");  // hold the re-watch (as above)
  server_->DropWatches();
  ASSERT_TRUE(server_->WaitFor([&] { return server_->OpenWatchCount() == 0; }, kWait));
  ASSERT_TRUE(server_->WaitFor([&] { return server_->HungRequestCount() == 1; }, kWait));
  create_big("late");
  server_->CompactHistory();
  server_->StopHanging();
  ASSERT_TRUE(recorder.WaitFor("default/late", [](const auto& o) { return o.has_value(); }));
  EXPECT_EQ(informer.relists(), 2);
  EXPECT_EQ(lists() - lists_before, 7) << "21 objects in pages of 3, none refused";
  EXPECT_EQ(informer.list_page_size(), 3);
  EXPECT_EQ(informer.List().size(), static_cast<size_t>(kObjects + 1));
}

}  // namespace
}  // namespace pacer::controller
