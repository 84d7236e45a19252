// Informer: a local, watch-fed cache of one resource type (client-go's
// reflector + store + indexer). It lists (in pages), then watches from the
// list's resourceVersion with bookmarks; when a watch ends it watches again
// from the last resourceVersion seen, lists again only when the server says
// that version is gone (410), and backs off exponentially on errors (and on
// a 410 that answers the first watch after a list, which would otherwise
// list again and again in a hot loop). A list
// page whose answer is over the client's KubeClientOptions::max_response_bytes
// (ResourceExhausted) is asked for again with half the page size, down to
// one object, and the smaller size is kept for later lists: 500 pods of
// over ~134 KiB each no longer fail every list against the 64 MiB default.
//
// Handlers run on the informer's thread after the cache has changed: for
// every add and change (object set) and deletion (object nullptr), including
// the differences a re-list finds, and for every cached object on resync.
// A handler must return promptly (enqueue a key, do not reconcile inline)
// and may read the informer.
//
// Units: durations are std::chrono::milliseconds.
// Thread-safety: cache reads (Get, List, ListByLabel, HasSynced,
// WaitForSync) are safe from any thread. Register handlers before Start().
// Start() and Stop() are called once each, from one thread.
#ifndef PACER_CONTROLLER_KUBE_INFORMER_H_
#define PACER_CONTROLLER_KUBE_INFORMER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kube/kube_client.h"
#include "kube/resources.h"

namespace pacer::controller {

struct InformerOptions {
  std::string label_selector;
  std::string field_selector;
  std::chrono::milliseconds resync_period{0};  // 0 = off
  // Objects per list page (0 = no paging). Halved, for this and later lists,
  // while a page's answer is over the client's max_response_bytes.
  int64_t page_size = 500;
  std::chrono::milliseconds min_backoff{100};
  std::chrono::milliseconds max_backoff{30000};
  // ListByLabel is indexed for this label key ("pacer.dev/job"); other keys scan.
  std::string index_label;
  // The server ends each watch after this long; the informer then re-watches.
  int watch_timeout_seconds = 300;
  // Trims each listed or watched object before it is compared, cached and
  // handed to handlers (client-go's TransformFunc): a cache of every pod of
  // a cluster keeps only what its readers use. Must keep
  // metadata.name/namespace/resourceVersion and the index label.
  std::function<void(nlohmann::json&)> transform;
};

// `object` is nullptr when the object was deleted.
using InformerHandler = std::function<void(const std::string& key, const nlohmann::json* object)>;

class Informer {
 public:
  // `client` must outlive the informer. `namespace_name` "" = all namespaces.
  Informer(KubeClient* client, ResourceRef resource, std::string namespace_name,
           InformerOptions options = {});
  ~Informer();  // Stop()s
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  void OnChange(InformerHandler handler);

  void Start();
  // Cancels the watch and joins the thread; returns within about 100 ms
  // unless a list request is in flight.
  void Stop();

  // The first list has filled the cache.
  bool HasSynced() const;
  bool WaitForSync(std::chrono::milliseconds timeout) const;

  // By key "namespace/name" (or "name" when cluster-scoped).
  std::optional<nlohmann::json> Get(const std::string& key) const;
  std::vector<nlohmann::json> List() const;
  // `namespace_name` "" = all namespaces; otherwise only that namespace's
  // objects are copied out.
  std::vector<nlohmann::json> ListByLabel(const std::string& label, const std::string& value,
                                          const std::string& namespace_name = "") const;
  // The same objects, visited in place under the cache's lock instead of
  // copied: `visit` must be quick and must not call back into the informer.
  void VisitByLabel(const std::string& label, const std::string& value,
                    const std::string& namespace_name,
                    const std::function<void(const nlohmann::json&)>& visit) const;

  // Lists done (the first one included): tests check re-lists with it.
  int64_t relists() const;
  // The page size lists use now: options.page_size, or less once a page's
  // answer was over the client's max_response_bytes.
  int64_t list_page_size() const;
  // The resourceVersion the cache is at.
  std::string resource_version() const;

 private:
  struct Change {
    std::string key;
    std::optional<nlohmann::json> object;  // nullopt: deleted
  };

  void Loop();
  void ResyncTimerLoop();
  Status ListAndReplace();
  Status WatchOnce(bool* saw_event);
  void Apply(const WatchEvent& event);
  void Notify(const std::vector<Change>& changes);
  void Resync();
  // Waits `delay` unless stopped; false when stopped.
  bool WaitStop(std::chrono::milliseconds delay);

  // Cache mutations; mu_ held.
  void PutLocked(const std::string& key, nlohmann::json object);
  void EraseLocked(const std::string& key);
  std::string IndexValue(const nlohmann::json& object) const;

  KubeClient* const client_;
  const ResourceRef resource_;
  const std::string namespace_name_;
  const InformerOptions options_;
  std::vector<InformerHandler> handlers_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;  // synced_ and stopping_
  std::map<std::string, nlohmann::json> cache_;
  std::map<std::string, std::set<std::string>> index_;  // label value -> keys
  std::string resource_version_;
  bool synced_ = false;
  bool stopping_ = false;
  int64_t relists_ = 0;
  // The list page size; written by the informer's thread only.
  std::atomic<int64_t> page_size_;

  // Set to end the current watch: on Stop() and when a resync is due.
  std::atomic<bool> cancel_watch_{false};
  std::atomic<bool> resync_due_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::thread resync_thread_;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_KUBE_INFORMER_H_
