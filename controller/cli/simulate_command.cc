#include "cli/simulate_command.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>

#include "cli/default_tables.h"
#include "cli/finite_range.h"
#include "cli/inputs.h"
#include "cli/non_empty.h"
#include "cli/simulate_chart.h"
#include "cli/simulate_output.h"
#include "pacer/sched/trace_csv.h"

namespace pacer::cli {
namespace {

// Traces of a few months hold tens of thousands of jobs.
constexpr std::size_t kMaxTraceBytes = std::size_t{64} << 20;

int FailSimulation(const Status& status, std::ostream& err) {
  err << "error: " << status.message() << '\n';
  return status.code() == StatusCode::kInternal ? kExitInternalError : kExitInvalidInput;
}

}  // namespace

const char* SimulateCommand::description() const {
  return "Replay a job trace (ElasticFlow CSV) through the multi-job deadline scheduler on a "
         "simulated clock: deadlines met, admitted/rejected jobs, resizes, GPU utilisation";
}

void SimulateCommand::AddOptions(CLI::App* command) {
  command->add_option("trace", trace_path_, "Trace CSV (ITP or elasticVpollux columns)")
      ->required()
      ->type_name("TRACE.csv");
  command->add_option("--gpus", gpus_, "GPUs in the pool")
      ->required()
      ->type_name("N")
      ->check(CLI::Range(1, 1 << 20));
  command
      ->add_option("--gpu-type", gpu_type_,
                   "GPU type of the throughput curves (default: the one that covers every "
                   "model of the trace)")
      ->type_name("TYPE");
  command->add_option("--policy", policy_, "pacer, edf, fifo, or all (one row each)")
      ->type_name("POLICY")
      ->capture_default_str();
  command
      ->add_option("--throughput", throughput_path_,
                   "Long-format throughput CSV (gpu_type,model,global_batch_size,num_gpus,"
                   "iters_per_sec); default: the built-in ElasticFlow A100/T4 table")
      ->type_name("FILE")
      ->check(NonEmpty());
  command
      ->add_option("--max-gpus", max_gpus_path_,
                   "Per-model GPU caps CSV (ef_max_gpus for pacer, baseline_max_gpus for "
                   "edf/fifo); default: built in with the built-in table, none otherwise")
      ->type_name("FILE")
      ->check(NonEmpty());
  command
      ->add_option("--hysteresis", hysteresis_,
                   "pacer grows a running job only if it then finishes this many restart "
                   "times earlier")
      ->type_name("FACTOR")
      ->check(FiniteRange(0.0, 1000.0))
      ->capture_default_str();
  command
      ->add_option("--headroom", headroom_,
                   "pacer plans stretch work by this share of the worst-case restart stall "
                   "rate (docs/scheduling.md)")
      ->type_name("FACTOR")
      ->check(FiniteRange(0.0, 10.0))
      ->capture_default_str();
  command->add_option("-o,--output", output_, "Output format: table or json")
      ->type_name("FORMAT")
      ->capture_default_str();
  command->add_option("--svg", svg_path_, "Also write GPUs per job over time as an SVG file")
      ->type_name("FILE")
      ->check(NonEmpty());
  command->footer(
      "Exit codes:\n"
      "  0  the simulation ran\n"
      "  1  internal error\n"
      "  2  invalid input: arguments, unreadable or malformed CSV, a model without a curve");
}

int SimulateCommand::Run(std::ostream& out, std::ostream& err) {
  if (output_ != "table" && output_ != "json") {
    return FailSimulation(InvalidArgumentError("-o " + output_ + ": use table or json"), err);
  }
  std::vector<sched::Policy> policies;
  if (policy_ == "all") {
    policies = {sched::Policy::kPacer, sched::Policy::kEdf, sched::Policy::kFifo};
  } else {
    StatusOr<sched::Policy> policy = sched::ParsePolicy(policy_);
    if (!policy.ok()) return FailSimulation(policy.status(), err);
    policies = {*policy};
  }
  StatusOr<std::string> trace_text = ReadDocument(trace_path_, kMaxTraceBytes);
  if (!trace_text.ok()) return FailSimulation(trace_text.status(), err);
  StatusOr<std::vector<sched::TraceJob>> trace = sched::ParseTraceCsv(*trace_text, trace_path_);
  if (!trace.ok()) return FailSimulation(trace.status(), err);

  StatusOr<sched::ThroughputTable> table = sched::ThroughputTable{};
  Status caps = Status::Ok();
  if (throughput_path_.empty()) {
    table = sched::ParseThroughputCsv(DefaultThroughputCsv(), "built-in throughput.csv");
    if (table.ok() && max_gpus_path_.empty()) {
      caps = sched::ParseMaxGpusCsv(DefaultMaxGpusCsv(), "built-in max_gpus.csv", *table);
    }
  } else {
    StatusOr<std::string> text = ReadDocument(throughput_path_, kMaxTraceBytes);
    if (!text.ok()) return FailSimulation(text.status(), err);
    table = sched::ParseThroughputCsv(*text, throughput_path_);
  }
  if (!table.ok()) return FailSimulation(table.status(), err);
  if (!caps.ok()) return FailSimulation(caps, err);
  if (!max_gpus_path_.empty()) {
    StatusOr<std::string> text = ReadDocument(max_gpus_path_, kMaxTraceBytes);
    if (!text.ok()) return FailSimulation(text.status(), err);
    Status parsed = sched::ParseMaxGpusCsv(*text, max_gpus_path_, *table);
    if (!parsed.ok()) return FailSimulation(parsed, err);
  }
  std::string gpu_type = gpu_type_;
  if (gpu_type.empty()) {
    StatusOr<std::string> chosen = sched::ChooseGpuType(*trace, *table);
    if (!chosen.ok()) return FailSimulation(chosen.status(), err);
    gpu_type = *chosen;
  }

  SimulationSetup setup;
  setup.trace = trace_path_;
  setup.throughput = throughput_path_.empty() ? "built-in ElasticFlow table" : throughput_path_;
  setup.gpu_type = gpu_type;
  setup.cluster_gpus = gpus_;
  setup.jobs = static_cast<int>(trace->size());
  std::vector<SimulationRun> runs;
  std::vector<sched::SimJob> charted_jobs;
  for (sched::Policy policy : policies) {
    StatusOr<std::vector<sched::SimJob>> jobs =
        sched::BuildSimJobs(*trace, *table, gpu_type, gpus_, policy, trace_path_);
    if (!jobs.ok()) return FailSimulation(jobs.status(), err);
    sched::SimOptions options;
    options.cluster_gpus = gpus_;
    options.sched.policy = policy;
    // ElasticFlow's simulator charges its EDF baseline no overhead; the same here.
    options.sched.restart = policy == sched::Policy::kEdf ? sched::RestartModel::None()
                                                          : sched::RestartModel::ElasticFlow(gpus_);
    options.sched.hysteresis_factor = hysteresis_;
    options.sched.stall_headroom_factor = headroom_;
    options.sched.compute_advice = false;  // the summary prints no per-job advice
    StatusOr<sched::SimResult> result = sched::Simulate(*jobs, options);
    if (!result.ok()) return FailSimulation(result.status(), err);
    if (runs.empty()) charted_jobs = *std::move(jobs);
    runs.push_back({policy, options.sched.restart, *std::move(result)});
  }

  if (!svg_path_.empty()) {
    const std::string title = std::filesystem::path(trace_path_).filename().string() + " on " +
                              std::to_string(gpus_) + " " + gpu_type + " GPUs, policy " +
                              sched::PolicyName(runs.front().policy);
    Status written = WriteOutputFile(
        svg_path_, SimulationChartSvg(title, charted_jobs, runs.front().result, gpus_), "--svg",
        {trace_path_, throughput_path_, max_gpus_path_});
    if (!written.ok()) return FailSimulation(written, err);
  }
  if (output_ == "json") {
    out << SimulationJson(setup, runs).dump(2) << '\n';
  } else {
    WriteSimulationTable(setup, runs, out);
  }
  return kExitOk;
}

}  // namespace pacer::cli
