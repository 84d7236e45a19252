// HealthServer: the controller's HTTP endpoints for Kubernetes and Prometheus.
//
//   GET /healthz  liveness: 200 "ok" while every liveness check passes; 500
//                 naming each check with "[+]name ok" / "[-]name failed: <status>"
//                 lines otherwise (the kubelet restarts the pod).
//   GET /readyz   readiness: 200 "ok" once every readiness check passes (e.g.
//                 "informers synced"); 503 with the same per-check lines
//                 otherwise (the pod gets no Service traffic).
//   GET /metrics  the registry in the Prometheus text format (0.0.4).
//
// Append ?verbose to a probe to list every check even when all pass. The
// format is the Kubernetes API server's, so operators read it the same way.
//
// As in controller-runtime, /metrics and the probes listen on separate ports
// (defaults 8080 and 8081): a NetworkPolicy can open the metrics port to
// Prometheus only, and a slow scrape never delays a probe. Setting both
// ports to the same non-zero value serves all three paths on one port. Port
// 0 picks a free port; metrics_port() and probe_port() report the ports in
// use after Start.
//
// Built on civetweb (which prometheus-cpp brings): one server with four
// threads of its own per port, so that clients of the metrics port never
// hold a thread a probe needs. Every request is answered once its headers
// are in (at most 16 KiB) and the connection closed; a request body is never
// kept: what a client sends after the headers is read and dropped in 8 KiB
// pieces. (cpprestsdk's listener, used before, kept whole bodies: a 600 MB
// POST to a probe grew the controller by 464 MiB.) A read or write stalled
// for 5 s ends its connection. IPv6 bind addresses are refused
// (kInvalidArgument): Debian's civetweb is built without IPv6. Checks run
// on the server's threads, once per request: they must be quick and must
// not block (read an atomic, compare a timestamp), since the kubelet gives
// a probe one second by default.
//
// Thread-safety: all methods may be called from any thread. Checks may be
// added before or after Start. Stop waits until the listeners are closed and
// in-flight requests are answered; after Stop returns no check runs and no
// request is served. The destructor stops the server.
#ifndef PACER_CONTROLLER_OBSERVE_HEALTH_SERVER_H_
#define PACER_CONTROLLER_OBSERVE_HEALTH_SERVER_H_

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "pacer/status.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace pacer::controller {

struct HealthServerOptions {
  // An IPv4 address or a host name (resolved to its first address) to
  // listen on; "0.0.0.0" for all interfaces (in a pod), "127.0.0.1" for
  // this machine only. IPv6 is refused (see above).
  std::string bind_address = "0.0.0.0";
  int metrics_port = 8080;  // /metrics; 0 picks a free port
  int probe_port = 8081;    // /healthz, /readyz; 0 picks a free port
};

class HealthServer {
 public:
  // A check returns OK when healthy, or a Status whose message says what is
  // wrong (it is shown in the probe's answer: never put a secret in it).
  using Check = std::function<Status()>;

  // `registry` is served at /metrics; null answers /metrics with 404.
  HealthServer(HealthServerOptions options, std::shared_ptr<prometheus::Registry> registry);
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  // Errors: kInvalidArgument for an empty name or a null check,
  // kAlreadyExists for a name already registered in the same list.
  Status AddLivenessCheck(std::string name, Check check);
  Status AddReadinessCheck(std::string name, Check check);

  // Starts listening. Errors: kInvalidArgument for a port outside 0..65535
  // or an unusable bind address; kFailedPrecondition when it cannot listen
  // (port in use, no permission) or is already running.
  Status Start();
  // Stops listening and waits for in-flight requests. Idempotent; Start may
  // be called again afterwards.
  void Stop();

  bool running() const;
  // The ports in use; 0 while not running.
  int metrics_port() const;
  int probe_port() const;

 private:
  struct Shared;   // checks and registry, shared with the request handlers
  struct Running;  // the listeners of one Start..Stop

  const HealthServerOptions options_;
  std::shared_ptr<Shared> shared_;

  mutable std::mutex mu_;             // serializes Start and Stop
  std::unique_ptr<Running> running_;  // guarded by mu_
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_OBSERVE_HEALTH_SERVER_H_
