#include "pacer/planner/calibration.h"

#include <cmath>
#include <set>

#include "text.h"
#include "yaml_fields.h"

namespace pacer::planner {
namespace {

using yaml_fields::Field;

constexpr std::size_t kMaxCalibratedGpuTypes = 1000;

using yaml_fields::NumberInRange;

// Bounds that keep every time the cost model computes finite and
// printable: 1e-300 GB/s gave NaN plans, a ratio of 1e-300 a 14-day job
// "done" in 5 minutes.
constexpr double kMinEfficiency = 0.01;
constexpr double kMinStepTimeRatio = 0.01;
constexpr double kMaxStepTimeRatio = 100;
// Lower than a cluster file's 0.1: a CPU run's quick all-reduce on a busy
// machine measures 0.07 GB/s, and that is what the worker writes.
constexpr double kMinMeasuredBandwidth = 0.001;  // GB/s
constexpr double kMaxMeasuredBandwidth = 1e6;    // GB/s

Status ParseEntry(const Field& f, GpuCalibration* c) {
  RETURN_IF_ERROR(
      f.CheckMap({"gemmEfficiency", "intraNodeBusBandwidthGBps", "interNodeBusBandwidthGBps",
                  "memoryBandwidthGBps", "stepTimeRatio"}));
  if (const Field v = f.Get("gemmEfficiency"); v.present()) {
    ASSIGN_OR_RETURN(c->gemm_efficiency, NumberInRange(v, kMinEfficiency, 1));
  }
  if (const Field v = f.Get("intraNodeBusBandwidthGBps"); v.present()) {
    ASSIGN_OR_RETURN(c->intra_node_busbw_gbps,
                     NumberInRange(v, kMinMeasuredBandwidth, kMaxMeasuredBandwidth));
  }
  if (const Field v = f.Get("interNodeBusBandwidthGBps"); v.present()) {
    ASSIGN_OR_RETURN(c->inter_node_busbw_gbps,
                     NumberInRange(v, kMinMeasuredBandwidth, kMaxMeasuredBandwidth));
  }
  if (const Field v = f.Get("memoryBandwidthGBps"); v.present()) {
    ASSIGN_OR_RETURN(c->memory_bandwidth_gbps,
                     NumberInRange(v, kMinMeasuredBandwidth, kMaxMeasuredBandwidth));
  }
  if (const Field v = f.Get("stepTimeRatio"); v.present()) {
    ASSIGN_OR_RETURN(c->step_time_ratio, NumberInRange(v, kMinStepTimeRatio, kMaxStepTimeRatio));
  }
  return Status::Ok();
}

StatusOr<Calibration> ParseCalibrationDocument(const std::string& document) {
  ASSIGN_OR_RETURN(const YAML::Node root, yaml_fields::Load(document, "calibration"));
  const Field top(root, "");
  if (!top.is_map()) {
    return InvalidArgumentError("calibration: expected a map with gpuTypes, got " + top.Describe());
  }
  // The worker may wrap its measurements as a Kubernetes-style object.
  RETURN_IF_ERROR(top.CheckMap({"gpuTypes", "apiVersion", "kind", "metadata"}));
  Calibration calibration;
  const Field types = top.Get("gpuTypes");
  if (!types.present()) return calibration;
  if (!types.is_map()) {
    return types.ErrorGot("must be a map from GPU type to measurements");
  }
  if (types.node().size() > kMaxCalibratedGpuTypes) {
    return types.Error("must have at most " + std::to_string(kMaxCalibratedGpuTypes) + " entries");
  }
  std::set<std::string> seen;
  for (const auto& [name, entry] : types.Entries()) {
    if (!text::IsPrintableName(name)) {
      return types.Error(
          "GPU type names must be non-empty, without control characters or leading or trailing "
          "spaces, got " +
          text::QuoteForMessage(name));
    }
    if (!seen.insert(text::Lowercase(name)).second) {
      return entry.Error("given more than once (GPU type names ignore case)");
    }
    GpuCalibration c;
    RETURN_IF_ERROR(ParseEntry(entry, &c));
    calibration.by_gpu_type.emplace(name, c);
  }
  return calibration;
}

}  // namespace

const GpuCalibration* Calibration::Find(std::string_view gpu_type) const {
  for (const auto& [name, c] : by_gpu_type) {
    if (text::EqualsIgnoreCase(name, gpu_type)) return &c;
  }
  return nullptr;
}

StatusOr<Calibration> ParseCalibration(const std::string& document) {
  return yaml_fields::Guard<Calibration>("calibration",
                                         [&] { return ParseCalibrationDocument(document); });
}

Status CheckCalibrationGpuTypes(const Calibration& calibration, const GpuCatalog& catalog) {
  for (const auto& [name, entry] : calibration.by_gpu_type) {
    if (catalog.Find(name) == nullptr) {
      return InvalidArgumentError("calibration: gpuTypes." + name + ": unknown GPU type " +
                                  text::QuoteForMessage(name) +
                                  "; known types: " + catalog.NamesForMessage() +
                                  " (a calibration applies only to the GPU type it names)");
    }
  }
  return Status::Ok();
}

}  // namespace pacer::planner
