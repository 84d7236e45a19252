#include "core/metrics.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace pacer::worker {
namespace {

// Sends `request` to 127.0.0.1:<port> and reads to EOF (the server closes
// the connection after its answer). Returns the whole response, or "" when
// the connection fails. HttpRequest: `method` <path> with HTTP/1.0.
std::string HttpRaw(int port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return response;
}

std::string HttpRequest(int port, const std::string& method, const std::string& path) {
  return HttpRaw(port, method + " " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
}

// GET's body, or "" unless the answer is 200 (the assertions then name what
// is missing).
std::string HttpGet(int port, const std::string& path) {
  const std::string response = HttpRequest(port, "GET", path);
  if (response.rfind("HTTP/1.", 0) != 0 || response.find(" 200 ") == std::string::npos) return "";
  size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

const MetricsLabels kLabels = {"llama-7b", "research", "3", "cpu", "H100-SXM", ""};
// prometheus-cpp sorts labels by name.
const std::string kLabelText =
    R"(backend="cpu",gpu_type="H100-SXM",namespace="research",rank="3",trainjob="llama-7b")";

// The value of the sample `name{<kLabelText><extra>}`, NaN if absent (check
// with HasSample first where absence matters).
double Sample(const std::string& text, const std::string& name, const std::string& extra = "") {
  const std::string prefix = name + "{" + kLabelText + extra + "} ";
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) == 0) return std::strtod(line.c_str() + prefix.size(), nullptr);
  }
  ADD_FAILURE() << "no sample " << prefix << " in\n" << text;
  return std::nan("");
}

bool HasSample(const std::string& text, const std::string& name, const std::string& extra = "") {
  return text.find(name + "{" + kLabelText + extra + "} ") != std::string::npos;
}

std::unique_ptr<WorkerMetrics> Start() {
  auto metrics = WorkerMetrics::Create(kLabels, "127.0.0.1:0");
  EXPECT_TRUE(metrics.ok()) << metrics.status().ToString();
  return metrics.ok() ? std::move(metrics).value() : nullptr;
}

StepMeasurement Step(int64_t step, double seconds) {
  StepMeasurement m;
  m.step = step;
  m.step_seconds = seconds;
  m.global_samples = 64;
  m.global_tokens = 64 * 2048;
  m.model_flops = 5e12;
  m.collective_seconds = 0.1;
  m.collective_bytes = 1e9;
  m.collective_bus_factor = 1.5;
  m.exposed_communication_seconds = 0.02;
  return m;
}

TEST(WorkerMetricsTest, PortZeroPicksAFreePort) {
  auto metrics = Start();
  ASSERT_NE(metrics, nullptr);
  EXPECT_GT(metrics->port(), 0);
  EXPECT_FALSE(HttpGet(metrics->port(), "/metrics").empty());
}

// Anything but GET /metrics is answered without civetweb's error page,
// which overflowed its 100 KB thread stack in a process with libquadmath's
// printf hooks (OpenBLAS loads them, as in this test binary): a GET of "/"
// killed the worker with SIGSEGV, and this test binary with it.
TEST(WorkerMetricsTest, OtherPathsAndMethodsAreRefusedAndTheWorkerLives) {
  auto metrics = Start();
  ASSERT_NE(metrics, nullptr);
  for (const char* path : {"/", "/healthz", "/metrics/", "/favicon.ico"}) {
    const std::string response = HttpRequest(metrics->port(), "GET", path);
    EXPECT_EQ(response.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u) << path << ": " << response;
    EXPECT_NE(response.find("this port serves /metrics only"), std::string::npos) << response;
  }
  for (const char* method : {"POST", "PUT", "DELETE", "HEAD"}) {
    const std::string response = HttpRequest(metrics->port(), method, "/metrics");
    EXPECT_EQ(response.rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0), 0u)
        << method << ": " << response;
    EXPECT_NE(response.find("Allow: GET\r\n"), std::string::npos) << response;
    // A HEAD answer has no body.
    EXPECT_EQ(response.find("method not allowed") == std::string::npos,
              std::string(method) == "HEAD")
        << response;
  }
  // Requests civetweb refuses before any callback (a TLS handshake, a URI
  // without its slash, HTTP/2, oversized headers) take its shallower error
  // path, which fits the stack: answered, and the worker lives on.
  for (const std::string& raw :
       {std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 15),
        std::string("GET metrics HTTP/1.0\r\n\r\n"), std::string("GET / HTTP/2.0\r\n\r\n"),
        "GET /metrics HTTP/1.0\r\nX: " + std::string(20000, 'a') + "\r\n\r\n"}) {
    EXPECT_EQ(HttpRaw(metrics->port(), raw).rfind("HTTP/", 0), 0u) << raw.substr(0, 24);
  }
  EXPECT_NE(HttpGet(metrics->port(), "/metrics").find("pacer_worker_step"), std::string::npos);
  EXPECT_NE(HttpGet(metrics->port(), "/metrics?debug=1").find("pacer_worker_step"),
            std::string::npos);
}

// The worker binds its port before the rendezvous and publishes once it
// knows its resume step: meanwhile a scrape is told to retry (a resumed run
// would otherwise show step 0), through the worker's own fixed answer (a
// path without a handler took civetweb's error page, which overflows its
// thread stack here), while a published server beside it serves its series.
TEST(WorkerMetricsTest, AnUnpublishedServerAnswersRetryUntilPublished) {
  auto published = Start();
  ASSERT_NE(published, nullptr);
  auto created = WorkerMetrics::Create(kLabels, "127.0.0.1:0", /*publish=*/false);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  WorkerMetrics& metrics = **created;
  metrics.SetStepsCompleted(40);
  const std::string before = HttpRequest(metrics.port(), "GET", "/metrics");
  EXPECT_EQ(before.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u) << before;
  EXPECT_NE(before.find("Retry-After: 1\r\n"), std::string::npos) << before;
  EXPECT_NE(HttpGet(published->port(), "/metrics").find("pacer_worker_step"), std::string::npos);
  metrics.Publish();
  metrics.Publish();  // once only
  const std::string after = HttpGet(metrics.port(), "/metrics");
  EXPECT_EQ(Sample(after, "pacer_worker_step"), 40) << after;
}

// The launch attempt is a label when the controller gives one (so that its
// queries leave the previous attempt's pods out), and absent otherwise.
TEST(WorkerMetricsTest, TheAttemptIsALabelWhenGiven) {
  MetricsLabels labels = kLabels;
  labels.attempt = "3";
  auto with = WorkerMetrics::Create(labels, "127.0.0.1:0");
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  const std::string text = HttpGet((*with)->port(), "/metrics");
  EXPECT_NE(text.find("pacer_worker_step{attempt=\"3\"," + kLabelText + "} "), std::string::npos)
      << text;
  auto without = Start();
  ASSERT_NE(without, nullptr);
  EXPECT_EQ(HttpGet(without->port(), "/metrics").find("attempt="), std::string::npos);
}

TEST(WorkerMetricsTest, EveryMetricCarriesTheLabels) {
  auto metrics = Start();
  ASSERT_NE(metrics, nullptr);
  metrics->SetPlanInfo({2, 1, 4, 1, 2, 8, "bf16"});
  const std::string text = HttpGet(metrics->port(), "/metrics");
  for (const char* name :
       {"pacer_worker_last_step_seconds", "pacer_worker_predicted_step_seconds",
        "pacer_worker_steps_completed_total", "pacer_worker_step", "pacer_worker_total_steps",
        "pacer_worker_samples_per_second", "pacer_worker_tokens_per_second",
        "pacer_worker_achieved_tflops", "pacer_worker_collective_seconds",
        "pacer_worker_collective_busbw_bytes_per_second",
        "pacer_worker_exposed_communication_seconds", "pacer_worker_peak_memory_bytes",
        "pacer_worker_predicted_peak_memory_bytes", "pacer_worker_model_scale",
        "pacer_worker_checkpoints_total", "pacer_worker_last_checkpoint_seconds",
        "pacer_worker_last_checkpoint_timestamp_seconds", "pacer_worker_checkpoint_interval_steps",
        "pacer_worker_step_duration_seconds_count", "pacer_worker_step_duration_seconds_sum"}) {
    EXPECT_TRUE(HasSample(text, name)) << name << " missing in\n" << text;
  }
  EXPECT_TRUE(HasSample(text, "pacer_worker_mfu_ratio", R"(,peak="catalog")"));
  EXPECT_TRUE(HasSample(text, "pacer_worker_mfu_ratio", R"(,peak="calibrated")"));
  EXPECT_TRUE(HasSample(text, "pacer_worker_step_duration_seconds_bucket", R"(,le="+Inf")"));
  EXPECT_NE(text.find("# TYPE pacer_worker_step_duration_seconds histogram"), std::string::npos);
  EXPECT_NE(text.find("# TYPE pacer_worker_steps_completed_total counter"), std::string::npos);
  // prometheus-cpp writes the constant labels first, then the series' own.
  EXPECT_EQ(Sample(text, "pacer_worker_info",
                   R"(,dp="4",grad_accum="8",micro_batch="2",pp="1",precision="bf16",tp="2",)"
                   R"(zero="1")"),
            1);
}

TEST(WorkerMetricsTest, StepsUpdateTheHistogramAndTheLastStepGauges) {
  auto metrics = Start();
  ASSERT_NE(metrics, nullptr);
  metrics->ObserveStep(Step(101, 0.5));
  metrics->ObserveStep(Step(102, 0.25));
  metrics->ObserveStep(Step(103, 2.0));
  const std::string text = HttpGet(metrics->port(), "/metrics");
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_last_step_seconds"), 2.0);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_step_duration_seconds_count"), 3);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_step_duration_seconds_sum"), 2.75);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_step_duration_seconds_bucket", R"(,le="+Inf")"), 3);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_step_duration_seconds_bucket", R"(,le="0.001")"), 0);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_step_duration_seconds_bucket", R"(,le="1000")"), 3);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_steps_completed_total"), 3);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_step"), 103);
  // Derived from the last step (2 s): 64 samples, 5e12 FLOPs, 1e9 x 1.5 bytes in 0.1 s.
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_samples_per_second"), 32);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_tokens_per_second"), 32 * 2048);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_achieved_tflops"), 2.5);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_collective_seconds"), 0.1);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_collective_busbw_bytes_per_second"), 1.5e10);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_exposed_communication_seconds"), 0.02);
}

TEST(WorkerMetricsTest, MfuIsFlopsOverStepTimesPeakAndNaNUntilThePeakIsKnown) {
  auto metrics = Start();
  ASSERT_NE(metrics, nullptr);
  metrics->ObserveStep(Step(1, 0.5));
  std::string text = HttpGet(metrics->port(), "/metrics");
  EXPECT_TRUE(std::isnan(Sample(text, "pacer_worker_mfu_ratio", R"(,peak="catalog")")));

  metrics->SetPeaks(/*catalog=*/100e12, /*calibrated=*/50e12);
  metrics->ObserveStep(Step(2, 0.5));
  text = HttpGet(metrics->port(), "/metrics");
  // 5e12 FLOPs / (0.5 s x 100e12 FLOP/s) = 0.1; against 50e12, 0.2.
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_mfu_ratio", R"(,peak="catalog")"), 0.1);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_mfu_ratio", R"(,peak="calibrated")"), 0.2);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_achieved_tflops"), 10);

  metrics->SetPeaks(100e12, 0);  // calibration lost: no stale ratio
  text = HttpGet(metrics->port(), "/metrics");
  EXPECT_TRUE(std::isnan(Sample(text, "pacer_worker_mfu_ratio", R"(,peak="calibrated")")));
}

TEST(WorkerMetricsTest, PredictionsProgressMemoryScaleAndCheckpoints) {
  auto metrics = Start();
  ASSERT_NE(metrics, nullptr);
  std::string text = HttpGet(metrics->port(), "/metrics");
  EXPECT_TRUE(std::isnan(Sample(text, "pacer_worker_predicted_step_seconds")));
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_model_scale"), 1);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_resume_steps_lost"), 0);
  metrics->SetResumeStepsLost(300);  // fell back past an unreadable checkpoint
  text = HttpGet(metrics->port(), "/metrics");
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_resume_steps_lost"), 300);

  // Only the step time predicted (a launch by hand): the memory stays NaN,
  // not a plausible-looking 0.
  metrics->SetPredicted(1.25, std::nullopt);
  text = HttpGet(metrics->port(), "/metrics");
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_predicted_step_seconds"), 1.25);
  EXPECT_TRUE(std::isnan(Sample(text, "pacer_worker_predicted_peak_memory_bytes")));

  metrics->SetPredicted(1.25, 64e9);
  metrics->SetTotalSteps(5000);
  metrics->SetStepsCompleted(1200);  // resumed from a checkpoint
  metrics->SetPeakMemoryBytes(60e9);
  metrics->SetModelScale(0.125);
  metrics->ObserveCheckpoint(3.5, 1'700'000'000);
  metrics->ObserveCheckpoint(4.5, 1'700'000'600.5);
  text = HttpGet(metrics->port(), "/metrics");
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_predicted_step_seconds"), 1.25);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_predicted_peak_memory_bytes"), 64e9);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_total_steps"), 5000);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_step"), 1200);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_steps_completed_total"), 0);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_peak_memory_bytes"), 60e9);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_model_scale"), 0.125);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_checkpoints_total"), 2);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_last_checkpoint_seconds"), 4.5);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_last_checkpoint_timestamp_seconds"), 1700000600.5);
}

// The TrainJob's name is the trainjob label: a `job` label would collide
// with the one Prometheus gives every scraped series.
TEST(WorkerMetricsTest, TheTrainJobIsTheTrainjobLabelNotJob) {
  auto metrics = Start();
  ASSERT_NE(metrics, nullptr);
  const std::string text = HttpGet(metrics->port(), "/metrics");
  EXPECT_NE(text.find(R"(trainjob="llama-7b")"), std::string::npos) << text;
  EXPECT_EQ(text.find(R"(,job=)"), std::string::npos) << text;
  EXPECT_EQ(text.find(R"({job=)"), std::string::npos) << text;
}

// Before the first checkpoint (and the first step) the age counts from the
// worker's start, so the overdue (and stall) alert also sees a worker that
// never saves (or steps); the interval is exported for the alert's expected
// age.
TEST(WorkerMetricsTest, CheckpointAndStepAgesStartAtCreationAndIntervalIsExported) {
  const double before =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto metrics = Start();
  ASSERT_NE(metrics, nullptr);
  const double after =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  metrics->SetCheckpointIntervalSteps(250);
  const std::string text = HttpGet(metrics->port(), "/metrics");
  // A worker that never saves, or never completes a step, looks ever more
  // overdue or stalled.
  for (const char* name : {"pacer_worker_last_checkpoint_timestamp_seconds",
                           "pacer_worker_last_step_timestamp_seconds"}) {
    const double started = Sample(text, name);
    EXPECT_GE(started, std::floor(before)) << name;
    EXPECT_LE(started, std::ceil(after)) << name;
  }
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_checkpoint_interval_steps"), 250);
  EXPECT_NE(text.find("# TYPE pacer_worker_last_checkpoint_timestamp_seconds gauge"),
            std::string::npos);
}

// The stall alert compares the time since the last step with the step time:
// the end of the warm-up step counts, then every measured step's (before any,
// the worker's start, checked above).
TEST(WorkerMetricsTest, TheLastStepTimestampIsEachStepsEnd) {
  auto metrics = Start();
  ASSERT_NE(metrics, nullptr);
  metrics->ObserveWarmUpStep(41, 2e9);
  std::string text = HttpGet(metrics->port(), "/metrics");
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_last_step_timestamp_seconds"), 2e9);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_step"), 41);
  // The warm-up step is a completed step, only not a timing sample.
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_steps_completed_total"), 1);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_step_duration_seconds_count"), 0);
  StepMeasurement step = Step(42, 300.0);
  step.finished_unix_seconds = 2e9 + 300;
  metrics->ObserveStep(step);
  text = HttpGet(metrics->port(), "/metrics");
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_steps_completed_total"), 2);
  // A step without its end time (0), or with one that is no time, leaves the
  // last one's.
  metrics->ObserveStep(Step(43, 300.0));
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    StepMeasurement broken = Step(44, 300.0);
    broken.finished_unix_seconds = bad;
    metrics->ObserveStep(broken);
    metrics->ObserveWarmUpStep(45, bad);
  }
  text = HttpGet(metrics->port(), "/metrics");
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_last_step_timestamp_seconds"), 2e9 + 300);
  EXPECT_NE(text.find("# TYPE pacer_worker_last_step_timestamp_seconds gauge"), std::string::npos);
}

TEST(WorkerMetricsTest, ANewPlanReplacesTheInfoSeries) {
  auto metrics = Start();
  ASSERT_NE(metrics, nullptr);
  metrics->SetPlanInfo({2, 1, 4, 1, 2, 8, "bf16"});
  metrics->SetPlanInfo({1, 2, 4, 0, 1, 16, "fp16"});
  const std::string text = HttpGet(metrics->port(), "/metrics");
  EXPECT_EQ(text.find(R"(precision="bf16")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(precision="fp16")"), std::string::npos) << text;
}

TEST(WorkerMetricsTest, BadDurationsDoNotPoisonTheHistogram) {
  auto metrics = Start();
  ASSERT_NE(metrics, nullptr);
  metrics->ObserveStep(Step(1, 0.5));
  metrics->ObserveStep(Step(2, std::nan("")));
  metrics->ObserveStep(Step(3, -1));
  metrics->ObserveStep(Step(4, 0));  // counted, but no rates from it
  const std::string text = HttpGet(metrics->port(), "/metrics");
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_step_duration_seconds_count"), 2);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_step_duration_seconds_sum"), 0.5);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_samples_per_second"), 128);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_step"), 4);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_steps_completed_total"), 4);
}

TEST(WorkerMetricsTest, ConcurrentObservationsAreAllCounted) {
  auto metrics = Start();
  ASSERT_NE(metrics, nullptr);
  constexpr int kThreads = 4, kSteps = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kSteps; ++i) metrics->ObserveStep(Step(i, 0.01));
    });
  }
  // Scrapes race with the updates on purpose (for TSan and ASan builds).
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(HttpGet(metrics->port(), "/metrics").empty());
  for (auto& t : threads) t.join();
  const std::string text = HttpGet(metrics->port(), "/metrics");
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_step_duration_seconds_count"), kThreads * kSteps);
  EXPECT_DOUBLE_EQ(Sample(text, "pacer_worker_steps_completed_total"), kThreads * kSteps);
}

TEST(WorkerMetricsTest, RejectsMalformedAddresses) {
  for (const char* address : {"", "9400", ":9400", "0.0.0.0:", "0.0.0.0:x", "0.0.0.0:70000"}) {
    auto metrics = WorkerMetrics::Create(kLabels, address);
    EXPECT_EQ(metrics.status().code(), StatusCode::kInvalidArgument) << address;
  }
}

TEST(WorkerMetricsTest, APortInUseIsAnErrorNamingTheAddress) {
  auto first = Start();
  ASSERT_NE(first, nullptr);
  const std::string address = "127.0.0.1:" + std::to_string(first->port());
  auto second = WorkerMetrics::Create(kLabels, address);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find(address), std::string::npos)
      << second.status().ToString();
}

}  // namespace
}  // namespace pacer::worker
