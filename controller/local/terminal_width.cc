#include "local/terminal_width.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>

namespace pacer::controller {
namespace {

std::atomic<bool> g_window_changed{false};

extern "C" void OnWindowChange(int /*signal*/) { g_window_changed.store(true); }

}  // namespace

int QueryTerminalColumns(int fd) {
  winsize size{};
  if (::isatty(fd) != 1 || ::ioctl(fd, TIOCGWINSZ, &size) != 0 || size.ws_col == 0) {
    return kFallbackTerminalColumns;
  }
  return size.ws_col;
}

TerminalWidth::TerminalWidth(int fd) : fd_(fd), columns_(QueryTerminalColumns(fd)) {
  struct sigaction action {};
  action.sa_handler = OnWindowChange;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  g_window_changed.store(false);
  sigaction(SIGWINCH, &action, &previous_);
}

TerminalWidth::~TerminalWidth() { sigaction(SIGWINCH, &previous_, nullptr); }

int TerminalWidth::Columns() {
  if (g_window_changed.exchange(false)) columns_ = QueryTerminalColumns(fd_);
  return columns_;
}

}  // namespace pacer::controller
