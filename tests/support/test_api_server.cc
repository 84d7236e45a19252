#include "test_api_server.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/core/detail/base64.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "api_error.h"
#include "object_store.h"
#include "openapi.h"
#include "pod_admission.h"
#include "schema_validation.h"
#include "table_output.h"
#include "tls_certs.h"

namespace pacer::testing {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using nlohmann::json;
using Stream = ssl::stream<tcp::socket>;
using Request = http::request<http::string_body>;

namespace {

constexpr size_t kMaxBodyBytes = 3 * 1024 * 1024;
constexpr size_t kMaxHeaderBytes = 64 * 1024;
// How often a waiting watch stream checks whether the server is stopping.
constexpr std::chrono::milliseconds kStopCheckInterval{200};

std::string UrlDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() &&
               std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::map<std::string, std::string> ParseQuery(const std::string& query) {
  std::map<std::string, std::string> params;
  size_t start = 0;
  while (start <= query.size()) {
    size_t end = query.find('&', start);
    if (end == std::string::npos) end = query.size();
    std::string pair = query.substr(start, end - start);
    if (!pair.empty()) {
      size_t eq = pair.find('=');
      if (eq == std::string::npos) {
        params[UrlDecode(pair)] = "";
      } else {
        params[UrlDecode(pair.substr(0, eq))] = UrlDecode(pair.substr(eq + 1));
      }
    }
    start = end + 1;
  }
  return params;
}

std::string Param(const std::map<std::string, std::string>& q, const std::string& key) {
  auto it = q.find(key);
  return it == q.end() ? "" : it->second;
}

bool IsTrue(const std::string& v) { return v == "true" || v == "1"; }

std::string RandomHex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1) {
    std::random_device rd;
    for (auto& b : buf) b = static_cast<unsigned char>(rd());
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : buf) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::string Base64(const std::string& in) {
  std::string out(beast::detail::base64::encoded_size(in.size()), '\0');
  out.resize(beast::detail::base64::encode(out.data(), in.data(), in.size()));
  return out;
}

json VerbsFor(bool subresource) {
  if (subresource) return {"get", "patch", "update"};
  return {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"};
}

// kube-apiserver's RequestInfo for a request: verb, group, resource,
// subresource, namespace and name (k8s.io/apiserver pkg/endpoints/request).
AuditRecord DescribeRequest(const std::string& method, const std::string& path,
                            const std::map<std::string, std::string>& query) {
  AuditRecord record{};
  record.code = 0;
  record.verb = method;
  std::transform(record.verb.begin(), record.verb.end(), record.verb.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::vector<std::string> parts;
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  size_t first = 0;
  if (parts.size() >= 3 && parts[0] == "api") {
    first = 2;  // api/v1/...
  } else if (parts.size() >= 4 && parts[0] == "apis") {
    record.group = parts[1];
    first = 3;  // apis/group/version/...
  } else {
    return record;  // discovery, /version, /openapi, health: no resource
  }
  std::vector<std::string> rest(parts.begin() + static_cast<std::ptrdiff_t>(first), parts.end());
  if (method == "POST") {
    record.verb = "create";
  } else if (method == "GET" || method == "HEAD") {
    record.verb = "get";
  } else if (method == "PUT") {
    record.verb = "update";
  } else if (method == "PATCH") {
    record.verb = "patch";
  } else if (method == "DELETE") {
    record.verb = "delete";
  }
  if (rest[0] == "namespaces" && rest.size() > 1) {
    record.namespace_ = rest[1];
    // "namespaces/NS/status" and ".../finalize" are the Namespace's own
    // subresources; anything else after the name is a namespaced resource.
    if (rest.size() > 2 && rest[2] != "status" && rest[2] != "finalize") {
      rest.erase(rest.begin(), rest.begin() + 2);
    }
  }
  record.resource = rest[0];
  if (rest.size() >= 2) record.name = rest[1];
  if (rest.size() >= 3) record.subresource = rest[2];
  if (record.name.empty() && record.verb == "get") {
    auto watch = query.find("watch");
    const bool watching = watch != query.end() && (watch->second == "true" || watch->second == "1");
    record.verb = watching ? "watch" : "list";
    // A field selector on metadata.name names the one object listed.
    auto fields = query.find("fieldSelector");
    if (fields != query.end()) {
      std::stringstream terms(fields->second);
      std::string term;
      while (std::getline(terms, term, ',')) {
        for (const char* prefix : {"metadata.name==", "metadata.name="}) {
          if (term.rfind(prefix, 0) == 0) {
            record.name = term.substr(std::strlen(prefix));
            break;
          }
        }
      }
    }
  }
  if (record.name.empty() && record.verb == "delete") record.verb = "deletecollection";
  return record;
}

struct Reply {
  int code = 200;
  json body;
  std::string text;  // when not JSON
  std::vector<std::pair<std::string, std::string>> headers;
};

Reply ErrorReply(const ApiError& error, int retry_after_seconds = 1) {
  Reply reply;
  reply.code = error.code;
  reply.body = StatusJson(error);
  if (error.code == 429) {
    reply.headers.emplace_back("Retry-After", std::to_string(retry_after_seconds));
  }
  return reply;
}

}  // namespace

class TestApiServer::Impl {
 public:
  Impl(TestApiServerOptions options, TlsMaterial tls)
      : options_(std::move(options)),
        tls_(std::move(tls)),
        ssl_ctx_(ssl::context::tls_server),
        acceptor_(ioc_),
        store_(options_.history_limit) {
    token_ = options_.token.empty() ? RandomHex(24) : options_.token;
  }

  Status Listen() {
    beast::error_code ec;
    ssl_ctx_.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                         ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                         ssl::context::no_tlsv1_1);
    ssl_ctx_.use_certificate_chain(net::buffer(tls_.cert_pem), ec);
    if (ec) return InternalError("loading the serving certificate: " + ec.message());
    ssl_ctx_.use_private_key(net::buffer(tls_.key_pem), ssl::context::pem, ec);
    if (ec) return InternalError("loading the serving key: " + ec.message());
    auto address = net::ip::make_address(options_.bind_address, ec);
    if (ec) {
      return InvalidArgumentError("bind_address \"" + options_.bind_address +
                                  "\" is not an IP address; use e.g. 127.0.0.1");
    }
    if (options_.port < 0 || options_.port > 65535) {
      return InvalidArgumentError("port " + std::to_string(options_.port) +
                                  " is out of range; use 0 to pick a free port");
    }
    tcp::endpoint endpoint(address, static_cast<unsigned short>(options_.port));
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (!ec) acceptor_.non_blocking(true, ec);
    if (ec) {
      return UnavailableError("cannot listen on " + options_.bind_address + ":" +
                              std::to_string(options_.port) + ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint().port();
    if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) return InternalError("pipe2 failed");
    accept_thread_ = std::thread([this] { AcceptLoop(); });
    return Status::Ok();
  }

  ~Impl() { Stop(); }

  void Stop() {
    if (stopping_.exchange(true)) return;
    {
      std::lock_guard<std::mutex> lock(hang_mu_);  // orders the wake after the flag
    }
    hang_cv_.notify_all();  // hung requests let go of their connections
    {
      std::lock_guard<std::mutex> lock(reap_mu_);
    }
    reap_cv_.notify_all();
    if (reaper_.joinable()) reaper_.join();
    if (accept_thread_.joinable()) {
      char c = 'x';
      ssize_t ignored = ::write(wake_pipe_[1], &c, 1);
      (void)ignored;
      accept_thread_.join();
    }
    store_.DropWatches();
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(conn_mu_);
      for (auto& [id, conn] : conns_) {
        // Wakes a thread blocked reading its socket.
        if (conn.fd >= 0) ::shutdown(conn.fd, SHUT_RDWR);
        threads.push_back(std::move(conn.thread));
      }
      conns_.clear();
      finished_.clear();
    }
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
    beast::error_code ec;
    acceptor_.close(ec);
    for (int& fd : wake_pipe_) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }

  std::string url() const {
    std::string host = options_.bind_address == "0.0.0.0" ? "127.0.0.1" : options_.bind_address;
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    return "https://" + host + ":" + std::to_string(port_);
  }

  // --- public API support ----------------------------------------------------

  void NotifyChange() const {
    {
      std::lock_guard<std::mutex> lock(wait_mu_);
      ++change_seq_;
    }
    wait_cv_.notify_all();
  }

  bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock<std::mutex> lock(wait_mu_);
    for (;;) {
      const uint64_t seen = change_seq_;
      lock.unlock();
      if (pred()) return true;
      lock.lock();
      if (change_seq_ != seen) continue;
      if (!wait_cv_.wait_until(lock, deadline, [&] { return change_seq_ != seen; })) {
        lock.unlock();
        return pred();
      }
    }
  }

  void FailNext(const std::string& method, const std::string& path_substring, int code, int count,
                int retry_after_seconds) {
    std::lock_guard<std::mutex> lock(fault_mu_);
    faults_.push_back(Fault{method, path_substring, code, count, retry_after_seconds});
  }

  void SetLatency(std::chrono::milliseconds latency) { latency_ms_ = latency.count(); }

  void RepeatContinue(const std::string& plural) {
    std::lock_guard<std::mutex> lock(fault_mu_);
    repeat_continue_path_ = plural;
  }

  int64_t RequestCount(const std::string& method, const std::string& path_substring) const {
    std::lock_guard<std::mutex> lock(count_mu_);
    int64_t total = 0;
    for (const auto& [key, count] : counts_) {
      if ((method.empty() || key.first == method) &&
          key.second.find(path_substring) != std::string::npos) {
        total += count;
      }
    }
    return total;
  }

  std::vector<AuditRecord> AuditLog() const {
    std::lock_guard<std::mutex> lock(audit_mu_);
    return audit_;
  }

  ObjectStore& store() { return store_; }
  const ObjectStore& store() const { return store_; }
  const TlsMaterial& tls() const { return tls_; }
  void SetPodAdmissionHook(const std::string& name, std::function<std::string(const json&)> deny) {
    std::lock_guard<std::mutex> lock(hook_mu_);
    pod_hook_name_ = name;
    pod_hook_ = std::move(deny);
  }

  std::string token() const {
    std::lock_guard<std::mutex> lock(token_mu_);
    return token_;
  }
  void RotateToken(const std::string& new_token) {
    std::lock_guard<std::mutex> lock(token_mu_);
    token_ = new_token;
  }

  void HangRequests(const std::string& method, const std::string& path_substring,
                    const std::string& user_agent, TestApiServer::HangPoint at) {
    std::lock_guard<std::mutex> lock(hang_mu_);
    hangs_.push_back({method, path_substring, user_agent, at});
  }
  void StopHanging() {
    {
      std::lock_guard<std::mutex> lock(hang_mu_);
      hangs_.clear();
      ++hang_release_seq_;
    }
    hang_cv_.notify_all();
  }
  void SendHeldHeaders() {
    {
      std::lock_guard<std::mutex> lock(hang_mu_);
      ++headers_release_seq_;
    }
    hang_cv_.notify_all();
  }
  int HungRequestCount() const {
    std::lock_guard<std::mutex> lock(hang_mu_);
    return hung_;
  }

 private:
  struct Connection {
    std::thread thread;
    int fd = -1;
  };
  struct Fault {
    std::string method;
    std::string path_substring;
    int code;
    int remaining;
    int retry_after_seconds;  // a 429's Retry-After
  };

  void AcceptLoop() {
    while (!stopping_) {
      pollfd fds[2] = {{acceptor_.native_handle(), POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
      int n = ::poll(fds, 2, -1);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 || stopping_) break;
      ReapFinished();
      if ((fds[0].revents & POLLIN) == 0) continue;
      for (;;) {
        beast::error_code ec;
        tcp::socket socket(ioc_);
        acceptor_.accept(socket, ec);
        if (ec) break;  // would_block: no more pending connections
        socket.non_blocking(false, ec);
        socket.set_option(tcp::no_delay(true), ec);
        std::lock_guard<std::mutex> lock(conn_mu_);
        const uint64_t id = next_connection_id_++;
        Connection& conn = conns_[id];
        conn.fd = socket.native_handle();
        conn.thread =
            std::thread([this, id, s = std::move(socket)]() mutable { Serve(id, std::move(s)); });
      }
    }
  }

  void ReapFinished() {
    std::vector<std::thread> done;
    {
      std::lock_guard<std::mutex> lock(conn_mu_);
      for (uint64_t id : finished_) {
        auto it = conns_.find(id);
        if (it == conns_.end()) continue;
        done.push_back(std::move(it->second.thread));
        conns_.erase(it);
      }
      finished_.clear();
    }
    for (auto& t : done) t.join();
  }

  void Serve(uint64_t id, tcp::socket socket) {
    {
      Stream stream(std::move(socket), ssl_ctx_);
      beast::error_code ec;
      stream.handshake(ssl::stream_base::server, ec);
      beast::flat_buffer buffer;
      while (!ec && !stopping_) {
        http::request_parser<http::string_body> parser;
        parser.body_limit(kMaxBodyBytes);
        parser.header_limit(kMaxHeaderBytes);
        http::read(stream, buffer, parser, ec);
        if (ec == http::error::body_limit) {
          const std::string target(parser.get().target());
          const size_t qmark = target.find('?');
          Audit(DescribeRequest(
                    std::string(parser.get().method_string()), target.substr(0, qmark),
                    ParseQuery(qmark == std::string::npos ? "" : target.substr(qmark + 1))),
                std::string(parser.get()[http::field::user_agent]), 413);
          ApiError too_large{413,
                             "RequestEntityTooLarge",
                             "the request body is larger than 3 MiB; split the object",
                             "",
                             "",
                             ""};
          WriteReply(stream, ErrorReply(too_large), 11, false);
          DiscardInput(stream.next_layer());
          break;
        }
        if (ec) break;
        Request req = parser.release();
        const bool keep_alive = HandleRequest(stream, req);
        NotifyChange();
        if (!keep_alive || !req.keep_alive()) break;
      }
      {
        std::lock_guard<std::mutex> lock(conn_mu_);
        auto it = conns_.find(id);
        if (it != conns_.end()) it->second.fd = -1;
      }
      stream.next_layer().shutdown(tcp::socket::shutdown_both, ec);
      stream.next_layer().close(ec);
    }
    std::lock_guard<std::mutex> lock(conn_mu_);
    finished_.push_back(id);
  }

  // A lingering close: reads and drops what the client is still sending
  // (for at most a second of silence or 16 MiB), so that it reads our answer
  // instead of a connection reset.
  static void DiscardInput(tcp::socket& socket) {
    timeval tv{1, 0};
    ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    std::vector<char> sink(64 * 1024);
    size_t total = 0;
    beast::error_code ec;
    while (total < 16 * 1024 * 1024) {
      const size_t n = socket.read_some(net::buffer(sink), ec);
      if (ec || n == 0) break;
      total += n;
    }
  }

  bool WriteReply(Stream& stream, const Reply& reply, unsigned version, bool keep_alive) {
    http::response<http::string_body> res{static_cast<http::status>(reply.code), version};
    res.set(http::field::server, "pacer-test-apiserver");
    if (reply.text.empty()) {
      res.set(http::field::content_type, "application/json");
      res.body() = reply.body.dump();
    } else {
      res.set(http::field::content_type, "text/plain; charset=utf-8");
      res.body() = reply.text;
    }
    res.set(http::field::cache_control, "no-cache, private");
    // insert, not set: a response may carry several Warning headers.
    for (const auto& [name, value] : reply.headers) res.insert(name, value);
    res.keep_alive(keep_alive);
    res.prepare_payload();
    beast::error_code ec;
    http::write(stream, res, ec);
    return !ec;
  }

  // Holds a request that matches a hang rule until StopHanging() or Stop().
  // Returns whether it was held (it is then never answered).
  bool HangIfAsked(Stream& stream, const std::string& method, const std::string& path,
                   const std::string& user_agent) {
    std::unique_lock<std::mutex> lock(hang_mu_);
    const auto rule = std::find_if(hangs_.begin(), hangs_.end(), [&](const HangRule& r) {
      return (r.method.empty() || r.method == method) &&
             path.find(r.path_substring) != std::string::npos &&
             user_agent.find(r.user_agent) != std::string::npos;
    });
    if (rule == hangs_.end()) return false;
    const TestApiServer::HangPoint at = rule->at;  // StopHanging() clears the rules
    const uint64_t seq = hang_release_seq_;
    const auto released = [&] { return hang_release_seq_ != seq || stopping_.load(); };
    // Headers that promise a body, and the first bytes of it.
    const auto send_partial_answer = [&] {
      static constexpr std::string_view kPartial =
          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n"
          "{\"kind\":";
      beast::error_code ec;
      net::write(stream, net::buffer(kPartial.data(), kPartial.size()), ec);
    };
    if (at == TestApiServer::HangPoint::kAfterHeaders) send_partial_answer();
    // Taken before the request counts as hung: a SendHeldHeaders() that
    // follows a caller's seeing it is always after this.
    const uint64_t headers_seq = headers_release_seq_;
    ++hung_;
    lock.unlock();
    NotifyChange();  // WaitFor(HungRequestCount() ...) sees it
    lock.lock();
    if (at == TestApiServer::HangPoint::kAfterHeadersOnSignal) {
      hang_cv_.wait(lock, [&] { return headers_release_seq_ != headers_seq || released(); });
      if (!released()) send_partial_answer();
    }
    hang_cv_.wait(lock, released);
    --hung_;
    return true;
  }

  // A pod DELETE's grace period: DeleteOptions, the query, the pod's spec,
  // 30 s. nullopt when the pod does not exist (the DELETE answers 404).
  std::optional<int64_t> GracePeriod(const ApiPath& api, const json& options,
                                     const std::map<std::string, std::string>& query) {
    if (options.is_object() && options.contains("gracePeriodSeconds") &&
        options["gracePeriodSeconds"].is_number_integer()) {
      return options["gracePeriodSeconds"].get<int64_t>();
    }
    if (const std::string q = Param(query, "gracePeriodSeconds"); !q.empty()) {
      int64_t v = 0;
      if (std::from_chars(q.data(), q.data() + q.size(), v).ec == std::errc()) return v;
    }
    ApiResult<json> pod = store_.Get(api);
    if (!pod.ok()) return std::nullopt;
    const json& spec = pod.value().contains("spec") ? pod.value()["spec"] : json::object();
    if (spec.is_object() && spec.contains("terminationGracePeriodSeconds") &&
        spec["terminationGracePeriodSeconds"].is_number_integer()) {
      return spec["terminationGracePeriodSeconds"].get<int64_t>();
    }
    return 30;
  }

  // Removes the Terminating pod at `path` after `grace_seconds` (the reaper thread).
  void ScheduleRemoval(const std::string& path, int64_t grace_seconds) {
    {
      std::lock_guard<std::mutex> lock(reap_mu_);
      reap_.emplace(std::chrono::steady_clock::now() + std::chrono::seconds(grace_seconds), path);
      if (!reaper_.joinable()) reaper_ = std::thread([this] { ReapLoop(); });
    }
    reap_cv_.notify_all();
  }

  void ReapLoop() {
    std::unique_lock<std::mutex> lock(reap_mu_);
    while (!stopping_.load()) {
      if (reap_.empty()) {
        reap_cv_.wait(lock);
        continue;
      }
      const auto due = reap_.begin()->first;
      if (std::chrono::steady_clock::now() < due) {
        reap_cv_.wait_until(lock, due);
        continue;
      }
      const std::string path = reap_.begin()->second;
      reap_.erase(reap_.begin());
      lock.unlock();
      if (std::optional<ApiPath> api = store_.Parse(path)) {
        ApiResult<json> got = store_.Get(*api);
        // Only a pod still Terminating (not one re-created under its name).
        if (got.ok() && got.value().contains("metadata") &&
            got.value()["metadata"].contains("deletionTimestamp")) {
          (void)store_.Delete(*api, false);
          NotifyChange();
        }
      }
      lock.lock();
    }
  }

  // The webhook's denial, then the namespace's ResourceQuotas'.
  std::optional<ApiError> AdmitPod(const ApiPath& api, const json& pod) {
    {
      std::lock_guard<std::mutex> lock(hook_mu_);
      if (pod_hook_) {
        const std::string denied = pod_hook_(pod);
        if (!denied.empty()) return WebhookDenial(pod, pod_hook_name_, denied);
      }
    }
    std::string ns = api.namespace_name;
    if (ns.empty() && pod.is_object() && pod.contains("metadata") && pod["metadata"].is_object()) {
      const json& m = pod["metadata"];
      if (m.contains("namespace") && m["namespace"].is_string()) ns = m["namespace"];
    }
    if (ns.empty()) return std::nullopt;
    const std::string ns_path = "/api/v1/namespaces/" + ns;
    const auto list = [&](const std::string& plural) {
      std::optional<ApiPath> collection = store_.Parse(ns_path + "/" + plural);
      if (!collection) return std::vector<json>();
      ApiResult<json> items = store_.List(*collection, ListOptions{});
      if (!items.ok()) return std::vector<json>();
      return items.value()["items"].get<std::vector<json>>();
    };
    const std::vector<json> quotas = list("resourcequotas");
    if (quotas.empty()) return std::nullopt;
    return QuotaRefusal(pod, quotas, list("pods"));
  }

  // `verb` is the audit verb ("list", "watch", ...): a fault named by verb
  // fails only that kind of GET.
  std::optional<Fault> TakeFault(const std::string& method, const std::string& verb,
                                 const std::string& path) {
    std::lock_guard<std::mutex> lock(fault_mu_);
    for (auto it = faults_.begin(); it != faults_.end(); ++it) {
      if ((it->method.empty() || it->method == method || it->method == verb) &&
          path.find(it->path_substring) != std::string::npos) {
        Fault fault = *it;
        if (--it->remaining <= 0) faults_.erase(it);
        return fault;
      }
    }
    return std::nullopt;
  }

  // Returns whether the connection may be kept open.
  bool HandleRequest(Stream& stream, const Request& req) {
    const std::string method(req.method_string());
    const std::string target(req.target());
    const size_t qmark = target.find('?');
    const std::string path = target.substr(0, qmark);
    const auto query = ParseQuery(qmark == std::string::npos ? "" : target.substr(qmark + 1));
    {
      std::lock_guard<std::mutex> lock(count_mu_);
      ++counts_[{method, path}];
    }
    const int64_t latency_ms = latency_ms_;
    if (latency_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(latency_ms));
    const bool keep_alive = req.keep_alive();
    const AuditRecord request_info = DescribeRequest(method, path, query);
    const std::string user_agent(req[http::field::user_agent]);
    auto audit = [&](int code) { Audit(request_info, user_agent, code); };

    auto auth = req.find(http::field::authorization);
    if (auth == req.end() || std::string(auth->value()) != "Bearer " + token()) {
      audit(401);
      return WriteReply(stream, ErrorReply({401, "Unauthorized", "Unauthorized", "", "", ""}),
                        req.version(), keep_alive) &&
             keep_alive;
    }
    if (HangIfAsked(stream, method, path, user_agent)) {
      audit(0);      // never answered
      return false;  // close the connection without an answer
    }
    if (std::optional<Fault> fault = TakeFault(method, request_info.verb, path)) {
      std::string reason = ReasonForCode(fault->code);
      std::string message = "injected failure for " + method + " " + path;
      if (fault->code == 409) {
        message =
            "Operation cannot be fulfilled: the object has been modified; please apply "
            "your changes to the latest version and try again (injected)";
      } else if (fault->code == 410) {
        message = "too old resource version (injected)";
      }
      audit(fault->code);
      return WriteReply(
                 stream,
                 ErrorReply({fault->code, reason, message, "", "", ""}, fault->retry_after_seconds),
                 req.version(), keep_alive) &&
             keep_alive;
    }

    if (method == "GET" && IsTrue(Param(query, "watch"))) {
      if (std::optional<ApiPath> api = store_.Parse(path); api && api->name.empty()) {
        return ServeWatch(stream, req, *api, query, audit);
      }
    }
    Reply reply = Route(req, method, path, query);
    audit(reply.code);
    return WriteReply(stream, reply, req.version(), keep_alive) && keep_alive;
  }

  void Audit(AuditRecord record, const std::string& user_agent, int code) {
    record.user_agent = user_agent;
    record.code = code;
    record.time = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(audit_mu_);
    audit_.push_back(std::move(record));
  }

  // The fieldValidation parameter, or the 422 kube-apiserver answers for an
  // unknown value (for `options_kind` CreateOptions, UpdateOptions or
  // PatchOptions).
  static ApiResult<FieldValidation> FieldValidationParam(
      const std::map<std::string, std::string>& query, const std::string& options_kind) {
    const std::string value = Param(query, "fieldValidation");
    if (std::optional<FieldValidation> parsed = ParseFieldValidation(value)) return *parsed;
    ApiError error(422, "Invalid",
                   options_kind +
                       ".meta.k8s.io \"\" is invalid: fieldValidation: Unsupported "
                       "value: " +
                       GoQuote(value) +
                       ": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
                   "", "meta.k8s.io", options_kind);
    return error;
  }

  // A write's answer, with a Warning header per field dropped under
  // fieldValidation=Warn (kubectl prints them as "Warning: ...").
  static Reply WriteResult(ApiResult<json> result, int code,
                           const std::vector<std::string>& warnings) {
    Reply reply = FromResult(std::move(result), code);
    for (const std::string& warning : warnings) {
      reply.headers.emplace_back("Warning", "299 - " + GoQuote(warning));
    }
    return reply;
  }

  Reply Route(const Request& req, const std::string& method, const std::string& path,
              const std::map<std::string, std::string>& query) {
    if (path == "/healthz" || path == "/livez" || path == "/readyz") {
      Reply r;
      r.text = "ok";
      return r;
    }
    if (path == "/version") {
      Reply r;
      r.body = {{"major", "1"},
                {"minor", "32"},
                {"gitVersion", "v1.32.0-pacer-test"},
                {"gitCommit", "0000000000000000000000000000000000000000"},
                {"gitTreeState", "clean"},
                {"buildDate", "2025-01-01T00:00:00Z"},
                {"goVersion", "go1.23.0"},
                {"compiler", "gc"},
                {"platform", "linux/amd64"}};
      return r;
    }
    if (path == "/api" || path == "/api/") {
      Reply r;
      r.body = {{"kind", "APIVersions"},
                {"versions", {"v1"}},
                {"serverAddressByClientCIDRs",
                 {{{"clientCIDR", "0.0.0.0/0"},
                   {"serverAddress", "127.0.0.1:" + std::to_string(port_)}}}}};
      return r;
    }
    if (path == "/apis" || path == "/apis/") return Discovery(json(), "");
    if (path == "/openapi/v3" || path == "/openapi/v3/") {
      Reply r;
      r.body = OpenApiV3Root(store_.Resources());
      return r;
    }
    if (path.rfind("/openapi/v3/", 0) == 0) {
      if (auto doc = OpenApiV3GroupVersion(store_.Resources(), path.substr(12))) {
        Reply r;
        r.body = std::move(*doc);
        return r;
      }
    }
    if (path == "/api/v1") return ResourceList("", "v1");
    if (path.rfind("/apis/", 0) == 0) {
      std::string rest = path.substr(6);
      if (!rest.empty() && rest.back() == '/') rest.pop_back();
      size_t slash = rest.find('/');
      if (slash == std::string::npos) return Discovery(json(), rest);
      if (rest.find('/', slash + 1) == std::string::npos) {
        return ResourceList(rest.substr(0, slash), rest.substr(slash + 1));
      }
    }
    std::optional<ApiPath> api = store_.Parse(path);
    if (!api) {
      return ErrorReply(
          {404, "NotFound", "the server could not find the requested resource", "", "", ""});
    }
    const ResourceInfo& r = *api->resource;
    const bool table = std::string(req[http::field::accept]).find("as=Table") != std::string::npos;
    if (api->name.empty()) {
      if (method == "GET") return List(*api, query, table);
      if (method == "POST") {
        json body = json::parse(req.body(), nullptr, false);
        if (body.is_discarded()) return ErrorReply(BadRequest("the request body is not JSON"));
        ApiResult<FieldValidation> validation = FieldValidationParam(query, "CreateOptions");
        if (!validation.ok()) return ErrorReply(validation.error());
        std::vector<std::string> warnings;
        if (r.group.empty() && r.plural == "pods") {
          // Admission and creation together, so that parallel creates cannot
          // both fit in what is left of a quota.
          std::lock_guard<std::mutex> lock(admission_mu_);
          if (std::optional<ApiError> refused = AdmitPod(*api, body)) return ErrorReply(*refused);
          return WriteResult(
              store_.Create(*api, std::move(body), false, {validation.value(), &warnings}), 201,
              warnings);
        }
        return WriteResult(
            store_.Create(*api, std::move(body), false, {validation.value(), &warnings}), 201,
            warnings);
      }
      if (method == "DELETE") return DeleteCollection(*api, query);
      return ErrorReply({405, "MethodNotAllowed",
                         method + " is not supported on a collection of " + r.plural, "", r.group,
                         r.plural});
    }
    const UpdateScope scope =
        api->subresource == "status" ? UpdateScope::kStatus : UpdateScope::kMain;
    if (method == "GET") {
      ApiResult<json> got = store_.Get(*api);
      if (!got.ok() || !table) return FromResult(std::move(got), 200);
      Reply reply;
      reply.body =
          ToTable(r, {got.value()},
                  {{"resourceVersion", FieldAsString(got.value(), "metadata.resourceVersion")}},
                  Param(query, "includeObject"));
      return reply;
    }
    if (method == "PUT") {
      json body = json::parse(req.body(), nullptr, false);
      if (body.is_discarded()) return ErrorReply(BadRequest("the request body is not JSON"));
      ApiResult<FieldValidation> validation = FieldValidationParam(query, "UpdateOptions");
      if (!validation.ok()) return ErrorReply(validation.error());
      std::vector<std::string> warnings;
      return WriteResult(
          store_.Update(*api, std::move(body), scope, {validation.value(), &warnings}), 200,
          warnings);
    }
    if (method == "PATCH") {
      const std::string content_type(req[http::field::content_type]);
      PatchType type;
      if (content_type.find("application/merge-patch+json") == 0) {
        type = PatchType::kMerge;
      } else if (content_type.find("application/strategic-merge-patch+json") == 0) {
        type = PatchType::kStrategicMerge;
      } else if (content_type.find("application/json-patch+json") == 0) {
        type = PatchType::kJson;
      } else {
        return ErrorReply({415, "UnsupportedMediaType",
                           "the body of the request was in an unknown format - accepted media "
                           "types include: application/json-patch+json, "
                           "application/merge-patch+json, application/strategic-merge-patch+json",
                           "", "", ""});
      }
      json patch = json::parse(req.body(), nullptr, false);
      if (patch.is_discarded()) return ErrorReply(BadRequest("the patch is not JSON"));
      ApiResult<FieldValidation> validation = FieldValidationParam(query, "PatchOptions");
      if (!validation.ok()) return ErrorReply(validation.error());
      std::vector<std::string> warnings;
      return WriteResult(store_.Patch(*api, type, patch, scope, {validation.value(), &warnings}),
                         200, warnings);
    }
    if (method == "DELETE") {
      bool orphan = Param(query, "propagationPolicy") == "Orphan";
      json options = json::parse(req.body(), nullptr, false);
      if (options_.graceful_pod_deletion && r.group.empty() && r.plural == "pods") {
        if (std::optional<int64_t> grace = GracePeriod(*api, options, query); grace && *grace > 0) {
          ApiResult<json> marked = store_.MarkTerminating(*api, *grace);
          if (marked.ok()) ScheduleRemoval(path, *grace);
          return FromResult(std::move(marked), 200);
        }
      }
      if (options.is_object() && options.value("propagationPolicy", "") == "Orphan") orphan = true;
      if (options.is_object() && options.value("orphanDependents", false)) orphan = true;
      return FromResult(store_.Delete(*api, orphan), 200);
    }
    return ErrorReply({405, "MethodNotAllowed", method + " is not supported on " + r.plural, "",
                       r.group, r.plural});
  }

  static Reply FromResult(ApiResult<json> result, int code) {
    if (!result.ok()) return ErrorReply(result.error());
    Reply reply;
    reply.code = code;
    reply.body = std::move(result.value());
    return reply;
  }

  static ApiResult<ListOptions> ParseListOptions(const std::map<std::string, std::string>& query) {
    ListOptions options;
    ApiResult<Selector> labels = Selector::ParseLabels(Param(query, "labelSelector"));
    if (!labels.ok()) return labels.error();
    ApiResult<Selector> fields = Selector::ParseFields(Param(query, "fieldSelector"));
    if (!fields.ok()) return fields.error();
    options.labels = labels.value();
    options.fields = fields.value();
    const std::string limit = Param(query, "limit");
    if (!limit.empty()) {
      try {
        options.limit = std::stoll(limit);
      } catch (const std::exception&) {
        return BadRequest("limit \"" + limit + "\" is not an integer");
      }
    }
    options.continue_token = Param(query, "continue");
    return options;
  }

  Reply List(const ApiPath& api, const std::map<std::string, std::string>& query, bool table) {
    ApiResult<ListOptions> options = ParseListOptions(query);
    if (!options.ok()) return ErrorReply(options.error());
    bool stuck = false;
    {
      std::lock_guard<std::mutex> lock(fault_mu_);
      stuck = !repeat_continue_path_.empty() && api.resource->plural == repeat_continue_path_;
    }
    if (stuck) options.value().continue_token.clear();  // the first page, again
    ApiResult<json> list = store_.List(api, options.value());
    if (stuck && list.ok()) list.value()["metadata"]["continue"] = "stuck";
    if (!list.ok() || !table) return FromResult(std::move(list), 200);
    std::vector<json> items = list.value()["items"].get<std::vector<json>>();
    Reply reply;
    reply.body =
        ToTable(*api.resource, items, list.value()["metadata"], Param(query, "includeObject"));
    return reply;
  }

  Reply DeleteCollection(const ApiPath& api, const std::map<std::string, std::string>& query) {
    ApiResult<ListOptions> options = ParseListOptions(query);
    if (!options.ok()) return ErrorReply(options.error());
    options.value().limit = 0;
    ApiResult<json> list = store_.List(api, options.value());
    if (!list.ok()) return ErrorReply(list.error());
    json deleted = json::array();
    for (const json& item : list.value()["items"]) {
      ApiPath one = api;
      one.namespace_name = FieldAsString(item, "metadata.namespace");
      one.name = FieldAsString(item, "metadata.name");
      ApiResult<json> result = store_.Delete(one, false);
      if (result.ok()) deleted.push_back(result.value());
    }
    Reply reply;
    reply.body = list.value();
    reply.body["items"] = deleted;
    return reply;
  }

  Reply Discovery(const json&, const std::string& only_group) {
    std::map<std::string, std::string> groups;  // group -> version
    for (const auto& r : store_.Resources()) {
      if (!r->group.empty()) groups[r->group] = r->version;
    }
    auto group_json = [](const std::string& g, const std::string& v) {
      json version = {{"groupVersion", g + "/" + v}, {"version", v}};
      return json{{"name", g}, {"versions", {version}}, {"preferredVersion", version}};
    };
    Reply reply;
    if (!only_group.empty()) {
      auto it = groups.find(only_group);
      if (it == groups.end()) {
        return ErrorReply(
            {404, "NotFound", "the server could not find the requested resource", "", "", ""});
      }
      reply.body = group_json(it->first, it->second);
      reply.body["kind"] = "APIGroup";
      reply.body["apiVersion"] = "v1";
      return reply;
    }
    json list = json::array();
    for (const auto& [g, v] : groups) list.push_back(group_json(g, v));
    reply.body = {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", list}};
    return reply;
  }

  Reply ResourceList(const std::string& group, const std::string& version) {
    json resources = json::array();
    for (const auto& r : store_.Resources()) {
      if (r->group != group || r->version != version) continue;
      json entry = {{"name", r->plural},
                    {"singularName", r->singular},
                    {"namespaced", r->namespaced},
                    {"kind", r->kind},
                    {"verbs", VerbsFor(false)}};
      if (!r->short_names.empty()) entry["shortNames"] = r->short_names;
      if (group.empty() && (r->plural == "pods" || r->plural == "services")) {
        entry["categories"] = {"all"};
      }
      if (group == "apps") entry["categories"] = {"all"};
      if (!r->categories.empty()) entry["categories"] = r->categories;
      resources.push_back(entry);
      if (r->has_status) {
        resources.push_back({{"name", r->plural + "/status"},
                             {"singularName", ""},
                             {"namespaced", r->namespaced},
                             {"kind", r->kind},
                             {"verbs", VerbsFor(true)}});
      }
    }
    if (resources.empty()) {
      return ErrorReply(
          {404, "NotFound", "the server could not find the requested resource", "", "", ""});
    }
    Reply reply;
    reply.body = {{"kind", "APIResourceList"},
                  {"apiVersion", "v1"},
                  {"groupVersion", group.empty() ? version : group + "/" + version},
                  {"resources", resources}};
    return reply;
  }

  bool WriteChunk(Stream& stream, const std::string& data) {
    beast::error_code ec;
    net::write(stream, http::make_chunk(net::buffer(data)), ec);
    return !ec;
  }

  bool ServeWatch(Stream& stream, const Request& req, const ApiPath& api,
                  const std::map<std::string, std::string>& query,
                  const std::function<void(int)>& audit) {
    http::response<http::empty_body> res{http::status::ok, req.version()};
    res.set(http::field::server, "pacer-test-apiserver");
    res.set(http::field::content_type, "application/json");
    res.set(http::field::cache_control, "no-cache, private");
    res.keep_alive(req.keep_alive());
    res.chunked(true);
    http::response_serializer<http::empty_body> serializer{res};
    beast::error_code ec;

    ApiResult<ListOptions> options = ParseListOptions(query);
    std::shared_ptr<Watcher> watcher;
    ApiError failure;
    bool failed = !options.ok();
    if (failed) {
      failure = options.error();
    } else {
      auto watched = store_.Watch(api, options.value().labels, options.value().fields,
                                  Param(query, "resourceVersion"));
      if (watched.ok()) {
        watcher = watched.value();
      } else {
        failed = true;
        failure = watched.error();
      }
    }
    if (failed && failure.code != 410) {
      audit(failure.code);
      return WriteReply(stream, ErrorReply(failure), req.version(), req.keep_alive()) &&
             req.keep_alive();
    }
    audit(200);  // a 410 is an ERROR event inside a 200 stream
    http::write_header(stream, serializer, ec);
    if (ec) {
      if (watcher) store_.Unwatch(watcher);
      return false;
    }
    if (failed) {
      // Like the real server: a 200 stream with one ERROR event, then the end.
      const std::string line =
          json{{"type", "ERROR"}, {"object", StatusJson(failure)}}.dump() + "\n";
      if (!WriteChunk(stream, line)) return false;
      net::write(stream, http::make_chunk_last(), ec);
      return false;  // the real server closes the connection too
    }
    NotifyChange();  // OpenWatchCount() changed

    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    int64_t timeout_seconds = 0;
    try {
      timeout_seconds = std::stoll(Param(query, "timeoutSeconds"));
    } catch (const std::exception&) {
      timeout_seconds = 0;
    }
    if (timeout_seconds <= 0) {
      // The real server's default: a random 5 to 10 minutes.
      std::mt19937 rng(std::random_device{}());
      timeout_seconds = std::uniform_int_distribution<int64_t>(300, 600)(rng);
    }
    const auto deadline = start + std::chrono::seconds(timeout_seconds);
    const bool bookmarks = IsTrue(Param(query, "allowWatchBookmarks"));
    const auto interval = std::max(options_.bookmark_interval, std::chrono::milliseconds(1));
    auto next_bookmark = start + interval;
    const ResourceInfo& r = *api.resource;

    bool clean_end = false;
    for (;;) {
      if (stopping_) break;
      auto wake = std::min(deadline, Clock::now() + kStopCheckInterval);
      if (bookmarks) wake = std::min(wake, next_bookmark);
      std::string line;
      Watcher::Wake woke = watcher->Next(wake, &line);
      if (woke == Watcher::Wake::kDropped) break;
      if (woke == Watcher::Wake::kLine) {
        if (!WriteChunk(stream, line)) break;
      }
      const auto now = Clock::now();
      if (now >= deadline) {
        clean_end = true;
        break;
      }
      if (bookmarks && now >= next_bookmark) {
        if (std::optional<int64_t> version = watcher->BookmarkVersion()) {
          const json bookmark = {{"type", "BOOKMARK"},
                                 {"object",
                                  {{"kind", r.kind},
                                   {"apiVersion", r.api_version()},
                                   {"metadata", {{"resourceVersion", std::to_string(*version)}}}}}};
          if (!WriteChunk(stream, bookmark.dump() + "\n")) break;
          next_bookmark = now + interval;
        }
      }
    }
    store_.Unwatch(watcher);
    NotifyChange();
    if (!clean_end) return false;  // dropped or stopping: close abruptly
    net::write(stream, http::make_chunk_last(), ec);
    return !ec && req.keep_alive();
  }

  const TestApiServerOptions options_;
  const TlsMaterial tls_;
  std::mutex reap_mu_;
  std::condition_variable reap_cv_;
  std::multimap<std::chrono::steady_clock::time_point, std::string> reap_;  // guarded by reap_mu_
  std::thread reaper_;  // started by the first graceful deletion

  std::mutex admission_mu_;  // a pod's admission and creation, one at a time
  std::mutex hook_mu_;
  std::string pod_hook_name_;                         // guarded by hook_mu_
  std::function<std::string(const json&)> pod_hook_;  // guarded by hook_mu_

  mutable std::mutex token_mu_;
  std::string token_;  // guarded by token_mu_

  struct HangRule {
    std::string method;
    std::string path_substring;
    std::string user_agent;
    TestApiServer::HangPoint at;
  };
  mutable std::mutex hang_mu_;
  std::condition_variable hang_cv_;  // StopHanging() or Stop()
  std::vector<HangRule> hangs_;      // guarded by hang_mu_
  uint64_t hang_release_seq_ = 0;    // guarded by hang_mu_
  uint64_t headers_release_seq_ = 0;  // guarded by hang_mu_; SendHeldHeaders()
  int hung_ = 0;                     // guarded by hang_mu_
  net::io_context ioc_;
  ssl::context ssl_ctx_;
  tcp::acceptor acceptor_;
  int port_ = 0;
  int wake_pipe_[2] = {-1, -1};
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;

  ObjectStore store_;

  std::mutex conn_mu_;
  std::map<uint64_t, Connection> conns_;
  std::vector<uint64_t> finished_;
  uint64_t next_connection_id_ = 0;

  std::mutex fault_mu_;
  std::vector<Fault> faults_;
  std::string repeat_continue_path_;  // guarded by fault_mu_; "": off
  std::atomic<int64_t> latency_ms_{0};

  mutable std::mutex count_mu_;
  std::map<std::pair<std::string, std::string>, int64_t> counts_;

  mutable std::mutex audit_mu_;
  std::vector<AuditRecord> audit_;

  mutable std::mutex wait_mu_;
  mutable std::condition_variable wait_cv_;
  mutable uint64_t change_seq_ = 0;
};

// --- TestApiServer -------------------------------------------------------------

StatusOr<std::unique_ptr<TestApiServer>> TestApiServer::Start(TestApiServerOptions options) {
  ASSIGN_OR_RETURN(TlsMaterial tls, GenerateTlsMaterial(options.bind_address));
  auto impl = std::make_unique<Impl>(std::move(options), std::move(tls));
  RETURN_IF_ERROR(impl->Listen());
  return std::unique_ptr<TestApiServer>(new TestApiServer(std::move(impl)));
}

TestApiServer::TestApiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TestApiServer::~TestApiServer() { impl_->Stop(); }

std::string TestApiServer::url() const { return impl_->url(); }
const std::string& TestApiServer::ca_pem() const { return impl_->tls().ca_pem; }
std::string TestApiServer::token() const { return impl_->token(); }
void TestApiServer::RotateToken(const std::string& new_token) { impl_->RotateToken(new_token); }
void TestApiServer::HangRequests(const std::string& method, const std::string& path_substring,
                                 const std::string& user_agent, HangPoint at) {
  impl_->HangRequests(method, path_substring, user_agent, at);
}
void TestApiServer::StopHanging() { impl_->StopHanging(); }
void TestApiServer::SendHeldHeaders() { impl_->SendHeldHeaders(); }
void TestApiServer::SetPodAdmissionHook(
    const std::string& name, std::function<std::string(const nlohmann::json& pod)> deny) {
  impl_->SetPodAdmissionHook(name, std::move(deny));
}
int TestApiServer::HungRequestCount() const { return impl_->HungRequestCount(); }

Status TestApiServer::WriteKubeconfig(const std::string& path,
                                      const std::string& namespace_name) const {
  const std::string text =
      "apiVersion: v1\n"
      "kind: Config\n"
      "clusters:\n"
      "- name: pacer-test\n"
      "  cluster:\n"
      "    server: " +
      url() +
      "\n"
      "    certificate-authority-data: " +
      Base64(ca_pem()) +
      "\n"
      "users:\n"
      "- name: pacer-test\n"
      "  user:\n"
      "    token: " +
      token() +
      "\n"
      "contexts:\n"
      "- name: pacer-test\n"
      "  context:\n"
      "    cluster: pacer-test\n"
      "    user: pacer-test\n"
      "    namespace: " +
      namespace_name +
      "\n"
      "current-context: pacer-test\n";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return UnavailableError("cannot write the kubeconfig " + path + ": " + std::strerror(errno) +
                            "; check that its directory exists and is writable");
  }
  ::fchmod(fd, 0600);
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return UnavailableError("writing the kubeconfig " + path +
                              " failed: " + std::strerror(errno));
    }
    written += static_cast<size_t>(n);
  }
  ::close(fd);
  return Status::Ok();
}

namespace {

Status NoSuchPath(const std::string& path) {
  return NotFoundError("\"" + path +
                       "\" names no served resource; use an API path like "
                       "/api/v1/namespaces/NS/pods/NAME or "
                       "/apis/pacer.dev/v1alpha1/namespaces/NS/trainjobs/NAME");
}

}  // namespace

StatusOr<json> TestApiServer::GetObject(const std::string& path) const {
  std::optional<ApiPath> api = impl_->store().Parse(path);
  if (!api || api->name.empty()) return NoSuchPath(path);
  ApiResult<json> result = impl_->store().Get(*api);
  if (!result.ok()) return ToStatus(result.error());
  return std::move(result.value());
}

StatusOr<json> TestApiServer::CreateObject(const std::string& collection_path, json object) {
  std::optional<ApiPath> api = impl_->store().Parse(collection_path);
  if (!api || !api->name.empty()) return NoSuchPath(collection_path);
  ApiResult<json> result = impl_->store().Create(*api, std::move(object), true);
  impl_->NotifyChange();
  if (!result.ok()) return ToStatus(result.error());
  return std::move(result.value());
}

StatusOr<json> TestApiServer::UpdateObject(const std::string& path, json object) {
  std::optional<ApiPath> api = impl_->store().Parse(path);
  if (!api || api->name.empty()) return NoSuchPath(path);
  ApiResult<json> result = impl_->store().Update(*api, std::move(object), UpdateScope::kAll);
  impl_->NotifyChange();
  if (!result.ok()) return ToStatus(result.error());
  return std::move(result.value());
}

Status TestApiServer::DeleteObject(const std::string& path) {
  std::optional<ApiPath> api = impl_->store().Parse(path);
  if (!api || api->name.empty()) return NoSuchPath(path);
  ApiResult<json> result = impl_->store().Delete(*api, false);
  impl_->NotifyChange();
  if (!result.ok()) return ToStatus(result.error());
  return Status::Ok();
}

std::vector<json> TestApiServer::ListObjects(const std::string& collection_path) const {
  std::optional<ApiPath> api = impl_->store().Parse(collection_path);
  if (!api || !api->name.empty()) return {};
  ApiResult<json> list = impl_->store().List(*api, ListOptions{});
  if (!list.ok()) return {};
  return list.value()["items"].get<std::vector<json>>();
}

void TestApiServer::FailNextRequests(const std::string& method, const std::string& path_substring,
                                     int http_code, int count, int retry_after_seconds) {
  impl_->FailNext(method, path_substring, http_code, count, retry_after_seconds);
}

void TestApiServer::RepeatListContinueToken(const std::string& plural) {
  impl_->RepeatContinue(plural);
}

void TestApiServer::DropWatches() {
  impl_->store().DropWatches();
  impl_->NotifyChange();
}

void TestApiServer::CompactHistory() {
  impl_->store().CompactHistory();
  impl_->NotifyChange();
}

void TestApiServer::SetLatency(std::chrono::milliseconds latency) { impl_->SetLatency(latency); }

int64_t TestApiServer::RequestCount(const std::string& method,
                                    const std::string& path_substring) const {
  return impl_->RequestCount(method, path_substring);
}

int TestApiServer::OpenWatchCount() const { return impl_->store().OpenWatchCount(); }

std::vector<AuditRecord> TestApiServer::AuditLog() const { return impl_->AuditLog(); }

bool TestApiServer::WaitFor(const std::function<bool()>& pred,
                            std::chrono::milliseconds timeout) const {
  return impl_->WaitFor(pred, timeout);
}

}  // namespace pacer::testing
