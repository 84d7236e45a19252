// The width of the terminal the live progress line is drawn on, so that the
// line never wraps: a wrapped line cannot be redrawn in place with "\r" and
// leaves a stale copy on screen at every update.
//
// Queried with ioctl(TIOCGWINSZ) on construction and again after the window
// changes size (SIGWINCH, which this class watches while it lives). 80
// columns when the descriptor is not a terminal or reports no size.
//
// Units: columns (characters). Thread-safety: one live instance per process
// (it owns the SIGWINCH handler); Columns() from one thread.
#ifndef PACER_CONTROLLER_LOCAL_TERMINAL_WIDTH_H_
#define PACER_CONTROLLER_LOCAL_TERMINAL_WIDTH_H_

#include <csignal>

namespace pacer::controller {

inline constexpr int kFallbackTerminalColumns = 80;

// ioctl(TIOCGWINSZ) on `fd`; kFallbackTerminalColumns when it has no size.
int QueryTerminalColumns(int fd);

class TerminalWidth {
 public:
  explicit TerminalWidth(int fd);
  ~TerminalWidth();
  TerminalWidth(const TerminalWidth&) = delete;
  TerminalWidth& operator=(const TerminalWidth&) = delete;

  // The current width; re-queried only after a SIGWINCH.
  int Columns();

 private:
  int fd_;
  int columns_;
  struct sigaction previous_ {};
};

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_LOCAL_TERMINAL_WIDTH_H_
