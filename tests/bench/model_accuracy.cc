// model_accuracy: prints the cost model's predicted vs measured iteration
// time on Korthikanti et al. 2022 Table 5 (the table in docs/benchmarks.md),
// then the leave-one-model-out check: the three fitted constants are refitted
// by grid search on three models and the fourth is predicted, so the error
// reported is not only in-sample.
//   build/tests/model_accuracy
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "../planner/calibration_points.h"

namespace pp = pacer::planner;

namespace {

struct Errors {
  double mean = 0, max = 0;
};

Errors Score(const pp::ModelConstants& c, const std::string& only, const std::string& skip,
             bool print) {
  const pp::GpuType* a100 = pp::GpuCatalog::BuiltIn().Find("A100-80GB");
  double sum = 0, worst = 0;
  int n = 0;
  for (const auto& pt : pp::testing::KorthikantiTable5()) {
    if ((!only.empty() && pt.model != only) || pt.model == skip) continue;
    for (bool full : {true, false}) {
      const auto s = pp::testing::SetUpPoint(pt, full);
      const double predicted = pp::Evaluate(s.job, s.layout, s.pool, *a100, nullptr, c)
                                   .step.step_seconds;
      const double measured = full ? pt.full_recompute_seconds : pt.selective_seconds;
      const double error = (predicted - measured) / measured;
      if (print) {
        std::printf("| %-5s | %-17s | %7.2f | %7.2f | %+6.2f%% |\n", pt.model.c_str(),
                    full ? "full" : "seq + selective", measured, predicted, 100 * error);
      }
      sum += std::abs(error);
      worst = std::max(worst, std::abs(error));
      ++n;
    }
  }
  return {sum / n, worst};
}

pp::ModelConstants Fit(const std::string& skip) {
  pp::ModelConstants best_c;
  double best = std::numeric_limits<double>::infinity();
  for (double gemm = 0.70; gemm <= 0.951; gemm += 0.01) {
    for (double tp = 0.15; tp <= 0.801; tp += 0.05) {
      for (double elem = 0; elem <= 2.01; elem += 0.25) {
        pp::ModelConstants c;
        c.gemm_efficiency = gemm;
        c.tp_link_efficiency = tp;
        c.elementwise_traffic_factor = elem;
        const double e = Score(c, "", skip, false).mean;
        if (e < best) {
          best = e;
          best_c = c;
        }
      }
    }
  }
  return best_c;
}

}  // namespace

int main() {
  const pp::ModelConstants defaults;
  std::printf("Defaults: gemm_efficiency %.2f, tp_link_efficiency %.2f, "
              "elementwise_traffic_factor %.2f\n\n",
              defaults.gemm_efficiency, defaults.tp_link_efficiency,
              defaults.elementwise_traffic_factor);
  std::printf("| model | recomputation     | measured s | predicted s | error |\n");
  std::printf("|---|---|---|---|---|\n");
  const Errors all = Score(defaults, "", "", true);
  std::printf("\nIn-sample: mean |error| %.2f%%, max %.2f%% (Calculon: 3.65%% / 8.87%%)\n\n",
              100 * all.mean, 100 * all.max);

  std::printf("Leave one model out (refit on the other three, predict the held-out one):\n");
  std::printf("| held out | gemm | tp link | elementwise | mean error | max error |\n");
  std::printf("|---|---|---|---|---|---|\n");
  double sum = 0, worst = 0;
  for (const auto& pt : pp::testing::KorthikantiTable5()) {
    const pp::ModelConstants c = Fit(pt.model);
    const Errors e = Score(c, pt.model, "", false);
    std::printf("| %-5s | %.2f | %.2f | %.2f | %.2f%% | %.2f%% |\n", pt.model.c_str(),
                c.gemm_efficiency, c.tp_link_efficiency, c.elementwise_traffic_factor,
                100 * e.mean, 100 * e.max);
    sum += e.mean;
    worst = std::max(worst, e.max);
  }
  std::printf("\nHeld-out: mean |error| %.2f%%, max %.2f%%\n", 100 * sum / 4, 100 * worst);
  const pp::ModelConstants refit = Fit("");
  const Errors refit_errors = Score(refit, "", "", false);
  std::printf("Grid optimum on all eight: gemm %.2f, tp link %.2f, elementwise %.2f "
              "(mean %.2f%%, max %.2f%%)\n",
              refit.gemm_efficiency, refit.tp_link_efficiency, refit.elementwise_traffic_factor,
              100 * refit_errors.mean, 100 * refit_errors.max);
  return 0;
}
