// pacer-controller: the in-cluster TrainJob controller (docs/controller.md,
// docs/operations.md). Flags follow controller-runtime's names.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "cli/finite_range.h"
#include "daemon/controller_manager.h"
#include "observe/log.h"

namespace {

sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// --prometheus-url: empty (no Prometheus), or an http(s) URL without user
// information. Pacer sends no credentials to Prometheus
// (docs/operations.md), and the URL is written into TrainJob conditions and
// Events when Prometheus fails: a password in it would be published in every
// job's namespace. The message never repeats the value.
CLI::Validator PrometheusUrl() {
  return CLI::Validator(
      [](std::string& url) -> std::string {
        if (url.empty()) return "";
        if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
          return "must start with http:// or https://, e.g. "
                 "http://prometheus-operated.monitoring:9090";
        }
        if (url.find('@') != std::string::npos) {
          return "must not hold user information (user:password@): Pacer sends no credentials "
                 "to Prometheus, and the URL appears in TrainJob conditions; put an "
                 "authenticating proxy in front of Prometheus instead";
        }
        if (url.find_first_of(" \t\r\n") != std::string::npos) return "must not hold whitespace";
        return "";
      },
      "URL");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pacer::controller;
  ManagerOptions options;
  std::string kubeconfig, context, log_format = "text", log_level = "info";
  bool leader_elect = true;

  CLI::App app("pacer-controller: plans, launches, watches and re-plans TrainJobs",
               "pacer-controller");
  // A flag given twice takes its last value, as kube-style flags do: the
  // chart's controller.extraArgs come after the flags it renders and
  // override them (CLI11's default, Throw, made `--log-level=debug` there an
  // exit 2 and a crash loop). Set before any option is added: the defaults
  // are copied into each option when it is created. Every value is still
  // validated, the overridden ones too. No option here is a vector (TakeLast
  // would keep all of a vector's values anyway); flags are TakeLast already.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--kubeconfig", kubeconfig,
                 "Kubeconfig file (default, as kubectl: $KUBECONFIG, ~/.kube/config, then the "
                 "in-cluster service account)")
      ->type_name("FILE");
  app.add_option("--context", context, "Kubeconfig context (default: its current-context)");
  app.add_option("--namespace", options.watch_namespace, "Watch TrainJobs in this namespace only");
  app.add_option("--prometheus-url", options.prometheus_url,
                 "Prometheus HTTP API base URL, e.g. http://prometheus-operated.monitoring:9090")
      ->check(PrometheusUrl());
  app.add_option("--workers", options.workers, "Concurrent reconciles")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--max-restarts", options.reconciler.max_restarts,
                 "Worker failures a job survives by restarting from its checkpoint")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  app.add_option("--replan-min-improvement-seconds",
                 options.reconciler.replan.min_improvement_seconds,
                 "A relaunch must gain at least this much (and 10 % of the remaining time)")
      ->check(pacer::cli::FiniteRange(0.0, 1e7))
      ->capture_default_str();
  app.add_option("--replan-min-interval-seconds", options.reconciler.replan.min_interval_seconds,
                 "Hysteresis: at least this long between two re-plans of a job")
      ->check(pacer::cli::FiniteRange(0.0, 1e7))
      ->capture_default_str();
  app.add_option("--relaunch-seconds", options.reconciler.replan.constants.startup_seconds,
                 "What a (re)launch costs before the first step: pod scheduling, image pull, "
                 "rendezvous, checkpoint load; the planner adds it to every plan")
      ->check(pacer::cli::FiniteRange(0.0, 1e6))
      ->capture_default_str();
  app.add_option("--pod-termination-grace-seconds", options.pods.termination_grace_seconds,
                 "Time a SIGTERM'd worker has to write its checkpoint")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--worker-image", options.pods.default_worker_image,
                 "Worker image of TrainJobs that set no spec.worker.image")
      ->check([](const std::string& image) {
        return image.empty() ? std::string("must not be empty") : std::string();
      })
      ->capture_default_str();
  app.add_option("--worker-cpu-per-gpu", options.pods.cpu_per_gpu,
                 "Host CPUs a worker pod requests per GPU it holds (0: no request)")
      ->check(pacer::cli::FiniteRange(0.0, 1024.0))
      ->capture_default_str();
  app.add_option("--worker-memory-per-gpu-gib", options.pods.memory_per_gpu_gib,
                 "Host memory (GiB) a worker pod requests per GPU it holds, also the bound of "
                 "its /dev/shm (0: no request)")
      ->check(CLI::Range(int64_t{0}, int64_t{16384}))
      ->capture_default_str();
  app.add_option("--worker-service-account", options.pods.service_account,
                 "ServiceAccount of worker pods (default: the namespace's default; workers get "
                 "no API token either way)");
  int64_t pending_retry_seconds = 30;
  app.add_option("--pending-retry-seconds", pending_retry_seconds,
                 "How often a job waiting for GPUs is planned again when nothing happens; "
                 "GPUs being freed wake waiting jobs at once")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  int64_t gang_completion_seconds = 60;
  app.add_option("--gang-completion-seconds", gang_completion_seconds,
                 "How long a launched gang may stay incomplete (fewer worker pods than its "
                 "plan, e.g. left by a controller killed while creating them) before it is "
                 "removed and launched again")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  int64_t gang_scheduling_seconds = 300;
  app.add_option("--gang-scheduling-seconds", gang_scheduling_seconds,
                 "How long a launched gang may have worker pods no node holds (the GPUs they "
                 "were planned on were taken meanwhile) before it is removed and planned "
                 "again; 0: never (pods wait for the cluster to grow)")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  std::string scheduling = "deadline";
  app.add_option("--scheduling", scheduling,
                 "deadline: one pass over all TrainJobs admits jobs only if every admitted "
                 "deadline still holds and sizes them together (docs/scheduling.md); "
                 "fifo: each job is planned alone on the GPUs free when it arrives")
      ->check(CLI::IsMember({"deadline", "fifo"}))
      ->capture_default_str();
  app.add_option("--scheduling-interval-seconds", options.scheduler.decision_interval_seconds,
                 "Longest time between two scheduler passes (events trigger them sooner)")
      ->check(pacer::cli::FiniteRange(1.0, 3600.0))
      ->capture_default_str();
  app.add_flag("--leader-elect,!--no-leader-elect", leader_elect,
               "Lease-based leader election (run several replicas; one acts)")
      ->capture_default_str();
  app.add_option("--leader-election-namespace", options.lease_namespace,
                 "The Lease's namespace (default: the pod's own in a cluster, else pacer-system)");
  app.add_option("--leader-election-id", options.lease_name, "The Lease's name")
      ->capture_default_str();
  app.add_option("--identity", options.identity, "This replica's name (default: host_pid)");
  app.add_option("--bind-address", options.bind_address, "Address of /metrics and the probes")
      ->capture_default_str();
  app.add_option("--metrics-port", options.metrics_port, "/metrics port (0 = any)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--health-probe-port", options.probe_port, "/healthz and /readyz port (0 = any)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--log-format", log_format, "text (key=value) or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--log-level", log_level, "debug, info, warning or error")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}))
      ->capture_default_str();
  app.footer(
      "Exit codes: 0 stopped by SIGTERM/SIGINT, 1 lost the leader lease (restart to stand by), "
      "2 invalid flags or configuration, 3 cannot reach the API server.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // The footer's 2, not CLI11's own codes (105, 109, ...): a supervisor
    // tells a bad flag from a lost lease or an unreachable API server.
    std::cerr << "error: " << e.what() << "\nRun 'pacer-controller --help' for usage.\n";
    return 2;
  }
  options.leader_elect = leader_elect;
  options.reconciler.pending_retry = std::chrono::seconds(pending_retry_seconds);
  options.reconciler.gang_completion_timeout = std::chrono::seconds(gang_completion_seconds);
  options.reconciler.gang_scheduling_timeout = std::chrono::seconds(gang_scheduling_seconds);
  options.cluster_scheduling = scheduling == "deadline";
  SetLogFormat(log_format == "json" ? LogFormat::kJson : LogFormat::kText);
  SetLogLevel(log_level == "debug"     ? LogLevel::kDebug
              : log_level == "warning" ? LogLevel::kWarning
              : log_level == "error"   ? LogLevel::kError
                                       : LogLevel::kInfo);

  // Configuration as kubectl finds it (kube/kube_config.h): the flag,
  // $KUBECONFIG, ~/.kube/config, the in-cluster service account.
  const pacer::StatusOr<KubeConfig> config =
      ResolveKubeConfig(kubeconfig, context, std::getenv, ReadWholeFile);
  if (!config.ok()) {
    Log(LogLevel::kError, "no Kubernetes configuration", {{"error", config.status()}});
    return 2;
  }
  options.kube = *config;

  // Signals are taken by a thread of their own: Stop() is not signal-safe.
  sigset_t signals = StopSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ControllerManager manager(options);
  pacer::Status started = manager.Start();
  if (!started.ok()) {
    Log(LogLevel::kError, "cannot start", {{"error", started}});
    manager.Stop();
    return started.code() == pacer::StatusCode::kInvalidArgument ? 2 : 3;
  }
  std::thread signal_thread([&manager, signals]() {
    int signal = 0;
    sigwait(&signals, &signal);
    Log(LogLevel::kInfo, "stopping", {{"signal", signal}});
    manager.Stop();
  });
  const ControllerManager::Exit exit = manager.Wait();
  manager.Stop();
  // Wake the signal thread if it is still waiting.
  pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
  return exit == ControllerManager::Exit::kLostLeadership ? 1 : 0;
}
