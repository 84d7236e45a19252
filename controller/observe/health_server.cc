#include "observe/health_server.h"

#include <cpprest/http_listener.h>
#include <netdb.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <exception>
#include <utility>
#include <vector>

#include "observe/log.h"

namespace pacer::controller {
namespace {

namespace http = web::http;
using web::http::experimental::listener::http_listener;
using web::http::experimental::listener::http_listener_config;

constexpr const char* kTextPlain = "text/plain; charset=utf-8";
constexpr const char* kPrometheusText = "text/plain; version=0.0.4; charset=utf-8";
// A free port found by PickFreePort can be taken by another process before
// the listener binds it; a few retries make that race harmless.
constexpr int kFreePortAttempts = 8;

struct NamedCheck {
  std::string name;
  HealthServer::Check check;
};

Status ValidatePort(const char* what, int port) {
  if (port < 0 || port > 65535) {
    return InvalidArgumentError(std::string(what) + " " + std::to_string(port) +
                                " is not a TCP port; use 1..65535, or 0 to pick a free one");
  }
  return Status::Ok();
}

// Asks the kernel for a free port on `host` by binding port 0.
// cpprestsdk's listener cannot report the port it bound, so it is given one.
StatusOr<int> PickFreePort(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), "0", &hints, &found);
  if (rc != 0 || found == nullptr) {
    return InvalidArgumentError("bind address \"" + host + "\" does not resolve (" +
                                gai_strerror(rc) + "); use an IP address such as 0.0.0.0");
  }
  int port = -1;
  for (addrinfo* a = found; a != nullptr && port < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
      char service[NI_MAXSERV];
      if (getnameinfo(reinterpret_cast<sockaddr*>(&bound), len, nullptr, 0, service,
                      sizeof(service), NI_NUMERICSERV) == 0) {
        port = std::stoi(service);
      }
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (port <= 0) {
    return FailedPreconditionError("cannot bind any port on \"" + host +
                                   "\"; is it an address of this machine?");
  }
  return port;
}

std::string ListenUri(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return "http://" + (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port) + "/";
}

}  // namespace

struct HealthServer::Shared {
  std::shared_ptr<prometheus::Registry> registry;

  std::mutex mu;
  std::vector<NamedCheck> liveness;   // guarded by mu
  std::vector<NamedCheck> readiness;  // guarded by mu

  // Runs `checks` (a copy: a slow check must not block AddXCheck) and
  // answers in the Kubernetes format.
  void Probe(const http::http_request& request, const std::vector<NamedCheck>& checks,
             const std::string& probe, http::status_code failure) const {
    const bool verbose = request.request_uri().query().find("verbose") != std::string::npos;
    std::string lines;
    bool healthy = true;
    for (const NamedCheck& c : checks) {
      Status status;
      try {
        status = c.check();
      } catch (const std::exception& e) {
        status = InternalError(std::string("check threw: ") + e.what());
      } catch (...) {
        status = InternalError("check threw a non-standard exception");
      }
      if (status.ok()) {
        lines += "[+]" + c.name + " ok\n";
      } else {
        healthy = false;
        lines += "[-]" + c.name + " failed: " + status.ToString() + "\n";
      }
    }
    if (healthy && !verbose) {
      request.reply(http::status_codes::OK, "ok", kTextPlain);
    } else if (healthy) {
      request.reply(http::status_codes::OK, lines + probe + " check passed\n", kTextPlain);
    } else {
      request.reply(failure, lines + probe + " check failed\n", kTextPlain);
    }
  }

  void Handle(const http::http_request& request, bool serve_metrics, bool serve_probes) {
    const std::string path = request.relative_uri().path();
    if (request.method() != http::methods::GET) {
      http::http_response response(http::status_codes::MethodNotAllowed);
      response.headers().add(http::header_names::allow, "GET");
      response.set_body("only GET is served\n", kTextPlain);
      request.reply(response);
      return;
    }
    if (serve_probes && (path == "/healthz" || path == "/readyz")) {
      const bool live = path == "/healthz";
      std::vector<NamedCheck> checks;
      {
        std::lock_guard<std::mutex> lock(mu);
        checks = live ? liveness : readiness;
      }
      Probe(request, checks, live ? "healthz" : "readyz",
            live ? http::status_codes::InternalError : http::status_codes::ServiceUnavailable);
      return;
    }
    if (serve_metrics && path == "/metrics" && registry != nullptr) {
      request.reply(http::status_codes::OK,
                    prometheus::TextSerializer().Serialize(registry->Collect()), kPrometheusText);
      return;
    }
    std::string known;
    if (serve_probes) known += " /healthz /readyz";
    if (serve_metrics && registry != nullptr) known += " /metrics";
    request.reply(http::status_codes::NotFound,
                  "no such path: " + path + "; this port serves" + known + "\n", kTextPlain);
  }
};

struct HealthServer::Running {
  std::vector<std::unique_ptr<http_listener>> listeners;
  int metrics_port = 0;
  int probe_port = 0;
};

namespace {

// Opens a listener on host:port serving `handler`; port 0 picks a free one.
// Returns the port in use.
StatusOr<int> OpenListener(const std::string& host, int port,
                           std::function<void(http::http_request)> handler,
                           std::vector<std::unique_ptr<http_listener>>& listeners) {
  std::string last_error;
  for (int attempt = 0; attempt < (port == 0 ? kFreePortAttempts : 1); ++attempt) {
    int chosen = port;
    if (port == 0) {
      ASSIGN_OR_RETURN(chosen, PickFreePort(host));
    }
    try {
      auto listener = std::make_unique<http_listener>(web::uri(ListenUri(host, chosen)));
      listener->support(handler);
      listener->open().wait();
      listeners.push_back(std::move(listener));
      return chosen;
    } catch (const web::uri_exception& e) {
      return InvalidArgumentError("bind address \"" + host + "\" is not usable in a URL (" +
                                  e.what() + ")");
    } catch (const std::exception& e) {
      last_error = e.what();
    }
  }
  return FailedPreconditionError("cannot listen on " + host + ":" + std::to_string(port) + " (" +
                                 last_error +
                                 "); pick a free port, or 0 to let the system choose one");
}

Status AddCheck(std::mutex& mu, std::vector<NamedCheck>& checks, const char* kind, std::string name,
                HealthServer::Check check) {
  if (name.empty()) return InvalidArgumentError(std::string(kind) + " check needs a name");
  if (!check) return InvalidArgumentError(std::string(kind) + " check \"" + name + "\" is empty");
  std::lock_guard<std::mutex> lock(mu);
  for (const NamedCheck& c : checks) {
    if (c.name == name) {
      return Status(StatusCode::kAlreadyExists, std::string(kind) + " check \"" + name +
                                                    "\" is already registered; names are unique");
    }
  }
  checks.push_back({std::move(name), std::move(check)});
  return Status::Ok();
}

}  // namespace

HealthServer::HealthServer(HealthServerOptions options,
                           std::shared_ptr<prometheus::Registry> registry)
    : options_(std::move(options)), shared_(std::make_shared<Shared>()) {
  shared_->registry = std::move(registry);
}

HealthServer::~HealthServer() { Stop(); }

Status HealthServer::AddLivenessCheck(std::string name, Check check) {
  return AddCheck(shared_->mu, shared_->liveness, "liveness", std::move(name), std::move(check));
}

Status HealthServer::AddReadinessCheck(std::string name, Check check) {
  return AddCheck(shared_->mu, shared_->readiness, "readiness", std::move(name), std::move(check));
}

Status HealthServer::Start() {
  RETURN_IF_ERROR(ValidatePort("metrics port", options_.metrics_port));
  RETURN_IF_ERROR(ValidatePort("probe port", options_.probe_port));
  std::lock_guard<std::mutex> lock(mu_);
  if (running_ != nullptr) {
    return FailedPreconditionError("the health server is already running; Stop it first");
  }
  auto running = std::make_unique<Running>();
  // The handlers hold Shared, not this: a request that is still being
  // answered while the server goes away touches nothing freed.
  std::shared_ptr<Shared> shared = shared_;
  const bool one_port = options_.metrics_port == options_.probe_port && options_.probe_port != 0;
  Status status;
  if (one_port) {
    StatusOr<int> port = OpenListener(
        options_.bind_address, options_.probe_port,
        [shared](http::http_request r) { shared->Handle(r, true, true); }, running->listeners);
    status = port.status();
    if (port.ok()) running->metrics_port = running->probe_port = *port;
  } else {
    StatusOr<int> probe = OpenListener(
        options_.bind_address, options_.probe_port,
        [shared](http::http_request r) { shared->Handle(r, false, true); }, running->listeners);
    status = probe.status();
    if (probe.ok()) {
      running->probe_port = *probe;
      StatusOr<int> metrics = OpenListener(
          options_.bind_address, options_.metrics_port,
          [shared](http::http_request r) { shared->Handle(r, true, false); }, running->listeners);
      status = metrics.status();
      if (metrics.ok()) running->metrics_port = *metrics;
    }
  }
  if (!status.ok()) {
    for (auto& listener : running->listeners) listener->close().wait();
    return status;
  }
  Log(LogLevel::kInfo, "health server listening",
      {{"address", options_.bind_address},
       {"metrics_port", running->metrics_port},
       {"probe_port", running->probe_port}});
  running_ = std::move(running);
  return Status::Ok();
}

void HealthServer::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_ == nullptr) return;
  for (auto& listener : running_->listeners) {
    try {
      listener->close().wait();  // returns once in-flight requests are answered
    } catch (const std::exception& e) {
      Log(LogLevel::kWarning, "closing a health server listener failed", {{"error", e.what()}});
    }
  }
  running_.reset();
  Log(LogLevel::kInfo, "health server stopped");
}

bool HealthServer::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ != nullptr;
}

int HealthServer::metrics_port() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ == nullptr ? 0 : running_->metrics_port;
}

int HealthServer::probe_port() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ == nullptr ? 0 : running_->probe_port;
}

}  // namespace pacer::controller
