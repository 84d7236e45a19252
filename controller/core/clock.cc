#include "core/clock.h"

namespace pacer::controller {

int64_t Clock::WallUnixSeconds() const {
  return std::chrono::floor<std::chrono::seconds>(WallNow().time_since_epoch()).count();
}

FakeClock::FakeClock(int64_t wall_unix_seconds)
    : steady_(std::chrono::hours(1000)), wall_(std::chrono::seconds(wall_unix_seconds)) {}

Clock::SteadyTime FakeClock::Now() const {
  std::lock_guard<std::mutex> lock(mu_);
  return steady_;
}

Clock::WallTime FakeClock::WallNow() const {
  std::lock_guard<std::mutex> lock(mu_);
  return wall_;
}

void FakeClock::Advance(Duration d) {
  std::lock_guard<std::mutex> lock(mu_);
  steady_ += d;
  wall_ += std::chrono::duration_cast<WallTime::duration>(d);
}

void FakeClock::SetWallUnixSeconds(int64_t wall_unix_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  wall_ = WallTime(std::chrono::seconds(wall_unix_seconds));
}

}  // namespace pacer::controller
