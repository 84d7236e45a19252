#include "local/scraped_metrics.h"

#include <cpprest/http_client.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <thread>

#include "http/bounded_body.h"
#include "pacer/planner/units.h"
#include "pacer/strings.h"

namespace pacer::controller {
namespace {

// Parses `{a="x",b="y"}` starting at text[0] == '{'; returns the position
// after '}' or npos when malformed.
size_t ParseLabels(std::string_view text, std::map<std::string, std::string>* labels) {
  size_t i = 1;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i;
    if (i < text.size() && text[i] == '}') return i + 1;
    const size_t eq = text.find('=', i);
    if (eq == std::string_view::npos || eq + 1 >= text.size() || text[eq + 1] != '"') {
      return std::string_view::npos;
    }
    std::string name(TrimBlanks(text.substr(i, eq - i)));
    std::string value;
    size_t j = eq + 2;
    for (; j < text.size() && text[j] != '"'; ++j) {
      if (text[j] == '\\' && j + 1 < text.size()) {
        ++j;
        value += text[j] == 'n' ? '\n' : text[j];
      } else {
        value += text[j];
      }
    }
    if (j >= text.size()) return std::string_view::npos;
    (*labels)[name] = value;
    i = j + 1;
  }
  return std::string_view::npos;
}

}  // namespace

std::vector<MetricSample> ParseMetricsText(std::string_view text) {
  std::vector<MetricSample> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = TrimBlanks(text.substr(start, end - start));
    start = end + 1;
    if (line.empty() || line.front() == '#') continue;
    MetricSample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = std::string(line.substr(0, i));
    std::string_view rest = line.substr(i);
    if (!rest.empty() && rest.front() == '{') {
      const size_t after = ParseLabels(rest, &s.labels);
      if (after == std::string_view::npos) continue;
      rest = rest.substr(after);
    }
    rest = TrimBlanks(rest);
    const size_t space = rest.find(' ');  // an optional timestamp follows
    const std::string number(rest.substr(0, space));
    if (number.empty() || s.name.empty()) continue;
    char* parsed_end = nullptr;
    s.value = std::strtod(number.c_str(), &parsed_end);
    if (parsed_end == number.c_str()) continue;
    out.push_back(std::move(s));
  }
  return out;
}

ScrapeFn HttpScraper(std::chrono::milliseconds timeout) {
  return [timeout](int port) -> StatusOr<std::string> {
    const std::string url = "http://127.0.0.1:" + std::to_string(port);
    try {
      web::http::client::http_client_config config;
      config.set_timeout(timeout);
      config.set_max_redirects(0);  // a redirected request drops the answer limit
      web::http::client::http_client client(url, config);
      pplx::cancellation_token_source cancel;
      web::http::http_request request(web::http::methods::GET);
      request.set_request_uri(web::uri("/metrics"));
      const AnswerLimit limit(kMaxScrapeBytes);
      limit.StopReadingPast(request);
      web::http::http_response response = client.request(request, cancel.get_token()).get();
      if (response.status_code() != 200) {
        return UnavailableError("GET " + url + "/metrics: HTTP " +
                                std::to_string(response.status_code()));
      }
      return ReadBoundedBody(response, limit, "GET " + url + "/metrics", "");
    } catch (const std::exception& e) {
      return UnavailableError("GET " + url + "/metrics: " + e.what());
    }
  };
}

ScrapedMetricsSource::ScrapedMetricsSource(std::function<std::vector<int>(const JobRef&)> ports,
                                           ScrapeFn scrape, std::chrono::milliseconds exit_grace)
    : ports_(std::move(ports)), scrape_(std::move(scrape)), exit_grace_(exit_grace) {}

StatusOr<Measurement> ScrapedMetricsSource::Measure(const JobRef& job) {
  const std::vector<int> ports = ports_(job);
  Measurement m;
  if (ports.empty()) return m;
  // A relaunch may put the next attempt's worker on a port the last one
  // used: its counters start again and are no continuation, so each
  // attempt has its own history (and older attempts' is dropped).
  const int64_t attempt = job.attempt.value_or(0);
  {
    std::lock_guard<std::mutex> lock(mu_);
    history_.erase(history_.begin(),
                   history_.lower_bound({attempt, std::numeric_limits<int>::min()}));
  }
  int reached = 0;
  Status last_error = Status::Ok();
  double slowest_steps = 0, slowest_seconds = 0;
  for (int port : ports) {
    StatusOr<std::string> text = scrape_(port);
    if (!text.ok()) {
      // A worker still starting has not opened its endpoint yet: only one
      // that answered before and stopped answering is an outage.
      std::lock_guard<std::mutex> lock(mu_);
      if (history_.count({attempt, port}) > 0) last_error = text.status();
      continue;
    }
    ++reached;
    {
      std::lock_guard<std::mutex> lock(mu_);
      history_.try_emplace({attempt, port});  // answered once
    }
    double sum = 0, count = 0;
    bool has_histogram = false;
    for (const MetricSample& s : ParseMetricsText(*text)) {
      if (s.name == "pacer_worker_step") {
        if (std::optional<int64_t> step = planner::CountFromSample(s.value)) {
          m.steps_completed = std::max<int64_t>(m.steps_completed.value_or(0), *step);
        }
      } else if (s.name == "pacer_worker_step_duration_seconds_sum") {
        sum = s.value;
        has_histogram = true;
      } else if (s.name == "pacer_worker_step_duration_seconds_count") {
        count = s.value;
      } else if (s.name == "pacer_worker_model_scale" && std::isfinite(s.value)) {
        m.model_scale = s.value;
      }
    }
    // A sum or count that is no number (NaN, +Inf from a broken exporter)
    // is no measurement: kept in the history, a NaN made every later mean
    // of the rank NaN, and +Inf printed an ETA of year 9999.
    if (!has_histogram || !(count > 0) || !std::isfinite(count) || !std::isfinite(sum) || sum < 0) {
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    RankHistory& h = history_[{attempt, port}];
    double mean = sum / count;
    if (count > h.count && h.count > 0) {
      mean = (sum - h.sum_seconds) / (count - h.count);
    } else if (count == h.count && h.last_mean_seconds > 0) {
      mean = h.last_mean_seconds;  // no step since the last scrape
    }
    // Steps and seconds since the previous scrape (all of them on the first
    // scrape of a rank, or after it restarted and its counters did).
    const bool continues = count >= h.count && h.count > 0;
    const double window_steps = continues ? count - h.count : count;
    const double window_seconds = continues ? sum - h.sum_seconds : sum;
    h = RankHistory{sum, count, mean};
    // Ranks step in lock-step: the slowest one is the job's step time.
    if (mean > m.step_seconds.value_or(0.0)) {
      m.step_seconds = mean;
      slowest_steps = window_steps;
      slowest_seconds = window_seconds;
    }
  }
  if (slowest_steps > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    run_steps_ += slowest_steps;
    run_seconds_ += slowest_seconds;
  }
  // A rank still starting has no endpoint yet; only none at all is an error.
  if (reached == 0 && !last_error.ok()) {
    // A worker that finished closes its endpoint a moment before it exits:
    // when every one of them exits within the grace, that was the end of the
    // run, not a metrics outage.
    const auto until = std::chrono::steady_clock::now() + exit_grace_;
    while (true) {
      if (ports_(job).empty()) return m;
      if (std::chrono::steady_clock::now() >= until) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return last_error;
  }
  return m;
}

std::optional<double> ScrapedMetricsSource::RunMeanStepSeconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (run_steps_ <= 0) return std::nullopt;
  return run_seconds_ / run_steps_;
}

}  // namespace pacer::controller
