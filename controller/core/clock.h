// Clock: the controller's only source of time, injected so that tests control
// it. Now() is monotonic (steady) time for delays, backoff and rate limits;
// WallNow() is wall-clock (system) time for deadlines, timestamps and
// conditions. SystemClock reads the real clocks; FakeClock is set and advanced
// by tests.
//
// Units: std::chrono types (steady_clock / system_clock time points and
// durations); WallUnixSeconds() is whole Unix seconds, UTC.
// Thread-safety: both implementations are safe for concurrent use.
#ifndef PACER_CONTROLLER_CORE_CLOCK_H_
#define PACER_CONTROLLER_CORE_CLOCK_H_

#include <chrono>
#include <cstdint>
#include <mutex>

namespace pacer::controller {

class Clock {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  using WallTime = std::chrono::system_clock::time_point;
  using Duration = std::chrono::nanoseconds;

  virtual ~Clock() = default;
  virtual SteadyTime Now() const = 0;
  virtual WallTime WallNow() const = 0;

  // WallNow() as whole Unix seconds (rounded down).
  int64_t WallUnixSeconds() const;
};

class SystemClock final : public Clock {
 public:
  SteadyTime Now() const override { return std::chrono::steady_clock::now(); }
  WallTime WallNow() const override { return std::chrono::system_clock::now(); }

  // A process-wide instance. Inline, so that the HTTP clients (kube/,
  // promql/) take it without linking the controller's core library.
  static SystemClock& Default() {
    static SystemClock* const kClock = new SystemClock;
    return *kClock;
  }
};

// Starts at an arbitrary steady time and at wall time `wall_unix_seconds`;
// moves only when told. Advance() moves both clocks together.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t wall_unix_seconds = 1795305600);  // 2026-11-22T00:00:00Z

  SteadyTime Now() const override;
  WallTime WallNow() const override;

  void Advance(Duration d);
  // Sets the wall clock only (steady time never goes back).
  void SetWallUnixSeconds(int64_t wall_unix_seconds);

 private:
  mutable std::mutex mu_;
  SteadyTime steady_;
  WallTime wall_;
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_CORE_CLOCK_H_
