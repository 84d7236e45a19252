#include "kube/kube_client.h"

#include <cpprest/http_client.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <condition_variable>
#include <mutex>
#include <unordered_set>

#include "core/json_fields.h"
#include "http/bounded_body.h"
#include "http/task_wait.h"
#include "kube/token_source.h"

namespace pacer::controller {
namespace {

using nlohmann::json;
namespace http = web::http;

constexpr auto kCancelPoll = std::chrono::milliseconds(50);
// How long a cancelled request may take to let go of its connection.
constexpr auto kCancelGrace = std::chrono::seconds(5);

// The certificates in a PEM bundle (empty when none parse).
std::vector<X509*> ReadCertificates(const std::string& pem) {
  std::vector<X509*> certs;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return certs;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) certs.push_back(cert);
  ERR_clear_error();  // the loop ends on a "no start line" error
  BIO_free(bio);
  return certs;
}

// Trust the cluster CA and nothing else: cpprestsdk has already loaded the
// system store, which must not vouch for an API server.
void TrustOnly(boost::asio::ssl::context& ctx, const std::string& ca_pem) {
  X509_STORE* store = X509_STORE_new();
  for (X509* cert : ReadCertificates(ca_pem)) {
    X509_STORE_add_cert(store, cert);
    X509_free(cert);
  }
  SSL_CTX_set_cert_store(ctx.native_handle(), store);  // takes ownership
}

Status UseClientCertificate(boost::asio::ssl::context& ctx, const KubeConfig& config) {
  if (config.client_cert_pem.empty()) return Status::Ok();
  boost::system::error_code ec;
  ctx.use_certificate_chain(boost::asio::buffer(config.client_cert_pem), ec);
  if (ec) {
    return InvalidArgumentError("client certificate is not a PEM certificate: " + ec.message());
  }
  // The key's own error text could quote it: say only that it failed.
  ctx.use_private_key(boost::asio::buffer(config.client_key_pem), boost::asio::ssl::context::pem,
                      ec);
  if (ec) {
    return InvalidArgumentError(
        "client key is not a PEM private key matching the client certificate");
  }
  return Status::Ok();
}

Status ValidateConfig(const KubeConfig& config) {
  if (config.server.rfind("https://", 0) != 0) {
    return InvalidArgumentError("API server address \"" + config.server +
                                "\" must start with https:// (TLS is required)");
  }
  const std::vector<X509*> certs = ReadCertificates(config.ca_pem);
  const bool have_ca = !certs.empty();
  for (X509* cert : certs) X509_free(cert);
  if (!have_ca) {
    return InvalidArgumentError(
        "the cluster CA holds no PEM certificate: set certificate-authority(-data) in the "
        "kubeconfig");
  }
  if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
    return InvalidArgumentError("a client certificate needs its key and a key its certificate");
  }
  if (!config.client_cert_pem.empty()) {
    boost::asio::ssl::context scratch(boost::asio::ssl::context::tls_client);
    RETURN_IF_ERROR(UseClientCertificate(scratch, config));
  }
  return Status::Ok();
}

// Percent-encodes a query value (RFC 3986 unreserved characters stay).
std::string Encode(const std::string& value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

class Query {
 public:
  Query& Add(const std::string& name, const std::string& value) {
    if (value.empty()) return *this;
    text_ += (text_.empty() ? "?" : "&") + name + "=" + Encode(value);
    return *this;
  }
  const std::string& str() const { return text_; }

 private:
  std::string text_;
};

// Waits for `task`, polling `cancel`; on cancel, cancels the request (which
// closes its connection) and returns false.
template <typename T>
bool WaitUnlessCancelled(const pplx::task<T>& task, const std::atomic<bool>* cancel,
                         pplx::cancellation_token_source& cts) {
  if (cancel == nullptr) {
    task.wait();
    return true;
  }
  const std::shared_ptr<TaskCompletion> completion = CompletionOf(task);
  std::unique_lock<std::mutex> lock(completion->mu);
  while (!completion->cv.wait_for(lock, kCancelPoll, [&] { return completion->done; })) {
    if (cancel->load()) {
      cts.cancel();
      completion->cv.wait_for(lock, kCancelGrace, [&] { return completion->done; });
      return false;
    }
  }
  return true;
}

std::optional<int64_t> RetryAfterHeader(const http::http_response& response) {
  auto it = response.headers().find("Retry-After");
  if (it == response.headers().end()) return std::nullopt;
  char* end = nullptr;
  const long long seconds = std::strtoll(it->second.c_str(), &end, 10);
  if (end == it->second.c_str()) return std::nullopt;
  return seconds;
}

}  // namespace

struct KubeClient::Impl {
  KubeConfig config;
  KubeClientOptions options;
  std::string host;  // for TLS error messages
  std::unique_ptr<http::client::http_client> client;
  std::unique_ptr<BearerTokenSource> tokens;  // rotates with KubeConfig::token_file
  // SetRequestDeadline's point in steady nanoseconds since the clock's epoch; 0 = none.
  std::atomic<int64_t> request_deadline_ns{0};
  // FenceWrites: set once, never cleared.
  std::atomic<bool> writes_fenced{false};
  std::mutex fence_mu;
  std::string fence_reason;  // guarded by fence_mu

  // Unavailable for a write of anything but a Lease once writes are fenced.
  Status CheckFence(const ResourceRef& resource, const char* verb) {
    if (!writes_fenced.load() || resource.plural == kLeases.plural) return Status::Ok();
    std::lock_guard<std::mutex> lock(fence_mu);
    return UnavailableError(std::string(verb) + " " + resource.plural +
                            " refused: " + fence_reason);
  }

  http::client::http_client_config MakeClientConfig(std::chrono::milliseconds timeout) const {
    http::client::http_client_config c;
    c.set_timeout(timeout);
    c.set_validate_certificates(true);  // chain and host name (RFC 2818)
    // Not followed: cpprestsdk's redirected request carries the bearer
    // token to wherever the redirect points and drops the answer limit.
    c.set_max_redirects(0);
    // A copy, not this client's: cpprestsdk may still run the callback for a
    // cancelled or timed-out request after the client is gone (TSan saw a
    // leader elector's client freed under a TLS handshake).
    auto cfg = std::make_shared<const KubeConfig>(config);
    c.set_ssl_context_callback([cfg](boost::asio::ssl::context& ctx) {
      TrustOnly(ctx, cfg->ca_pem);
      // Validated in Create(); a failure here fails the handshake, which is reported.
      (void)UseClientCertificate(ctx, *cfg);
    });
    return c;
  }

  http::http_request NewRequest(const http::method& method, const std::string& path_and_query,
                                const json* body, const std::string& content_type) const {
    http::http_request request(method);
    request.set_request_uri(web::uri(path_and_query));
    request.headers().add("Accept", "application/json");
    request.headers().add("User-Agent", options.user_agent);
    if (!config.bearer_token.empty()) {
      request.headers().add("Authorization", "Bearer " + tokens->Token());
    }
    if (body != nullptr) {
      // Bytes, not set_body(std::string): cpprestsdk reads a std::string body
      // through a streambuf of the wrong type (UBSan reports it). A
      // Content-Type set first is kept.
      request.headers().set_content_type(content_type);
      const std::string text = body->dump();
      request.set_body(std::vector<unsigned char>(text.begin(), text.end()));
    }
    return request;
  }

  // The bearer token `request` carries ("" for none).
  static std::string SentToken(const http::http_request& request) {
    static const std::string kPrefix = "Bearer ";
    const auto& headers = request.headers();
    auto it = headers.find("Authorization");
    if (it == headers.end() || it->second.rfind(kPrefix, 0) != 0) return "";
    return it->second.substr(kPrefix.size());
  }

  // An exception of cpprestsdk as a Status. The text never holds the token:
  // cpprestsdk's messages name only the failing step.
  Status FromException(const std::string& verb, const std::string& path,
                       const std::exception& e) const {
    const std::string what = e.what();
    if (const auto* he = dynamic_cast<const http::http_exception*>(&e)) {
      if (he->error_code() == std::errc::timed_out) {
        return Status(StatusCode::kDeadlineExceeded,
                      verb + " " + path + ": no answer from the API server within " +
                          std::to_string(options.request_timeout.count()) + " ms");
      }
    }
    std::string lower = what;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.find("ssl") != std::string::npos || lower.find("handshake") != std::string::npos ||
        lower.find("certificate") != std::string::npos) {
      return UnavailableError(
          verb + " " + path + ": TLS handshake with " + config.server + " failed (" + what +
          "): the server certificate is not signed by the cluster CA or does not name " + host +
          "; check certificate-authority(-data) and the server address in the kubeconfig");
    }
    return UnavailableError(verb + " " + path + ": cannot reach the API server at " +
                            config.server + ": " + what);
  }

  // A request whose answer cpprestsdk stops reading past max_response_bytes.
  http::http_request NewLimitedRequest(const http::method& method,
                                       const std::string& path_and_query, const json* body,
                                       const std::string& content_type,
                                       const AnswerLimit& limit) const {
    http::http_request request = NewRequest(method, path_and_query, body, content_type);
    limit.StopReadingPast(request);
    return request;
  }

  // Reads a whole answer, at most max_response_bytes.
  StatusOr<std::string> ReadBody(http::http_response& response, const std::string& verb,
                                 const std::string& path, const AnswerLimit& limit) {
    return ReadBoundedBody(response, limit, verb + " " + path,
                           " (KubeClientOptions::max_response_bytes); use paging or a narrower "
                           "selector",
                           RequestDeadline());
  }

  StatusOr<json> Call(const http::method& method, const std::string& path, const std::string& query,
                      const json* body, const std::string& content_type = "application/json") {
    const std::string verb = method;
    pplx::cancellation_token_source cts;
    try {
      AnswerLimit limit(options.max_response_bytes);
      http::http_request request =
          NewLimitedRequest(method, path + query, body, content_type, limit);
      const std::string sent = SentToken(request);
      http::http_response response = Await(client->request(request, cts.get_token()));
      // A 401 after the token file changed (a bound token rotated): retry
      // once with the new token.
      if (response.status_code() == 401 && tokens->RefreshAfterUnauthorized(sent)) {
        (void)ReadBody(response, verb, path, limit);       // frees the connection for the retry
        limit = AnswerLimit(options.max_response_bytes);   // and the first may have passed it
        response = Await(client->request(
            NewLimitedRequest(method, path + query, body, content_type, limit), cts.get_token()));
      }
      ASSIGN_OR_RETURN(std::string text, ReadBody(response, verb, path, limit));
      const int code = response.status_code();
      if (code >= 300 && code < 400) {
        return RedirectNotFollowed(response, verb + " " + path + ": the API server",
                                   " (the token would go with it): set the kubeconfig's server "
                                   "to the address it names");
      }
      if (code >= 400) return StatusFromHttp(verb, path, code, text, RetryAfterHeader(response));
      json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (doc.is_discarded()) {
        return InternalError(verb + " " + path + ": HTTP " + std::to_string(code) +
                             " with an answer that is not JSON");
      }
      return doc;
    } catch (const DeadlinePassed&) {
      return Status(StatusCode::kDeadlineExceeded,
                    verb + " " + path + ": no answer from the API server by the request deadline");
    } catch (const std::exception& e) {
      return FromException(verb, path, e);
    }
  }

  // Thrown by Await when the request deadline passes first.
  struct DeadlinePassed {};

  // The response, or DeadlinePassed once the request deadline passes. The
  // late request is abandoned, not cancelled: cpprestsdk can hand a
  // cancelled request's connection to the next request (which then fails,
  // or crashes the client), so the request runs on until request_timeout
  // while later requests use other connections.
  http::http_response Await(const pplx::task<http::http_response>& answer) {
    const std::optional<std::chrono::steady_clock::time_point> deadline = RequestDeadline();
    if (deadline && !FinishedBy(answer, *deadline)) throw DeadlinePassed{};
    return answer.get();
  }

  std::optional<std::chrono::steady_clock::time_point> RequestDeadline() const {
    const int64_t deadline_ns = request_deadline_ns.load();
    if (deadline_ns == 0) return std::nullopt;
    return std::chrono::steady_clock::time_point{std::chrono::nanoseconds(deadline_ns)};
  }

  // The namespace to use: the argument, else the object's.
  StatusOr<std::string> NamespaceFor(const ResourceRef& resource, const std::string& ns,
                                     const json& object, const char* verb) const {
    if (!resource.namespaced) return std::string();
    std::string out = ns.empty() ? StringAt(MetadataOf(object), "namespace") : ns;
    if (out.empty()) {
      return InvalidArgumentError(std::string(verb) + " " + resource.plural +
                                  ": a namespaced object needs a namespace (argument or "
                                  "metadata.namespace)");
    }
    return out;
  }

  StatusOr<std::string> NameOf(const ResourceRef& resource, const json& object,
                               const char* verb) const {
    std::string name = StringAt(MetadataOf(object), "name");
    if (name.empty()) {
      return InvalidArgumentError(std::string(verb) + " " + resource.plural +
                                  ": the object has no metadata.name");
    }
    return name;
  }

  StatusOr<json> Put(const ResourceRef& resource, const std::string& ns, const json& object,
                     const char* suffix) {
    ASSIGN_OR_RETURN(std::string namespace_name, NamespaceFor(resource, ns, object, "PUT"));
    ASSIGN_OR_RETURN(std::string name, NameOf(resource, object, "PUT"));
    return Call(http::methods::PUT, ObjectPath(resource, namespace_name, name) + suffix, "",
                &object);
  }
};

StatusOr<std::unique_ptr<KubeClient>> KubeClient::Create(const KubeConfig& config,
                                                         KubeClientOptions options) {
  RETURN_IF_ERROR(ValidateConfig(config));
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->options = std::move(options);
  impl->tokens = std::make_unique<BearerTokenSource>(config.bearer_token, config.token_file,
                                                     impl->options.token_refresh_period);
  try {
    web::uri uri(config.server);
    impl->host = uri.host();
    impl->client = std::make_unique<http::client::http_client>(
        uri, impl->MakeClientConfig(impl->options.request_timeout));
  } catch (const std::exception& e) {
    return InvalidArgumentError("API server address \"" + config.server +
                                "\" is not a URL: " + e.what());
  }
  return std::unique_ptr<KubeClient>(new KubeClient(std::move(impl)));
}

KubeClient::KubeClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KubeClient::~KubeClient() = default;

const KubeConfig& KubeClient::config() const { return impl_->config; }
const KubeClientOptions& KubeClient::options() const { return impl_->options; }

void KubeClient::SetRequestDeadline(std::optional<std::chrono::steady_clock::time_point> deadline) {
  impl_->request_deadline_ns.store(
      deadline ? std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          deadline->time_since_epoch())
                                          .count())
               : 0);
}

StatusOr<nlohmann::json> KubeClient::Get(const ResourceRef& resource, const std::string& ns,
                                         const std::string& name) {
  return impl_->Call(http::methods::GET, ObjectPath(resource, ns, name), "", nullptr);
}

StatusOr<ListPage> KubeClient::ListPage(const ResourceRef& resource, const std::string& ns,
                                        const ListOptions& options) {
  Query query;
  query.Add("labelSelector", options.label_selector)
      .Add("fieldSelector", options.field_selector)
      .Add("limit", options.limit > 0 ? std::to_string(options.limit) : "")
      .Add("continue", options.continue_token)
      .Add("resourceVersion", options.resource_version);
  const std::string path = CollectionPath(resource, ns);
  ASSIGN_OR_RETURN(json doc, impl_->Call(http::methods::GET, path, query.str(), nullptr));
  controller::ListPage page;
  const json meta = MetadataOf(doc);
  page.resource_version = StringAt(meta, "resourceVersion");
  page.continue_token = StringAt(meta, "continue");
  auto items = doc.find("items");
  if (items != doc.end() && items->is_array()) {
    page.items.reserve(items->size());
    for (json& item : *items) {
      // Items of a list carry no kind/apiVersion; the watch's objects do. Make them alike.
      if (item.is_object()) {
        if (!item.contains("kind")) item["kind"] = resource.kind;
        if (!item.contains("apiVersion")) item["apiVersion"] = resource.ApiVersion();
      }
      page.items.push_back(std::move(item));
    }
  } else if (items == doc.end() || !items->is_null()) {
    return InternalError("GET " + path + ": the answer is not a list (no items)");
  }
  return page;
}

StatusOr<ListPage> KubeClient::ListAll(const ResourceRef& resource, const std::string& ns,
                                       ListOptions options) {
  controller::ListPage all;
  bool first = true;
  std::unordered_set<std::string> tokens_seen;
  std::size_t pages = 0;
  do {
    ASSIGN_OR_RETURN(controller::ListPage page, ListPage(resource, ns, options));
    if (first) all.resource_version = page.resource_version;
    first = false;
    if (page.items.size() > kMaxListAllItems - all.items.size()) {
      return ResourceExhaustedError("listing " + resource.plural + ": more than " +
                                    std::to_string(kMaxListAllItems) +
                                    " items; list fewer (a namespace or a label selector)");
    }
    for (json& item : page.items) all.items.push_back(std::move(item));
    // Empty pages with fresh tokens never reach the item cap: pages are
    // capped too (the API server's default limit is 500 items a page).
    if (++pages > kMaxListAllPages) {
      return InternalError("listing " + resource.plural + ": more than " +
                           std::to_string(kMaxListAllPages) + " pages (" +
                           std::to_string(all.items.size()) +
                           " items); the API server's pager does not end");
    }
    if (!page.continue_token.empty() && !tokens_seen.insert(page.continue_token).second) {
      return InternalError("listing " + resource.plural +
                           ": the API server gave a continue token it had given before, after " +
                           std::to_string(all.items.size()) +
                           " items; its pager would never end (an API server or proxy fault)");
    }
    options.continue_token = page.continue_token;
    // Later pages are served from the first page's snapshot (the token says which).
    options.resource_version.clear();
  } while (!options.continue_token.empty());
  return all;
}

void KubeClient::FenceWrites(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(impl_->fence_mu);
    if (impl_->writes_fenced.load()) return;
    impl_->fence_reason = reason;
  }
  impl_->writes_fenced.store(true);
}

StatusOr<nlohmann::json> KubeClient::Create(const ResourceRef& resource, const std::string& ns,
                                            const nlohmann::json& object) {
  RETURN_IF_ERROR(impl_->CheckFence(resource, "POST"));
  ASSIGN_OR_RETURN(std::string namespace_name, impl_->NamespaceFor(resource, ns, object, "POST"));
  return impl_->Call(http::methods::POST, CollectionPath(resource, namespace_name), "", &object);
}

StatusOr<nlohmann::json> KubeClient::Update(const ResourceRef& resource, const std::string& ns,
                                            const nlohmann::json& object) {
  RETURN_IF_ERROR(impl_->CheckFence(resource, "PUT"));
  return impl_->Put(resource, ns, object, "");
}

StatusOr<nlohmann::json> KubeClient::UpdateStatus(const ResourceRef& resource,
                                                  const std::string& ns,
                                                  const nlohmann::json& object) {
  RETURN_IF_ERROR(impl_->CheckFence(resource, "PUT"));
  return impl_->Put(resource, ns, object, "/status");
}

StatusOr<nlohmann::json> KubeClient::MergePatch(const ResourceRef& resource, const std::string& ns,
                                                const std::string& name,
                                                const nlohmann::json& patch,
                                                bool status_subresource) {
  RETURN_IF_ERROR(impl_->CheckFence(resource, "PATCH"));
  return impl_->Call(http::methods::PATCH,
                     ObjectPath(resource, ns, name) + (status_subresource ? "/status" : ""), "",
                     &patch, "application/merge-patch+json");
}

Status KubeClient::Delete(const ResourceRef& resource, const std::string& ns,
                          const std::string& name, std::optional<int64_t> grace_period_seconds,
                          const std::string& propagation_policy) {
  RETURN_IF_ERROR(impl_->CheckFence(resource, "DELETE"));
  json options = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}};
  if (!propagation_policy.empty()) options["propagationPolicy"] = propagation_policy;
  if (grace_period_seconds) options["gracePeriodSeconds"] = *grace_period_seconds;
  return impl_->Call(http::methods::DEL, ObjectPath(resource, ns, name), "", &options).status();
}

Status KubeClient::Watch(const ResourceRef& resource, const std::string& ns,
                         const WatchOptions& options,
                         const std::function<void(const WatchEvent&)>& on_event,
                         const std::atomic<bool>& cancel) {
  const std::string path = CollectionPath(resource, ns);
  Query query;
  query.Add("watch", "1")
      .Add("resourceVersion", options.resource_version)
      .Add("labelSelector", options.label_selector)
      .Add("fieldSelector", options.field_selector)
      .Add("timeoutSeconds",
           options.timeout_seconds > 0 ? std::to_string(options.timeout_seconds) : "")
      .Add("allowWatchBookmarks", options.allow_bookmarks ? "true" : "");
  // A watch is quiet between events: its inactivity limit outlasts the
  // server's own timeout, so the server ends it, not us.
  const auto timeout =
      std::chrono::seconds(std::max(options.timeout_seconds, 0)) + impl_->options.request_timeout;
  if (cancel.load()) return Status::Ok();
  pplx::cancellation_token_source cts;
  try {
    http::client::http_client client(
        web::uri(impl_->config.server),
        impl_->MakeClientConfig(std::chrono::duration_cast<std::chrono::milliseconds>(timeout)));
    // Armed only for an error: a 200's stream has no end. Read without it,
    // an error's body (a proxy's page, a broken server's endless answer)
    // was buffered by cpprestsdk whole, however long, behind the limited
    // read.
    const AnswerLimit error_limit(impl_->options.max_response_bytes, /*armed=*/false);
    http::http_request request =
        impl_->NewRequest(http::methods::GET, path + query.str(), nullptr, "");
    error_limit.StopReadingPast(request);
    pplx::task<http::http_response> answer = client.request(request, cts.get_token());
    if (!WaitUnlessCancelled(answer, &cancel, cts)) return Status::Ok();
    http::http_response response = answer.get();
    if (response.status_code() != 200) {
      error_limit.Arm();
      // The caller watches again; by then it sends the rotated token.
      if (response.status_code() == 401) {
        (void)impl_->tokens->RefreshAfterUnauthorized(Impl::SentToken(request));
      }
      ASSIGN_OR_RETURN(std::string text, impl_->ReadBody(response, "WATCH", path, error_limit));
      return StatusFromHttp("WATCH", path, response.status_code(), text,
                            RetryAfterHeader(response));
    }
    concurrency::streams::streambuf<uint8_t> buf = response.body().streambuf();
    using Traits = concurrency::streams::streambuf<uint8_t>::traits;
    std::string line;
    // Handles one complete line; returns non-OK to end the watch.
    const auto handle_line = [&](const std::string& text) -> Status {
      if (text.find_first_not_of(" \r\t") == std::string::npos) return Status::Ok();
      json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (doc.is_discarded() || !doc.is_object()) {
        return UnavailableError("WATCH " + path + ": the stream carried a line that is not JSON");
      }
      const std::string type = StringAt(doc, "type");
      auto object = doc.find("object");
      if (type == "ERROR") {
        return StatusFromWatchError(path, object != doc.end() ? object->dump() : "");
      }
      WatchEvent event;
      if (type == "ADDED") {
        event.type = WatchEvent::Type::kAdded;
      } else if (type == "MODIFIED") {
        event.type = WatchEvent::Type::kModified;
      } else if (type == "DELETED") {
        event.type = WatchEvent::Type::kDeleted;
      } else if (type == "BOOKMARK") {
        event.type = WatchEvent::Type::kBookmark;
      } else {
        return Status::Ok();  // a type this client does not know: skip it
      }
      if (object == doc.end() || !object->is_object()) {
        return UnavailableError("WATCH " + path + ": a " + type + " event without an object");
      }
      event.object = std::move(*object);
      on_event(event);
      return Status::Ok();
    };
    const auto take = [&](const char* data, size_t n) -> Status {
      for (size_t i = 0; i < n; ++i) {
        if (data[i] != '\n') {
          line += data[i];
          continue;
        }
        Status s = handle_line(line);
        line.clear();
        if (!s.ok()) return s;
      }
      if (line.size() > impl_->options.max_response_bytes) {
        return ResourceExhaustedError("WATCH " + path + ": an event is over " +
                                      std::to_string(impl_->options.max_response_bytes) +
                                      " bytes (KubeClientOptions::max_response_bytes)");
      }
      return Status::Ok();
    };
    std::vector<uint8_t> chunk;
    while (true) {
      if (cancel.load()) {
        cts.cancel();
        return Status::Ok();
      }
      Status s;
      const size_t available = buf.in_avail();
      if (available > 0) {
        chunk.resize(available);
        const size_t n = buf.getn(chunk.data(), available).get();
        s = take(reinterpret_cast<const char*>(chunk.data()), n);
      } else {
        // Nothing buffered: wait for one more byte (or the end).
        pplx::task<Traits::int_type> next = buf.bumpc();
        if (!WaitUnlessCancelled(next, &cancel, cts)) return Status::Ok();
        const Traits::int_type c = next.get();
        if (c == Traits::eof()) {
          if (!line.empty()) RETURN_IF_ERROR(handle_line(line));
          return Status::Ok();
        }
        const char byte = static_cast<char>(c);
        s = take(&byte, 1);
      }
      if (!s.ok()) {
        cts.cancel();
        return s;
      }
    }
  } catch (const std::exception& e) {
    if (cancel.load()) return Status::Ok();
    return impl_->FromException("WATCH", path, e);
  }
}

}  // namespace pacer::controller
