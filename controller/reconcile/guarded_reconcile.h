// GuardedReconcile: the work-queue loop's shield against a reconcile that
// throws. A reconcile reads objects written by users and other controllers
// (nlohmann's value() and get() throw on a field of the wrong type; std::stoll
// throws on text that is not a number); one bad object must cost its own key a
// retry with backoff, not the whole controller its process
// (controller-runtime recovers a panicking reconcile the same way).
//
// Thread-safety: a pure function; `reconcile` is called on the caller's
// thread.
#ifndef PACER_CONTROLLER_RECONCILE_GUARDED_RECONCILE_H_
#define PACER_CONTROLLER_RECONCILE_GUARDED_RECONCILE_H_

#include <functional>
#include <string>

#include "reconcile/reconciler.h"

namespace pacer::controller {

struct GuardedReconcileResult {
  // The reconcile's own result, or an Internal status (retryable by the work
  // queue: it requeues every code but InvalidArgument with backoff) naming
  // the exception when it threw.
  ReconcileResult result;
  bool threw = false;  // the reconcile threw; count it and log it with the object
};

// Runs reconcile(key), turning any exception into GuardedReconcileResult.
GuardedReconcileResult GuardedReconcile(
    const std::function<ReconcileResult(const std::string&)>& reconcile, const std::string& key);

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_RECONCILE_GUARDED_RECONCILE_H_
