// model_accuracy: the cost model against published runs, in sample and out
// of sample (docs/benchmarks.md, "Model accuracy").
//   build/tests/model_accuracy            # tables for docs/benchmarks.md
//   build/tests/model_accuracy --points   # also every point's prediction
//
// Data sets (tests/testdata, tests/planner/accuracy_sets.h):
//   korthikanti      Korthikanti et al. 2022 Table 5: 8 iteration times, A100,
//                    Megatron with tensor, pipeline and sequence parallelism
//   llmfoundry-h100  MosaicML llm-foundry: 70 MFUs, H100, PyTorch FSDP
//
// Six knobs are fitted (Knobs() below: the A100 and H100 in-training GEMM
// efficiencies of the catalog, tensor-parallel link efficiency, elementwise
// traffic, fused-attention efficiency, FSDP's per-layer overhead), by
// coordinate descent on a grid from Prior(), weighting each data set
// equally. The shipped defaults (ModelConstants in cost_model.h, the gemm
// column of gpu_catalog.cc) are not produced by this fit: they were chosen
// against earlier versions of the model and of this fit, then kept
// (docs/planner.md, section 7). Reported:
//   in-sample            the shipped defaults on every point;
//   leave one group out  refit without one model size, predict it;
//   leave one set out    refit on the other set only (constants it cannot see
//                        keep their priors), predict this set;
//   summary              also "refit in sample": the same fit on every point,
//                        whose constants are the last line printed.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../planner/accuracy_sets.h"

namespace pp = pacer::planner;
namespace pt = pacer::planner::testing;

namespace {

using Select = std::function<bool(const pt::AccuracyPoint&)>;

// What a fit varies: the model's constants and the catalog's measured
// in-training GEMM efficiencies.
struct Model {
  pp::ModelConstants constants;
  pp::GpuCatalog catalog = pp::GpuCatalog::BuiltIn();
};

struct Knob {
  const char* name;
  std::function<double&(Model&)> value;
  double lo, hi, step;
  double print_scale = 1;        // 1e3 prints seconds as ms
  const char* family = nullptr;  // knobs of one family are also swept in pairs
};

double& GemmOf(Model& m, const char* gpu) {
  // Find returns a const pointer into the catalog this Model owns.
  return const_cast<pp::GpuType*>(m.catalog.Find(gpu))->gemm_efficiency;
}

const std::vector<Knob>& Knobs() {
  static const std::vector<Knob> knobs = {
      {"A100 gemm", [](Model& m) -> double& { return GemmOf(m, "A100-80GB"); }, 0.60, 0.95, 0.01},
      {"H100 gemm", [](Model& m) -> double& { return GemmOf(m, "H100-SXM"); }, 0.40, 0.85, 0.01, 1,
       "fsdp"},
      {"tp link", [](Model& m) -> double& { return m.constants.tp_link_efficiency; }, 0.15, 0.80,
       0.05},
      {"elementwise", [](Model& m) -> double& { return m.constants.elementwise_traffic_factor; },
       0.0, 3.0, 0.25},
      {"flash", [](Model& m) -> double& { return m.constants.flash_attention_efficiency; }, 0.10,
       0.80, 0.02},
      {"sharded layer ms",
       [](Model& m) -> double& { return m.constants.sharded_layer_overhead_seconds; }, 0.0, 20.0e-3,
       0.25e-3, 1e3, "fsdp"},
  };
  return knobs;
}

// Mean over the selected sets of each set's mean |error|.
double Objective(const std::vector<pt::AccuracyPoint>& points, const Model& model,
                 const Select& select) {
  std::set<std::string> sets;
  for (const auto& a : points) {
    if (select(a)) sets.insert(a.set);
  }
  double sum = 0;
  for (const std::string& set : sets) {
    sum += pt::Score(
               points, model.constants,
               [&](const pt::AccuracyPoint& a) { return a.set == set && select(a); }, model.catalog)
               .mean_abs_error;
  }
  return sets.empty() ? 0 : sum / static_cast<double>(sets.size());
}

// Where every fit starts: not the defaults (they were chosen with every
// point in view, so starting there would leak the held-out points into the
// fit), but the measured stand-alone figure where there is one (an 8192^3
// cuBLAS GEMM on an H100: 0.807 of peak) and the middle of the knob's range
// elsewhere.
Model Prior() {
  Model m;
  for (const Knob& knob : Knobs()) knob.value(m) = 0.5 * (knob.lo + knob.hi);
  GemmOf(m, "H100-SXM") = 0.807;
  return m;
}

// Coordinate descent from Prior(): each knob in turn takes its best grid
// value, then the knobs of one family are swept in pairs, until a pass
// changes nothing (at most 6 passes). Deterministic. It finds a local
// optimum, not the grid's best point: on every point it stops at a higher
// objective than the shipped defaults, which are on the grid too (3.37%
// against 3.08% on 2026-12-01).
Model Fit(const std::vector<pt::AccuracyPoint>& points, const Select& train) {
  Model c = Prior();
  double best = Objective(points, c, train);
  for (int pass = 0; pass < 6; ++pass) {
    bool changed = false;
    for (const Knob& knob : Knobs()) {
      const int steps = static_cast<int>(std::lround((knob.hi - knob.lo) / knob.step));
      for (int i = 0; i <= steps; ++i) {
        Model trial = c;
        knob.value(trial) = knob.lo + i * knob.step;
        const double e = Objective(points, trial, train);
        if (e < best - 1e-12) {
          best = e;
          c = trial;
          changed = true;
        }
      }
    }
    // An efficiency and an overhead that act on the same runs trade off
    // against each other, so one-at-a-time moves stall: those pairs (and
    // only those) get a coarse 2-D sweep.
    const std::vector<Knob>& knobs = Knobs();
    for (size_t i = 0; i < knobs.size(); ++i) {
      for (size_t j = i + 1; j < knobs.size(); ++j) {
        if (knobs[i].family == nullptr || knobs[j].family == nullptr ||
            std::strcmp(knobs[i].family, knobs[j].family) != 0) {
          continue;
        }
        const Model start = c;
        Model probe = start;
        const double ci = knobs[i].value(probe), cj = knobs[j].value(probe);
        // The best pair of moves; among equal objectives the smallest move,
        // so a constant the training points cannot see keeps its value.
        double pair_best = best;
        int pair_di = 0, pair_dj = 0;
        for (int di = -6; di <= 6; ++di) {
          for (int dj = -6; dj <= 6; ++dj) {
            Model trial = start;
            const double vi = ci + di * knobs[i].step, vj = cj + dj * knobs[j].step;
            if (vi < knobs[i].lo - 1e-12 || vi > knobs[i].hi + 1e-12) continue;
            if (vj < knobs[j].lo - 1e-12 || vj > knobs[j].hi + 1e-12) continue;
            knobs[i].value(trial) = vi;
            knobs[j].value(trial) = vj;
            const double e = Objective(points, trial, train);
            const bool better = e < pair_best - 1e-12;
            const bool smaller_tie =
                e < pair_best + 1e-12 &&
                std::abs(di) + std::abs(dj) < std::abs(pair_di) + std::abs(pair_dj);
            if (better || (smaller_tie && e < best - 1e-12)) {
              pair_best = e;
              pair_di = di;
              pair_dj = dj;
            }
          }
        }
        if (pair_di != 0 || pair_dj != 0) {
          knobs[i].value(c) = ci + pair_di * knobs[i].step;
          knobs[j].value(c) = cj + pair_dj * knobs[j].step;
          best = pair_best;
          changed = true;
        }
      }
    }
    if (!changed) break;
  }
  return c;
}

std::string Constants(const Model& model) {
  Model m = model;
  std::string out;
  for (const Knob& knob : Knobs()) {
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), "%s%s %.3g", out.empty() ? "" : ", ", knob.name,
                  knob.value(m) * knob.print_scale);
    out += buffer;
  }
  return out;
}

pt::SetScore ScoreModel(const std::vector<pt::AccuracyPoint>& points, const Model& m,
                        const Select& select) {
  return pt::Score(points, m.constants, select, m.catalog);
}

}  // namespace

int main(int argc, char** argv) {
  const bool print_points = argc > 1 && std::strcmp(argv[1], "--points") == 0;
  const std::vector<pt::AccuracyPoint> points = pt::AllAccuracyPoints();
  const Model defaults;
  const std::vector<std::string> sets = {"korthikanti", "llmfoundry-h100"};
  std::printf("Defaults: %s\nFits start from: %s\n\n", Constants(defaults).c_str(),
              Constants(Prior()).c_str());

  if (print_points) {
    std::printf("| set | run | measured | predicted | error | fits |\n|---|---|---|---|---|---|\n");
    for (const auto& a : points) {
      const pt::PointResult r = pt::Predict(a, defaults.constants, defaults.catalog);
      std::printf("| %s | %s | %.4g | %.4g | %+.1f%% | %s |\n", a.set.c_str(), a.label.c_str(),
                  a.measured, r.predicted, 100 * r.error, r.fits ? "yes" : "NO");
    }
    std::printf("\n");
  }

  std::printf(
      "In sample (defaults):\n\n| set | points | mean abs error | max abs error | "
      "refused (out of memory) |\n|---|---|---|---|---|\n");
  std::map<std::string, double> in_sample;
  for (const std::string& set : sets) {
    const pt::SetScore s =
        ScoreModel(points, defaults, [&](const pt::AccuracyPoint& a) { return a.set == set; });
    in_sample[set] = s.mean_abs_error;
    std::printf("| %s | %d | %.2f%% | %.2f%% | %d |\n", set.c_str(), s.points,
                100 * s.mean_abs_error, 100 * s.max_abs_error, s.refused);
  }

  std::printf(
      "\nLeave one group (model size) out: refit without it, predict it:\n\n"
      "| set | held out | points | mean abs error | max abs error | refit |\n"
      "|---|---|---|---|---|---|\n");
  std::map<std::string, std::pair<double, int>> held_out;  // sum of |error|, count
  std::map<std::string, double> held_out_max;
  for (const std::string& set : sets) {
    std::vector<std::string> groups;
    for (const auto& a : points) {
      if (a.set == set && std::find(groups.begin(), groups.end(), a.group) == groups.end()) {
        groups.push_back(a.group);
      }
    }
    for (const std::string& group : groups) {
      auto is_held = [&](const pt::AccuracyPoint& a) { return a.set == set && a.group == group; };
      const Model c = Fit(points, [&](const pt::AccuracyPoint& a) { return !is_held(a); });
      const pt::SetScore s = ScoreModel(points, c, is_held);
      held_out[set].first += s.mean_abs_error * s.points;
      held_out[set].second += s.points;
      held_out_max[set] = std::max(held_out_max[set], s.max_abs_error);
      std::printf("| %s | %s | %d | %.2f%% | %.2f%% | %s |\n", set.c_str(), group.c_str(), s.points,
                  100 * s.mean_abs_error, 100 * s.max_abs_error, Constants(c).c_str());
    }
  }

  std::printf(
      "\nLeave one set out: refit on the other set only, predict this one:\n\n"
      "| predicted set | mean abs error | max abs error | refit |\n|---|---|---|---|\n");
  std::map<std::string, double> set_out;
  for (const std::string& set : sets) {
    const Model c = Fit(points, [&](const pt::AccuracyPoint& a) { return a.set != set; });
    const pt::SetScore s =
        ScoreModel(points, c, [&](const pt::AccuracyPoint& a) { return a.set == set; });
    set_out[set] = s.mean_abs_error;
    std::printf("| %s | %.2f%% | %.2f%% | %s |\n", set.c_str(), 100 * s.mean_abs_error,
                100 * s.max_abs_error, Constants(c).c_str());
  }

  // The ratio compares like with like: the same procedure fitted on every
  // point (in sample) and without the held-out group. The "Grid optimum"
  // printed last is this fit's result: the local optimum Fit() reaches from
  // Prior(), not the shipped defaults and not the best point of the grid.
  const Model all = Fit(points, [](const pt::AccuracyPoint&) { return true; });
  std::printf(
      "\nSummary (refit in sample: the same fitting procedure on every point, what "
      "the leave-one-out ratio compares with):\n\n"
      "| set | in sample (defaults) | refit in sample | leave one group out | ratio | "
      "leave one set out |\n|---|---|---|---|---|---|\n");
  for (const std::string& set : sets) {
    const double logo = held_out[set].first / std::max(1, held_out[set].second);
    const double refit = ScoreModel(points, all, [&](const pt::AccuracyPoint& a) {
                           return a.set == set;
                         }).mean_abs_error;
    std::printf("| %s | %.2f%% | %.2f%% | %.2f%% (max %.2f%%) | %.2fx | %.2f%% |\n", set.c_str(),
                100 * in_sample[set], 100 * refit, 100 * logo, 100 * held_out_max[set],
                refit > 0 ? logo / refit : 0.0, 100 * set_out[set]);
  }
  std::printf("\nGrid optimum on every point: %s\n", Constants(all).c_str());
  return 0;
}
