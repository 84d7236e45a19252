// Heartbeat: how a long-running loop proves to /healthz that it is alive.
// The loop calls Beat() every iteration (or at least every `max_silence`);
// Check(), registered as a liveness check, fails once the loop has been
// silent for longer than that, so the kubelet restarts a controller whose
// reconcile or watch loop is stuck rather than one that is merely idle
// (an idle loop still wakes up and beats).
//
//   Heartbeat reconcile_beat("reconcile-loop", std::chrono::minutes(5));
//   server.AddLivenessCheck("reconcile-loop", [&] { return reconcile_beat.Check(); });
//   while (running) { reconcile_beat.Beat(); ... }
//
// Units: std::chrono durations on the steady clock; `now` is injectable so
// tests (or the controller's Clock) decide what time it is.
// Thread-safety: Beat and Check may be called concurrently from any thread
// (one atomic).
#ifndef PACER_CONTROLLER_OBSERVE_HEARTBEAT_H_
#define PACER_CONTROLLER_OBSERVE_HEARTBEAT_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

#include "pacer/status.h"

namespace pacer::controller {

class Heartbeat {
 public:
  using Now = std::function<std::chrono::steady_clock::time_point()>;

  // Counts as a beat at construction: a loop gets `max_silence` to start.
  Heartbeat(std::string loop, std::chrono::steady_clock::duration max_silence,
            Now now = &std::chrono::steady_clock::now);

  void Beat();
  // OK, or Unavailable naming the loop and how long it has been silent.
  Status Check() const;

 private:
  const std::string loop_;
  const std::chrono::steady_clock::duration max_silence_;
  const Now now_;
  std::atomic<std::chrono::steady_clock::rep> last_beat_;  // time_since_epoch().count()
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_OBSERVE_HEARTBEAT_H_
