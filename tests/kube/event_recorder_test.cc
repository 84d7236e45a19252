// EventRecorder against the test API server: Events name their object,
// repeats are aggregated into one Event, messages are bounded.
#include "kube/event_recorder.h"

#include <gtest/gtest.h>

#include "kube_test_env.h"

namespace pacer::controller {
namespace {

using nlohmann::json;

constexpr char kEventsPath[] = "/api/v1/namespaces/default/events";

class EventRecorderTest : public KubeTest {
 protected:
  json StoredJob(const std::string& name) {
    auto created = server_->CreateObject(TrainJobsPath(), TrainJob(name));
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    return created.ok() ? *created : json();
  }
};

TEST_F(EventRecorderTest, RepeatsAreAggregatedIntoOneEvent) {
  const json job = StoredJob("llama");
  EventRecorder recorder(client_.get());
  recorder.Normal(job, "Planned", "8 x H100-SXM, 3.2 h");
  recorder.Normal(job, "Planned", "8 x H100-SXM, 3.2 h");
  ASSERT_TRUE(recorder.Flush(kWait));

  std::vector<json> events = server_->ListObjects(kEventsPath);
  ASSERT_EQ(events.size(), 1u);
  const json& e = events[0];
  EXPECT_EQ(e["count"], 2);
  EXPECT_EQ(e["type"], "Normal");
  EXPECT_EQ(e["reason"], "Planned");
  EXPECT_EQ(e["message"], "8 x H100-SXM, 3.2 h");
  EXPECT_EQ(e["involvedObject"]["kind"], "TrainJob");
  EXPECT_EQ(e["involvedObject"]["name"], "llama");
  EXPECT_EQ(e["involvedObject"]["namespace"], "default");
  EXPECT_EQ(e["involvedObject"]["uid"], job["metadata"]["uid"]);
  EXPECT_EQ(e["involvedObject"]["apiVersion"], "pacer.dev/v1alpha1");
  EXPECT_EQ(e["source"]["component"], "pacer-controller");
  EXPECT_EQ(e["reportingComponent"], "pacer-controller");
  EXPECT_TRUE(e.contains("firstTimestamp"));
  EXPECT_TRUE(e.contains("lastTimestamp"));
  EXPECT_TRUE(e.contains("eventTime"));

  // A different message, type or object is another Event.
  recorder.Warning(job, "Planned", "8 x H100-SXM, 3.2 h");
  recorder.Normal(job, "Planned", "16 x H100-SXM, 1.7 h");
  recorder.Normal(StoredJob("other"), "Planned", "8 x H100-SXM, 3.2 h");
  ASSERT_TRUE(recorder.Flush(kWait));
  EXPECT_EQ(server_->ListObjects(kEventsPath).size(), 4u);
  EXPECT_EQ(recorder.dropped(), 0);
}

TEST_F(EventRecorderTest, LongMessagesAreTruncatedToOneKibibyte) {
  const json job = StoredJob("llama");
  EventRecorder recorder(client_.get());
  recorder.Warning(job, "WorkerRestarted", std::string(5000, 'x'));
  ASSERT_TRUE(recorder.Flush(kWait));
  std::vector<json> events = server_->ListObjects(kEventsPath);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["message"].get<std::string>().size(), EventRecorder::kMaxMessageBytes);
  EXPECT_EQ(events[0]["type"], "Warning");
}

TEST_F(EventRecorderTest, AFailedEventIsDroppedAndLaterOnesAreStillSent) {
  const json job = StoredJob("llama");
  server_->FailNextRequests("POST", "events", 503, 1);
  EventRecorder recorder(client_.get());
  recorder.Normal(job, "Planned", "first");  // fails on the server: logged, dropped
  recorder.Normal(job, "Planned", "second");
  ASSERT_TRUE(recorder.Flush(kWait));
  std::vector<json> events = server_->ListObjects(kEventsPath);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["message"], "second");
}

}  // namespace
}  // namespace pacer::controller
