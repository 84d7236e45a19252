// The data sets the cost model is scored on, behind one interface: each
// point is a published run (job, layout, pool, GPU) with its measurement,
// and the error is the relative error of the predicted step time (or of the
// MFU computed from it the way the source computes it). Shared by the
// accuracy test and the model_accuracy program (docs/benchmarks.md).
//
// Units: errors are fractions (0.05 = 5%). Thread-safety: pure functions
// after loading.
#ifndef PACER_TESTS_PLANNER_ACCURACY_SETS_H_
#define PACER_TESTS_PLANNER_ACCURACY_SETS_H_

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "calibration_points.h"
#include "llmfoundry_runs.h"

namespace pacer::planner::testing {

struct AccuracyPoint {
  std::string set;    // "korthikanti" or "llmfoundry-h100"
  std::string group;  // the model size: what leave-one-group-out holds out
  std::string label;  // row label for tables
  JobSpec job;
  Layout layout;
  NodePool pool;
  std::string gpu_type;
  double measured = 0;  // seconds per step (Korthikanti) or MFU (llm-foundry)
  bool measured_is_mfu = false;
  LlmFoundryRun run;  // when measured_is_mfu
};

inline std::vector<AccuracyPoint> AllAccuracyPoints() {
  std::vector<AccuracyPoint> out;
  for (const auto& pt : KorthikantiTable5()) {
    for (bool full : {true, false}) {
      const PointSetup s = SetUpPoint(pt, full);
      AccuracyPoint a;
      a.set = "korthikanti";
      a.group = pt.model;
      a.label = pt.model + (full ? " full" : " seq+selective");
      a.job = s.job;
      a.layout = s.layout;
      a.pool = s.pool;
      a.gpu_type = "A100-80GB";
      a.measured = full ? pt.full_recompute_seconds : pt.selective_seconds;
      out.push_back(std::move(a));
    }
  }
  for (const auto& r : LoadLlmFoundryRuns(LlmFoundryRunsPath())) {
    const LlmFoundrySetup s = SetUpLlmFoundryRun(r);
    AccuracyPoint a;
    a.set = "llmfoundry-h100";
    a.group = r.model;
    a.label = r.name;
    a.job = s.job;
    a.layout = s.layout;
    a.pool = s.pool;
    a.gpu_type = "H100-SXM";
    a.measured = r.mfu;
    a.measured_is_mfu = true;
    a.run = r;
    out.push_back(std::move(a));
  }
  return out;
}

struct PointResult {
  double predicted = 0;  // same unit as measured
  double error = 0;      // (predicted - measured) / measured
  bool fits = true;      // predicted memory within the GPU's
};

inline PointResult Predict(const AccuracyPoint& a, const ModelConstants& c,
                           const GpuCatalog& catalog = GpuCatalog::BuiltIn()) {
  const GpuType* gpu = catalog.Find(a.gpu_type);
  const Evaluation e = Evaluate(a.job, a.layout, a.pool, *gpu, nullptr, c);
  PointResult r;
  r.predicted = a.measured_is_mfu ? LlmFoundryMfu(a.run, e.step.step_seconds) : e.step.step_seconds;
  r.error = (r.predicted - a.measured) / a.measured;
  r.fits = e.memory.fits();
  return r;
}

struct SetScore {
  double mean_abs_error = 0;
  double max_abs_error = 0;
  int points = 0;
  int refused = 0;  // out of memory by the model, though the run really ran
};

// Scores the points for which `select` is true.
template <typename Select>
SetScore Score(const std::vector<AccuracyPoint>& points, const ModelConstants& c, Select select,
               const GpuCatalog& catalog = GpuCatalog::BuiltIn()) {
  SetScore s;
  double sum = 0;
  for (const AccuracyPoint& a : points) {
    if (!select(a)) continue;
    const PointResult r = Predict(a, c, catalog);
    sum += std::abs(r.error);
    s.max_abs_error = std::max(s.max_abs_error, std::abs(r.error));
    s.refused += r.fits ? 0 : 1;
    ++s.points;
  }
  s.mean_abs_error = s.points ? sum / s.points : 0;
  return s;
}

}  // namespace pacer::planner::testing

#endif  // PACER_TESTS_PLANNER_ACCURACY_SETS_H_
