#include "local/run_command.h"

#include <poll.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <optional>
#include <sstream>

#include "cli/finite_range.h"
#include "cli/inputs.h"
#include "cli/non_empty.h"
#include "core/clock.h"
#include "local/local_inventory.h"
#include "local/local_store.h"
#include "local/process_launcher.h"
#include "local/progress_line.h"
#include "local/scraped_metrics.h"
#include "local/terminal_width.h"
#include "local/work_dir.h"
#include "pacer/planner/job_parser.h"
#include "pacer/planner/units.h"
#include "pacer/strings.h"
#include "reconcile/job_object.h"
#include "reconcile/reconciler.h"

namespace pacer::controller {
namespace {

// Stop requests: the first (any of SIGINT, SIGTERM, SIGHUP) stops at a
// checkpoint; a second Ctrl-C (SIGINT) force-quits, pressed at least
// kRepeatedStopWindowMs after the first.
std::atomic<int> g_interrupts{0};
std::atomic<int64_t> g_first_stop_ms{0};                   // CLOCK_MONOTONIC
static_assert(std::atomic<int64_t>::is_always_lock_free);  // touched in the handler

// One stop delivered twice arrives within milliseconds: `timeout` signals
// its child and then its own process group, and wrappers forward a
// terminal's Ctrl-C that the terminal also sent to the whole group. Taken
// for a second press, it force-quit 2 runs in 8 with their workers killed
// before the checkpoint. (The worker's supervisor has the same window.)
constexpr int64_t kRepeatedStopWindowMs = 1000;

extern "C" void OnInterrupt(int signal) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  const int64_t now_ms = static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
  int none = 0;
  if (g_interrupts.compare_exchange_strong(none, 1)) {
    g_first_stop_ms.store(now_ms);
    return;
  }
  // SIGTERM and SIGHUP ask for the clean stop and never escalate:
  // escalating a programmatic stop is SIGKILL's job.
  if (signal != SIGINT) return;
  if (now_ms - g_first_stop_ms.load() >= kRepeatedStopWindowMs) g_interrupts.fetch_add(1);
}

// Waits up to `ms`, returning early on Ctrl-C. The loop refreshes the
// progress line at this pace; nothing waits on another thread here.
void WaitInterruptibly(int64_t ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (g_interrupts.load() == 0 && std::chrono::steady_clock::now() < until) {
    ::poll(nullptr, 0, 50);
  }
}

// The worker program and where it came from, for the message when it
// cannot be started.
struct WorkerBinary {
  std::string path;
  enum class Source { kFlag, kEnvironment, kSearch } source;
};

WorkerBinary ChooseWorkerBinary(const std::string& flag) {
  if (!flag.empty()) return {flag, WorkerBinary::Source::kFlag};
  if (const char* env = std::getenv("PACER_WORKER_BINARY"); env != nullptr && *env != '\0') {
    return {env, WorkerBinary::Source::kEnvironment};
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // Installed side by side, or the build tree (build/controller/pacer and
    // build/worker/pacer-worker).
    for (const auto& candidate : {self.parent_path() / "pacer-worker",
                                  self.parent_path().parent_path() / "worker" / "pacer-worker"}) {
      if (std::filesystem::exists(candidate, ec)) {
        return {candidate.string(), WorkerBinary::Source::kSearch};
      }
    }
  }
  // Installed elsewhere on PATH: spawned by its full path (posix_spawn does
  // not search PATH; a bare name would be looked for in the working directory).
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    for (const std::string_view dir : SplitOn(path, ':')) {
      if (dir.empty()) continue;
      const std::filesystem::path candidate = std::filesystem::path(dir) / "pacer-worker";
      if (::access(candidate.c_str(), X_OK) == 0) {
        return {candidate.string(), WorkerBinary::Source::kSearch};
      }
    }
  }
  return {"pacer-worker", WorkerBinary::Source::kSearch};
}

// Why `worker` cannot be started (`problem`, from CheckWorkerBinary), and
// what to do, by where it came from.
std::string WorkerBinaryError(const WorkerBinary& worker, const Status& problem) {
  switch (worker.source) {
    case WorkerBinary::Source::kFlag:
      return "--worker-binary " + problem.message() +
             "; give the path of the pacer-worker program (the build tree's is "
             "build/worker/pacer-worker), or leave the flag out to use the one beside pacer or "
             "on PATH";
    case WorkerBinary::Source::kEnvironment:
      return "$PACER_WORKER_BINARY " + problem.message() +
             "; set it to the path of the pacer-worker program, unset it to use the one beside "
             "pacer or on PATH, or give --worker-binary";
    case WorkerBinary::Source::kSearch:
      break;
  }
  return "cannot start the pacer-worker program (" + problem.message() +
         "; looked for beside pacer, in ../worker/ beside it and on PATH); build it "
         "(scripts/run-local.sh builds pacer and pacer-worker), or give its path with "
         "--worker-binary";
}

int ExitCodeFor(Phase phase, const JobView& view) {
  switch (phase) {
    case Phase::kSucceeded:
      return 0;
    case Phase::kInfeasible:
      // 3 is the deadline's; a model no layout of this machine holds has no
      // deadline to blame (4: this machine cannot run it at all).
      for (const Condition& c : view.conditions) {
        if (c.type == kConditionInfeasible && c.status == kConditionTrue &&
            c.reason == "NoLayoutFits") {
          return 4;
        }
      }
      return 3;
    case Phase::kFailed:
      for (const Condition& c : view.conditions) {
        if (c.type == kConditionInvalidSpec && c.status == kConditionTrue) return 2;
      }
      return 1;
    default:
      return 1;
  }
}

// Why the reconciler left the job Pending without a plan (Planned=False:
// no GPU of the requested type, or not enough of them), if it did.
std::optional<std::string> CannotRunHere(const JobView& view) {
  for (const Condition& c : view.conditions) {
    if (c.type == kConditionPlanned && c.status == kConditionFalse) {
      return c.message + " (" + c.reason + ")";
    }
  }
  return std::nullopt;
}

}  // namespace

const char* RunCommand::description() const {
  return "Run a TrainJob on this machine (local mode): plan it for the local GPUs or CPU, run "
         "pacer-worker processes, show live progress and ETA against the deadline, and re-plan "
         "from measured step time. Ctrl-C stops at a checkpoint; run again to resume";
}

void RunCommand::AddOptions(CLI::App* command) {
  command->add_option("job", options_.job_path, "The TrainJob YAML file")
      ->required()
      ->type_name("FILE");
  command
      ->add_option("--worker-binary", options_.worker_binary,
                   "The pacer-worker program (default: $PACER_WORKER_BINARY, else next to "
                   "pacer, else on PATH)")
      ->type_name("PATH")
      ->check(cli::NonEmpty());
  command
      ->add_option("--work-dir", options_.work_dir,
                   "Checkpoints and logs (default: .pacer/<namespace>/<name>)")
      ->type_name("DIR")
      ->check(cli::NonEmpty());
  command->add_option("--backend", options_.backend, "auto, cpu or gpu")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}))
      ->capture_default_str();
  command
      ->add_option("--cpu-devices", options_.cpu_devices,
                   "CPU ranks the planner may use (0 = min(cores, 4))")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  command
      ->add_option("--cpu-tflops", options_.cpu_tflops,
                   "Peak fp32 TFLOP/s of one CPU rank, for the planner's prediction")
      ->check(cli::FiniteRange(1e-4, 100.0))
      ->capture_default_str();
  command
      ->add_option("--progress", options_.progress,
                   "auto (a live line on a terminal, else one line per change), plain, none")
      ->check(CLI::IsMember({"auto", "plain", "none"}))
      ->capture_default_str();
  command
      ->add_option("--max-restarts", options_.max_restarts,
                   "Worker failures survived by restarting from the checkpoint")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  command->footer(
      "Exit codes:\n"
      "  0    the job finished\n"
      "  1    the job failed (or an internal error)\n"
      "  2    invalid input: arguments or the TrainJob file\n"
      "  3    the deadline cannot be met on this machine (the reason and the fix are printed)\n"
      "  4    this machine cannot run the job at all (e.g. it asks for GPUs this machine\n"
      "       does not have)\n"
      "  130  stopped by Ctrl-C at a checkpoint (run again to resume)");
}

StatusOr<std::string> ChooseLocalBackend(const std::string& requested, bool gpus_found,
                                         const std::string& uncataloged_gpus,
                                         bool gpu_backend_installed, const std::string& plugin_path,
                                         std::string* note) {
  if (requested == "cpu") return std::string("cpu");
  if (!gpus_found && !uncataloged_gpus.empty()) {
    const std::string why = "this machine's NVIDIA GPUs (" + uncataloged_gpus +
                            ") are not in Pacer's GPU catalog, so no plan can be made for them "
                            "(docs/controller.md lists the GPU models it knows)";
    if (requested == "gpu") {
      return InvalidArgumentError("--backend gpu: " + why +
                                  "; run with --backend cpu (or auto) to train on the CPU");
    }
    *note = why + ": training on the CPU";
    return std::string("cpu");
  }
  if (!gpus_found && requested == "auto") return std::string("cpu");
  if (requested == "gpu" && !gpus_found) {
    return InvalidArgumentError("--backend gpu: no NVIDIA GPU found on this machine");
  }
  if (gpu_backend_installed) return std::string("gpu");
  if (requested == "gpu") {
    return InvalidArgumentError("--backend gpu: pacer-worker's GPU backend " + plugin_path +
                                " is missing (built without nvcc?); build with the CUDA "
                                "toolkit installed, or use --backend cpu");
  }
  *note = "this machine has NVIDIA GPUs, but pacer-worker's GPU backend " + plugin_path +
          " is missing (built without nvcc?): training on the CPU";
  return std::string("cpu");
}

ReconcilerOptions LocalReconcilerOptions(int max_restarts) {
  ReconcilerOptions options;
  // Start-up here is a process spawn, the Gloo rendezvous and the model's
  // initialisation (about 3 s for the quickstart), not a cluster's 300 s of
  // pod scheduling: planned with that, a 3-minute job of 2 minutes' work was
  // called infeasible, and the first ETA was 5 minutes late.
  options.replan.constants.startup_seconds = kLocalStartupSeconds;
  // A relaunch costs that start-up, not a pod's: the cluster's ten-minute
  // margin and interval between re-plans (twice its start-up) meant a job
  // with less than about ten minutes left never re-planned, however late.
  options.replan.min_improvement_seconds = 2 * kLocalStartupSeconds;
  options.replan.min_interval_seconds = 4 * kLocalStartupSeconds;
  options.use_finalizer = false;
  options.max_restarts = max_restarts;
  options.transition_poll = std::chrono::milliseconds(500);
  options.pending_retry = std::chrono::milliseconds(5000);
  return options;
}

std::string DefaultWorkDir(const std::string& namespace_name, const std::string& name) {
  return ".pacer/" + namespace_name + "/" + name;
}

int RunLocal(const RunOptions& options, std::ostream& out, std::ostream& err) {
  // The arguments first, before the file is planned: a worker that cannot
  // start failed only at the first launch, after the plan, as six retried
  // warnings and exit 1.
  const WorkerBinary worker = ChooseWorkerBinary(options.worker_binary);
  if (const Status runnable = CheckWorkerBinary(worker.path); !runnable.ok()) {
    err << "error: " << WorkerBinaryError(worker, runnable) << '\n';
    return 2;
  }
  // Read as `pacer plan` reads it (cli::ReadTrainJob), so that the two
  // refuse the same files; the planner's parser says what is wrong.
  StatusOr<cli::TrainJobFile> file = cli::ReadTrainJob(options.job_path);
  if (!file.ok()) {
    err << "error: " << file.status().message() << '\n';
    return 2;
  }
  const planner::JobSpec& parsed = file->spec;
  nlohmann::json& object = file->object;
  // A new job, as `kubectl apply` makes one (AsNewJob): before the
  // creation time below is read.
  AsNewJob(object);
  nlohmann::json& metadata = object["metadata"];
  if (!metadata.is_object()) metadata = nlohmann::json::object();
  SystemClock& clock = SystemClock::Default();
  // The run uses the name the parser validated: a plain `name: 123` reads as
  // a number in JSON, and the reconciler takes names as strings.
  metadata["name"] = parsed.name;
  metadata["namespace"] = parsed.namespace_name;
  const std::string work_dir = !options.work_dir.empty()
                                   ? options.work_dir
                                   : DefaultWorkDir(parsed.namespace_name, parsed.name);
  // Two runs of one job would share checkpoints and logs: one at a time.
  // The workers hold the lock too: those of a run killed with SIGKILL stop
  // at a checkpoint within their stop grace (25 s) once they see it gone,
  // and this run waits for them rather than start beside them.
  OrphanedWorkersWait orphans;
  orphans.timeout = std::chrono::seconds(60);
  orphans.on_wait = [&err](const std::string& message) { err << "pacer run: " << message << '\n'; };
  StatusOr<WorkDirLock> lock = WorkDirLock::Acquire(work_dir, orphans);
  if (!lock.ok()) {
    err << "error: " << lock.status().message() << '\n';
    // A path that is no directory is a bad argument (2); another run
    // holding the lock is not.
    return lock.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  LocalInventoryOptions inventory_options;
  inventory_options.cpu_devices = options.cpu_devices;
  inventory_options.cpu_tflops_per_device = options.cpu_tflops;
  inventory_options.use_gpus = options.backend != "cpu";
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    inventory_options.cuda_visible_devices = visible;
  }
  std::optional<LocalInventory> inventory_or;
  inventory_or.emplace(inventory_options);
  // The GPU backend the worker loads (worker/app/backend_choice.cc): the
  // PACER_GPU_PLUGIN file, else the one beside pacer-worker.
  // Beside the program itself, as the worker resolves /proc/self/exe: a
  // symlinked pacer-worker's plugin is beside its target.
  std::error_code resolve_error;
  std::filesystem::path worker_program = std::filesystem::canonical(worker.path, resolve_error);
  if (resolve_error) worker_program = worker.path;
  std::string plugin_path = (worker_program.parent_path() / "libpacer_worker_gpu.so").string();
  if (const char* env = std::getenv("PACER_GPU_PLUGIN"); env != nullptr && *env != '\0') {
    plugin_path = env;
  }
  std::string backend_note;
  StatusOr<std::string> backend = ChooseLocalBackend(
      options.backend, inventory_or->uses_gpus(), inventory_or->uncataloged_gpus(),
      ::access(plugin_path.c_str(), R_OK) == 0, plugin_path, &backend_note);
  if (!backend.ok()) {
    err << "error: " << backend.status().message();
    if (!inventory_or->uses_gpus() && inventory_or->uncataloged_gpus().empty()) {
      err << " (nothing under " << inventory_options.proc_nvidia_dir;
      if (inventory_options.cuda_visible_devices) {
        err << " that CUDA_VISIBLE_DEVICES=\"" << *inventory_options.cuda_visible_devices
            << "\" leaves visible";
      }
      err << "); run with --backend cpu (or auto, the default) to train on the CPU";
    }
    err << '\n';
    return 2;
  }
  if (!backend_note.empty()) err << "pacer run: " << backend_note << '\n';
  if (*backend == "cpu" && inventory_or->uses_gpus()) {
    inventory_options.use_gpus = false;
    inventory_or.emplace(inventory_options);
  }
  LocalInventory& inventory = *inventory_or;

  // A run that resumes a checkpoint continues a job that has run: past its
  // deadline it runs on late (as in a cluster) instead of exiting 2 with
  // "in the past" beside the checkpoints.
  const std::string checkpoints = work_dir + "/checkpoints";
  const std::optional<int64_t> resume_step = ResumableCheckpointStep(checkpoints, parsed.name);
  // An earlier run that kept no checkpoint left nothing to resume: this run
  // starts from step 0, as that run said it would, and its maxDuration from
  // now. Kept, the earlier start put the unchanged job "in the past" (exit 2).
  if (!resume_step) ForgetStart(work_dir);
  // The checkpoints count steps of the batch and sequence length they were
  // trained at: resumed with another, their steps meant other samples (the
  // cluster refuses the same edit, StepUnitChanged).
  const PersistedState::StepUnit step_unit{parsed.training.global_batch_size,
                                           parsed.model.sequence_length};
  if (resume_step) {
    PersistedState recorded;
    recorded.step_unit = ReadStepUnit(work_dir);
    recorded.steps_completed = *resume_step;
    if (std::optional<std::string> changed = StepUnitChange(recorded, parsed)) {
      err << "error: " << options.job_path << ": " << StepUnitChangedMessage(*changed, *resume_step)
          << " Set it back (the run resumes from its checkpoint), or give another --work-dir "
             "(or remove "
          << checkpoints << ") to train the new batch from step 0\n";
      return 2;
    }
  }
  if (!RecordStepUnit(work_dir, step_unit)) {
    err << "warning: cannot record the step unit in " << work_dir
        << "/step-unit; a later run cannot check that it resumes at the same batch\n";
  }
  // maxDuration counts from the job's first start, kept across Ctrl-C and
  // resume (a resumed run does not get a fresh deadline).
  bool start_recorded_now = false;
  if (!metadata.contains("creationTimestamp")) {
    metadata["creationTimestamp"] = planner::FormatRfc3339(
        FirstStartUnixSeconds(work_dir, clock.WallUnixSeconds(), &start_recorded_now));
  }

  const bool terminal = ::isatty(STDOUT_FILENO) == 1 && &out == &std::cout;
  ProgressLine::Mode mode = ProgressLine::Mode::kPlain;
  if (options.progress == "none") mode = ProgressLine::Mode::kNone;
  if (options.progress == "auto" && terminal) mode = ProgressLine::Mode::kLive;
  std::optional<TerminalWidth> width;
  if (mode == ProgressLine::Mode::kLive) width.emplace(STDOUT_FILENO);
  ProgressLine progress(out, mode, width ? &*width : nullptr);

  LocalJobStore store(object, [&progress](const LocalEvent& e) { progress.Event(e); });
  const std::string key = store.key();
  const JobRef ref = JobRefOf(store.Snapshot());

  ProcessLauncherOptions launcher_options;
  launcher_options.worker_binary = worker.path;
  launcher_options.work_dir = work_dir;
  launcher_options.backend = inventory.uses_gpus() ? "gpu" : "cpu";
  launcher_options.inherited_fds = {lock->fd()};
  ProcessLauncher launcher(launcher_options);
  ScrapedMetricsSource metrics(
      [&launcher](const JobRef& job) { return launcher.MetricsPorts(job); },
      HttpScraper(std::chrono::milliseconds(2000)));

  ReconcilerOptions reconciler_options = LocalReconcilerOptions(options.max_restarts);
  reconciler_options.resumes_earlier_run = resume_step.has_value();
  Reconciler reconciler({&store, &launcher, &metrics, &inventory, &clock}, reconciler_options);

  out << "pacer run: " << key << " on " << inventory.Describe() << "\n"
      << "  worker " << launcher_options.worker_binary << "\n"
      << "  logs and checkpoints in " << launcher_options.work_dir << "\n";
  if (!parsed.worker.image.empty() || !parsed.worker.command.empty()) {
    // spec.worker.env is passed on; an image and its command are a cluster's.
    out << "  note: spec.worker.image and spec.worker.command apply in a cluster; pacer run "
           "starts the worker above (--worker-binary)\n";
  }
  if (resume_step) {
    out << "  resuming from step " << *resume_step << " (checkpoint in " << checkpoints
        << "); maxDuration counts from the first start, "
        << metadata.value("creationTimestamp", std::string()) << "\n";
  }
  out.flush();

  // A hang-up (the terminal or ssh session gone) stops the workers at a
  // checkpoint as Ctrl-C does, and output to a reader that is gone (`| tee`
  // ended by the same Ctrl-C) is lost rather than fatal: pacer run dying by
  // SIGHUP or SIGPIPE left its workers training on, unseen.
  struct sigaction action {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  struct sigaction previous_int {
  }, previous_term{}, previous_hup{}, previous_pipe{};
  g_interrupts.store(0);
  sigaction(SIGINT, &action, &previous_int);
  sigaction(SIGTERM, &action, &previous_term);
  // Under nohup (SIGHUP ignored) a hang-up is meant not to stop the run.
  sigaction(SIGHUP, nullptr, &previous_hup);
  if (previous_hup.sa_handler != SIG_IGN) sigaction(SIGHUP, &action, nullptr);
  sigaction(SIGPIPE, &ignore, &previous_pipe);
  // The caller's handlers come back however this returns, and the last
  // message is out before they do: written to a pipe (`| tee`, a test)
  // stdout is buffered until exit, and a Ctrl-C pressed again after a
  // force-quit then killed the process (SIGINT's default again) with the
  // "force-quit: ..." line still in the buffer, unseen.
  struct Restore {
    std::function<void()> undo;
    ~Restore() { undo(); }
  } restore{[&]() {
    out.flush();
    err.flush();
    sigaction(SIGINT, &previous_int, nullptr);
    sigaction(SIGTERM, &previous_term, nullptr);
    sigaction(SIGHUP, &previous_hup, nullptr);
    sigaction(SIGPIPE, &previous_pipe, nullptr);
  }};
  // A run that launched no worker leaves no start behind: a later run of
  // the job would count its maxDuration from this one.
  auto forget_unused_start = [&]() {
    const std::optional<JobView> view = reconciler.View(key);
    if (start_recorded_now && (!view || view->attempt == 0)) ForgetStart(work_dir);
  };

  const int64_t started = clock.WallUnixSeconds();
  RunSummary summary;
  int consecutive_errors = 0;
  int exit_code = 1;
  while (true) {
    if (g_interrupts.load() > 0) {
      progress.Message("stopping the workers at a checkpoint (Ctrl-C again to force-quit)...");
      (void)launcher.Stop(ref, StopMode::kGraceful);
      // Wait for every worker to checkpoint and exit.
      for (int i = 0; i < 1200; ++i) {
        if (g_interrupts.load() > 1) {
          // A second Ctrl-C: the user will not wait for the checkpoint.
          (void)launcher.Stop(ref, StopMode::kRemove);
          progress.Finish();
          if (std::optional<int64_t> step = ResumableCheckpointStep(checkpoints, parsed.name)) {
            out << "force-quit: workers killed; the next run resumes from the last checkpoint "
                   "written (step "
                << *step << ")\n";
          } else {
            out << "force-quit: workers killed before any checkpoint was written; the next run "
                   "starts from step 0\n";
          }
          forget_unused_start();
          return 130;
        }
        StatusOr<std::optional<WorkerGroup>> group = launcher.Observe(ref);
        if (!group.ok() || !group->has_value()) break;
        const WorkerGroup& g = **group;
        if (g.Count(WorkerPhase::kRunning) + g.Count(WorkerPhase::kPending) == 0) break;
        ::poll(nullptr, 0, 50);
      }
      // The stop came as the workers finished: every one exited 0 after its
      // last step. The job is done, not stopped (it was reported "stopped
      // with a checkpoint", exit 130, and the next run trained it again).
      if (StatusOr<std::optional<WorkerGroup>> ended = launcher.Observe(ref);
          ended.ok() && ended->has_value() && (*ended)->expected_workers > 0 &&
          (*ended)->Count(WorkerPhase::kSucceeded) == (*ended)->expected_workers &&
          g_interrupts.load() == 1) {
        progress.Message("the workers had finished every step before the stop");
        g_interrupts.store(0);
        continue;
      }
      // A worker that ended with neither 6 (stopped at its checkpoint) nor 0
      // did not write the stop's checkpoint (7: the volume full or read-only
      // at that moment): the steps since the last one are lost. It was
      // reported as a clean stop at the older checkpoint, without a word.
      std::optional<WorkerState> failed_stop;
      if (StatusOr<std::optional<WorkerGroup>> ended = launcher.Observe(ref);
          ended.ok() && ended->has_value()) {
        for (const WorkerState& w : (*ended)->workers) {
          if (w.exit_code && *w.exit_code != 6 && *w.exit_code != 0) {
            failed_stop = w;
            break;
          }
        }
      }
      (void)launcher.Stop(ref, StopMode::kRemove);
      std::optional<JobView> view = reconciler.View(key);
      progress.Finish();
      // The step the workers agreed to stop at and checkpointed (they finish
      // the step they are in): the step the next run resumes from, not the
      // last progress scraped before Ctrl-C.
      const std::optional<int64_t> stopped = ResumableCheckpointStep(checkpoints, parsed.name);
      if (failed_stop) {
        err << "error: the stop's checkpoint was not written: worker " << failed_stop->node_rank
            << " exited with code " << *failed_stop->exit_code
            << (*failed_stop->exit_code == 7 ? " (checkpoint failure: the volume is full, "
                                               "read-only or failing)"
                                             : "")
            << ": " << failed_stop->message << "\n";
        if (stopped) {
          err << "the next run resumes from step " << *stopped
              << " (the last checkpoint every rank wrote); the steps trained since are lost. "
                 "Fix what the log names (free space in "
              << checkpoints << ") before running the same command again\n";
        } else {
          err << "no checkpoint was written: the next run starts from step 0. Fix what the log "
                 "names (free space in "
              << checkpoints << ") before running the same command again\n";
        }
        forget_unused_start();
        return 1;
      }
      if (stopped) {
        out << "stopped at step " << *stopped << " with a checkpoint in " << checkpoints
            << "; run the same command again to resume\n";
      } else {
        out << "stopped at step " << (view ? view->steps_completed : 0)
            << " before any checkpoint was written; the next run starts from step 0\n";
      }
      forget_unused_start();
      return 130;
    }
    ReconcileResult result = reconciler.Reconcile(key);
    int64_t wait_ms = 1000;
    if (!result.status.ok()) {
      // The message only: its code (UNAVAILABLE...) is the reconciler's, not
      // the user's.
      progress.Message("warning: " + result.status.message());
      if (!result.status.retryable() || ++consecutive_errors > 5) {
        progress.Finish();
        err << "error: " << result.status.message() << '\n';
        (void)launcher.Stop(ref, StopMode::kRemove);
        forget_unused_start();
        return 1;
      }
    } else {
      consecutive_errors = 0;
      if (result.requeue_after) wait_ms = std::min<int64_t>(wait_ms, result.requeue_after->count());
    }
    std::optional<JobView> view = reconciler.View(key);
    if (view && view->phase == Phase::kPending) {
      // In a cluster a job waits for GPUs to be added or freed; this machine
      // is all there is and nothing else runs on it, so it would wait forever.
      if (const std::optional<std::string> why = CannotRunHere(*view)) {
        progress.Finish();
        err << "error: this machine (" << inventory.Describe() << ") cannot run " << key << ": "
            << *why
            << "\n  local mode plans for this machine only: run the job in a cluster "
               "(kubectl apply -f "
            << options.job_path
            << "), or change its spec.resources (GPU types, GPU counts) to fit this machine\n";
        (void)launcher.Stop(ref, StopMode::kRemove);
        forget_unused_start();
        return 4;
      }
    }
    if (view) {
      summary.Observe(*view, clock.WallUnixSeconds());
      progress.Update(*view, clock.WallUnixSeconds());
      if (view->phase == Phase::kSucceeded || view->phase == Phase::kFailed ||
          view->phase == Phase::kInfeasible) {
        progress.Finish();
        summary.Print(*view, store.Snapshot(), started, clock.WallUnixSeconds(),
                      launcher_options.work_dir, metrics.RunMeanStepSeconds(), out);
        exit_code = ExitCodeFor(view->phase, *view);
        ForgetStart(work_dir);  // the job ended: a next run is a new job
        if (view->phase == Phase::kSucceeded) {
          // ... and trains from step 0: left in place, the last periodic
          // checkpoint made the next run resume there and train only the
          // finished job's last steps again.
          StatusOr<std::string> moved = SetAsideFinishedCheckpoints(work_dir);
          if (!moved.ok()) {
            err << "warning: " << moved.status().message() << '\n';
          } else if (!moved->empty()) {
            out << "  checkpoints  " << *moved << " (the next run trains from step 0)\n";
          }
        }
        break;
      }
    }
    WaitInterruptibly(std::max<int64_t>(wait_ms, 100));
  }
  (void)launcher.Stop(ref, StopMode::kRemove);
  return exit_code;
}

}  // namespace pacer::controller
