#include "cli/explain_output.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "cli/format.h"
#include "cli/plan_report.h"
#include "cli/table.h"
#include "pacer/planner/units.h"

namespace pacer::cli {
namespace {

constexpr int kBarWidth = 40;

// Left eighth blocks U+258F (1/8) .. U+2589 (7/8), then the full block U+2588.
constexpr const char* kEighths[] = {"",       "\u258F", "\u258E", "\u258D", "\u258C",
                                    "\u258B", "\u258A", "\u2589", "\u2588"};

std::string Padded(std::string text, std::size_t width) {
  const std::size_t shown = DisplayWidth(text);
  if (shown < width) text.append(width - shown, ' ');
  return text;
}

struct BarRow {
  std::string label;
  double value;  // bytes or seconds
  std::string shown;
};

// Rows of "label  bar  value  share", shares and bars relative to `scale`.
void WriteBars(const std::vector<BarRow>& rows, double scale, std::ostream& out) {
  std::size_t label_width = 0;
  std::size_t value_width = 0;
  for (const BarRow& row : rows) {
    label_width = std::max(label_width, DisplayWidth(row.label));
    value_width = std::max(value_width, DisplayWidth(row.shown));
  }
  for (const BarRow& row : rows) {
    const double share = scale > 0 ? row.value / scale : 0;
    std::string value = row.shown;
    value.insert(0, value_width - DisplayWidth(value), ' ');
    std::string percent = FormatPercent(share);
    percent.insert(0, percent.size() < 6 ? 6 - percent.size() : 0, ' ');
    out << "  " << Padded(row.label, label_width) << "  " << HorizontalBar(share, kBarWidth) << "  "
        << value << "  " << percent << '\n';
  }
}

void WriteMemoryBars(const planner::MemoryBreakdown& m, std::ostream& out) {
  out << "Memory per GPU (the most loaded one)\n";
  const std::vector<std::pair<const char*, double>> parts = {{"weights", m.weights_bytes},
                                                             {"gradients", m.gradients_bytes},
                                                             {"optimizer state", m.optimizer_bytes},
                                                             {"activations", m.activations_bytes},
                                                             {"logits", m.logits_bytes},
                                                             {"reserve", m.reserve_bytes}};
  std::vector<BarRow> rows;
  for (const auto& [label, bytes] : parts) rows.push_back({label, bytes, FormatGiB(bytes)});
  if (m.buffers_bytes > 0) {
    // ZeRO-3 only: the gathered layers, placed before the reserve row.
    rows.insert(rows.end() - 1, {"ZeRO-3 buffers", m.buffers_bytes, FormatGiB(m.buffers_bytes)});
  }
  rows.push_back({"total", m.total_bytes(), FormatGiB(m.total_bytes())});
  rows.push_back({"capacity", m.capacity_bytes, FormatGiB(m.capacity_bytes)});
  WriteBars(rows, m.capacity_bytes, out);
}

std::string Bandwidth(double bytes_per_second) {
  return FormatFixed(bytes_per_second / 1e9, 0) + " GB/s";
}

void WriteStepBars(const planner::StepTimeBreakdown& s, std::ostream& out) {
  out << "Step time (the slowest pipeline stage)\n";
  const std::vector<std::pair<std::string, double>> parts = {
      {"compute", s.compute_seconds},
      {"recompute", s.recompute_seconds},
      {"tensor-parallel comm (exposed)", s.tp_exposed_seconds},
      {"sharding overhead (ZeRO-2/3)", s.sharding_overhead_seconds},
      {"pipeline bubble", s.pp_bubble_seconds},
      {"pipeline p2p", s.pp_p2p_seconds},
      {"data-parallel comm (exposed)", s.dp_exposed_seconds},
      {"optimizer", s.optimizer_seconds},
      {"fixed per step", s.overhead_seconds}};
  double sum = 0;
  std::vector<BarRow> rows;
  for (const auto& [label, seconds] : parts) {
    sum += seconds;
    rows.push_back({label, seconds, FormatSeconds(seconds)});
  }
  rows.push_back({"step", s.step_seconds, FormatSeconds(s.step_seconds)});
  // Shares are of the modelled sum; calibration scales the sum as a whole.
  WriteBars(rows, std::max(sum, s.step_seconds), out);
  out << "  attention: "
      << (s.attention == planner::AttentionKernel::kFused
              ? "fused kernel (FlashAttention-style: no score matrix stored)"
              : "unfused (score matrix stored)")
      << ", " << FormatSeconds(s.attention_seconds) << " of the compute\n";
  if (s.tp_comm_seconds > 0) {
    out << "  tensor-parallel: " << planner::CollectiveAlgorithmName(s.tp_collective.algorithm)
        << " all-reduce at " << Bandwidth(s.tp_collective.busbw_bytes_per_second)
        << " bus bandwidth, " << FormatSeconds(s.tp_collective.latency_seconds) << " latency each; "
        << FormatSeconds(s.tp_comm_seconds) << " in total, "
        << (s.tp_overlap ? "overlapped with the GEMMs" : "not overlapped") << "\n";
  }
  if (s.dp_comm_seconds > 0) {
    out << "  data-parallel: " << planner::CollectiveAlgorithmName(s.dp_collective.algorithm)
        << " at " << Bandwidth(s.dp_collective.busbw_bytes_per_second) << " bus bandwidth, "
        << FormatSeconds(s.dp_collective.latency_seconds) << " latency each; "
        << FormatSeconds(s.dp_comm_seconds) << " in total, "
        << (s.dp_overlap ? "the rest overlaps with compute" : "not overlapped") << "\n";
  }
  out << "  latency floor: " << FormatSeconds(s.latency_floor_seconds)
      << " (kernel launches, exposed collective latency, fixed per-step cost: no layout of "
         "this shape steps faster)";
  if (s.calibration_ratio != 1) {
    out << "; calibration ratio x" << FormatFixed(s.calibration_ratio, 3) << " applied";
  }
  out << '\n';
}

// The number a rejected candidate lost on.
std::string KeyNumber(const planner::RejectionSummary& rejection,
                      const planner::PlanResult& result) {
  const planner::Evaluation& e = *rejection.best;
  switch (rejection.reason) {
    case planner::RejectReason::kOutOfMemory:
      return "needs " + FormatGiB(e.memory.total_bytes()) + " of " +
             FormatGiB(e.memory.capacity_bytes);
    case planner::RejectReason::kMissesDeadline: {
      const int64_t completion =
          planner::CompletionUnixSeconds(result.now_unix_seconds, e.total.total_seconds);
      std::string text = "finishes " + planner::FormatRfc3339(completion);
      if (result.deadline_unix_seconds) {
        text += ", " +
                planner::FormatDurationHuman(
                    static_cast<double>(completion - *result.deadline_unix_seconds)) +
                " after the deadline";
      }
      return text;
    }
    default:
      return "total " + planner::FormatDurationHuman(e.total.total_seconds) + ", " +
             FormatGpuHours(e.gpu_hours) + " GPU-hours, cost " + FormatCost(e.cost);
  }
}

void WhyOthersLost(const planner::PlanResult& result, std::ostream& out) {
  int64_t total = 0;
  for (const auto& rejection : result.rejections) total += rejection.count;
  out << "Why other layouts lost (" << FormatGrouped(static_cast<double>(total))
      << " candidates)\n";
  if (result.rejections.empty()) {
    out << "  no other layout was considered\n";
    return;
  }
  std::size_t name_width = 0;
  for (const auto& rejection : result.rejections) {
    name_width =
        std::max(name_width, std::string(planner::RejectReasonName(rejection.reason)).size());
  }
  for (const auto& rejection : result.rejections) {
    out << "  " << Padded(planner::RejectReasonName(rejection.reason), name_width) << "  "
        << FormatGrouped(static_cast<double>(rejection.count)) << '\n';
    std::string best;
    if (rejection.best) {
      best = "best: " + rejection.best->layout.ToString() + " - " + KeyNumber(rejection, result);
      out << "      " << best << '\n';
    }
    // The planner's detail often is the very number already shown.
    if (!rejection.detail.empty() && best.find(rejection.detail) == std::string::npos) {
      out << "      " << rejection.detail << '\n';
    }
  }
}

}  // namespace

std::string HorizontalBar(double fraction, int width) {
  if (!(fraction > 0)) fraction = 0;  // also NaN
  fraction = std::min(fraction, 1.0);
  const long eighths = std::lround(fraction * width * 8);
  std::string bar;
  for (long i = 0; i < eighths / 8; ++i) bar += kEighths[8];
  bar += kEighths[eighths % 8];
  const long cells = eighths / 8 + (eighths % 8 > 0 ? 1 : 0);
  bar.append(static_cast<std::size_t>(width - cells), ' ');
  return bar;
}

void WriteExplainReport(const planner::JobSpec& job, const planner::PlanResult& result,
                        std::ostream& out) {
  WriteInfeasibleBlock(job, result, out);
  WritePlanSummary(job, result, out);
  if (result.plan) {
    out << '\n';
    WriteMemoryBars(result.plan->memory, out);
    out << '\n';
    WriteStepBars(result.plan->step, out);
  }
  out << '\n';
  WhyOthersLost(result, out);
  if (!result.warnings.empty()) {
    out << '\n';
    for (const std::string& warning : result.warnings) out << "warning: " << warning << '\n';
  }
}

Json ExplainJson(const planner::PlanResult& result) {
  Json json = PlanResultJson(result);
  json["reasons"] = RejectionsJson(result.rejections, result.now_unix_seconds);
  return json;
}

}  // namespace pacer::cli
