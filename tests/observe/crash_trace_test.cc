// tests/crash_trace.cc, linked into every test binary: a crash prints the
// stack of the faulting thread, naming the function that faulted, and the
// process still dies of the signal it received (so ctest reports SEGFAULT
// and a death test sees its signal).
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>

namespace pacer::testing_support {

// Exported (test binaries link with ENABLE_EXPORTS), so the trace names it.
// noipa: no clone specialised for the null argument, which GCC may turn
// into a trap (SIGILL) at -O2.
[[gnu::noipa]] void FaultForTheCrashTrace(volatile int* p) {
  *p = 1;
  std::raise(SIGSEGV);  // where a null store does not fault
}

namespace {

TEST(CrashTraceDeathTest, AFaultPrintsTheStackAndDiesOfItsSignal) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer prints its own report for a fault";
#else
  // This binary's HTTP tests leave client threads behind: re-execute.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  volatile int* nowhere = nullptr;
  EXPECT_EXIT(FaultForTheCrashTrace(nowhere), ::testing::KilledBySignal(SIGSEGV),
              "fatal signal SEGV in a test(.|\n)*FaultForTheCrashTrace");
  EXPECT_EXIT(std::abort(), ::testing::KilledBySignal(SIGABRT), "fatal signal ABRT in a test");
#endif
}

}  // namespace
}  // namespace pacer::testing_support
