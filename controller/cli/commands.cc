#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/explain_output.h"
#include "cli/inputs.h"
#include "cli/non_empty.h"
#include "cli/plan_output.h"
#include "cli/plan_report.h"
#include "cli/simulate_command.h"
#include "cli/svg_chart.h"
#include "cli/sweep_output.h"
#include "cli/yaml_output.h"
#include "pacer/planner/search.h"
#include "pacer/status.h"

namespace pacer::cli {
namespace {

enum class OutputFormat { kTable, kJson, kYaml };

constexpr const char* kExitCodesHelp =
    "Exit codes:\n"
    "  0  a plan meets the deadline (or the job has none)\n"
    "  1  internal error\n"
    "  2  invalid input: arguments, unreadable or invalid files, a deadline in the past\n"
    "  3  infeasible: no plan meets the deadline (the fastest plan is printed)\n"
    "  4  nothing fits: no layout fits the GPUs at all (memory, divisibility, limits)";

// Flags of plan and explain (sweep has its own on top of InputFlags).
struct PlanFlags {
  InputFlags inputs;
  std::string output = "table";
  int alternatives = 5;
};

struct SweepFlags {
  InputFlags inputs;
  std::string output = "table";
  std::string gpus;
  std::string svg_path;
};

// Levenshtein distance, for "did you mean": `pacer plna` is one edit from plan.
std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Whether argv[1] is an option the top level does not have (`--bogus`,
// `-o`, `--bogus=1`): those belong after a subcommand.
bool UnknownLeadingOption(const CLI::App& app, int argc, char** argv) {
  if (argc < 2) return false;
  const std::string first = argv[1];
  if (first.size() < 2 || first.front() != '-') return false;
  return app.get_option_no_throw(first.substr(0, first.find('='))) == nullptr;
}

// What is wrong when the command line has no subcommand that parsed: CLI11
// said "A subcommand is required" for `pacer plna job.yaml` and for
// `pacer --bogus` alike, naming neither the word nor the choices.
std::string NoSubcommandMessage(int argc, char** argv, const std::vector<CLI::App*>& commands) {
  std::string names;
  for (const CLI::App* command : commands) {
    if (!names.empty()) names += ", ";
    names += command->get_name();
  }
  if (argc < 2) return "no subcommand given; give one of: " + names;
  const std::string first = argv[1];
  if (!first.empty() && first.front() == '-') {
    return "unknown option " + first + " before a subcommand; give one of the subcommands first (" +
           names + "), then its options (e.g. pacer plan job.yaml --now 2026-06-01T00:00:00Z)";
  }
  std::string message = "unknown subcommand \"" + first + "\"";
  std::string nearest;
  std::size_t nearest_distance = 3;  // further than 2 edits is no typo
  for (const CLI::App* command : commands) {
    const std::size_t distance = EditDistance(first, command->get_name());
    if (distance < nearest_distance) {
      nearest = command->get_name();
      nearest_distance = distance;
    }
  }
  if (!nearest.empty()) message += " (did you mean " + nearest + "?)";
  return message + "; give one of: " + names;
}

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kResourceExhausted:
      return kExitInvalidInput;
    case StatusCode::kFailedPrecondition:
      return kExitNothingFits;
    default:
      return kExitInternalError;
  }
}

int Fail(const Status& status, std::ostream& err) {
  err << "error: " << status.message() << '\n';
  return ExitCodeFor(status);
}

StatusOr<OutputFormat> ParseOutputFormat(std::string_view text) {
  if (text == "table") return OutputFormat::kTable;
  if (text == "json") return OutputFormat::kJson;
  if (text == "yaml") return OutputFormat::kYaml;
  return InvalidArgumentError("-o: unknown output format \"" + std::string(text) +
                              "\" (expected table, json or yaml)");
}

void WriteMachineOutput(const Json& json, OutputFormat format, std::ostream& out) {
  if (format == OutputFormat::kYaml) {
    out << JsonToYaml(json);
  } else {
    out << json.dump(2) << '\n';
  }
}

void AddInputOptions(CLI::App* command, InputFlags& flags) {
  command->add_option("job", flags.job_path, "TrainJob document (YAML or JSON)")
      ->required()
      ->type_name("JOB.yaml");
  command
      ->add_option("--cluster", flags.cluster_path,
                   "Cluster inventory (node pools, free GPUs, prices); default: the built-in "
                   "inventory of one pool per common GPU type, all free")
      ->type_name("FILE")
      ->check(NonEmpty());
  command
      ->add_option("--calibration", flags.calibration_path,
                   "Calibration measured by `pacer-worker calibrate` or the controller")
      ->type_name("FILE")
      ->check(NonEmpty());
  // A callback, not a string: `--now ""` (an unset shell variable) must
  // read as given and empty, not as left out.
  command
      ->add_option_function<std::string>(
          "--now", [&flags](const std::string& text) { flags.now_rfc3339 = text; },
          "Plan as of this instant instead of the system clock (RFC 3339, e.g. "
          "2026-06-01T00:00:00Z); makes output reproducible")
      ->type_name("TIME");
}

// plan and explain: same inputs and exit codes, different renderings.
int RunPlanCommand(const PlanFlags& flags, bool explain, std::ostream& out, std::ostream& err) {
  StatusOr<OutputFormat> format = ParseOutputFormat(flags.output);
  if (!format.ok()) return Fail(format.status(), err);
  StatusOr<LoadedInputs> inputs = LoadInputs(flags.inputs);
  if (!inputs.ok()) return Fail(inputs.status(), err);

  planner::PlanOptions options;
  options.now_unix_seconds = inputs->now_unix_seconds;
  options.alternatives = flags.alternatives;
  StatusOr<planner::PlanResult> result =
      planner::Plan(inputs->job, inputs->inventory, inputs->calibration, options);
  if (!result.ok()) return Fail(result.status().WithContext(flags.inputs.job_path), err);

  if (*format == OutputFormat::kTable) {
    if (explain) {
      WriteExplainReport(inputs->job, *result, out);
    } else {
      WritePlanReport(inputs->job, *result, out);
    }
    if (flags.inputs.cluster_path.empty()) WriteBuiltInInventoryNote(out);
  } else {
    WriteMachineOutput(explain ? ExplainJson(*result) : PlanResultJson(*result), *format, out);
  }
  return result->feasible ? kExitOk : kExitInfeasible;
}

int RunSweepCommand(const SweepFlags& flags, std::ostream& out, std::ostream& err) {
  StatusOr<OutputFormat> format = ParseOutputFormat(flags.output);
  if (!format.ok()) return Fail(format.status(), err);
  StatusOr<std::vector<int>> gpu_counts = ParseGpuCounts(flags.gpus);
  if (!gpu_counts.ok()) return Fail(gpu_counts.status(), err);
  StatusOr<LoadedInputs> inputs = LoadInputs(flags.inputs);
  if (!inputs.ok()) return Fail(inputs.status(), err);

  planner::PlanOptions options;
  options.now_unix_seconds = inputs->now_unix_seconds;
  options.ignore_free_gpus = true;
  StatusOr<std::vector<planner::SweepPoint>> swept =
      planner::Sweep(inputs->job, inputs->inventory, inputs->calibration, *gpu_counts, options);
  if (!swept.ok()) return Fail(swept.status().WithContext(flags.inputs.job_path), err);
  const std::vector<planner::SweepPoint>& points = *swept;

  if (!flags.svg_path.empty()) {
    std::optional<double> deadline_seconds;
    if (inputs->deadline_unix_seconds) {
      deadline_seconds =
          static_cast<double>(*inputs->deadline_unix_seconds - inputs->now_unix_seconds);
    }
    Status written = WriteOutputFile(
        flags.svg_path,
        SweepChartSvg(inputs->job.name, points, deadline_seconds,
                      {inputs->deadline_unix_seconds, inputs->job.objective}),
        "--svg", {flags.inputs.job_path, flags.inputs.cluster_path, flags.inputs.calibration_path});
    if (!written.ok()) return Fail(written, err);
  }

  if (*format == OutputFormat::kTable) {
    WriteSweepTable(inputs->job, points, inputs->now_unix_seconds, inputs->deadline_unix_seconds,
                    out);
  } else {
    WriteMachineOutput(
        SweepJson(inputs->job, points, inputs->now_unix_seconds, inputs->deadline_unix_seconds),
        *format, out);
  }
  return kExitOk;
}

int Run(int argc, char** argv, std::ostream& out, std::ostream& err,
        const std::vector<CommandExtension*>& extensions) {
  CLI::App app(
      "Pacer plans distributed LLM training jobs (TrainJobs) so that they finish by their "
      "deadline at the lowest cost: GPU type and count, tensor/pipeline/data parallelism, "
      "ZeRO stage, micro-batch and gradient accumulation. Also usable as `kubectl pacer`.",
      "pacer");
  app.require_subcommand(1, 1);
  app.footer(std::string(kExitCodesHelp) +
             "\n\nExamples:\n"
             "  pacer plan job.yaml --cluster cluster.yaml\n"
             "  pacer plan job.yaml -o json --now 2026-06-01T00:00:00Z\n"
             "  pacer explain job.yaml\n"
             "  pacer sweep job.yaml --gpus 8..1024 --svg sweep.svg\n"
             "  pacer simulate trace.csv --gpus 256 --policy all\n"
             "  pacer run manifests/examples/quickstart.yaml\n"
             "  pacer inventory --output-file cluster.yaml   # the current kubectl context\n"
             "\nDocumentation: docs/cli.md");
  app.set_version_flag("--version", std::string("pacer ") + PACER_VERSION);

  PlanFlags plan_flags;
  CLI::App* plan = app.add_subcommand(
      "plan",
      "Choose the cheapest (or fastest) layout that meets the job's deadline and print it with "
      "its predicted step time, total time, memory, GPU-hours and cost");
  AddInputOptions(plan, plan_flags.inputs);
  plan->add_option("-o,--output", plan_flags.output, "Output format: table, json or yaml")
      ->type_name("FORMAT")
      ->capture_default_str();
  plan->add_option("--alternatives", plan_flags.alternatives, "Runners-up to list")
      ->type_name("N")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  plan->footer(kExitCodesHelp);

  PlanFlags explain_flags;
  CLI::App* explain = app.add_subcommand(
      "explain",
      "Plan the job and show why: memory and step-time breakdowns as bars, and for each reason "
      "other layouts lost, how many and the best of them");
  AddInputOptions(explain, explain_flags.inputs);
  explain->add_option("-o,--output", explain_flags.output, "Output format: table, json or yaml")
      ->type_name("FORMAT")
      ->capture_default_str();
  explain->footer(kExitCodesHelp);

  SweepFlags sweep_flags;
  CLI::App* sweep = app.add_subcommand(
      "sweep",
      "Predict the best plan at each of several GPU counts (free-GPU limits ignored; counts "
      "outside the job's minGPUs..maxGPUs are listed, not planned): time, GPU-hours and cost "
      "against GPUs, as a table, JSON or an SVG chart");
  AddInputOptions(sweep, sweep_flags.inputs);
  sweep
      ->add_option("--gpus", sweep_flags.gpus,
                   "GPU counts: LO..HI doubles from LO (8..1024 = 8,16,...,1024), LO..HI:STEP "
                   "steps linearly, or a list 8,24,64")
      ->type_name("COUNTS")
      ->required();
  sweep->add_option("--svg", sweep_flags.svg_path, "Also write the chart as an SVG file")
      ->check(NonEmpty())
      ->type_name("FILE");
  sweep->add_option("-o,--output", sweep_flags.output, "Output format: table, json or yaml")
      ->type_name("FORMAT")
      ->capture_default_str();
  sweep->footer(
      "Exit codes:\n"
      "  0  the sweep ran (points without a plan give a reason code; -o json the reason)\n"
      "  1  internal error\n"
      "  2  invalid input: arguments, unreadable or invalid files, a deadline in the past");

  CLI::App* version = app.add_subcommand("version", "Print the version of pacer");
  // Subcommands inherit the app's footer (plan's exit codes and examples):
  // version has its own.
  version->footer("Exit codes:\n  0  the version was printed");

  SimulateCommand simulate;
  std::vector<CommandExtension*> commands = {&simulate};
  commands.insert(commands.end(), extensions.begin(), extensions.end());
  std::vector<CLI::App*> extension_commands;
  for (CommandExtension* extension : commands) {
    CLI::App* command = app.add_subcommand(extension->name(), extension->description());
    extension->AddOptions(command);
    extension_commands.push_back(command);
  }
  std::vector<CLI::App*> all_commands = {plan, explain, sweep};
  all_commands.insert(all_commands.end(), extension_commands.begin(), extension_commands.end());
  all_commands.push_back(version);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError& e) {
    // Once a subcommand parsed, CLI11 names what is wrong with its arguments;
    // but an option before it that the top level does not know is the error
    // (CLI11 complained of the subcommand instead: `pacer --bogus plan x.yaml`
    // said "job is required").
    const std::string message =
        app.get_subcommands().empty() || UnknownLeadingOption(app, argc, argv)
            ? NoSubcommandMessage(argc, argv, all_commands)
            : e.what();
    err << "error: " << message << "\nRun 'pacer --help' for usage.\n";
    return kExitInvalidInput;
  }

  if (*version) {
    out << "pacer " << PACER_VERSION << '\n';
    return kExitOk;
  }
  if (*plan) return RunPlanCommand(plan_flags, /*explain=*/false, out, err);
  if (*explain) return RunPlanCommand(explain_flags, /*explain=*/true, out, err);
  if (*sweep) return RunSweepCommand(sweep_flags, out, err);
  for (size_t i = 0; i < commands.size(); ++i) {
    if (*extension_commands[i]) return commands[i]->Run(out, err);
  }
  return kExitInternalError;  // require_subcommand(1) makes this unreachable
}

}  // namespace

const char* PacerVersion() { return PACER_VERSION; }

int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err,
           const std::vector<CommandExtension*>& extensions) {
  try {
    return Run(argc, argv, out, err, extensions);
  } catch (const std::exception& e) {
    // No exception may escape the CLI; a crash would hide the message.
    err << "error: internal: " << e.what() << '\n';
    return kExitInternalError;
  }
}

}  // namespace pacer::cli
