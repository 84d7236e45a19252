// The chart of `pacer simulate --svg FILE`: GPUs per job over time, one
// coloured band per job (stacked with first fit so that a job's band keeps
// its height while its size holds), hours since the first arrival on the x
// axis, GPUs on the y axis, a dashed line at the pool size. Each band has a
// <title> tooltip (job, GPUs, interval). Self-contained SVG.
// Thread-safety: pure function.
#ifndef PACER_CLI_SIMULATE_CHART_H_
#define PACER_CLI_SIMULATE_CHART_H_

#include <string>
#include <string_view>
#include <vector>

#include "pacer/sched/simulator.h"

namespace pacer::cli {

std::string SimulationChartSvg(std::string_view title, const std::vector<sched::SimJob>& jobs,
                               const sched::SimResult& result, int cluster_gpus);

}  // namespace pacer::cli

#endif  // PACER_CLI_SIMULATE_CHART_H_
