// pacer-test-apiserver: runs the test Kubernetes API server (docs/testing.md)
// until SIGTERM or SIGINT, for kubectl and manual experiments:
//
//   pacer-test-apiserver --kubeconfig /tmp/kc &
//   kubectl --kubeconfig /tmp/kc get trainjobs
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "test_api_server.h"

int main(int argc, char** argv) {
  CLI::App app{"An in-memory Kubernetes API server for tests and kubectl experiments"};
  pacer::testing::TestApiServerOptions options;
  std::string kubeconfig;
  std::string namespace_name = "default";
  int64_t bookmark_interval_ms = options.bookmark_interval.count();
  app.add_option("--kubeconfig", kubeconfig, "Write a kubeconfig for kubectl to this path");
  app.add_option("--namespace", namespace_name, "The kubeconfig context's namespace")
      ->capture_default_str();
  app.add_option("--bind-address", options.bind_address, "IP address to listen on")
      ->capture_default_str();
  app.add_option("--port", options.port, "Port to listen on; 0 picks a free one")
      ->capture_default_str();
  app.add_option("--token", options.token, "Bearer token to require; empty generates one");
  app.add_option("--history-limit", options.history_limit, "Watch events kept for resuming watches")
      ->capture_default_str();
  app.add_option("--bookmark-interval-ms", bookmark_interval_ms,
                 "Milliseconds between watch bookmarks")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  options.bookmark_interval = std::chrono::milliseconds(bookmark_interval_ms);

  // Block the stop signals before any thread starts so that only sigwait
  // below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = pacer::testing::TestApiServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "pacer-test-apiserver: %s\n", server.status().ToString().c_str());
    return 1;
  }
  if (!kubeconfig.empty()) {
    pacer::Status written = (*server)->WriteKubeconfig(kubeconfig, namespace_name);
    if (!written.ok()) {
      std::fprintf(stderr, "pacer-test-apiserver: %s\n", written.ToString().c_str());
      return 1;
    }
  }
  std::printf("%s\n", (*server)->url().c_str());
  std::fflush(stdout);
  int received = 0;
  sigwait(&signals, &received);
  return 0;
}
