#include "core/signals.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>

namespace pacer::worker {
namespace {

std::atomic<int> g_previous_handler_calls{0};
extern "C" void CountingHandler(int) { g_previous_handler_calls.fetch_add(1); }

// Installs CountingHandler for `signal_number` for the test's duration.
class ScopedCountingHandler {
 public:
  explicit ScopedCountingHandler(int signal_number) : signal_number_(signal_number) {
    struct sigaction action {};
    action.sa_handler = CountingHandler;
    sigemptyset(&action.sa_mask);
    sigaction(signal_number_, &action, &saved_);
  }
  ~ScopedCountingHandler() { sigaction(signal_number_, &saved_, nullptr); }

 private:
  int signal_number_;
  struct sigaction saved_ {};
};

void (*CurrentHandler(int signal_number))(int) {
  struct sigaction current {};
  sigaction(signal_number, nullptr, &current);
  return current.sa_handler;
}

TEST(StopSignalTest, StartsCleared) {
  StopSignal stop;
  EXPECT_FALSE(stop.requested());
  EXPECT_EQ(stop.signal_number(), 0);
}

TEST(StopSignalTest, SigtermRequestsAStop) {
  StopSignal stop;
  ASSERT_EQ(raise(SIGTERM), 0);  // raise() returns after the handler ran
  EXPECT_TRUE(stop.requested());
  EXPECT_EQ(stop.signal_number(), SIGTERM);
}

TEST(StopSignalTest, SigintRequestsAStopAndTheFirstSignalIsKept) {
  StopSignal stop;
  ASSERT_EQ(raise(SIGINT), 0);
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_TRUE(stop.requested());
  EXPECT_EQ(stop.signal_number(), SIGINT);
}

TEST(StopSignalTest, ANewInstanceStartsClearedAfterAnEarlierSignal) {
  {
    StopSignal first;
    ASSERT_EQ(raise(SIGTERM), 0);
    ASSERT_TRUE(first.requested());
  }
  StopSignal second;
  EXPECT_FALSE(second.requested());
}

TEST(StopSignalTest, RestoresThePreviousHandlersWhenDestroyed) {
  ScopedCountingHandler term(SIGTERM);
  ScopedCountingHandler interrupt(SIGINT);
  {
    StopSignal stop;
    EXPECT_NE(CurrentHandler(SIGTERM), &CountingHandler);
    ASSERT_EQ(raise(SIGTERM), 0);
    EXPECT_EQ(g_previous_handler_calls.load(), 0);  // ours, not the previous one
  }
  EXPECT_EQ(CurrentHandler(SIGTERM), &CountingHandler);
  EXPECT_EQ(CurrentHandler(SIGINT), &CountingHandler);
  ASSERT_EQ(raise(SIGTERM), 0);
  ASSERT_EQ(raise(SIGINT), 0);
  EXPECT_EQ(g_previous_handler_calls.load(), 2);
}

TEST(StopSignalTest, RestoresTheDefaultAction) {
  ASSERT_EQ(CurrentHandler(SIGTERM), SIG_DFL);
  { StopSignal stop; }
  EXPECT_EQ(CurrentHandler(SIGTERM), SIG_DFL);
  EXPECT_EQ(CurrentHandler(SIGINT), SIG_DFL);
}

TEST(StopSignalTest, ASigtermHeldBlockedDuringStartUpReachesTheHandler) {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigset_t before;
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, &before), 0);
  ASSERT_EQ(raise(SIGTERM), 0);  // pending: the default action would kill us
  {
    StopSignal stop;
    EXPECT_TRUE(stop.requested());
    EXPECT_EQ(stop.signal_number(), SIGTERM);
  }
  // Nothing is left pending (taken here, or unblocking below would kill the
  // test binary, should the handler not have run).
  const timespec no_wait{};
  EXPECT_EQ(sigtimedwait(&term, nullptr, &no_wait), -1);
  // Blocked again as before, so a late SIGTERM would stay pending.
  sigset_t after;
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &before, &after), 0);
  EXPECT_EQ(sigismember(&after, SIGTERM), 1);
}

// A second Ctrl-C, pressed after the same-stop window, kills the process
// at once (the user will not wait for the step).
TEST(StopSignalDeathTest, SecondSigintKillsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        StopSignal stop;
        raise(SIGINT);
        // The press comes after the window: the window is a time, so the
        // wait is on the clock.
        const auto pressed = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - pressed <
               std::chrono::milliseconds(kRepeatedStopWindowMs + 50)) {
          ::poll(nullptr, 0, 10);
        }
        raise(SIGINT);
        _exit(0);  // not reached
      },
      ::testing::KilledBySignal(SIGINT), "");
}

// One stop delivered twice within the window (a Ctrl-C to the process group
// reaches the rank, and its supervisor forwards a SIGTERM; `timeout`
// signals its child and then its group) is one stop: the rank used to die
// of the second one (exit 1, no checkpoint).
TEST(StopSignalDeathTest, AStopDeliveredTwiceWithinTheWindowIsOneStop) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        StopSignal stop;
        raise(SIGTERM);
        raise(SIGINT);
        raise(SIGINT);
        _exit(stop.requested() && stop.signal_number() == SIGTERM ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(StopSignalDeathTest, ASecondLiveInstanceAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        StopSignal first;
        StopSignal second;
      },
      "a second StopSignal");
}

}  // namespace
}  // namespace pacer::worker
