#include "kube/informer.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <unordered_set>
#include <utility>

#include "core/json_fields.h"
#include "observe/log.h"

namespace pacer::controller {
namespace {

using nlohmann::json;

// A watch that ends this soon without an event counts as a failure, so a
// server that closes watches at once is not hammered.
constexpr auto kShortWatch = std::chrono::seconds(1);

std::string ResourceVersionOf(const json& object) {
  return StringAt(MetadataOf(object), "resourceVersion");
}

// The value of label `label`, nullopt when the object does not have it.
std::optional<std::string> LabelOf(const json& object, const std::string& label) {
  const json& meta = MetadataOf(object);
  if (!meta.contains("labels")) return std::nullopt;
  const json& labels = meta.at("labels");
  if (!labels.is_object() || !labels.contains(label)) return std::nullopt;
  const json& value = labels.at(label);
  if (!value.is_string()) return std::nullopt;
  return value.get<std::string>();
}

}  // namespace

Informer::Informer(KubeClient* client, ResourceRef resource, std::string namespace_name,
                   InformerOptions options)
    : client_(client),
      resource_(std::move(resource)),
      namespace_name_(std::move(namespace_name)),
      options_(std::move(options)),
      page_size_(options_.page_size) {}

Informer::~Informer() { Stop(); }

void Informer::OnChange(InformerHandler handler) { handlers_.push_back(std::move(handler)); }

void Informer::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread(&Informer::Loop, this);
  if (options_.resync_period.count() > 0) {
    resync_thread_ = std::thread(&Informer::ResyncTimerLoop, this);
  }
}

void Informer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_ = true;
  cancel_watch_ = true;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (resync_thread_.joinable()) resync_thread_.join();
}

bool Informer::HasSynced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return synced_;
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return synced_ || stopping_; });
  return synced_;
}

std::optional<json> Informer::Get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it == cache_.end()) return std::nullopt;
  return it->second;
}

std::vector<json> Informer::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<json> out;
  out.reserve(cache_.size());
  for (const auto& [key, object] : cache_) out.push_back(object);
  return out;
}

std::vector<json> Informer::ListByLabel(const std::string& label, const std::string& value,
                                        const std::string& namespace_name) const {
  std::vector<json> out;
  VisitByLabel(label, value, namespace_name, [&out](const json& object) { out.push_back(object); });
  return out;
}

void Informer::VisitByLabel(const std::string& label, const std::string& value,
                            const std::string& namespace_name,
                            const std::function<void(const json&)>& visit) const {
  // Keys are "namespace/name": filter on the key before looking at an object.
  const std::string prefix = namespace_name.empty() ? "" : namespace_name + "/";
  auto in_namespace = [&prefix](const std::string& key) {
    return prefix.empty() || key.compare(0, prefix.size(), prefix) == 0;
  };
  std::lock_guard<std::mutex> lock(mu_);
  if (!options_.index_label.empty() && label == options_.index_label) {
    auto keys = index_.find(value);
    if (keys == index_.end()) return;
    for (const std::string& key : keys->second) {
      if (in_namespace(key)) visit(cache_.at(key));
    }
    return;
  }
  for (const auto& [key, object] : cache_) {
    if (in_namespace(key) && LabelOf(object, label) == value) visit(object);
  }
}

int64_t Informer::relists() const {
  std::lock_guard<std::mutex> lock(mu_);
  return relists_;
}

int64_t Informer::list_page_size() const { return page_size_.load(); }

std::string Informer::resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resource_version_;
}

std::string Informer::IndexValue(const json& object) const {
  if (options_.index_label.empty()) return "";
  return LabelOf(object, options_.index_label).value_or("");
}

void Informer::PutLocked(const std::string& key, json object) {
  EraseLocked(key);
  if (std::string value = IndexValue(object); !value.empty()) index_[value].insert(key);
  cache_[key] = std::move(object);
}

void Informer::EraseLocked(const std::string& key) {
  auto it = cache_.find(key);
  if (it == cache_.end()) return;
  if (std::string value = IndexValue(it->second); !value.empty()) {
    auto keys = index_.find(value);
    if (keys != index_.end()) {
      keys->second.erase(key);
      if (keys->second.empty()) index_.erase(keys);
    }
  }
  cache_.erase(it);
}

void Informer::Notify(const std::vector<Change>& changes) {
  for (const Change& change : changes) {
    for (const InformerHandler& handler : handlers_) {
      handler(change.key, change.object ? &*change.object : nullptr);
    }
  }
}

bool Informer::WaitStop(std::chrono::milliseconds delay) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, delay, [&] { return stopping_; });
}

Status Informer::ListAndReplace() {
  ListOptions list;
  list.label_selector = options_.label_selector;
  list.field_selector = options_.field_selector;
  std::map<std::string, json> fresh;
  std::string list_version;  // the first page's: later pages come from its snapshot
  bool first_page = true;
  // A pager that never ends (a token given twice, an API server or proxy
  // fault) is an error, backed off as any other, as in KubeClient::ListAll:
  // followed, it was a hot loop of list requests that also never saw
  // stop_, so Stop() never returned.
  std::unordered_set<std::string> tokens_seen;
  std::size_t pages = 0;
  do {
    if (stop_) return Status(StatusCode::kAborted, "informer stopping");
    list.limit = page_size_.load();
    StatusOr<controller::ListPage> page = client_->ListPage(resource_, namespace_name_, list);
    if (!page.ok()) {
      // The answer was over the client's max_response_bytes (the only
      // ResourceExhausted a request returns): ask for fewer objects. The
      // continue token is kept: Kubernetes' token holds the list's
      // resourceVersion and the key to start after, not the limit, which
      // each request sets anew (the test API server's works the same way).
      // Retried at once: the server is not failing, the page is too big.
      if (page.status().code() == StatusCode::kResourceExhausted && list.limit > 1) {
        const int64_t smaller = list.limit / 2;
        Log(LogLevel::kWarning,
            "informer list page over the answer limit; asking for smaller pages",
            {{"resource", resource_.plural},
             {"namespace", namespace_name_},
             {"page_size", list.limit},
             {"new_page_size", smaller},
             {"max_response_bytes", static_cast<int64_t>(client_->options().max_response_bytes)},
             {"error", page.status()}});
        page_size_ = smaller;  // later lists start there too
        continue;              // the do-while's condition: continue_token is unchanged
      }
      return page.status();
    }
    if (first_page) list_version = page->resource_version;
    first_page = false;
    // Trimmed page by page: the untrimmed objects of a whole list (every
    // pod of a cluster) are never held at once.
    for (json& item : page->items) {
      std::string key = ObjectKey(item);
      if (key.empty()) continue;
      if (options_.transform) options_.transform(item);
      fresh[std::move(key)] = std::move(item);
    }
    if (++pages > KubeClient::kMaxListAllPages) {
      return InternalError("listing " + resource_.plural + ": more than " +
                           std::to_string(KubeClient::kMaxListAllPages) +
                           " pages; the API server's pager does not end");
    }
    if (!page->continue_token.empty() && !tokens_seen.insert(page->continue_token).second) {
      return InternalError("listing " + resource_.plural +
                           ": the API server gave a continue token it had given before; its "
                           "pager would never end (an API server or proxy fault)");
    }
    list.continue_token = page->continue_token;
    list.resource_version.clear();
  } while (!list.continue_token.empty() || first_page);
  std::vector<Change> changes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // What changed while no watch was looking: deletions first, as they happened earlier.
    for (const auto& [key, object] : cache_) {
      if (fresh.count(key) == 0) changes.push_back({key, std::nullopt});
    }
    for (const auto& [key, object] : fresh) {
      auto old = cache_.find(key);
      if (old == cache_.end() || ResourceVersionOf(old->second) != ResourceVersionOf(object) ||
          old->second != object) {
        changes.push_back({key, object});
      }
    }
    cache_.clear();
    index_.clear();
    for (auto& [key, object] : fresh) PutLocked(key, std::move(object));
    resource_version_ = list_version;
    ++relists_;
  }
  Notify(changes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    synced_ = true;  // after the handlers saw the first list
  }
  cv_.notify_all();
  return Status::Ok();
}

void Informer::Apply(const WatchEvent& event) {
  std::vector<Change> changes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::string rv = ResourceVersionOf(event.object); !rv.empty()) resource_version_ = rv;
    if (event.type == WatchEvent::Type::kBookmark) return;
    const std::string key = ObjectKey(event.object);
    if (key.empty()) return;
    if (event.type == WatchEvent::Type::kDeleted) {
      if (cache_.count(key) == 0) return;
      EraseLocked(key);
      changes.push_back({key, std::nullopt});
    } else {
      json object = event.object;
      if (options_.transform) options_.transform(object);
      changes.push_back({key, object});
      PutLocked(key, std::move(object));
    }
  }
  Notify(changes);
}

Status Informer::WatchOnce(bool* saw_event) {
  WatchOptions watch;
  watch.resource_version = resource_version();
  watch.label_selector = options_.label_selector;
  watch.field_selector = options_.field_selector;
  watch.timeout_seconds = options_.watch_timeout_seconds;
  watch.allow_bookmarks = true;
  return client_->Watch(
      resource_, namespace_name_, watch,
      [&](const WatchEvent& event) {
        *saw_event = true;
        Apply(event);
      },
      cancel_watch_);
}

void Informer::Resync() {
  std::vector<Change> changes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, object] : cache_) changes.push_back({key, object});
  }
  Notify(changes);
}

void Informer::ResyncTimerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (cv_.wait_for(lock, options_.resync_period, [&] { return stopping_; })) return;
    resync_due_ = true;
    cancel_watch_ = true;  // the informer's thread resyncs, then watches again
  }
}

void Informer::Loop() {
  const std::string what =
      "informer " + resource_.plural + (namespace_name_.empty() ? "" : " in " + namespace_name_);
  std::chrono::milliseconds backoff = options_.min_backoff;
  // Waits before the next try, doubling the backoff; false when stopped.
  const auto back_off = [&](const Status& error) {
    std::chrono::milliseconds delay = backoff;
    if (auto hint = RetryAfter(error)) {
      delay = std::max(delay, std::chrono::duration_cast<std::chrono::milliseconds>(*hint));
    }
    delay = std::min(delay, options_.max_backoff);
    Log(LogLevel::kWarning, "informer request failed; backing off",
        {{"resource", resource_.plural},
         {"what", what},
         {"error", error},
         {"retry_ms", static_cast<int64_t>(delay.count())}});
    backoff = std::min(backoff * 2, options_.max_backoff);
    return WaitStop(delay);
  };
  bool need_list = true;
  bool first_watch = false;  // the next watch is the first since a list
  // The last watch was Gone at once after a list (see the Gone case below):
  // the list that follows does not reset the backoff, a watch that holds does.
  bool relisted_after_quick_gone = false;
  while (!stop_) {
    if (need_list) {
      Status listed = ListAndReplace();
      if (!listed.ok()) {
        if (stop_) return;  // the list ended for Stop(): no failure to report
        if (!back_off(listed)) return;
        continue;
      }
      need_list = false;
      first_watch = true;
      if (!relisted_after_quick_gone) backoff = options_.min_backoff;
    }
    const bool watch_after_list = std::exchange(first_watch, false);
    bool saw_event = false;
    const auto started = std::chrono::steady_clock::now();
    Status watched = WatchOnce(&saw_event);
    if (stop_) return;
    bool resynced = false;
    bool resync = false;
    {
      // The timer sets both flags under mu_; clearing them under it too. A
      // clear between the timer's two stores left the watch cancelled with
      // no resync due: every watch ended at once, no event arrived until
      // the next resync (10 minutes).
      std::lock_guard<std::mutex> lock(mu_);
      if (resync_due_.exchange(false)) {
        resync = true;
        cancel_watch_ = false;
      }
    }
    if (resync) {
      if (stop_) return;  // Stop() raced with the timer: keep its cancel
      Resync();
      resynced = true;
    }
    relisted_after_quick_gone = false;
    if (IsGone(watched)) {
      need_list = true;  // our resourceVersion is too old: list again
      // Gone at once, from the version the list just gave: the next round
      // is likely to go the same way (a watch cache that lags the list, a
      // proxy that drops the version). Listing again at once was a hot loop
      // of full lists; it backs off as any failure does. A Gone that ends a
      // watch resumed from a stream's version is the usual compaction and
      // lists again now.
      if (watch_after_list && !resynced && !saw_event &&
          std::chrono::steady_clock::now() - started <= kShortWatch) {
        relisted_after_quick_gone = true;
        if (!back_off(watched)) return;
      }
    } else if (!watched.ok()) {
      // A watch that held (it saw events, or ran past kShortWatch) before a
      // proxy cut it starts a new series of failures: without the reset,
      // healthy watches cut one after another grew the wait to max_backoff,
      // and the cache was blind that long after every cut.
      if (saw_event || std::chrono::steady_clock::now() - started > kShortWatch) {
        backoff = options_.min_backoff;
      }
      if (!back_off(watched)) return;
    } else if (resynced || saw_event || std::chrono::steady_clock::now() - started > kShortWatch) {
      backoff = options_.min_backoff;
    } else if (!WaitStop(backoff)) {
      return;
    } else {
      backoff = std::min(backoff * 2, options_.max_backoff);
    }
  }
}

}  // namespace pacer::controller
