// metrics_demo: a stand-in for pacer-worker in tests/worker/prometheus_scrape_test.sh.
// It serves WorkerMetrics and records one "step" (a sleep of --interval-ms,
// timed with the steady clock) per interval, up to --steps, then keeps
// serving until SIGTERM/SIGINT or --max-seconds (so a leaked process ends).
//
//   metrics_demo [--port N] [--interval-ms N] [--steps N] [--max-seconds N]
//
// Prints "port=<P>" on stdout once the server listens (with --port 0, the
// port the kernel chose), then nothing more on stdout. Labels come from the
// environment as in pacer-worker: PACER_JOB_NAME, PACER_JOB_NAMESPACE, RANK,
// PACER_GPU_TYPE.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "core/exit_codes.h"
#include "core/metrics.h"
#include "core/signals.h"

namespace {

std::string EnvOr(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  using pacer::worker::ExitCode;
  long port = 0, interval_ms = 100, steps = 600, max_seconds = 120;
  for (int i = 1; i + 1 < argc; i += 2) {
    long* target = std::strcmp(argv[i], "--port") == 0          ? &port
                   : std::strcmp(argv[i], "--interval-ms") == 0 ? &interval_ms
                   : std::strcmp(argv[i], "--steps") == 0       ? &steps
                   : std::strcmp(argv[i], "--max-seconds") == 0 ? &max_seconds
                                                                : nullptr;
    if (target == nullptr) {
      std::fprintf(stderr, "metrics_demo: unknown flag %s\n", argv[i]);
      return ExitCode::kExitInvalidConfig;
    }
    *target = std::strtol(argv[i + 1], nullptr, 10);
  }

  pacer::worker::StopSignal stop;
  pacer::worker::MetricsLabels labels{EnvOr("PACER_JOB_NAME", "metrics-demo"),
                                      EnvOr("PACER_JOB_NAMESPACE", "default"), EnvOr("RANK", "0"),
                                      "cpu", EnvOr("PACER_GPU_TYPE", "cpu")};
  auto metrics = pacer::worker::WorkerMetrics::Create(labels, "127.0.0.1:" + std::to_string(port));
  if (!metrics.ok()) {
    std::fprintf(stderr, "metrics_demo: %s\n", metrics.status().ToString().c_str());
    return ExitCode::kExitInvalidConfig;
  }
  std::printf("port=%d\n", (*metrics)->port());
  std::fflush(stdout);

  (*metrics)->SetTotalSteps(steps);
  (*metrics)->SetPredicted(static_cast<double>(interval_ms) / 1000.0, 1e9);
  (*metrics)->SetPeaks(1e12, 0);  // calibrated peak unknown: MFU reads NaN
  (*metrics)->SetModelScale(0.25);
  (*metrics)->SetPlanInfo({1, 1, 1, 0, 1, 1, "fp32"});

  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::seconds(max_seconds);
  const auto interval = std::chrono::milliseconds(interval_ms);
  for (long step = 1; !stop.requested() && Clock::now() < deadline; ++step) {
    const auto start = Clock::now();
    std::this_thread::sleep_for(interval);
    if (step > steps) continue;  // done: keep serving until stopped
    pacer::worker::StepMeasurement m;
    m.step = step;
    m.step_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    m.global_samples = 8;
    m.global_tokens = 8 * 512;
    m.model_flops = 0.05e12;
    m.collective_seconds = m.step_seconds / 10;
    m.collective_bytes = 64e6;
    m.collective_bus_factor = 1;
    m.exposed_communication_seconds = m.step_seconds / 20;
    (*metrics)->ObserveStep(m);
  }
  return stop.requested() ? ExitCode::kExitStoppedAfterCheckpoint : ExitCode::kExitSuccess;
}
