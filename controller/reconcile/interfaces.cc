#include "reconcile/interfaces.h"

#include <algorithm>

namespace pacer::controller {

const char* WorkerPhaseName(WorkerPhase phase) {
  switch (phase) {
    case WorkerPhase::kPending:
      return "Pending";
    case WorkerPhase::kRunning:
      return "Running";
    case WorkerPhase::kSucceeded:
      return "Succeeded";
    case WorkerPhase::kFailed:
      return "Failed";
  }
  return "Unknown";
}

int WorkerGroup::Count(WorkerPhase phase) const {
  return static_cast<int>(std::count_if(
      workers.begin(), workers.end(), [phase](const WorkerState& w) { return w.phase == phase; }));
}

}  // namespace pacer::controller
