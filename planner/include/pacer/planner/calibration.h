// Calibration: measurements that replace the model's default efficiencies
// for a GPU type. Written by `pacer-worker calibrate` (GEMM and all-reduce
// measurements) and by the controller's re-plan loop (measured/predicted
// step-time ratio); read by `pacer plan --calibration FILE`.
// Format (JSON, documented in docs/inventory.md, "Calibration files"):
//   {"gpuTypes": {"H100-SXM": {"gemmEfficiency": 0.81,
//                              "intraNodeBusBandwidthGBps": 360,
//                              "interNodeBusBandwidthGBps": 45,
//                              "memoryBandwidthGBps": 3000,
//                              "stepTimeRatio": 1.07}}}
// Every field is optional.
//
// Units: efficiency is a fraction of the catalog's dense peak; bus bandwidth
// in GB/s as nccl-tests defines busbw; the ratio is measured / predicted.
// Thread-safety: a plain value type.
#ifndef PACER_PLANNER_CALIBRATION_H_
#define PACER_PLANNER_CALIBRATION_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "pacer/planner/gpu_catalog.h"
#include "pacer/status.h"

namespace pacer::planner {

// Where a measured step-time ratio kept in a TrainJob's status is read
// within: far wider than a calibration file's 0.01..100, as CPU workers
// measured against a GPU's prediction run hundreds of times slower, but
// bounded, so that a broken rank's 1e300 cannot make every plan "forever".
inline constexpr double kMinMeasuredStepTimeRatio = 1e-6;
inline constexpr double kMaxMeasuredStepTimeRatio = 1e6;
// Whether a measured / predicted step-time ratio is one a worker could have
// measured (false for NaN): outside it, a broken exporter's number. A run
// of the model shrunk by `model_scale` < 1 (a CPU run of a GPU plan; its
// compute falls as scale^3.5) may be any amount faster than the full
// model's prediction, but no more than the upper bound slower.
inline bool PlausibleStepTimeRatio(double ratio, double model_scale = 1.0) {
  if (model_scale < 1.0) return ratio > 0 && ratio <= kMaxMeasuredStepTimeRatio;
  return ratio >= kMinMeasuredStepTimeRatio && ratio <= kMaxMeasuredStepTimeRatio;
}

struct GpuCalibration {
  std::optional<double> gemm_efficiency;        // [0.01, 1]
  std::optional<double> intra_node_busbw_gbps;  // [0.001, 1e6]
  std::optional<double> inter_node_busbw_gbps;  // [0.001, 1e6]
  std::optional<double> memory_bandwidth_gbps;  // [0.001, 1e6]
  std::optional<double> step_time_ratio;        // measured / predicted; a file's [0.01, 100]
};

struct Calibration {
  std::map<std::string, GpuCalibration> by_gpu_type;  // canonical catalog names

  // The entry for `gpu_type` (case-insensitive), or nullptr.
  const GpuCalibration* Find(std::string_view gpu_type) const;
};

// Parses the calibration JSON (or YAML). Errors name the field path.
StatusOr<Calibration> ParseCalibration(const std::string& document);

// Every GPU type `calibration` names is one `catalog` knows (ignoring case).
// A calibration is used only for the type it names, so a misspelt name
// ("H100-SMX") would be ignored without a word and the plan would run on
// default efficiencies. Checked where a calibration file meets the catalog
// it is used with (a cluster file can add types). Errors: InvalidArgument
// naming the entry and the known types.
Status CheckCalibrationGpuTypes(const Calibration& calibration, const GpuCatalog& catalog);

}  // namespace pacer::planner

#endif  // PACER_PLANNER_CALIBRATION_H_
