// Linked into every test binary (tests/CMakeLists.txt): a fatal signal
// (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) prints the stack of the thread
// that received it to stderr, then the process dies of that same signal, so
// ctest still reports SEGFAULT (or the abort) and a death test still sees
// its signal. Without it a crash that happens once in many CI runs leaves
// only "[ RUN ]" in the log and nothing to start from. The frames are named
// where the symbol is exported (test binaries link with ENABLE_EXPORTS) and
// given as module+offset otherwise, for `addr2line -e <module>`.
//
// Not installed under AddressSanitizer or ThreadSanitizer, which print their
// own reports for these signals (scripts/test.sh sets ASan's handle_abort
// and handle_sigill, off by default, so an abort there prints a stack too).
//
// Thread-safety: installed once by a static initializer before main. The
// handler calls write, strlen, sigabbrev_np (a static string),
// backtrace_symbols_fd and raise, which are async-signal-safe, and
// backtrace, which glibc does not promise to be: its unsafe part is loading
// libgcc's unwinder, done once at install time. The handling thread
// blocks every signal while it prints, so no other handler interleaves
// with the trace; a fault in the handler itself kills the process at once.
#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

namespace {

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kMaxFrames = 64;
// Room to print the stack when the fault is a stack overflow (main thread).
constexpr size_t kAltStackBytes = 64 * 1024;
alignas(16) char alt_stack[kAltStackBytes];

void WriteStderr(const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

extern "C" void PrintStackAndDie(int sig) {
  WriteStderr("\n*** fatal signal ");
  const char* name = sigabbrev_np(sig);
  WriteStderr(name != nullptr ? name : "?");
  WriteStderr(" in a test; the stack of the thread that received it:\n");
  void* frames[kMaxFrames];
  const int n = backtrace(frames, kMaxFrames);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  // SA_RESETHAND has restored the default action: die of the same signal.
  raise(sig);
}

struct InstallCrashTrace {
  InstallCrashTrace() {
    void* warm[1];
    (void)backtrace(warm, 1);  // loads libgcc's unwinder now, not in the handler
    stack_t alt{};
    alt.ss_sp = alt_stack;
    alt.ss_size = sizeof(alt_stack);
    (void)sigaltstack(&alt, nullptr);
    struct sigaction action {};
    action.sa_handler = PrintStackAndDie;
    action.sa_flags = SA_RESETHAND | SA_ONSTACK;
    sigfillset(&action.sa_mask);
    for (const int sig : kFatalSignals) (void)sigaction(sig, &action, nullptr);
  }
};
const InstallCrashTrace install_crash_trace;

#endif

}  // namespace
