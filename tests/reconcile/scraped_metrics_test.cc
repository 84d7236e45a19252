// Local mode's metrics: the text-format parser and the measurement rules
// (progress = max step, step time = slowest rank's recent mean).
#include "local/scraped_metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>

#include "bulk_http_server.h"

namespace pacer::controller {
namespace {

TEST(ParseMetricsTextTest, ReadsNamesLabelsValuesAndSkipsComments) {
  const auto samples = ParseMetricsText(
      "# HELP pacer_worker_step Global steps\n"
      "# TYPE pacer_worker_step gauge\n"
      "pacer_worker_step{job=\"q\",rank=\"0\"} 42\n"
      "pacer_worker_info{note=\"a \\\"quoted\\\" word, and a comma\"} 1 1700000000000\n"
      "pacer_worker_mfu_ratio NaN\n"
      "broken{label=\"unterminated} 3\n"
      "\n");
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].name, "pacer_worker_step");
  EXPECT_EQ(samples[0].labels.at("job"), "q");
  EXPECT_EQ(samples[0].labels.at("rank"), "0");
  EXPECT_DOUBLE_EQ(samples[0].value, 42);
  EXPECT_EQ(samples[1].labels.at("note"), "a \"quoted\" word, and a comma");
  EXPECT_DOUBLE_EQ(samples[1].value, 1);
  EXPECT_TRUE(std::isnan(samples[2].value));
}

std::string Exposition(double step, double sum, double count, double scale = 1) {
  return "pacer_worker_step " + std::to_string(step) + "\npacer_worker_step_duration_seconds_sum " +
         std::to_string(sum) + "\npacer_worker_step_duration_seconds_count " +
         std::to_string(count) + "\npacer_worker_model_scale " + std::to_string(scale) + "\n";
}

// Two ranks whose metrics pages (ports 1 and 2) a test writes.
struct TwoRanks {
  std::map<int, std::string> pages;
  ScrapedMetricsSource source{[](const JobRef&) {
                                return std::vector<int>{1, 2};
                              },
                              [this](int port) -> StatusOr<std::string> { return pages[port]; }};
  JobRef job{"default", "q", "", std::nullopt, std::nullopt};
};

TEST(ScrapedMetricsSourceTest, ProgressIsTheFurthestRankAndStepTimeTheSlowestRecentMean) {
  TwoRanks ranks;
  ScrapedMetricsSource& source = ranks.source;
  std::map<int, std::string>& pages = ranks.pages;
  const JobRef& job = ranks.job;
  pages[1] = Exposition(10, 10.0, 10);  // 1 s per step so far
  pages[2] = Exposition(9, 18.0, 9);    // 2 s per step so far
  StatusOr<Measurement> m = source.Measure(job);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->steps_completed, 10);
  EXPECT_DOUBLE_EQ(*m->step_seconds, 2.0);
  // Next scrape: both ranks did 10 more steps at 0.5 s: the recent mean wins
  // over the cumulative one.
  pages[1] = Exposition(20, 15.0, 20);
  pages[2] = Exposition(19, 23.0, 19);
  m = source.Measure(job);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->steps_completed, 20);
  EXPECT_DOUBLE_EQ(*m->step_seconds, 0.5);
  EXPECT_DOUBLE_EQ(*m->model_scale, 1.0);
}

// A relaunch (the next attempt) may reuse a port: the new process's
// counters are not a continuation of the old one's, even when they have
// caught up with them. Its mean was a difference across two processes
// ((10 - 30) / (5 - 3): negative, so the job had no step time), and until
// the new worker answered, the port that answered before counted as an
// outage.
TEST(ScrapedMetricsSourceTest, AnAttemptOnTheSamePortStartsItsOwnHistory) {
  std::map<int, std::string> pages;
  ScrapedMetricsSource source(
      [](const JobRef&) {
        return std::vector<int>{1, 2};
      },
      [&pages](int port) -> StatusOr<std::string> {
        auto it = pages.find(port);
        if (it == pages.end()) return UnavailableError("not listening");
        return it->second;
      },
      std::chrono::milliseconds(0));
  const JobRef first{"default", "q", "", 1, std::nullopt};
  pages[1] = Exposition(3, 30.0, 3);  // 10 s steps
  pages[2] = Exposition(3, 30.0, 3);
  ASSERT_TRUE(source.Measure(first).ok());
  const JobRef second{"default", "q", "", 2, std::nullopt};
  // Attempt 2's workers are starting: neither port answers yet, and neither
  // answered in this attempt, so that is no outage.
  pages.clear();
  StatusOr<Measurement> starting = source.Measure(second);
  ASSERT_TRUE(starting.ok()) << starting.status().ToString();
  EXPECT_FALSE(starting->step_seconds.has_value());
  // Port 2's worker is up, 5 steps of 2 s in; port 1's is not yet.
  pages[2] = Exposition(5, 10.0, 5);
  StatusOr<Measurement> m = source.Measure(second);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE(m->step_seconds.has_value());
  EXPECT_DOUBLE_EQ(*m->step_seconds, 2.0);
  EXPECT_EQ(m->steps_completed, 5);
  // With both down, port 2 answered in this attempt: an outage.
  pages.erase(2);
  EXPECT_EQ(source.Measure(second).status().code(), StatusCode::kUnavailable);
}

// A step gauge that is no count (a broken or hostile exporter) is no
// progress: not a clamped or wrapped number that would pass for it (5e18
// steps were taken as progress, 1e30 was an undefined conversion).
TEST(ScrapedMetricsSourceTest, AStepThatIsNoCountIsNoProgress) {
  TwoRanks ranks;
  ScrapedMetricsSource& source = ranks.source;
  std::map<int, std::string>& pages = ranks.pages;
  const JobRef& job = ranks.job;
  for (const char* absurd : {"5e18", "1e30", "-5", "+Inf"}) {
    SCOPED_TRACE(absurd);
    pages[1] = std::string("pacer_worker_step ") + absurd + "\n";
    pages[2] = "";
    StatusOr<Measurement> m = source.Measure(job);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_FALSE(m->steps_completed.has_value());
    pages[2] = "pacer_worker_step 7\n";  // a sane rank still counts
    m = source.Measure(job);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->steps_completed, 7);
  }
}

// A step-time histogram whose sum or count is no number is no measurement,
// and leaves no trace: a NaN sum kept in the rank's history made each later
// mean NaN, so the rank never measured again.
TEST(ScrapedMetricsSourceTest, AHistogramThatIsNoNumberIsNoStepTime) {
  TwoRanks ranks;
  ScrapedMetricsSource& source = ranks.source;
  std::map<int, std::string>& pages = ranks.pages;
  const JobRef& job = ranks.job;
  pages[2] = "";
  for (const char* sum_and_count : {"NaN 10", "+Inf 10", "10 NaN", "10 +Inf", "-3 10"}) {
    SCOPED_TRACE(sum_and_count);
    const std::string text = sum_and_count;
    const std::string sum = text.substr(0, text.find(' '));
    const std::string count = text.substr(text.find(' ') + 1);
    pages[1] = "pacer_worker_step 10\npacer_worker_step_duration_seconds_sum " + sum +
               "\npacer_worker_step_duration_seconds_count " + count + "\n";
    StatusOr<Measurement> m = source.Measure(job);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_FALSE(m->step_seconds.has_value()) << *m->step_seconds;
  }
  pages[1] = Exposition(20, 30.0, 20);
  StatusOr<Measurement> m = source.Measure(job);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE(m->step_seconds.has_value());
  EXPECT_DOUBLE_EQ(*m->step_seconds, 1.5);
}

TEST(ScrapedMetricsSourceTest, NoReachableRankIsUnavailableButNoRanksIsNoMeasurement) {
  bool up = false;
  ScrapedMetricsSource down([](const JobRef&) { return std::vector<int>{1}; },
                            [&up](int) -> StatusOr<std::string> {
                              if (up) return Exposition(1, 1.0, 1);
                              return UnavailableError("connection refused");
                            },
                            std::chrono::milliseconds(0));
  // A worker still starting (its endpoint never answered): not an outage.
  StatusOr<Measurement> starting = down.Measure(JobRef{"d", "q", "", std::nullopt, std::nullopt});
  ASSERT_TRUE(starting.ok()) << starting.status().ToString();
  EXPECT_FALSE(starting->step_seconds.has_value());
  // It answered, then stopped answering while still running: an outage.
  up = true;
  ASSERT_TRUE(down.Measure(JobRef{"d", "q", "", std::nullopt, std::nullopt}).ok());
  up = false;
  EXPECT_EQ(down.Measure(JobRef{"d", "q", "", std::nullopt, std::nullopt}).status().code(),
            StatusCode::kUnavailable);
  ScrapedMetricsSource none([](const JobRef&) { return std::vector<int>{}; },
                            [](int) -> StatusOr<std::string> { return std::string(); });
  StatusOr<Measurement> m = none.Measure(JobRef{"d", "q", "", std::nullopt, std::nullopt});
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->step_seconds.has_value());
}

TEST(ScrapedMetricsSourceTest, RunMeanCoversEveryStepNotTheLastWindow) {
  std::string page;
  ScrapedMetricsSource source([](const JobRef&) { return std::vector<int>{1}; },
                              [&page](int) -> StatusOr<std::string> { return page; });
  JobRef job{"default", "q", "", std::nullopt, std::nullopt};
  EXPECT_FALSE(source.RunMeanStepSeconds().has_value());
  page = Exposition(10, 10.0, 10);  // 10 steps at 1 s
  ASSERT_TRUE(source.Measure(job).ok());
  page = Exposition(40, 16.0, 40);  // 30 more at 0.2 s
  StatusOr<Measurement> m = source.Measure(job);
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ(*m->step_seconds, 0.2);  // the window, for the projection
  ASSERT_TRUE(source.RunMeanStepSeconds().has_value());
  EXPECT_DOUBLE_EQ(*source.RunMeanStepSeconds(), 16.0 / 40);  // the whole run
  // The worker restarted (a resume): its counters start again from zero.
  page = Exposition(50, 4.0, 10);  // 10 steps at 0.4 s
  ASSERT_TRUE(source.Measure(job).ok());
  EXPECT_DOUBLE_EQ(*source.RunMeanStepSeconds(), 20.0 / 50);
}

TEST(ScrapedMetricsSourceTest, EndpointsClosingAsTheWorkersExitAreNotAnOutage) {
  // The worker answered while training, closed its endpoint as it finished,
  // and the launcher then sees it exit.
  bool finished = false;
  int lookups_after_finish = 0;
  ScrapedMetricsSource finishing(
      [&](const JobRef&) {
        if (!finished) return std::vector<int>{1};
        return ++lookups_after_finish == 1 ? std::vector<int>{1} : std::vector<int>{};
      },
      [&finished](int) -> StatusOr<std::string> {
        if (!finished) return Exposition(5, 5.0, 5);
        return UnavailableError("connection refused");
      },
      std::chrono::milliseconds(5000));
  ASSERT_TRUE(finishing.Measure(JobRef{"d", "q", "", std::nullopt, std::nullopt}).ok());
  finished = true;
  StatusOr<Measurement> m = finishing.Measure(JobRef{"d", "q", "", std::nullopt, std::nullopt});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_FALSE(m->step_seconds.has_value());
  EXPECT_EQ(lookups_after_finish, 2);  // asked again, and the workers were gone
}

// A process on a worker's metrics port that sends an endless page costs
// local mode at most kMaxScrapeBytes, and the scrape is refused.
TEST(HttpScraperTest, APageOverTheLimitIsRefusedWhileItIsRead) {
  pacer::testing::BulkHttpServer server(64 * kMaxScrapeBytes,
                                        pacer::testing::BulkHttpServer::Framing::kChunked);
  {
    const ScrapeFn scrape = HttpScraper(std::chrono::seconds(60));
    StatusOr<std::string> page = scrape(server.port());
    EXPECT_EQ(page.status().code(), StatusCode::kResourceExhausted) << page.status().message();
  }
  // The limit plus the sockets' buffers and the client's read-ahead; the
  // whole page would be 64 times the limit.
  EXPECT_LT(server.WaitForBodyBytesSent(), 8 * kMaxScrapeBytes);
}

}  // namespace
}  // namespace pacer::controller
