#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "apiserver_test_fixture.h"

namespace pacer::testing {
namespace {

using nlohmann::json;

class WatchTest : public ApiServerTest {
 protected:
  std::unique_ptr<WatchStream> Watch(const std::string& target) {
    auto stream = client_->Watch(target);
    EXPECT_TRUE(stream.ok()) << stream.status().ToString();
    if (!stream.ok()) return nullptr;
    EXPECT_EQ((*stream)->status(), 200);
    return std::move(stream).value();
  }

  // The next event that is not a bookmark.
  static std::optional<json> NextEvent(WatchStream& stream) {
    for (;;) {
      std::optional<json> event = stream.Next();
      if (!event || (*event)["type"] != "BOOKMARK") return event;
    }
  }
};

TEST_F(WatchTest, ResumingReplaysExactlyTheLaterEventsInOrder) {
  MustCreate(kPods, Pod("before"));
  json a = MustCreate(kPods, Pod("a"));
  const std::string from = VersionOf(a);
  json b = MustCreate(kPods, Pod("b"));
  HttpResponse patched =
      Call("PATCH", std::string(kPods) + "/a", {{"metadata", {{"labels", {{"x", "1"}}}}}},
           "application/merge-patch+json");
  ASSERT_EQ(patched.status, 200);
  ASSERT_EQ(Call("DELETE", std::string(kPods) + "/b").status, 200);
  MustCreate("/api/v1/namespaces/other/pods", Pod("elsewhere"));  // another namespace: not seen

  auto stream = Watch(std::string(kPods) + "?watch=true&resourceVersion=" + from);
  ASSERT_NE(stream, nullptr);
  std::vector<std::pair<std::string, std::string>> expected = {
      {"ADDED", "b"}, {"MODIFIED", "a"}, {"DELETED", "b"}};
  int64_t last_version = std::stoll(from);
  for (const auto& [type, name] : expected) {
    std::optional<json> event = NextEvent(*stream);
    ASSERT_TRUE(event.has_value());
    EXPECT_EQ((*event)["type"], type);
    EXPECT_EQ((*event)["object"]["metadata"]["name"], name);
    const int64_t version = std::stoll(VersionOf((*event)["object"]));
    EXPECT_GT(version, last_version);
    last_version = version;
  }
  // Then live events.
  MustCreate(kPods, Pod("c"));
  std::optional<json> live = NextEvent(*stream);
  ASSERT_TRUE(live.has_value());
  EXPECT_EQ((*live)["type"], "ADDED");
  EXPECT_EQ((*live)["object"]["metadata"]["name"], "c");
}

TEST_F(WatchTest, FromZeroListsFirstAndSelectorsTurnLeavingIntoDeleted) {
  MustCreate(kPods, Pod("a", {{"app", "train"}}));
  MustCreate(kPods, Pod("b", {{"app", "serve"}}));
  auto stream = Watch(std::string(kPods) + "?watch=1&resourceVersion=0&labelSelector=app%3Dtrain");
  ASSERT_NE(stream, nullptr);
  std::optional<json> first = NextEvent(*stream);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ((*first)["type"], "ADDED");
  EXPECT_EQ((*first)["object"]["metadata"]["name"], "a");

  // b starts matching: ADDED; a stops matching: DELETED.
  Call("PATCH", std::string(kPods) + "/b", {{"metadata", {{"labels", {{"app", "train"}}}}}},
       "application/merge-patch+json");
  Call("PATCH", std::string(kPods) + "/a", {{"metadata", {{"labels", {{"app", "serve"}}}}}},
       "application/merge-patch+json");
  std::optional<json> joined = NextEvent(*stream);
  ASSERT_TRUE(joined.has_value());
  EXPECT_EQ((*joined)["type"], "ADDED");
  EXPECT_EQ((*joined)["object"]["metadata"]["name"], "b");
  std::optional<json> left = NextEvent(*stream);
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ((*left)["type"], "DELETED");
  EXPECT_EQ((*left)["object"]["metadata"]["name"], "a");
}

TEST_F(WatchTest, FieldSelectorOnName) {
  MustCreate(kTrainJobs, TrainJob("j"));
  auto stream = Watch(std::string(kTrainJobs) + "?watch=true&fieldSelector=metadata.name%3Dk");
  ASSERT_NE(stream, nullptr);
  MustCreate(kTrainJobs, TrainJob("k"));
  std::optional<json> event = NextEvent(*stream);
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ((*event)["object"]["metadata"]["name"], "k");
}

TEST_F(WatchTest, BookmarksCarryTheCurrentVersion) {
  json job = MustCreate(kTrainJobs, TrainJob("j"));
  auto stream = Watch(std::string(kTrainJobs) +
                      "?watch=true&allowWatchBookmarks=true&resourceVersion=" + VersionOf(job));
  ASSERT_NE(stream, nullptr);
  std::optional<json> event = stream->Next();
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ((*event)["type"], "BOOKMARK");
  EXPECT_EQ((*event)["object"]["kind"], "TrainJob");
  EXPECT_EQ((*event)["object"]["apiVersion"], "pacer.dev/v1alpha1");
  EXPECT_GE(std::stoll(VersionOf((*event)["object"])), std::stoll(VersionOf(job)));
}

TEST_F(WatchTest, CompactedHistoryAnswersExpired) {
  json a = MustCreate(kTrainJobs, TrainJob("a"));
  MustCreate(kTrainJobs, TrainJob("b"));
  server_->CompactHistory();
  auto stream = Watch(std::string(kTrainJobs) + "?watch=true&resourceVersion=" + VersionOf(a));
  ASSERT_NE(stream, nullptr);
  std::optional<json> event = stream->Next();
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ((*event)["type"], "ERROR");
  EXPECT_EQ((*event)["object"]["code"], 410);
  EXPECT_EQ((*event)["object"]["reason"], "Expired");
  EXPECT_THAT((*event)["object"]["message"].get<std::string>(),
              ::testing::StartsWith("too old resource version: " + VersionOf(a)));
  EXPECT_FALSE(stream->Next().has_value());
  // The current version is still fine.
  auto current =
      Watch(std::string(kTrainJobs) + "?watch=true&resourceVersion=" +
            Call("GET", kTrainJobs).Json()["metadata"]["resourceVersion"].get<std::string>());
  ASSERT_NE(current, nullptr);
  MustCreate(kTrainJobs, TrainJob("c"));
  std::optional<json> live = NextEvent(*current);
  ASSERT_TRUE(live.has_value());
  EXPECT_EQ((*live)["object"]["metadata"]["name"], "c");
}

class SmallHistoryTest : public WatchTest {
 protected:
  TestApiServerOptions Options() override {
    TestApiServerOptions options = WatchTest::Options();
    options.history_limit = 3;
    return options;
  }
};

TEST_F(SmallHistoryTest, VersionsOlderThanTheHistoryAreExpired) {
  json first = MustCreate(kPods, Pod("p0"));
  for (int i = 1; i < 6; ++i) MustCreate(kPods, Pod("p" + std::to_string(i)));
  auto old = Watch(std::string(kPods) + "?watch=true&resourceVersion=" + VersionOf(first));
  ASSERT_NE(old, nullptr);
  std::optional<json> event = old->Next();
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ((*event)["object"]["code"], 410);
  // The last three events are retained: resuming after the third-last works.
  json list = Call("GET", kPods).Json();
  const int64_t newest = std::stoll(list["metadata"]["resourceVersion"].get<std::string>());
  auto recent =
      Watch(std::string(kPods) + "?watch=true&resourceVersion=" + std::to_string(newest - 3));
  ASSERT_NE(recent, nullptr);
  for (int i = 3; i < 6; ++i) {
    std::optional<json> e = NextEvent(*recent);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ((*e)["object"]["metadata"]["name"], "p" + std::to_string(i));
  }
}

TEST_F(WatchTest, TimeoutSecondsEndsTheStreamCleanly) {
  auto stream = Watch(std::string(kPods) + "?watch=true&timeoutSeconds=1");
  ASSERT_NE(stream, nullptr);
  EXPECT_FALSE(NextEvent(*stream).has_value());
  EXPECT_TRUE(stream->ended_cleanly());
  EXPECT_TRUE(server_->WaitFor([&] { return server_->OpenWatchCount() == 0; }, kWaitTimeout));
}

TEST_F(WatchTest, DropWatchesClosesStreamsAbruptly) {
  auto a = Watch(std::string(kPods) + "?watch=true");
  auto b = Watch(std::string(kTrainJobs) + "?watch=true");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(server_->WaitFor([&] { return server_->OpenWatchCount() == 2; }, kWaitTimeout));
  server_->DropWatches();
  EXPECT_FALSE(NextEvent(*a).has_value());
  EXPECT_FALSE(a->ended_cleanly());
  EXPECT_FALSE(NextEvent(*b).has_value());
  EXPECT_TRUE(server_->WaitFor([&] { return server_->OpenWatchCount() == 0; }, kWaitTimeout));
}

TEST_F(WatchTest, DirectUpdatesAreWatched) {
  json pod = MustCreate(kPods, Pod("p"));
  auto stream = Watch(std::string(kPods) + "?watch=true&resourceVersion=" + VersionOf(pod));
  ASSERT_NE(stream, nullptr);
  pod["status"]["phase"] = "Running";
  ASSERT_TRUE(server_->UpdateObject(std::string(kPods) + "/p", pod).ok());
  std::optional<json> event = NextEvent(*stream);
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ((*event)["type"], "MODIFIED");
  EXPECT_EQ((*event)["object"]["status"]["phase"], "Running");
}

}  // namespace
}  // namespace pacer::testing
