// The controller's Prometheus client against a real Prometheus server
// (Debian's) scraping a real pacer-worker: the re-plan loop's measurement
// comes back with the worker's step time and progress; errors are coded so
// the caller knows whether to retry. Skipped without the prometheus binary.
#include "promql/prometheus_client.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace pacer::controller {
namespace {

namespace fs = std::filesystem;

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

bool OnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string p = path;
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = std::min(p.find(':', start), p.size());
    if (access((p.substr(start, end - start) + "/" + program).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

pid_t Spawn(std::vector<std::string> argv, const std::vector<std::string>& extra_env,
            const std::string& log) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp, args;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

void Stop(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
}

TEST(PrometheusClientTest, UnreachablePrometheusIsUnavailable) {
  PrometheusClient client("http://127.0.0.1:" + std::to_string(FreePort()),
                          std::chrono::milliseconds(2000));
  auto r = client.Query("up");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(r.status().retryable());
  EXPECT_NE(r.status().message().find("unreachable"), std::string::npos);
}

// Answers that say success but lack the documented members: each is an
// Internal error. (A const operator[] on a missing member read through
// end(), undefined behaviour the reconcile's exception guard cannot catch.)
TEST(PrometheusClientTest, MalformedSuccessfulAnswersAreInternalErrors) {
  for (const char* body : {
           R"({"status":"success"})",
           R"({"status":"success","data":{"resultType":"vector"}})",
           R"({"status":"success","data":{"result":[]}})",
           R"({"status":"success","data":[1,2]})",
           R"({"status":"success","data":{"resultType":"vector","result":{"a":1}}})",
           R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,"2"]}]}})",
           R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}})",
           R"({"status":"success","data":{"resultType":"vector","result":[7]}})",
           R"({"status":"success","data":{"resultType":"scalar","result":[1]}})",
           R"({"status":1})",
           R"({"data":{}})",
       }) {
    SCOPED_TRACE(body);
    const StatusOr<std::vector<PromSample>> parsed = ParsePromAnswer(body, 200, "up");
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), StatusCode::kInternal) << parsed.status().ToString();
  }
  const StatusOr<std::vector<PromSample>> good = ParsePromAnswer(
      R"({"status":"success","data":{"resultType":"vector","result":[)"
      R"({"metric":{"rank":"0"},"value":[1700000000.5,"0.25"]}]}})",
      200, "up");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  // An error answer whose members are not strings is still Prometheus'
  // refusal, not an exception reported as "unreachable".
  const StatusOr<std::vector<PromSample>> refused =
      ParsePromAnswer(R"({"status":"error","errorType":7,"error":["x"]})", 400, "up");
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().ToString();
  ASSERT_EQ(good->size(), 1u);
  EXPECT_EQ((*good)[0].labels.at("rank"), "0");
  EXPECT_DOUBLE_EQ((*good)[0].value, 0.25);
  EXPECT_DOUBLE_EQ((*good)[0].timestamp_unix_seconds, 1700000000.5);
}

// What the answers hold is read as a measurement only when it is one: a
// count that is not a whole number in [0, 2^53] is none (5e18 steps passed
// for progress; 1e30 was an undefined conversion to int64).
TEST(PrometheusClientTest, AnswersThatAreNoCountsAreNoMeasurement) {
  auto one = [](double value) { return std::vector<PromSample>{PromSample{{}, value, 0}}; };
  const JobMeasurement sane = JobMeasurementFromAnswers(one(0.5), one(41), one(1000), one(2));
  EXPECT_EQ(sane.step_seconds, 0.5);
  EXPECT_EQ(sane.steps_completed, 41);
  EXPECT_EQ(sane.total_steps, 1000);
  EXPECT_EQ(sane.ranks_reporting, 2);
  for (double absurd : {5e18, 1e30, -5.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    SCOPED_TRACE(absurd);
    const JobMeasurement m =
        JobMeasurementFromAnswers(one(absurd), one(absurd), one(absurd), one(absurd));
    EXPECT_FALSE(m.steps_completed.has_value());
    EXPECT_FALSE(m.total_steps.has_value());
    EXPECT_EQ(m.ranks_reporting, 0);
    if (!std::isfinite(absurd)) {
      EXPECT_FALSE(m.step_seconds.has_value());
    }
  }
  const JobMeasurement none = JobMeasurementFromAnswers({}, {}, {}, {});
  EXPECT_FALSE(none.step_seconds.has_value());
  EXPECT_FALSE(none.steps_completed.has_value());
  EXPECT_EQ(none.ranks_reporting, 0);
}

TEST(PrometheusClientTest, QuotesLabelValues) {
  EXPECT_EQ(PromQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
}

// Runs `promtool test rules` on dir/queries_test.yaml; expects it to pass,
// then removes `dir`.
void ExpectPromtoolPasses(const fs::path& dir) {
  const std::string log = (dir / "promtool.log").string();
  const pid_t promtool =
      Spawn({"promtool", "test", "rules", (dir / "queries_test.yaml").string()}, {}, log);
  ASSERT_GT(promtool, 0);
  int status = 0;
  ASSERT_EQ(waitpid(promtool, &status, 0), promtool);
  std::ifstream out(log);
  std::stringstream output_text;
  output_text << out.rdbuf();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output_text.str();
  fs::remove_all(dir);
}

// The controller's queries find a job's workers whether they name the
// TrainJob in `trainjob` (current workers; `job` is then the scrape job's)
// or in `job` (older workers), and never count another TrainJob whose scrape
// job happens to carry this name. promtool evaluates them on recorded
// series; the expected values fail if either kind of series is missed.
TEST(PrometheusClientTest, QueriesMatchTrainjobAndLegacyJobLabels) {
  if (!OnPath("promtool")) GTEST_SKIP() << "no promtool binary (scripts/install-deps.sh)";
  const fs::path dir = fs::temp_directory_path() / ("pacer-promtool-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string legacy = R"(job="legacy",namespace="research")";
  const std::string current = R"(job="pacer-workers",trainjob="current",namespace="research")";
  // A current worker of TrainJob "other" scraped by a job named "legacy".
  const std::string decoy = R"(job="legacy",trainjob="other",namespace="research")";
  std::ofstream test(dir / "queries_test.yaml");
  test << "evaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n";
  auto series = [&](const std::string& name, const std::string& labels, const std::string& rank,
                    const std::string& values) {
    test << "      - series: '" << name << "{" << labels << ",rank=\"" << rank << "\"}'\n"
         << "        values: '" << values << "'\n";
  };
  for (const std::string rank : {"0", "1"}) {  // legacy: 2 s steps, 2 ranks
    series("pacer_worker_step_duration_seconds_sum", legacy, rank, "0+2x20");
    series("pacer_worker_step_duration_seconds_count", legacy, rank, "0+1x20");
    series("pacer_worker_step", legacy, rank, "0+1x20");
    series("pacer_worker_total_steps", legacy, rank, "1000x20");
  }
  series("pacer_worker_step_duration_seconds_sum", current, "0", "0+3x20");  // 3 s steps
  series("pacer_worker_step_duration_seconds_count", current, "0", "0+1x20");
  series("pacer_worker_step", current, "0", "0+2x20");
  series("pacer_worker_total_steps", current, "0", "500x20");
  // A broken rank of the same job: its step and total are no counts, and
  // must not hide rank 0's (the max over ranks took 1e30).
  series("pacer_worker_step", current, "1", "1e30x20");
  series("pacer_worker_total_steps", current, "1", "-5x20");
  series("pacer_worker_step_duration_seconds_sum", decoy, "0", "0+50x20");
  series("pacer_worker_step_duration_seconds_count", decoy, "0", "0+1x20");
  series("pacer_worker_step", decoy, "0", "0+9x20");
  series("pacer_worker_total_steps", decoy, "0", "9999x20");
  test << "    promql_expr_test:\n";
  auto expect = [&](const std::string& expr, double value) {
    test << "      - expr: '" << expr << "'\n        eval_time: 10m\n"
         << "        exp_samples:\n          - labels: '{}'\n            value: " << value << "\n";
  };
  const JobMeasurementQueries old_queries =
      MeasureJobQueries("research", "legacy", std::chrono::seconds(300));
  expect(old_queries.step_seconds, 2);
  expect(old_queries.steps_completed, 10);
  expect(old_queries.total_steps, 1000);
  expect(old_queries.ranks_reporting, 2);
  const JobMeasurementQueries new_queries =
      MeasureJobQueries("research", "current", std::chrono::seconds(300));
  expect(new_queries.step_seconds, 3);
  expect(new_queries.steps_completed, 20);
  expect(new_queries.total_steps, 500);
  expect(new_queries.ranks_reporting, 2);
  // Series without an `attempt` label (workers that do not export it)
  // count for any attempt.
  expect(MeasureJobQueries("research", "current", std::chrono::seconds(300), 4).step_seconds, 3);
  test.close();
  ExpectPromtoolPasses(dir);
}

// After a relaunch the previous attempt's pods stay in the rate window: the
// new attempt's step time is its own, not the slowest of both layouts.
TEST(PrometheusClientTest, AnAttemptsQueriesIgnoreThePreviousAttemptsPods) {
  if (!OnPath("promtool")) GTEST_SKIP() << "no promtool binary (scripts/install-deps.sh)";
  const fs::path dir = fs::temp_directory_path() / ("pacer-attempt-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream test(dir / "queries_test.yaml");
  const std::string job = R"(job="pacer-workers",trainjob="resized",namespace="research",rank="0")";
  // Attempt 1: 2 s steps until 8m, when it was stopped. Attempt 2 (another
  // layout): 1 s steps from 9m.
  test << "evaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n"
       << "      - series: 'pacer_worker_step_duration_seconds_sum{" << job << R"(,attempt="1"}')"
       << "\n        values: '0+2x8'\n"
       << "      - series: 'pacer_worker_step_duration_seconds_count{" << job << R"(,attempt="1"}')"
       << "\n        values: '0+1x8'\n"
       << "      - series: 'pacer_worker_step_duration_seconds_sum{" << job << R"(,attempt="2"}')"
       << "\n        values: '_x9 0+1x3'\n"
       << "      - series: 'pacer_worker_step_duration_seconds_count{" << job << R"(,attempt="2"}')"
       << "\n        values: '_x9 0+1x3'\n"
       << "    promql_expr_test:\n";
  auto expect = [&](const std::string& expr, double value) {
    test << "      - expr: '" << expr << "'\n        eval_time: 12m\n"
         << "        exp_samples:\n          - labels: '{}'\n            value: " << value << "\n";
  };
  expect(MeasureJobQueries("research", "resized", std::chrono::seconds(300), 2).step_seconds, 1);
  expect(MeasureJobQueries("research", "resized", std::chrono::seconds(300), 1).step_seconds, 2);
  test.close();
  ExpectPromtoolPasses(dir);
}

// A worker's step series, scraped every 20 s from 0 to `until_seconds`: the
// histogram's sum and count and pacer_worker_last_step_seconds (0 until the
// first step ends), for steps of `step_seconds` one after the other.
struct StepSeries {
  std::string sums, counts, last_step;
};
StepSeries SeriesOfSteps(const std::vector<double>& step_seconds, int until_seconds) {
  StepSeries out;
  for (int t = 0; t <= until_seconds; t += 20) {
    double sum = 0, ended = 0, end = 0, last = 0;
    for (double d : step_seconds) {
      end += d;
      if (end > t) break;
      sum += d;
      ++ended;
      last = d;
    }
    out.sums += std::to_string(sum) + " ";
    out.counts += std::to_string(ended) + " ";
    out.last_step += std::to_string(last) + " ";
  }
  return out;
}

// Starts a promtool test of each job's series (rank 0 of TrainJob `trainjob` in
// "research"), every 20 s; WriteExpectation adds the expressions.
void WriteStepSeries(std::ofstream& test, const std::map<std::string, StepSeries>& jobs) {
  test << "evaluation_interval: 20s\ntests:\n  - interval: 20s\n    input_series:\n";
  for (const auto& [trainjob, series] : jobs) {
    const std::string labels =
        R"(job="pacer-workers",trainjob=")" + trainjob + R"(",namespace="research",rank="0")";
    for (const auto& [name, values] :
         {std::pair{"pacer_worker_step_duration_seconds_sum", series.sums},
          std::pair{"pacer_worker_step_duration_seconds_count", series.counts},
          std::pair{"pacer_worker_last_step_seconds", series.last_step}}) {
      test << "      - series: '" << name << "{" << labels << "}'\n"
           << "        values: '" << values << "'\n";
    }
  }
  test << "    promql_expr_test:\n";
}
void WriteExpectation(std::ofstream& test, const std::string& expr, int eval_seconds,
                      std::optional<double> value) {
  test << "      - expr: '" << expr << "'\n        eval_time: " << eval_seconds << "s\n";
  if (!value) {
    test << "        exp_samples: []\n";
    return;
  }
  test.precision(17);  // 6 digits (the default) differ from promtool's answer
  test << "        exp_samples:\n          - labels: '{}'\n            value: " << *value << "\n";
}

// A job whose steps are longer than the 120 s window: no step completes in
// it, so the windowed answer is NaN (no finite sample) and the job had no
// measured step time at all. The window widened to 3 expected steps sees
// them; the fallback reads the slowest rank's last step.
TEST(PrometheusClientTest, AStepLongerThanTheWindowIsStillMeasured) {
  if (!OnPath("promtool")) GTEST_SKIP() << "no promtool binary (scripts/install-deps.sh)";
  const fs::path dir = fs::temp_directory_path() / ("pacer-long-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream test(dir / "queries_test.yaml");
  // Steps of 260, 260, 200, 200, 200 and 200 s (step 6 ends at 1320 s: the
  // last 120 s before 1300 s hold no step end).
  WriteStepSeries(test, {{"slow", SeriesOfSteps({260, 260, 200, 200, 200, 200}, 1300)}});
  const std::chrono::seconds fixed(120);
  // The fixed window's answer has no finite sample (`>= 0` drops NaN).
  WriteExpectation(test, "(" + MeasureJobQueries("research", "slow", fixed).step_seconds + ") >= 0",
                   1300, std::nullopt);
  // 600 s back from 1300 s: steps 4 and 5, 200 s each.
  WriteExpectation(
      test, MeasureJobQueries("research", "slow", MeasurementWindow(fixed, 200.0)).step_seconds,
      1300, 200);
  // Step 5, which ended at 1120 s.
  WriteExpectation(test, MeasureJobQueries("research", "slow", fixed).step_seconds_last_step, 1300,
                   200);
  test.close();
  ExpectPromtoolPasses(dir);
}

// A job that slowed down 10 times part way through (20 steps of 100 s, then
// steps of 1000 s), measured between two slow step ends with the window of
// its earlier pace (3 x 100 s): the window holds no step end, and the
// fallback must say 1000 s. The mean of the process's whole run, the
// earlier fallback, said 3000 s / 21 = 143 s, and it moved towards 1000 s
// only as slow steps outnumbered the fast ones: a job missing its deadline
// by far looked on time. A window sized from the measured 1000 s, not from
// the plan's 100 s, holds the fast steps too just after the first slow one
// (143 s at 3060 s), so the reconciler sizes it from the plan. A process
// whose first step has not ended (the gauge's 0) gives no step time.
TEST(PrometheusClientTest, AJobThatSlowedDownIsMeasuredByItsNewestStep) {
  if (!OnPath("promtool")) GTEST_SKIP() << "no promtool binary (scripts/install-deps.sh)";
  const fs::path dir = fs::temp_directory_path() / ("pacer-slowed-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::vector<double> steps(20, 100.0);
  steps.insert(steps.end(), 3, 1000.0);  // slow steps end at 3000, 4000 and 5000 s
  std::ofstream test(dir / "queries_test.yaml");
  WriteStepSeries(
      test, {{"slowed", SeriesOfSteps(steps, 3400)}, {"starting", SeriesOfSteps({5000}, 3400)}});
  const JobMeasurementQueries q =
      MeasureJobQueries("research", "slowed", MeasurementWindow(std::chrono::seconds(120), 100.0));
  WriteExpectation(test, "(" + q.step_seconds + ") >= 0", 3400, std::nullopt);
  WriteExpectation(test, q.step_seconds_last_step, 3400, 1000);
  // Just after the first slow step ended, the plan's window holds it alone.
  WriteExpectation(test, q.step_seconds, 3060, 1000);
  WriteExpectation(
      test,
      MeasureJobQueries("research", "slowed", MeasurementWindow(std::chrono::seconds(120), 1000.0))
          .step_seconds,
      3060, (20 * 100.0 + 1000) / 21);
  WriteExpectation(
      test,
      MeasureJobQueries("research", "starting", std::chrono::seconds(120)).step_seconds_last_step,
      3400, std::nullopt);
  test.close();
  ExpectPromtoolPasses(dir);
}

// One rank whose series give an infinite step time (a sum that grows while
// its count does not: a broken exporter, or a reset of one series and not
// the other; a gauge of +Inf) does not hide the others' pace: it used to
// win the max, and with no finite step time the job had none at all.
TEST(PrometheusClientTest, ARankWithAnInfiniteStepTimeDoesNotHideTheOthers) {
  if (!OnPath("promtool")) GTEST_SKIP() << "no promtool binary (scripts/install-deps.sh)";
  const fs::path dir = fs::temp_directory_path() / ("pacer-inf-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream test(dir / "queries_test.yaml");
  const std::string rank0 = R"(job="pacer-workers",trainjob="inf",namespace="research",rank="0")";
  const std::string rank1 = R"(job="pacer-workers",trainjob="inf",namespace="research",rank="1")";
  // Rank 0: two 10 s steps per 20 s scrape interval.
  test << "evaluation_interval: 20s\ntests:\n  - interval: 20s\n    input_series:\n"
       << "      - series: 'pacer_worker_step_duration_seconds_sum{" << rank0 << "}'\n"
       << "        values: '0+20x20'\n"
       << "      - series: 'pacer_worker_step_duration_seconds_count{" << rank0 << "}'\n"
       << "        values: '0+2x20'\n"
       << "      - series: 'pacer_worker_last_step_seconds{" << rank0 << "}'\n"
       << "        values: '10x20'\n"
       << "      - series: 'pacer_worker_step_duration_seconds_sum{" << rank1 << "}'\n"
       << "        values: '0+20x20'\n"
       << "      - series: 'pacer_worker_step_duration_seconds_count{" << rank1 << "}'\n"
       << "        values: '5x20'\n"
       << "      - series: 'pacer_worker_last_step_seconds{" << rank1 << "}'\n"
       << "        values: 'Inf Inf Inf Inf Inf Inf Inf Inf Inf Inf Inf Inf Inf Inf Inf Inf'\n"
       << "    promql_expr_test:\n";
  const JobMeasurementQueries q = MeasureJobQueries("research", "inf", std::chrono::seconds(120));
  WriteExpectation(test, q.step_seconds, 300, 10);
  WriteExpectation(test, q.step_seconds_last_step, 300, 10);
  test.close();
  ExpectPromtoolPasses(dir);
}

// MeasureJob asks for the last step only when the window's answer has
// no step time, and then reports it; a failure of that fifth query leaves a
// measurement without a step time (progress still counts), not an outage.
TEST(PrometheusClientTest, TheLastStepAnswersOnlyWhenTheWindowHasNoStep) {
  const JobMeasurementQueries q = MeasureJobQueries("research", "slow", std::chrono::seconds(120));
  std::map<std::string, double> answers = {{q.step_seconds, std::nan("")},
                                           {q.steps_completed, 5},
                                           {q.total_steps, 100},
                                           {q.ranks_reporting, 2},
                                           {q.step_seconds_last_step, 224}};
  std::vector<std::string> asked;
  std::optional<Status> last_step_error;
  const PromQuery query = [&](std::string_view promql) -> StatusOr<std::vector<PromSample>> {
    asked.emplace_back(promql);
    if (promql == q.step_seconds_last_step && last_step_error) return *last_step_error;
    return std::vector<PromSample>{PromSample{{}, answers.at(std::string(promql)), 0}};
  };
  StatusOr<JobMeasurement> slow = MeasureJobWith(q, query);
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  EXPECT_EQ(slow->step_seconds, 224);
  EXPECT_EQ(slow->steps_completed, 5);
  EXPECT_EQ(asked.size(), 5u);

  answers[q.step_seconds] = 3.5;  // a step in the window: its mean, no fifth query
  asked.clear();
  StatusOr<JobMeasurement> fast = MeasureJobWith(q, query);
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  EXPECT_EQ(fast->step_seconds, 3.5);
  EXPECT_EQ(asked.size(), 4u);

  answers[q.step_seconds] = std::nan("");
  last_step_error = UnavailableError("Prometheus timed out");
  StatusOr<JobMeasurement> unanswered = MeasureJobWith(q, query);
  ASSERT_TRUE(unanswered.ok()) << unanswered.status().ToString();
  EXPECT_FALSE(unanswered->step_seconds.has_value());
  EXPECT_EQ(unanswered->steps_completed, 5);
}

TEST(PrometheusClientTest, TheWindowHoldsThreeExpectedStepsUpToSixHours) {
  const std::chrono::seconds fixed(120);
  EXPECT_EQ(MeasurementWindow(fixed, std::nullopt), fixed);
  EXPECT_EQ(MeasurementWindow(fixed, 10.0), fixed);  // 30 s: the fixed window is longer
  EXPECT_EQ(MeasurementWindow(fixed, 200.0), std::chrono::seconds(600));
  EXPECT_EQ(MeasurementWindow(fixed, 40.5), std::chrono::seconds(122));  // 121.5, rounded up
  EXPECT_EQ(MeasurementWindow(fixed, 1e9), std::chrono::hours(6));
  EXPECT_EQ(MeasurementWindow(std::chrono::hours(8), 1e9), std::chrono::hours(8));
  for (double bad : {0.0, -5.0, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    EXPECT_EQ(MeasurementWindow(fixed, bad), fixed) << bad;
  }
}

// A real pacer-worker (a small CPU model that never finishes) scraped by a
// real Prometheus with the given scrape job body (honor_labels and the
// target's labels); both stopped when the test ends.
class ScrapedWorker {
 public:
  ScrapedWorker(const std::string& name, const std::vector<std::string>& worker_env,
                const std::string& scrape_options, const std::string& target_labels)
      : dir_(fs::temp_directory_path() / ("pacer-prom-" + name + "-" + std::to_string(getpid()))) {
    fs::create_directories(dir_);
    const int worker_port = FreePort();
    std::vector<std::string> env = {"PACER_BACKEND=cpu",
                                    "MASTER_ADDR=127.0.0.1",
                                    "MASTER_PORT=" + std::to_string(FreePort()),
                                    "PACER_METRICS_PORT=" + std::to_string(worker_port),
                                    "PACER_TOTAL_STEPS=100000",
                                    "PACER_MODEL_LAYERS=2",
                                    "PACER_MODEL_HIDDEN_SIZE=128",
                                    "PACER_MODEL_ATTENTION_HEADS=4",
                                    "PACER_SEQUENCE_LENGTH=64",
                                    "PACER_MODEL_VOCAB_SIZE=512"};
    env.insert(env.end(), worker_env.begin(), worker_env.end());
    worker_ = Spawn({PACER_WORKER_BINARY}, env, (dir_ / "worker.log").string());
    {
      std::ofstream config(dir_ / "prometheus.yml");
      config << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
             << "scrape_configs:\n  - job_name: pacer-workers\n"
             << scrape_options << "    static_configs: [{targets: ['127.0.0.1:" << worker_port
             << "'], labels: {" << target_labels << "}}]\n";
    }
    const int prometheus_port = FreePort();
    prometheus_ = Spawn(
        {"prometheus", "--config.file=" + (dir_ / "prometheus.yml").string(),
         "--storage.tsdb.path=" + (dir_ / "data").string(),
         "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port), "--log.level=warn"},
        {}, (dir_ / "prometheus.log").string());
    client_ = std::make_unique<PrometheusClient>(
        "http://127.0.0.1:" + std::to_string(prometheus_port), std::chrono::milliseconds(5000));
  }
  ~ScrapedWorker() {
    Stop(prometheus_);
    Stop(worker_);
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  ScrapedWorker(const ScrapedWorker&) = delete;
  ScrapedWorker& operator=(const ScrapedWorker&) = delete;

  PrometheusClient& client() { return *client_; }

  // Waiting on external servers: bounded polling of their answers, until the
  // job's measurement has a step time and at least 3 steps.
  StatusOr<JobMeasurement> WaitForSteps(const std::string& ns, const std::string& job) {
    StatusOr<JobMeasurement> m = UnavailableError("not asked yet");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      m = client_->MeasureJob(ns, job, std::chrono::seconds(10));
      if (m.ok() && m->step_seconds && m->steps_completed && *m->steps_completed >= 3) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return m;
  }

 private:
  fs::path dir_;
  pid_t worker_ = -1;
  pid_t prometheus_ = -1;
  std::unique_ptr<PrometheusClient> client_;
};

TEST(PrometheusClientTest, MeasuresARunningWorkerThroughARealPrometheus) {
  if (!OnPath("prometheus")) GTEST_SKIP() << "no prometheus binary (scripts/install-deps.sh)";
  ScrapedWorker scraped("measured", {"PACER_JOB_NAME=measured", "PACER_JOB_NAMESPACE=research"},
                        "    honor_labels: true\n", "");
  const StatusOr<JobMeasurement> m = scraped.WaitForSteps("research", "measured");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE(m->step_seconds.has_value());
  EXPECT_GT(*m->step_seconds, 0);
  EXPECT_LT(*m->step_seconds, 60);
  ASSERT_TRUE(m->steps_completed.has_value());
  EXPECT_GE(*m->steps_completed, 3);
  EXPECT_EQ(m->total_steps, 100000);
  EXPECT_EQ(m->ranks_reporting, 1);
  // The fallback for a window without a step reads the real worker's last
  // step under the same selectors.
  auto last_step = scraped.client().Query(
      MeasureJobQueries("research", "measured", std::chrono::seconds(10)).step_seconds_last_step);
  ASSERT_TRUE(last_step.ok()) << last_step.status().ToString();
  ASSERT_EQ(last_step->size(), 1u);
  EXPECT_GT(last_step->front().value, 0);
  EXPECT_LT(last_step->front().value, 60);

  // Another job's selector finds nothing: no measurement, not an error.
  auto other = scraped.client().MeasureJob("research", "someone-else", std::chrono::seconds(10));
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->step_seconds.has_value());
  EXPECT_EQ(other->ranks_reporting, 0);

  // A query Prometheus rejects is the caller's bug: InvalidArgument, not retried.
  auto bad = scraped.client().Query("rate(pacer_worker_step[");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("bad_data"), std::string::npos);
}

// A worker image is the user's, and so are the labels it exports. Scraped as
// the Helm chart's PodMonitor scrapes (honor_labels: false; namespace, pod,
// trainjob and attempt from the pod), a pod in one namespace that exports
// another namespace's TrainJob labels feeds only its own: the victim's
// measurement stays empty instead of taking the intruder's step time and
// progress.
TEST(PrometheusClientTest, AWorkerCannotSpeakForAnotherNamespacesJob) {
  if (!OnPath("prometheus")) GTEST_SKIP() << "no prometheus binary (scripts/install-deps.sh)";
  ScrapedWorker scraped("spoof",
                        {"PACER_JOB_NAME=victim", "PACER_JOB_NAMESPACE=finance", "PACER_ATTEMPT=1"},
                        "    honor_labels: false\n",
                        "namespace: intruders, pod: rogue-a1-n0, trainjob: rogue, attempt: '1'");
  // The intruder's pod is measured as what its pod says it is...
  const StatusOr<JobMeasurement> own = scraped.WaitForSteps("intruders", "rogue");
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  ASSERT_TRUE(own->step_seconds.has_value()) << "the pod's own job is measured";
  EXPECT_EQ(own->ranks_reporting, 1);
  // ...and the same scrapes give the job it named nothing.
  const StatusOr<JobMeasurement> victim =
      scraped.client().MeasureJob("finance", "victim", std::chrono::seconds(10));
  ASSERT_TRUE(victim.ok()) << victim.status().ToString();
  EXPECT_FALSE(victim->step_seconds.has_value());
  EXPECT_FALSE(victim->steps_completed.has_value());
  EXPECT_EQ(victim->ranks_reporting, 0);
}

}  // namespace
}  // namespace pacer::controller
