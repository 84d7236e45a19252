#include "observe/heartbeat.h"

#include <cstdio>
#include <utility>

namespace pacer::controller {

Heartbeat::Heartbeat(std::string loop, std::chrono::steady_clock::duration max_silence, Now now)
    : loop_(std::move(loop)),
      max_silence_(max_silence),
      now_(std::move(now)),
      last_beat_(now_().time_since_epoch().count()) {}

void Heartbeat::Beat() {
  last_beat_.store(now_().time_since_epoch().count(), std::memory_order_relaxed);
}

Status Heartbeat::Check() const {
  const std::chrono::steady_clock::duration silence =
      now_().time_since_epoch() -
      std::chrono::steady_clock::duration(last_beat_.load(std::memory_order_relaxed));
  if (silence <= max_silence_) return Status::Ok();
  char text[128];
  std::snprintf(text, sizeof(text), " has not beaten for %.1f s (limit %.1f s)",
                std::chrono::duration<double>(silence).count(),
                std::chrono::duration<double>(max_silence_).count());
  return UnavailableError(loop_ + text + "; it is stuck or has stopped");
}

}  // namespace pacer::controller
