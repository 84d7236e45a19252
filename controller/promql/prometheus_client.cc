#include "promql/prometheus_client.h"

#include <cpprest/http_client.h>
#include <cpprest/uri_builder.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "http/bounded_body.h"
#include "pacer/planner/units.h"

namespace pacer::controller {
namespace {

using nlohmann::json;

StatusOr<double> SampleValue(const json& pair) {
  // Prometheus writes [<unix seconds>, "<value>"]; values may be "NaN", "+Inf".
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number() || !pair[1].is_string()) {
    return InternalError("Prometheus answered a sample that is not [time, \"value\"]");
  }
  const std::string text = pair[1].get<std::string>();
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str())
    return InternalError("Prometheus answered a non-number \"" + text + "\"");
  return v;
}

}  // namespace

StatusOr<std::vector<PromSample>> ParsePromAnswer(const std::string& body, int http_status,
                                                  std::string_view promql) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    if (http_status >= 500) {
      return UnavailableError("Prometheus answered HTTP " + std::to_string(http_status));
    }
    return InternalError("Prometheus answered HTTP " + std::to_string(http_status) +
                         " with a body that is not JSON");
  }
  // Every member is looked up with find(): a const operator[] on a missing
  // key is undefined behaviour in nlohmann/json (an assert compiled out),
  // not an exception the reconcile's guard could catch.
  const auto member = [](const json& object, const char* key) -> const json* {
    if (!object.is_object()) return nullptr;
    const auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
  };
  // Strings only: json::value() throws on a member of another type, which
  // the caller would report as Prometheus being unreachable.
  const auto text = [&member](const json& object, const char* key, const char* absent) {
    const json* m = member(object, key);
    return m != nullptr && m->is_string() ? m->get<std::string>() : std::string(absent);
  };
  const json* status = member(doc, "status");
  if (status == nullptr || !status->is_string()) {
    return InternalError("Prometheus answered without a status string");
  }
  if (status->get<std::string>() != "success") {
    const std::string message = text(doc, "errorType", "error") + ": " + text(doc, "error", "");
    if (http_status >= 500 || http_status == 0) {
      return UnavailableError("Prometheus failed the query " + std::string(promql) + ": " +
                              message);
    }
    return InvalidArgumentError("Prometheus rejected the query " + std::string(promql) + ": " +
                                message);
  }
  const json* data = member(doc, "data");
  const json* type_field = data != nullptr ? member(*data, "resultType") : nullptr;
  const json* result = data != nullptr ? member(*data, "result") : nullptr;
  if (type_field == nullptr || !type_field->is_string() || result == nullptr) {
    return InternalError("Prometheus answered success without data.resultType and data.result");
  }
  const std::string type = type_field->get<std::string>();
  std::vector<PromSample> samples;
  if (type == "scalar") {
    PromSample s;
    ASSIGN_OR_RETURN(s.value, SampleValue(*result));
    s.timestamp_unix_seconds = (*result)[0].get<double>();  // checked by SampleValue
    samples.push_back(std::move(s));
    return samples;
  }
  if (type != "vector") {
    return InternalError("Prometheus answered a " + type + ", expected an instant vector");
  }
  if (!result->is_array()) return InternalError("Prometheus answered a vector that is no array");
  for (const json& item : *result) {
    const json* metric = member(item, "metric");
    const json* value = member(item, "value");
    if (metric == nullptr || !metric->is_object() || value == nullptr) {
      return InternalError("Prometheus answered a vector element without metric and value");
    }
    PromSample s;
    for (const auto& [k, v] : metric->items()) {
      if (v.is_string()) s.labels[k] = v.get<std::string>();
    }
    ASSIGN_OR_RETURN(s.value, SampleValue(*value));
    s.timestamp_unix_seconds = (*value)[0].get<double>();  // checked by SampleValue
    samples.push_back(std::move(s));
  }
  return samples;
}

namespace {

std::optional<double> FirstFinite(const std::vector<PromSample>& samples) {
  if (samples.empty() || !std::isfinite(samples.front().value)) return std::nullopt;
  return samples.front().value;
}

// Counts (steps, ranks): a sample that is no count is none, not a cast.
std::optional<int64_t> FirstCount(const std::vector<PromSample>& samples) {
  if (samples.empty()) return std::nullopt;
  return planner::CountFromSample(samples.front().value);
}

}  // namespace

std::string PromQuote(std::string_view value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

PrometheusClient::PrometheusClient(const std::string& base_url, std::chrono::milliseconds timeout)
    : base_url_(base_url) {
  web::http::client::http_client_config config;
  config.set_timeout(timeout);
  // Not followed: cpprestsdk's redirected request drops the answer limit
  // (and a redirect to another address is a wrong --prometheus-url).
  config.set_max_redirects(0);
  client_ = std::make_unique<web::http::client::http_client>(base_url, config);
}

PrometheusClient::~PrometheusClient() = default;

StatusOr<std::vector<PromSample>> PrometheusClient::Query(std::string_view promql) const {
  web::uri_builder uri("/api/v1/query");
  uri.append_query("query", std::string(promql));
  try {
    pplx::cancellation_token_source cancel;
    web::http::http_request request(web::http::methods::GET);
    request.set_request_uri(uri.to_uri());
    const AnswerLimit limit(kMaxResponseBytes);
    limit.StopReadingPast(request);
    web::http::http_response response = client_->request(request, cancel.get_token()).get();
    if (const int code = response.status_code(); code >= 300 && code < 400) {
      cancel.cancel();
      return RedirectNotFollowed(response, "Prometheus at " + base_url_,
                                 ": set --prometheus-url to the address it names");
    }
    ASSIGN_OR_RETURN(
        const std::string body,
        ReadBoundedBody(response, limit,
                        "Prometheus at " + base_url_ + ", query " + std::string(promql), ""));
    return ParsePromAnswer(body, response.status_code(), promql);
  } catch (const std::exception& e) {
    // Connection refused, DNS, timeouts: cpprestsdk throws http_exception.
    return UnavailableError("Prometheus at " + base_url_ + " is unreachable: " + e.what());
  }
}

JobMeasurementQueries MeasureJobQueries(const std::string& namespace_name,
                                        const std::string& job_name, std::chrono::seconds window,
                                        std::optional<int64_t> attempt) {
  // "" matches series without the label (Prometheus' absent = empty).
  const std::string this_attempt =
      attempt ? ",attempt=~" + PromQuote(std::to_string(*attempt) + "|") : std::string();
  const std::string ns = ",namespace=" + PromQuote(namespace_name) + this_attempt + "}";
  const std::string current = "{trainjob=" + PromQuote(job_name) + ns;
  const std::string legacy = "{job=" + PromQuote(job_name) + ",trainjob=\"\"" + ns;
  const std::string range = "[" + std::to_string(window.count()) + "s]";
  // `metric` under either selector; `or` keeps both kinds of series.
  auto either = [&](const std::string& metric) {
    return metric + current + " or " + metric + legacy;
  };
  auto mean_step = [&](const std::string& selector) {
    return "rate(pacer_worker_step_duration_seconds_sum" + selector + range +
           ") / rate(pacer_worker_step_duration_seconds_count" + selector + range + ")";
  };
  JobMeasurementQueries q;
  // The slowest rank sets the pace of a synchronous job. `< +Inf` drops a
  // broken rank's infinite time (a sum that grows while its count does not)
  // before the max, where it hid every other rank's; NaN never wins a max.
  q.step_seconds = "max((" + mean_step(current) + " or " + mean_step(legacy) + ") < +Inf)";
  // `> 0` drops the gauge's 0 of a process without a measured step yet.
  q.step_seconds_last_step = "max((" + either("pacer_worker_last_step_seconds") + ") > 0 < +Inf)";
  // Counts outside [0, kMaxSampleCount] (a broken rank's 1e30, -5, NaN) are dropped
  // before the max, so that one such rank does not hide the others'
  // progress (CountFromSample then refuses only what is left).
  auto counts = [&](const std::string& metric) {
    return "max((" + either(metric) + ") >= 0 <= " + std::to_string(planner::kMaxSampleCount) + ")";
  };
  q.steps_completed = counts("pacer_worker_step");
  q.total_steps = counts("pacer_worker_total_steps");
  q.ranks_reporting = "count(" + either("pacer_worker_step") + ")";
  return q;
}

JobMeasurement JobMeasurementFromAnswers(const std::vector<PromSample>& step_seconds,
                                         const std::vector<PromSample>& steps_completed,
                                         const std::vector<PromSample>& total_steps,
                                         const std::vector<PromSample>& ranks_reporting) {
  JobMeasurement m;
  m.step_seconds = FirstFinite(step_seconds);
  m.steps_completed = FirstCount(steps_completed);
  m.total_steps = FirstCount(total_steps);
  m.ranks_reporting = static_cast<int>(
      std::min<int64_t>(FirstCount(ranks_reporting).value_or(0), std::numeric_limits<int>::max()));
  return m;
}

StatusOr<JobMeasurement> MeasureJobWith(const JobMeasurementQueries& q, const PromQuery& query) {
  ASSIGN_OR_RETURN(auto step, query(q.step_seconds));
  ASSIGN_OR_RETURN(auto steps, query(q.steps_completed));
  ASSIGN_OR_RETURN(auto total, query(q.total_steps));
  ASSIGN_OR_RETURN(auto ranks, query(q.ranks_reporting));
  JobMeasurement m = JobMeasurementFromAnswers(step, steps, total, ranks);
  if (!m.step_seconds) {
    // Steps longer than the window, or a window without two scrapes yet. A
    // failure here leaves the other answers a measurement without a step
    // time, as before this query was asked.
    StatusOr<std::vector<PromSample>> last_step = query(q.step_seconds_last_step);
    if (last_step.ok()) m.step_seconds = FirstFinite(*last_step);
  }
  return m;
}

StatusOr<JobMeasurement> PrometheusClient::MeasureJob(const std::string& namespace_name,
                                                      const std::string& job_name,
                                                      std::chrono::seconds window,
                                                      std::optional<int64_t> attempt) const {
  return MeasureJobWith(MeasureJobQueries(namespace_name, job_name, window, attempt),
                        [this](std::string_view promql) { return Query(promql); });
}

std::chrono::seconds MeasurementWindow(std::chrono::seconds configured,
                                       std::optional<double> expected_step_seconds) {
  if (!expected_step_seconds || !std::isfinite(*expected_step_seconds) ||
      *expected_step_seconds <= 0) {
    return configured;
  }
  const double wanted = std::ceil(kStepsPerMeasurementWindow * *expected_step_seconds);
  if (wanted >= static_cast<double>(kMaxMeasurementWindow.count())) {
    return std::max(configured, kMaxMeasurementWindow);
  }
  return std::max(configured, std::chrono::seconds(static_cast<int64_t>(wanted)));
}

}  // namespace pacer::controller
