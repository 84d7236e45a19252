#include "kube/event_recorder.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "core/json_fields.h"
#include "core/utf8_prefix.h"
#include "kube/kube_time.h"
#include "observe/log.h"

namespace pacer::controller {
namespace {

using nlohmann::json;

// The API server's limits on Events with an eventTime (reason, action, instance).
constexpr size_t kMaxReasonBytes = 128;
constexpr size_t kMaxInstanceBytes = 128;
constexpr auto kShutdownFlush = std::chrono::seconds(2);

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

json InvolvedObject(const json& object) {
  json ref = json::object();
  if (!object.is_object()) return ref;
  const json meta = object.contains("metadata") && object["metadata"].is_object()
                        ? object["metadata"]
                        : json::object();
  const std::pair<const char*, std::string> fields[] = {
      {"kind", StringAt(object, "kind")}, {"apiVersion", StringAt(object, "apiVersion")},
      {"name", StringAt(meta, "name")},   {"namespace", StringAt(meta, "namespace")},
      {"uid", StringAt(meta, "uid")},     {"resourceVersion", StringAt(meta, "resourceVersion")},
  };
  for (const auto& [key, value] : fields) {
    if (!value.empty()) ref[key] = value;
  }
  return ref;
}

}  // namespace

EventRecorder::EventRecorder(KubeClient* client, EventRecorderOptions options)
    : client_(client),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : SystemClock::Default()),
      instance_(Utf8Prefix(options_.instance.empty() ? HostName() : options_.instance,
                           kMaxInstanceBytes)) {
  thread_ = std::thread(&EventRecorder::Loop, this);
}

EventRecorder::~EventRecorder() {
  (void)Flush(kShutdownFlush);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    dropped_ += static_cast<int64_t>(queue_.size());
    queue_.clear();
  }
  cv_.notify_all();
  thread_.join();
}

void EventRecorder::Record(const json& object, EventType type, const std::string& reason,
                           const std::string& message) {
  Pending pending;
  pending.involved = InvolvedObject(object);
  pending.type = type == EventType::kWarning ? "Warning" : "Normal";
  pending.reason = Utf8Prefix(reason, kMaxReasonBytes);
  pending.message = Utf8Prefix(message, kMaxMessageBytes);
  pending.at = clock_.WallNow();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || queue_.size() >= options_.max_queue) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(pending));
  }
  cv_.notify_one();
}

bool EventRecorder::Flush(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, timeout, [&] { return queue_.empty() && !sending_; });
}

int64_t EventRecorder::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

void EventRecorder::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping
    Pending pending = std::move(queue_.front());
    queue_.pop_front();
    sending_ = true;
    lock.unlock();
    Send(pending);
    lock.lock();
    sending_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
  idle_cv_.notify_all();
}

void EventRecorder::Send(const Pending& pending) {
  const json& ref = pending.involved;
  const std::string key = StringAt(ref, "uid") + "|" + StringAt(ref, "namespace") + "|" +
                          StringAt(ref, "kind") + "|" + StringAt(ref, "name") + "|" + pending.type +
                          "|" + pending.reason + "|" + pending.message;
  auto it = aggregates_.find(key);
  if (it != aggregates_.end() && pending.at - it->second.last <= options_.aggregation_window) {
    Aggregate& aggregate = it->second;
    const json patch = {{"count", aggregate.count + 1},
                        {"lastTimestamp", FormatKubeTime(pending.at)}};
    StatusOr<json> patched =
        client_->MergePatch(kEvents, aggregate.namespace_name, aggregate.name, patch);
    if (patched.ok()) {
      ++aggregate.count;
      aggregate.last = pending.at;
      return;
    }
    if (patched.status().code() != StatusCode::kNotFound) {
      Log(LogLevel::kWarning, "cannot update an aggregated Event",
          {{"kind", "Event"},
           {"object", aggregate.namespace_name + "/" + aggregate.name},
           {"error", patched.status()}});
      return;
    }
    aggregates_.erase(it);  // the Event expired on the server: start a new one
  }
  Status created = CreateEvent(pending, key);
  if (!created.ok()) {
    Log(LogLevel::kWarning, "cannot record an Event",
        {{"kind", StringAt(ref, "kind")},
         {"object", StringAt(ref, "namespace") + "/" + StringAt(ref, "name")},
         {"type", pending.type},
         {"reason", pending.reason},
         {"error", created}});
  }
}

Status EventRecorder::CreateEvent(const Pending& pending, const std::string& aggregation_key) {
  const json& ref = pending.involved;
  std::string ns = StringAt(ref, "namespace");
  if (ns.empty()) ns = "default";  // cluster-scoped objects' Events live in default
  uint64_t sequence;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sequence = ++sequence_;
  }
  // client-go names Events <object>.<unix nanoseconds in hex>; the sequence
  // keeps two Events of one instant apart.
  const auto nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(pending.at.time_since_epoch()).count();
  char suffix[48];
  std::snprintf(suffix, sizeof(suffix), ".%llx%llx", static_cast<unsigned long long>(nanos),
                static_cast<unsigned long long>(sequence));
  const std::string object_name = StringAt(ref, "name");
  const std::string name = (object_name.empty() ? "pacer" : object_name) + suffix;
  const std::string when = FormatKubeTime(pending.at);
  json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", name}, {"namespace", ns}}},
      {"involvedObject", ref},
      {"type", pending.type},
      {"reason", pending.reason},
      {"action", pending.reason},
      {"message", pending.message},
      {"source", {{"component", options_.component}, {"host", instance_}}},
      {"reportingComponent", options_.component},
      {"reportingInstance", instance_},
      {"firstTimestamp", when},
      {"lastTimestamp", when},
      {"eventTime", FormatKubeMicroTime(pending.at)},
      {"count", 1},
  };
  StatusOr<json> created = client_->Create(kEvents, ns, event);
  if (!created.ok()) return created.status();
  if (aggregates_.size() >= options_.max_aggregation_keys) {
    auto oldest = aggregates_.begin();
    for (auto a = aggregates_.begin(); a != aggregates_.end(); ++a) {
      if (a->second.last < oldest->second.last) oldest = a;
    }
    aggregates_.erase(oldest);
  }
  aggregates_[aggregation_key] = Aggregate{ns, name, 1, pending.at};
  return Status::Ok();
}

}  // namespace pacer::controller
