#include "table_output.h"

#include <cstdio>
#include <ctime>
#include <optional>

#include "selectors.h"

namespace pacer::testing {
namespace {

using nlohmann::json;

std::optional<int64_t> ParseRfc3339(const std::string& text) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  int64_t seconds = static_cast<int64_t>(timegm(&tm));
  // Skip fractional seconds, then apply an offset ("+02:00") if present.
  size_t i = static_cast<size_t>(consumed);
  if (i < text.size() && text[i] == '.') {
    while (i < text.size() && text[i] != 'Z' && text[i] != '+' && text[i] != '-') ++i;
  }
  int oh = 0;
  int om = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-') &&
      std::sscanf(text.c_str() + i + 1, "%2d:%2d", &oh, &om) == 2) {
    const int64_t offset = oh * 3600 + om * 60;
    seconds += text[i] == '+' ? -offset : offset;
  }
  return seconds;
}

std::string Format(const char* fmt, int64_t a, int64_t b = 0) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, static_cast<long long>(a), static_cast<long long>(b));
  return buf;
}

json AgeCell(const json& object, const std::string& path) {
  const std::string text = FieldAsString(object, path);
  std::optional<int64_t> at = ParseRfc3339(text);
  if (!at) return text.empty() ? json() : json(text);
  const int64_t since = static_cast<int64_t>(std::time(nullptr)) - *at;
  return since >= 0 ? HumanDuration(since) : "in " + HumanDuration(-since);
}

json Cell(const json& object, const PrinterColumn& column) {
  if (column.type == "date") return AgeCell(object, column.json_path);
  const json* value = FieldAt(object, column.json_path);
  if (value == nullptr || value->is_null()) return json();
  if (column.type == "integer" && value->is_number_float()) {
    return static_cast<int64_t>(value->get<double>());
  }
  if (column.type == "string" && !value->is_string()) return value->dump();
  if (value->is_object() || value->is_array()) return value->dump();
  return *value;
}

json ColumnDefinition(const std::string& name, const std::string& type, const std::string& format,
                      const std::string& description, int priority) {
  return {{"name", name},
          {"type", type},
          {"format", format},
          {"description", description},
          {"priority", priority}};
}

std::string PodReady(const json& pod) {
  const json* containers = FieldAt(pod, "spec.containers");
  const json* statuses = FieldAt(pod, "status.containerStatuses");
  int64_t total = containers != nullptr && containers->is_array()
                      ? static_cast<int64_t>(containers->size())
                      : 0;
  int64_t ready = 0;
  if (statuses != nullptr && statuses->is_array()) {
    for (const auto& s : *statuses) {
      if (s.is_object() && s.value("ready", false)) ++ready;
    }
  }
  return Format("%lld/%lld", ready, total);
}

int64_t PodRestarts(const json& pod) {
  const json* statuses = FieldAt(pod, "status.containerStatuses");
  int64_t restarts = 0;
  if (statuses != nullptr && statuses->is_array()) {
    for (const auto& s : *statuses) {
      if (s.is_object()) restarts += s.value("restartCount", int64_t{0});
    }
  }
  return restarts;
}

std::string PodStatus(const json& pod) {
  if (FieldAt(pod, "metadata.deletionTimestamp") != nullptr) return "Terminating";
  std::string reason = FieldAsString(pod, "status.reason");
  return reason.empty() ? FieldAsString(pod, "status.phase") : reason;
}

std::string NodeStatus(const json& node) {
  const json* conditions = FieldAt(node, "status.conditions");
  if (conditions != nullptr && conditions->is_array()) {
    for (const auto& c : *conditions) {
      if (c.is_object() && c.value("type", "") == "Ready") {
        return c.value("status", "") == "True" ? "Ready" : "NotReady";
      }
    }
  }
  return "Unknown";
}

}  // namespace

std::string HumanDuration(int64_t seconds) {
  if (seconds < 0) return "0s";
  if (seconds < 120) return Format("%llds", seconds);
  const int64_t minutes = seconds / 60;
  if (minutes < 10) {
    return seconds % 60 == 0 ? Format("%lldm", minutes)
                             : Format("%lldm%llds", minutes, seconds % 60);
  }
  if (minutes < 180) return Format("%lldm", minutes);
  const int64_t hours = minutes / 60;
  if (hours < 8) {
    return minutes % 60 == 0 ? Format("%lldh", hours) : Format("%lldh%lldm", hours, minutes % 60);
  }
  if (hours < 48) return Format("%lldh", hours);
  if (hours < 24 * 8) {
    return hours % 24 == 0 ? Format("%lldd", hours / 24)
                           : Format("%lldd%lldh", hours / 24, hours % 24);
  }
  if (hours < 24 * 365 * 2) return Format("%lldd", hours / 24);
  if (hours < 24 * 365 * 8) return Format("%lldy%lldd", hours / 24 / 365, (hours / 24) % 365);
  return Format("%lldy", hours / 24 / 365);
}

json ToTable(const ResourceInfo& resource, const std::vector<json>& objects,
             const json& list_metadata, const std::string& include_object) {
  json columns = json::array();
  columns.push_back(
      ColumnDefinition("Name", "string", "name", "Name must be unique within a namespace.", 0));
  const bool core = resource.group.empty();
  const bool pods = core && resource.plural == "pods";
  const bool with_status = core && (resource.plural == "namespaces" || resource.plural == "nodes");
  std::vector<PrinterColumn> printer = resource.printer_columns;
  if (pods) {
    columns.push_back(ColumnDefinition("Ready", "string", "", "Ready containers / containers", 0));
    columns.push_back(ColumnDefinition("Status", "string", "", "The pod's phase or reason", 0));
    columns.push_back(ColumnDefinition("Restarts", "integer", "", "Container restarts", 0));
  } else if (with_status) {
    columns.push_back(ColumnDefinition("Status", "string", "", "Phase or readiness", 0));
  }
  if (printer.empty()) printer.push_back({"Age", "date", ".metadata.creationTimestamp", "", 0});
  for (const PrinterColumn& c : printer) {
    columns.push_back(ColumnDefinition(c.name, c.type == "date" ? "string" : c.type, "",
                                       c.description, c.priority));
  }
  json rows = json::array();
  for (const json& object : objects) {
    json cells = json::array();
    cells.push_back(FieldAsString(object, "metadata.name"));
    if (pods) {
      cells.push_back(PodReady(object));
      cells.push_back(PodStatus(object));
      cells.push_back(PodRestarts(object));
    } else if (with_status) {
      cells.push_back(resource.plural == "nodes" ? NodeStatus(object)
                                                 : FieldAsString(object, "status.phase"));
    }
    for (const PrinterColumn& c : printer) cells.push_back(Cell(object, c));
    json row = {{"cells", std::move(cells)}};
    if (include_object == "Object") {
      row["object"] = object;
    } else if (include_object != "None") {
      row["object"] = {{"kind", "PartialObjectMetadata"},
                       {"apiVersion", "meta.k8s.io/v1"},
                       {"metadata", object.value("metadata", json::object())}};
    }
    rows.push_back(std::move(row));
  }
  return {{"kind", "Table"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", list_metadata},
          {"columnDefinitions", std::move(columns)},
          {"rows", std::move(rows)}};
}

}  // namespace pacer::testing
