// EventRecorder: core/v1 Events about the controller's objects ("Planned",
// "Replanning", "WorkerRestarted", ...), as kubectl describe shows them.
//
// Repeats are aggregated as client-go does: the same (object, type, reason,
// message) within aggregation_window patches the existing Event's count and
// lastTimestamp instead of creating another one.
//
// Record() never blocks on the network: it queues (at most max_queue
// Events; more are dropped and counted) and a thread of the recorder sends
// them. A failure is written to stderr (never the token) and the Event is
// dropped: Events are best effort.
//
// Units: durations are std::chrono types; message at most 1024 bytes
// (longer ones are truncated on a UTF-8 boundary).
// Thread-safety: Record/Normal/Warning/Flush may be called from any thread.
#ifndef PACER_CONTROLLER_KUBE_EVENT_RECORDER_H_
#define PACER_CONTROLLER_KUBE_EVENT_RECORDER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "core/clock.h"
#include "kube/kube_client.h"

namespace pacer::controller {

struct EventRecorderOptions {
  std::string component = "pacer-controller";  // source.component, reportingComponent
  std::string instance;                        // reportingInstance; "" = the host name
  std::chrono::seconds aggregation_window{600};
  size_t max_queue = 1000;
  size_t max_aggregation_keys = 4096;  // oldest forgotten beyond this
  // Wall time for the timestamps; nullptr = the system clock.
  const Clock* clock = nullptr;
};

enum class EventType { kNormal, kWarning };

class EventRecorder {
 public:
  static constexpr size_t kMaxMessageBytes = 1024;

  // `client` must outlive the recorder.
  explicit EventRecorder(KubeClient* client, EventRecorderOptions options = {});
  ~EventRecorder();  // sends what is queued if the server answers, then stops
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // `object` is the involved object as read from the API server (kind,
  // apiVersion and metadata name/namespace/uid/resourceVersion are used).
  void Record(const nlohmann::json& object, EventType type, const std::string& reason,
              const std::string& message);
  void Normal(const nlohmann::json& object, const std::string& reason, const std::string& message) {
    Record(object, EventType::kNormal, reason, message);
  }
  void Warning(const nlohmann::json& object, const std::string& reason,
               const std::string& message) {
    Record(object, EventType::kWarning, reason, message);
  }

  // Waits until everything recorded so far has been sent (or failed); false on timeout.
  bool Flush(std::chrono::milliseconds timeout);

  int64_t dropped() const;

 private:
  struct Pending {
    nlohmann::json involved;  // involvedObject
    std::string type;
    std::string reason;
    std::string message;
    std::chrono::system_clock::time_point at;
  };
  struct Aggregate {
    std::string namespace_name;
    std::string name;  // the Event object's name
    int64_t count = 0;
    std::chrono::system_clock::time_point last;
  };

  void Loop();
  void Send(const Pending& pending);
  Status CreateEvent(const Pending& pending, const std::string& aggregation_key);

  KubeClient* const client_;
  const EventRecorderOptions options_;
  const Clock& clock_;
  std::string instance_;

  mutable std::mutex mu_;
  std::condition_variable cv_;       // work queued, or stopping
  std::condition_variable idle_cv_;  // queue drained
  std::deque<Pending> queue_;
  bool sending_ = false;
  bool stopping_ = false;
  int64_t dropped_ = 0;
  uint64_t sequence_ = 0;  // makes Event names unique within one instant

  // Touched by the sender thread only.
  std::map<std::string, Aggregate> aggregates_;

  std::thread thread_;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_KUBE_EVENT_RECORDER_H_
