#include "observe/health_server.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <netdb.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "observe/log.h"

namespace pacer::controller {
namespace {

constexpr const char* kTextPlain = "text/plain; charset=utf-8";
constexpr const char* kPrometheusText = "text/plain; version=0.0.4; charset=utf-8";

// civetweb's settings for both ports. The kubelet probes every few seconds
// and Prometheus scrapes every 15-30 s: a few threads are plenty. A request
// body is never read (nothing here takes one), so a client cannot make the
// controller hold one in memory; headers are capped at civetweb's default
// 16 KiB; a read or write that stalls for 5 s ends the connection.
constexpr const char* kThreads = "4";
constexpr const char* kRequestTimeoutMs = "5000";
constexpr const char* kMaxHeaderBytes = "16384";

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

// civetweb listens on numeric addresses only: a host name is resolved to its
// first address here. IPv6 addresses are bracketed, as civetweb wants.
StatusOr<std::string> NumericListenHost(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return host;
  // Debian's civetweb (the controller image's too) is built without IPv6
  // (feature 8): say so, rather than "cannot listen".
  const auto ipv6 = [&host](const std::string& numeric) -> StatusOr<std::string> {
    if (mg_check_feature(8) == 0) {
      return InvalidArgumentError("bind address \"" + host +
                                  "\" is IPv6, which this build's HTTP server (civetweb without "
                                  "IPv6) cannot listen on; use an IPv4 address such as 0.0.0.0");
    }
    return "[" + numeric + "]";
  };
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return ipv6(host);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return InvalidArgumentError("bind address \"" + host + "\" does not resolve (" +
                                gai_strerror(rc) + "); use an IP address such as 0.0.0.0");
  }
  char numeric[NI_MAXHOST] = {};
  const int ni = getnameinfo(found->ai_addr, found->ai_addrlen, numeric, sizeof(numeric), nullptr,
                             0, NI_NUMERICHOST);
  const bool is_ipv6 = found->ai_family == AF_INET6;
  freeaddrinfo(found);
  if (ni != 0) {
    return InvalidArgumentError("bind address \"" + host +
                                "\" has no usable address; use an IP address such as 0.0.0.0");
  }
  if (is_ipv6) return ipv6(numeric);
  return std::string(numeric);
}

// The whole answer, written at once. Every connection closes after its
// answer (keep-alive is off), so an unread request body is dropped with it.
void Reply(mg_connection* conn, int status, const char* reason, const std::string& body,
           const char* content_type, const char* extra_headers = "") {
  const std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                           "\r\nContent-Type: " + content_type +
                           "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
                           extra_headers + "Cache-Control: no-store\r\nConnection: close\r\n\r\n";
  mg_write(conn, head.data(), head.size());
  mg_write(conn, body.data(), body.size());
}

}  // namespace

struct HealthServer::Shared {
  std::shared_ptr<prometheus::Registry> registry;

  std::mutex mu;
  std::vector<NamedCheck> liveness;   // guarded by mu
  std::vector<NamedCheck> readiness;  // guarded by mu

  // Runs `checks` (a copy: a slow check must not block AddXCheck) and
  // answers in the Kubernetes format. Returns the status code.
  static int Probe(mg_connection* conn, bool verbose, const std::vector<NamedCheck>& checks,
                   const std::string& probe, int failure, const char* failure_reason) {
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
      Reply(conn, 200, "OK", "ok", kTextPlain);
      return 200;
    }
    if (healthy) {
      Reply(conn, 200, "OK", lines + probe + " check passed\n", kTextPlain);
      return 200;
    }
    Reply(conn, failure, failure_reason, lines + probe + " check failed\n", kTextPlain);
    return failure;
  }

  int Handle(mg_connection* conn, bool serve_metrics, bool serve_probes) {
    const mg_request_info* request = mg_get_request_info(conn);
    const char* method =
        request != nullptr && request->request_method != nullptr ? request->request_method : "";
    const std::string path =
        request != nullptr && request->local_uri != nullptr ? request->local_uri : "";
    if (std::strcmp(method, "GET") != 0) {
      Reply(conn, 405, "Method Not Allowed", "only GET is served\n", kTextPlain, "Allow: GET\r\n");
      return 405;
    }
    if (serve_probes && (path == "/healthz" || path == "/readyz")) {
      const bool live = path == "/healthz";
      const bool verbose = request->query_string != nullptr &&
                           std::strstr(request->query_string, "verbose") != nullptr;
      std::vector<NamedCheck> checks;
      {
        std::lock_guard<std::mutex> lock(mu);
        checks = live ? liveness : readiness;
      }
      return live ? Probe(conn, verbose, checks, "healthz", 500, "Internal Server Error")
                  : Probe(conn, verbose, checks, "readyz", 503, "Service Unavailable");
    }
    if (serve_metrics && path == "/metrics" && registry != nullptr) {
      Reply(conn, 200, "OK", prometheus::TextSerializer().Serialize(registry->Collect()),
            kPrometheusText);
      return 200;
    }
    std::string known;
    if (serve_probes) known += " /healthz /readyz";
    if (serve_metrics && registry != nullptr) known += " /metrics";
    Reply(conn, 404, "Not Found", "no such path: " + path + "; this port serves" + known + "\n",
          kTextPlain);
    return 404;
  }
};

namespace {

// What one port serves; civetweb's user data for the port's context.
struct Ports {
  std::function<int(mg_connection*, bool metrics, bool probes)> handle;
  bool metrics = false;
  bool probes = false;
};

// civetweb's begin_request: every request is answered here, so civetweb
// never reads a body or formats an error page of its own. Returns the
// status code (civetweb: handled).
int HandleRequest(mg_connection* conn) {
  const auto* ports = static_cast<const Ports*>(mg_get_user_data(mg_get_context(conn)));
  try {
    return ports->handle(conn, ports->metrics, ports->probes);
  } catch (const std::exception& e) {  // e.g. out of memory serializing: answer, don't die
    Reply(conn, 500, "Internal Server Error", std::string("internal error: ") + e.what() + "\n",
          kTextPlain);
    return 500;
  }
}

// civetweb's own messages (a failed accept, a timed-out read) go to the
// controller's log instead of stderr.
int LogCivetwebMessage(const mg_connection*, const char* message) {
  Log(LogLevel::kDebug, "health server", {{"civetweb", std::string(message)}});
  return 1;
}

// Connects to host:port and hangs up at once; false when nothing answers.
bool Knock(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return false;
  bool answered = false;
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    answered = connect(fd, found->ai_addr, found->ai_addrlen) == 0;
    close(fd);
  }
  freeaddrinfo(found);
  return answered;
}

// Runs mg_stop(context) while knocking on `port`. civetweb's listening
// thread notices the stop only between two polls of its sockets, which wait
// up to 2 s each (SOCKET_TIMEOUT_QUANTUM, compiled in): every Stop, and so
// every controller shutdown, took that long. A connection ends the poll at
// once. The knocks repeat until mg_stop returns, since one that lands just
// before the stop flag is set only starts another poll.
void StopPromptly(mg_context* context, const std::string& knock_host, int port) {
  std::mutex mu;
  std::condition_variable cv;
  bool stopped = false;
  std::thread knocker([&] {
    std::unique_lock<std::mutex> lock(mu);
    while (!stopped) {
      lock.unlock();
      Knock(knock_host, port);
      lock.lock();
      cv.wait_for(lock, std::chrono::milliseconds(20), [&] { return stopped; });
    }
  });
  mg_stop(context);
  {
    std::lock_guard<std::mutex> lock(mu);
    stopped = true;
  }
  cv.notify_all();
  knocker.join();
}

// The address to knock on for a server bound to `numeric_host` (bracketed
// when IPv6): the loopback address for a wildcard, the address itself else.
std::string KnockHost(const std::string& numeric_host) {
  if (numeric_host == "0.0.0.0") return "127.0.0.1";
  if (numeric_host == "[::]") return "::1";
  if (numeric_host.size() > 2 && numeric_host.front() == '[') {
    return numeric_host.substr(1, numeric_host.size() - 2);
  }
  return numeric_host;
}

}  // namespace

// One civetweb context per port, with threads of its own: a scrape, or
// clients that hold the metrics port's threads, never delay a probe (with
// one context for both, four connections streaming a body to /metrics left
// no thread for /healthz, and the kubelet restarted the controller).
// Destroying a context stops it (mg_stop returns once in-flight requests
// are answered and its threads have exited) before its Ports go away.
struct HealthServer::Running {
  struct Listener {
    std::unique_ptr<Ports> ports;
    mg_context* context = nullptr;
    int port = 0;
  };
  std::vector<Listener> listeners;
  std::string knock_host;  // see StopPromptly
  int metrics_port = 0;
  int probe_port = 0;

  ~Running() {
    for (Listener& l : listeners) {
      if (l.context != nullptr) StopPromptly(l.context, knock_host, l.port);
    }
  }

  // Starts a context listening on `listen` ("host:port") for `ports`.
  static StatusOr<Listener> StartContext(const std::string& listen, std::unique_ptr<Ports> ports) {
    static const mg_callbacks callbacks = [] {
      mg_callbacks c{};
      c.begin_request = HandleRequest;
      c.log_message = LogCivetwebMessage;
      return c;
    }();
    const char* config[] = {"listening_ports",
                            listen.c_str(),
                            "num_threads",
                            kThreads,
                            "request_timeout_ms",
                            kRequestTimeoutMs,
                            "max_request_size",
                            kMaxHeaderBytes,
                            "enable_keep_alive",
                            "no",
                            "linger_timeout_ms",
                            "0",
                            nullptr};
    mg_init_data init{};
    init.callbacks = &callbacks;
    init.user_data = ports.get();
    init.configuration_options = config;
    char error_text[256] = {};
    unsigned error_code = 0;
    mg_error_data error{};
    error.code = &error_code;
    error.text = error_text;
    error.text_buffer_size = sizeof(error_text);
    Listener listener;
    listener.context = mg_start2(&init, &error);
    if (listener.context == nullptr) {
      return FailedPreconditionError("cannot listen on " + listen + " (" + error_text +
                                     "); pick a free port, or 0 to let the system choose one");
    }
    listener.ports = std::move(ports);
    mg_server_port bound[1] = {};
    if (mg_get_server_ports(listener.context, 1, bound) != 1 || bound[0].port <= 0) {
      mg_stop(listener.context);
      return InternalError("the server on " + listen + " reports no listening port");
    }
    listener.port = bound[0].port;
    return listener;
  }
};

namespace {

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
  ASSIGN_OR_RETURN(const std::string host, NumericListenHost(options_.bind_address));
  std::lock_guard<std::mutex> lock(mu_);
  if (running_ != nullptr) {
    return FailedPreconditionError("the health server is already running; Stop it first");
  }
  auto running = std::make_unique<Running>();
  running->knock_host = KnockHost(host);
  // The handlers hold Shared, not this: a request that is still being
  // answered while the server goes away touches nothing freed.
  const auto open = [&](int port, bool metrics, bool probes) -> StatusOr<int> {
    auto ports = std::make_unique<Ports>();
    ports->handle = [shared = shared_](mg_connection* conn, bool m, bool p) {
      return shared->Handle(conn, m, p);
    };
    ports->metrics = metrics;
    ports->probes = probes;
    const std::string listen = host + ":" + std::to_string(port);
    ASSIGN_OR_RETURN(Running::Listener listener, Running::StartContext(listen, std::move(ports)));
    const int bound = listener.port;
    running->listeners.push_back(std::move(listener));
    return bound;
  };
  const bool one_port = options_.metrics_port == options_.probe_port && options_.probe_port != 0;
  if (one_port) {
    ASSIGN_OR_RETURN(const int port, open(options_.probe_port, true, true));
    running->metrics_port = running->probe_port = port;
  } else {
    ASSIGN_OR_RETURN(running->probe_port, open(options_.probe_port, false, true));
    ASSIGN_OR_RETURN(running->metrics_port, open(options_.metrics_port, true, false));
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
  running_.reset();  // mg_stop: returns once in-flight requests are answered
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
