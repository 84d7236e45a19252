#include "pacer/sched/trace_csv.h"

#include <charconv>
#include <cmath>
#include <deque>
#include <set>

#include "pacer/strings.h"

namespace pacer::sched {
namespace {

// A CSV file as a header and rows, with the line number of each row.
struct Csv {
  std::vector<std::string_view> header;
  std::vector<std::pair<int, std::vector<std::string_view>>> rows;
  // Quoted fields with a doubled quote, unescaped; a deque, so the views
  // into it stay valid as it grows.
  std::deque<std::string> unescaped;
};

// The fields of one line, blanks around each trimmed. A field in double
// quotes (RFC 4180, as spreadsheets write a name with a comma) may hold
// commas, and "" stands for one quote; the quotes are not part of the
// value. A quoted field may not span lines.
StatusOr<std::vector<std::string_view>> SplitFields(std::string_view line, Csv* csv,
                                                    std::string_view where) {
  std::vector<std::string_view> fields;
  size_t pos = 0;
  while (true) {
    while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
    if (pos < line.size() && line[pos] == '"') {
      const size_t open = pos;
      size_t close = open;
      std::string value;
      bool doubled = false;
      ++pos;
      while (true) {
        const size_t quote = line.find('"', pos);
        if (quote == std::string_view::npos) {
          return InvalidArgumentError(std::string(where) + ": column " + std::to_string(open + 1) +
                                      ": a quoted field is not closed on its line (close it "
                                      "with \"; a quote inside is written \"\")");
        }
        value.append(line.substr(pos, quote - pos));
        pos = quote + 1;
        if (pos < line.size() && line[pos] == '"') {
          value.push_back('"');
          doubled = true;
          ++pos;
          continue;
        }
        close = quote;
        break;
      }
      while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
      if (pos < line.size() && line[pos] != ',') {
        return InvalidArgumentError(std::string(where) + ": column " + std::to_string(pos + 1) +
                                    ": text after a quoted field's closing quote (a quote "
                                    "inside a field is written \"\")");
      }
      if (doubled) {
        csv->unescaped.push_back(std::move(value));
        fields.push_back(csv->unescaped.back());
      } else {
        fields.push_back(line.substr(open + 1, close - open - 1));
      }
    } else {
      size_t comma = line.find(',', pos);
      if (comma == std::string_view::npos) comma = line.size();
      fields.push_back(TrimBlanks(line.substr(pos, comma - pos)));
      pos = comma;
    }
    if (pos >= line.size()) break;
    ++pos;  // the comma
    if (pos == line.size()) {
      fields.emplace_back();  // a trailing comma: one more, empty field
      break;
    }
  }
  return fields;
}

StatusOr<Csv> SplitCsv(std::string_view text, std::string_view source) {
  Csv csv;
  // A UTF-8 byte order mark (spreadsheets write one) is not part of the
  // first column's name.
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (text.substr(0, kBom.size()) == kBom) text.remove_prefix(kBom.size());
  int line_number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = TrimBlanks(text.substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.empty()) continue;
    ASSIGN_OR_RETURN(
        std::vector<std::string_view> fields,
        SplitFields(line, &csv, std::string(source) + ":" + std::to_string(line_number)));
    if (csv.header.empty()) {
      csv.header = std::move(fields);
      continue;
    }
    if (fields.size() != csv.header.size()) {
      return InvalidArgumentError(std::string(source) + ":" + std::to_string(line_number) + ": " +
                                  std::to_string(fields.size()) + " fields, the header has " +
                                  std::to_string(csv.header.size()));
    }
    csv.rows.emplace_back(line_number, std::move(fields));
  }
  if (csv.header.empty()) return InvalidArgumentError(std::string(source) + ": empty file");
  return csv;
}

// Index of the first of `names` in the header.
StatusOr<size_t> Column(const Csv& csv, std::string_view source,
                        std::initializer_list<std::string_view> names) {
  for (std::string_view name : names) {
    for (size_t i = 0; i < csv.header.size(); ++i) {
      if (csv.header[i] == name) return i;
    }
  }
  std::string wanted;
  for (std::string_view name : names)
    wanted += (wanted.empty() ? "'" : " or '") + std::string(name) + "'";
  return InvalidArgumentError(std::string(source) + ":1: missing column " + wanted);
}

std::optional<size_t> OptionalColumn(const Csv& csv, std::string_view name) {
  for (size_t i = 0; i < csv.header.size(); ++i) {
    if (csv.header[i] == name) return i;
  }
  return std::nullopt;
}

Status FieldError(std::string_view source, int line, std::string_view column,
                  std::string_view value, std::string_view want) {
  return InvalidArgumentError(std::string(source) + ":" + std::to_string(line) + ": column '" +
                              std::string(column) + "': '" + std::string(value) + "' is not " +
                              std::string(want));
}

// Past any trace's times (31,700 years), counts and rates: the scheduler
// divides iterations by rates and quotes whole seconds, and 1e300 (or a rate
// of 1e-300) made those an undefined conversion to an integer.
constexpr double kMaxTraceNumber = 1e12;
constexpr double kMinRate = 1e-6;  // iterations per second

StatusOr<double> ParseNumber(std::string_view value, std::string_view source, int line,
                             std::string_view column, bool positive) {
  double x = 0;
  auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), x);
  if (error != std::errc() || end != value.data() + value.size() || !std::isfinite(x) || x < 0 ||
      (positive && x == 0)) {
    return FieldError(source, line, column, value,
                      positive ? "a positive number" : "a non-negative number");
  }
  if (x > kMaxTraceNumber) return FieldError(source, line, column, value, "at most 1e12");
  return x;
}

StatusOr<int> ParseCount(std::string_view value, std::string_view source, int line,
                         std::string_view column) {
  int x = 0;
  auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), x);
  if (error != std::errc() || end != value.data() + value.size() || x < 1) {
    return FieldError(source, line, column, value, "a positive integer");
  }
  return x;
}

std::string KeyText(const CurveKey& key) {
  return std::get<1>(key) + " (batch " + std::to_string(std::get<2>(key)) + ") on " +
         std::get<0>(key);
}

}  // namespace

StatusOr<std::vector<TraceJob>> ParseTraceCsv(std::string_view text, std::string_view source) {
  ASSIGN_OR_RETURN(Csv csv, SplitCsv(text, source));
  ASSIGN_OR_RETURN(size_t id, Column(csv, source, {"job_id"}));
  ASSIGN_OR_RETURN(size_t arrival, Column(csv, source, {"submission_time", "submit_time"}));
  ASSIGN_OR_RETURN(size_t iterations, Column(csv, source, {"num_iteration", "iteration"}));
  ASSIGN_OR_RETURN(size_t model, Column(csv, source, {"model_name"}));
  ASSIGN_OR_RETURN(size_t deadline, Column(csv, source, {"deadline", "ddl"}));
  ASSIGN_OR_RETURN(size_t batch, Column(csv, source, {"batch_size"}));
  const std::optional<size_t> gpus = OptionalColumn(csv, "num_gpu");
  std::vector<TraceJob> jobs;
  std::set<std::string_view> ids;
  for (const auto& [line, fields] : csv.rows) {
    TraceJob job;
    job.line = line;
    job.id = std::string(fields[id]);
    if (job.id.empty()) return FieldError(source, line, csv.header[id], "", "a job id");
    if (!ids.insert(fields[id]).second) {
      return InvalidArgumentError(std::string(source) + ":" + std::to_string(line) + ": job_id '" +
                                  job.id + "' appears twice; ids must be unique");
    }
    ASSIGN_OR_RETURN(job.arrival_seconds,
                     ParseNumber(fields[arrival], source, line, csv.header[arrival], false));
    ASSIGN_OR_RETURN(job.iterations,
                     ParseNumber(fields[iterations], source, line, csv.header[iterations], true));
    job.model = std::string(fields[model]);
    if (job.model.empty()) return FieldError(source, line, csv.header[model], "", "a model name");
    if (!fields[deadline].empty()) {
      ASSIGN_OR_RETURN(double d,
                       ParseNumber(fields[deadline], source, line, csv.header[deadline], false));
      // A deadline is absolute, like the submission time: one at or before
      // it (a trace of relative deadlines) made every job a miss for every
      // policy, and the trace scored 0 without a word.
      if (d <= job.arrival_seconds) {
        return InvalidArgumentError(
            std::string(source) + ":" + std::to_string(line) + ": " +
            std::string(csv.header[deadline]) + " " + std::string(fields[deadline]) +
            " is not after " + std::string(csv.header[arrival]) + " " +
            std::string(fields[arrival]) +
            "; deadlines are absolute times on the submission clock, not durations (add the "
            "submission time to a relative deadline)");
      }
      job.deadline_seconds = d;
    }
    ASSIGN_OR_RETURN(job.batch_size, ParseCount(fields[batch], source, line, csv.header[batch]));
    if (gpus && !fields[*gpus].empty()) {
      ASSIGN_OR_RETURN(job.requested_gpus, ParseCount(fields[*gpus], source, line, "num_gpu"));
    }
    jobs.push_back(std::move(job));
  }
  if (jobs.empty()) return InvalidArgumentError(std::string(source) + ": no jobs after the header");
  return jobs;
}

StatusOr<ThroughputTable> ParseThroughputCsv(std::string_view text, std::string_view source) {
  ASSIGN_OR_RETURN(Csv csv, SplitCsv(text, source));
  ASSIGN_OR_RETURN(size_t type, Column(csv, source, {"gpu_type"}));
  ASSIGN_OR_RETURN(size_t model, Column(csv, source, {"model"}));
  ASSIGN_OR_RETURN(size_t batch, Column(csv, source, {"global_batch_size"}));
  ASSIGN_OR_RETURN(size_t gpus, Column(csv, source, {"num_gpus"}));
  ASSIGN_OR_RETURN(size_t rate, Column(csv, source, {"iters_per_sec"}));
  ThroughputTable table;
  for (const auto& [line, fields] : csv.rows) {
    ASSIGN_OR_RETURN(int b, ParseCount(fields[batch], source, line, csv.header[batch]));
    ASSIGN_OR_RETURN(int g, ParseCount(fields[gpus], source, line, csv.header[gpus]));
    CurveKey key{std::string(fields[type]), std::string(fields[model]), b};
    std::vector<ThroughputPoint>& points = table.points[key];
    if (fields[rate].empty()) continue;  // not profiled
    ASSIGN_OR_RETURN(double r, ParseNumber(fields[rate], source, line, csv.header[rate], false));
    if (r > 0 && r < kMinRate) {
      return FieldError(source, line, csv.header[rate], fields[rate], "0 or at least 1e-6");
    }
    for (const ThroughputPoint& p : points) {
      if (p.gpus == g) {
        return InvalidArgumentError(std::string(source) + ":" + std::to_string(line) + ": " +
                                    KeyText(key) + " at " + std::to_string(g) +
                                    " GPUs appears twice");
      }
    }
    points.push_back({g, r});
  }
  return table;
}

Status ParseMaxGpusCsv(std::string_view text, std::string_view source, ThroughputTable& table) {
  ASSIGN_OR_RETURN(Csv csv, SplitCsv(text, source));
  ASSIGN_OR_RETURN(size_t type, Column(csv, source, {"gpu_type"}));
  ASSIGN_OR_RETURN(size_t model, Column(csv, source, {"model"}));
  ASSIGN_OR_RETURN(size_t batch, Column(csv, source, {"global_batch_size"}));
  ASSIGN_OR_RETURN(size_t pacer_cap, Column(csv, source, {"ef_max_gpus"}));
  ASSIGN_OR_RETURN(size_t baseline_cap, Column(csv, source, {"baseline_max_gpus"}));
  std::set<CurveKey> seen;
  for (const auto& [line, fields] : csv.rows) {
    ASSIGN_OR_RETURN(int b, ParseCount(fields[batch], source, line, csv.header[batch]));
    CurveKey key{std::string(fields[type]), std::string(fields[model]), b};
    // A second row silently replaced the first (one capping bert/128 at 2
    // took cluster10 at 256 GPUs from 254 to 249 met).
    if (!seen.insert(key).second) {
      return InvalidArgumentError(std::string(source) + ":" + std::to_string(line) + ": " +
                                  KeyText(key) + " appears twice; keep one row per key");
    }
    ASSIGN_OR_RETURN(table.pacer_max_gpus[key],
                     ParseCount(fields[pacer_cap], source, line, csv.header[pacer_cap]));
    ASSIGN_OR_RETURN(table.baseline_max_gpus[key],
                     ParseCount(fields[baseline_cap], source, line, csv.header[baseline_cap]));
  }
  return Status::Ok();
}

StatusOr<std::string> ChooseGpuType(const std::vector<TraceJob>& trace,
                                    const ThroughputTable& table) {
  std::set<std::string> types;
  for (const auto& [key, points] : table.points) types.insert(std::get<0>(key));
  for (const std::string& type : types) {
    bool covers = true;
    for (const TraceJob& job : trace) {
      auto it = table.points.find({type, job.model, job.batch_size});
      if (it == table.points.end() || it->second.empty()) {
        covers = false;
        break;
      }
    }
    if (covers) return type;
  }
  return NotFoundError(
      "no GPU type in the throughput table has a curve for every model and "
      "batch size of the trace; pass --gpu-type to see which is missing");
}

StatusOr<std::vector<SimJob>> BuildSimJobs(const std::vector<TraceJob>& trace,
                                           const ThroughputTable& table,
                                           const std::string& gpu_type, int cluster_gpus,
                                           Policy policy, std::string_view trace_source) {
  const std::map<CurveKey, int>& caps =
      policy == Policy::kPacer ? table.pacer_max_gpus : table.baseline_max_gpus;
  std::vector<SimJob> jobs;
  jobs.reserve(trace.size());
  for (const TraceJob& in : trace) {
    const CurveKey key{gpu_type, in.model, in.batch_size};
    auto it = table.points.find(key);
    if (it == table.points.end() || it->second.empty()) {
      return NotFoundError(std::string(trace_source) + ":" + std::to_string(in.line) + ": job " +
                           in.id + ": the throughput table has no curve for " + KeyText(key) +
                           "; add its rows (gpu_type,model,global_batch_size,num_gpus,"
                           "iters_per_sec) or pick another --gpu-type");
    }
    auto cap = caps.find(key);
    const int max_gpus = std::min(cluster_gpus, cap == caps.end() ? cluster_gpus : cap->second);
    StatusOr<ThroughputCurve> curve =
        ThroughputCurve::Create(it->second, max_gpus, /*drop_past_peak=*/policy == Policy::kPacer);
    if (!curve.ok()) {
      return InvalidArgumentError(std::string(trace_source) + ":" + std::to_string(in.line) +
                                  ": job " + in.id + ": " + KeyText(key) + ": " +
                                  curve.status().message());
    }
    SimJob job;
    job.id = in.id;
    job.arrival_seconds = in.arrival_seconds;
    job.iterations = in.iterations;
    job.deadline_seconds = in.deadline_seconds;
    job.curve = *std::move(curve);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

}  // namespace pacer::sched
