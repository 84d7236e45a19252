// pacer-worker: runs the training step of a plan on this node, measures it
// and exports the measurements (docs/worker.md).
//
//   pacer-worker [run] [flags]   one process per node; it forks one rank per
//                                local GPU (LOCAL_WORLD_SIZE) and supervises them
//   pacer-worker calibrate       GEMM, memory and all-reduce measurements ->
//                                the calibration JSON `pacer plan` reads
//
// Configuration comes from the environment the controller sets (torchrun
// names plus PACER_*); flags override it. Exit codes: exit_codes.h.
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "app/backend_choice.h"
#include "app/calibrate_command.h"
#include "core/exit_codes.h"
#include "core/runner.h"
#include "core/supervisor.h"
#include "core/worker_config.h"
#include "pacer/planner/gpu_catalog.h"

namespace pw = pacer::worker;

namespace {

struct RunFlags {
  std::optional<std::string> backend;
  std::optional<double> scale;
  std::optional<int64_t> total_steps;
  std::optional<std::string> checkpoint_dir;
  std::optional<int64_t> checkpoint_interval_steps;
  std::optional<int> metrics_port;
  std::optional<double> timeout_seconds;
  // Text, read by ParseSeed: CLI11's own conversion took "-1" as 2^64 - 1.
  std::optional<std::string> seed;
  bool checkpoint_buffers = false;
};

std::optional<pw::Backend> ParseBackend(const std::string& name) {
  for (pw::Backend b : {pw::Backend::kAuto, pw::Backend::kCpu, pw::Backend::kGpu}) {
    if (name == pw::BackendName(b)) return b;
  }
  return std::nullopt;
}

int Run(const RunFlags& flags) {
  pw::RunOptions options;
  if (flags.seed) {
    const pacer::StatusOr<uint64_t> seed = pw::ParseSeed(*flags.seed);
    if (!seed.ok()) {
      std::cerr << "pacer-worker: " << seed.status().message() << "\n";
      return pw::kExitInvalidConfig;
    }
    options.seed = *seed;
  }
  auto config_or = pw::ConfigFromEnvironment([](const char* name) { return std::getenv(name); });
  if (!config_or.ok()) {
    std::cerr << "pacer-worker: " << config_or.status().message() << "\n";
    return pw::kExitInvalidConfig;
  }
  pw::WorkerConfig config = *config_or;
  if (flags.backend) config.backend = *ParseBackend(*flags.backend);
  if (flags.scale) config.scale = *flags.scale;
  if (flags.total_steps) config.total_steps = *flags.total_steps;
  if (flags.checkpoint_dir) config.checkpoint_dir = *flags.checkpoint_dir;
  if (flags.checkpoint_interval_steps) {
    config.checkpoint_interval_steps = *flags.checkpoint_interval_steps;
  }
  if (flags.metrics_port) config.metrics_port = *flags.metrics_port;
  if (flags.timeout_seconds) config.timeout_seconds = *flags.timeout_seconds;
  if (pacer::Status s = pw::ApplyScale(&config); !s.ok()) {
    std::cerr << "pacer-worker: " << s.message() << "\n";
    return pw::kExitInvalidConfig;
  }
  auto backend = pw::ResolveBackend(config.backend, flags.backend ? "--backend" : "PACER_BACKEND");
  if (!backend.ok()) {
    std::cerr << "pacer-worker: " << backend.status().message() << "\n";
    return pw::kExitInvalidConfig;
  }
  config.backend = *backend;

  options.checkpoint_buffers = flags.checkpoint_buffers;
  if (const auto* gpu = pacer::planner::GpuCatalog::BuiltIn().Find(config.gpu_type)) {
    options.catalog_peak_flops = gpu->PeakFlops(config.precision);
  }
  const pw::BackendFactory factory = pw::FactoryFor(*backend);
  // The supervisor forks before any thread or CUDA context exists.
  return pw::RunSupervised(
      config.local_world_size,
      [&](int local_rank) { return pw::RunRank(config, local_rank, factory, options); },
      pw::SupervisorOptionsFor(config));
}

}  // namespace

int main(int argc, char** argv) {
  // A stop signal that arrives while the worker is still starting (parsing
  // its configuration, forking the ranks) stays pending until the supervisor
  // or a rank's StopSignal can act on it, instead of killing the process
  // half-started; RunSupervised unblocks them while it supervises.
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  sigset_t startup_mask;
  pthread_sigmask(SIG_BLOCK, &stops, &startup_mask);

  CLI::App app{"pacer-worker: runs a Pacer plan's training step on this node and exports its "
               "measured step time to Prometheus (configuration from the environment the "
               "controller sets; flags override it)"};
  app.set_version_flag("--version", std::string("pacer-worker ") + PACER_VERSION);
  app.footer(
      "Exit codes: 0 done, 1 internal error, 2 invalid configuration, 3 rendezvous timeout, "
      "4 collective failure, 5 out of memory, 6 stopped by a signal after a checkpoint, "
      "7 checkpoint failure, 8 data loss (checkpoints exist but none is usable). "
      "Documentation: docs/worker.md");
  app.require_subcommand(0, 1);

  RunFlags run_flags;
  CLI::App* run = app.add_subcommand("run", "Run the planned steps (the default)");
  for (CLI::App* target : {&app, run}) {
    target->add_option("--backend", run_flags.backend, "auto, cpu or gpu (PACER_BACKEND)")
        ->check(CLI::IsMember({"auto", "cpu", "gpu"}));
    target->add_option("--scale", run_flags.scale,
                       "Shrink the model by this factor in (0, 1] for CPU runs (PACER_SCALE)")
        ->check(CLI::Range(1e-6, 1.0));
    target->add_option("--total-steps", run_flags.total_steps, "Steps to run (PACER_TOTAL_STEPS)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
    target->add_option("--checkpoint-dir", run_flags.checkpoint_dir,
                       "Where checkpoints go (PACER_CHECKPOINT_DIR)");
    target->add_option("--checkpoint-interval", run_flags.checkpoint_interval_steps,
                       "Steps between checkpoints (PACER_CHECKPOINT_INTERVAL_STEPS)")
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
    target->add_option("--metrics-port", run_flags.metrics_port,
                       "First /metrics port; local rank r uses port + r (PACER_METRICS_PORT)")
        ->check(CLI::Range(0, 65535));
    target->add_option("--timeout", run_flags.timeout_seconds,
                       "Rendezvous and collective timeout, seconds (PACER_TIMEOUT_SECONDS)")
        ->check(CLI::Range(1.0, 86400.0));
    target->add_option("--seed", run_flags.seed,
                       "Seed of the synthetic data and weights, a decimal integer in "
                       "[0, 18446744073709551615] (default 1234)");
    target->add_flag("--checkpoint-buffers", run_flags.checkpoint_buffers,
                     "Also store weights and optimizer state in checkpoints");
  }

  pw::CalibrateFlags calibrate_flags;
  std::string calibrate_backend = "auto";
  CLI::App* calibrate = app.add_subcommand(
      "calibrate", "Measure GEMM TFLOP/s, memory and all-reduce bandwidth; write calibration JSON");
  calibrate->add_option("--backend", calibrate_backend, "auto, cpu or gpu")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}));
  calibrate->add_option("--gpu-type", calibrate_flags.gpu_type,
                        "Catalog name to key the JSON by (e.g. H100-SXM); needed for "
                        "gemmEfficiency");
  calibrate->add_option("-o,--output", calibrate_flags.output_path, "Write the JSON here");
  calibrate->add_option("--cpu-ranks", calibrate_flags.cpu_ranks,
                        "Ranks in the CPU all-reduce measurement")
      ->check(CLI::Range(1, 64));
  calibrate->add_flag("--quick", calibrate_flags.quick, "Fewer sizes and iterations");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : pw::kExitInvalidConfig;
  }
  if (calibrate->parsed()) {
    // Calibration has no checkpoint to take: Ctrl-C ends it at once.
    pthread_sigmask(SIG_SETMASK, &startup_mask, nullptr);
    calibrate_flags.backend = *ParseBackend(calibrate_backend);
    return pw::RunCalibrate(calibrate_flags, std::cout, std::cerr);
  }
  return Run(run_flags);
}
