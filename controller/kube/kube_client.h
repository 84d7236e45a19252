// KubeClient: the controller's Kubernetes REST client (get, list with paging,
// create, update, status update, merge patch, delete, watch) on cpprestsdk.
//
// Errors follow pacer/status.h, so the code says whether to retry:
//   400/422 InvalidArgument, 401 Unauthenticated, 403 PermissionDenied,
//   404 NotFound, 409 AlreadyExists (reason AlreadyExists) else Aborted (a
//   conflict: re-read and retry), 410 FailedPrecondition "Gone: ...",
//   429/5xx Unavailable ("retry after N s" when the server says so),
//   timeouts DeadlineExceeded, connection and TLS failures Unavailable, an
//   answer over max_response_bytes ResourceExhausted. Messages name the verb,
//   the path and the server's message:
//   GET /api/v1/namespaces/x/pods/y: 404 NotFound: pods "y" not found
//
// Security: TLS is always verified against KubeConfig::ca_pem only (the
// system trust store is not used) and the server's host name is checked. The
// bearer token goes into the Authorization header and nowhere else: no error
// message or log line contains it. A token read from a file
// (KubeConfig::token_file) is re-read as it rotates: every
// token_refresh_period, and at once after a 401, retrying that request once
// when the file held a new token (kube/token_source.h).
//
// Units: durations are std::chrono types; sizes are bytes.
// Thread-safety: a KubeClient may be used from several threads at once.
#ifndef PACER_CONTROLLER_KUBE_KUBE_CLIENT_H_
#define PACER_CONTROLLER_KUBE_KUBE_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kube/api_errors.h"
#include "kube/kube_config.h"
#include "kube/resources.h"
#include "pacer/status.h"

namespace pacer::controller {

struct KubeClientOptions {
  // Inactivity limit of one request: no byte for this long -> DeadlineExceeded.
  std::chrono::milliseconds request_timeout{30000};
  std::string user_agent = "pacer-controller";
  size_t max_response_bytes = 64 << 20;
  // How old the cached copy of KubeConfig::token_file may get before it is
  // read again (client-go: one minute); a 401 re-reads it at once.
  std::chrono::milliseconds token_refresh_period{60000};
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 500;  // page size; 0 = no paging
  std::string continue_token;
  std::string resource_version;
};

struct ListPage {
  std::vector<nlohmann::json> items;
  std::string resource_version;  // of the list: watch from here
  std::string continue_token;    // empty on the last page
};

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark };
  Type type;
  nlohmann::json object;  // for kBookmark only metadata.resourceVersion is meaningful
};

struct WatchOptions {
  std::string resource_version;  // empty: start with the current state (synthetic ADDEDs)
  std::string label_selector;
  std::string field_selector;
  int timeout_seconds = 300;  // the server ends the stream after this long
  bool allow_bookmarks = true;
};

class KubeClient {
 public:
  // InvalidArgument when the configuration cannot work: no server, a server
  // that is not https://, no CA, a CA or client key that is not PEM.
  static StatusOr<std::unique_ptr<KubeClient>> Create(const KubeConfig& config,
                                                      KubeClientOptions options = {});
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  StatusOr<nlohmann::json> Get(const ResourceRef& resource, const std::string& ns,
                               const std::string& name);

  // One page of a list.
  StatusOr<controller::ListPage> ListPage(const ResourceRef& resource, const std::string& ns,
                                          const ListOptions& options);
  // Every page, following continue tokens; resource_version is the first
  // page's. A pager that gives a continue token it gave before (it would
  // never end), or more than kMaxListAllPages pages, is an Internal error;
  // more than kMaxListAllItems items in all, ResourceExhausted (each page is
  // bounded, their sum was not).
  static constexpr std::size_t kMaxListAllItems = 1'000'000;
  static constexpr std::size_t kMaxListAllPages = 100'000;
  StatusOr<controller::ListPage> ListAll(const ResourceRef& resource, const std::string& ns,
                                         ListOptions options);

  // `ns` empty: the object's metadata.namespace. The server's object is returned.
  StatusOr<nlohmann::json> Create(const ResourceRef& resource, const std::string& ns,
                                  const nlohmann::json& object);
  // PUT; metadata.resourceVersion makes it conditional (409 -> Aborted).
  StatusOr<nlohmann::json> Update(const ResourceRef& resource, const std::string& ns,
                                  const nlohmann::json& object);
  // PUT .../status.
  StatusOr<nlohmann::json> UpdateStatus(const ResourceRef& resource, const std::string& ns,
                                        const nlohmann::json& object);
  // application/merge-patch+json (RFC 7386).
  StatusOr<nlohmann::json> MergePatch(const ResourceRef& resource, const std::string& ns,
                                      const std::string& name, const nlohmann::json& patch,
                                      bool status_subresource = false);
  // From now on Create, Update, UpdateStatus, MergePatch and Delete of
  // anything but a Lease fail with Unavailable naming `reason`, without a
  // request: a controller that lost its leader lease makes no change after
  // the standby may have taken over (a pass in flight would go on
  // launching pods and writing status). Reads go on. Thread-safe; the
  // first reason stays.
  void FenceWrites(const std::string& reason);
  // NotFound is returned as NotFound (callers decide whether that is success).
  Status Delete(const ResourceRef& resource, const std::string& ns, const std::string& name,
                std::optional<int64_t> grace_period_seconds = std::nullopt,
                const std::string& propagation_policy = "Background");

  // Streams events to `on_event` (on the calling thread) until the server
  // ends the stream, `cancel` becomes true (checked at least every 50 ms, and
  // the connection is closed at once), or an error. Returns OK when the
  // stream ended normally or was cancelled (re-watch from the last
  // resourceVersion); FailedPrecondition "Gone: ..." for a 410 or an ERROR
  // event with code 410 (list again); Unavailable for network errors.
  Status Watch(const ResourceRef& resource, const std::string& ns, const WatchOptions& options,
               const std::function<void(const WatchEvent&)>& on_event,
               const std::atomic<bool>& cancel);

  const KubeConfig& config() const;
  const KubeClientOptions& options() const;

  // Requests (not watches) that have no answer by `deadline` (steady time)
  // return DeadlineExceeded then; the request itself is abandoned, not
  // cancelled, and ends at request_timeout. nullopt = only request_timeout
  // bounds them. For a client of one purpose whose every request must end by
  // a point in time: the leader elector's own client, whose renewals must end
  // by the renew deadline even when the API server hangs.
  void SetRequestDeadline(std::optional<std::chrono::steady_clock::time_point> deadline);

 private:
  struct Impl;
  explicit KubeClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_KUBE_KUBE_CLIENT_H_
